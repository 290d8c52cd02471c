//! Virtual time and the event queue.
//!
//! Events are ordered by `(time, sequence)`: two events due at the same microsecond run in
//! the order they were scheduled, so a run never depends on heap internals.

use ctp_proto::Instant;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

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

/// The front of a non-empty lane, as ordered in [`EventQueue::heads`].
#[derive(PartialEq, Eq)]
struct Head {
    at: Instant,
    seq: u64,
    lane: u32,
}

impl PartialOrd for Head {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Head {
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

/// A priority queue of timed events with deterministic tie-breaking.
///
/// Besides one binary heap, it has FIFO *lanes*: a source whose events come in time order
/// (a link without jitter hands packets on in the order they entered it) appends to its
/// lane in O(1), and only the lanes' fronts compete in a small heap. An event earlier than
/// its lane's last one goes to the main heap. Either way events pop in `(time, sequence)`
/// order, exactly as from a single heap; lanes only make a queue of thousands of packets
/// in flight cheap.
pub struct EventQueue<T> {
    heap: BinaryHeap<Entry<T>>,
    lanes: Vec<VecDeque<Entry<T>>>,
    heads: BinaryHeap<Head>,
    seq: u64,
    len: usize,
}

impl<T> Default for EventQueue<T> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            lanes: Vec::new(),
            heads: BinaryHeap::new(),
            seq: 0,
            len: 0,
        }
    }
}

impl<T> EventQueue<T> {
    /// Schedules `item` at `at`.
    pub fn push(&mut self, at: Instant, item: T) {
        self.seq += 1;
        self.len += 1;
        self.heap.push(Entry {
            at,
            seq: self.seq,
            item,
        });
    }

    /// Schedules `item` at `at` in lane `lane` (any small number naming a source whose
    /// events usually come in time order).
    #[inline]
    pub fn push_in_lane(&mut self, lane: usize, at: Instant, item: T) {
        if lane >= self.lanes.len() {
            self.lanes.resize_with(lane + 1, VecDeque::new);
        }
        match self.lanes[lane].back() {
            Some(last) if at < last.at => return self.push(at, item),
            _ => {}
        }
        self.seq += 1;
        self.len += 1;
        let q = &mut self.lanes[lane];
        if q.is_empty() {
            self.heads.push(Head {
                at,
                seq: self.seq,
                lane: lane as u32,
            });
        }
        q.push_back(Entry {
            at,
            seq: self.seq,
            item,
        });
    }

    /// Time of the earliest event.
    pub fn peek_time(&self) -> Option<Instant> {
        match (self.heap.peek(), self.heads.peek()) {
            (Some(h), Some(l)) => Some(h.at.min(l.at)),
            (h, l) => h.map(|e| e.at).or(l.map(|e| e.at)),
        }
    }

    /// Removes the earliest event if it is due at or before `now`.
    pub fn pop_due(&mut self, now: Instant) -> Option<(Instant, T)> {
        self.pop_due_peek(now).map(|(e, _)| e)
    }

