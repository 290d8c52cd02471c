//! CUBIC (RFC 9438).
//!
//! > W_cubic(t) = C·(t − K)³ + W_max, K = ∛((W_max − cwnd_epoch)/C)        (§4.2)
//!
//! with C = 0.4 and β_cubic = 0.7; in congestion avoidance each ACK adds
//! `(target − cwnd)/cwnd` segments where `target = W_cubic(t + RTT)` clamped to
//! `[cwnd, 1.5·cwnd]` (§4.4), unless the Reno-friendly estimate
//! `W_est += α_cubic · acked/cwnd`, `α_cubic = 3(1 − β)/(1 + β)` (§4.3), is larger. Fast
//! convergence (§4.7) lowers W_max when a loss comes below the previous maximum. Slow start
//! is Reno's; a timeout restarts from the minimum window (§4.8).

use super::{Ack, Config, CongestionControl, Loss, Window};
use crate::time::Instant;

/// C, segments per second³.
pub const C: f64 = 0.4;
/// Multiplicative decrease factor.
pub const BETA: f64 = 0.7;

/// The CUBIC algorithm.
#[derive(Debug)]
pub struct Cubic {
    w: Window,
    /// Window in segments, fractional (the byte window is derived from it).
    cwnd_seg: f64,
    w_max: f64,
    w_est: f64,
    k: f64,
    epoch: Option<Instant>,
}

impl Cubic {
    /// Initial window of `cfg.initial_window` packets.
    pub fn new(cfg: &Config) -> Self {
        let w = Window::new(cfg);
        Cubic {
            cwnd_seg: (w.cwnd / w.mss) as f64,
            w,
            w_max: 0.0,
            w_est: 0.0,
            k: 0.0,
            epoch: None,
        }
    }

    /// W_max, segments.
    pub fn w_max(&self) -> f64 {
        self.w_max
    }

    /// K, seconds.
    pub fn k(&self) -> f64 {
        self.k
    }

    fn set_seg(&mut self, seg: f64) {
        let min = (self.w.min_cwnd / self.w.mss) as f64;
        self.cwnd_seg = seg.max(min);
        self.w.cwnd = (self.cwnd_seg * self.w.mss as f64) as u64;
    }

    fn reduce(&mut self, now: Instant) {
        // §4.7 fast convergence.
        self.w_max = if self.cwnd_seg < self.w_max {
            self.cwnd_seg * (1.0 + BETA) / 2.0
        } else {
            self.cwnd_seg
        };
        let new = self.cwnd_seg * BETA;
        self.w.decrease(now, (new * self.w.mss as f64) as u64);
        self.set_seg(new);
        self.w_est = self.cwnd_seg;
        self.k = ((self.w_max - self.cwnd_seg).max(0.0) / C).cbrt();
        self.epoch = Some(now);
    }
}

impl CongestionControl for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }

    fn on_ack(&mut self, a: &Ack) {
        if !self.w.ack_opens(a) {
            return;
        }
        let acked = a.bytes as f64 / self.w.mss as f64;
        if self.w.slow_start() {
            self.set_seg(self.cwnd_seg + acked);
            return;
        }
        let epoch = *self.epoch.get_or_insert_with(|| {
            // Avoidance reached from slow start: the epoch starts now, from this window.
            self.w_max = self.cwnd_seg;
            self.w_est = self.cwnd_seg;
            self.k = 0.0;
            a.now
        });
        let t = a.now.saturating_since(epoch).as_secs_f64() + a.srtt_us as f64 / 1e6;
        let w_cubic = C * (t - self.k).powi(3) + self.w_max;
        let target = w_cubic.clamp(self.cwnd_seg, 1.5 * self.cwnd_seg);
        self.w_est += 3.0 * (1.0 - BETA) / (1.0 + BETA) * acked / self.cwnd_seg;
        let next = if w_cubic < self.w_est {
            self.w_est
        } else {
            self.cwnd_seg + (target - self.cwnd_seg) / self.cwnd_seg * acked
        };
        self.set_seg(next);
    }

    fn on_loss(&mut self, l: &Loss) {
        if self.w.loss_opens(l) {
            self.reduce(l.now);
        }
    }

    fn on_timeout(&mut self, now: Instant, _backoff: u32) {
        self.reduce(now);
        self.w.timeout(now);
        self.w.ssthresh = (self.cwnd_seg * self.w.mss as f64) as u64;
        self.cwnd_seg = (self.w.cwnd / self.w.mss) as f64;
        self.epoch = None;
    }

    super::window_outputs!();
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::*;

    #[test]
    fn cuts_to_seventy_percent_then_grows_concave_then_convex() {
        let mut c = Cubic::new(&cfg());
        for i in 0..90 {
            c.on_ack(&ack(i, 10, 1));
        }
        assert_eq!(c.cwnd(), 100 * MSS);
        c.on_loss(&loss(100, 20, 15, 120));
        assert_eq!(c.cwnd(), 70 * MSS, "β = 0.7");
        assert!((c.k() - 75f64.cbrt()).abs() < 1e-9, "K = ∛(30/0.4)");
        // One ACK one second into the epoch: W_cubic(1.001) ≈ 86.7, so +0.238 segment.
        c.on_ack(&ack(200, 1020, 1));
        let grown = c.cwnd() - 70 * MSS;
        assert!((230..=245).contains(&grown), "concave step {grown}");
        // Past K the window probes beyond W_max (convex region).
        for i in 0..400 {
            c.on_ack(&ack(300 + i, 6020, 1));
        }
        assert!(c.cwnd() > 100 * MSS, "{}", c.cwnd());
        // Fast convergence: a loss below the old maximum lowers W_max to (1 + β)/2 of it.
        let mut d = Cubic::new(&cfg());
        for i in 0..90 {
            d.on_ack(&ack(i, 10, 1));
        }
        d.on_loss(&loss(100, 20, 15, 120)); // 100 → 70, W_max 100
        d.on_loss(&loss(200, 40, 30, 220)); // 70 < 100 → W_max 59.5, cwnd 49
        assert!((d.w_max() - 59.5).abs() < 1e-9, "{}", d.w_max());
        assert_eq!(d.cwnd(), 49 * MSS);
        d.on_timeout(ms(50), 1);
        assert_eq!(d.cwnd(), 2 * MSS, "timeout restarts from the minimum");
    }
}
