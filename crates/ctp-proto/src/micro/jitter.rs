//! Jitter control: microprotocols that use the passage of time, not predecessors, to decide
//! when a message may reach the application. Each holds a delivery bit.
//!
//! - [`FixedInterval`] delivers complete messages at a fixed interval (oldest first).
//! - [`Playout`] preserves the sender's timing: messages carry the sender's timestamp, the
//!   first one fixes the offset between the two clocks, and each is delivered at its
//!   timestamp plus that offset plus a playout delay. A message that arrives after its
//!   playout time is delivered at once and counted late.

use super::decl::{Group, MicroDecl, MicroId};
use crate::engine::event::{Event, EventKind, HoldBit};
use crate::engine::hold::{Barrier, Rearm};
use crate::engine::timer::TimerId;
use crate::engine::{Cx, Microprotocol, Setup, SetupError};
use core::time::Duration;
use ctp_cc::time::Instant;
use std::collections::BTreeMap;

/// The declaration of [`MicroId::FixedInterval`]: what it needs, excludes and reads.
pub const FIXED_INTERVAL_DECL: MicroDecl = MicroDecl {
    groups: &[Group::JitterControl],
    params: &["jitter_interval_us"],
    ..MicroDecl::new(MicroId::FixedInterval)
};

/// The declaration of [`MicroId::Playout`]: what it needs, excludes and reads.
pub const PLAYOUT_DECL: MicroDecl = MicroDecl {
    groups: &[Group::JitterControl],
    params: &["playout_delay_ms"],
    ..MicroDecl::new(MicroId::Playout)
};

/// Delivers one message per interval.
#[derive(Debug)]
pub struct FixedInterval {
    bit: HoldBit,
    interval: Duration,
    timer: TimerId,
    queue: BTreeMap<u64, u32>,
    next_at: Option<Instant>,
}

impl FixedInterval {
    /// One message every `interval`.
    pub fn new(setup: &mut Setup<'_>, interval: Duration) -> Result<Self, SetupError> {
        Ok(FixedInterval {
            bit: setup.hold_bit(Barrier::Deliver, Rearm::Once)?,
            interval,
            timer: setup.timer()?,
            queue: BTreeMap::new(),
            next_at: None,
        })
    }

    fn pump(&mut self, cx: &mut Cx<'_, '_>) {
        let now = cx.now;
        let due = *self.next_at.get_or_insert(now);
        if due > now {
            cx.set_timer(self.timer, due);
            return;
        }
        if let Some((_, slot)) = self.queue.pop_first() {
            cx.release_message(slot, self.bit);
            // The schedule does not accumulate credit while idle.
            self.next_at = Some(due.max(now) + self.interval);
        }
        if !self.queue.is_empty() {
            cx.set_timer(self.timer, self.next_at.unwrap_or(now));
        }
    }
}

impl Microprotocol for FixedInterval {
    fn bindings(&self) -> &'static [EventKind] {
        &[EventKind::MessageComplete]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        match *ev {
            // Keyed by message number: a chunk of a stream other than 0 (numbered apart)
            // is released as it completes.
            Event::MessageComplete(m) if m.stream != 0 => cx.release_message(m.slot, self.bit),
            Event::MessageComplete(m) => {
                self.queue.insert(m.msg, m.slot);
                self.pump(cx);
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, _t: TimerId, cx: &mut Cx<'_, '_>) {
        self.pump(cx);
    }
}

/// Delivers each message at the sender's timing plus a playout delay.
#[derive(Debug)]
pub struct Playout {
    bit: HoldBit,
    delay: Duration,
    timer: TimerId,
    /// Arrival time minus sender timestamp of the first message, microseconds.
    offset: Option<i128>,
    /// Messages by playout time (then message number).
    queue: BTreeMap<(Instant, u64), u32>,
}

impl Playout {
    /// A playout buffer of `delay`.
    pub fn new(setup: &mut Setup<'_>, delay: Duration) -> Result<Self, SetupError> {
        Ok(Playout {
            bit: setup.hold_bit(Barrier::Deliver, Rearm::Once)?,
            delay,
            timer: setup.timer()?,
            offset: None,
            queue: BTreeMap::new(),
        })
    }

    fn pump(&mut self, cx: &mut Cx<'_, '_>) {
        while let Some((&(at, _), _)) = self.queue.first_key_value() {
            if at > cx.now {
                cx.set_timer(self.timer, at);
                return;
            }
            if let Some((_, slot)) = self.queue.pop_first() {
                cx.release_message(slot, self.bit);
            }
        }
        cx.cancel_timer(self.timer);
    }
}

impl Microprotocol for Playout {
    fn bindings(&self) -> &'static [EventKind] {
        &[EventKind::MessageComplete]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        let Event::MessageComplete(m) = *ev else {
            return;
        };
        let Some(ts) = cx.st.app.parked_mut(m.slot).and_then(|c| c.sent_us) else {
            // Unstamped: nothing to preserve.
            cx.release_message(m.slot, self.bit);
            return;
        };
        let now = cx.now.as_micros() as i128;
        let offset = *self.offset.get_or_insert(now - ts as i128);
        let at_us = ts as i128 + offset + self.delay.as_micros() as i128;
        if at_us <= now {
            if at_us < now {
                cx.st.stats.late_deliveries += 1;
            }
            cx.release_message(m.slot, self.bit);
            return;
        }
        self.queue
            .insert((Instant::from_micros(at_us as u64), m.msg), m.slot);
        self.pump(cx);
    }

    fn on_timer(&mut self, _t: TimerId, cx: &mut Cx<'_, '_>) {
        self.pump(cx);
    }
}
