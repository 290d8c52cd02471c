//! Ordering microprotocols. Each holds a *delivery* bit on every reassembled message and
//! sets it when the message's turn comes; the message reaches the application when every
//! delivery bit (ordering, jitter control) is set, in whatever order.

use super::decl::{Doubt, Group, MicroDecl, MicroId, Need, NeedOneOf};
use crate::engine::event::{Event, EventKind, HoldBit};
use crate::engine::hold::{Barrier, Rearm};
use crate::engine::streams::Retired;
use crate::engine::timer::TimerId;
use crate::engine::{Cx, Microprotocol, Setup, SetupError};
use core::time::Duration;
use ctp_cc::time::Instant;
use std::collections::BTreeMap;

/// The declaration of [`MicroId::Fifo`]: what it needs, excludes and reads.
pub const FIFO_DECL: MicroDecl = MicroDecl {
    needs: &[Need {
        micro: MicroId::Sequencing,
        why: "ordering needs duplicate-free segments",
    }],
    needs_one_of: &[NeedOneOf {
        group: Group::Reliability,
        why: "in-order delivery waits for every message, so a lost one would stall it forever",
    }],
    groups: &[Group::Delivery],
    ..MicroDecl::new(MicroId::Fifo)
};

/// The declaration of [`MicroId::Unordered`]: what it needs, excludes and reads.
pub const UNORDERED_DECL: MicroDecl = MicroDecl {
    groups: &[Group::Delivery],
    doubts: &[Doubt::Without(
        MicroId::Sequencing,
        "`unordered` without `sequencing` may deliver a duplicated datagram twice",
    )],
    ..MicroDecl::new(MicroId::Unordered)
};

/// The declaration of [`MicroId::LossyFifo`]: what it needs, excludes and reads.
pub const LOSSY_FIFO_DECL: MicroDecl = MicroDecl {
    needs: &[Need {
        micro: MicroId::Sequencing,
        why: "ordering needs duplicate-free segments",
    }],
    groups: &[Group::Delivery],
    params: &["fifo_deadline_ms"],
    doubts: &[Doubt::With(
        MicroId::Arq,
        "`lossy-fifo` skips late messages that `arq` keeps retransmitting: the semantics conflict",
    )],
    ..MicroDecl::new(MicroId::LossyFifo)
};

/// The declaration of [`MicroId::Urgent`]: what it needs, excludes and reads.
pub const URGENT_DECL: MicroDecl = MicroDecl::new(MicroId::Urgent);

fn delivery_bit(setup: &mut Setup<'_>) -> Result<HoldBit, SetupError> {
    setup.hold_bit(Barrier::Deliver, Rearm::Once)
}

/// Marks a message number that was let through out of band: its turn is skipped.
const PASSED: u32 = u32::MAX;

/// Messages waiting for their predecessors, keyed by message sequence number: the slot
/// and when the message became ready.
#[derive(Debug, Default)]
struct InOrder {
    next: Option<u64>,
    waiting: BTreeMap<u64, (u32, Instant)>,
}

impl InOrder {
    /// Records a complete message; returns false (and drops it) if its turn has passed.
    fn admit(&mut self, msg: u64, slot: u32, cx: &mut Cx<'_, '_>) -> bool {
        let next = *self.next.get_or_insert(cx.st.session.peer_msg_isn);
        if msg < next {
            cx.discard_message(slot);
            return false;
        }
        self.waiting.insert(msg, (slot, cx.now));
        true
    }

    /// Records a complete message and releases what it makes consecutive; the message
    /// whose turn it is goes at once, without waiting in the tree (the common case).
    fn admit_and_release(&mut self, msg: u64, slot: u32, bit: HoldBit, cx: &mut Cx<'_, '_>) {
        let next = *self.next.get_or_insert(cx.st.session.peer_msg_isn);
        if msg == next {
            self.next = Some(next + 1);
            cx.release_message(slot, bit);
            self.release(bit, cx);
        } else if self.admit(msg, slot, cx) {
            self.release(bit, cx);
        }
    }

    /// Releases consecutive messages from `next` on.
    fn release(&mut self, bit: HoldBit, cx: &mut Cx<'_, '_>) {
        let Some(mut n) = self.next else { return };
        while let Some((slot, _)) = self.waiting.remove(&n) {
            if slot != PASSED {
                cx.release_message(slot, bit);
            }
            n += 1;
        }
        self.next = Some(n);
    }

