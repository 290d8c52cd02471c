//! One connection of an [`crate::Endpoint`]: a [`ConnectionCore`] — the composed one
//! ([`composed::ComposedConnection`], ctp's wire) or the UDT4 one
//! ([`crate::udt::conn::UdtConnection`]) — behind the application-facing operations (byte
//! stream, messages, close, reports).
//!
//! The two cores are an enum, not a `Box<dyn ConnectionCore>`: the composed core stays
//! inline in the endpoint's table (no pointer to follow per packet), and the few
//! operations only one core has (the UDT4 connection's own API, the composed handshake)
//! reach it without downcasting. Every call is one match and one call through the trait.

pub mod composed;
pub mod multipath;
pub mod paths;

use crate::conn_core::{ConnectionCore, Dropped};
use crate::engine::session::CloseReason;
use crate::perfmon::PerfMon;
use crate::profile::{MicroSet, Params};
use crate::stats::ConnectionStats;
use crate::udt::conn::UdtConnection;
use crate::unreachable::{Unreachable, UNREACHABLE_GRACE};
use crate::wire::header::ConnectionId;
use bytes::Bytes;
use ctp_cc::time::Instant;
use std::net::SocketAddr;

pub use self::composed::{ComposedConnection, MAX_PN_JUMP};
pub use crate::conn_state::{ConnectionState, MsgOptions, ReadError, WriteError, STREAM_CHUNK};
pub use crate::engine::streams::{StreamId, StreamKind, MAX_STREAMS, MIN_BARRIER};
pub use crate::handshake::{HANDSHAKE_MAX_RTO, HANDSHAKE_RTO};

/// The core of a connection.
#[allow(
    clippy::large_enum_variant,
    reason = "the composed core stays inline in the endpoint's table, as it was before \
              the interface: boxing it would add a pointer to follow on every packet"
)]
enum Core {
    /// ctp's wire: handshake, protection and the composed engine.
    Composed(ComposedConnection),
    /// UDT4's wire (the `udt` profiles); boxed, the rarer and larger of the two.
    Udt(Box<UdtConnection>),
}

/// One connection of an [`crate::Endpoint`].
pub struct Connection {
    core: Core,
    /// When the network first reported the peer unreachable during the handshake.
    unreachable_since: Option<Instant>,
}

impl From<ComposedConnection> for Connection {
    fn from(c: ComposedConnection) -> Self {
        Connection {
            core: Core::Composed(c),
            unreachable_since: None,
        }
    }
}

impl From<UdtConnection> for Connection {
    fn from(u: UdtConnection) -> Self {
        Connection {
            core: Core::Udt(Box::new(u)),
            unreachable_since: None,
        }
    }
}

impl Connection {
    /// The core, whichever it is.
    pub fn core(&self) -> &dyn ConnectionCore {
        match &self.core {
            Core::Composed(c) => c,
            Core::Udt(u) => &**u,
        }
    }

    /// The core, whichever it is, mutably.
    pub fn core_mut(&mut self) -> &mut dyn ConnectionCore {
        match &mut self.core {
            Core::Composed(c) => c,
            Core::Udt(u) => &mut **u,
        }
    }

    /// The composed core behind a connection on ctp's wire.
    pub fn composed(&self) -> Option<&ComposedConnection> {
        match &self.core {
            Core::Composed(c) => Some(c),
            Core::Udt(_) => None,
        }
    }

    /// The composed core behind a connection on ctp's wire, mutably.
    pub fn composed_mut(&mut self) -> Option<&mut ComposedConnection> {
        match &mut self.core {
            Core::Composed(c) => Some(c),
            Core::Udt(_) => None,
        }
    }

    /// The UDT connection behind a `udt`-profile connection.
    pub fn udt(&self) -> Option<&UdtConnection> {
        match &self.core {
            Core::Udt(u) => Some(u),
            Core::Composed(_) => None,
        }
    }

