//! The connection's buffers toward the application: data waiting to be segmented, and
//! delivered bytes and messages waiting to be read. All are bounded.
//!
//! The receive side keeps one account of everything it holds for the peer ([`AppIo::held`]):
//! bytes of incomplete messages, of complete messages waiting for their turn, and of
//! delivered data the application has not read, each message also charged
//! [`HELD_MESSAGE_COST`] for its bookkeeping. Flow control grants credit only from
//! [`AppIo::credit_room`], the engine refuses data beyond it, and an account above
//! [`AppIo::hard_limit`] is a protocol violation (see `docs/decisions.md`, "Bounded receive
//! state").

use super::streams::{RecvStreams, SendQueue, StreamId};
use bytes::Bytes;
use std::collections::VecDeque;

/// A reassembled message waiting behind the delivery barrier (ordering, jitter control).
#[derive(Clone, Debug, Default)]
pub struct Completed {
    /// Message bytes.
    pub data: Bytes,
    /// Belongs to the byte stream.
    pub stream: bool,
    /// Ends the byte stream.
    pub fin: bool,
    /// The sender's timestamp, microseconds, if it stamped the message.
    pub sent_us: Option<u64>,
    /// The sender marked it urgent (out of band).
    pub urgent: bool,
    /// Messages the sender said must be delivered first (causal ordering).
    pub deps: Vec<u64>,
    /// Delivery bits not yet set.
    pub pending: crate::engine::hold::HoldMask,
    /// The stream it came on (0: the default stream).
    pub stream_id: StreamId,
    /// On a stream's first chunk, the service the stream is for.
    pub service: Option<u64>,
    /// The peer abandoned the stream here, with this code.
    pub reset: Option<u64>,
}

/// Bytes charged for each message the receiver holds, beyond its data: the reassembly or
/// parking record, the ordering index entry and the allocation around a small message
/// (measured: a parked one-byte message cost 163 bytes of heap).
pub const HELD_MESSAGE_COST: usize = 160;

/// How far [`AppIo::held`] may exceed the receive buffer before the peer is taken to break
/// the protocol: the data a sender within its credit can still make the receiver take on top
/// of a full share (two segments of one-byte messages, with room to spare).
pub const HELD_SLACK: usize = 128 * 1024;

/// Application-facing buffers of one connection.
#[derive(Debug, Default)]
pub struct AppIo {
    /// Queued for sending, per stream, in the order the scheduler cuts them.
    pub tx: SendQueue,
    /// Bytes in `tx` not yet cut into segments.
    pub tx_bytes: usize,
    /// Limit on `tx_bytes`.
    pub tx_limit: usize,
    /// The byte stream was finished by the application.
    pub tx_fin_queued: bool,
    /// Delivered byte-stream chunks.
    pub rx_stream: VecDeque<Bytes>,
    /// Delivered discrete messages.
    pub rx_msgs: VecDeque<Bytes>,
    /// Delivered chunks of the streams other than 0.
    pub rx_streams: RecvStreams,
    /// Bytes in `rx_stream` and `rx_msgs` together.
    pub rx_bytes: usize,
    /// Limit on `rx_bytes` before flow control stops granting credit.
    pub rx_limit: usize,
    /// The peer finished its byte stream and everything before the end was delivered.
    pub rx_fin: bool,
    /// Reassembled messages waiting for ordering, by slot.
    pub completed: Vec<Option<Completed>>,
    /// Bytes of the messages in `completed` (as parked; a gauge).
    pub parked_bytes: usize,
    completed_free: Vec<u32>,
    /// Bytes reserved for incomplete messages (reassembly buffers' capacity and pieces
    /// waiting beyond a gap; a gauge kept by the fragmentation microprotocol).
    pub partial_bytes: usize,
    /// Incomplete messages (a gauge kept by the fragmentation microprotocol).
    pub partial_messages: usize,
}

impl AppIo {
    /// Empty buffers with the given send and receive limits.
    pub fn with_limits(tx_limit: usize, rx_limit: usize) -> Self {
        AppIo {
            tx_limit,
            rx_limit,
            ..AppIo::default()
        }
    }

    /// Stores a reassembled message until ordering releases it; returns its slot.
    pub fn park(&mut self, c: Completed) -> u32 {
        self.parked_bytes += c.data.len();
        match self.completed_free.pop() {
            Some(i) => {
                self.completed[i as usize] = Some(c);
                i
            }
            None => {
                self.completed.push(Some(c));
                (self.completed.len() - 1) as u32
            }
        }
    }

    /// The parked message in `slot`.
    pub fn parked_mut(&mut self, slot: u32) -> Option<&mut Completed> {
        self.completed.get_mut(slot as usize)?.as_mut()
    }

    /// Takes a parked message back.
    pub fn unpark(&mut self, slot: u32) -> Option<Completed> {
        let c = self.completed.get_mut(slot as usize)?.take()?;
        self.parked_bytes = self.parked_bytes.saturating_sub(c.data.len());
        self.completed_free.push(slot);
        Some(c)
    }

    /// Hands a message to the application.
    pub fn deliver(&mut self, c: Completed) {
        self.rx_bytes += c.data.len();
        if c.stream_id != 0 {
            let dropped = self
                .rx_streams
                .deliver(c.stream_id, c.data, c.fin, c.service, c.reset);
            self.rx_bytes -= dropped;
        } else if c.stream {
            if !c.data.is_empty() {
                self.rx_stream.push_back(c.data);
            }
            if c.fin {
                self.rx_fin = true;
            }
        } else {
            self.rx_msgs.push_back(c.data);
        }
    }

    /// Messages parked behind the delivery barrier.
    pub fn parked_messages(&self) -> usize {
        self.completed.len() - self.completed_free.len()
    }

    /// Delivered data the application has not read, with its bookkeeping.
    pub fn unread(&self) -> usize {
        let chunks = self.rx_stream.len() + self.rx_msgs.len() + self.rx_streams.chunk_count;
        self.rx_bytes + HELD_MESSAGE_COST * chunks
    }

    /// Everything held for the peer: incomplete, parked and unread messages, data and
    /// bookkeeping.
    pub fn held(&self) -> usize {
        self.unread()
            + self.parked_bytes
            + self.partial_bytes
            + HELD_MESSAGE_COST * (self.parked_messages() + self.partial_messages)
    }

    /// The share of the receive buffer flow control may promise: three quarters, so that
    /// the data it lets in out of order never crowds out the next segment in order (which
    /// may use the last quarter).
    pub fn credit_limit(&self) -> usize {
        self.rx_limit / 4 * 3
    }

    /// Room left in [`AppIo::credit_limit`].
    pub fn credit_room(&self) -> usize {
        self.credit_limit().saturating_sub(self.held())
    }

    /// Above this [`AppIo::held`] no sender that respects its credit can push the
    /// receiver: the receive buffer plus [`HELD_SLACK`].
    pub fn hard_limit(&self) -> usize {
        self.rx_limit + HELD_SLACK
    }

    /// Room left in the send queue.
    pub fn tx_room(&self) -> usize {
        self.tx_limit.saturating_sub(self.tx_bytes)
    }
}
