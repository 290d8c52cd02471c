//! Delayed events: each microprotocol registers named timers at set-up; setting a timer again
//! moves it, cancelling clears it. A fired timer is delivered to the microprotocol that owns it.

use crate::time::Instant;

/// Most timers one connection may register.
pub const MAX_TIMERS: usize = 16;

/// A registered timer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerId(pub(crate) u8);

/// The connection's timer table: a small array scanned linearly (a handful of entries).
#[derive(Clone, Debug, Default)]
pub struct Timers {
    deadline: [Option<Instant>; MAX_TIMERS],
    owner: [u8; MAX_TIMERS],
    count: usize,
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

    /// Arms (or moves) `id` to fire at `at`.
    pub fn set(&mut self, id: TimerId, at: Instant) {
        self.deadline[id.0 as usize] = Some(at);
    }

    /// Arms `id` at `at` unless it is already armed earlier.
    pub fn set_earliest(&mut self, id: TimerId, at: Instant) {
        let d = &mut self.deadline[id.0 as usize];
        if d.is_none_or(|cur| at < cur) {
            *d = Some(at);
        }
    }

    /// Disarms `id`.
    pub fn cancel(&mut self, id: TimerId) {
        self.deadline[id.0 as usize] = None;
    }

    /// When `id` fires, if armed.
    pub fn deadline(&self, id: TimerId) -> Option<Instant> {
        self.deadline[id.0 as usize]
    }

    /// The earliest armed deadline.
    pub fn next(&self) -> Option<Instant> {
        self.deadline[..self.count].iter().flatten().min().copied()
    }

    /// Disarms and returns one timer that is due at `now`, with its owner.
    pub fn pop_expired(&mut self, now: Instant) -> Option<(TimerId, u8)> {
        let i = (0..self.count).find(|&i| self.deadline[i].is_some_and(|d| d <= now))?;
        self.deadline[i] = None;
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
}