    /// Mutable access to the UDT connection behind a `udt`-profile connection (message
    /// TTL and in-order flag: [`UdtConnection::send_msg`]).
    pub fn udt_mut(&mut self) -> Option<&mut UdtConnection> {
        match &mut self.core {
            Core::Udt(u) => Some(u),
            Core::Composed(_) => None,
        }
    }

    /// On a secure channel, the static key the peer proved in the handshake (`None`
    /// before it did, and on connections without encryption).
    pub fn peer_key(&self) -> Option<[u8; 32]> {
        self.composed().and_then(ComposedConnection::peer_key)
    }

    /// Current state.
    pub fn state(&self) -> &ConnectionState {
        self.core().state()
    }

    /// True once data can flow.
    pub fn is_established(&self) -> bool {
        matches!(
            self.state(),
            ConnectionState::Established | ConnectionState::Closing
        )
    }

    /// Hands a custom control message (e.g. a [`ctp_cc::RateMessage`] from a
    /// [`ctp_cc::group::GroupBudget`], or a new `blast` rate) to the congestion-control
    /// algorithm; false when the connection is not open or composes no `cc`.
    pub fn congestion_message(&mut self, now: Instant, msg: &[u8]) -> bool {
        self.core_mut().congestion_message(now, msg)
    }

    /// The close reason once closed.
    pub fn close_reason(&self) -> Option<&CloseReason> {
        self.core().close_reason()
    }

    /// The connection id this side chose (carried in every packet sent to it; the socket
    /// id on the UDT4 wire).
    pub fn local_cid(&self) -> ConnectionId {
        self.core().local_id()
    }

    /// The peer's address.
    pub fn remote(&self) -> SocketAddr {
        self.core().remote()
    }

    /// The local address this connection sends from, when it is not the socket's own.
    pub fn local(&self) -> Option<SocketAddr> {
        self.core().local()
    }

    /// Where the datagram built last goes: (peer address, local address).
    pub(crate) fn destination(&self) -> (SocketAddr, Option<SocketAddr>) {
        self.core().destination()
    }

    /// The negotiated microprotocols.
    pub fn micros(&self) -> MicroSet {
        self.core().micros()
    }

    /// The negotiated parameters.
    pub fn params(&self) -> &Params {
        self.core().params()
    }

    /// Snapshot of every counter.
    pub fn stats(&self) -> ConnectionStats {
        self.core().stats()
    }

    /// The performance monitor (UDT's `perfmon(u, &perf, clear)`): UDT's counters as
    /// totals, since the last clearing query, and the values of the moment; with `clear`
    /// the next interval starts now. A `udt` connection has every field; a composed one
    /// derives them from its counters, with no flow window, bandwidth estimate, receive
    /// buffer room, receiver loss, received-data, received-ACK or send-duration counts (0).
    pub fn perfmon(&mut self, now: Instant, clear: bool) -> PerfMon {
        self.core_mut().perfmon(now, clear)
    }

    /// Bytes of data held in buffers (send queue, live segments at their largest size,
    /// reassembled messages waiting for ordering, receive queue): a gauge of the memory the
    /// connection uses for data.
    pub fn buffered_bytes(&self) -> u64 {
        self.core().buffered_bytes()
    }

    /// Queues bytes of the ordered byte stream; returns how many were accepted.
    pub fn stream_write(&mut self, now: Instant, data: &[u8]) -> Result<usize, WriteError> {
        self.core_mut().stream_write(now, data)
    }

    /// Queues bytes of the ordered byte stream without copying them (the connection keeps
    /// a reference to `data` until they are acknowledged); returns how many were accepted,
    /// a prefix of `data`.
    pub fn stream_write_bytes(&mut self, now: Instant, data: &Bytes) -> Result<usize, WriteError> {
        self.core_mut().stream_write_bytes(now, data)
    }

    /// Ends the byte stream: the peer reads end-of-stream after everything written before.
    pub fn stream_finish(&mut self, now: Instant) -> Result<(), WriteError> {
        self.core_mut().stream_finish(now)
    }

