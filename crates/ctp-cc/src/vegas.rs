//! TCP Vegas (Brakmo & Peterson, 1995): once per round trip, compare the expected rate
//! `cwnd / BaseRTT` with the actual one `cwnd / RTT`; `diff = (expected − actual) × BaseRTT`
//! estimates the packets this flow keeps queued. Below α = 2 the window grows one packet per
//! round trip, above β = 4 it shrinks one, in between it holds. Slow start ends when diff
//! exceeds γ = 1. RTT is the smallest sample of the round (as Linux `tcp_vegas`); losses
//! and timeouts are handled as Reno.

use super::{Ack, Config, CongestionControl, Loss, Window};
use crate::time::Instant;

/// Lower bound of queued packets.
pub const ALPHA: f64 = 2.0;
/// Upper bound of queued packets.
pub const BETA: f64 = 4.0;
/// Slow-start exit threshold.
pub const GAMMA: f64 = 1.0;

/// The Vegas algorithm.
#[derive(Debug)]
pub struct Vegas {
    w: Window,
    base_rtt_us: u64,
    round_start: Option<Instant>,
    round_min_us: u64,
}

impl Vegas {
    /// Initial window of `cfg.initial_window` packets.
    pub fn new(cfg: &Config) -> Self {
        Vegas {
            w: Window::new(cfg),
            base_rtt_us: u64::MAX,
            round_start: None,
            round_min_us: u64::MAX,
        }
    }

    /// Packets queued by this flow, as last estimated.
    fn diff(&self, rtt_us: u64) -> f64 {
        let cwnd = self.w.cwnd as f64 / self.w.mss as f64;
        cwnd * (rtt_us.saturating_sub(self.base_rtt_us)) as f64 / rtt_us.max(1) as f64
    }
}

impl CongestionControl for Vegas {
    fn name(&self) -> &'static str {
        "vegas"
    }

    fn on_ack(&mut self, a: &Ack) {
        let opens = self.w.ack_opens(a);
        let rtt = a.rtt_us.max(1);
        self.base_rtt_us = self.base_rtt_us.min(rtt);
        self.round_min_us = self.round_min_us.min(rtt);
        if !opens {
            return;
        }
        if self.w.slow_start() {
            self.w.cwnd += a.bytes;
        }
        let Some(start) = self.round_start else {
            // The first ACK opens the first round.
            self.round_start = Some(a.now);
            self.round_min_us = u64::MAX;
            return;
        };
        if a.now.saturating_since(start).as_micros() < a.srtt_us.max(1) as u128 {
            return;
        }
        self.round_start = Some(a.now);
        let round_min = core::mem::replace(&mut self.round_min_us, u64::MAX);
        let diff = self.diff(round_min);
        if self.w.slow_start() {
            if diff > GAMMA {
                self.w.ssthresh = self.w.cwnd;
            }
        } else if diff < ALPHA {
            self.w.cwnd += self.w.mss;
        } else if diff > BETA {
            self.w.cwnd = (self.w.cwnd - self.w.mss).max(self.w.min_cwnd);
        }
    }

    fn on_loss(&mut self, l: &Loss) {
        if self.w.loss_opens(l) {
            self.w.decrease(l.now, self.w.cwnd / 2);
        }
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
    fn keeps_two_to_four_packets_queued() {
        let mut v = Vegas::new(&cfg());
        // Rounds one second apart; BaseRTT 100 ms.
        v.on_ack(&ack(1, 1000, 100));
        assert_eq!(v.cwnd(), 11 * MSS, "slow start");
        // RTT doubles with 12 packets out: 6 queued > γ, slow start ends.
        v.on_ack(&ack(2, 2000, 200));
        assert_eq!(v.cwnd(), 12 * MSS);
        // No queue: +1 per round.
        v.on_ack(&ack(3, 3000, 100));
        assert_eq!(v.cwnd(), 13 * MSS);
        // 13 × (200 − 100)/200 = 6.5 > β: −1.
        v.on_ack(&ack(4, 4000, 200));
        assert_eq!(v.cwnd(), 12 * MSS);
        // 12 × 30/130 = 2.8, between α and β: hold.
        v.on_ack(&ack(5, 5000, 130));
        assert_eq!(v.cwnd(), 12 * MSS);
        // 12 × 10/110 = 1.1 < α: +1.
        v.on_ack(&ack(6, 6000, 110));
        assert_eq!(v.cwnd(), 13 * MSS);
        v.on_loss(&loss(7, 6001, 5990, 10));
        assert_eq!(v.cwnd(), 6500);
    }
}
