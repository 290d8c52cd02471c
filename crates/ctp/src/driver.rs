//! The driver task: owns the socket, feeds the sans-IO endpoint with datagrams and time,
//! sends what it produces in batches, and wakes the tasks waiting on it.
//!
//! One loop per endpoint (quinn's model): receive a batch (recvmmsg, GRO-coalesced buffers
//! split by `stride`), fire due timers, build and send datagrams (consecutive equal-sized
//! datagrams to one destination go out as one GSO send), hand events to the waiting tasks,
//! then wait for the socket, the next deadline or an application operation. Buffers are
//! allocated once; nothing is allocated per packet.

use crate::mapped::normalize;
use crate::shared::{Shared, Slot, State};
use ctp_proto::{CloseReason, ConnectionHandle, EndpointEvent};
use quinn_udp::{RecvMeta, Transmit, UdpSocketState, BATCH_SIZE};
use std::future::poll_fn;
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Waker;
use std::time::Duration;
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// Receive system calls per round before timers and sends get their turn.
const RECV_CALLS_PER_ROUND: usize = 8;
/// Bytes of datagrams built per hold of the state lock.
const SEND_BATCH_BYTES: usize = 256 * 1024;
/// Datagrams built per hold of the state lock.
const SEND_BATCH_DATAGRAMS: usize = 512;
/// Bytes sent per round before receiving again (acknowledgements must not starve).
const SEND_BYTES_PER_ROUND: usize = 2 << 20;
/// Largest payload of one GSO send (the UDP length field bounds the whole train).
const MAX_GSO_BYTES: usize = 64_000;
/// Deadlines closer than this are beyond tokio's timer (it ticks in milliseconds): the
/// driver waits for them on its precise timer (Linux) or yields to the scheduler and checks
/// again (elsewhere).
const NEAR_DEADLINE: Duration = Duration::from_millis(1);
/// Deadlines closer than this are within the precise timer's slack (50 µs by default on
/// Linux): the driver yields and checks again instead of sleeping through them. Only a
/// packet-by-packet pacer (UDT's, at hundreds of Mb/s) asks for such gaps; trains leave
/// 250 µs apart and sleep.
const SPIN_DEADLINE: Duration = Duration::from_micros(50);
/// Rounds in a row the *same* deadline may stay overdue after firing it before the driver
/// stops yielding and sleeps a millisecond instead (defends against a deadline that firing
/// does not clear; a deadline that moves on is progress, not this).
const MAX_OVERDUE_ROUNDS: u32 = 16;
/// Receive or send errors in a row (other than "would block") after which the socket is
/// considered broken and the driver stops.
const MAX_SOCKET_ERRORS: u32 = 1000;
/// Datagrams sent at most while shutting down (CLOSE frames to the peers).
const SHUTDOWN_DATAGRAMS: usize = 8192;
/// Entries of the socket's error queue read per round (the rest wait for the next).
const ERRORS_PER_ROUND: usize = 64;

/// Datagrams to one destination sent with one system call.
#[derive(Clone, Copy, Debug)]
struct Group {
    dest: SocketAddr,
    /// The local address to send from (`None`: the socket's choice).
    src: Option<SocketAddr>,
    start: usize,
    end: usize,
    /// Size of every datagram but possibly the last.
    seg: usize,
    count: usize,
    /// A shorter datagram ended the train; nothing more may join.
    sealed: bool,
}

/// What a send round ended with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tx {
    /// Nothing more to send.
    Idle,
    /// The per-round budget ran out; more may be waiting.
    Budget,
    /// The socket buffer is full; wait until it is writable.
    Blocked,
}