    /// Queues one message. A message larger than the send buffer is accepted when the
    /// buffer is empty, so any message up to the negotiated maximum can be sent.
    pub fn send_msg(&mut self, now: Instant, data: Bytes) -> Result<(), WriteError> {
        self.core_mut().send_msg(now, data, MsgOptions::default())
    }

    /// Queues one message with per-message options (UDT's `sendmsg(data, ttl, inorder)`).
    /// On a `udt` connection the time-to-live and the in-order flag travel as UDT4 does: a
    /// message still unacknowledged when its TTL ran out is not retransmitted but dropped
    /// with a drop request. Composed profiles have no per-message options (their
    /// microprotocols decide reliability and order): there the options are ignored and this
    /// is [`Connection::send_msg`].
    pub fn send_msg_with(
        &mut self,
        now: Instant,
        data: Bytes,
        opts: MsgOptions,
    ) -> Result<(), WriteError> {
        self.core_mut().send_msg(now, data, opts)
    }

    /// Queues one message that the receiver delivers only after the earlier messages `after`
    /// (ids returned by previous calls) were delivered; returns the new message's id. With
    /// the `causal` microprotocol a message naming no predecessor is delivered as soon as it
    /// is complete; other profiles ignore the list (their own order applies). On the UDT4
    /// wire it is a plain message and its id 0.
    pub fn send_msg_after(
        &mut self,
        now: Instant,
        data: Bytes,
        after: &[u64],
    ) -> Result<u64, WriteError> {
        self.core_mut().send_msg_after(now, data, after)
    }

    /// Every message with a smaller id (as [`Connection::send_msg_after`] returns them)
    /// passed the done barrier whole: acknowledged by the peer, with a reliable profile.
    /// What a group connection counts a copy done by; `None` on the UDT4 wire.
    pub fn messages_done_below(&self) -> Option<u64> {
        self.core().messages_done_below()
    }

    /// Has `stream`'s chunks counted for its done barrier from now on
    /// ([`Connection::stream_done_below`]); needs a reliable profile with streams.
    pub fn watch_stream(&mut self, stream: StreamId) -> Result<(), WriteError> {
        self.core_mut().watch_stream(stream)
    }

    /// Every chunk written to watched `stream` that starts below this offset passed the
    /// done barrier whole (acknowledged): the bytes below the offset
    /// [`Connection::stream_written`] gave before a write are done once this reaches the
    /// offset it gives after it. `u64::MAX` once the stream ended and all of it was done.
    pub fn stream_done_below(&self, stream: StreamId) -> Option<u64> {
        self.core().stream_done_below(stream)
    }

    /// Bytes written to `stream` so far: the offset its next byte gets.
    pub fn stream_written(&self, stream: StreamId) -> Option<u64> {
        self.core().stream_written(stream)
    }

    /// Queues one urgent (out-of-band) message: with the `urgent` microprotocol the receiver
    /// delivers it as soon as it is complete, ahead of the ordering in force.
    pub fn send_urgent(&mut self, now: Instant, data: Bytes) -> Result<(), WriteError> {
        self.core_mut().send_urgent(now, data)
    }

    /// Reads from the byte stream. `Ok(0)` means the peer finished the stream.
    pub fn stream_read(&mut self, now: Instant, buf: &mut [u8]) -> Result<usize, ReadError> {
        self.core_mut().stream_read(now, buf)
    }

    /// Reads from the byte stream without copying: the next received chunk, at most `max`
    /// bytes of it. An empty chunk means the peer finished the stream.
    pub fn stream_read_chunk(&mut self, now: Instant, max: usize) -> Result<Bytes, ReadError> {
        self.core_mut().stream_read_chunk(now, max)
    }

    /// Takes the next received message.
    pub fn recv_msg(&mut self, now: Instant) -> Result<Bytes, ReadError> {
        self.core_mut().recv_msg(now)
    }

