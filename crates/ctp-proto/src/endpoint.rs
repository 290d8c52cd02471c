//! An endpoint: one UDP socket's worth of connections. It demultiplexes datagrams by
//! connection id, answers handshakes statelessly, and hands out datagrams to send.

use crate::connection::{ComposedConnection, Connection, ConnectionState};
use crate::engine::session::CloseReason;
use crate::handshake::noise::{Identity, PeerPolicy};
use crate::handshake::responder::{EchoError, Init, InitAnswer, Responder};
use crate::handshake::state::NoiseStart;
use crate::packet::{nostate_packet, NOSTATE_LEN};
use crate::profile::{self, Isn, MicroSet, Params, Profile, ProfileError};
use crate::protection::crc32c;
use crate::schedule::Schedule;
use crate::stats::EndpointStats;
use crate::unreachable::Unreachable;
use crate::wire::header::{self, ConnectionId, Header, LongType, NoState};
use crate::wire::{Reader, WireError};
use core::time::Duration;
use ctp_cc::time::Instant;
use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};

/// Handle of a connection inside its endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionHandle(pub usize);

/// Configuration of an endpoint.
#[derive(Clone, Debug)]
pub struct EndpointConfig {
    /// Accept incoming connections.
    pub accept: bool,
    /// Microprotocols this endpoint will run for a peer that asks.
    pub supported: MicroSet,
    /// Local limits and defaults (a responder narrows requests to these).
    pub params: Params,
    /// Give up a handshake after this long.
    pub handshake_timeout: Duration,
    /// Secret keying the handshake cookie; random per endpoint.
    pub cookie_secret: [u8; 32],
    /// Seed of the endpoint's random numbers (connection ids, initial sequence numbers).
    pub seed: [u8; 32],
    /// Most connections at once.
    pub max_connections: usize,
    /// Most connections at once with one peer address (any port): one host cannot take
    /// every slot.
    pub max_connections_per_address: usize,
    /// The wire format every connection of this endpoint speaks (UDT4 for the `udt`
    /// profiles: the two formats cannot share a socket, UDT4 packets carry no marker).
    pub wire: crate::udt::WireFormat,
    /// Addresses this endpoint can send from, the socket's own first (empty: only the
    /// socket's). A connection it opens whose path fails — retransmission timeouts in a
    /// row — moves to the next of them of the same family, and its peer follows.
    pub local_addrs: Vec<SocketAddr>,
    /// Who this endpoint is on a secure channel: its static key pair. `None`: a key pair
    /// drawn from `seed` when the endpoint starts (encrypted, but nobody can pin it).
    pub identity: Option<Identity>,
    /// Judges the key each secure peer proves (pin, first-use trust, allow list).
    pub peer_policy: PeerPolicy,
    /// Microprotocols an incoming request must include: `secure` refuses connections
    /// without encryption.
    pub required: MicroSet,
    /// Most NOSTATE packets sent per second, in answer to short packets for a connection
    /// id this endpoint does not know (bursts of an eighth of it; 0: never answer). Bounds
    /// the work and bytes a flood of such packets can draw from the endpoint.
    pub nostate_per_second: u32,
    /// Half-open connections (secure channels waiting for their initiator's
    /// authentication) from which on a client puzzle is asked: below, none; at it, 8 bits;
    /// 2 bits more with each doubling (see [`crate::handshake::puzzle::difficulty`]). 0:
    /// always a puzzle; `usize::MAX`: never.
    pub puzzle_low_watermark: usize,
    /// The most difficulty (bits) the puzzle asks, at most
    /// [`crate::handshake::puzzle::MAX_DIFFICULTY`]: what a legitimate initiator pays at
    /// worst (`2^d` hashes).
    pub puzzle_max_difficulty: u8,
    /// Most half-open connections at once (at least 1): a secure channel's COOKIE_ECHO that
    /// passed the puzzle at the cap evicts the oldest half-open connection (as a SYN cache
    /// does), so memory stays bounded whatever the puzzle, and a legitimate initiator is
    /// not locked out while the attacker's connections wait for their timeout. Keep it
    /// below `max_connections`: half-open connections take connection slots.
    pub max_half_open: usize,
    /// Limits on every secure channel's keys tighter than their suite's (default: none).
    pub key_limits: crate::protection::KeyLimits,
}

impl EndpointConfig {
    /// A configuration with the given randomness; everything else at defaults.
    pub fn new(seed: [u8; 32], cookie_secret: [u8; 32]) -> Self {
        EndpointConfig {
            accept: false,
            supported: MicroSet::of(profile::MicroId::ALL),
            params: Params::default(),
            handshake_timeout: Duration::from_secs(10),
            cookie_secret,
            seed,
            max_connections: 4096,
            max_connections_per_address: 256,
            wire: crate::udt::WireFormat::Ctp,
            local_addrs: Vec::new(),
            identity: None,
            peer_policy: PeerPolicy::any(),
            required: MicroSet::default(),
            nostate_per_second: 256,
            puzzle_low_watermark: 64,
            puzzle_max_difficulty: crate::handshake::puzzle::DEFAULT_CAP,
            max_half_open: 1024,
            key_limits: Default::default(),
        }
    }
}

/// Something the application should learn about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndpointEvent {
    /// An outgoing connection finished its handshake.
    Connected(ConnectionHandle),
    /// A peer connected; accept it.
    Incoming(ConnectionHandle),
    /// Data, credit or state changed on this connection: wake its readers and writers.
    Activity(ConnectionHandle),
    /// The connection ended.
    Closed(ConnectionHandle, CloseReason),
}

