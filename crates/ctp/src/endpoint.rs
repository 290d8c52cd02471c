//! The endpoint: one UDP socket, its driver task, and the connections it carries.

use crate::connection::Connection;
use crate::driver::Driver;
use crate::error::ConnectError;
use crate::shared::{register, Shared, State};
use ctp_proto::{
    ConnectionState, EndpointConfig, EndpointStats, Identity, MicroId, MicroSet, Params,
    PeerPolicy, Profile,
};
use std::future::{poll_fn, Future};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

/// Socket buffer size asked for by default (SO_RCVBUF and SO_SNDBUF), 8 MiB.
pub const DEFAULT_SOCKET_BUFFER: usize = 8 << 20;

/// How an endpoint is set up.
#[derive(Clone, Debug)]
pub struct EndpointOptions {
    /// Accept incoming connections (a server); `false` for a pure client.
    pub accept: bool,
    /// Local limits and defaults; as a responder, requests are narrowed to these.
    pub params: Params,
    /// Give up a connection set-up after this long without an answer.
    pub handshake_timeout: Duration,
    /// SO_RCVBUF and SO_SNDBUF to ask for, bytes (the OS may grant less; see the log).
    pub socket_buffer: usize,
    /// Most connections at once on this endpoint.
    pub max_connections: usize,
    /// Most connections at once with one peer address (any port).
    pub max_connections_per_address: usize,
    /// Wire format: ctp's own, or UDT4 for the `udt` profiles (see `Profile::wire`).
    pub wire: ctp_proto::udt::WireFormat,
    /// Local IP addresses a socket bound to the unspecified address sends from (a host
    /// with several interfaces): connections this endpoint opens start from the first
    /// and, when their path stops answering, move to the next; the peer follows. Empty:
    /// the socket's own choice.
    pub local_ips: Vec<IpAddr>,
    /// This endpoint's static key pair on secure channels (`None`: one drawn at start,
    /// which encrypts but which no peer can pin).
    pub identity: Option<Identity>,
    /// Judges each secure peer's proven key: a pinned key, first-use trust, an allow list.
    /// Accepts any key by default.
    pub peer_policy: PeerPolicy,
    /// Accept incoming connections without encryption (`--insecure`). Off by default: a
    /// server refuses a peer that asks for a plaintext connection, and tells it why.
    pub accept_insecure: bool,
    /// Half-open connections (secure channels whose initiator has not authenticated yet)
    /// from which on new initiators must solve a client puzzle, harder as they pile up
    /// (see `ctp_proto::handshake::puzzle`). 0: always; `usize::MAX`: never.
    pub puzzle_low_watermark: usize,
    /// The hardest puzzle asked, in bits (what a legitimate initiator pays at worst:
    /// `2^bits` hashes).
    pub puzzle_max_difficulty: u8,
    /// Most half-open connections at once: beyond, set-ups are dropped until some
    /// authenticate or time out, so a handshake flood cannot exhaust memory.
    pub max_half_open: usize,
}

impl Default for EndpointOptions {
    fn default() -> Self {
        EndpointOptions {
            accept: false,
            params: Params::default(),
            handshake_timeout: Duration::from_secs(10),
            socket_buffer: DEFAULT_SOCKET_BUFFER,
            max_connections: 4096,
            max_connections_per_address: 256,
            wire: ctp_proto::udt::WireFormat::Ctp,
            local_ips: Vec::new(),
            identity: None,
            peer_policy: PeerPolicy::any(),
            accept_insecure: false,
            puzzle_low_watermark: 64,
            puzzle_max_difficulty: ctp_proto::handshake::puzzle::DEFAULT_CAP,
            max_half_open: 1024,
        }
    }
}

impl EndpointOptions {
    /// The defaults for a server: connections are accepted ([`Endpoint::accept`]).
    pub fn server() -> Self {
        EndpointOptions {
            accept: true,
            ..EndpointOptions::default()
        }
    }
}