    /// Opens a stream of this side, of `kind`, with `priority` (higher is served first;
    /// equal priorities take turns). Nothing is sent to open it: the peer learns of it with
    /// its first data. Stream 0 is the byte stream of [`Connection::stream_write`].
    pub fn open_stream(&mut self, kind: StreamKind, priority: u8) -> Result<StreamId, WriteError> {
        self.core_mut().open_stream(kind, priority)
    }

    /// Opens a stream of this side for `service`, an id the applications agree on (as a
    /// port): the peer reads it with [`Connection::stream_service`]. A request that
    /// expects answers names, in its data, the services its replies should go to (CUSP's
    /// reply services).
    pub fn open_stream_for(
        &mut self,
        kind: StreamKind,
        priority: u8,
        service: u64,
    ) -> Result<StreamId, WriteError> {
        self.core_mut().open_stream_for(kind, priority, service)
    }

    /// The service the peer opened `stream` for, if it named one.
    pub fn stream_service(&self, stream: StreamId) -> Option<u64> {
        self.core().stream_service(stream)
    }

    /// Queues all of `data` on `stream` and ends it with the same chunk: a stream opened,
    /// written and finished before the next packet leaves travels in that one packet, with
    /// no round trip. Queues nothing (`Ok(0)`) when `data` does not all fit now.
    pub fn write_last_on(
        &mut self,
        now: Instant,
        stream: StreamId,
        data: &[u8],
    ) -> Result<usize, WriteError> {
        self.core_mut().write_last_on(now, stream, data)
    }

    /// Abandons `stream` with `code`: what was queued on it and not sent is dropped, the
    /// peer drops what it holds of it, and its reads of the stream end with
    /// [`ReadError::Reset`] and the code. Data already sent may still be retransmitted,
    /// and is discarded on arrival.
    pub fn reset_on(
        &mut self,
        now: Instant,
        stream: StreamId,
        code: u64,
    ) -> Result<(), WriteError> {
        self.core_mut().reset_on(now, stream, code)
    }

    /// Changes the priority of `stream` (0 included).
    pub fn set_priority(&mut self, stream: StreamId, priority: u8) -> Result<(), WriteError> {
        self.core_mut().set_priority(stream, priority)
    }

    /// Queues bytes on `stream`; returns how many were accepted.
    pub fn write_on(
        &mut self,
        now: Instant,
        stream: StreamId,
        data: &[u8],
    ) -> Result<usize, WriteError> {
        self.core_mut().write_on(now, stream, data)
    }

    /// Ends `stream`: the peer reads its end after everything written before.
    pub fn finish_on(&mut self, now: Instant, stream: StreamId) -> Result<(), WriteError> {
        self.core_mut().finish_on(now, stream)
    }

    /// Reads from `stream`; `Ok(0)` at its end.
    pub fn read_on(
        &mut self,
        now: Instant,
        stream: StreamId,
        buf: &mut [u8],
    ) -> Result<usize, ReadError> {
        self.core_mut().read_on(now, stream, buf)
    }

    /// The next stream the peer opened (by sending on it) that was not reported yet.
    pub fn accept_stream(&mut self) -> Option<StreamId> {
        self.core_mut().accept_stream()
    }

    /// Bytes that can be written now without blocking.
    pub fn send_room(&self) -> usize {
        self.core().send_room()
    }

    /// Bytes written and not yet sent: what a sender that writes just in time (like TCP's
    /// `TCP_NOTSENT_LOWAT`) keeps small, so the data it writes is still in cache when it goes
    /// out. On the ctp wire these are the bytes not yet cut into segments (the segmenter
    /// cuts a few segments before they leave, at most `CUT_AHEAD`); on the UDT4 wire,
    /// packets never sent, each counted at the full payload size.
    pub fn unsent_bytes(&self) -> usize {
        self.core().unsent_bytes()
    }

