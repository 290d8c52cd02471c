//! Loss lists (UDT's `CSndLossList` / `CRcvLossList`): sets of sequence numbers kept as
//! disjoint inclusive ranges. Numbers here are *extended* (64-bit, never wrapping); the
//! connection maps them to and from the 31-bit wire numbers.
//!
//! Each range carries a tag. The sender's list ([`LossList`]) has none; the receiver's
//! ([`RcvLossList`]) records, per range, when it was last reported to the sender and how
//! many RTTs to wait before reporting it again (draft-gg-udt-03 §6.x, the receiver's loss
//! list: "the most recent feedback time and the number of times it has been fed back").
//! Ranges merge only with neighbours whose tag is equal, and a range split by a removal
//! keeps its tag on both sides.

use ctp_cc::time::Instant;
use std::collections::BTreeMap;

/// A set of sequence numbers as disjoint inclusive ranges, each with a tag `T`; touching
/// ranges with equal tags are merged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeList<T> {
    /// start → (end inclusive, tag).
    ranges: BTreeMap<u64, (u64, T)>,
    len: u64,
}

/// The sender's loss list: untagged, so touching ranges always merge.
pub type LossList = RangeList<()>;

/// The receiver's loss list: each range with its [`Feedback`] state.
pub type RcvLossList = RangeList<Feedback>;

impl<T: Copy + Eq> RangeList<T> {
    /// An empty list.
    pub fn new() -> Self {
        RangeList {
            ranges: BTreeMap::new(),
            len: 0,
        }
    }

    /// Numbers in the list.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when nothing is lost.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The smallest number in the list.
    pub fn first(&self) -> Option<u64> {
        self.ranges.keys().next().copied()
    }

    /// True when `n` is in the list.
    pub fn contains(&self, n: u64) -> bool {
        self.ranges
            .range(..=n)
            .next_back()
            .is_some_and(|(_, &(e, _))| e >= n)
    }

    /// Adds the numbers of `a..=b` not yet in the list, tagged `tag` (numbers already in
    /// the list keep their tag); returns how many were new.
    pub fn insert_tagged(&mut self, a: u64, b: u64, tag: T) -> u64 {
        if b < a {
            return 0;
        }
        // The gaps of [a, b] between the ranges already there.
        let mut gaps = Vec::new();
        let mut lo = a;
        let from = self.ranges.range(..=a).next_back().map_or(a, |(&s, _)| s);
        let mut covered = false;
        for (&s, &(e, _)) in self.ranges.range(from..=b) {
            if e < lo {
                continue;
            }
            if s > lo {
                gaps.push((lo, s - 1));
            }
            match e.checked_add(1) {
                Some(n) if n <= b => lo = n,
                _ => {
                    covered = true;
                    break;
                }
            }
        }
        if !covered {
            gaps.push((lo, b));
        }
        self.fill(gaps, tag)
    }

    /// Inserts the free ranges `gaps`, merging each with equal-tagged neighbours.
    fn fill(&mut self, gaps: Vec<(u64, u64)>, tag: T) -> u64 {
        let mut added = 0;
        for (mut lo, mut hi) in gaps {
            added += hi - lo + 1;
            if let Some((&s, &(e, t))) = self.ranges.range(..lo).next_back() {
                if t == tag && e.checked_add(1) == Some(lo) {
                    self.ranges.remove(&s);
                    lo = s;
                }
            }
            if let Some(n) = hi.checked_add(1) {
                if let Some(&(e, t)) = self.ranges.get(&n) {
                    if t == tag {
                        self.ranges.remove(&n);
                        hi = e;
                    }
                }
            }
            self.ranges.insert(lo, (hi, tag));
        }
        self.len += added;
        added
    }

