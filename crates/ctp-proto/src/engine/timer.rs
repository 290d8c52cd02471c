//! Delayed events: each microprotocol registers named timers at set-up; setting a timer again
//! moves it, cancelling clears it. A fired timer is delivered to the microprotocol that owns it.

use ctp_cc::time::Instant;

/// Most timers one connection may register.
pub const MAX_TIMERS: usize = 16;

/// A registered timer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerId(pub(crate) u8);

/// A disarmed slot.
const OFF: u64 = u64::MAX;

/// The connection's timer table: a small array scanned linearly (a handful of entries), with
/// the earliest deadline kept up to date so that asking for it (which the runtime and the
/// simulator do after every step) costs nothing.
#[derive(Clone, Debug)]
pub struct Timers {
    /// Deadlines in microseconds, [`OFF`] when disarmed.
    deadline: [u64; MAX_TIMERS],
    owner: [u8; MAX_TIMERS],
    count: usize,
    /// The smallest entry of `deadline`.
    earliest: u64,
}

impl Default for Timers {
    fn default() -> Self {
        Timers {
            deadline: [OFF; MAX_TIMERS],
            owner: [0; MAX_TIMERS],
            count: 0,
            earliest: OFF,
        }
    }
}

impl Timers {
    /// Registers a timer owned by microprotocol `owner`; `None` when the table is full.
    pub fn register(&mut self, owner: u8) -> Option<TimerId> {
        if self.count == MAX_TIMERS {
            return None;
        }
        self.owner[self.count] = owner;
        self.count += 1;
        Some(TimerId((self.count - 1) as u8))
    }

    /// Writes slot `i`, keeping `earliest` exact.
    fn put(&mut self, i: usize, at: u64) {
        let old = self.deadline[i];
        self.deadline[i] = at;
        if at <= self.earliest {
            self.earliest = at;
        } else if old == self.earliest {
            self.earliest = self.deadline.iter().copied().min().unwrap_or(OFF);
        }
    }

    /// Arms (or moves) `id` to fire at `at`.
    pub fn set(&mut self, id: TimerId, at: Instant) {
        self.put(id.0 as usize, at.as_micros().min(OFF - 1));
    }

    /// Arms `id` at `at` unless it is already armed earlier.
    pub fn set_earliest(&mut self, id: TimerId, at: Instant) {
        let at = at.as_micros().min(OFF - 1);
        if at < self.deadline[id.0 as usize] {
            self.put(id.0 as usize, at);
        }
    }

    /// Disarms `id`.
    pub fn cancel(&mut self, id: TimerId) {
        self.put(id.0 as usize, OFF);
    }

    /// When `id` fires, if armed.
    pub fn deadline(&self, id: TimerId) -> Option<Instant> {
        let d = self.deadline[id.0 as usize];
        (d != OFF).then(|| Instant::from_micros(d))
    }

    /// The earliest armed deadline.
    pub fn next(&self) -> Option<Instant> {
        (self.earliest != OFF).then(|| Instant::from_micros(self.earliest))
    }

    /// Disarms and returns one timer that is due at `now`, with its owner.
    pub fn pop_expired(&mut self, now: Instant) -> Option<(TimerId, u8)> {
        let now = now.as_micros();
        if self.earliest > now {
            return None;
        }
        let i = (0..self.count).find(|&i| self.deadline[i] <= now)?;
        self.put(i, OFF);
        Some((TimerId(i as u8), self.owner[i]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_fire_once_and_can_be_cancelled() {
        let mut t = Timers::default();
        let a = t.register(0).unwrap();
        let b = t.register(1).unwrap();
        t.set(a, Instant::from_micros(10));
        t.set(b, Instant::from_micros(5));
        assert_eq!(t.next(), Some(Instant::from_micros(5)));
        t.cancel(b);
        assert_eq!(t.next(), Some(Instant::from_micros(10)));
        assert_eq!(t.pop_expired(Instant::from_micros(9)), None);
        assert_eq!(t.pop_expired(Instant::from_micros(10)), Some((a, 0)));
        assert_eq!(t.pop_expired(Instant::from_micros(10)), None);
        t.set_earliest(a, Instant::from_micros(30));
        t.set_earliest(a, Instant::from_micros(20));
        t.set_earliest(a, Instant::from_micros(25));
        assert_eq!(t.deadline(a), Some(Instant::from_micros(20)));
    }

    #[test]
    fn the_earliest_deadline_follows_every_change() {
        let mut t = Timers::default();
        let ids: Vec<_> = (0..5).map(|o| t.register(o).unwrap()).collect();
        assert_eq!(t.next(), None);
        let at = Instant::from_micros;
        t.set(ids[0], at(50));
        t.set(ids[1], at(40));
        t.set(ids[2], at(60));
        assert_eq!(t.next(), Some(at(40)));
        // Moving the earliest later uncovers the next one.
        t.set(ids[1], at(70));
        assert_eq!(t.next(), Some(at(50)));
        t.cancel(ids[0]);
        assert_eq!(t.next(), Some(at(60)));
        t.set_earliest(ids[3], at(55));
        assert_eq!(t.next(), Some(at(55)));
        assert_eq!(t.pop_expired(at(56)), Some((ids[3], 3)));
        assert_eq!(t.next(), Some(at(60)));
        for id in &ids {
            t.cancel(*id);
        }
        assert_eq!(t.next(), None);
        assert_eq!(t.pop_expired(at(1000)), None);
    }
}
