//! NewReno (RFC 6582 / RFC 9002 style), ported from the `newreno` microprotocol: slow start,
//! congestion avoidance (one packet per window of acknowledged bytes), one halving per
//! recovery period, collapse to the minimum window on a timeout. Paced at 1.25 × cwnd / srtt
//! (2 × in slow start).

use super::{Ack, Config, CongestionControl, Loss, Window};
use crate::time::Instant;

/// The NewReno algorithm.
#[derive(Debug)]
pub struct NewReno {
    w: Window,
}

impl NewReno {
    /// Initial window of `cfg.initial_window` packets.
    pub fn new(cfg: &Config) -> Self {
        NewReno {
            w: Window::new(cfg),
        }
    }

    /// Current slow-start threshold, bytes.
    pub fn ssthresh(&self) -> u64 {
        self.w.ssthresh
    }
}

impl CongestionControl for NewReno {
    fn name(&self) -> &'static str {
        "newreno"
    }

    fn on_ack(&mut self, a: &Ack) {
        if !self.w.ack_opens(a) {
            return;
        }
        self.w.reno_increase(a.bytes);
    }

    fn on_loss(&mut self, l: &Loss) {
        if !self.w.loss_opens(l) {
            return;
        }
        self.w.decrease(l.now, self.w.cwnd / 2);
    }

    fn on_timeout(&mut self, now: Instant, _backoff: u32) {
        self.w.timeout(now);
    }

    super::window_outputs!();
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::*;

    #[test]
    fn grows_halves_once_per_window_and_collapses_on_timeout() {
        let mut c = NewReno::new(&cfg());
        assert_eq!(c.cwnd(), 10 * MSS);
        c.on_ack(&ack(1, 100, 100));
        assert_eq!(c.cwnd(), 11 * MSS, "slow start adds the acked bytes");
        assert_eq!(c.pacing_rate(), 2 * 11 * MSS * 10, "2 × cwnd / 100 ms");
        c.on_loss(&loss(2, 110, 100, 20));
        assert_eq!(c.cwnd(), 5500);
        c.on_loss(&loss(3, 111, 100, 20));
        assert_eq!(c.cwnd(), 5500, "one decrease per recovery period");
        c.on_ack(&ack(4, 112, 20)); // sent at 92 ms: before the recovery started
        assert_eq!(c.cwnd(), 5500, "no growth while recovering");
        for i in 0..6 {
            c.on_ack(&ack(10 + i, 300, 100));
        }
        assert_eq!(c.cwnd(), 6500, "one packet per window in avoidance");
        assert_eq!(c.pacing_rate(), 6500 * 10 * 5 / 4);
        c.on_timeout(ms(400), 1);
        assert_eq!((c.cwnd(), c.ssthresh()), (2 * MSS, 3250));
    }
}