/// A datagram to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Destination.
    pub destination: SocketAddr,
    /// The local address to send from: one of [`EndpointConfig::local_addrs`], or `None`
    /// for the socket's own.
    pub src: Option<SocketAddr>,
    /// Bytes written into the caller's buffer.
    pub size: usize,
}

/// Stateless replies queued at most (beyond this, handshakes are dropped).
const MAX_STATELESS_QUEUE: usize = 1024;

/// A token bucket: at most `burst` tokens, refilled at `per_second`; kept in millionths of
/// a token so that any elapsed microsecond counts.
#[derive(Clone, Copy, Debug)]
struct TokenBucket {
    per_second: u64,
    burst: u64,
    micro_tokens: u64,
    last: Option<Instant>,
}

impl TokenBucket {
    /// A full bucket refilled at `per_second`, holding an eighth of that (at least one).
    fn new(per_second: u32) -> Self {
        let per_second = u64::from(per_second);
        TokenBucket {
            per_second,
            burst: (per_second / 8).max(1),
            micro_tokens: 0,
            last: None,
        }
    }

    /// Takes a token at `now`, if there is one.
    fn take(&mut self, now: Instant) -> bool {
        if self.per_second == 0 {
            return false;
        }
        let full = self.burst * 1_000_000;
        let refill = match self.last {
            None => full,
            Some(last) => {
                (now.saturating_since(last).as_micros() as u64).saturating_mul(self.per_second)
            }
        };
        self.last = Some(now);
        self.micro_tokens = self.micro_tokens.saturating_add(refill).min(full);
        if self.micro_tokens < 1_000_000 {
            return false;
        }
        self.micro_tokens -= 1_000_000;
        true
    }
}

/// How many entries an endpoint's per-connection tables hold ([`Endpoint::footprint`]):
/// what a long-lived endpoint must give back as its connections end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Live connections.
    pub connections: usize,
    /// Connection slots, live or free (the high-water mark of connections at once).
    pub slots: usize,
    /// Entries of the table routing by local connection id.
    pub by_cid: usize,
    /// Entries of the table finding a connection by its peer's connection id and address
    /// (where a NOSTATE goes).
    pub by_remote_cid: usize,
    /// Peer addresses with connections (the per-address limit's table).
    pub per_address: usize,
    /// Entries of the timer heap, stale ones included.
    pub timers: usize,
    /// Stateless replies waiting to be sent.
    pub stateless_queued: usize,
}

/// The sans-IO endpoint.
pub struct Endpoint {
    pub(crate) cfg: EndpointConfig,
    pub(crate) rng: ChaCha8Rng,
    pub(crate) conns: Vec<Option<Connection>>,
    pub(crate) by_cid: HashMap<ConnectionId, usize>,
    /// UDT4 connections whose peer socket id is known, by peer address and socket id:
    /// where a first handshake (destination socket 0) goes.
    pub(crate) udt_by_peer: HashMap<(SocketAddr, u32), usize>,
    /// UDT4 rendezvous connections still waiting for their peer's socket id, by address.
    pub(crate) udt_rendezvous: HashMap<SocketAddr, Vec<usize>>,
    /// Live connections.
    live: usize,
    /// Empty slots of `conns`, smallest first (a new connection takes the smallest).
    free: BinaryHeap<Reverse<usize>>,
    pub(crate) events: VecDeque<EndpointEvent>,
    pub(crate) stateless: VecDeque<(SocketAddr, Vec<u8>)>,
    pub(crate) stats: EndpointStats,
    reported_closed: Vec<bool>,
    /// The peer address each connection was admitted under (and counted in
    /// `per_address` by), whatever address it moved to since.
    admitted_ip: Vec<IpAddr>,
    /// Which connections need attention (no call looks at all of them).
    pub(crate) schedule: Schedule,
    /// Connections per peer address.
    per_address: HashMap<IpAddr, usize>,
    /// Whether the application knows of each connection: a secure channel's responder
    /// side is shown only once its peer authenticated (one that fails before is removed
    /// without a word to the application).
    announced: Vec<bool>,
    /// This endpoint's static key pair (the configured one, or one drawn at start).
    identity: Identity,
    /// Composed connections by their peer's connection id and address: where a NOSTATE
    /// from that address for that id goes.
    by_remote_cid: HashMap<(ConnectionId, SocketAddr), usize>,
    /// The key each slot is filed under in `by_remote_cid`, if any.
    remote_key: Vec<Option<(ConnectionId, SocketAddr)>>,
    /// Limits the NOSTATE packets sent.
    nostate_bucket: TokenBucket,
    /// Connections half-open: not `announced` (a secure channel's responder side before
    /// its initiator authenticated, or after it failed and until it is removed).
    half_open: usize,
    /// The half-open connections by age, oldest first, as (slot, connection id); entries
    /// of connections no longer half-open are skipped (and compacted away).
    half_open_order: VecDeque<(usize, ConnectionId)>,
}

/// Whether a datagram from `from` could be genuine and answered: not from port 0, the
/// unspecified address, a broadcast or a multicast address (IPv4-mapped forms included).
pub(crate) fn answerable(from: SocketAddr) -> bool {
    let ip = from.ip().to_canonical();
    let impossible = match ip {
        std::net::IpAddr::V4(v4) => v4.is_broadcast(),
        std::net::IpAddr::V6(_) => false,
    };
    from.port() != 0 && !ip.is_unspecified() && !ip.is_multicast() && !impossible
}