    /// Removes `a..=b`; returns how many numbers were removed. What is left of a split
    /// range keeps its tag.
    pub fn remove(&mut self, a: u64, b: u64) -> u64 {
        if b < a {
            return 0;
        }
        let hit: Vec<(u64, u64, T)> = self
            .ranges
            .range(..=b)
            .rev()
            .take_while(|(_, &(e, _))| e >= a)
            .map(|(&s, &(e, t))| (s, e, t))
            .collect();
        let before = self.len;
        for (s, e, t) in hit {
            self.ranges.remove(&s);
            self.len -= e - s + 1;
            if s < a {
                self.ranges.insert(s, (a - 1, t));
                self.len += a - s;
            }
            if e > b {
                self.ranges.insert(b + 1, (e, t));
                self.len += e - b;
            }
        }
        before - self.len
    }

    /// Removes every number below `n`.
    pub fn remove_below(&mut self, n: u64) -> u64 {
        match n.checked_sub(1) {
            Some(m) => self.remove(0, m),
            None => 0,
        }
    }

    /// Takes the smallest number out of the list.
    pub fn pop_first(&mut self) -> Option<u64> {
        let n = self.first()?;
        self.remove(n, n);
        Some(n)
    }

    /// The ranges, smallest first.
    pub fn ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges.iter().map(|(&s, &(e, _))| (s, e))
    }

    /// The ranges with their tags, smallest first.
    pub fn tagged(&self) -> impl Iterator<Item = (u64, u64, T)> + '_ {
        self.ranges.iter().map(|(&s, &(e, t))| (s, e, t))
    }
}

impl LossList {
    /// Adds `a..=b`, merging with neighbours; returns how many numbers were new.
    pub fn insert(&mut self, a: u64, b: u64) -> u64 {
        self.insert_tagged(a, b, ())
    }
}

/// RTTs to wait after a loss was first reported before reporting it again (draft-gg-udt-03:
/// "k is initialized as 2").
pub const FIRST_K: u32 = 2;
/// Largest wait, in RTTs, between two reports of one loss (keeps recovery of a loss whose
/// NAKs and retransmissions keep being lost bounded; the draft sets no limit).
pub const MAX_K: u32 = 16;

/// A receiver loss range's feedback state: when it was last reported and how many RTTs
/// must pass before the next report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Feedback {
    /// The last report, or `None` if never reported (due at once).
    pub last: Option<Instant>,
    /// The next report waits `k`·RTT after `last`.
    pub k: u32,
}

impl Feedback {
    /// A loss reported at `now` (`None`: not yet reported).
    pub fn reported(now: Option<Instant>) -> Self {
        Feedback {
            last: now,
            k: FIRST_K,
        }
    }

    /// When this loss is due to be reported again: `k`·`w.rtt_us` after the last report,
    /// but no later than `w.cap_us` after it.
    fn due_at(&self, w: Wait) -> Instant {
        match self.last {
            None => Instant::ZERO,
            Some(t) => Instant::from_micros(t.as_micros().saturating_add(w.after(self.k))),
        }
    }
}

/// How long a reported loss waits before it is reported again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wait {
    /// The round-trip time the draft's `k`·RTT counts with, microseconds.
    pub rtt_us: u64,
    /// The longest wait whatever `k`, microseconds (`u64::MAX`: the draft's rule alone).
    pub cap_us: u64,
}

impl Wait {
    /// The wait after a loss's `k`-th RTT count: `k`·RTT, at most the cap, microseconds.
    pub fn after(&self, k: u32) -> u64 {
        u64::from(k).saturating_mul(self.rtt_us).min(self.cap_us)
    }
}