/// The task behind an endpoint.
pub(crate) struct Driver {
    shared: Arc<Shared>,
    socket: UdpSocket,
    udp: UdpSocketState,
    ipv6: bool,
    recv_buf: Vec<u8>,
    recv_chunk: usize,
    metas: [RecvMeta; BATCH_SIZE],
    scratch: Vec<u8>,
    send_buf: Vec<u8>,
    groups: Vec<Group>,
    next_group: usize,
    wakers: Vec<Waker>,
    socket_errors: u32,
    /// The socket reported an error (an ICMP message queued): read the queue this round.
    errors_pending: bool,
    /// The sleep until the next deadline a millisecond or more away.
    timer: Timer,
    /// The time read in this round, until a system call makes it stale (see `now`).
    round_now: Option<ctp_proto::Instant>,
    /// Sub-millisecond sleeps (pacing); `None` where unavailable: the driver yields then.
    #[cfg(target_os = "linux")]
    precise: Option<crate::precise_timer::PreciseTimer>,
}

/// What the driver waits for besides the socket and the application.
enum Wake {
    /// Nothing: no deadline.
    Never,
    /// A deadline at least a millisecond away, on tokio's timer.
    Coarse(tokio::time::Instant),
    /// A deadline closer than that, on the precise timer.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Precise(std::time::Instant),
}

impl Driver {
    pub(crate) fn new(shared: Arc<Shared>, socket: UdpSocket, udp: UdpSocketState) -> Self {
        // A GRO buffer can hold up to `gro_segments` datagrams; one plain datagram up to 64 KiB.
        let recv_chunk = (1500 * udp.gro_segments()).max(65_536);
        let ipv6 = shared.local_addr.is_ipv6();
        Driver {
            shared,
            socket,
            udp,
            ipv6,
            recv_buf: vec![0; recv_chunk * BATCH_SIZE],
            recv_chunk,
            metas: [RecvMeta::default(); BATCH_SIZE],
            scratch: Vec::with_capacity(65_536),
            send_buf: Vec::with_capacity(SEND_BATCH_BYTES + 65_536),
            groups: Vec::with_capacity(SEND_BATCH_DATAGRAMS),
            next_group: 0,
            wakers: Vec::new(),
            socket_errors: 0,
            errors_pending: false,
            timer: Timer::new(),
            round_now: None,
            #[cfg(target_os = "linux")]
            precise: crate::precise_timer::PreciseTimer::new()
                .inspect_err(|e| tracing::debug!("no precise timer ({e}): pacing yields"))
                .ok(),
        }
    }

    /// Runs until the endpoint is closed or every user handle is gone.
    pub(crate) async fn run(mut self) {
        let reason = self.drive().await;
        tracing::debug!(local_addr = %self.shared.local_addr, %reason, "ctp endpoint driver stopping");
        self.shutdown(reason);
        self.shared.mark_stopped();
    }