    /// [`EventQueue::pop_due`], and the event now at the front of the popped one's lane
    /// (the next packet off the same link), if it came from a lane: a caller can prepare
    /// for that one while it handles this one.
    #[inline]
    pub fn pop_due_peek(&mut self, now: Instant) -> Option<((Instant, T), Option<&T>)> {
        let from_lane = match (self.heap.peek(), self.heads.peek()) {
            (None, None) => return None,
            (Some(h), Some(l)) => (l.at, l.seq) < (h.at, h.seq),
            (None, Some(_)) => true,
            (Some(_), None) => false,
        };
        if from_lane {
            let head = self.heads.peek().expect("checked");
            if head.at > now {
                return None;
            }
            let lane = head.lane as usize;
            self.heads.pop();
            let q = &mut self.lanes[lane];
            let e = q.pop_front().expect("a head names a non-empty lane");
            if let Some(next) = q.front() {
                self.heads.push(Head {
                    at: next.at,
                    seq: next.seq,
                    lane: lane as u32,
                });
            }
            self.len -= 1;
            let next = self.lanes[lane].front().map(|n| &n.item);
            return Some(((e.at, e.item), next));
        }
        if self.heap.peek()?.at > now {
            return None;
        }
        self.len -= 1;
        self.heap.pop().map(|e| ((e.at, e.item), None))
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The current wake time of each of a fixed set of sources (the nodes), at most one each.
///
/// Setting a source's time replaces its previous one in place: a node's deadline moves
/// with nearly every packet it sends or receives, and as queue events the superseded ones
/// would pile up (over a million stale wakes per ten simulated seconds of two 1-Gb/s
/// flows) and make every pop sift through them. A tournament tree: leaves are the
/// sources, each inner entry the earliest below it; set is O(log n), the earliest O(1).
/// Ties go to the lowest source index.
#[derive(Clone, Debug)]
pub struct WakeTimes {
    /// `tree[1]` is the root; the leaves start at `leaves`. Empty slots hold `NONE`.
    tree: Vec<(u64, u32)>,
    leaves: usize,
}

impl WakeTimes {
    /// No wake (sorts after every real time).
    const NONE: (u64, u32) = (u64::MAX, u32::MAX);

    /// `n` sources, none with a wake.
    pub fn new(n: usize) -> Self {
        let leaves = n.max(1).next_power_of_two();
        WakeTimes {
            tree: vec![Self::NONE; 2 * leaves],
            leaves,
        }
    }

    fn time((t, _): (u64, u32)) -> Option<Instant> {
        (t != u64::MAX).then(|| Instant::from_micros(t))
    }

    /// Source `i`'s wake time.
    pub fn get(&self, i: usize) -> Option<Instant> {
        Self::time(self.tree[self.leaves + i])
    }

    /// Sets (or with `None` clears) source `i`'s wake time.
    pub fn set(&mut self, i: usize, at: Option<Instant>) {
        let mut k = self.leaves + i;
        self.tree[k] = at.map_or(Self::NONE, |t| (t.as_micros(), i as u32));
        while k > 1 {
            k /= 2;
            self.tree[k] = self.tree[2 * k].min(self.tree[2 * k + 1]);
        }
    }

    /// The earliest wake time.
    pub fn earliest(&self) -> Option<Instant> {
        Self::time(self.tree[1])
    }

    /// Clears and returns the source with the earliest wake if it is due at or before `now`.
    pub fn pop_due(&mut self, now: Instant) -> Option<usize> {
        let (t, i) = self.tree[1];
        if t == u64::MAX || t > now.as_micros() {
            return None;
        }
        self.set(i as usize, None);
        Some(i as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wake_times_keep_one_per_source_and_pop_earliest_first() {
        let t = Instant::from_micros;
        let mut w = WakeTimes::new(5);
        assert_eq!(w.earliest(), None);
        w.set(3, Some(t(50)));
        w.set(1, Some(t(20)));
        w.set(4, Some(t(20)));
        w.set(1, Some(t(70))); // replaces 20: no stale wake remains
        assert_eq!(w.get(1), Some(t(70)));
        assert_eq!(w.earliest(), Some(t(20)));
        assert_eq!(w.pop_due(t(10)), None, "nothing due yet");
        assert_eq!(w.pop_due(t(60)), Some(4));
        assert_eq!(w.pop_due(t(60)), Some(3));
        assert_eq!(w.pop_due(t(60)), None);
        w.set(0, Some(t(70)));
        // A tie goes to the lower index.
        assert_eq!(w.pop_due(t(70)), Some(0));
        assert_eq!(w.pop_due(t(70)), Some(1));
        assert_eq!(w.earliest(), None);
        w.set(2, Some(t(5)));
        w.set(2, None);
        assert_eq!(w.earliest(), None);
    }

    /// Against a plain scan, over random sets and pops.
    #[test]
    fn wake_times_agree_with_a_scan() {
        use rand_chacha::ChaCha8Rng;
        use rand_core::{Rng, SeedableRng};
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut w = WakeTimes::new(13);
        let mut plain: Vec<Option<u64>> = vec![None; 13];
        for _ in 0..20_000 {
            let i = (rng.next_u32() % 13) as usize;
            let at = (rng.next_u32() % 8 != 0).then(|| u64::from(rng.next_u32() % 500));
            w.set(i, at.map(Instant::from_micros));
            plain[i] = at;
            let now = u64::from(rng.next_u32() % 500);
            let expect = plain
                .iter()
                .enumerate()
                .filter_map(|(k, t)| t.filter(|&t| t <= now).map(|t| (t, k)))
                .min()
                .map(|(_, k)| k);
            assert_eq!(w.pop_due(Instant::from_micros(now)), expect);
            if let Some(k) = expect {
                plain[k] = None;
            }
            let earliest = plain.iter().flatten().min().copied();
            assert_eq!(w.earliest(), earliest.map(Instant::from_micros));
        }
    }

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

    #[test]
    fn a_pop_from_a_lane_shows_that_lane_s_next_event() {
        let t = Instant::from_micros;
        let mut q = EventQueue::default();
        q.push_in_lane(0, t(1), 'a');
        q.push_in_lane(1, t(2), 'x');
        q.push_in_lane(0, t(3), 'b');
        q.push(t(4), 'h');
        q.push_in_lane(0, t(5), 'c');
        let now = t(10);
        let mut seen = Vec::new();
        while let Some(((_, item), next)) = q.pop_due_peek(now) {
            seen.push((item, next.copied()));
        }
        assert_eq!(
            seen,
            vec![
                ('a', Some('b')), // lane 0's next, not the earlier-due 'x' of lane 1
                ('x', None),      // lane 1 is empty now
                ('b', Some('c')),
                ('h', None), // from the main heap: no lane
                ('c', None),
            ]
        );
    }

    /// Lanes and the main heap together pop in exactly the order one heap would, whatever
    /// mix of in-order and out-of-order pushes they get.
    #[test]
    fn lanes_pop_in_the_order_of_a_single_heap() {
        use rand_chacha::ChaCha8Rng;
        use rand_core::{Rng, SeedableRng};
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut q = EventQueue::default();
        let mut reference = EventQueue::default();
        let mut popped = (Vec::new(), Vec::new());
        let mut now = 0u64;
        let mut lane_clock = [0u64; 4];
        for i in 0..20_000u32 {
            let lane = (rng.next_u32() % 5) as usize;
            // Mostly increasing per lane, sometimes earlier (jitter), sometimes a tie.
            let at = if lane < 4 {
                let step = u64::from(rng.next_u32() % 50);
                let t = if rng.next_u32() % 10 == 0 {
                    lane_clock[lane].saturating_sub(step)
                } else {
                    lane_clock[lane] + step
                };
                lane_clock[lane] = lane_clock[lane].max(t);
                now + t % 1000
            } else {
                now + u64::from(rng.next_u32() % 1000)
            };
            let at = Instant::from_micros(at);
            if lane < 4 {
                q.push_in_lane(lane, at, i);
            } else {
                q.push(at, i);
            }
            reference.push(at, i);
            assert_eq!(q.len(), reference.len());
            assert_eq!(q.peek_time(), reference.peek_time());
            if rng.next_u32() % 3 == 0 {
                now += u64::from(rng.next_u32() % 40);
                let t = Instant::from_micros(now);
                while let Some((_, x)) = q.pop_due(t) {
                    popped.0.push(x);
                }
                while let Some((_, x)) = reference.pop_due(t) {
                    popped.1.push(x);
                }
            }
        }
        let end = Instant::from_micros(u64::MAX / 2);
        popped
            .0
            .extend(std::iter::from_fn(|| q.pop_due(end).map(|e| e.1)));
        popped
            .1
            .extend(std::iter::from_fn(|| reference.pop_due(end).map(|e| e.1)));
        assert_eq!(popped.0.len(), 20_000);
        assert_eq!(popped.0, popped.1);
        assert!(q.is_empty());
    }
}
