//! The connection's buffers toward the application: data waiting to be segmented, and
//! delivered bytes and messages waiting to be read. All are bounded.

use bytes::Bytes;
use std::collections::VecDeque;

/// Something the application queued for sending.
#[derive(Clone, Debug)]
pub struct Outgoing {
    /// Bytes of the message or stream chunk.
    pub data: Bytes,
    /// Bytes already cut into segments.
    pub cut: usize,
    /// Part of the ordered byte stream rather than a discrete message.
    pub stream: bool,
    /// The byte stream ends after this chunk.
    pub fin: bool,
    /// Message sequence number, assigned when the first piece is cut.
    pub msg: Option<u64>,
    /// Sender timestamp (microseconds), when the profile stamps messages.
    pub sent_us: Option<u64>,
    /// Out of band: may bypass the receiver's ordering.
    pub urgent: bool,
    /// Earlier messages the receiver must deliver first (causal ordering).
    pub deps: Vec<u64>,
}

impl Outgoing {
    /// A message (or stream chunk) not yet cut.
    pub fn new(data: Bytes, stream: bool, fin: bool, sent_us: Option<u64>) -> Self {
        Outgoing {
            data,
            cut: 0,
            stream,
            fin,
            msg: None,
            sent_us,
            urgent: false,
            deps: Vec::new(),
        }
    }
}

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
}

/// Application-facing buffers of one connection.
#[derive(Debug, Default)]
pub struct AppIo {
    /// Queued for sending, oldest first.
    pub tx: VecDeque<Outgoing>,
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
        if c.stream {
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

    /// Room left in the send queue.
    pub fn tx_room(&self) -> usize {
        self.tx_limit.saturating_sub(self.tx_bytes)
    }
}
