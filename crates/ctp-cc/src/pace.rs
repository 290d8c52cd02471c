//! Pacing: the mechanism that turns a controller's rate
//! ([`CongestionControl::pacing_rate`](crate::CongestionControl::pacing_rate)) into
//! departure times — a token bucket that releases packets in short trains. ctp's pacing
//! microprotocol and its UDT4-wire sender share it (also `ctp_proto::pace`).
//!
//! Credit is a bucket of one *quantum* (two packets or half a millisecond of rate,
//! whichever is longer): a packet may leave once its slot has begun, and credit unused
//! beyond the quantum is lost. At rates where a quarter millisecond holds at least two
//! packets (about 95 Mb/s and up) the sender wakes only once that much credit has built up,
//! not when the next single slot begins: packets leave in trains (at 1 Gb/s about 20 every
//! 250 µs) that a runtime sends with one system call, and a wake-up up to 250 µs late costs
//! no rate. Linux's TSO autosizing and FQ pacing settle on bursts of this size at these
//! rates; one packet per wake-up would cost a system call and a timer per packet. Slower
//! flows are spaced packet by packet. A sender whose control tolerates a longer burst may
//! ask for longer trains ([`Spacing::TrainsOf`]).
//!
//! UDT's rate control wants its packets evenly spaced and wakes for every slot: with the
//! same quantum of credit under the composed engine ([`Spacing::Packets`]), and with credit
//! for at most four packets (1 ms at most) in the UDT4-wire sender ([`Spacing::Strict`],
//! UDT's own rule: a little catching up after a late wake-up, not a burst — through a
//! 1 Gbit/s `tbf`, 846 Mb/s with a quantum of credit against 904 with four packets).
//!
//! Gaps are whole microseconds; the fraction each one leaves over is carried to the next,
//! so the average rate is exact (truncating would overshoot by 3 % at 1 Gb/s and by 13 %
//! at 10 Gb/s).

use crate::time::Instant;
use core::time::Duration;

/// Credit a fast flow waits for before it wakes: one train, microseconds.
pub const TRAIN_US: u64 = 250;

/// How a [`PaceClock`] groups packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spacing {
    /// Trains of up to 250 µs at high rates, credit of one quantum.
    Trains,
    /// Trains of up to this many microseconds (at least [`TRAIN_US`]), credit of two: for
    /// a sender whose packets each cost a wake-up that longer trains save, and whose
    /// control does not read a burst's queueing as congestion (the `coded` profile scales
    /// its trains with the round trip).
    TrainsOf(u64),
    /// A slot per packet, credit of one quantum.
    Packets,
    /// A slot per packet, credit of four packets (1 ms) at most.
    Strict,
}

impl Spacing {
    /// The longest train, microseconds (the credit a quantum holds is two of them).
    fn train_us(self) -> u64 {
        match self {
            Spacing::TrainsOf(us) => us.max(TRAIN_US),
            _ => TRAIN_US,
        }
    }
}

/// When the next packet may leave, and the sub-microsecond remainder of the gaps so far.
#[derive(Clone, Copy, Debug, Default)]
pub struct PaceClock {
    next_at: Instant,
    /// Fraction of a microsecond left over by the gaps so far, in units of 1/rate µs.
    remainder: u64,
    /// Nothing leaves before this, paced or not ([`Self::hold_until`]).
    held_until: Instant,
}

impl PaceClock {
    /// A clock whose first packet may leave at once.
    pub const fn new() -> Self {
        PaceClock {
            next_at: Instant::ZERO,
            remainder: 0,
            held_until: Instant::ZERO,
        }
    }

    /// Time two packets of `packet` bytes take at `rate` bytes/s (`None`: unpaced).
    fn pair_us(rate: u64, packet: u64) -> Option<u64> {
        (2 * packet * 1_000_000).checked_div(rate)
    }

    /// Caps the credit; true when a packet may leave at `now` (at rate 0, which means
    /// unpaced, unless a hold lasts).
    pub fn ready(&mut self, now: Instant, rate: u64, packet: u64, spacing: Spacing) -> bool {
        if now < self.held_until {
            return false;
        }
        let Some(pair) = Self::pair_us(rate, packet) else {
            return true;
        };
        let quantum = match spacing {
            Spacing::Trains | Spacing::Packets | Spacing::TrainsOf(_) => {
                pair.max(2 * spacing.train_us())
            }
            Spacing::Strict => (2 * pair).min(1000),
        };
        let floor = Instant::from_micros(now.as_micros().saturating_sub(quantum));
        if self.next_at < floor {
            self.next_at = floor;
        }
        self.next_at <= now
    }

    /// When to wake to send again: the next slot, plus a train's worth of credit for a fast
    /// flow.
    pub fn wake_at(&self, rate: u64, packet: u64, spacing: Spacing) -> Instant {
        let train = spacing.train_us();
        match Self::pair_us(rate, packet) {
            Some(pair)
                if matches!(spacing, Spacing::Trains | Spacing::TrainsOf(_)) && pair <= train =>
            {
                self.next_at + Duration::from_micros(train)
            }
            Some(_) => self.next_at,
            None => self.held_until,
        }
    }