impl RcvLossList {
    /// Takes the losses due for a report at `now` (never reported, or last reported at
    /// least `k`·RTT ago, or the cap of `wait`), at most `max` ranges (adjacent due ranges count as one),
    /// smallest first, and marks them reported: last report now, `k` one more (up to
    /// [`MAX_K`]). Also returns when the next loss becomes due (`now` when some due ones
    /// did not fit; `None`: list empty).
    pub fn take_due(
        &mut self,
        now: Instant,
        wait: Wait,
        max: usize,
    ) -> (Vec<(u64, u64)>, Option<Instant>) {
        let mut out: Vec<(u64, u64)> = Vec::new();
        let mut next: Option<Instant> = None;
        for (&s, (e, f)) in self.ranges.iter_mut() {
            let due = f.due_at(wait);
            let fits = out.len() < max || out.last().is_some_and(|l| l.1.checked_add(1) == Some(s));
            if due <= now && fits {
                match out.last_mut() {
                    Some(l) if l.1.checked_add(1) == Some(s) => l.1 = *e,
                    _ => out.push((s, *e)),
                }
                f.last = Some(now);
                f.k = (f.k + 1).min(MAX_K);
            }
            let at = f.due_at(wait).max(now);
            next = Some(next.map_or(at, |n| n.min(at)));
        }
        (out, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn merges_and_splits() {
        let mut l = LossList::new();
        assert_eq!(l.insert(5, 7), 3);
        assert_eq!(l.insert(8, 8), 1);
        assert_eq!(l.insert(2, 3), 2);
        assert_eq!(l.ranges().collect::<Vec<_>>(), vec![(2, 3), (5, 8)]);
        assert_eq!(l.insert(4, 4), 1);
        assert_eq!(l.ranges().collect::<Vec<_>>(), vec![(2, 8)]);
        assert_eq!(l.remove(4, 5), 2);
        assert_eq!(l.ranges().collect::<Vec<_>>(), vec![(2, 3), (6, 8)]);
        assert!(l.contains(7) && !l.contains(5));
        assert_eq!(l.pop_first(), Some(2));
        assert_eq!(l.remove_below(7), 2);
        assert_eq!(l.ranges().collect::<Vec<_>>(), vec![(7, 8)]);
        assert_eq!(l.len(), 2);
    }

    const W10: Wait = Wait {
        rtt_us: 10_000,
        cap_us: u64::MAX,
    };

    fn at(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    #[test]
    fn a_loss_is_reported_again_only_after_k_rtts() {
        let rtt = Wait {
            rtt_us: 50_000, // 50 ms
            cap_us: u64::MAX,
        };
        let mut l = RcvLossList::new();
        // Reported at once when detected at t = 100 ms (k = 2).
        l.insert_tagged(10, 12, Feedback::reported(Some(at(100))));
        let (due, next) = l.take_due(at(100), rtt, 8);
        assert!(due.is_empty());
        assert_eq!(next, Some(at(200)));
        assert!(
            l.take_due(at(199), rtt, 8).0.is_empty(),
            "not before t + 2·RTT"
        );
        let (due, next) = l.take_due(at(200), rtt, 8);
        assert_eq!(due, vec![(10, 12)], "again at t + 2·RTT");
        // Now k = 3: not before 200 + 150 ms.
        assert_eq!(next, Some(at(350)));
        assert!(l.take_due(at(349), rtt, 8).0.is_empty());
        assert_eq!(l.take_due(at(350), rtt, 8).0, vec![(10, 12)]);
        // k = 4 from 350 ms; a recovered middle splits the range, both halves keep it.
        assert_eq!(l.remove(11, 11), 1);
        assert!(l.take_due(at(549), rtt, 8).0.is_empty());
        assert_eq!(l.take_due(at(550), rtt, 8).0, vec![(10, 10), (12, 12)]);
        // A loss never reported (a gap left by a drop request) is due at once; a new loss
        // reported now is not; the oldest keeps its own timing.
        l.insert_tagged(20, 21, Feedback::reported(None));
        l.insert_tagged(30, 30, Feedback::reported(Some(at(560))));
        let (due, next) = l.take_due(at(560), rtt, 8);
        assert_eq!(due, vec![(20, 21)]);
        assert_eq!(next, Some(at(660)));
        // k saturates at MAX_K.
        let mut t = 660;
        for _ in 0..40 {
            t += u64::from(MAX_K) * 50;
            assert!(l.take_due(at(t), rtt, 8).0.contains(&(30, 30)), "at {t} ms");
        }
        assert_eq!(l.len(), 5);
        // With a cap the wait stops growing there.
        let capped = Wait {
            rtt_us: 50_000,
            cap_us: 120_000,
        };
        let mut l = RcvLossList::new();
        l.insert_tagged(1, 1, Feedback::reported(Some(at(0))));
        assert!(
            l.take_due(at(99), capped, 8).0.is_empty(),
            "2·RTT below the cap"
        );
        assert_eq!(l.take_due(at(100), capped, 8).0, vec![(1, 1)]);
        assert!(l.take_due(at(219), capped, 8).0.is_empty());
        assert_eq!(
            l.take_due(at(220), capped, 8).0,
            vec![(1, 1)],
            "3·RTT capped"
        );
    }

    #[test]
    fn due_reports_are_capped_and_the_rest_wait_their_turn() {
        let mut l = RcvLossList::new();
        for i in 0..10u64 {
            l.insert_tagged(i * 10, i * 10 + 1, Feedback::reported(None));
        }
        let (due, next) = l.take_due(at(1), W10, 4);
        assert_eq!(due, vec![(0, 1), (10, 11), (20, 21), (30, 31)]);
        assert_eq!(next, Some(at(1)), "the unreported rest is still due");
        let (due, _) = l.take_due(at(1), W10, 4);
        assert_eq!(due, vec![(40, 41), (50, 51), (60, 61), (70, 71)]);
        // Adjacent due ranges with different histories travel as one range.
        let mut l = RcvLossList::new();
        l.insert_tagged(0, 4, Feedback::reported(Some(at(0))));
        l.insert_tagged(5, 9, Feedback::reported(None));
        assert_eq!(l.ranges().count(), 2, "different tags do not merge");
        assert_eq!(l.take_due(at(20), W10, 1).0, vec![(0, 9)]);
    }

    proptest! {
        #[test]
        fn tags_stay_with_their_numbers(ops in proptest::collection::vec((any::<bool>(), 0u64..60, 0u64..6, 0u8..3), 0..60)) {
            let mut l: RangeList<u8> = RangeList::new();
            let mut m = BTreeMap::new();
            for (ins, a, w, tag) in ops {
                let b = a + w;
                if ins {
                    let mut new = 0;
                    for n in a..=b {
                        if let std::collections::btree_map::Entry::Vacant(v) = m.entry(n) {
                            v.insert(tag);
                            new += 1;
                        }
                    }
                    prop_assert_eq!(l.insert_tagged(a, b, tag), new);
                } else {
                    let gone = (a..=b).filter(|n| m.remove(n).is_some()).count() as u64;
                    prop_assert_eq!(l.remove(a, b), gone);
                }
                prop_assert_eq!(l.len(), m.len() as u64);
                let flat: Vec<(u64, u8)> =
                    l.tagged().flat_map(|(a, b, t)| (a..=b).map(move |n| (n, t))).collect();
                prop_assert_eq!(flat, m.iter().map(|(&n, &t)| (n, t)).collect::<Vec<_>>());
                let r: Vec<_> = l.tagged().collect();
                prop_assert!(r.windows(2).all(|w| w[0].1 < w[1].0));
                prop_assert!(r.windows(2).all(|w| w[0].1 + 1 < w[1].0 || w[0].2 != w[1].2));
            }
        }

        #[test]
        fn behaves_like_a_set(ops in proptest::collection::vec((any::<bool>(), 0u64..60, 0u64..6), 0..60)) {
            let mut l = LossList::new();
            let mut s = BTreeSet::new();
            for (ins, a, w) in ops {
                let b = a + w;
                if ins {
                    let new = (a..=b).filter(|n| s.insert(*n)).count() as u64;
                    prop_assert_eq!(l.insert(a, b), new);
                } else {
                    let gone = (a..=b).filter(|n| s.remove(n)).count() as u64;
                    prop_assert_eq!(l.remove(a, b), gone);
                }
                prop_assert_eq!(l.len(), s.len() as u64);
                let flat: Vec<u64> = l.ranges().flat_map(|(a, b)| a..=b).collect();
                prop_assert_eq!(flat, s.iter().copied().collect::<Vec<_>>());
                let r: Vec<_> = l.ranges().collect();
                prop_assert!(r.windows(2).all(|w| w[0].1 + 1 < w[1].0));
            }
        }
    }
}
