//! The connection-core interface: what an [`crate::Endpoint`] and the application need
//! from the core of one connection, whatever wire it speaks. Two cores implement it: the
//! composed connection ([`crate::connection::composed::ComposedConnection`], ctp's wire,
//! handshake and microprotocols) and the UDT4 connection
//! ([`crate::udt::conn::UdtConnection`], UDT4's own wire, timers and handshake).
//!
//! The surface is quiche's sans-IO one: a datagram in, a datagram out into the caller's
//! buffer, the next deadline and its timeout, plus the application's buffered operations.
//! The endpoint routes a datagram to its core and never looks inside it.

use crate::conn_state::{ConnectionState, MsgOptions, ReadError, WriteError};
use crate::engine::session::CloseReason;
use crate::engine::streams::{StreamId, StreamKind};
use crate::perfmon::PerfMon;
use crate::profile::{MicroSet, Params};
use crate::stats::{ConnectionStats, EndpointStats};
use bytes::Bytes;
use ctp_cc::time::Instant;
use std::net::SocketAddr;

/// Why a core dropped a datagram routed to it without processing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// It does not parse as a packet of the core's wire.
    Malformed,
    /// It parses but does not open: corrupted, forged, or a late copy (packet protection).
    Unopened,
    /// It came from an address the connection is not at, and the core does not move.
    Elsewhere,
}

impl Dropped {
    /// Counts the drop in the endpoint's counters.
    pub fn count(self, stats: &mut EndpointStats) {
        match self {
            Dropped::Malformed => stats.bad_header += 1,
            Dropped::Unopened => stats.bad_checksum += 1,
            Dropped::Elsewhere => stats.unknown_connection += 1,
        }
    }
}

/// The core of one connection: its wire, timers, handshake and data path behind one
/// interface. All calls are sans-IO: they take the current time and never block.
pub trait ConnectionCore {
    // ---- identity and routing ----

    /// The id this side chose: the connection id (ctp wire) or socket id (UDT4) the peer
    /// addresses every packet to.
    fn local_id(&self) -> u32;
    /// The peer's address.
    fn remote(&self) -> SocketAddr;
    /// The local address this connection sends from, when it is not the socket's own.
    fn local(&self) -> Option<SocketAddr> {
        None
    }
    /// Where the datagram [`ConnectionCore::poll_transmit`] built last goes: (peer
    /// address, local address). The current path's, unless the connection runs over
    /// several paths at once.
    fn destination(&self) -> (SocketAddr, Option<SocketAddr>) {
        (self.remote(), self.local())
    }
    /// Where the connection is in its life.
    fn state(&self) -> &ConnectionState;
    /// True (once) when something changed for the application since the last call.
    fn take_activity(&mut self) -> bool;
    /// The negotiated microprotocols (for UDT4, what UDT is made of).
    fn micros(&self) -> MicroSet;
    /// The negotiated parameters.
    fn params(&self) -> &Params;

    // ---- network side ----

    /// Handles a datagram routed to this connection (the whole datagram, opened in place
    /// where the wire protects packets).
    fn handle_datagram(&mut self, now: Instant, datagram: &mut [u8]) -> Result<(), Dropped>;
    /// Handles a datagram for this connection from `from`, which is not the peer's
    /// current address; `token` is fresh randomness for a path-validation challenge. A
    /// core that does not move between addresses (UDT4) drops it.
    fn handle_datagram_from(
        &mut self,
        _now: Instant,
        _from: SocketAddr,
        _datagram: &mut [u8],
        _token: [u8; 8],
    ) -> Result<(), Dropped> {
        Err(Dropped::Elsewhere)
    }
    /// Fires due timers.
    fn handle_timeout(&mut self, now: Instant);
    /// The earliest deadline.
    fn poll_timeout(&self) -> Option<Instant>;
    /// Appends the next datagram to send to `out`; false, leaving `out` as it was, when
    /// there is nothing to send now.
    fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> bool;
    /// Appends the farewell the connection still owes its peer when it is forgotten (a
    /// CLOSE not yet sent), if any.
    fn take_farewell(&mut self, _out: &mut Vec<u8>) -> bool {
        false
    }

    // ---- application side ----

    /// Queues bytes of the ordered byte stream; returns how many were accepted.
    fn stream_write(&mut self, now: Instant, data: &[u8]) -> Result<usize, WriteError>;
    /// Queues bytes of the byte stream without copying them where the core can keep a
    /// reference to `data` until they are acknowledged (a copy otherwise); returns how
    /// many were accepted, a prefix of `data`.
    fn stream_write_bytes(&mut self, now: Instant, data: &Bytes) -> Result<usize, WriteError> {
        self.stream_write(now, data)
    }
    /// Ends the byte stream.
    fn stream_finish(&mut self, now: Instant) -> Result<(), WriteError>;
    /// Reads from the byte stream; `Ok(0)` at its end.
    fn stream_read(&mut self, now: Instant, buf: &mut [u8]) -> Result<usize, ReadError>;
    /// Reads the next received chunk (at most `max` bytes) without copying; empty at the
    /// end of the stream.
    fn stream_read_chunk(&mut self, now: Instant, max: usize) -> Result<Bytes, ReadError>;
    /// Queues one message with per-message options (a core without them ignores them).
    fn send_msg(&mut self, now: Instant, data: Bytes, opts: MsgOptions) -> Result<(), WriteError>;
    /// Queues one message delivered only after the earlier messages `after`; returns its
    /// id (0 on a core without message ids).
    fn send_msg_after(
        &mut self,
        now: Instant,
        data: Bytes,
        after: &[u64],
    ) -> Result<u64, WriteError>;
    /// Queues one urgent (out-of-band) message (a plain message on a core without them).
    fn send_urgent(&mut self, now: Instant, data: Bytes) -> Result<(), WriteError>;
    /// Takes the next received message.
    fn recv_msg(&mut self, now: Instant) -> Result<Bytes, ReadError>;

