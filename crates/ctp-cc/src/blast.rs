//! Fixed-rate blast: sends at a constant rate whatever happens (losses and timeouts are
//! ignored; the reliability microprotocol repairs them). The window stays open. The rate
//! can be changed while running with [`Blast::set_rate`] or a [`RateMessage`] through
//! `on_custom` — the runtime's way in, since the algorithm lives inside the connection.
//! For links the operator owns (Composable UDT's example of a user-defined controller).

use super::{Config, CongestionControl, RateMessage};
use crate::time::Instant;

/// Slowest rate accepted, bytes per second (a zero rate would stall the connection).
pub const MIN_RATE: u64 = 1_000;

/// The fixed-rate algorithm.
#[derive(Debug)]
pub struct Blast {
    rate: u64,
}

impl Blast {
    /// Sends at `cfg.rate` bytes per second.
    pub fn new(cfg: &Config) -> Self {
        Blast {
            rate: cfg.rate.max(MIN_RATE),
        }
    }

    /// Changes the rate (bytes per second; raised to [`MIN_RATE`]).
    pub fn set_rate(&mut self, bytes_per_s: u64) {
        self.rate = bytes_per_s.max(MIN_RATE);
    }
}

impl CongestionControl for Blast {
    fn name(&self) -> &'static str {
        "blast"
    }

    fn on_custom(&mut self, _now: Instant, msg: &[u8]) {
        if let Some(RateMessage(r)) = RateMessage::decode(msg) {
            self.set_rate(r);
        }
    }

    fn cwnd(&self) -> u64 {
        u64::MAX
    }

    fn pacing_rate(&self) -> u64 {
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::*;

    #[test]
    fn constant_rate_changeable_while_running() {
        let mut b = Blast::new(&cfg());
        assert_eq!((b.pacing_rate(), b.cwnd()), (1_000_000, u64::MAX));
        assert_eq!(b.pacing_period_us(1000), Some(1000));
        for i in 0..10 {
            b.on_ack(&ack(i, 10, 10));
            b.on_loss(&loss(100 + i, 20, 15, 200));
        }
        b.on_timeout(ms(30), 3);
        assert_eq!(
            b.pacing_rate(),
            1_000_000,
            "loss and timeouts change nothing"
        );
        b.set_rate(5_000_000);
        assert_eq!(b.pacing_rate(), 5_000_000);
        b.on_custom(ms(40), &RateMessage(2_000_000).encode());
        assert_eq!(b.pacing_rate(), 2_000_000);
        b.on_custom(ms(40), b"R\x01");
        b.on_custom(ms(40), &[]);
        assert_eq!(b.pacing_rate(), 2_000_000, "malformed messages are ignored");
        b.set_rate(0);
        assert_eq!(b.pacing_rate(), MIN_RATE);
    }
}