impl Endpoint {
    /// Creates an endpoint.
    pub fn new(cfg: EndpointConfig) -> Self {
        let rng = ChaCha8Rng::from_seed(cfg.seed);
        // Derived from the seed, not drawn from the generator: the endpoint's numbers stay
        // the ones its seed has always given.
        let identity = cfg.identity.clone().unwrap_or_else(|| {
            Identity::generate(blake3::derive_key("ctp endpoint identity", &cfg.seed))
        });
        Endpoint {
            identity,
            by_remote_cid: HashMap::new(),
            remote_key: Vec::new(),
            nostate_bucket: TokenBucket::new(cfg.nostate_per_second),
            announced: Vec::new(),
            cfg,
            rng,
            conns: Vec::new(),
            by_cid: HashMap::new(),
            udt_by_peer: HashMap::new(),
            udt_rendezvous: HashMap::new(),
            live: 0,
            free: BinaryHeap::new(),
            events: VecDeque::new(),
            stateless: VecDeque::new(),
            stats: EndpointStats::default(),
            reported_closed: Vec::new(),
            admitted_ip: Vec::new(),
            schedule: Schedule::default(),
            per_address: HashMap::new(),
            half_open: 0,
            half_open_order: VecDeque::new(),
        }
    }

    /// Endpoint-level counters (with the gauges `half_open` and `puzzle_difficulty` as
    /// they are now).
    pub fn stats(&self) -> EndpointStats {
        EndpointStats {
            half_open: self.half_open as u64,
            puzzle_difficulty: self.puzzle_difficulty().into(),
            ..self.stats
        }
    }

    /// Connections half-open now: secure channels created from a cookie whose initiator
    /// has not authenticated yet (they are the load the client puzzle answers).
    pub fn half_open(&self) -> usize {
        self.half_open
    }

    /// The client puzzle's difficulty (bits) an INIT_ACK asks now, from the half-open
    /// connections and the configuration (0: none).
    pub fn puzzle_difficulty(&self) -> u8 {
        crate::handshake::puzzle::difficulty(
            self.half_open,
            self.cfg.puzzle_low_watermark,
            self.cfg.puzzle_max_difficulty,
        )
    }

    /// Accepts (or stops accepting) incoming connections.
    pub fn set_accept(&mut self, accept: bool) {
        self.cfg.accept = accept;
    }

    /// The connection behind a handle.
    pub fn connection(&self, h: ConnectionHandle) -> Option<&Connection> {
        self.conns.get(h.0)?.as_ref()
    }

    /// Mutable access to the connection behind a handle.
    pub fn connection_mut(&mut self, h: ConnectionHandle) -> Option<&mut Connection> {
        let c = self.conns.get_mut(h.0)?.as_mut()?;
        self.schedule.touch(h.0);
        Some(c)
    }

    /// Number of live connection slots.
    pub fn connection_count(&self) -> usize {
        self.live
    }

    /// The sizes of the endpoint's per-connection tables: with no connection left, each is
    /// empty (the slots and timers excepted, which stay bounded by the most connections
    /// ever open at once).
    pub fn footprint(&self) -> Footprint {
        Footprint {
            connections: self.live,
            slots: self.conns.len(),
            by_cid: self.by_cid.len(),
            by_remote_cid: self.by_remote_cid.len(),
            per_address: self.per_address.len(),
            timers: self.schedule.timers(),
            stateless_queued: self.stateless.len(),
        }
    }

    /// Files connection `idx` under its peer's connection id and current address (or
    /// takes it out when the slot is empty), when that changed: at insertion, when the
    /// initiator learns the peer's id, when the peer moves, at removal.
    fn reindex_remote(&mut self, idx: usize) {
        if self.remote_key.len() <= idx {
            self.remote_key.resize(idx + 1, None);
        }
        let key = self.conns[idx]
            .as_ref()
            .and_then(Connection::composed)
            .filter(|c| c.peer_cid != 0)
            .map(|c| (c.peer_cid, c.paths.current().remote));
        let old = self.remote_key[idx];
        if old == key {
            return;
        }
        if let Some(k) = old {
            if self.by_remote_cid.get(&k) == Some(&idx) {
                self.by_remote_cid.remove(&k);
            }
        }
        if let Some(k) = key {
            self.by_remote_cid.insert(k, idx);
        }
        self.remote_key[idx] = key;
    }

