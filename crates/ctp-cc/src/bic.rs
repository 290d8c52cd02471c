//! BiC — Binary Increase Congestion control (Xu, Harfoush, Rhee, INFOCOM 2004; the Linux
//! `tcp_bic` constants): after a loss the window searches for the last maximum by binary
//! search — each round trip it closes 1/B = 1/4 of the distance, in steps of at most
//! S_max = 16 packets — then probes beyond it slowly and ever faster ("max probing").
//! A loss multiplies the window by β = 0.8; with fast convergence a loss below the previous
//! maximum lowers that maximum to (1 + β)/2 of the window. Below 14 packets it is Reno.

use super::{Ack, Config, CongestionControl, Loss, Window};
use crate::time::Instant;

/// Multiplicative decrease.
pub const BETA: f64 = 0.8;
/// Binary-search divisor.
pub const B: f64 = 4.0;
/// Largest increase per round trip, packets.
pub const S_MAX: f64 = 16.0;
/// Smoothing near the target (Linux `smooth_part`).
const SMOOTH: f64 = 20.0;
/// Below this window (packets) BiC is Reno.
pub const LOW_WINDOW: f64 = 14.0;

/// The BiC algorithm.
#[derive(Debug)]
pub struct Bic {
    w: Window,
    seg: f64,
    last_max: f64,
}

impl Bic {
    /// Initial window of `cfg.initial_window` packets.
    pub fn new(cfg: &Config) -> Self {
        let w = Window::new(cfg);
        Bic {
            seg: (w.cwnd / w.mss) as f64,
            w,
            last_max: 0.0,
        }
    }

    /// The maximum the binary search aims at, packets.
    pub fn last_max(&self) -> f64 {
        self.last_max
    }

    fn set(&mut self, seg: f64) {
        self.seg = seg.max(2.0);
        self.w.cwnd = (self.seg * self.w.mss as f64) as u64;
    }

    /// ACKs per one-packet increase (Linux `bictcp_update`).
    fn cnt(&self) -> f64 {
        let c = self.seg;
        if c < LOW_WINDOW {
            return c;
        }
        if c < self.last_max {
            let dist = (self.last_max - c) / B;
            if dist > S_MAX {
                c / S_MAX
            } else if dist <= 1.0 {
                c * SMOOTH / B
            } else {
                c / dist
            }
        } else if c < self.last_max + B {
            c * SMOOTH / B
        } else if c < self.last_max + S_MAX * (B - 1.0) {
            c * (B - 1.0) / (c - self.last_max)
        } else {
            c / S_MAX
        }
    }
}

impl CongestionControl for Bic {
    fn name(&self) -> &'static str {
        "bic"
    }

    fn on_ack(&mut self, a: &Ack) {
        if !self.w.ack_opens(a) {
            return;
        }
        let acked = a.bytes as f64 / self.w.mss as f64;
        if self.w.slow_start() {
            self.set(self.seg + acked);
        } else {
            self.set(self.seg + acked / self.cnt().max(1e-9));
        }
    }

    fn on_loss(&mut self, l: &Loss) {
        if !self.w.loss_opens(l) {
            return;
        }
        let c = self.seg;
        let new = if c < LOW_WINDOW {
            c / 2.0
        } else {
            self.last_max = if c < self.last_max {
                c * (1.0 + BETA) / 2.0
            } else {
                c
            };
            c * BETA
        };
        self.w.decrease(l.now, (new * self.w.mss as f64) as u64);
        self.set(new);
    }

    fn on_timeout(&mut self, now: Instant, _backoff: u32) {
        self.w.timeout(now);
        self.seg = (self.w.cwnd / self.w.mss) as f64;
    }

    super::window_outputs!();
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::*;

    #[test]
    fn binary_search_toward_the_last_maximum_then_fast_convergence() {
        let mut b = Bic::new(&cfg());
        for i in 0..90 {
            b.on_ack(&ack(i, 10, 1));
        }
        assert_eq!(b.cwnd(), 100 * MSS);
        b.on_loss(&loss(200, 20, 15, 300));
        assert_eq!(b.cwnd(), 80 * MSS, "β = 0.8");
        assert_eq!(b.last_max(), 100.0);
        // One round trip of ACKs (80) closes about a quarter of the 20-packet distance.
        for i in 0..80 {
            b.on_ack(&ack(400 + i, 40, 1));
        }
        let c = b.cwnd();
        assert!((84_000..=84_700).contains(&c), "{c}");
        // Fast convergence: a loss below the maximum lowers it.
        b.on_loss(&loss(600, 60, 50, 700));
        let seg = c as f64 / MSS as f64;
        assert!((b.last_max() - seg * 0.9).abs() < 0.01, "{}", b.last_max());
        assert!(b.cwnd().abs_diff((seg * 0.8 * MSS as f64) as u64) <= 2);
        b.on_timeout(ms(70), 1);
        assert_eq!(b.cwnd(), 2 * MSS);
    }
}