    async fn drive(&mut self) -> CloseReason {
        let mut overdue = (ctp_proto::Instant::ZERO, 0u32);
        loop {
            // Operations from here on ask for another round; earlier ones are served now.
            self.shared.begin_driver_round();
            self.round_now = None;
            if std::mem::take(&mut self.errors_pending) {
                self.read_errors();
            }
            let rx_more = match self.receive() {
                Ok(more) => more,
                Err(e) => return CloseReason::LocalAbort(format!("socket error: {e}")),
            };
            if let Some(reason) = self.service() {
                return reason;
            }
            let tx = self.transmit();
            if self.socket_errors > MAX_SOCKET_ERRORS {
                return CloseReason::LocalAbort(
                    "socket error: too many send/receive failures in a row".into(),
                );
            }
            if rx_more || tx == Tx::Budget {
                tokio::task::yield_now().await;
                continue;
            }
            let now = self.now();
            let next = self.shared.lock().ep.poll_timeout();
            let wake = match next {
                None => Wake::Never,
                Some(d) if d <= now => {
                    overdue = if overdue.0 == d {
                        (d, overdue.1 + 1)
                    } else {
                        (d, 1)
                    };
                    if overdue.1 <= MAX_OVERDUE_ROUNDS && tx != Tx::Blocked {
                        tokio::task::yield_now().await;
                        continue;
                    }
                    Wake::Coarse(tokio::time::Instant::now() + Duration::from_millis(1))
                }
                Some(d) => match self.shared.deadline(d) {
                    None => Wake::Never,
                    Some(at) if d - now >= NEAR_DEADLINE => Wake::Coarse(at),
                    Some(at) if d - now >= SPIN_DEADLINE && self.has_precise_timer() => {
                        Wake::Precise(at.into_std())
                    }
                    // Waiting for the socket to drain anyway: no spinning meanwhile.
                    Some(at) if tx == Tx::Blocked => Wake::Coarse(at),
                    Some(_) => {
                        tokio::task::yield_now().await;
                        continue;
                    }
                },
            };
            if let Wake::Coarse(t) = wake {
                self.timer.arm(t);
            }
            #[cfg(target_os = "linux")]
            let precise = &self.precise;
            let (shared, socket, timer) = (&self.shared, &self.socket, &mut self.timer);
            let sleep = async {
                match wake {
                    Wake::Never => std::future::pending().await,
                    Wake::Coarse(_) => timer.fired().await,
                    #[cfg(target_os = "linux")]
                    Wake::Precise(t) => precise_sleep(precise, t).await,
                    #[cfg(not(target_os = "linux"))]
                    Wake::Precise(_) => {}
                }
            };
            tokio::select! {
                biased;
                _ = poll_fn(|cx| shared.poll_driver_wanted(cx)) => {}
                r = socket.readable() => {
                    if let Err(e) = r {
                        return CloseReason::LocalAbort(format!("socket error: {e}"));
                    }
                }
                r = socket.writable(), if tx == Tx::Blocked => {
                    if let Err(e) = r {
                        return CloseReason::LocalAbort(format!("socket error: {e}"));
                    }
                }
                // An ICMP error queued (the socket is in error, neither readable nor
                // necessarily writable).
                r = socket.ready(Interest::ERROR) => {
                    if let Err(e) = r {
                        return CloseReason::LocalAbort(format!("socket error: {e}"));
                    }
                    self.errors_pending = true;
                }
                _ = sleep => {}
            }
        }
    }

    /// The current time, read once per stretch of a round without system calls (reading
    /// the clock costs about as much as handling a small packet's frames on a VM): a round
    /// that only fires timers and builds packets shares one reading; receiving and sending
    /// make it stale.
    fn now(&mut self) -> ctp_proto::Instant {
        *self.round_now.get_or_insert_with(|| self.shared.now())
    }

    fn has_precise_timer(&self) -> bool {
        #[cfg(target_os = "linux")]
        return self.precise.is_some();
        #[cfg(not(target_os = "linux"))]
        false
    }

