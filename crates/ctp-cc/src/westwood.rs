//! Westwood+ (Mascolo et al.; Grieco & Mascolo, "Performance evaluation and comparison of
//! Westwood+, New Reno, and Vegas TCP congestion control", 2004): Reno's increase, but after
//! a loss the slow-start threshold is set from the bandwidth estimate instead of halving:
//! `ssthresh = BWE × RTT_min` and `cwnd = min(cwnd, ssthresh)`; after a timeout the window
//! restarts from the minimum with the same threshold. BWE is Westwood+'s: the bytes
//! acknowledged over each round trip (at least 50 ms), low-pass filtered by 7/8.

use super::{Ack, Config, CongestionControl, Loss, Window};
use crate::time::Instant;

/// Shortest bandwidth-sampling interval, microseconds.
const MIN_INTERVAL_US: u64 = 50_000;

/// The Westwood+ algorithm.
#[derive(Debug)]
pub struct Westwood {
    w: Window,
    bwe: u64,
    round_start: Option<Instant>,
    round_bytes: u64,
    min_rtt_us: u64,
}

impl Westwood {
    /// Initial window of `cfg.initial_window` packets.
    pub fn new(cfg: &Config) -> Self {
        Westwood {
            w: Window::new(cfg),
            bwe: 0,
            round_start: None,
            round_bytes: 0,
            min_rtt_us: u64::MAX,
        }
    }

    /// Bandwidth estimate, bytes per second.
    pub fn bwe(&self) -> u64 {
        self.bwe
    }

    fn threshold(&self) -> u64 {
        if self.min_rtt_us == u64::MAX || self.bwe == 0 {
            return self.w.cwnd / 2;
        }
        (self.bwe as u128 * self.min_rtt_us as u128 / 1_000_000) as u64
    }
}

impl CongestionControl for Westwood {
    fn name(&self) -> &'static str {
        "westwood"
    }

    fn on_ack(&mut self, a: &Ack) {
        let opens = self.w.ack_opens(a);
        self.min_rtt_us = self.min_rtt_us.min(a.min_rtt_us).min(a.rtt_us.max(1));
        match self.round_start {
            None => self.round_start = Some(a.now),
            Some(start) => {
                self.round_bytes += a.bytes;
                let elapsed = a.now.saturating_since(start).as_micros() as u64;
                if elapsed >= a.srtt_us.max(MIN_INTERVAL_US) {
                    let sample = self.round_bytes * 1_000_000 / elapsed;
                    self.bwe = if self.bwe == 0 {
                        sample
                    } else {
                        (7 * self.bwe + sample) / 8
                    };
                    self.round_bytes = 0;
                    self.round_start = Some(a.now);
                }
            }
        }
        if opens {
            self.w.reno_increase(a.bytes);
        }
    }

    fn on_loss(&mut self, l: &Loss) {
        if !self.w.loss_opens(l) {
            return;
        }
        let ss = self.threshold().max(self.w.min_cwnd);
        let cwnd = self.w.cwnd.min(ss);
        self.w.decrease(l.now, cwnd);
        self.w.ssthresh = ss;
    }

    fn on_timeout(&mut self, now: Instant, _backoff: u32) {
        let ss = self.threshold().max(self.w.min_cwnd);
        self.w.timeout(now);
        self.w.ssthresh = ss;
    }

    super::window_outputs!();
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::*;

    #[test]
    fn the_bandwidth_estimate_sets_the_threshold_after_a_loss() {
        let mut w = Westwood::new(&cfg());
        // One packet every 10 ms with a 50 ms RTT: 100 kB/s.
        for i in 0..100 {
            w.on_ack(&ack(i, 100 + 10 * i, 50));
        }
        assert_eq!(w.bwe(), 100_000);
        assert_eq!(w.cwnd(), 110 * MSS);
        w.on_loss(&loss(500, 1200, 1150, 600));
        assert_eq!(w.cwnd(), 5000, "BWE × RTTmin = 100 kB/s × 50 ms");
        // A window already under the estimate is kept.
        let mut small = Westwood::new(&cfg());
        for i in 0..20 {
            small.on_ack(&Ack {
                bytes: 100,
                ..ack(i, 100 + 10 * i, 50)
            });
        }
        small.on_loss(&loss(500, 400, 350, 600));
        assert_eq!(
            small.cwnd(),
            2 * MSS,
            "estimate 10 kB/s × 50 ms is under the minimum"
        );
        w.on_timeout(ms(2000), 1);
        assert_eq!(w.cwnd(), 2 * MSS);
    }
}