    // ---- streams (stream 0 is the byte stream above) ----

    /// Opens a stream of this side, of `kind`, with `priority` (higher is served first).
    fn open_stream(&mut self, _kind: StreamKind, _priority: u8) -> Result<StreamId, WriteError> {
        Err(one_stream_only())
    }
    /// Opens a stream of this side for `service` (named to the peer with its first data).
    fn open_stream_for(
        &mut self,
        _kind: StreamKind,
        _priority: u8,
        _service: u64,
    ) -> Result<StreamId, WriteError> {
        Err(one_stream_only())
    }
    /// The service the peer opened `stream` for, if it named one.
    fn stream_service(&self, _stream: StreamId) -> Option<u64> {
        None
    }
    /// Changes the priority of a stream (0 included).
    fn set_priority(&mut self, _stream: StreamId, _priority: u8) -> Result<(), WriteError> {
        Err(one_stream_only())
    }
    /// Queues all of `data` on `stream` and ends the stream with it (one chunk, so a small
    /// stream's opening, data and end travel in one packet); `Ok(0)` queues nothing when it
    /// does not all fit now.
    fn write_last_on(
        &mut self,
        _now: Instant,
        _stream: StreamId,
        _data: &[u8],
    ) -> Result<usize, WriteError> {
        Err(one_stream_only())
    }
    /// Abandons `stream` with `code`: what was queued and not sent is dropped, and the
    /// peer's reads of the stream end with the code.
    fn reset_on(&mut self, _now: Instant, _stream: StreamId, _code: u64) -> Result<(), WriteError> {
        Err(one_stream_only())
    }
    /// Queues bytes on `stream`; returns how many were accepted.
    fn write_on(
        &mut self,
        now: Instant,
        stream: StreamId,
        data: &[u8],
    ) -> Result<usize, WriteError> {
        match stream {
            0 => self.stream_write(now, data),
            _ => Err(one_stream_only()),
        }
    }
    /// Ends `stream`.
    fn finish_on(&mut self, now: Instant, stream: StreamId) -> Result<(), WriteError> {
        match stream {
            0 => self.stream_finish(now),
            _ => Err(one_stream_only()),
        }
    }
    /// Reads from `stream`; `Ok(0)` at its end.
    fn read_on(
        &mut self,
        now: Instant,
        stream: StreamId,
        buf: &mut [u8],
    ) -> Result<usize, ReadError> {
        match stream {
            0 => self.stream_read(now, buf),
            _ => Err(ReadError::Blocked),
        }
    }
    /// The next stream the peer opened (by sending on it) that was not reported yet.
    fn accept_stream(&mut self) -> Option<StreamId> {
        None
    }
    /// Bytes that can be written now without blocking.
    fn send_room(&self) -> usize;
    /// Bytes written and not yet sent.
    fn unsent_bytes(&self) -> usize;
    /// Bytes of data held in buffers.
    fn buffered_bytes(&self) -> u64;
    /// Bytes written and not yet acknowledged by the peer.
    fn unacked_bytes(&self) -> u64;
    /// True when everything written was acknowledged (or, unreliably, sent).
    fn is_flushed(&self) -> bool;
    /// Every message queued on the connection's own message stream with a smaller id (the
    /// ids [`ConnectionCore::send_msg_after`] returns) passed the done barrier whole —
    /// acknowledged, with a reliable profile. `None` where messages have no such ids (the
    /// UDT4 wire).
    fn messages_done_below(&self) -> Option<u64> {
        None
    }
    /// Has stream `stream`'s chunks counted for its done barrier from now on
    /// ([`ConnectionCore::stream_done_below`]): what a group connection reads its copies on
    /// a stream by.
    fn watch_stream(&mut self, _stream: StreamId) -> Result<(), WriteError> {
        Err(WriteError::NoStream(
            "this connection has no streams to watch (the UDT4 wire)".into(),
        ))
    }
    /// Every chunk of watched stream `stream` starting below this offset passed the done
    /// barrier whole — acknowledged, with a reliable profile; `u64::MAX` once the stream
    /// ended and all of it did. `None` where streams have no such barrier (the UDT4 wire).
    fn stream_done_below(&self, _stream: StreamId) -> Option<u64> {
        None
    }
    /// Bytes written to stream `stream` so far: the offset its next byte gets.
    fn stream_written(&self, _stream: StreamId) -> Option<u64> {
        None
    }
    /// True when the peer ended its byte stream and the end was read in order.
    fn peer_finished(&self) -> bool;
    /// Hands a custom control message to the congestion controller; false when there is
    /// none to take it.
    fn congestion_message(&mut self, now: Instant, msg: &[u8]) -> bool;

    // ---- end and reports ----

    /// Orderly close: outstanding data is delivered first.
    fn close(&mut self, now: Instant);
    /// Aborts at once; buffered data is discarded.
    fn abort(&mut self, now: Instant, reason: &str);
    /// The close reason once closed.
    fn close_reason(&self) -> Option<&CloseReason> {
        match self.state() {
            ConnectionState::Closed(r) => Some(r),
            _ => None,
        }
    }
    /// Snapshot of every counter.
    fn stats(&self) -> ConnectionStats;
    /// The performance monitor (UDT's `perfmon`); with `clear` the next interval starts now.
    fn perfmon(&mut self, now: Instant, clear: bool) -> PerfMon;
}

/// Why a wire without streams refuses a stream operation.
fn one_stream_only() -> WriteError {
    WriteError::NoStream("this wire carries one stream (stream 0)".into())
}