    /// Receives what the socket holds (a bounded number of batches) and feeds it to the
    /// endpoint. Returns true when the budget ran out before the socket was drained.
    fn receive(&mut self) -> io::Result<bool> {
        for _ in 0..RECV_CALLS_PER_ROUND {
            let mut chunks = self
                .recv_buf
                .chunks_mut(self.recv_chunk)
                .map(IoSliceMut::new);
            let mut iovs: [IoSliceMut<'_>; BATCH_SIZE] =
                std::array::from_fn(|_| chunks.next().expect("recv_buf holds BATCH_SIZE chunks"));
            let (socket, udp, metas) = (&self.socket, &self.udp, &mut self.metas);
            // A batch short of BATCH_SIZE drained the socket: it is reported to tokio as
            // "would block" (with the datagrams kept here), which clears the readiness
            // without a second, empty receive call (see `drained`).
            let mut short = None;
            let res = socket.try_io(Interest::READABLE, || {
                let n = udp.recv(socket.into(), &mut iovs, metas)?;
                if drained(&metas[..n]) {
                    short = Some(n);
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                Ok(n)
            });
            let (res, more) = match (res, short) {
                (Err(_), Some(n)) => (Ok(n), false),
                (res, _) => (res, true),
            };
            match res {
                Ok(n) => {
                    self.socket_errors = 0;
                    let now = self.shared.now();
                    self.round_now = Some(now);
                    let mut st = self.shared.lock();
                    for (meta, iov) in self.metas[..n].iter().zip(iovs.iter_mut()) {
                        let from = normalize(meta.addr);
                        let len = meta.len.min(iov.len());
                        let data = &mut iov[..len];
                        if data.is_empty() {
                            st.ep.handle_datagram(now, from, data);
                            continue;
                        }
                        let stride = if meta.stride == 0 {
                            data.len()
                        } else {
                            meta.stride
                        };
                        for d in data.chunks_mut(stride) {
                            st.ep.handle_datagram(now, from, d);
                        }
                    }
                    process_events(&mut st, &mut self.wakers);
                    drop(st);
                    self.wakers.drain(..).for_each(Waker::wake);
                    if !more {
                        return Ok(false);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // A pending ICMP error fails one receive: read the queue, carry on.
                    if self.read_errors() {
                        continue;
                    }
                    self.socket_errors += 1;
                    tracing::debug!("receive error: {e}");
                    if self.socket_errors > MAX_SOCKET_ERRORS {
                        return Err(e);
                    }
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Reads the socket's error queue (at most [`ERRORS_PER_ROUND`] entries) and tells the
    /// endpoint of every destination reported unreachable, which ends the connection
    /// attempts to it ([`ctp_proto::Endpoint::on_unreachable`]). Returns whether it read
    /// anything: a receive or send that failed was failed by one of these, not by the socket.
    fn read_errors(&mut self) -> bool {
        // The error readiness is cleared first, then the queue read to its end: an error
        // queued meanwhile is read now or raises the readiness again, never lost.
        let _ = self.socket.try_io(Interest::ERROR, || {
            Err::<(), _>(io::ErrorKind::WouldBlock.into())
        });
        let mut reports = Vec::new();
        let mut read = false;
        for i in 0..=ERRORS_PER_ROUND {
            if i == ERRORS_PER_ROUND {
                // More than a round's share: the next round reads on.
                self.errors_pending = true;
                break;
            }
            match crate::icmp::recv(&self.socket) {
                Ok(Some(r)) => {
                    read = true;
                    tracing::debug!(dest = %r.dest, kind = ?r.kind, "socket error queue");
                    if let Some(kind) = r.kind {
                        reports.push((r.dest, kind));
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!("reading the socket's error queue: {e}");
                    break;
                }
            }
        }
        if reports.is_empty() {
            return read;
        }
        let now = self.shared.now();
        let mut st = self.shared.lock();
        for (dest, kind) in reports {
            st.ep.on_unreachable(now, dest, kind);
        }
        process_events(&mut st, &mut self.wakers);
        drop(st);
        self.wakers.drain(..).for_each(Waker::wake);
        read
    }

    /// Checks whether to stop, fires due timers and hands out events.
    fn service(&mut self) -> Option<CloseReason> {
        let now = self.now();
        let mut st = self.shared.lock();
        if let Some(r) = &st.closed {
            return Some(r.clone());
        }
        if st.user_refs == 0 {
            return Some(CloseReason::LocalAbort("endpoint dropped".into()));
        }
        st.ep.handle_timeout(now);
        process_events(&mut st, &mut self.wakers);
        drop(st);
        self.wakers.drain(..).for_each(Waker::wake);
        None
    }

    /// Sends what is pending, then builds and sends more until nothing is left, the socket
    /// is full, or the round's budget is spent.
    fn transmit(&mut self) -> Tx {
        let mut sent = 0;
        loop {
            while self.next_group < self.groups.len() {
                let g = self.groups[self.next_group];
                let t = Transmit {
                    destination: self.denormalize(g.dest),
                    ecn: None,
                    contents: &self.send_buf[g.start..g.end],
                    segment_size: (g.count > 1).then_some(g.seg),
                    src_ip: g.src.map(|a| a.ip()),
                };
                let (socket, udp) = (&self.socket, &self.udp);
                match socket.try_io(Interest::WRITABLE, || udp.try_send(socket.into(), &t)) {
                    Ok(()) => {
                        self.socket_errors = 0;
                        self.round_now = None;
                        sent += g.end - g.start;
                        self.next_group += 1;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Tx::Blocked,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        // A pending ICMP error fails one send before it leaves: read the
                        // queue, then send the same datagrams again.
                        if self.read_errors() {
                            continue;
                        }
                        // UDP is lossy anyway: the protocol recovers what this drops.
                        self.socket_errors += 1;
                        tracing::debug!(dest = %g.dest, bytes = g.end - g.start, segments = g.count, "send error: {e}");
                        self.next_group += 1;
                    }
                }
            }
            if sent >= SEND_BYTES_PER_ROUND {
                return Tx::Budget;
            }
            if !self.build_batch() {
                return Tx::Idle;
            }
        }
    }

    /// Polls the endpoint for datagrams into the send buffer, grouping trains of equal-sized
    /// datagrams to one destination for GSO. Returns false when there was nothing to send.
    fn build_batch(&mut self) -> bool {
        self.send_buf.clear();
        self.groups.clear();
        self.next_group = 0;
        let max_segments = self.udp.max_gso_segments().max(1);
        let now = self.now();
        let mut st = self.shared.lock();
        while self.send_buf.len() < SEND_BATCH_BYTES && self.groups.len() < SEND_BATCH_DATAGRAMS {
            // Built in place, after the datagrams already batched.
            let start = self.send_buf.len();
            let Some(t) = st.ep.poll_transmit_append(now, &mut self.send_buf) else {
                break;
            };
            let size = t.size;
            match self.groups.last_mut() {
                Some(g)
                    if max_segments > 1
                        && !g.sealed
                        && g.dest == t.destination
                        && g.src == t.src
                        && size > 0
                        && size <= g.seg
                        && g.count < max_segments
                        && g.end - g.start + size <= MAX_GSO_BYTES =>
                {
                    g.end += size;
                    g.count += 1;
                    g.sealed = size < g.seg;
                }
                _ => self.groups.push(Group {
                    dest: t.destination,
                    src: t.src,
                    start,
                    end: start + size,
                    seg: size,
                    count: 1,
                    sealed: false,
                }),
            }
        }
        process_events(&mut st, &mut self.wakers);
        drop(st);
        self.wakers.drain(..).for_each(Waker::wake);
        !self.groups.is_empty()
    }

    /// An IPv4 destination as the socket's family wants it.
    fn denormalize(&self, a: SocketAddr) -> SocketAddr {
        match a {
            SocketAddr::V4(v4) if self.ipv6 => {
                SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port())
            }
            a => a,
        }
    }

    /// Aborts every connection (telling the peers), sends what that produced, marks the
    /// endpoint closed and wakes every waiting task.
    fn shutdown(&mut self, reason: CloseReason) {
        let mut st = self.shared.lock();
        let now = self.shared.now();
        if st.closed.is_none() {
            st.closed = Some(reason.clone());
        }
        process_events(&mut st, &mut self.wakers);
        let text = match &reason {
            CloseReason::LocalAbort(t) => t.clone(),
            r => r.to_string(),
        };
        for i in 0..st.slots.len() {
            if st.slots[i].is_some() {
                if let Some(c) = st.ep.connection_mut(ConnectionHandle(i)) {
                    c.abort(now, &text);
                }
            }
        }
        for _ in 0..SHUTDOWN_DATAGRAMS {
            let Some(t) = st.ep.poll_transmit(now, &mut self.scratch) else {
                break;
            };
            let tx = Transmit {
                destination: self.denormalize(t.destination),
                ecn: None,
                contents: &self.scratch[..t.size.min(self.scratch.len())],
                segment_size: None,
                src_ip: t.src.map(|a| a.ip()),
            };
            if let Err(e) = self.udp.try_send((&self.socket).into(), &tx) {
                if e.kind() == io::ErrorKind::WouldBlock {
                    break;
                }
            }
        }
        st.take_all_wakers(&mut self.wakers);
        drop(st);
        self.wakers.drain(..).for_each(Waker::wake);
    }
}

/// Datagrams (GRO segments counted) a receive call may return and still be taken to have
/// emptied a lightly used socket.
const DRAINED_DATAGRAMS: usize = 2;

/// Whether a receive call that returned `metas` emptied the socket's queue, so that the
/// empty call that would confirm it can be skipped. On Linux, `recvmmsg` on a non-blocking
/// socket stops short of the batch only when the queue ran dry (or on an error, which the
/// kernel keeps for the next call and which raised its own readiness event); a datagram
/// arriving afterwards raises a new readiness event, which tokio does not let a clearing
/// of the older one erase. Only for a call that brought a datagram or two (requests,
/// answers, acknowledgements): under a stream of data the next call is likely to find more
/// at once, cheaper than waiting for the poller to say so. Elsewhere a receive may return
/// one datagram at a time: only an empty call says the queue is dry.
fn drained(metas: &[RecvMeta]) -> bool {
    if !cfg!(any(target_os = "linux", target_os = "android")) || metas.len() >= BATCH_SIZE {
        return false;
    }
    let datagrams: usize = metas
        .iter()
        .map(|m| {
            if m.stride == 0 || m.len == 0 {
                1
            } else {
                m.len.div_ceil(m.stride)
            }
        })
        .sum();
    datagrams <= DRAINED_DATAGRAMS
}

/// Sleeps until `t` on the precise timer (returns at once if there is none or it fails:
/// the driver's loop then checks its deadlines again).
#[cfg(target_os = "linux")]
async fn precise_sleep(
    precise: &Option<crate::precise_timer::PreciseTimer>,
    t: std::time::Instant,
) {
    if let Some(timer) = precise {
        if let Err(e) = timer.sleep_until(t).await {
            tracing::debug!("precise timer: {e}");
        }
    }
}

/// The driver's sleep on tokio's timer, kept from round to round and moved only when a
/// deadline comes *earlier* than the one armed: a later deadline lets the armed sleep fire
/// early (one spurious round, then it is armed anew). Registering a new sleep every round,
/// as a packet moves a connection's deadlines back and forth (an acknowledgement delay,
/// then the retransmission timeout), costs a timer-wheel insertion and removal each time
/// and, whenever the deadline is earlier than the one the runtime last parked on, a
/// write to the runtime's wake-up descriptor and an extra turn of its poller.
struct Timer {
    sleep: Pin<Box<tokio::time::Sleep>>,
    /// The deadline the sleep is armed at; `None` once it fired (or before the first).
    armed: Option<tokio::time::Instant>,
}

impl Timer {
    fn new() -> Self {
        Timer {
            sleep: Box::pin(tokio::time::sleep_until(tokio::time::Instant::now())),
            armed: None,
        }
    }

    /// Makes sure the sleep fires no later than `t`.
    fn arm(&mut self, t: tokio::time::Instant) {
        if self.armed.is_some_and(|a| a <= t) {
            return;
        }
        self.sleep.as_mut().reset(t);
        self.armed = Some(t);
    }

    /// Resolves when the armed sleep fires (pending forever when none is armed).
    async fn fired(&mut self) {
        if self.armed.is_none() {
            return std::future::pending().await;
        }
        self.sleep.as_mut().await;
        self.armed = None;
    }
}

/// Hands the endpoint's events to the runtime's bookkeeping; collects the wakers to wake
/// once the lock is released.
fn process_events(st: &mut State, wakers: &mut Vec<Waker>) {
    while let Some(ev) = st.ep.poll_event() {
        match ev {
            EndpointEvent::Connected(h) | EndpointEvent::Activity(h) => {
                if let Some(s) = st.slot(h) {
                    wakers.append(&mut s.wakers);
                }
            }
            EndpointEvent::Incoming(h) => {
                st.fresh_slot(
                    h,
                    Slot {
                        queued: true,
                        ..Slot::default()
                    },
                );
                st.accept_queue.push_back(h);
                wakers.append(&mut st.accept_wakers);
            }
            EndpointEvent::Closed(h, reason) => {
                tracing::debug!(handle = h.0, %reason, "connection closed");
                if let Some(s) = st.slot(h) {
                    wakers.append(&mut s.wakers);
                }
                st.maybe_remove(h);
            }
        }
    }
}