    /// An urgent message bypasses the order: released now, its turn kept as passed.
    fn pass(&mut self, msg: u64, slot: u32, bit: HoldBit, cx: &mut Cx<'_, '_>) {
        if let Some(w) = self.waiting.get_mut(&msg).filter(|w| w.0 == slot) {
            w.0 = PASSED;
            cx.release_message(slot, bit);
        }
    }
}

/// Delivers messages strictly in the order they were sent, each stream on its own: a
/// stream waiting for a lost chunk holds up no other. A stream's chunks are numbered by
/// the offset of their first byte; once a stream's end (or reset) went through, its state
/// here is freed and its id kept in [`Retired`], so a late copy never opens it again.
#[derive(Debug)]
pub struct Fifo {
    bit: HoldBit,
    order: InOrder,
    /// The offset of the next chunk of each stream other than 0 that has had data and
    /// has not ended (8 bytes a stream: what an open stream costs here).
    stream_next: std::collections::HashMap<u64, u64>,
    /// Chunks of streams other than 0 waiting for an earlier one, by stream and offset.
    stream_waiting: BTreeMap<(u64, u64), u32>,
    /// Streams whose end went through.
    ended: Retired,
}

impl Fifo {
    /// Registers the delivery bit.
    pub fn new(setup: &mut Setup<'_>) -> Result<Self, SetupError> {
        Ok(Fifo {
            bit: delivery_bit(setup)?,
            order: InOrder::default(),
            stream_next: std::collections::HashMap::new(),
            stream_waiting: BTreeMap::new(),
            ended: Retired::default(),
        })
    }

    /// A complete chunk of stream `stream` (not 0) at offset `at`: released in the
    /// stream's own order, whatever waits on other streams; a reset goes through at once
    /// and takes whatever of the stream waits with it.
    fn on_stream_message(&mut self, stream: u64, at: u64, slot: u32, cx: &mut Cx<'_, '_>) {
        let Some((len, fin, reset)) = cx
            .st
            .app
            .parked_mut(slot)
            .map(|c| (c.data.len() as u64, c.fin, c.reset.is_some()))
        else {
            return;
        };
        if self.ended.contains(stream) {
            // A late copy of a stream that ended: it never opens the stream again.
            cx.discard_message(slot);
            return;
        }
        let limit = crate::engine::streams::MAX_STREAMS;
        let known = self.stream_next.contains_key(&stream);
        if !known && (self.stream_next.len() >= limit || self.ended.scattered() >= limit) {
            cx.discard_message(slot);
            cx.st.stats.protocol_violations += 1;
            let why = format!("data on more than {limit} open streams");
            cx.st.session.close = Some(crate::engine::session::CloseReason::ProtocolViolation(why));
            return;
        }
        if reset {
            let waiting: Vec<u32> = self
                .stream_waiting
                .range((stream, 0)..=(stream, u64::MAX))
                .map(|(_, &s)| s)
                .collect();
            self.stream_waiting.retain(|&(s, _), _| s != stream);
            for s in waiting {
                cx.discard_message(s);
            }
            cx.release_message(slot, self.bit);
            self.end(stream);
            return;
        }
        let next = self.stream_next.entry(stream).or_insert(0);
        if at < *next {
            cx.discard_message(slot);
            return;
        }
        if at > *next {
            self.stream_waiting.insert((stream, at), slot);
            return;
        }
        cx.release_message(slot, self.bit);
        *next += len;
        let mut ended = fin;
        while !ended {
            let Some(slot) = self.stream_waiting.remove(&(stream, *next)) else {
                break;
            };
            let (len, fin) = cx.st.app.parked_mut(slot).map_or((0, false), |c| {
                (c.data.len() as u64, c.fin || c.reset.is_some())
            });
            cx.release_message(slot, self.bit);
            *next += len;
            ended = fin;
        }
        if ended {
            self.end(stream);
        }
    }

    /// Frees the state of a stream whose end went through.
    fn end(&mut self, stream: u64) {
        self.stream_next.remove(&stream);
        self.ended.insert(stream);
    }
}

