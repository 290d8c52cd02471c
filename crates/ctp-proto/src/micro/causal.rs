//! Causal ordering: a message is delivered only after the earlier messages its sender named
//! (`Connection::send_msg_after`) were delivered; a message that names none is delivered as
//! soon as it is complete. It holds a delivery bit on every reassembled message, like the
//! other ordering microprotocols, and is itself the connection's delivery order (it replaces
//! `fifo`, `lossy-fifo` or `unordered`).
//!
//! The predecessors travel with the message's first piece (`DEPS` piece flag, varint
//! distances below the message id). Message ids grow with the order of sending, so a
//! predecessor always has a smaller id; the receiver keeps a *floor* below which every id is
//! resolved (delivered, or given up), plus the set of resolved ids above it.
//!
//! Lost predecessors: with `arq` every message eventually arrives, so a message waits for as
//! long as it takes. Without it, a waiting message waits at most `deadline` (from the moment
//! it was complete); then the predecessors that have not arrived are declared lost and it is
//! delivered. A message arriving after it was declared lost is dropped (delivering it would
//! put an effect before its cause) and counted abandoned, as `lossy-fifo` does with late
//! messages. Predecessors that arrived but still wait for their own predecessors are not
//! declared lost: they expire on their own deadline, so nothing is delivered before a
//! predecessor that reached the receiver.
//!
//! Bounds: at most [`MAX_WAITING`] messages wait (beyond that the oldest is released at once
//! and counted in `causal_released_early`), and at most [`MAX_RESOLVED`] resolved ids are
//! remembered above the floor (beyond that the oldest unresolved id is given up).

use super::decl::{Group, MicroDecl, MicroId, Need};
use crate::engine::event::{Event, EventKind, HoldBit};
use crate::engine::hold::{Barrier, Rearm};
use crate::engine::timer::TimerId;
use crate::engine::{Cx, Microprotocol, Setup, SetupError};
use core::time::Duration;
use ctp_cc::time::Instant;
use std::collections::{BTreeMap, BTreeSet};

/// The declaration of [`MicroId::Causal`]: what it needs, excludes and reads.
pub const DECL: MicroDecl = MicroDecl {
    needs: &[Need {
        micro: MicroId::Sequencing,
        why: "a duplicated message would be taken for a late one and its turn confused",
    }],
    groups: &[Group::Delivery],
    params: &["causal_deadline_ms"],
    ..MicroDecl::new(MicroId::Causal)
};

/// Most messages waiting for predecessors at once.
pub const MAX_WAITING: usize = 4096;
/// Most resolved message ids remembered above the floor.
pub const MAX_RESOLVED: usize = 65_536;

#[derive(Debug)]
struct Waiting {
    slot: u32,
    /// Predecessors not yet resolved.
    missing: usize,
    /// Every predecessor named (deduplicated).
    preds: Vec<u64>,
    /// When the message became complete.
    since: Instant,
    /// Its deadline passed: it now waits only for predecessors that arrived.
    expired: bool,
}

/// The causal-ordering microprotocol.
#[derive(Debug)]
pub struct Causal {
    bit: HoldBit,
    /// How long a message waits for missing predecessors; `None` waits for ever (reliable).
    deadline: Option<Duration>,
    timer: TimerId,
    /// Every message id below this is resolved.
    floor: Option<u64>,
    /// Resolved ids at or above the floor.
    resolved: BTreeSet<u64>,
    /// Complete messages waiting for predecessors, by id.
    waiting: BTreeMap<u64, Waiting>,
    /// Waiting messages by the predecessor they wait for.
    dependents: BTreeMap<u64, Vec<u64>>,
    work: Vec<u64>,
}

impl Causal {
    /// Causal ordering; without `deadline` a message waits for its predecessors for ever.
    pub fn new(setup: &mut Setup<'_>, deadline: Option<Duration>) -> Result<Self, SetupError> {
        Ok(Causal {
            bit: setup.hold_bit(Barrier::Deliver, Rearm::Once)?,
            deadline,
            timer: setup.timer()?,
            floor: None,
            resolved: BTreeSet::new(),
            waiting: BTreeMap::new(),
            dependents: BTreeMap::new(),
            work: Vec::new(),
        })
    }

