//! The composed connection core: a connection on ctp's wire — its handshake state, its
//! packet protection, the composed engine once negotiated — and the application-facing
//! operations (byte stream, messages, close), behind [`ConnectionCore`].

use super::multipath::Multipath;
use super::paths::{PathAction, Paths};
use crate::composed::Engine;
use crate::conn_core::{ConnectionCore, Dropped};
use crate::engine::event::Event;
use crate::engine::session::CloseReason;
use crate::engine::streams::{
    kind_of, opened_by_initiator, stream_id, StreamId, StreamKind, MAX_STREAMS,
};
use crate::engine::streams::{Outgoing, StreamRead};
use crate::handshake::noise::{Identity, NoiseError, PeerKey, PeerPolicy, Secrets};
use crate::handshake::state::InitAckError;
use crate::handshake::state::NoiseStart;
use crate::handshake::{CookieContents, Handshake};
use crate::packet::{open_short, Opened};
use crate::perfmon::PerfMon;
use crate::profile::{compose, Isn, MicroId, MicroSet, Params};
use crate::protection::aead::{Aead, KeyLimits, Suite};
use crate::protection::{Crc32c, PacketProtection};
use crate::stats::ConnectionStats;
use crate::wire::frame::{close_code, MAX_DEPS};
use crate::wire::header::{ConnectionId, NoState, ECHO_LEN};
use crate::wire::truncated::Truncated;
use bytes::Bytes;
use core::time::Duration;
use ctp_cc::time::Instant;
use std::net::SocketAddr;

use crate::conn_state::{ConnectionState, MsgOptions, ReadError, WriteError, STREAM_CHUNK};

/// A connection on ctp's wire: handshake, protection and the composed engine.
pub struct ComposedConnection {
    pub(crate) local_cid: ConnectionId,
    pub(crate) peer_cid: ConnectionId,
    /// Where packets go: the peer's address, validated or being validated.
    pub(crate) paths: Paths,
    /// The routes of a connection over several paths at once (made when the `coded`
    /// profile is negotiated and a second route is named or shows up).
    pub(crate) multipath: Option<Multipath>,
    /// The route of the packet built last (0 over one path).
    tx_route: usize,
    pub(crate) state: ConnectionState,
    pub(crate) engine: Option<Engine>,
    /// Seals this connection's short packets and opens the peer's.
    pub(crate) protection: Box<dyn PacketProtection>,
    pub(crate) micros: MicroSet,
    pub(crate) params: Params,
    pub(crate) local_isn: Isn,
    /// This side of the handshake.
    pub(crate) hs: Handshake,
    pub(crate) close_frame: Option<(u64, String)>,
    pub(crate) close_after_drain: Option<CloseReason>,
    pub(crate) drain_until: Option<Instant>,
    pub(crate) stream_finished: bool,
    pub(crate) activity: bool,
    pub(crate) malformed: u64,
    pub(crate) peer_pn_isn: u64,
    pub(crate) largest_peer_pn: Option<u64>,
    /// Id of the last byte-stream chunk queued (causal ordering chains the chunks).
    pub(crate) last_stream_msg: Option<u64>,
    /// The performance monitor's memory (composed connections; a `udt` one keeps its own).
    pub(crate) perf: crate::perfmon::PerfMonitor,
    /// This side initiated the connection (stream ids say which side opened a stream).
    pub(crate) initiator: bool,
    /// Streams this side opened, by kind (bidirectional, unidirectional); the initiator's
    /// first bidirectional one is stream 0.
    pub(crate) opened: [u64; 2],
    /// On a secure channel, the static key the peer proved in the handshake.
    pub(crate) peer_key: Option<[u8; 32]>,
    /// The trailing bytes of the last short packet sent: what a genuine NOSTATE from the
    /// peer echoes (`None` before the first).
    pub(crate) last_sent_echo: Option<[u8; ECHO_LEN]>,
}

/// The AEAD protection of a secure channel: the negotiated suite (the one bit of
/// `suites`, bit `id - 1` for suite `id`) keyed by the handshake's secrets.
fn secure_protection(
    suites: u8,
    secrets: &Secrets,
    limits: KeyLimits,
) -> Box<dyn PacketProtection> {
    let suite = Suite::from_id(suites.trailing_zeros() as u8 + 1).unwrap_or(Suite::Aes128Gcm);
    Box::new(Aead::new(suite, secrets.send, secrets.recv).with_limits(limits))
}

/// Retransmission timeouts in a row after which a connection with another local address
/// gives its path up (the first may be a burst of loss; two are a path that stopped).
const FAIL_OVER_AFTER: u32 = 2;

/// Smallest packet worth building: room for a header, a path-validation frame and the
/// seal (what an unvalidated address's budget must at least allow).
const MIN_PACKET: usize = 48;

/// A packet number further than this beyond the largest seen (or the peer's initial one)
/// is rejected: no real sender loses that many packets in a row, and accepting it would
/// let one stray packet poison the acknowledgement state.
pub const MAX_PN_JUMP: u64 = 1 << 22;

impl ComposedConnection {
    /// True once data can flow.
    pub fn is_established(&self) -> bool {
        matches!(
            self.state,
            ConnectionState::Established | ConnectionState::Closing
        )
    }

    /// The initiator's handling of INIT_ACK: the responder's narrowed offer and cookie.
    /// The offer may only narrow what was asked for; then the engine is composed and the
    /// cookie echoed, with the solution of the client puzzle when the responder asks one
    /// (solved here: at most [`crate::handshake::puzzle::max_hashes`]). Returns the hashes
    /// the puzzle cost, or `None` when the packet is to be dropped.
    /// On a secure channel the key agreement starts here (`me`, `seed` for the ephemeral
    /// key): Noise message 1 goes with the echo.
    pub(crate) fn on_init_ack(
        &mut self,
        now: Instant,
        scid: ConnectionId,
        body: &[u8],
        me: &Identity,
        seed: [u8; 32],
    ) -> Option<u64> {
        let offer = match self.hs.check_init_ack(body) {
            Ok(offer) => offer,
            Err(InitAckError::Malformed) => return None,
            Err(InitAckError::Wider) => {
                self.terminate(CloseReason::Handshake(
                    "responder answered with a profile wider than requested".into(),
                ));
                return None;
            }
            Err(InitAckError::Unencrypted) => {
                self.terminate(CloseReason::Handshake(
                    "the responder's answer drops the encryption that was asked for (was it \
                     rewritten on the way?)"
                        .into(),
                ));
                return None;
            }
        };
        // The puzzle first: a cookie whose puzzle found no solution (odds e^-64) is
        // dropped, and INIT goes again on its timer.
        let solution = match offer.difficulty {
            0 => None,
            d => Some(crate::handshake::puzzle::solve(
                crate::handshake::puzzle::challenge(offer.cookie),
                d,
                0,
            )?),
        };
        let Ok(engine) = compose(offer.micros, &offer.params, self.local_isn, offer.peer_isn)
        else {
            return None;
        };
        self.engine = Some(engine);
        self.peer_pn_isn = offer.peer_isn.pn;
        self.micros = offer.micros;
        self.params = offer.params;
        self.peer_cid = scid;
        self.state = ConnectionState::Echoing;
        self.hs.echo(now, offer.cookie, solution.map(|s| s.nonce));
        if offer.micros.has(MicroId::Secure) {
            self.hs
                .start_initiator(me, &self.local_isn, offer.answer, seed);
        }
        Some(solution.map_or(0, |s| s.hashes))
    }

