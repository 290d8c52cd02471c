//! Virtual time and the event queue.
//!
//! Events are ordered by `(time, sequence)`: two events due at the same microsecond run in
//! the order they were scheduled, so a run never depends on heap internals.

use ctp_proto::Instant;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Entry<T> {
    at: Instant,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl<T> Eq for Entry<T> {}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Entry<T> {
    fn cmp(&self, o: &Self) -> Ordering {
        // Reversed: the heap pops the earliest (time, seq) first.
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

/// A priority queue of timed events with deterministic tie-breaking.
pub struct EventQueue<T> {
    heap: BinaryHeap<Entry<T>>,
    seq: u64,
}

impl<T> Default for EventQueue<T> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }
}

impl<T> EventQueue<T> {
    /// Schedules `item` at `at`.
    pub fn push(&mut self, at: Instant, item: T) {
        self.seq += 1;
        self.heap.push(Entry {
            at,
            seq: self.seq,
            item,
        });
    }

    /// Time of the earliest event.
    pub fn peek_time(&self) -> Option<Instant> {
        self.heap.peek().map(|e| e.at)
    }

    /// Removes the earliest event if it is due at or before `now`.
    pub fn pop_due(&mut self, now: Instant) -> Option<(Instant, T)> {
        if self.heap.peek()?.at > now {
            return None;
        }
        self.heap.pop().map(|e| (e.at, e.item))
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True when nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_pop_in_insertion_order() {
        let mut q = EventQueue::default();
        q.push(Instant::from_micros(5), 'b');
        q.push(Instant::from_micros(1), 'a');
        q.push(Instant::from_micros(5), 'c');
        let now = Instant::from_micros(10);
        let order: Vec<char> = std::iter::from_fn(|| q.pop_due(now).map(|e| e.1)).collect();
        assert_eq!(order, vec!['a', 'b', 'c']);
        assert!(q.pop_due(now).is_none());
    }
}
