//! The typed events microprotocols bind to, and the bounded queue they travel through.
//!
//! Events form causal chains (user data → segment ready → packet sent → packet acked / lost …);
//! each link is a distinct event, so correctness never depends on the order in which two
//! handlers of the same event run. Events are small `Copy` values: they name segments by
//! [`SegId`] and borrow frames from the datagram being processed, so raising one never
//! allocates.

use super::segment::SegId;
use crate::wire::coded::{CodedAckFrame, CodedFrame};
use crate::wire::frame::{AckFrame, DataFrame, NakFrame, RepairFrame};
use ctp_cc::time::Instant;
use std::collections::VecDeque;

pub use super::hold::HoldBit;

/// The kinds of events, used to build binding tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum EventKind {
    /// The application queued bytes or messages.
    UserData,
    /// A segment needs (re)transmission and waits for its send bits.
    SegmentReady,
    /// Only one send bit is still unset on a segment.
    HoldLast,
    /// Every once-per-segment send bit of a segment is set (flow control let it go): only
    /// per-transmission bits (congestion window, pacing) still hold it, so it will leave
    /// as soon as they allow. Raised for every transmission that has such bits pending.
    SegmentCleared,
    /// A packet left the connection.
    PacketSent,
    /// A packet was acknowledged.
    PacketAcked,
    /// A packet was declared lost. Path-MTU probes never are: their loss is `ProbeLost`,
    /// so congestion policies and retransmission never see it.
    PacketLost,
    /// A path-MTU probe was declared lost (no information about congestion).
    ProbeLost,
    /// A packet declared lost was acknowledged after all.
    LateAck,
    /// The retransmission timer expired.
    RtoExpired,
    /// A new round-trip-time sample.
    RttSample,
    /// Congestion variables (window, rate) changed.
    CongestionChanged,
    /// Every done bit of a segment is set: it will never be sent again.
    SegmentDone,
    /// A segment released for sending was dropped unsent (acknowledged or freed meanwhile).
    SegmentDiscarded,
    /// A packet arrived and passed integrity checks.
    PacketReceived,
    /// An ACK frame arrived.
    AckFrame,
    /// A NAK frame arrived.
    NakFrame,
    /// An ACK_FLOOR frame arrived.
    AckFloor,
    /// A MAX_SEG frame arrived.
    MaxSeg,
    /// An XON/XOFF frame arrived.
    XonXoff,
    /// An RTS frame arrived.
    Rts,
    /// A CTS frame arrived.
    Cts,
    /// A PING frame arrived.
    Ping,
    /// A DATA frame (segment) arrived.
    SegmentArrived,
    /// A segment arrived that was not seen before.
    SegmentAccepted,
    /// A forward-error-correction repair shard arrived.
    RepairArrived,
    /// A `CODED` frame arrived: the coded symbol its packet carries.
    CodedArrived,
    /// A `CODED_ACK` frame arrived.
    CodedAckArrived,
    /// A message was completely reassembled.
    MessageComplete,
    /// A complete message is urgent: ordering should let it pass.
    UrgentMessage,
    /// The application consumed received data.
    UserRead,
    /// A custom congestion-control message arrived from the peer's algorithm.
    CcMessage,
    /// The application handed a custom message to the congestion-control algorithm (a
    /// group budget's rate, a new `blast` rate).
    CongestionMessage,
    /// The application asked for an orderly close.
    CloseRequested,
}

/// Number of event kinds.
pub const EVENT_KINDS: usize = EventKind::CloseRequested as usize + 1;