    /// Responder on a secure channel, at COOKIE_ECHO: reads Noise message 1 and owes
    /// message 2 (see [`Handshake::start_responder`]); the connection waits for message 3.
    pub(crate) fn start_noise(&mut self, start: NoiseStart<'_>) -> Result<(), NoiseError> {
        self.hs.start_responder(start)?;
        self.state = ConnectionState::Authenticating;
        Ok(())
    }

    /// A Noise message from the peer (HANDSHAKE): message 2 at the initiator, message 3 at
    /// the responder. When it proves the peer's key and `policy` accepts it, the channel's
    /// keys seal every packet from then on and the connection is established; a key the
    /// policy refuses ends the handshake with the reason (the responder tells the
    /// initiator, under the new keys). False when the packet is to be dropped (forged,
    /// corrupted, out of turn), which changes nothing. `limits` tightens the keys' own.
    pub(crate) fn on_noise(
        &mut self,
        now: Instant,
        msg: &[u8],
        policy: &PeerPolicy,
        limits: KeyLimits,
    ) -> bool {
        match (self.initiator, &self.state) {
            (true, ConnectionState::Echoing) => {}
            (false, ConnectionState::Authenticating) => {}
            (false, ConnectionState::Established) => {
                // A repeated message 3: the initiator has not heard from us yet.
                self.hs.owe_first_packet();
                return true;
            }
            // A repeated message 2: our message 3 is on its timer.
            _ => return self.initiator,
        }
        let Ok(key) = self.hs.read_noise(msg) else {
            return false;
        };
        let peer = PeerKey {
            key,
            remote: self.remote(),
            peer_initiated: !self.initiator,
        };
        let verdict = policy.check(&peer);
        if self.initiator {
            if let Err(why) = verdict {
                self.terminate(CloseReason::Handshake(format!(
                    "the peer's key was refused: {why}"
                )));
                return true;
            }
        }
        let secrets = if self.initiator {
            self.hs.finish_initiator(now)
        } else {
            self.hs.finish_responder()
        };
        let Ok(secrets) = secrets else {
            return false;
        };
        self.protection = secure_protection(self.params.suites, &secrets, limits);
        self.peer_key = Some(key);
        self.state = ConnectionState::Established;
        self.activity = true;
        if let Err(why) = verdict {
            // The responder refuses the initiator's key: the initiator learns why,
            // authenticated by the keys just agreed.
            self.abort(now, &format!("your key was refused: {why}"));
        }
        true
    }

    /// On a secure channel, the static key the peer proved.
    pub fn peer_key(&self) -> Option<[u8; 32]> {
        self.peer_key
    }

    /// The initiator's handling of REFUSE: the handshake fails with the responder's reason.
    /// False when the packet is to be dropped (malformed).
    pub(crate) fn on_refuse(&mut self, from: SocketAddr, body: &[u8]) -> bool {
        let Some(reason) = crate::handshake::state::refusal(body) else {
            return false;
        };
        self.terminate(CloseReason::Handshake(format!(
            "refused by {from}: {reason}"
        )));
        true
    }

    /// Responder: a repeated COOKIE_ECHO shows that the first packet (on a secure
    /// channel, Noise message 2) was lost.
    pub(crate) fn on_repeated_echo(&mut self) {
        if self.state == ConnectionState::Authenticating {
            self.hs.repeat_noise();
        } else {
            self.hs.owe_first_packet();
        }
    }

    /// A connection this side initiates; it starts by sending INIT.
    pub(crate) fn initiator(
        now: Instant,
        local_cid: ConnectionId,
        remote: SocketAddr,
        profile: &crate::profile::Profile,
        local_isn: Isn,
        handshake_timeout: Duration,
    ) -> Self {
        let params = profile.params.for_peer(remote).fit_recv_buffer();
        ComposedConnection {
            local_cid,
            peer_cid: 0,
            paths: Paths::new(remote),
            multipath: None,
            tx_route: 0,
            state: ConnectionState::Initiating,
            engine: None,
            protection: Box::new(Crc32c),
            micros: profile.micros,
            params,
            local_isn,
            hs: Handshake::initiator(now, profile.micros, params, handshake_timeout),
            close_frame: None,
            close_after_drain: None,
            drain_until: None,
            stream_finished: false,
            activity: false,
            malformed: 0,
            peer_pn_isn: 0,
            largest_peer_pn: None,
            last_stream_msg: None,
            perf: crate::perfmon::PerfMonitor::new(now),
            initiator: true,
            opened: [1, 0],
            peer_key: None,
            last_sent_echo: None,
        }
    }

    /// A connection created by the responder from a valid cookie; established at once.
    pub(crate) fn responder(remote: SocketAddr, k: &CookieContents, engine: Engine) -> Self {
        ComposedConnection {
            local_cid: k.local_cid,
            peer_cid: k.peer_cid,
            paths: Paths::new(remote),
            multipath: None,
            tx_route: 0,
            state: ConnectionState::Established,
            engine: Some(engine),
            protection: Box::new(Crc32c),
            micros: k.micros,
            params: k.params,
            local_isn: k.local_isn,
            hs: Handshake::responder(k.minted, k.micros, k.params),
            close_frame: None,
            close_after_drain: None,
            drain_until: None,
            stream_finished: false,
            activity: false,
            malformed: 0,
            peer_pn_isn: k.peer_isn.pn,
            largest_peer_pn: None,
            last_stream_msg: None,
            perf: crate::perfmon::PerfMonitor::new(k.minted),
            initiator: false,
            opened: [0, 0],
            peer_key: None,
            last_sent_echo: None,
        }
    }

