//! The composition engine: microprotocols bound to events through static binding tables,
//! hold bits on segments, delayed events, shared session variables, and the packetiser that
//! encodes message attributes as frames.
//!
//! Dispatch never allocates in steady state: events are `Copy` values; events that borrow
//! from the datagram being processed go through a small ring on the stack, the others
//! through a queue whose capacity the engine keeps between calls.

pub mod admission;
pub mod app;
pub mod event;
pub mod hold;
pub mod path;
pub mod route;
pub mod segment;
pub mod session;
pub mod streams;
pub mod timer;

use crate::stats::ConnectionStats;
use crate::wire::frame::{CompressedFrame, DataFrame};
use crate::wire::sizes::PACKET_OVERHEAD;
use crate::wire::truncated::Truncated;
use crate::wire::WireError;
use app::AppIo;
use ctp_cc::time::Instant;
use event::{Event, EventKind, OwnedEvents};
use hold::{Barrier, HoldRegistry, Rearm, Release};
use path::PathVars;
use segment::{SegId, SegmentStore};
use session::Session;
use timer::{TimerId, Timers};

/// Most microprotocols bound to one event.
pub const MAX_HANDLERS: usize = 16;

/// What every microprotocol implements.
///
/// A microprotocol reacts only to the events it lists in [`Microprotocol::bindings`], to its
/// own timers, and — if it carries attributes to the peer — to the packetiser asking it to
/// write frames.
pub trait Microprotocol {
    /// The events this microprotocol handles.
    fn bindings(&self) -> &'static [EventKind];
    /// Handles one bound event.
    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>);
    /// Handles one of its own timers firing.
    fn on_timer(&mut self, _timer: TimerId, _cx: &mut Cx<'_, '_>) {}
    /// True when the packetiser must offer it room in every packet.
    fn writes_frames(&self) -> bool {
        false
    }
    /// Writes this microprotocol's frames into the packet being built.
    fn write_frames(&mut self, _w: &mut FrameWriter<'_>, _cx: &mut Cx<'_, '_>) {}
    /// Whether [`Microprotocol::write_frames`] would write a frame into a packet that has
    /// no data to carry (nothing sendable, no PING owed); when no writer would, the engine
    /// does not build such a packet. It must be true whenever `write_frames` would write
    /// then; the default, true, is always safe.
    fn owes_frames(&self, _st: &State) -> bool {
        true
    }
    /// True when this microprotocol decodes the compressed segments (`DATA_Z` frames) the
    /// peer sends: the engine hands them to [`Microprotocol::decode_segment`] while it
    /// validates a received packet. At most one microprotocol of a composition does.
    fn decodes_segments(&self) -> bool {
        false
    }
    /// Decodes a received compressed segment into `out` (cleared first), never writing
    /// more than `limit` bytes, and checks its pieces; an error drops the whole packet.
    fn decode_segment<'b>(
        &self,
        _z: &CompressedFrame<'_>,
        _limit: usize,
        _out: &'b mut Vec<u8>,
    ) -> Result<DataFrame<'b>, WireError> {
        Err(WireError::Invalid("compressed segment without compression"))
    }
}

/// What a microprotocol may reserve while the connection is being set up.
pub struct Setup<'r> {
    /// Hold-bit registry.
    pub holds: &'r mut HoldRegistry,
    /// Timer table.
    pub timers: &'r mut Timers,
    /// Index of the microprotocol being built (owner of its timers).
    pub index: u8,
}

/// Error building a composition.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SetupError {
    /// A barrier ran out of bits.
    #[error(transparent)]
    Holds(#[from] hold::HoldBitsExhausted),
    /// The timer table is full.
    #[error("too many timers")]
    Timers,
    /// A parameter cannot be used.
    #[error("invalid parameter: {0}")]
    Invalid(&'static str),
    /// Too many microprotocols bind the same event.
    #[error("more than {MAX_HANDLERS} microprotocols bind {0:?}")]
    Bindings(EventKind),
}

impl Setup<'_> {
    /// Registers a hold bit.
    pub fn hold_bit(
        &mut self,
        barrier: Barrier,
        rearm: Rearm,
    ) -> Result<event::HoldBit, SetupError> {
        Ok(self.holds.register(barrier, rearm)?)
    }

    /// Registers a timer owned by this microprotocol.
    pub fn timer(&mut self) -> Result<TimerId, SetupError> {
        self.timers.register(self.index).ok_or(SetupError::Timers)
    }
}