/// An event and its arguments.
///
/// `repr(C)`: the arguments start at an 8-byte boundary after the tag. With Rust's own
/// layout some variants' arguments started at byte 1, and the engine's copy of an event
/// out of its queue became overlapping unaligned moves whose reads stalled on the stores
/// just before them (a failed store-to-load forward on every event dispatched).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub enum Event<'a> {
    /// See [`EventKind::UserData`].
    UserData,
    /// See [`EventKind::SegmentReady`].
    SegmentReady {
        /// The segment.
        seg: SegId,
        /// True when this is a retransmission.
        retransmit: bool,
    },
    /// See [`EventKind::HoldLast`].
    HoldLast {
        /// The segment.
        seg: SegId,
        /// The one bit still unset.
        bit: HoldBit,
    },
    /// See [`EventKind::SegmentCleared`].
    SegmentCleared {
        /// The segment.
        seg: SegId,
        /// True when this is a retransmission.
        retransmit: bool,
    },
    /// See [`EventKind::PacketSent`].
    PacketSent(PacketInfo),
    /// See [`EventKind::PacketAcked`].
    PacketAcked(PacketInfo),
    /// See [`EventKind::PacketLost`].
    PacketLost(PacketInfo),
    /// See [`EventKind::ProbeLost`].
    ProbeLost(PacketInfo),
    /// See [`EventKind::LateAck`].
    LateAck(PacketInfo),
    /// See [`EventKind::RtoExpired`].
    RtoExpired {
        /// Consecutive expiries without progress.
        backoff: u32,
    },
    /// See [`EventKind::RttSample`].
    RttSample {
        /// Raw sample, microseconds.
        rtt_us: u64,
        /// Acknowledgement delay reported by the peer, microseconds.
        ack_delay_us: u64,
    },
    /// See [`EventKind::CongestionChanged`].
    CongestionChanged,
    /// See [`EventKind::SegmentDone`].
    SegmentDone(SegId),
    /// See [`EventKind::SegmentDiscarded`].
    SegmentDiscarded(SegId),
    /// See [`EventKind::PacketReceived`].
    PacketReceived {
        /// Packet number.
        pn: u64,
        /// True when the packet must be acknowledged.
        ack_eliciting: bool,
        /// Size on the wire.
        bytes: usize,
        /// A path-MTU probe (PING and PADDING only): acknowledge it at once.
        probe: bool,
    },
    /// See [`EventKind::AckFrame`].
    AckFrame(AckFrame<'a>),
    /// See [`EventKind::NakFrame`].
    NakFrame(NakFrame<'a>),
    /// See [`EventKind::AckFloor`].
    AckFloor(u64),
    /// See [`EventKind::MaxSeg`].
    MaxSeg(u64),
    /// See [`EventKind::XonXoff`].
    XonXoff(bool),
    /// See [`EventKind::Rts`].
    Rts(u64),
    /// See [`EventKind::Cts`].
    Cts(u64),
    /// See [`EventKind::Ping`].
    Ping,
    /// See [`EventKind::SegmentArrived`].
    SegmentArrived(DataFrame<'a>),
    /// See [`EventKind::SegmentAccepted`].
    SegmentAccepted(DataFrame<'a>),
    /// See [`EventKind::RepairArrived`].
    RepairArrived(RepairFrame<'a>),
    /// See [`EventKind::CodedArrived`].
    CodedArrived(CodedFrame<'a>),
    /// See [`EventKind::CodedAckArrived`].
    CodedAckArrived(CodedAckFrame<'a>),
    /// See [`EventKind::MessageComplete`].
    MessageComplete(Reassembled),
    /// See [`EventKind::UrgentMessage`].
    UrgentMessage(Reassembled),
    /// See [`EventKind::UserRead`].
    UserRead,
    /// See [`EventKind::CcMessage`].
    CcMessage(&'a [u8]),
    /// See [`EventKind::CongestionMessage`].
    CongestionMessage(&'a [u8]),
    /// See [`EventKind::CloseRequested`].
    CloseRequested,
}

impl Event<'_> {
    /// The kind used for binding look-up.
    pub fn kind(&self) -> EventKind {
        match self {
            Event::UserData => EventKind::UserData,
            Event::SegmentReady { .. } => EventKind::SegmentReady,
            Event::HoldLast { .. } => EventKind::HoldLast,
            Event::SegmentCleared { .. } => EventKind::SegmentCleared,
            Event::PacketSent(_) => EventKind::PacketSent,
            Event::PacketAcked(_) => EventKind::PacketAcked,
            Event::PacketLost(_) => EventKind::PacketLost,
            Event::ProbeLost(_) => EventKind::ProbeLost,
            Event::LateAck(_) => EventKind::LateAck,
            Event::RtoExpired { .. } => EventKind::RtoExpired,
            Event::RttSample { .. } => EventKind::RttSample,
            Event::CongestionChanged => EventKind::CongestionChanged,
            Event::SegmentDone(_) => EventKind::SegmentDone,
            Event::SegmentDiscarded(_) => EventKind::SegmentDiscarded,
            Event::PacketReceived { .. } => EventKind::PacketReceived,
            Event::AckFrame(_) => EventKind::AckFrame,
            Event::NakFrame(_) => EventKind::NakFrame,
            Event::AckFloor(_) => EventKind::AckFloor,
            Event::MaxSeg(_) => EventKind::MaxSeg,
            Event::XonXoff(_) => EventKind::XonXoff,
            Event::Rts(_) => EventKind::Rts,
            Event::Cts(_) => EventKind::Cts,
            Event::Ping => EventKind::Ping,
            Event::SegmentArrived(_) => EventKind::SegmentArrived,
            Event::SegmentAccepted(_) => EventKind::SegmentAccepted,
            Event::RepairArrived(_) => EventKind::RepairArrived,
            Event::CodedArrived(_) => EventKind::CodedArrived,
            Event::CodedAckArrived(_) => EventKind::CodedAckArrived,
            Event::MessageComplete(_) => EventKind::MessageComplete,
            Event::UrgentMessage(_) => EventKind::UrgentMessage,
            Event::UserRead => EventKind::UserRead,
            Event::CcMessage(_) => EventKind::CcMessage,
            Event::CongestionMessage(_) => EventKind::CongestionMessage,
            Event::CloseRequested => EventKind::CloseRequested,
        }
    }
}

/// What the packet events say about one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketInfo {
    /// Packet number.
    pub pn: u64,
    /// Size on the wire.
    pub bytes: usize,
    /// When it was sent.
    pub sent_at: Instant,
    /// The data segment it carried, if any.
    pub seg: Option<SegId>,
    /// True when it counts toward bytes in flight.
    pub in_flight: bool,
    /// A path-MTU probe: its loss says nothing about congestion.
    pub probe: bool,
    /// The path it left on.
    pub path: super::path::PathId,
}

/// A reassembled message waiting in the connection's message store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reassembled {
    /// Message sequence number (within its stream, for a stream other than 0).
    pub msg: u64,
    /// Index in the completed-message store.
    pub slot: u32,
    /// The stream it came on (0: the default stream).
    pub stream: u64,
}

impl<'a> Event<'a> {
    /// The same event with a `'static` lifetime, or `None` if it borrows the datagram.
    pub fn to_static(self) -> Option<Event<'static>> {
        Some(match self {
            Event::AckFrame(_)
            | Event::NakFrame(_)
            | Event::SegmentArrived(_)
            | Event::SegmentAccepted(_)
            | Event::RepairArrived(_)
            | Event::CodedArrived(_)
            | Event::CodedAckArrived(_)
            | Event::CcMessage(_)
            | Event::CongestionMessage(_) => return None,
            Event::UserData => Event::UserData,
            Event::SegmentReady { seg, retransmit } => Event::SegmentReady { seg, retransmit },
            Event::HoldLast { seg, bit } => Event::HoldLast { seg, bit },
            Event::SegmentCleared { seg, retransmit } => Event::SegmentCleared { seg, retransmit },
            Event::PacketSent(p) => Event::PacketSent(p),
            Event::PacketAcked(p) => Event::PacketAcked(p),
            Event::PacketLost(p) => Event::PacketLost(p),
            Event::ProbeLost(p) => Event::ProbeLost(p),
            Event::LateAck(p) => Event::LateAck(p),
            Event::RtoExpired { backoff } => Event::RtoExpired { backoff },
            Event::RttSample {
                rtt_us,
                ack_delay_us,
            } => Event::RttSample {
                rtt_us,
                ack_delay_us,
            },
            Event::CongestionChanged => Event::CongestionChanged,
            Event::SegmentDone(s) => Event::SegmentDone(s),
            Event::SegmentDiscarded(s) => Event::SegmentDiscarded(s),
            Event::PacketReceived {
                pn,
                ack_eliciting,
                bytes,
                probe,
            } => Event::PacketReceived {
                pn,
                ack_eliciting,
                bytes,
                probe,
            },
            Event::AckFloor(v) => Event::AckFloor(v),
            Event::MaxSeg(v) => Event::MaxSeg(v),
            Event::XonXoff(v) => Event::XonXoff(v),
            Event::Rts(v) => Event::Rts(v),
            Event::Cts(v) => Event::Cts(v),
            Event::Ping => Event::Ping,
            Event::MessageComplete(m) => Event::MessageComplete(m),
            Event::UrgentMessage(m) => Event::UrgentMessage(m),
            Event::UserRead => Event::UserRead,
            Event::CloseRequested => Event::CloseRequested,
        })
    }
}

/// The FIFO of events that own their arguments, with one rule: a `CongestionChanged` raised
/// while another waits undispatched is dropped. The waiting one runs after the change that
/// raised the dropped one (it has not run yet), and its handlers read the variables when
/// they run, so they see every change either would have shown them; a policy that raises
/// one per packet acknowledged then costs the window and pacing one pass per ACK frame
/// instead of one per packet.
#[derive(Debug, Default)]
pub(crate) struct OwnedEvents {
    events: VecDeque<Event<'static>>,
    congestion_changed_waiting: bool,
}

impl OwnedEvents {
    /// An empty queue with room for `n` events.
    pub(crate) fn with_capacity(n: usize) -> Self {
        OwnedEvents {
            events: VecDeque::with_capacity(n),
            congestion_changed_waiting: false,
        }
    }

    /// Queues `ev` (see the type's documentation for `CongestionChanged`).
    pub(crate) fn push(&mut self, ev: Event<'static>) {
        if let Event::CongestionChanged = ev {
            if self.congestion_changed_waiting {
                return;
            }
            self.congestion_changed_waiting = true;
        }
        self.events.push_back(ev);
    }

    /// The oldest event.
    pub(crate) fn pop(&mut self) -> Option<Event<'static>> {
        let ev = self.events.pop_front()?;
        if let Event::CongestionChanged = ev {
            self.congestion_changed_waiting = false;
        }
        Some(ev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_congestion_change_is_queued_once_until_it_is_dispatched() {
        let mut q = OwnedEvents::with_capacity(4);
        q.push(Event::CongestionChanged);
        q.push(Event::UserData);
        q.push(Event::CongestionChanged);
        assert!(matches!(q.pop(), Some(Event::CongestionChanged)));
        // Dispatched: a new change is queued again, behind what was already waiting.
        q.push(Event::CongestionChanged);
        q.push(Event::UserRead);
        assert!(matches!(q.pop(), Some(Event::UserData)));
        assert!(matches!(q.pop(), Some(Event::CongestionChanged)));
        assert!(matches!(q.pop(), Some(Event::UserRead)));
        assert!(q.pop().is_none());
        // Other events are never merged.
        q.push(Event::UserData);
        q.push(Event::UserData);
        assert!(q.pop().is_some() && q.pop().is_some() && q.pop().is_none());
    }
}