    /// Bytes written and not yet acknowledged by the peer: queued, cut into segments or in
    /// flight. Written bytes less these are what the peer has (a sender's honest progress,
    /// unlike the bytes handed to the send buffer). On ctp's wire a segment's bytes count
    /// with their piece headers (a few bytes per piece) until it is acknowledged; on the
    /// UDT4 wire the send buffer's bytes.
    pub fn unacked_bytes(&self) -> u64 {
        self.core().unacked_bytes()
    }

    /// True when the peer ended its byte stream ([`Connection::stream_finish`]) and the
    /// end reached the receive queue in order, after every byte before it. A graceful close
    /// without it reads as the end of the stream too, but proves nothing about the stream
    /// being whole. Always false on the UDT4 wire, which has no end-of-stream mark.
    pub fn peer_finished(&self) -> bool {
        self.core().peer_finished()
    }

    /// True when everything written was acknowledged (or, unreliably, sent).
    pub fn is_flushed(&self) -> bool {
        self.core().is_flushed()
    }

    /// Asks for an orderly close: outstanding data is delivered first, then CLOSE is sent.
    pub fn close(&mut self, now: Instant) {
        self.core_mut().close(now)
    }

    /// Aborts at once: the peer is told the reason; buffered data is discarded.
    pub fn abort(&mut self, now: Instant, reason: &str) {
        self.core_mut().abort(now, reason)
    }

    /// The network reported the peer unreachable at `now` (an ICMP destination-unreachable
    /// message for a datagram sent to it). Ends the connection with
    /// [`CloseReason::Handshake`] and the report's reason when this side is still
    /// initiating it and the peer was reported unreachable for [`UNREACHABLE_GRACE`] (a
    /// rendezvous excepted: its peer may simply not have started yet); anything further
    /// along ignores it (see [`crate::unreachable`]). Returns whether it ended the
    /// connection.
    pub fn on_unreachable(&mut self, now: Instant, kind: Unreachable) -> bool {
        if !matches!(
            self.state(),
            ConnectionState::Initiating | ConnectionState::Echoing
        ) {
            return false;
        }
        if self.udt().is_some_and(UdtConnection::is_rendezvous) {
            return false;
        }
        let since = *self.unreachable_since.get_or_insert(now);
        if now - since < UNREACHABLE_GRACE {
            return false;
        }
        let reason = CloseReason::Handshake(kind.reason().to_string());
        match &mut self.core {
            Core::Composed(c) => c.terminate(reason),
            Core::Udt(u) => u.terminate(reason),
        }
        true
    }

    /// Handles a datagram the endpoint routed to this connection.
    pub(crate) fn handle_datagram(&mut self, now: Instant, data: &mut [u8]) -> Result<(), Dropped> {
        self.core_mut().handle_datagram(now, data)
    }

    /// Handles a datagram for this connection from an address it is not at.
    pub(crate) fn handle_datagram_from(
        &mut self,
        now: Instant,
        from: SocketAddr,
        data: &mut [u8],
        token: [u8; 8],
    ) -> Result<(), Dropped> {
        self.core_mut().handle_datagram_from(now, from, data, token)
    }

    /// Fires due timers.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        self.core_mut().handle_timeout(now)
    }

    /// The earliest deadline of this connection.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.core().poll_timeout()
    }

    /// Appends the next datagram to send to `out`, if any.
    pub(crate) fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        self.core_mut().poll_transmit(now, out)
    }

    /// True (once) when something changed for the application.
    pub(crate) fn take_activity(&mut self) -> bool {
        self.core_mut().take_activity()
    }

    /// Appends what the connection still owes its peer as it is forgotten, if anything.
    pub(crate) fn take_farewell(&mut self, out: &mut Vec<u8>) -> bool {
        self.core_mut().take_farewell(out)
    }
}

/// Helpers of the path and route tests.
#[cfg(test)]
mod test_support {
    use core::time::Duration;
    use ctp_cc::time::Instant;
    use std::net::SocketAddr;

    /// `s` as an address.
    pub fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// `ms` milliseconds after the clock's zero.
    pub fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }
}