/// Everything the microprotocols of one connection share.
#[derive(Debug, Default)]
pub struct State {
    /// Shared variables of the connection.
    pub session: Session,
    /// Transport variables of the path packets leave on.
    pub path: PathVars,
    /// The connection's routes for the packet being built (several with multipath).
    pub routes: route::Routes,
    /// Segments being sent.
    pub segs: SegmentStore,
    /// Registered hold bits.
    pub holds: HoldRegistry,
    /// Delayed events.
    pub timers: Timers,
    /// Buffers toward the application.
    pub app: AppIo,
    /// Counters.
    pub stats: ConnectionStats,
    /// Next packet number to send.
    pub next_pn: u64,
    /// Frames recovered locally (by forward error correction) that must re-enter the
    /// receive path as if they had arrived.
    pub reinject: Vec<Vec<u8>>,
}

impl State {
    /// Whether the segmenter should cut more: the application's queue holds data, the
    /// store has room, and fewer than `below` segments wait to be sent.
    pub fn wants_cut(&self, below: usize) -> bool {
        !self.app.tx.is_empty() && !self.segs.is_full() && self.segs.unsent() < below
    }

    /// Every chunk of watched stream `stream` ([`SendQueue::watch`]) that starts below
    /// this offset passed the done barrier whole: what the peer acknowledged of the stream,
    /// counted as [`State::messages_done_below`] counts messages (the segments holding a
    /// piece of a chunk, then the chunks still queued).
    ///
    /// [`SendQueue::watch`]: crate::engine::streams::SendQueue::watch
    pub fn stream_done_below(&self, stream: u64) -> u64 {
        let queued = self.app.tx.stream(stream);
        let next = match queued {
            Some(s) => s.next_offset,
            // Retired (its end was cut) or never written.
            None if self.app.tx.is_retired(stream) => u64::MAX,
            None => 0,
        };
        [
            self.segs.oldest_open_chunk(stream),
            queued.and_then(|s| s.first_queued_offset()),
        ]
        .into_iter()
        .flatten()
        .fold(next, u64::min)
    }

    /// Every stream-0 message with a smaller id has passed the done barrier whole (every
    /// segment holding a piece of it is done): acknowledged, with a reliable profile.
    pub fn messages_done_below(&self) -> u64 {
        [self.segs.oldest_open_msg(), self.app.tx.first_queued_msg()]
            .into_iter()
            .flatten()
            .fold(self.session.next_msg_seq, u64::min)
    }

    /// How many segments may wait to be sent, cut ahead of the packets that carry them:
    /// what the pacer releases within [`CUT_HORIZON_US`] at the path's pacing rate, at
    /// least [`CUT_AHEAD_MIN`] and at most [`CUT_AHEAD`] ([`CUT_AHEAD`] unpaced). Data
    /// queued later on a higher-priority stream is cut before any more of a lower one, but
    /// behind these: on a slow path a fixed [`CUT_AHEAD`] was a long wait (128 segments,
    /// ~150 ms at 10 Mb/s), on a fast one the bound is [`CUT_AHEAD`] as before.
    pub fn cut_ahead(&self) -> usize {
        let rate = self.path.pacing_rate;
        if rate == 0 {
            return CUT_AHEAD;
        }
        let per_segment = self.session.max_segment_payload as u64 + PACKET_OVERHEAD;
        let soon = rate.saturating_mul(CUT_HORIZON_US) / 1_000_000 / per_segment;
        usize::try_from(soon).map_or(CUT_AHEAD, |n| n.clamp(CUT_AHEAD_MIN, CUT_AHEAD))
    }

    /// The next packet number as it goes on the wire: as few low bits as the peer needs,
    /// given the largest number it acknowledged (RFC 9000 §17.1); 30 bits before any.
    ///
    /// A copy of a packet that arrives late (duplicated, or reordered behind many others)
    /// is recovered against the receiver's *current* expectation and may alias to another
    /// packet's number; the packet protection is keyed by the whole number
    /// ([`crate::protection`]), so such a copy fails to open, as QUIC's AEAD rejects it.
    pub fn pn_on_wire(&self) -> Truncated {
        let distance = self.session.peer_acked_pn.map(|a| self.next_pn - a);
        Truncated::encode(self.next_pn, distance)
    }

