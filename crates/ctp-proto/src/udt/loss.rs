//! Loss lists (UDT's `CSndLossList` / `CRcvLossList`): sets of sequence numbers kept as
//! disjoint inclusive ranges. Numbers here are *extended* (64-bit, never wrapping); the
//! connection maps them to and from the 31-bit wire numbers.

use std::collections::BTreeMap;

/// A set of sequence numbers as disjoint, non-adjacent inclusive ranges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LossList {
    /// start → end (inclusive).
    ranges: BTreeMap<u64, u64>,
    len: u64,
}

impl LossList {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
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
            .is_some_and(|(_, &e)| e >= n)
    }

    /// Adds `a..=b`, merging with neighbours; returns how many numbers were new.
    pub fn insert(&mut self, a: u64, b: u64) -> u64 {
        if b < a {
            return 0;
        }
        let (mut lo, mut hi) = (a, b);
        let before = self.len;
        // Absorb every range that overlaps or touches [lo, hi].
        let overlapping: Vec<(u64, u64)> = self
            .ranges
            .range(..=hi.saturating_add(1))
            .rev()
            .take_while(|(_, &e)| e.saturating_add(1) >= lo)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in overlapping {
            self.ranges.remove(&s);
            self.len -= e - s + 1;
            lo = lo.min(s);
            hi = hi.max(e);
        }
        self.ranges.insert(lo, hi);
        self.len += hi - lo + 1;
        self.len - before
    }

    /// Removes `a..=b`; returns how many numbers were removed.
    pub fn remove(&mut self, a: u64, b: u64) -> u64 {
        if b < a {
            return 0;
        }
        let hit: Vec<(u64, u64)> = self
            .ranges
            .range(..=b)
            .rev()
            .take_while(|(_, &e)| e >= a)
            .map(|(&s, &e)| (s, e))
            .collect();
        let before = self.len;
        for (s, e) in hit {
            self.ranges.remove(&s);
            self.len -= e - s + 1;
            if s < a {
                self.ranges.insert(s, a - 1);
                self.len += a - s;
            }
            if e > b {
                self.ranges.insert(b + 1, e);
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
        self.ranges.iter().map(|(&s, &e)| (s, e))
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

    proptest! {
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