    fn open_engine<'e>(
        state: &ConnectionState,
        engine: &'e mut Option<Engine>,
    ) -> Result<&'e mut Engine, WriteError> {
        if !matches!(state, ConnectionState::Established) {
            return Err(WriteError::NotOpen(format!("{state:?}")));
        }
        engine
            .as_mut()
            .ok_or_else(|| WriteError::NotOpen("no engine".into()))
    }

    /// Queues the first bytes of a stream write of `len` bytes, as many as there is room
    /// for; `take(n)` yields those `n` bytes.
    fn stream_write_with(
        &mut self,
        now: Instant,
        stream: StreamId,
        len: usize,
        take: impl FnOnce(usize) -> Bytes,
    ) -> Result<usize, WriteError> {
        let causal = self.micros.has(MicroId::Causal);
        let e = Self::open_engine(&self.state, &mut self.engine)?;
        let finished = match stream {
            0 => self.stream_finished,
            id => e.stream_retired(id) || e.state().app.tx.stream(id).is_some_and(|s| s.finished),
        };
        if finished {
            return Err(WriteError::Finished);
        }
        let room = e.state().app.tx_room();
        // Sender-side silly-window avoidance (as Linux wakes a TCP writer only once a third
        // of its buffer is free): a write waits until it can queue a good part of itself,
        // not a sliver freed by one acknowledgement. Slivers cost a copied piece and a
        // short message each, on both sides.
        let low_water = (e.state().app.tx_limit / 4).clamp(1, STREAM_CHUNK);
        if room == 0 || room < len.min(low_water) {
            return Err(WriteError::Blocked);
        }
        let n = len.min(room);
        if n == 0 {
            return Ok(0);
        }
        // One buffer for the whole write, shared by chunks of at most STREAM_CHUNK bytes
        // (and never more than the agreed largest message): the receiver delivers a stream
        // chunk once it is complete, so small chunks keep delivery prompt and the receive
        // buffer's accounting fine-grained.
        let chunk = STREAM_CHUNK.min(self.params.max_message as usize);
        let bytes = take(n);
        let stamp = e.state().session.stamp_messages.then_some(now.as_micros());
        let mut at = 0;
        while at < n {
            let end = (at + chunk).min(n);
            let mut out = Outgoing::new(bytes.slice(at..end), true, false, stamp);
            out.stream_id = stream;
            Self::push_tx(e, out, causal, &mut self.last_stream_msg);
            at = end;
        }
        e.dispatch(now, Event::UserData);
        Ok(n)
    }

    /// Queues a send-queue entry (the engine numbers it); a byte-stream chunk names the
    /// previous chunk as its predecessor when the profile orders causally, so the stream
    /// stays in order.
    fn push_tx(
        e: &mut Engine,
        mut out: Outgoing,
        causal: bool,
        last_stream: &mut Option<u64>,
    ) -> u64 {
        if out.stream && out.stream_id == 0 {
            if causal {
                out.deps.extend(last_stream.iter().copied());
            }
            *last_stream = Some(e.next_msg_id());
        }
        e.queue(out)
    }

    fn queue_msg(
        &mut self,
        now: Instant,
        data: Bytes,
        urgent: bool,
        after: &[u64],
    ) -> Result<u64, WriteError> {
        let max = self.params.max_message as usize;
        if data.len() > max {
            return Err(WriteError::TooLarge {
                len: data.len(),
                max,
            });
        }
        let causal = self.micros.has(MicroId::Causal);
        let first_id = self.local_isn.msg;
        if after.len() > MAX_DEPS {
            return Err(WriteError::BadDependency(format!(
                "{} predecessors named, at most {MAX_DEPS}",
                after.len()
            )));
        }
        let e = Self::open_engine(&self.state, &mut self.engine)?;
        let next = e.next_msg_id();
        if let Some(&bad) = after.iter().find(|&&d| d < first_id || d >= next) {
            return Err(WriteError::BadDependency(format!(
                "message {bad} was not sent on this connection before (ids {first_id}..{next})"
            )));
        }
        if data.len() > e.state().app.tx_room() && !e.state().app.tx.is_empty() {
            return Err(WriteError::Blocked);
        }
        let mut out = Outgoing::new(
            data,
            false,
            false,
            e.state().session.stamp_messages.then_some(now.as_micros()),
        );
        out.urgent = urgent;
        if causal {
            out.deps.extend_from_slice(after);
        }
        let id = Self::push_tx(e, out, causal, &mut self.last_stream_msg);
        e.dispatch(now, Event::UserData);
        Ok(id)
    }

    /// Whether data may be written to `stream`: stream 0 (both sides' default), one this
    /// side opened, or a bidirectional one the peer opened (and sent on).
    fn check_stream(&self, stream: StreamId) -> Result<(), WriteError> {
        let kind = kind_of(stream);
        let allowed = if stream == 0 {
            true
        } else if opened_by_initiator(stream) == self.initiator {
            stream >> 2 < self.opened[kind as usize]
        } else {
            kind == StreamKind::Bidirectional
                && self.engine.as_ref().is_some_and(|e| e.peer_opened(stream))
        };
        if allowed {
            return Ok(());
        }
        let why = if kind == StreamKind::Unidirectional
            && opened_by_initiator(stream) != self.initiator
        {
            format!(
                "stream {stream} is the peer's unidirectional stream: only the peer writes on it"
            )
        } else {
            format!("stream {stream} was not opened on this connection")
        };
        Err(WriteError::NoStream(why))
    }

    fn read_gate(&self) -> ReadError {
        match &self.state {
            ConnectionState::Closed(r) => ReadError::Closed(r.clone()),
            _ => ReadError::Blocked,
        }
    }

    /// Takes stream bytes with `take` (which returns what it took and how many bytes);
    /// nothing taken is the end of the stream once the peer finished it, or when nothing
    /// was asked for, and otherwise a wait.
    fn stream_take<T>(
        &mut self,
        now: Instant,
        asked_nothing: bool,
        take: impl FnOnce(&mut std::collections::VecDeque<Bytes>) -> (T, usize),
    ) -> Result<T, ReadError> {
        let gate = self.read_gate();
        let Some(e) = self.engine.as_mut() else {
            return Err(gate);
        };
        let (got, n) = e.read_stream(now, take);
        if n > 0 {
            return Ok(got);
        }
        if e.peer_finished() || asked_nothing {
            return Ok(got);
        }
        Err(gate)
    }

    fn drain_time(&self) -> Duration {
        let rto = self
            .engine
            .as_ref()
            .map_or(200_000, |e| e.state().path.rto_us);
        Duration::from_micros(3 * rto).max(Duration::from_millis(30))
    }

    fn enter_draining(&mut self, now: Instant, reason: CloseReason) {
        self.drain_until = Some(now + self.drain_time());
        self.close_after_drain = Some(reason);
        self.state = ConnectionState::Draining;
    }

    /// Closes because of what this side detected: the peer is told `code` and `why`, the
    /// connection drains and then ends with `reason`.
    fn close_with_code(&mut self, now: Instant, code: u64, why: String, reason: CloseReason) {
        self.close_frame = Some((code, why));
        self.enter_draining(now, reason);
        self.activity = true;
    }

    /// Ends the drain period: the connection closes with the reason it entered it for.
    fn end_drain(&mut self) {
        self.drain_until = None;
        let r = self
            .close_after_drain
            .take()
            .unwrap_or(CloseReason::Graceful);
        self.terminate(r);
    }

    /// Advances a graceful close once everything was delivered.
    pub(crate) fn progress_close(&mut self, now: Instant) {
        if self.state == ConnectionState::Closing && self.is_flushed() {
            self.close_frame = Some((close_code::GRACEFUL, String::new()));
            self.enter_draining(now, CloseReason::Graceful);
        }
    }

    /// Ends the connection with `reason` (no CLOSE sent).
    pub(crate) fn terminate(&mut self, reason: CloseReason) {
        self.hs.stop();
        if !matches!(self.state, ConnectionState::Closed(_)) {
            self.state = ConnectionState::Closed(reason);
            self.activity = true;
        }
    }

    /// Handles a received short packet (the whole datagram): opens it with the connection's
    /// protection, then hands its frames to the engine. [`Dropped::Unopened`] when it does not
    /// open: it was corrupted, forged, or is a late copy recovered to a number it was not
    /// sent with — and nothing of it was parsed.
    ///
    /// `new_address` is the address it came from when that is not the current path's, with
    /// a fresh challenge token: a packet from there that moves the connection (the
    /// newest, carrying more than path validation) starts the move.
    fn on_short_packet(
        &mut self,
        now: Instant,
        packet: &mut [u8],
        new_address: Option<(SocketAddr, [u8; 8])>,
    ) -> Result<(), Dropped> {
        let wire_len = packet.len();
        if matches!(self.state, ConnectionState::Closed(_)) {
            return Ok(());
        }
        if self.state == ConnectionState::Authenticating {
            // No keys yet: nothing can open (the initiator's first data raced its
            // message 3; retransmission brings it again).
            return Err(Dropped::Unopened);
        }
        let Some(e) = self.engine.as_mut() else {
            return Ok(());
        };
        let (isn, largest) = (self.peer_pn_isn, self.largest_peer_pn);
        let recover = |t: Truncated| {
            let pn = t.expand(largest.map_or(isn, |l| l + 1));
            // A number no packet of this connection can have: corrupted in flight.
            let limit = largest.unwrap_or(isn).saturating_add(MAX_PN_JUMP);
            (isn..=limit).contains(&pn).then_some(pn)
        };
        let Ok(Opened { pn, frames }) = open_short(packet, &mut *self.protection, recover) else {
            if self.protection.integrity_exhausted() && self.state != ConnectionState::Draining {
                let why = "too many of your packets failed to open: the keys reached their \
                           integrity limit";
                let code = close_code::INTEGRITY_LIMIT;
                self.close_with_code(now, code, why.into(), CloseReason::IntegrityLimit);
            }
            return Err(Dropped::Unopened);
        };
        // A packet under the channel's keys: the responder has our Noise message 3.
        self.hs.confirmed();
        if self.state == ConnectionState::Draining {
            if e.peer_close(frames).is_some() {
                // The peer closed too: neither side has anything more to say, so the
                // rest of the drain period would only delay the end.
                self.end_drain();
            } else if self.close_frame.is_none() {
                // The peer has not seen our CLOSE yet: say it again.
                if let Some(r) = &self.close_after_drain {
                    let code = match r {
                        CloseReason::Graceful => close_code::GRACEFUL,
                        CloseReason::ProtocolViolation(_) => close_code::PROTOCOL,
                        _ => close_code::ABORT,
                    };
                    self.close_frame = Some((code, r.to_string()));
                }
            }
            return Ok(());
        }
        let newest = self.largest_peer_pn.is_none_or(|l| pn > l);
        match e.receive(now, pn, frames, wire_len) {
            Ok(rx) => {
                self.largest_peer_pn = Some(self.largest_peer_pn.map_or(pn, |l| l.max(pn)));
                let rto = Duration::from_micros(e.state().path.rto_us);
                let multipath = match &mut self.multipath {
                    Some(m) => Some(m),
                    None if self.micros.has(MicroId::Coded) && new_address.is_some() => {
                        Some(self.multipath.insert(Self::routes_of(&self.paths)))
                    }
                    None => None,
                };
                if let Some(m) = multipath {
                    // Over several paths nothing migrates: a new address is a new route.
                    let route = match new_address {
                        None => Some(0),
                        Some((from, token)) => m.route_of(from).or_else(|| {
                            let added = m.add(now, from, token, rto);
                            tracing::debug!(%from, ?added, "a new route from the peer");
                            added
                        }),
                    };
                    if let Some(i) = route {
                        m.on_received(i, wire_len);
                    }
                    e.set_routes(m.usable());
                } else {
                    match new_address {
                        Some((from, token)) if newest && rx.non_probing => {
                            let old = e.switch_path(Default::default());
                            let (vars, challenge) = self.paths.migrate(now, from, old, token, rto);
                            e.switch_path(vars);
                            if challenge {
                                e.owe_path_frame(false, token);
                            }
                            tracing::debug!(to = %from, challenge, "the peer moved");
                            self.paths.on_received(from, wire_len);
                        }
                        Some(_) => {}
                        None => self
                            .paths
                            .on_received(self.paths.current().remote, wire_len),
                    }
                }
                if let Some(token) = rx.challenge {
                    e.owe_path_frame(true, token);
                }
                if let Some(token) = rx.response {
                    if let Some(m) = &mut self.multipath {
                        if let Some(i) = m.on_response(token) {
                            tracing::debug!(route = i, "route validated");
                            e.set_routes(m.usable());
                        }
                    } else if self.paths.on_response(token) {
                        tracing::debug!(remote = %self.paths.current().remote, "path validated");
                    }
                }
                self.activity = true;
                if self.state == ConnectionState::Echoing {
                    self.state = ConnectionState::Established;
                    self.hs.complete();
                }
                if let Some((code, reason)) = rx.close {
                    let r = if code == close_code::GRACEFUL {
                        // One CLOSE in reply lets the peer end its drain period now
                        // instead of waiting it out.
                        self.close_frame = Some((close_code::GRACEFUL, String::new()));
                        CloseReason::Graceful
                    } else {
                        CloseReason::Peer { code, reason }
                    };
                    self.terminate(r);
                }
            }
            Err(_) => self.malformed += 1,
        }
        self.after_engine(now);
        Ok(())
    }

    /// Checks what the microprotocols decided (idle timeout, close progress).
    pub(crate) fn after_engine(&mut self, now: Instant) {
        match self.engine.as_mut().and_then(Engine::take_close) {
            Some(CloseReason::ProtocolViolation(what)) => {
                // The peer is told why, as QUIC's CONNECTION_CLOSE with a transport error.
                tracing::debug!(remote = %self.remote(), "protocol violation: {what}");
                let reason = CloseReason::ProtocolViolation(what.clone());
                self.close_with_code(now, close_code::PROTOCOL, what, reason);
            }
            Some(r) => self.terminate(r),
            None => {}
        }
        self.progress_close(now);
    }

    /// Appends the CLOSE this connection still owes its peer, if any: a packet with only
    /// CLOSE, never held back by congestion control.
    pub(crate) fn build_close(&mut self, out: &mut Vec<u8>) -> bool {
        let Some(e) = self.engine.as_mut() else {
            return false;
        };
        let Some((code, reason)) = self.close_frame.take() else {
            return false;
        };
        e.build_close(self.peer_cid, code, &reason, out, &mut *self.protection);
        true
    }

    /// The routes of a connection over several paths, from its current path and the
    /// further routes it was given.
    fn routes_of(paths: &Paths) -> Multipath {
        let c = paths.current();
        Multipath::new(c.remote, c.local, &paths.further_routes())
    }

    /// Makes the routes of a connection over several paths once `coded` is negotiated and
    /// this side was given a second route (the peer's show up as its packets do).
    fn start_multipath(&mut self) {
        if self.multipath.is_some() || !self.micros.has(MicroId::Coded) {
            return;
        }
        let Some(e) = self.engine.as_mut() else {
            return;
        };
        let m = Self::routes_of(&self.paths);
        if m.routes().len() > 1 {
            e.set_routes(m.usable());
            self.multipath = Some(m);
        }
    }

    /// Appends the next short packet, if any, to `out`.
    pub(crate) fn build_short(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        let before = out.len();
        let built = self.build_short_within_budget(now, out);
        if built {
            let bytes = out.len() - before;
            match &mut self.multipath {
                Some(m) => m.on_sent(self.tx_route, bytes),
                None => self.paths.on_sent(bytes),
            }
            self.last_sent_echo = Some(NoState::echo_of(&out[before..]));
        }
        built
    }

    /// A NOSTATE from the peer's address for this connection, with the trailing bytes of
    /// the packet that triggered it. Honoured only when `echo` is the end of the last
    /// packet this side sent (on a secure channel its AEAD tag, which nobody who did not
    /// see the packet can produce): a draining connection ends its drain at once, any
    /// other live one closes with [`CloseReason::PeerForgot`]. Returns whether it was
    /// honoured; anything else is ignored.
    pub(crate) fn on_nostate(&mut self, echo: &[u8; ECHO_LEN]) -> bool {
        let Some(last) = &self.last_sent_echo else {
            return false;
        };
        // Compared in constant time: nothing about a guess leaks through timing.
        if last.iter().zip(echo).fold(0, |d, (a, b)| d | (a ^ b)) != 0 {
            return false;
        }
        match self.state {
            // Our CLOSE reached a peer that had already forgotten: the close is complete.
            ConnectionState::Draining => self.end_drain(),
            ConnectionState::Established | ConnectionState::Closing => {
                tracing::debug!(remote = %self.remote(), "the peer has no state for the connection");
                self.terminate(CloseReason::PeerForgot);
            }
            _ => return false,
        }
        true
    }

    /// [`Self::build_short`] within what may be sent to the current address: a packet as
    /// large as the peer takes, or smaller while the address is not validated.
    fn build_short_within_budget(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        if matches!(
            self.state,
            ConnectionState::Established | ConnectionState::Closing
        ) {
            self.start_multipath();
        }
        // The route: one whose challenge is due, else the one the latest packet came in on
        // (a microprotocol scheduling data over the routes may choose another below).
        let (route, challenge) = match &mut self.multipath {
            Some(m) => match m.due_challenge(now, MIN_PACKET) {
                Some((i, token)) => (i, Some(token)),
                None => (m.default_route(), None),
            },
            None => (0, None),
        };
        let budget = match &self.multipath {
            Some(m) => m.budget(route),
            None => self.paths.send_budget(),
        };
        let max = budget.min(self.params.max_udp_payload as usize);
        if max < MIN_PACKET {
            return false;
        }
        self.tx_route = route;
        if self.build_close(out) {
            return true;
        }
        let Some(e) = self.engine.as_mut() else {
            return false;
        };
        if !matches!(
            self.state,
            ConnectionState::Established | ConnectionState::Closing
        ) {
            return false;
        }
        if let Some(m) = &self.multipath {
            let mut routes = m.usable();
            if let Some(token) = challenge {
                e.owe_path_frame(false, token);
                routes.required = Some(route as u8);
            }
            e.set_routes(routes);
        }
        if self.hs.take_first_packet() {
            // The responder's first short packet tells the initiator that the connection
            // exists; make sure one goes out (and is acknowledged) even without data.
            e.owe_ping();
        }
        let room = e.state().app.tx_room();
        let built = e.build_packet(now, self.peer_cid, max, out, &mut *self.protection);
        if let Some(chosen) = e.state().routes.chosen {
            self.tx_route = usize::from(chosen);
        }
        if e.state().app.tx_room() > room {
            // Writers blocked on a full send buffer can go on.
            self.activity = true;
        }
        self.after_engine(now);
        built
    }

    /// Opens a stream of this side, naming `service` to the peer if given.
    fn open_stream_with(
        &mut self,
        kind: StreamKind,
        priority: u8,
        service: Option<u64>,
    ) -> Result<StreamId, WriteError> {
        if !(self.micros.has(MicroId::Fifo) && self.micros.is_reliable()) {
            return Err(WriteError::NoStream(
                "streams need an ordered, reliable profile (with `fifo`, and `arq` or `coded`)"
                    .into(),
            ));
        }
        let id = stream_id(self.initiator, kind, self.opened[kind as usize]);
        let e = Self::open_engine(&self.state, &mut self.engine)?;
        if e.state().app.tx.stream_count() >= MAX_STREAMS {
            return Err(WriteError::NoStream(format!(
                "{MAX_STREAMS} streams are open on this connection"
            )));
        }
        match service {
            Some(service) => e.open_stream_for(id, priority, service),
            None => e.open_stream(id, priority),
        }
        self.opened[kind as usize] += 1;
        Ok(id)
    }
}

