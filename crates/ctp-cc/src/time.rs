//! ctp's own notion of time (also `ctp_proto::time`).
//!
//! Neither this crate nor ctp's protocol core reads a clock: callers pass `now` into every
//! entry point. Time is kept in microseconds since an arbitrary epoch chosen by the caller
//! (ctp's runtime uses the moment the endpoint was created, its simulator virtual time
//! zero), which keeps runs reproducible. Another stack converts its clock once, e.g.
//! `Instant::from_micros(std_now.duration_since(epoch).as_micros() as u64)`.

use core::ops::{Add, AddAssign, Sub};
use core::time::Duration;

/// A point in time, in microseconds since a caller-chosen epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The epoch itself.
    pub const ZERO: Instant = Instant(0);
    /// A point later than any real deadline; used for "never".
    pub const FAR_FUTURE: Instant = Instant(u64::MAX / 2);

    /// Builds an instant from microseconds since the epoch.
    pub const fn from_micros(us: u64) -> Self {
        Instant(us)
    }

    /// Microseconds since the epoch.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// Time elapsed from `earlier` to `self`, saturating at zero.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(
            self.0
                .saturating_add(d.as_micros().min(u64::MAX as u128) as u64),
        )
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_since(rhs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_panicking() {
        let t = Instant::from_micros(10);
        assert_eq!(t - Instant::from_micros(20), Duration::ZERO);
        assert_eq!((t + Duration::from_millis(1)).as_micros(), 1010);
        assert_eq!(
            Instant::from_micros(u64::MAX) + Duration::from_secs(1),
            Instant::from_micros(u64::MAX)
        );
    }
}