    /// Whether a new connection from `from` fits the limits (all connections, and those
    /// with one peer address).
    pub(crate) fn admits(&self, from: SocketAddr) -> Result<(), &'static str> {
        if self.live >= self.cfg.max_connections {
            return Err("the responder has no room for more connections");
        }
        let mine = self.per_address.get(&from.ip()).copied().unwrap_or(0);
        if mine >= self.cfg.max_connections_per_address {
            return Err("too many connections from your address");
        }
        Ok(())
    }

    fn fresh_cid(&mut self) -> ConnectionId {
        loop {
            let c = self.rng.next_u32();
            if c != 0 && !self.by_cid.contains_key(&c) {
                return c;
            }
        }
    }

    fn fresh_isn(&mut self) -> Isn {
        // Packet and segment numbers travel truncated, so their start costs nothing on the
        // wire: any value below 2^30. Message numbers travel whole in every piece: they
        // start below 2^13 so that they stay 2-byte varints for the first 8192 messages.
        // (Blind injection is stopped by the connection id and the address check.)
        let mut r = |bits: u32| self.rng.next_u64() & ((1 << bits) - 1);
        Isn {
            seg: r(30),
            msg: r(13),
            pn: r(30),
        }
    }

    pub(crate) fn insert(&mut self, c: Connection) -> ConnectionHandle {
        let cid = c.local_cid();
        let ip = c.remote().ip();
        *self.per_address.entry(ip).or_default() += 1;
        let idx = match self.free.pop() {
            Some(Reverse(i)) => {
                self.conns[i] = Some(c);
                self.reported_closed[i] = false;
                self.admitted_ip[i] = ip;
                self.announced[i] = true;
                i
            }
            None => {
                self.conns.push(Some(c));
                self.reported_closed.push(false);
                self.admitted_ip.push(ip);
                self.announced.push(true);
                self.conns.len() - 1
            }
        };
        self.live += 1;
        self.by_cid.insert(cid, idx);
        self.schedule.touch(idx);
        self.udt_index(idx);
        self.reindex_remote(idx);
        ConnectionHandle(idx)
    }

    /// Starts a connection to `remote` with `profile`. The profile is checked first.
    pub fn connect(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        profile: &Profile,
    ) -> Result<ConnectionHandle, ProfileError> {
        profile.check()?;
        if self.cfg.wire == crate::udt::WireFormat::Udt4
            || profile.wire() == crate::udt::WireFormat::Udt4
        {
            return self.udt_connect(now, remote, profile, false);
        }
        let local_cid = self.fresh_cid();
        let local_isn = self.fresh_isn();
        let mut c = ComposedConnection::initiator(
            now,
            local_cid,
            remote,
            profile,
            local_isn,
            self.cfg.handshake_timeout,
        );
        let family = |a: &&SocketAddr| a.is_ipv4() == remote.is_ipv4();
        c.paths.set_locals(
            self.cfg
                .local_addrs
                .iter()
                .filter(family)
                .copied()
                .collect(),
        );
        Ok(self.insert(c.into()))
    }

    /// Starts a connection over several routes — (local address, peer address) pairs:
    /// `first`, the handshake's, then `further` — with `profile`. With the `coded` profile
    /// the connection runs over every route at once (CTCP's multipath); other profiles use
    /// the first and move to the next route's local address when it stops answering. A
    /// local address of `None` is the socket's own. Fails as [`Endpoint::connect`] does.
    pub fn connect_over(
        &mut self,
        now: Instant,
        first: (Option<SocketAddr>, SocketAddr),
        further: &[(Option<SocketAddr>, SocketAddr)],
        profile: &Profile,
    ) -> Result<ConnectionHandle, ProfileError> {
        let h = self.connect(now, first.1, profile)?;
        if let Some(c) = self.conns[h.0].as_mut().and_then(Connection::composed_mut) {
            if let Some(local) = first.0 {
                // The first route's local address first: the one packets leave from.
                let others = further.iter().filter_map(|r| r.0).filter(|&l| l != local);
                c.paths
                    .set_locals(core::iter::once(local).chain(others).collect());
            }
            c.paths.set_further_routes(further.to_vec());
        }
        Ok(h)
    }

    /// The network reported `remote` unreachable at `now` (the runtime read an ICMP or
    /// ICMPv6 destination-unreachable message about a datagram sent there). Every
    /// connection to `remote` still in its handshake, and reported unreachable for
    /// [`crate::unreachable::UNREACHABLE_GRACE`] by now, ends with the report's reason
    /// instead of at the handshake timeout; established connections ignore it (an ICMP
    /// message is unauthenticated: see [`crate::unreachable`]). Returns how many
    /// connections it ended.
    pub fn on_unreachable(&mut self, now: Instant, remote: SocketAddr, kind: Unreachable) -> usize {
        self.stats.unreachable_reports += 1;
        if !self.per_address.contains_key(&remote.ip()) {
            return 0;
        }
        let mut ended = 0;
        for i in 0..self.conns.len() {
            let Some(c) = self.conns[i].as_mut() else {
                continue;
            };
            if c.remote() == remote && c.on_unreachable(now, kind) {
                self.schedule.touch(i);
                ended += 1;
            }
        }
        self.stats.unreachable_ended += ended as u64;
        ended
    }

    /// Processes one received datagram. Anything malformed is dropped and counted. The
    /// buffer is the runtime's receive buffer: a short packet is opened in place.
    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: &mut [u8]) {
        self.stats.datagrams_received += 1;
        if !answerable(from) {
            // Nothing may be sent back to it (on either wire): a reply to port 0 fails
            // `sendmsg` with EINVAL, which makes the runtime give up segmentation offload on
            // the socket, and one to a broadcast or multicast address would be an amplifier.
            self.stats.bad_source += 1;
            return;
        }
        if self.cfg.wire == crate::udt::WireFormat::Udt4 {
            return self.udt_datagram(now, from, data);
        }
        let long = data
            .first()
            .is_some_and(|&b| crate::wire::header::is_long(b));
        if long {
            self.long_datagram(now, from, data);
        } else {
            self.short_datagram(now, from, data);
        }
    }

    /// A short packet: routed by its connection id and opened by its connection.
    fn short_datagram(&mut self, now: Instant, from: SocketAddr, data: &mut [u8]) {
        let dcid = match header::short_dcid(data) {
            Ok(dcid) => dcid,
            Err(_) => {
                self.stats.bad_header += 1;
                return;
            }
        };
        let Some(&idx) = self.by_cid.get(&dcid) else {
            self.stats.unknown_connection += 1;
            self.answer_unknown(now, from, dcid, data);
            return;
        };
        self.deliver(now, idx, from, data);
    }

    /// A short packet for a connection id nobody here has: answered statelessly with
    /// NOSTATE, echoing its trailing bytes, so that its sender learns at once that this
    /// side forgot the connection (closed it, or restarted). Only a packet larger than the
    /// NOSTATE is answered (no amplification), within the rate limit.
    fn answer_unknown(&mut self, now: Instant, from: SocketAddr, dcid: ConnectionId, data: &[u8]) {
        if data.len() <= NOSTATE_LEN || !self.nostate_bucket.take(now) {
            self.stats.nostate_unanswered += 1;
            return;
        }
        let n = NoState {
            cid: dcid,
            echo: NoState::echo_of(data),
        };
        if self.queue_stateless(from, nostate_packet(&n)) {
            self.stats.nostate_sent += 1;
        } else {
            self.stats.nostate_unanswered += 1;
        }
    }

    /// A NOSTATE: the connection whose peer is `from` with connection id `scid` learns that
    /// the peer forgot it, if the echo in `body` is the end of the last packet it sent.
    /// Never answered.
    fn on_nostate(&mut self, from: SocketAddr, scid: ConnectionId, body: &[u8]) {
        let honoured = NoState::parse(scid, body).ok().is_some_and(|n| {
            let Some(&idx) = self.by_remote_cid.get(&(n.cid, from)) else {
                return false;
            };
            let Some(c) = self.conns[idx].as_mut().and_then(Connection::composed_mut) else {
                return false;
            };
            let honoured = c.on_nostate(&n.echo);
            self.schedule.touch(idx);
            honoured
        });
        if honoured {
            self.stats.nostate_honoured += 1;
        } else {
            self.stats.nostate_ignored += 1;
        }
    }

    /// Hands a datagram routed to connection `idx` to its core, if it came from the
    /// connection's peer; reports the connection established when this datagram
    /// established it. Returns whether the core took it.
    pub(crate) fn deliver(
        &mut self,
        now: Instant,
        idx: usize,
        from: SocketAddr,
        data: &mut [u8],
    ) -> bool {
        let Some(c) = self.conns[idx].as_mut() else {
            return false;
        };
        self.schedule.touch(idx);
        let was_open = c.is_established();
        let handled = if c.remote() == from {
            c.handle_datagram(now, data)
        } else {
            // The peer may have moved (a NAT rebinding): the core decides, after opening
            // the packet, and challenges the new address with fresh randomness.
            let mut token = [0u8; 8];
            self.rng.fill_bytes(&mut token);
            let handled = c.handle_datagram_from(now, from, data, token);
            // Where a NOSTATE would come from now.
            self.reindex_remote(idx);
            handled
        };
        if let Err(dropped) = handled {
            dropped.count(&mut self.stats);
            return false;
        }
        let established = self.conns[idx]
            .as_ref()
            .is_some_and(|c| *c.state() == ConnectionState::Established);
        if !was_open && established {
            self.events
                .push_back(EndpointEvent::Connected(ConnectionHandle(idx)));
        }
        true
    }

    /// A handshake packet: its trailer is checked before anything else.
    fn long_datagram(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        let Ok(packet) = crc32c::open_long(data) else {
            self.stats.bad_checksum += 1;
            return;
        };
        let mut r = Reader::new(packet);
        let (ty, dcid, scid) = match Header::parse(&mut r) {
            Ok(Header::Long { ty, dcid, scid, .. }) => (ty, dcid, scid),
            Err(WireError::UnsupportedVersion(_)) => {
                self.stats.unknown_version += 1;
                return;
            }
            // (A short header cannot parse from a long first byte; counted, not trusted.)
            Ok(Header::Short { .. }) | Err(_) => {
                self.stats.bad_header += 1;
                return;
            }
        };
        let rest = r.rest();
        let ok = match ty {
            LongType::Init => self.on_init(now, from, scid, rest, data.len()),
            LongType::InitAck => self.on_init_ack(now, from, dcid, scid, rest),
            LongType::CookieEcho => self.on_cookie_echo(now, from, dcid, rest),
            LongType::Refuse => self.on_refuse(from, dcid, rest),
            LongType::Handshake => self.on_noise(now, from, dcid, rest),
            LongType::NoState => {
                // Counted by its own counters; never answered.
                self.on_nostate(from, scid, rest);
                true
            }
        };
        if !ok {
            self.stats.handshake_dropped += 1;
        }
    }

    /// Queues a stateless reply; false when the queue is full (it is dropped).
    pub(crate) fn queue_stateless(&mut self, to: SocketAddr, packet: Vec<u8>) -> bool {
        let room = self.stateless.len() < MAX_STATELESS_QUEUE;
        if room {
            self.stateless.push_back((to, packet));
        }
        room
    }

    /// The cookie secret, supported microprotocols and parameters this endpoint answers
    /// handshakes with.
    fn responder(&self) -> Responder<'_> {
        Responder {
            secret: &self.cfg.cookie_secret,
            supported: self.cfg.supported,
            params: &self.cfg.params,
            required: self.cfg.required,
            difficulty: self.puzzle_difficulty(),
        }
    }

    /// This endpoint's static key pair.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// Fresh randomness for a Noise handshake's ephemeral key.
    fn noise_seed(&mut self) -> [u8; 32] {
        let mut seed = [0u8; 32];
        self.rng.fill_bytes(&mut seed);
        seed
    }

    /// An INIT: answered statelessly (see [`Responder::answer_init`]).
    fn on_init(
        &mut self,
        now: Instant,
        from: SocketAddr,
        peer_cid: ConnectionId,
        body: &[u8],
        size: usize,
    ) -> bool {
        if !self.cfg.accept {
            return false;
        }
        let admitted = self.admits(from);
        // Copies: the answer may draw fresh numbers from the endpoint meanwhile.
        let (secret, params) = (self.cfg.cookie_secret, self.cfg.params);
        let difficulty = self.puzzle_difficulty();
        let responder = Responder {
            secret: &secret,
            supported: self.cfg.supported,
            params: &params,
            required: self.cfg.required,
            difficulty,
        };
        let fresh = || (self.fresh_cid(), self.fresh_isn());
        let init = Init {
            from,
            peer_cid,
            body,
            size,
        };
        let Some(answer) = responder.answer_init(now, init, admitted, fresh) else {
            return false;
        };
        match answer {
            InitAnswer::Refuse(_) => self.stats.refused += 1,
            InitAnswer::Accept(_) if difficulty > 0 => self.stats.puzzles_asked += 1,
            InitAnswer::Accept(_) => {}
        }
        self.queue_stateless(from, answer.into_packet());
        true
    }

    fn initiating(
        &mut self,
        dcid: ConnectionId,
        from: SocketAddr,
        state: ConnectionState,
    ) -> Option<usize> {
        let &idx = self.by_cid.get(&dcid)?;
        let c = self.conns[idx].as_ref()?;
        (c.remote() == from && *c.state() == state).then_some(idx)
    }

    fn on_init_ack(
        &mut self,
        now: Instant,
        from: SocketAddr,
        dcid: ConnectionId,
        scid: ConnectionId,
        body: &[u8],
    ) -> bool {
        let Some(idx) = self.initiating(dcid, from, ConnectionState::Initiating) else {
            return false;
        };
        self.schedule.touch(idx);
        let seed = self.noise_seed();
        let me = &self.identity;
        let hashes = self.conns[idx]
            .as_mut()
            .and_then(Connection::composed_mut)
            .and_then(|c| c.on_init_ack(now, scid, body, me, seed));
        self.stats.puzzle_hashes += hashes.unwrap_or(0);
        // The peer's connection id is known now.
        self.reindex_remote(idx);
        hashes.is_some()
    }

    /// A HANDSHAKE packet: a Noise message for a secure channel being set up (or a repeat
    /// of one). The connection reads it; when that authenticates the peer, the
    /// application learns of the connection.
    fn on_noise(
        &mut self,
        now: Instant,
        from: SocketAddr,
        dcid: ConnectionId,
        body: &[u8],
    ) -> bool {
        let Some(&idx) = self.by_cid.get(&dcid) else {
            return false;
        };
        let Some(msg) = crate::handshake::state::noise_message(body) else {
            return false;
        };
        let policy = &self.cfg.peer_policy;
        let Some(c) = self.conns[idx].as_mut().and_then(Connection::composed_mut) else {
            return false;
        };
        if c.paths.current().remote != from {
            return false;
        }
        self.schedule.touch(idx);
        let before = c.state.clone();
        if !c.on_noise(now, msg, policy, self.cfg.key_limits) {
            return false;
        }
        if before != ConnectionState::Established && c.is_established() {
            let h = ConnectionHandle(idx);
            if c.initiator {
                self.events.push_back(EndpointEvent::Connected(h));
            } else {
                self.announced[idx] = true;
                self.half_open -= 1;
                self.stats.accepted += 1;
                self.events.push_back(EndpointEvent::Incoming(h));
            }
        }
        true
    }

    fn on_refuse(&mut self, from: SocketAddr, dcid: ConnectionId, body: &[u8]) -> bool {
        let Some(idx) = self.initiating(dcid, from, ConnectionState::Initiating) else {
            return false;
        };
        self.schedule.touch(idx);
        self.conns[idx]
            .as_mut()
            .and_then(Connection::composed_mut)
            .is_some_and(|c| c.on_refuse(from, body))
    }

    fn on_cookie_echo(
        &mut self,
        now: Instant,
        from: SocketAddr,
        dcid: ConnectionId,
        body: &[u8],
    ) -> bool {
        if let Some(&idx) = self.by_cid.get(&dcid) {
            // A repeated echo: our first packet was lost; send one again.
            if let Some(c) = self.conns[idx].as_mut().and_then(Connection::composed_mut) {
                let answering = c.is_established() || c.state == ConnectionState::Authenticating;
                if c.paths.current().remote == from && answering {
                    c.on_repeated_echo();
                    self.schedule.touch(idx);
                    return true;
                }
            }
            return false;
        }
        if !self.cfg.accept || self.admits(from).is_err() {
            return false;
        }
        let echo = match self.responder().accept_echo(now, from, dcid, body) {
            Ok(echo) => echo,
            Err(why) => {
                match why {
                    EchoError::Invalid => {}
                    EchoError::Puzzle => {
                        self.stats.puzzles_verified += 1;
                        self.stats.puzzle_failed += 1;
                    }
                }
                return false;
            }
        };
        if echo.contents.difficulty > 0 {
            self.stats.puzzles_verified += 1;
        }
        if echo.noise_msg.is_some() && self.half_open >= self.cfg.max_half_open.max(1) {
            self.evict_oldest_half_open();
        }
        let answer = echo.answer();
        let mut c = ComposedConnection::responder(from, &echo.contents, echo.engine);
        if let (Some(msg1), Some(hash)) = (echo.noise_msg, echo.contents.offer_hash) {
            // A secure channel: message 2 answers message 1; the application hears of the
            // connection once message 3 authenticated the initiator.
            let seed = self.noise_seed();
            let start = NoiseStart {
                me: &self.identity,
                offer_hash: &hash,
                answer: &answer,
                msg1,
                seed,
                give_up: now + self.cfg.handshake_timeout,
            };
            if c.start_noise(start).is_err() {
                return false;
            }
            let cid = c.local_cid;
            let h = self.insert(c.into());
            self.announced[h.0] = false;
            self.half_open += 1;
            self.half_open_order.push_back((h.0, cid));
            if self.half_open_order.len() > 2 * self.half_open + 64 {
                let (conns, announced) = (&self.conns, &self.announced);
                self.half_open_order
                    .retain(|&(i, cid)| Self::is_half_open(conns, announced, i, cid));
            }
            return true;
        }
        let h = self.insert(c.into());
        self.stats.accepted += 1;
        self.events.push_back(EndpointEvent::Incoming(h));
        true
    }

    /// Whether slot `i` still holds the half-open connection `cid`.
    fn is_half_open(
        conns: &[Option<Connection>],
        announced: &[bool],
        i: usize,
        cid: ConnectionId,
    ) -> bool {
        !announced[i] && conns[i].as_ref().is_some_and(|c| c.local_cid() == cid)
    }

    /// Removes the oldest half-open connection, silently (its initiator never proved its
    /// key; a legitimate one that is this slow starts over).
    fn evict_oldest_half_open(&mut self) {
        while let Some((i, cid)) = self.half_open_order.pop_front() {
            if Self::is_half_open(&self.conns, &self.announced, i, cid) {
                self.stats.half_open_evicted += 1;
                self.remove(ConnectionHandle(i));
                return;
            }
        }
    }

    /// Recomputes what the touched connections need (see [`Schedule`]).
    fn settle(&mut self) {
        let conns = &self.conns;
        self.schedule
            .settle(|i| conns.get(i)?.as_ref()?.poll_timeout());
    }

    /// Fires every due timer.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.settle();
        while let Some(i) = self.schedule.pop_due(now) {
            if let Some(c) = self.conns[i].as_mut() {
                if c.poll_timeout().is_some_and(|t| t <= now) {
                    c.handle_timeout(now);
                }
            }
            // A failed move may have taken the connection back to its old address.
            self.reindex_remote(i);
            self.schedule.touch(i);
        }
        self.settle();
    }

    /// The earliest deadline of any connection.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        self.settle();
        self.schedule.next_deadline()
    }

    /// Writes the next datagram to send into `buf` (cleared first).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        buf.clear();
        self.poll_transmit_append(now, buf)
    }

    /// Appends the next datagram to send to `buf`, after the datagrams already in it: a
    /// driver batching datagrams for one system call builds them in place, without a copy.
    /// The datagram is the last [`Transmit::size`] bytes; `buf` is unchanged when there is
    /// nothing to send.
    pub fn poll_transmit_append(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        let start = buf.len();
        let sent = |destination: SocketAddr, src: Option<SocketAddr>, buf: &Vec<u8>| Transmit {
            destination,
            src,
            size: buf.len() - start,
        };
        if let Some((to, p)) = self.stateless.pop_front() {
            buf.extend_from_slice(&p);
            return Some(sent(to, None, buf));
        }
        self.settle();
        while let Some(idx) = self.schedule.next_to_poll() {
            let Some(c) = self.conns[idx].as_mut() else {
                continue;
            };
            let built = c.poll_transmit(now, buf);
            if built {
                // Polled again after the others (round robin).
                self.schedule.touch(idx);
                let (to, from) = c.destination();
                return Some(sent(to, from, buf));
            }
            self.schedule.set_deadline(idx, c.poll_timeout());
        }
        None
    }

    /// The next thing the application should learn about.
    pub fn poll_event(&mut self) -> Option<EndpointEvent> {
        if let Some(e) = self.events.pop_front() {
            return Some(e);
        }
        self.settle();
        while let Some(i) = self.schedule.next_to_report() {
            let Some(c) = self.conns[i].as_mut() else {
                continue;
            };
            if !self.announced[i] {
                // Not yet authenticated: nothing to tell; one that failed goes quietly.
                if matches!(c.state(), ConnectionState::Closed(_)) {
                    self.stats.handshake_failed += 1;
                    self.remove(ConnectionHandle(i));
                }
                continue;
            }
            let activity = c.take_activity();
            let event = match c.state() {
                ConnectionState::Closed(r) if !self.reported_closed[i] => {
                    self.reported_closed[i] = true;
                    EndpointEvent::Closed(ConnectionHandle(i), r.clone())
                }
                _ if activity => EndpointEvent::Activity(ConnectionHandle(i)),
                _ => continue,
            };
            self.schedule.report_again(i);
            return Some(event);
        }
        None
    }

    /// Forgets a closed connection (its handle becomes invalid). A CLOSE it still owes its
    /// peer is left to the endpoint to send.
    pub fn remove(&mut self, h: ConnectionHandle) {
        if let Some(mut c) = self.conns.get_mut(h.0).and_then(Option::take) {
            self.live -= 1;
            self.free.push(Reverse(h.0));
            let remote = c.remote();
            self.by_cid.remove(&c.local_cid());
            self.schedule.forget(h.0);
            if !self.announced[h.0] {
                self.half_open -= 1;
            }
            let ip = self.admitted_ip[h.0];
            if let Some(n) = self.per_address.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    self.per_address.remove(&ip);
                }
            }
            self.unindex(h.0, &c);
            self.reindex_remote(h.0);
            let mut farewell = Vec::new();
            if c.take_farewell(&mut farewell) {
                self.queue_stateless(remote, farewell);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::pair::Pair;
    use crate::profile::Profile;
    use core::time::Duration;

    /// Idle connections cost nothing per datagram: with hundreds established, a message on
    /// one of them makes the server look at a handful of connections, not at all of them
    /// per call (4 000 idle connections slowed a transfer by a third when every call
    /// scanned them all).
    #[test]
    fn idle_connections_are_not_looked_at() {
        let mut p = Pair::new(11);
        let mut clients = Vec::new();
        for _ in 0..200 {
            let c = p
                .client
                .connect(p.now, p.server_addr, &Profile::reliable())
                .unwrap();
            clients.push(c);
        }
        assert!(p.run_until(Duration::from_secs(5), |p| {
            clients
                .iter()
                .all(|&c| p.client.connection(c).is_some_and(|x| x.is_established()))
        }));
        // Let every handshake's last packets settle.
        let quiet = p.now + Duration::from_millis(500);
        p.run_until(Duration::from_secs(1), |p| p.now >= quiet);
        assert_eq!(p.server.connection_count(), 200);
        let before = p.server.schedule.polled;
        let now = p.now;
        let one = p.client.connection_mut(clients[120]).unwrap();
        one.send_msg(now, bytes::Bytes::from_static(b"ping"))
            .unwrap();
        let until = p.now + Duration::from_millis(50);
        p.run_until(Duration::from_secs(1), |p| p.now >= until);
        let polled = p.server.schedule.polled - before;
        assert!(
            polled < 30,
            "the server polled {polled} connections for one message among 200 idle ones"
        );
    }

    /// A sender that ignores the receiver's flow credit is disconnected with a protocol
    /// error, and learns why: the CLOSE carries code PROTOCOL and the reason.
    #[test]
    fn a_sender_beyond_its_credit_is_told_why_it_was_disconnected() {
        use crate::endpoint::EndpointConfig;
        use crate::engine::session::CloseReason;
        use crate::wire::frame::close_code;
        let client = EndpointConfig::new([1; 32], [2; 32]);
        let mut server = EndpointConfig::new([3; 32], [4; 32]);
        server.accept = true;
        server.params.recv_buffer = 1 << 20;
        let mut p = Pair::with_configs(9, client, server);
        let c = p
            .client
            .connect(p.now, p.server_addr, &Profile::reliable())
            .unwrap();
        assert!(p.run_until(Duration::from_secs(5), |p| p
            .client
            .connection(c)
            .is_some_and(|x| x.is_established())));
        let now = p.now;
        let conn = p.client.connection_mut(c).unwrap();
        // A broken (or hostile) sender: it believes it may send without limit.
        conn.composed_mut()
            .unwrap()
            .engine
            .as_mut()
            .unwrap()
            .state_mut()
            .session
            .peer_max_seg = u64::MAX;
        let data = bytes::Bytes::from(vec![5u8; 4 << 20]);
        let mut sent = 0;
        p.run_until(Duration::from_secs(30), |p| {
            if let Some(conn) = p.client.connection_mut(c) {
                while sent < data.len() {
                    match conn.stream_write(now, &data[sent..]) {
                        Ok(n) => sent += n,
                        Err(_) => break,
                    }
                }
            }
            matches!(
                p.client.connection(c).map(|x| x.state()),
                Some(crate::conn_state::ConnectionState::Closed(_))
            )
        });
        match p.client.connection(c).unwrap().state() {
            crate::conn_state::ConnectionState::Closed(CloseReason::Peer { code, reason }) => {
                assert_eq!(*code, close_code::PROTOCOL);
                assert!(reason.contains("flow credit"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    /// ICMP reports end the connection attempts to that address once it was reported
    /// unreachable for the grace period, with the reason, and only those: an attempt to
    /// another port and an established connection to the same address go on.
    #[test]
    fn unreachable_reports_end_only_attempts_to_that_address() {
        use crate::unreachable::{Unreachable, UNREACHABLE_GRACE};
        use crate::{CloseReason, ConnectionState};
        let mut p = Pair::new(12);
        let up = p
            .client
            .connect(p.now, p.server_addr, &Profile::reliable())
            .unwrap();
        assert!(p.run_until(Duration::from_secs(5), |p| p
            .client
            .connection(up)
            .is_some_and(|c| c.is_established())));
        let mut closed_port = p.server_addr;
        closed_port.set_port(closed_port.port() + 1);
        let (t0, server) = (p.now, p.server_addr);
        let later = t0 + UNREACHABLE_GRACE;
        let attempt = p
            .client
            .connect(t0, closed_port, &Profile::reliable())
            .unwrap();
        let other = p.client.connect(t0, server, &Profile::reliable()).unwrap();
        let state = |p: &Pair, h| p.client.connection(h).map(|c| c.state().clone());
        // One report is not enough: the peer may be starting, the report stale or forged.
        assert_eq!(
            p.client.on_unreachable(t0, closed_port, Unreachable::Port),
            0
        );
        assert_eq!(state(&p, attempt), Some(ConnectionState::Initiating));
        assert_eq!(
            p.client
                .on_unreachable(later, closed_port, Unreachable::Port),
            1
        );
        assert_eq!(
            state(&p, attempt),
            Some(ConnectionState::Closed(CloseReason::Handshake(
                Unreachable::Port.reason().into()
            )))
        );
        assert_eq!(
            state(&p, other),
            Some(ConnectionState::Initiating),
            "an attempt to another port goes on"
        );
        // The established connection ignores reports about its peer (they may be forged);
        // the attempt to that peer, still in its handshake, ends.
        p.client.on_unreachable(t0, server, Unreachable::Host);
        assert_eq!(p.client.on_unreachable(later, server, Unreachable::Host), 1);
        assert!(p.client.connection(up).unwrap().is_established());
        assert!(matches!(
            state(&p, other),
            Some(ConnectionState::Closed(CloseReason::Handshake(r))) if r.contains("host")
        ));
        let stats = p.client.stats();
        assert_eq!((stats.unreachable_reports, stats.unreachable_ended), (4, 2));
        let closed = p.client_events.len();
        p.run_until(Duration::from_millis(100), |_| false);
        assert!(p.client_events[closed..]
            .iter()
            .any(|e| matches!(e, super::EndpointEvent::Closed(h, _) if *h == attempt)));
    }
}