impl ConnectionCore for ComposedConnection {
    /// Current state.
    fn state(&self) -> &ConnectionState {
        &self.state
    }

    fn take_activity(&mut self) -> bool {
        core::mem::take(&mut self.activity)
    }

    /// A short packet (the whole datagram), opened in place by the connection's protection.
    fn handle_datagram(&mut self, now: Instant, datagram: &mut [u8]) -> Result<(), Dropped> {
        self.on_short_packet(now, datagram, None)
    }

    /// A short packet from an address that is not the current path's: handled as any
    /// other, and the connection moves there when it shows the peer did.
    fn handle_datagram_from(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &mut [u8],
        token: [u8; 8],
    ) -> Result<(), Dropped> {
        self.on_short_packet(now, datagram, Some((from, token)))
    }

    /// The handshake packet due (INIT or COOKIE_ECHO), else the next short packet.
    fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        if self.hs.take_due()
            && self.hs.packet(
                &self.state,
                self.local_cid,
                self.peer_cid,
                &self.local_isn,
                out,
            )
        {
            return true;
        }
        self.build_short(now, out)
    }

    fn take_farewell(&mut self, out: &mut Vec<u8>) -> bool {
        let before = out.len();
        let built = self.build_close(out);
        if built {
            self.last_sent_echo = Some(NoState::echo_of(&out[before..]));
        }
        built
    }

    /// Hands a custom control message (e.g. a [`ctp_cc::RateMessage`] from a
    /// [`ctp_cc::group::GroupBudget`], or a new `blast` rate) to the congestion-control
    /// algorithm; false when the connection is not open or composes no `cc`.
    fn congestion_message(&mut self, now: Instant, msg: &[u8]) -> bool {
        self.engine
            .as_mut()
            .is_some_and(|e| e.congestion_message(now, msg))
    }

    /// The connection id this side chose (carried in every packet sent to it).
    fn local_id(&self) -> ConnectionId {
        self.local_cid
    }

    /// The peer's address.
    fn remote(&self) -> SocketAddr {
        self.paths.current().remote
    }

    fn local(&self) -> Option<SocketAddr> {
        self.paths.current().local
    }

    fn destination(&self) -> (SocketAddr, Option<SocketAddr>) {
        match self
            .multipath
            .as_ref()
            .and_then(|m| m.addresses(self.tx_route))
        {
            Some(route) => route,
            None => (self.remote(), self.local()),
        }
    }

    /// The negotiated microprotocols.
    fn micros(&self) -> MicroSet {
        self.micros
    }

    /// The negotiated parameters.
    fn params(&self) -> &Params {
        &self.params
    }

    /// Snapshot of every counter.
    fn stats(&self) -> ConnectionStats {
        let Some(e) = &self.engine else {
            return ConnectionStats {
                malformed_dropped: self.malformed,
                ..Default::default()
            };
        };
        let s = &e.state().path;
        let mut st = e.state().stats;
        st.malformed_dropped += self.malformed;
        st.srtt_us = s.srtt_us;
        st.rttvar_us = s.rttvar_us;
        st.min_rtt_us = if s.min_rtt_us == u64::MAX {
            0
        } else {
            s.min_rtt_us
        };
        st.rto_us = s.rto_us;
        st.cwnd = if s.cwnd == u64::MAX { 0 } else { s.cwnd };
        st.bytes_in_flight = s.bytes_in_flight;
        st.pacing_rate = s.pacing_rate;
        st.buffered_bytes = self.buffered_bytes();
        st.streams_with_state = e.streams_with_state() as u64;
        st.path_mtu = s.plpmtu as u64;
        st.path_migrations = self.paths.migrations;
        st.path_validation_failures = self.paths.failed_validations;
        st.routes = self
            .multipath
            .as_ref()
            .map_or(1, |m| u64::from(m.usable().usable.count_ones()));
        let current = self.paths.current();
        if !current.validated {
            st.path_unvalidated_sent = current.sent;
            st.path_unvalidated_received = current.received;
        }
        st
    }

    /// The performance monitor (UDT's `perfmon(u, &perf, clear)`): UDT's counters as
    /// totals, since the last clearing query, and the values of the moment; with `clear`
    /// the next interval starts now. A `udt` connection has every field; a composed one
    /// derives them from its counters, with no flow window, bandwidth estimate, receive
    /// buffer room, receiver loss, received-data, received-ACK or send-duration counts (0).
    fn perfmon(&mut self, now: Instant, clear: bool) -> PerfMon {
        let s = self.stats();
        let payload = self
            .engine
            .as_ref()
            .map_or(1, |e| e.state().session.max_segment_payload as u64);
        let room = self
            .engine
            .as_ref()
            .map_or(0, |e| e.state().app.tx_room() as u64);
        let instant = crate::perfmon::instant_from_stats(&s, payload, room);
        self.perf.query(now, &s, instant, clear)
    }

    /// Bytes of data held in buffers (send queue, live segments at their largest size,
    /// reassembled messages waiting for ordering, receive queue): a gauge of the memory the
    /// connection uses for data.
    fn unacked_bytes(&self) -> u64 {
        let Some(e) = &self.engine else { return 0 };
        let st = e.state();
        (st.app.tx_bytes + st.segs.unacked_bytes()) as u64
    }

    fn buffered_bytes(&self) -> u64 {
        let Some(e) = &self.engine else { return 0 };
        let st = e.state();
        let app = &st.app;
        let segs = st.segs.live() * st.session.max_segment_payload;
        (app.tx_bytes + app.rx_bytes + app.parked_bytes + segs) as u64
    }

    /// Queues bytes of the ordered byte stream; returns how many were accepted.
    fn stream_write(&mut self, now: Instant, data: &[u8]) -> Result<usize, WriteError> {
        self.stream_write_with(now, 0, data.len(), |n| Bytes::copy_from_slice(&data[..n]))
    }

    /// Queues bytes of the ordered byte stream without copying them (the connection keeps
    /// a reference to `data` until they are acknowledged); returns how many were accepted,
    /// a prefix of `data`.
    fn stream_write_bytes(&mut self, now: Instant, data: &Bytes) -> Result<usize, WriteError> {
        self.stream_write_with(now, 0, data.len(), |n| data.slice(..n))
    }

    /// Ends the byte stream: the peer reads end-of-stream after everything written before.
    fn stream_finish(&mut self, now: Instant) -> Result<(), WriteError> {
        if self.stream_finished {
            return Ok(());
        }
        let causal = self.micros.has(MicroId::Causal);
        let e = Self::open_engine(&self.state, &mut self.engine)?;
        let out = Outgoing::new(Bytes::new(), true, true, None);
        Self::push_tx(e, out, causal, &mut self.last_stream_msg);
        e.dispatch(now, Event::UserData);
        self.stream_finished = true;
        Ok(())
    }

    /// Queues one message. A message larger than the send buffer is accepted when the
    /// buffer is empty, so any message up to the negotiated maximum can be sent.
    /// Composed profiles have no per-message options (their microprotocols decide
    /// reliability and order): `_opts` is ignored.
    fn send_msg(&mut self, now: Instant, data: Bytes, _opts: MsgOptions) -> Result<(), WriteError> {
        self.queue_msg(now, data, false, &[]).map(|_| ())
    }

    /// Queues one message that the receiver delivers only after the earlier messages `after`
    /// (ids returned by previous calls) were delivered; returns the new message's id. With
    /// the `causal` microprotocol a message naming no predecessor is delivered as soon as it
    /// is complete; other profiles ignore the list (their own order applies).
    fn send_msg_after(
        &mut self,
        now: Instant,
        data: Bytes,
        after: &[u64],
    ) -> Result<u64, WriteError> {
        self.queue_msg(now, data, false, after)
    }

    /// Queues one urgent (out-of-band) message: with the `urgent` microprotocol the receiver
    /// delivers it as soon as it is complete, ahead of the ordering in force.
    fn send_urgent(&mut self, now: Instant, data: Bytes) -> Result<(), WriteError> {
        self.queue_msg(now, data, true, &[]).map(|_| ())
    }

    /// Reads from the byte stream. `Ok(0)` means the peer finished the stream.
    fn stream_read(&mut self, now: Instant, buf: &mut [u8]) -> Result<usize, ReadError> {
        let asked_nothing = buf.is_empty();
        self.stream_take(now, asked_nothing, |q| {
            let n = crate::chunk_queue::read_into(q, buf);
            (n, n)
        })
    }

    /// Reads from the byte stream without copying: the next received chunk, at most `max`
    /// bytes of it. An empty chunk means the peer finished the stream.
    fn stream_read_chunk(&mut self, now: Instant, max: usize) -> Result<Bytes, ReadError> {
        self.stream_take(now, max == 0, |q| {
            let chunk = crate::chunk_queue::take_front(q, max);
            let n = chunk.len();
            (chunk, n)
        })
    }

    /// Opens a stream of this side with `priority` (higher is served first); data written
    /// to it travels without a round trip to set it up. Streams need an ordered, reliable
    /// profile (`fifo` and `arq`).
    fn open_stream(&mut self, kind: StreamKind, priority: u8) -> Result<StreamId, WriteError> {
        self.open_stream_with(kind, priority, None)
    }

    fn open_stream_for(
        &mut self,
        kind: StreamKind,
        priority: u8,
        service: u64,
    ) -> Result<StreamId, WriteError> {
        self.open_stream_with(kind, priority, Some(service))
    }

    fn stream_service(&self, stream: StreamId) -> Option<u64> {
        self.engine.as_ref()?.stream_service(stream)
    }

    fn write_last_on(
        &mut self,
        now: Instant,
        stream: StreamId,
        data: &[u8],
    ) -> Result<usize, WriteError> {
        if stream == 0 {
            return Err(WriteError::NoStream(
                "stream 0 ends with stream_finish, after its data".into(),
            ));
        }
        self.check_stream(stream)?;
        let e = Self::open_engine(&self.state, &mut self.engine)?;
        if e.stream_retired(stream) || e.state().app.tx.stream(stream).is_some_and(|s| s.finished) {
            return Err(WriteError::Finished);
        }
        let max = (self.params.max_message as usize).min(STREAM_CHUNK);
        if data.len() > max {
            return Err(WriteError::TooLarge {
                len: data.len(),
                max,
            });
        }
        if e.state().app.tx_room() < data.len() {
            return Ok(0);
        }
        let stamp = e.state().session.stamp_messages.then_some(now.as_micros());
        let mut out = Outgoing::new(Bytes::copy_from_slice(data), true, true, stamp);
        out.stream_id = stream;
        e.queue(out);
        e.finish_stream(stream);
        e.dispatch(now, Event::UserData);
        Ok(data.len())
    }

    fn reset_on(&mut self, now: Instant, stream: StreamId, code: u64) -> Result<(), WriteError> {
        if stream == 0 {
            return Err(WriteError::NoStream(
                "stream 0 is the connection's own: abort the connection instead".into(),
            ));
        }
        self.check_stream(stream)?;
        let e = Self::open_engine(&self.state, &mut self.engine)?;
        if e.stream_retired(stream) {
            return Err(WriteError::Finished);
        }
        e.reset_stream(stream, code);
        e.dispatch(now, Event::UserData);
        Ok(())
    }

    fn set_priority(&mut self, stream: StreamId, priority: u8) -> Result<(), WriteError> {
        let e = Self::open_engine(&self.state, &mut self.engine)?;
        e.open_stream(stream, priority);
        Ok(())
    }

    fn write_on(
        &mut self,
        now: Instant,
        stream: StreamId,
        data: &[u8],
    ) -> Result<usize, WriteError> {
        self.check_stream(stream)?;
        self.stream_write_with(now, stream, data.len(), |n| {
            Bytes::copy_from_slice(&data[..n])
        })
    }

    fn finish_on(&mut self, now: Instant, stream: StreamId) -> Result<(), WriteError> {
        if stream == 0 {
            return self.stream_finish(now);
        }
        self.check_stream(stream)?;
        let e = Self::open_engine(&self.state, &mut self.engine)?;
        if e.stream_retired(stream) || e.state().app.tx.stream(stream).is_some_and(|s| s.finished) {
            return Ok(());
        }
        let mut out = Outgoing::new(Bytes::new(), true, true, None);
        out.stream_id = stream;
        e.queue(out);
        e.finish_stream(stream);
        e.dispatch(now, Event::UserData);
        Ok(())
    }

    fn read_on(
        &mut self,
        now: Instant,
        stream: StreamId,
        buf: &mut [u8],
    ) -> Result<usize, ReadError> {
        if stream == 0 {
            return self.stream_read(now, buf);
        }
        let gate = self.read_gate();
        let Some(e) = self.engine.as_mut() else {
            return Err(gate);
        };
        match e.read_stream_on(now, stream, |q| {
            let n = crate::chunk_queue::read_into(q, buf);
            (n, n)
        }) {
            Some(StreamRead::Data(n, _, _)) if n > 0 => Ok(n),
            Some(StreamRead::Data(_, _, true) | StreamRead::End) => Ok(0),
            Some(StreamRead::Reset(code)) => Err(ReadError::Reset(code)),
            _ => Err(gate),
        }
    }

    fn accept_stream(&mut self) -> Option<StreamId> {
        self.engine.as_mut().and_then(Engine::accept_stream)
    }

    /// Takes the next received message.
    fn recv_msg(&mut self, now: Instant) -> Result<Bytes, ReadError> {
        let gate = self.read_gate();
        let Some(e) = self.engine.as_mut() else {
            return Err(gate);
        };
        e.recv_msg(now).ok_or(gate)
    }

    /// Bytes that can be written now without blocking.
    fn send_room(&self) -> usize {
        self.engine.as_ref().map_or(0, |e| e.state().app.tx_room())
    }

    /// Bytes written and not yet sent: what a sender that writes just in time (like TCP's
    /// `TCP_NOTSENT_LOWAT`) keeps small, so the data it writes is still in cache when it goes
    /// out. On the ctp wire these are the bytes not yet cut into segments (the segmenter
    /// cuts a few segments before they leave, at most `CUT_AHEAD`); on the UDT4 wire,
    /// packets never sent, each counted at the full payload size.
    fn unsent_bytes(&self) -> usize {
        self.engine.as_ref().map_or(0, |e| e.state().app.tx_bytes)
    }

    fn messages_done_below(&self) -> Option<u64> {
        self.engine
            .as_ref()
            .map(|e| e.state().messages_done_below())
    }

    fn watch_stream(&mut self, stream: StreamId) -> Result<(), WriteError> {
        self.check_stream(stream)?;
        if !self.micros.is_reliable() {
            return Err(WriteError::NoStream(
                "a stream's done barrier needs a reliable profile".into(),
            ));
        }
        Self::open_engine(&self.state, &mut self.engine)?.watch_stream(stream);
        Ok(())
    }

    fn stream_done_below(&self, stream: StreamId) -> Option<u64> {
        self.engine
            .as_ref()
            .map(|e| e.state().stream_done_below(stream))
    }

    fn stream_written(&self, stream: StreamId) -> Option<u64> {
        let e = self.engine.as_ref()?;
        let tx = &e.state().app.tx;
        Some(tx.stream(stream).map_or(0, |s| s.next_offset))
    }

    /// True when the peer ended its byte stream ([`ConnectionCore::stream_finish`]) and the
    /// end reached the receive queue in order, after every byte before it. A graceful close
    /// without it reads as the end of the stream too, but proves nothing about the stream
    /// being whole. Always false on the UDT4 wire, which has no end-of-stream mark.
    fn peer_finished(&self) -> bool {
        self.engine.as_ref().is_some_and(Engine::peer_finished)
    }

    /// True when everything written was acknowledged (or, unreliably, sent).
    fn is_flushed(&self) -> bool {
        self.engine
            .as_ref()
            .is_none_or(|e| e.state().app.tx.is_empty() && e.state().segs.live() == 0)
    }

    /// Asks for an orderly close: outstanding data is delivered first, then CLOSE is sent.
    fn close(&mut self, now: Instant) {
        match self.state {
            ConnectionState::Established => {
                self.state = ConnectionState::Closing;
                self.progress_close(now);
            }
            ConnectionState::Initiating
            | ConnectionState::Echoing
            | ConnectionState::Authenticating => {
                self.state = ConnectionState::Closed(CloseReason::LocalAbort(
                    "closed before set-up finished".into(),
                ))
            }
            _ => {}
        }
    }

    /// Aborts at once: the peer is told the reason; buffered data is discarded.
    fn abort(&mut self, now: Instant, reason: &str) {
        if matches!(
            self.state,
            ConnectionState::Closed(_) | ConnectionState::Draining
        ) {
            return;
        }
        if self.engine.is_some() && self.state != ConnectionState::Authenticating {
            self.close_frame = Some((close_code::ABORT, reason.to_string()));
            self.enter_draining(now, CloseReason::LocalAbort(reason.to_string()));
        } else {
            self.state = ConnectionState::Closed(CloseReason::LocalAbort(reason.to_string()));
        }
        self.activity = true;
    }

    /// Fires due timers.
    fn handle_timeout(&mut self, now: Instant) {
        if !self.hs.handle_timeout(now) {
            self.terminate(CloseReason::Handshake(format!(
                "no answer from {} (handshake timed out)",
                self.remote()
            )));
            return;
        }
        if let Some(d) = self.drain_until {
            if d <= now {
                self.end_drain();
                return;
            }
        }
        if matches!(
            self.state,
            ConnectionState::Established | ConnectionState::Closing
        ) {
            if let Some(e) = self.engine.as_mut() {
                match self.paths.on_timeout(now, |vars| {
                    e.switch_path(vars);
                }) {
                    Some(PathAction::Rechallenge(token)) => e.owe_path_frame(false, token),
                    Some(PathAction::Failed { restored: true }) => tracing::debug!(
                        remote = %self.paths.current().remote,
                        "the new address did not answer its challenge: back to the validated one"
                    ),
                    Some(PathAction::Failed { restored: false }) => {
                        self.terminate(CloseReason::PathFailed(
                            "the peer's new address did not answer path validation".into(),
                        ));
                        return;
                    }
                    None => {}
                }
                e.handle_timeout(now);
                if e.state().path.rto_backoff >= FAIL_OVER_AFTER {
                    let rto = Duration::from_micros(e.state().path.rto_us);
                    if let Some(vars) = self.paths.fail_over(&e.state().path, rto) {
                        tracing::debug!(
                            local = ?self.paths.current().local,
                            "no answer on the path: moving to another local address"
                        );
                        e.switch_path(vars);
                        e.owe_ping();
                    }
                }
                self.activity = true;
            }
            self.after_engine(now);
        }
    }

    /// The earliest deadline of this connection.
    fn poll_timeout(&self) -> Option<Instant> {
        let (engine, paths) = match self.state {
            ConnectionState::Established | ConnectionState::Closing => (
                self.engine.as_ref().and_then(|e| e.next_timeout()),
                self.paths.deadline(),
            ),
            _ => (None, None),
        };
        [engine, self.hs.poll_timeout(), self.drain_until, paths]
            .into_iter()
            .flatten()
            .min()
    }
}