/// A UDP socket carrying ctp connections, driven by a background tokio task.
///
/// Clones share the endpoint. The driver stops when [`Endpoint::close`] is called or when
/// every `Endpoint` and [`Connection`] handle is gone.
#[derive(Clone)]
pub struct Endpoint {
    inner: Arc<EndpointInner>,
}

/// One clone family of an endpoint handle; its drop releases the endpoint.
struct EndpointInner {
    shared: Arc<Shared>,
}

impl Drop for EndpointInner {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.user_refs = st.user_refs.saturating_sub(1);
        drop(st);
        self.shared.wake_driver();
    }
}

fn random32() -> io::Result<[u8; 32]> {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b)
        .map_err(|e| io::Error::other(format!("no randomness for the endpoint: {e}")))?;
    Ok(b)
}

impl Endpoint {
    /// Binds a UDP socket to `addr` (port 0 picks a free one) and starts the driver.
    /// Must be called within a tokio runtime.
    pub async fn bind(addr: SocketAddr, opts: EndpointOptions) -> io::Result<Endpoint> {
        opts.params.check().map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("invalid endpoint parameters: {e}"),
            )
        })?;
        if !opts.local_ips.is_empty() && !addr.ip().is_unspecified() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "local_ips needs a socket bound to the unspecified address (0.0.0.0 or \
                     [::]), not {addr}: a socket bound to one address cannot send from others"
                ),
            ));
        }
        let std_socket = std::net::UdpSocket::bind(addr)?;
        std_socket.set_nonblocking(true)?;
        let socket = tokio::net::UdpSocket::from_std(std_socket)?;
        let udp = quinn_udp::UdpSocketState::new((&socket).into())?;
        crate::icmp::enable(&socket, &udp);
        set_socket_buffers(&socket, opts.socket_buffer);
        let local_addr = socket.local_addr()?;

        let mut cfg = EndpointConfig::new(random32()?, random32()?);
        cfg.accept = opts.accept;
        cfg.params = opts.params;
        cfg.handshake_timeout = opts.handshake_timeout;
        cfg.max_connections = opts.max_connections;
        cfg.max_connections_per_address = opts.max_connections_per_address;
        cfg.puzzle_low_watermark = opts.puzzle_low_watermark;
        cfg.puzzle_max_difficulty = opts.puzzle_max_difficulty;
        cfg.max_half_open = opts.max_half_open;
        cfg.wire = opts.wire;
        cfg.identity = opts.identity.clone();
        cfg.peer_policy = opts.peer_policy.clone();
        cfg.required = if opts.accept_insecure {
            MicroSet::default()
        } else {
            MicroSet::of(&[MicroId::Secure])
        };
        if opts.accept_insecure {
            cfg.supported = cfg.supported.without(MicroId::Secure);
        }
        cfg.local_addrs = opts
            .local_ips
            .iter()
            .map(|&ip| SocketAddr::new(ip, local_addr.port()))
            .collect();
        let state = State::new(ctp_proto::Endpoint::new(cfg), opts.accept);
        let shared = Arc::new(Shared::new(state, local_addr));
        tracing::debug!(%local_addr, gso = udp.max_gso_segments(), gro = udp.gro_segments(), "ctp endpoint bound");
        let driver = Driver::new(shared.clone(), socket, udp);
        tokio::spawn(driver.run());
        Ok(Endpoint {
            inner: Arc::new(EndpointInner { shared }),
        })
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.inner.shared.local_addr)
    }

    /// The endpoint's clock.
    pub(crate) fn now(&self) -> ctp_proto::Instant {
        self.inner.shared.now()
    }

    /// The runtime's deadline for the endpoint's time `t`.
    pub(crate) fn deadline(&self, t: ctp_proto::Instant) -> Option<tokio::time::Instant> {
        self.inner.shared.deadline(t)
    }

    /// Connects to `addr` with `profile`; resolves once the connection is established.
    ///
    /// The attempt starts at the call (the profile is checked and the first handshake
    /// packet queued right away), so the returned future borrows nothing and may be
    /// spawned. Dropping it abandons the attempt.
    pub fn connect(
        &self,
        addr: SocketAddr,
        profile: &Profile,
    ) -> impl Future<Output = Result<Connection, ConnectError>> + Send + 'static {
        // As TCP sizes its segments: no datagram larger than the route's MTU carries.
        let profile = crate::route_mtu::fit_to_route(profile, addr);
        let started = self.start_connection(|ep, now| ep.connect(now, addr, &profile));
        Self::established(self.inner.shared.clone(), started)
    }

    /// Connects over several routes, each from a local IP address of this machine to an
    /// address of the peer (`routes[0]` is the handshake's); resolves once the connection is
    /// established. With the `coded` profile the connection runs over every route at once
    /// (CTCP's multipath: each route has its own round trip, loss estimate and tokens, and
    /// a route that stops answering is left until it answers again); other profiles use the
    /// first route and move to the next route's local address when it stops answering.
    /// Packets leave from the routes' local addresses, so the socket must be bound to the
    /// unspecified address (0.0.0.0 or [::]) unless every route names the bound one.
    pub fn connect_over(
        &self,
        routes: &[(IpAddr, SocketAddr)],
        profile: &Profile,
    ) -> impl Future<Output = Result<Connection, ConnectError>> + Send + 'static {
        let bound = self.inner.shared.local_addr;
        let checked = match routes.first() {
            None => Err(ConnectError::Route(
                "a connection needs at least one route".into(),
            )),
            Some(&(_, remote)) => match routes
                .iter()
                .find(|(ip, _)| !bound.ip().is_unspecified() && *ip != bound.ip())
            {
                Some((ip, _)) => Err(ConnectError::Route(format!(
                    "cannot send from {ip}: the socket is bound to {bound}; bind it to the \
                     unspecified address (0.0.0.0 or [::]) to send from several addresses"
                ))),
                None => Ok(crate::route_mtu::fit_to_route(profile, remote)),
            },
        };
        let local = |ip: IpAddr| Some(SocketAddr::new(ip, bound.port()));
        let started = checked.and_then(|profile| {
            let first = (local(routes[0].0), routes[0].1);
            let further: Vec<_> = routes[1..].iter().map(|&(ip, r)| (local(ip), r)).collect();
            self.start_connection(|ep, now| ep.connect_over(now, first, &further, &profile))
        });
        Self::established(self.inner.shared.clone(), started)
    }

    /// Sets up a UDT rendezvous connection with `addr` (a `udt` profile; the peer does the
    /// same toward this endpoint's address); resolves once it is established.
    pub fn connect_rendezvous(
        &self,
        addr: SocketAddr,
        profile: &Profile,
    ) -> impl Future<Output = Result<Connection, ConnectError>> + Send + 'static {
        let started = self.start_connection(|ep, now| ep.connect_rendezvous(now, addr, profile));
        Self::established(self.inner.shared.clone(), started)
    }

    /// Starts a connection with `start` (the first handshake packet is queued at once).
    fn start_connection(
        &self,
        start: impl FnOnce(
            &mut ctp_proto::Endpoint,
            ctp_proto::Instant,
        ) -> Result<ctp_proto::ConnectionHandle, ctp_proto::ProfileError>,
    ) -> Result<Connection, ConnectError> {
        let shared = &self.inner.shared;
        let started = (|| {
            let mut st = shared.lock();
            if st.closed.is_some() {
                return Err(ConnectError::EndpointClosed);
            }
            let now = shared.now();
            let h = start(&mut st.ep, now)?;
            st.fresh_slot(h, Default::default());
            Ok(Connection::new(shared.clone(), &mut st, h))
        })();
        shared.wake_driver();
        started
    }

    /// Resolves once the started connection is established.
    async fn established(
        shared: Arc<Shared>,
        started: Result<Connection, ConnectError>,
    ) -> Result<Connection, ConnectError> {
        let conn = started?;
        let h = conn.handle();
        // If this future is dropped, `conn` goes with it and abandons the attempt.
        poll_fn(|cx| {
            let mut st = shared.lock();
            if st.closed.is_some() {
                return Poll::Ready(Err(ConnectError::EndpointClosed));
            }
            match st.ep.connection(h).map(|c| c.state().clone()) {
                Some(ConnectionState::Closed(r)) => Poll::Ready(Err(ConnectError::Handshake(r))),
                None => Poll::Ready(Err(ConnectError::EndpointClosed)),
                Some(ConnectionState::Initiating | ConnectionState::Echoing) => {
                    if let Some(s) = st.slot(h) {
                        register(&mut s.wakers, cx.waker());
                    }
                    Poll::Pending
                }
                Some(_) => Poll::Ready(Ok(())),
            }
        })
        .await?;
        Ok(conn)
    }

    /// Waits for the next incoming connection. `None` once the endpoint is closed, or at
    /// once (with a warning in the log) if it was bound without accepting connections:
    /// bind a server with [`EndpointOptions::server`].
    pub async fn accept(&self) -> Option<Connection> {
        let shared = &self.inner.shared;
        poll_fn(|cx| {
            let mut st = shared.lock();
            if !st.accepting {
                tracing::warn!(
                    "Endpoint::accept on an endpoint that does not accept connections: bind \
                     it with EndpointOptions::server() (or `accept: true`)"
                );
                return Poll::Ready(None);
            }
            if st.closed.is_some() {
                return Poll::Ready(None);
            }
            match st.accept_queue.pop_front() {
                Some(h) => {
                    st.slot_entry(h).queued = false;
                    Poll::Ready(Some(Connection::new(shared.clone(), &mut st, h)))
                }
                None => {
                    register(&mut st.accept_wakers, cx.waker());
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// Endpoint-level counters (datagrams received, dropped as malformed, accepted, …).
    pub fn stats(&self) -> EndpointStats {
        self.inner.shared.lock().ep.stats()
    }

    /// Closes the endpoint: every connection is aborted (peers are told), the driver stops,
    /// and pending and later operations fail.
    pub fn close(&self) {
        self.close_with("endpoint closed");
    }

    /// Resolves once the endpoint's driver stopped: after [`Endpoint::close`], when the
    /// peers were sent their aborts.
    pub async fn closed(&self) {
        self.inner.shared.stopped().await
    }

    /// [`Endpoint::close`], telling every peer `reason` (as the reason of an abort).
    pub fn close_with(&self, reason: &str) {
        let shared = &self.inner.shared;
        let mut wakers = Vec::new();
        {
            let mut st = shared.lock();
            if st.closed.is_none() {
                st.closed = Some(ctp_proto::CloseReason::LocalAbort(reason.into()));
            }
            st.take_all_wakers(&mut wakers);
        }
        shared.wake_driver();
        wakers.into_iter().for_each(|w| w.wake());
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("local_addr", &self.inner.shared.local_addr)
            .finish()
    }
}

/// Asks for `size`-byte socket buffers (receive and send); best effort, capped by
/// `net.core.rmem_max` / `wmem_max`, the result is logged. Endpoints call it with
/// [`EndpointOptions::socket_buffer`]; other UDP sockets next to ctp (a relay) can too.
pub fn set_socket_buffers(socket: &tokio::net::UdpSocket, size: usize) {
    let s = socket2::SockRef::from(socket);
    if let Err(e) = s.set_recv_buffer_size(size) {
        tracing::warn!("could not set SO_RCVBUF to {size}: {e}");
    }
    if let Err(e) = s.set_send_buffer_size(size) {
        tracing::warn!("could not set SO_SNDBUF to {size}: {e}");
    }
    let rcv = s.recv_buffer_size().unwrap_or(0);
    let snd = s.send_buffer_size().unwrap_or(0);
    if rcv < size || snd < size {
        tracing::info!(
            asked = size,
            rcvbuf = rcv,
            sndbuf = snd,
            "socket buffers smaller than asked (raise net.core.rmem_max / wmem_max)"
        );
    } else {
        tracing::debug!(rcvbuf = rcv, sndbuf = snd, "socket buffers");
    }
}
