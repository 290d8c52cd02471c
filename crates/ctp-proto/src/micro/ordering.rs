//! Ordering microprotocols: FIFO delivery and unordered delivery of reassembled messages.

use crate::engine::event::{Event, EventKind};
use crate::engine::{Cx, Microprotocol};
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