    /// Segment number `seq` of ours as it goes on the wire: its offset from our first.
    pub fn seg_offset(&self, seq: u64) -> u64 {
        seq - self.session.local_seg_isn
    }
}

/// The context a handler runs in: the time, the shared state and the event queues.
/// `'a` is the lifetime of the datagram being processed, which borrowed events point into.
pub struct Cx<'s, 'a> {
    /// The current time.
    pub now: Instant,
    /// Shared state.
    pub st: &'s mut State,
    pub(crate) owned: &'s mut OwnedEvents,
    pub(crate) borrowed: &'s mut BorrowedRing<'a>,
}

/// A tiny FIFO for events that borrow the datagram being processed; their chains are short
/// (segment arrived → segment accepted), so a handful of slots suffice.
#[derive(Default)]
pub struct BorrowedRing<'a> {
    slots: [Option<Event<'a>>; 8],
    head: usize,
    len: usize,
}

impl<'a> BorrowedRing<'a> {
    pub(crate) fn push(&mut self, ev: Event<'a>) {
        if self.len == self.slots.len() {
            debug_assert!(false, "borrowed event ring overflow");
            return;
        }
        let idx = (self.head + self.len) % self.slots.len();
        self.slots[idx] = Some(ev);
        self.len += 1;
    }

    pub(crate) fn pop(&mut self) -> Option<Event<'a>> {
        if self.len == 0 {
            return None;
        }
        let s = self.slots[self.head].take();
        self.head = (self.head + 1) % self.slots.len();
        self.len -= 1;
        s
    }
}

impl<'a> Cx<'_, 'a> {
    /// Raises an event; its handlers run after the current one returns.
    pub fn raise(&mut self, ev: Event<'a>) {
        match ev.to_static() {
            Some(e) => self.owned.push(e),
            None => self.borrowed.push(ev),
        }
    }

    /// Sets a hold bit on a segment and raises what follows from it.
    pub fn release(&mut self, seg: SegId, barrier: Barrier, bit: event::HoldBit) {
        let rearm = self.st.holds.send_rearm;
        let Some(s) = self.st.segs.get_mut(seg) else {
            return;
        };
        let released = s.holds.set(barrier, bit);
        // The last once-per-segment send bit went: only per-transmission gates are left.
        let cleared = barrier == Barrier::Send
            && matches!(released, Release::LastLeft(_) | Release::Pending)
            && rearm & (1 << bit) == 0
            && s.holds.send & !rearm == 0;
        let retransmit = cleared && s.transmissions > 0;
        match (released, barrier) {
            (Release::Complete, Barrier::Send) => self.st.segs.sendable.push_back(seg),
            (Release::LastLeft(b), Barrier::Send) => self.raise(Event::HoldLast { seg, bit: b }),
            (Release::Complete, Barrier::Done) => {
                self.st.segs.done(seg);
                self.raise(Event::SegmentDone(seg));
            }
            (Release::Complete, Barrier::Deallocate) => self.st.segs.free(seg),
            _ => {}
        }
        if cleared {
            self.raise(Event::SegmentCleared { seg, retransmit });
        }
    }

    /// Hands a freshly filled segment to the send path.
    pub fn submit(&mut self, seg: SegId) {
        self.enter_send_path(seg, false);
    }

    /// Puts a segment back on the send path for retransmission: its per-transmission send
    /// bits must be set again.
    pub fn requeue(&mut self, seg: SegId) {
        let rearm = self.st.holds.send_rearm;
        let Some(s) = self.st.segs.get_mut(seg) else {
            return;
        };
        s.holds.send |= rearm;
        self.enter_send_path(seg, true);
    }

    fn enter_send_path(&mut self, seg: SegId, retransmit: bool) {
        let Some(s) = self.st.segs.get(seg) else {
            return;
        };
        let pending = s.holds.send;
        let cleared = pending != 0 && pending & !self.st.holds.send_rearm == 0;
        match pending.count_ones() {
            0 => self.st.segs.sendable.push_back(seg),
            1 => {
                let bit = pending.trailing_zeros() as event::HoldBit;
                self.raise(Event::SegmentReady { seg, retransmit });
                self.raise(Event::HoldLast { seg, bit });
            }
            _ => self.raise(Event::SegmentReady { seg, retransmit }),
        }
        if cleared {
            self.raise(Event::SegmentCleared { seg, retransmit });
        }
    }

    /// Sets a delivery bit on a parked message; when none is left, the message goes to the
    /// application.
    pub fn release_message(&mut self, slot: u32, bit: event::HoldBit) {
        let Some(c) = self.st.app.parked_mut(slot) else {
            return;
        };
        c.pending &= !(1 << bit);
        if c.pending == 0 {
            self.deliver_now(slot);
        }
    }

    /// Hands a parked message to the application.
    pub fn deliver_now(&mut self, slot: u32) {
        if let Some(c) = self.st.app.unpark(slot) {
            self.st.stats.app_bytes_delivered += c.data.len() as u64;
            self.st.stats.messages_delivered += 1;
            self.st.app.deliver(c);
        }
    }

    /// Drops a parked message that will never be delivered.
    pub fn discard_message(&mut self, slot: u32) {
        if self.st.app.unpark(slot).is_some() {
            self.st.stats.messages_abandoned += 1;
        }
    }

    /// Arms a timer.
    pub fn set_timer(&mut self, id: TimerId, at: Instant) {
        self.st.timers.set(id, at);
    }

    /// Disarms a timer.
    pub fn cancel_timer(&mut self, id: TimerId) {
        self.st.timers.cancel(id);
    }
}

