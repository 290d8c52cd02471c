//! FAST TCP (Wei, Jin, Low, Hegde, "FAST TCP: motivation, architecture, algorithms,
//! performance", IEEE/ACM ToN 2006): a delay-based window update once per round trip,
//!
//! > w ← min{ 2w, (1 − γ) w + γ (baseRTT/RTT · w + α) }
//!
//! whose equilibrium keeps α packets of this flow queued (`w = α / (1 − baseRTT/RTT)`).
//! Here α = 20 packets, γ = 1/2, RTT is the smoothed RTT. A loss halves the window (once per
//! recovery period), a timeout restarts from the minimum, as in the paper's loss recovery.

use super::{Ack, Config, CongestionControl, Loss, Window};
use crate::time::Instant;

/// Packets each flow keeps queued at equilibrium.
pub const ALPHA: f64 = 20.0;
/// Smoothing of the update.
pub const GAMMA: f64 = 0.5;

/// The FAST algorithm.
#[derive(Debug)]
pub struct Fast {
    w: Window,
    seg: f64,
    base_rtt_us: u64,
    last_update: Option<Instant>,
}

impl Fast {
    /// Initial window of `cfg.initial_window` packets.
    pub fn new(cfg: &Config) -> Self {
        let w = Window::new(cfg);
        Fast {
            seg: (w.cwnd / w.mss) as f64,
            w,
            base_rtt_us: u64::MAX,
            last_update: None,
        }
    }

    /// Window, packets (fractional).
    pub fn window_packets(&self) -> f64 {
        self.seg
    }

    fn set(&mut self, seg: f64) {
        self.seg = seg.max((self.w.min_cwnd / self.w.mss) as f64);
        self.w.cwnd = (self.seg * self.w.mss as f64) as u64;
    }
}

impl CongestionControl for Fast {
    fn name(&self) -> &'static str {
        "fast"
    }

    fn on_ack(&mut self, a: &Ack) {
        let opens = self.w.ack_opens(a);
        self.base_rtt_us = self.base_rtt_us.min(a.rtt_us.max(1));
        if !opens {
            return;
        }
        let rtt = a.srtt_us.max(a.rtt_us).max(1);
        if self
            .last_update
            .is_some_and(|t| (a.now.saturating_since(t).as_micros() as u64) < rtt)
        {
            return;
        }
        self.last_update = Some(a.now);
        let ratio = self.base_rtt_us as f64 / rtt as f64;
        let w = self.seg;
        self.set((2.0 * w).min((1.0 - GAMMA) * w + GAMMA * (ratio * w + ALPHA)));
    }

    fn on_loss(&mut self, l: &Loss) {
        if self.w.loss_opens(l) {
            self.w.decrease(l.now, self.w.cwnd / 2);
            self.seg = self.w.cwnd as f64 / self.w.mss as f64;
        }
    }

    fn on_timeout(&mut self, now: Instant, _backoff: u32) {
        self.w.timeout(now);
        self.seg = self.w.cwnd as f64 / self.w.mss as f64;
    }

    fn cwnd(&self) -> u64 {
        self.w.cwnd
    }

    fn pacing_rate(&self) -> u64 {
        // FAST is window-based; pace at 1.25 × cwnd / RTT.
        super::window_pacing(self.w.cwnd, self.w.srtt_us, false)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::*;

    #[test]
    fn converges_to_alpha_packets_queued() {
        let mut f = Fast::new(&cfg());
        f.on_ack(&ack(1, 1000, 100));
        assert_eq!(
            f.cwnd(),
            20 * MSS,
            "no queue: min(2w, w/2 + (w + α)/2) = 20"
        );
        f.on_ack(&ack(2, 1050, 100));
        assert_eq!(f.cwnd(), 20 * MSS, "one update per round trip");
        f.on_ack(&ack(3, 2000, 100));
        assert_eq!(f.cwnd(), 30 * MSS);
        // RTT twice the base: equilibrium α / (1 − 1/2) = 40 packets.
        f.on_ack(&Ack {
            rtt_us: 200_000,
            srtt_us: 200_000,
            ..ack(4, 3000, 100)
        });
        assert_eq!(f.cwnd(), 32_500, "15 + (15 + 20)/2");
        for i in 0..30 {
            f.on_ack(&Ack {
                rtt_us: 200_000,
                srtt_us: 200_000,
                ..ack(5 + i, 4000 + 1000 * i, 100)
            });
        }
        assert!(
            (f.window_packets() - 40.0).abs() < 0.01,
            "{}",
            f.window_packets()
        );
        f.on_loss(&loss(100, 40_000, 39_000, 200));
        assert!(f.cwnd().abs_diff(20 * MSS) <= 2, "halved: {}", f.cwnd());
    }
}