    /// The gap a packet of `bytes` occupies at `rate`, microseconds, carrying the fraction
    /// to the next call (`None` at rate 0). Does not move the clock: see [`Self::delay`].
    pub fn gap_us(&mut self, bytes: u64, rate: u64) -> Option<u64> {
        let exact = bytes * 1_000_000 + self.remainder;
        let gap = exact.checked_div(rate)?;
        self.remainder = exact % rate;
        Some(gap)
    }

    /// No packet leaves before `at`, paced or not; a paced flow resumes without the credit
    /// it would have earned meanwhile.
    pub fn hold_until(&mut self, at: Instant) {
        self.held_until = self.held_until.max(at);
        self.next_at = self.next_at.max(at);
    }

    /// Moves the next slot `us` microseconds later.
    pub fn delay(&mut self, us: u64) {
        self.next_at += Duration::from_micros(us);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_carry_their_fraction_so_the_rate_is_exact() {
        let mut c = PaceClock::new();
        // 1414 bytes at 125 MB/s: 11.312 µs each; 1000 gaps are 11312 µs, not 11000.
        let total: u64 = (0..1000)
            .map(|_| c.gap_us(1414, 125_000_000).unwrap())
            .sum();
        assert_eq!(total, 11_312);
        assert_eq!(c.gap_us(1414, 0), None);
    }

    /// Sends at `now` while the clock allows; returns how many packets left.
    fn send_all(c: &mut PaceClock, now: Instant, rate: u64, packet: u64, sp: Spacing) -> u32 {
        let mut sent = 0;
        while c.ready(now, rate, packet, sp) {
            let g = c.gap_us(packet, rate).unwrap();
            c.delay(g);
            sent += 1;
        }
        sent
    }

    #[test]
    fn a_hold_keeps_packets_back_paced_or_not_and_forfeits_the_credit() {
        let t = |us: u64| Instant::from_micros(1_000_000 + us);
        for rate in [0, 125_000_000] {
            let mut c = PaceClock::new();
            c.hold_until(t(10_000));
            assert!(
                !c.ready(t(9_999), rate, 1414, Spacing::Packets),
                "rate {rate}"
            );
            assert_eq!(c.wake_at(rate, 1414, Spacing::Packets), t(10_000));
            assert!(
                c.ready(t(10_000), rate, 1414, Spacing::Packets),
                "rate {rate}"
            );
        }
        // A paced flow after the hold: no credit from the time it stood still.
        let mut c = PaceClock::new();
        c.hold_until(t(10_000));
        assert_eq!(
            send_all(&mut c, t(10_000), 125_000_000, 1414, Spacing::Strict),
            1
        );
        // An earlier hold than the next slot changes nothing.
        let next = c.wake_at(125_000_000, 1414, Spacing::Strict);
        c.hold_until(t(0));
        assert_eq!(c.wake_at(125_000_000, 1414, Spacing::Strict), next);
    }

    #[test]
    fn credit_is_capped_at_one_quantum_and_fast_flows_wake_for_a_train() {
        let t = |us| Instant::from_micros(1_000_000 + us);
        let gbit = 125_000_000;
        // After a long idle, at most half a millisecond of credit (fast flow).
        let mut c = PaceClock::new();
        let sent = send_all(&mut c, t(0), gbit, 1414, Spacing::Trains);
        assert_eq!(sent, 45, "500 µs of credit at 11.3 µs per packet");
        // The next wake leaves a train's worth of credit.
        assert_eq!(c.wake_at(gbit, 1414, Spacing::Trains), t(9 + TRAIN_US));
        // A slow flow (two packets take more than 250 µs): two packets of credit, the one
        // due now, then a wake for the next single slot.
        let mut slow = PaceClock::new();
        assert_eq!(
            send_all(&mut slow, t(0), 1_000_000, 1000, Spacing::Trains),
            3
        );
        assert_eq!(slow.wake_at(1_000_000, 1000, Spacing::Trains), t(1000));
        // Longer trains: a millisecond's credit after the idle time, then a train's wait.
        let mut long = PaceClock::new();
        let ms = Spacing::TrainsOf(1000);
        assert_eq!(send_all(&mut long, t(0), gbit, 1414, ms), 177);
        assert_eq!(long.wake_at(gbit, 1414, ms), t(2 + 1000));
        // Never shorter than the ordinary train.
        assert_eq!(Spacing::TrainsOf(10).train_us(), TRAIN_US);
        // Strict spacing at 1 Gb/s: four packet times (45 µs) of credit, a wake-up for the
        // next slot.
        let mut spaced = PaceClock::new();
        assert_eq!(send_all(&mut spaced, t(0), gbit, 1414, Spacing::Strict), 4);
        let next = spaced.wake_at(gbit, 1414, Spacing::Strict);
        assert!(next > t(0) && next <= t(12), "{next:?}");
    }
}