impl Microprotocol for Fifo {
    fn bindings(&self) -> &'static [EventKind] {
        &[EventKind::MessageComplete, EventKind::UrgentMessage]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        match *ev {
            Event::MessageComplete(m) => {
                if m.stream == 0 {
                    self.order.admit_and_release(m.msg, m.slot, self.bit, cx);
                } else {
                    self.on_stream_message(m.stream, m.msg, m.slot, cx);
                }
            }
            Event::UrgentMessage(m) if m.stream == 0 => {
                self.order.pass(m.msg, m.slot, self.bit, cx)
            }
            _ => {}
        }
    }
}

/// Delivers each message as soon as it is complete.
#[derive(Debug)]
pub struct Unordered {
    bit: HoldBit,
}

impl Unordered {
    /// Registers the delivery bit.
    pub fn new(setup: &mut Setup<'_>) -> Result<Self, SetupError> {
        Ok(Unordered {
            bit: delivery_bit(setup)?,
        })
    }
}

impl Microprotocol for Unordered {
    fn bindings(&self) -> &'static [EventKind] {
        &[EventKind::MessageComplete]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        if let Event::MessageComplete(m) = *ev {
            // Without flow control the application's queue is the only bound: when it is
            // full, drop rather than grow.
            if cx.st.app.rx_bytes >= cx.st.app.rx_limit {
                cx.discard_message(m.slot);
                return;
            }
            cx.release_message(m.slot, self.bit);
        }
    }
}

/// In-order delivery that does not wait forever: when a message is missing while later ones
/// are complete, it waits `deadline` (from the moment the first later message was ready),
/// then skips the gap. A message arriving after its turn was skipped is dropped.
#[derive(Debug)]
pub struct LossyFifo {
    bit: HoldBit,
    order: InOrder,
    deadline: Duration,
    timer: TimerId,
}

impl LossyFifo {
    /// Lossy FIFO with the given skip deadline.
    pub fn new(setup: &mut Setup<'_>, deadline: Duration) -> Result<Self, SetupError> {
        Ok(LossyFifo {
            bit: delivery_bit(setup)?,
            order: InOrder::default(),
            deadline,
            timer: setup.timer()?,
        })
    }

    /// Delivers what is in order; while a gap remains, skips it once the oldest message
    /// waiting behind it has waited `deadline` (each gap's wait runs from the moment the
    /// message after it became ready, so consecutive gaps do not add up their waits), and
    /// arms the timer for the next one.
    fn drain(&mut self, cx: &mut Cx<'_, '_>) {
        loop {
            self.order.release(self.bit, cx);
            let Some((&first, &(_, ready))) = self.order.waiting.first_key_value() else {
                cx.cancel_timer(self.timer);
                return;
            };
            if cx.now < ready + self.deadline {
                cx.set_timer(self.timer, ready + self.deadline);
                return;
            }
            let skipped = first - self.order.next.unwrap_or(first);
            cx.st.stats.messages_abandoned += skipped;
            self.order.next = Some(first);
        }
    }
}

impl Microprotocol for LossyFifo {
    fn bindings(&self) -> &'static [EventKind] {
        &[EventKind::MessageComplete, EventKind::UrgentMessage]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        match *ev {
            // Streams other than 0 are ordered by `fifo` only (opening one needs it): a
            // peer's chunk on one here is released as it completes.
            Event::MessageComplete(m) if m.stream != 0 => cx.release_message(m.slot, self.bit),
            Event::MessageComplete(m) => {
                let admitted = self.order.admit(m.msg, m.slot, cx);
                if admitted {
                    self.drain(cx);
                }
            }
            Event::UrgentMessage(m) if m.stream == 0 => {
                self.order.pass(m.msg, m.slot, self.bit, cx)
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, _t: TimerId, cx: &mut Cx<'_, '_>) {
        self.drain(cx);
    }
}

/// Urgent (out-of-band) messages: a message the sender marked urgent is announced as
/// `UrgentMessage`, on which the ordering microprotocol in force lets it pass at once (its
/// turn in the order is kept, so later messages still wait for earlier ones). Without this
/// microprotocol the urgent mark is ignored.
#[derive(Debug, Default)]
pub struct Urgent;

impl Microprotocol for Urgent {
    fn bindings(&self) -> &'static [EventKind] {
        &[EventKind::MessageComplete]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        if let Event::MessageComplete(m) = *ev {
            if cx.st.app.parked_mut(m.slot).is_some_and(|c| c.urgent) {
                cx.raise(Event::UrgentMessage(m));
            }
        }
    }
}
