//! Which of an endpoint's connections need attention, so that no call looks at all of
//! them: idle connections cost nothing per datagram.
//!
//! Every way a connection can change goes through its endpoint (a datagram for it, a timer,
//! the application through `connection_mut`, a packet built); each marks the connection
//! *touched*. Before answering, the endpoint *settles* the touched ones: it recomputes
//! their deadlines into a heap (stale entries are skipped when they surface), queues them
//! to be polled for datagrams (round robin among those with something to send) and to be
//! checked for events.

use ctp_cc::time::Instant;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// A FIFO of slot indices in which each index appears at most once.
#[derive(Debug, Default)]
struct UniqueQueue {
    queue: VecDeque<usize>,
    queued: Vec<bool>,
}

impl UniqueQueue {
    fn push_back(&mut self, i: usize) {
        if self.queued.len() <= i {
            self.queued.resize(i + 1, false);
        }
        if !self.queued[i] {
            self.queued[i] = true;
            self.queue.push_back(i);
        }
    }

    fn push_front(&mut self, i: usize) {
        if self.queued.len() <= i {
            self.queued.resize(i + 1, false);
        }
        if !self.queued[i] {
            self.queued[i] = true;
            self.queue.push_front(i);
        }
    }

    fn pop_front(&mut self) -> Option<usize> {
        let i = self.queue.pop_front()?;
        self.queued[i] = false;
        Some(i)
    }
}

/// The attention schedule of one endpoint's connection slots.
#[derive(Debug, Default)]
pub(crate) struct Schedule {
    touched: UniqueQueue,
    to_poll: UniqueQueue,
    to_report: UniqueQueue,
    deadlines: BinaryHeap<Reverse<(Instant, usize)>>,
    /// Each slot's deadline as last computed (what a heap entry must match to count).
    deadline: Vec<Option<Instant>>,
    /// Slots handed out to be polled for datagrams, ever (the work idle connections must
    /// not cause).
    pub(crate) polled: u64,
}

impl Schedule {
    /// Slot `i` may have changed.
    pub(crate) fn touch(&mut self, i: usize) {
        self.touched.push_back(i);
    }

    /// Settles every touched slot: `deadline_of(i)` gives its deadline now (`None` for an
    /// empty slot or no timer).
    pub(crate) fn settle(&mut self, mut deadline_of: impl FnMut(usize) -> Option<Instant>) {
        while let Some(i) = self.touched.pop_front() {
            self.set_deadline(i, deadline_of(i));
            self.to_poll.push_back(i);
            self.to_report.push_back(i);
        }
    }

    /// Slot `i`'s deadline is now `d` (it was polled and sent nothing: only its timers
    /// may have moved).
    pub(crate) fn set_deadline(&mut self, i: usize, d: Option<Instant>) {
        if self.deadline.len() <= i {
            self.deadline.resize(i + 1, None);
        }
        if d != self.deadline[i] {
            self.deadline[i] = d;
            if let Some(at) = d {
                self.deadlines.push(Reverse((at, i)));
            }
            if self.deadlines.len() > 2 * self.deadline.len() + 64 {
                // Stale entries leave the heap only when they surface; far-off ones (an
                // idle timeout, a connection gone) would pile up. Rebuilt from the
                // current deadlines: one entry per slot, so the heap stays bounded by the
                // slots (amortized: each rebuild drops more entries than there are slots).
                self.deadlines = self
                    .deadline
                    .iter()
                    .enumerate()
                    .filter_map(|(i, d)| d.map(|at| Reverse((at, i))))
                    .collect();
            }
        }
    }

    /// Entries of the timer heap, stale ones included.
    pub(crate) fn timers(&self) -> usize {
        self.deadlines.len()
    }

    /// The earliest deadline (settle first).
    pub(crate) fn next_deadline(&mut self) -> Option<Instant> {
        while let Some(&Reverse((at, i))) = self.deadlines.peek() {
            if self.deadline.get(i).copied().flatten() == Some(at) {
                return Some(at);
            }
            self.deadlines.pop();
        }
        None
    }

    /// A slot whose deadline is at or before `now`, taken off the heap (it is touched
    /// again once handled).
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<usize> {
        let at = self.next_deadline().filter(|&at| at <= now)?;
        let Reverse((_, i)) = self.deadlines.pop().expect("peeked");
        debug_assert_eq!(self.deadline[i], Some(at));
        self.deadline[i] = None;
        Some(i)
    }

    /// The next slot that may have a datagram to send.
    pub(crate) fn next_to_poll(&mut self) -> Option<usize> {
        let i = self.to_poll.pop_front()?;
        self.polled += 1;
        Some(i)
    }

    /// The next slot that may have an event to report.
    pub(crate) fn next_to_report(&mut self) -> Option<usize> {
        self.to_report.pop_front()
    }

    /// Slot `i` reported an event: check it first next time (it may have another).
    pub(crate) fn report_again(&mut self, i: usize) {
        self.to_report.push_front(i);
    }

    /// Slot `i` was emptied.
    pub(crate) fn forget(&mut self, i: usize) {
        if let Some(d) = self.deadline.get_mut(i) {
            *d = None;
        }
    }
}
