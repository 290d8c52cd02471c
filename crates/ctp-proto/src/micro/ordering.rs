//! Ordering microprotocols: FIFO delivery and unordered delivery of reassembled messages.

use crate::engine::event::{Event, EventKind};
use crate::engine::timer::TimerId;
use crate::engine::{Cx, Microprotocol, Setup, SetupError};
use crate::time::Instant;
use core::time::Duration;
use std::collections::BTreeMap;

fn deliver(slot: u32, cx: &mut Cx<'_, '_>) {
    if let Some(c) = cx.st.app.unpark(slot) {
        cx.st.stats.app_bytes_delivered += c.data.len() as u64;
        cx.st.stats.messages_delivered += 1;
        cx.st.app.deliver(c);
    }
}

/// Delivers messages strictly in the order they were sent.
#[derive(Debug, Default)]
pub struct Fifo {
    next: Option<u64>,
    waiting: BTreeMap<u64, u32>,
}

impl Microprotocol for Fifo {
    fn bindings(&self) -> &'static [EventKind] {
        &[EventKind::MessageComplete]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        let Event::MessageComplete(m) = *ev else {
            return;
        };
        let next = *self.next.get_or_insert(cx.st.session.peer_msg_isn);
        if m.msg < next {
            // Already delivered (cannot happen with sequencing; harmless if it does).
            cx.st.app.unpark(m.slot);
            return;
        }
        self.waiting.insert(m.msg, m.slot);
        let mut n = next;
        while let Some(slot) = self.waiting.remove(&n) {
            deliver(slot, cx);
            n += 1;
        }
        self.next = Some(n);
    }
}

/// Delivers each message as soon as it is complete.
#[derive(Debug, Default)]
pub struct Unordered;

impl Microprotocol for Unordered {
    fn bindings(&self) -> &'static [EventKind] {
        &[EventKind::MessageComplete]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        if let Event::MessageComplete(m) = *ev {
            // Without flow control the application's queue is the only bound: when it is
            // full, drop rather than grow.
            if cx.st.app.rx_bytes >= cx.st.app.rx_limit {
                cx.st.app.unpark(m.slot);
                cx.st.stats.messages_abandoned += 1;
                return;
            }
            deliver(m.slot, cx);
        }
    }
}

/// In-order delivery that does not wait forever: when a message is missing while later ones
/// are complete, it waits `deadline` (from the moment the first later message was ready),
/// then skips the gap. A message arriving after its turn was skipped is dropped.
#[derive(Debug)]
pub struct LossyFifo {
    next: Option<u64>,
    waiting: BTreeMap<u64, u32>,
    deadline: Duration,
    timer: TimerId,
    /// When the oldest waiting message became ready.
    blocked_since: Option<Instant>,
}

impl LossyFifo {
    /// Lossy FIFO with the given skip deadline.
    pub fn new(setup: &mut Setup<'_>, deadline: Duration) -> Result<Self, SetupError> {
        Ok(LossyFifo {
            next: None,
            waiting: BTreeMap::new(),
            deadline,
            timer: setup.timer()?,
            blocked_since: None,
        })
    }

    fn drain(&mut self, cx: &mut Cx<'_, '_>) {
        let Some(mut n) = self.next else { return };
        while let Some(slot) = self.waiting.remove(&n) {
            deliver(slot, cx);
            n += 1;
        }
        self.next = Some(n);
        if self.waiting.is_empty() {
            self.blocked_since = None;
            cx.cancel_timer(self.timer);
        } else {
            let since = *self.blocked_since.get_or_insert(cx.now);
            cx.set_timer(self.timer, since + self.deadline);
        }
    }
}

impl Microprotocol for LossyFifo {
    fn bindings(&self) -> &'static [EventKind] {
        &[EventKind::MessageComplete]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        let Event::MessageComplete(m) = *ev else {
            return;
        };
        let next = *self.next.get_or_insert(cx.st.session.peer_msg_isn);
        if m.msg < next {
            // Its turn was skipped: too late to deliver in order.
            cx.st.app.unpark(m.slot);
            cx.st.stats.messages_abandoned += 1;
            return;
        }
        self.waiting.insert(m.msg, m.slot);
        self.drain(cx);
    }

    fn on_timer(&mut self, _t: TimerId, cx: &mut Cx<'_, '_>) {
        // Skip the gap up to the oldest complete message and deliver what follows it.
        if let Some((&first, _)) = self.waiting.first_key_value() {
            let skipped = first - self.next.unwrap_or(first);
            cx.st.stats.messages_abandoned += skipped;
            self.next = Some(first);
            self.blocked_since = None;
            self.drain(cx);
        }
    }
}