    /// Messages currently waiting for predecessors.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    fn is_resolved(&self, id: u64) -> bool {
        self.floor.is_some_and(|f| id < f) || self.resolved.contains(&id)
    }

    fn mark(&mut self, id: u64) {
        let Some(floor) = self.floor.as_mut() else {
            return;
        };
        if id < *floor {
            return;
        }
        if id == *floor {
            *floor += 1;
            while self.resolved.remove(floor) {
                *floor += 1;
            }
        } else {
            self.resolved.insert(id);
        }
    }

    /// Resolves `first` and, transitively, delivers every waiting message it unblocks.
    fn resolve(&mut self, first: u64, cx: &mut Cx<'_, '_>) {
        let mut work = std::mem::take(&mut self.work);
        work.clear();
        work.push(first);
        while let Some(p) = work.pop() {
            self.mark(p);
            let Some(deps) = self.dependents.remove(&p) else {
                continue;
            };
            for d in deps {
                let Some(w) = self.waiting.get_mut(&d) else {
                    continue; // released early meanwhile
                };
                w.missing = w.missing.saturating_sub(1);
                if w.missing == 0 {
                    if let Some(w) = self.waiting.remove(&d) {
                        cx.release_message(w.slot, self.bit);
                    }
                    work.push(d);
                }
            }
        }
        self.work = work;
    }

    /// Delivers a waiting message now, whatever it still waits for.
    fn release_early(&mut self, id: u64, cx: &mut Cx<'_, '_>) {
        if let Some(w) = self.waiting.remove(&id) {
            cx.st.stats.causal_released_early += 1;
            cx.release_message(w.slot, self.bit);
            self.resolve(id, cx);
        }
    }

    /// Declares the predecessors of `id` that never arrived lost, which may deliver it.
    fn expire(&mut self, id: u64, cx: &mut Cx<'_, '_>) {
        let Some(w) = self.waiting.get_mut(&id) else {
            return;
        };
        w.expired = true;
        let Some(w) = self.waiting.get(&id) else {
            return;
        };
        let lost: Vec<u64> = w
            .preds
            .iter()
            .copied()
            .filter(|&p| !self.is_resolved(p) && !self.waiting.contains_key(&p))
            .collect();
        for p in lost {
            cx.st.stats.messages_abandoned += 1;
            self.resolve(p, cx);
        }
    }

    /// Keeps the resolved set bounded by giving up the oldest unresolved id.
    fn trim(&mut self, cx: &mut Cx<'_, '_>) {
        while self.resolved.len() > MAX_RESOLVED {
            let Some(floor) = self.floor else { return };
            if self.waiting.contains_key(&floor) {
                self.release_early(floor, cx);
            } else {
                cx.st.stats.messages_abandoned += 1;
                self.resolve(floor, cx);
            }
        }
    }

    fn arm(&mut self, cx: &mut Cx<'_, '_>) {
        let oldest = self
            .waiting
            .values()
            .filter(|w| !w.expired)
            .map(|w| w.since)
            .min();
        let (Some(d), Some(oldest)) = (self.deadline, oldest) else {
            cx.cancel_timer(self.timer);
            return;
        };
        cx.set_timer(self.timer, oldest + d);
    }

    fn on_complete(&mut self, msg: u64, slot: u32, cx: &mut Cx<'_, '_>) {
        self.floor.get_or_insert(cx.st.session.peer_msg_isn);
        if self.is_resolved(msg) || self.waiting.contains_key(&msg) {
            // Its predecessors' dependents were delivered without it: too late.
            cx.discard_message(slot);
            return;
        }
        let mut preds = cx
            .st
            .app
            .parked_mut(slot)
            .map(|c| std::mem::take(&mut c.deps))
            .unwrap_or_default();
        preds.sort_unstable();
        preds.dedup();
        preds.retain(|&p| p < msg);
        let missing = preds.iter().filter(|&&p| !self.is_resolved(p)).count();
        if missing == 0 {
            cx.release_message(slot, self.bit);
            self.resolve(msg, cx);
            self.trim(cx);
            return;
        }
        if self.waiting.len() >= MAX_WAITING {
            if let Some((&oldest, _)) = self.waiting.first_key_value() {
                self.release_early(oldest, cx);
            }
        }
        for &p in &preds {
            if !self.is_resolved(p) {
                self.dependents.entry(p).or_default().push(msg);
            }
        }
        self.waiting.insert(
            msg,
            Waiting {
                slot,
                missing,
                preds,
                since: cx.now,
                expired: false,
            },
        );
        self.trim(cx);
        self.arm(cx);
    }
}

impl Microprotocol for Causal {
    fn bindings(&self) -> &'static [EventKind] {
        &[EventKind::MessageComplete]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        match *ev {
            // Streams other than 0 are ordered by `fifo` only (opening one needs it): a
            // peer's chunk on one here is released as it completes.
            Event::MessageComplete(m) if m.stream != 0 => cx.release_message(m.slot, self.bit),
            Event::MessageComplete(m) => self.on_complete(m.msg, m.slot, cx),
            _ => {}
        }
    }

    fn on_timer(&mut self, _t: TimerId, cx: &mut Cx<'_, '_>) {
        let Some(d) = self.deadline else { return };
        let due: Vec<u64> = self
            .waiting
            .iter()
            .filter(|(_, w)| !w.expired && w.since + d <= cx.now)
            .map(|(&id, _)| id)
            .collect();
        for id in due {
            self.expire(id, cx);
        }
        // Dependents of expired messages are now either delivered or waiting for
        // predecessors that arrived (and expire on their own deadline).
        self.arm(cx);
    }
}