/// The packet being built, offered to frame-writing microprotocols.
pub struct FrameWriter<'b> {
    /// The packet so far, after any datagrams of the same batch that precede it (writers
    /// append; [`FrameWriter::packet_len`] is the packet's own length).
    pub buf: &'b mut Vec<u8>,
    /// Where the packet starts in `buf`.
    pub(crate) start: usize,
    /// Largest packet length before the seal.
    pub(crate) limit: usize,
    /// Length of the packet's header.
    pub(crate) header_len: usize,
    /// Bytes the packet protection adds when the packet is sealed.
    pub(crate) seal_overhead: usize,
    /// Set by a writer whose frame needs acknowledgement.
    pub ack_eliciting: bool,
    /// Set by a writer that made the packet a path-MTU probe (PING and PADDING only).
    pub probe: bool,
    /// Some writer owes frames, so the packet leaves: a writer may add frames it does not
    /// owe yet (an acknowledgement it would otherwise hold back) only then.
    pub owed: bool,
}

impl FrameWriter<'_> {
    /// Bytes still free in the packet.
    pub fn room(&self) -> usize {
        self.limit.saturating_sub(self.packet_len())
    }

    /// The packet's length so far.
    pub fn packet_len(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Length of the packet header (no frame written yet when the packet is this long).
    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// Where a packet that is to be `datagram` bytes on the wire must end before it is
    /// sealed.
    pub fn body_end_for(&self, datagram: usize) -> usize {
        datagram.saturating_sub(self.seal_overhead)
    }

    /// Fills the packet with zero bytes (PADDING frames) up to `len`.
    pub fn pad_to(&mut self, len: usize) {
        self.buf.resize(self.start + len, 0);
    }
}

/// Most segments cut from the application's queue ahead of the packets that carry them
/// (on a fast or unpaced path; a slower one cuts fewer, see [`State::cut_ahead`]). More
/// would only be cut sooner: cutting a whole send buffer at once (thousands of segments)
/// delays the first packet by milliseconds and holds the connection meanwhile. Half of the
/// cut-ahead left asks the segmenter for more.
pub const CUT_AHEAD: usize = 128;

/// Fewest segments cut ahead however slow the path (see [`State::cut_ahead`]): enough for
/// the segmenter to work in batches and the runtime to fill a batch of datagrams.
pub const CUT_AHEAD_MIN: usize = 8;

/// How far ahead the segmenter cuts, in time at the pacing rate (see [`State::cut_ahead`]).
pub const CUT_HORIZON_US: u64 = 1_000;
