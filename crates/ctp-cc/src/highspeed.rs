//! HighSpeed TCP (RFC 3649): above Low_Window = 38 packets the increase a(w) and decrease
//! b(w) follow the response function `w = 0.12 / p^0.835` between (Low_Window, Low_P) and
//! (High_Window = 83000, High_P = 10⁻⁷) (§5):
//!
//! > b(w) = (High_Decrease − 0.5) (log(w) − log(Low_Window)) / (log(High_Window) −
//! > log(Low_Window)) + 0.5
//! > a(w) = w^2 * p(w) * 2 * b(w) / (2 − b(w))
//!
//! with High_Decrease = 0.1; below Low_Window it is Reno.

use super::{Ack, Config, CongestionControl, Loss, Window};
use crate::time::Instant;

/// Below this window (packets) HighSpeed TCP is Reno.
pub const LOW_WINDOW: f64 = 38.0;
/// Window (packets) at which the response function reaches High_P.
pub const HIGH_WINDOW: f64 = 83_000.0;
/// Loss rate at High_Window.
pub const HIGH_P: f64 = 1e-7;
/// Decrease factor at High_Window.
pub const HIGH_DECREASE: f64 = 0.1;

fn low_p() -> f64 {
    // Reno's response function w = 1.2 / sqrt(p) at Low_Window (RFC 3649 §5).
    (1.2 / LOW_WINDOW).powi(2)
}

/// b(w): the fraction of the window removed on a loss at `w` packets.
pub fn b(w: f64) -> f64 {
    if w <= LOW_WINDOW {
        return 0.5;
    }
    let f = (w.ln() - LOW_WINDOW.ln()) / (HIGH_WINDOW.ln() - LOW_WINDOW.ln());
    (HIGH_DECREASE - 0.5) * f.min(1.0) + 0.5
}

/// p(w): the loss rate at which the response function gives `w` packets.
pub fn p(w: f64) -> f64 {
    let f = (w.ln() - LOW_WINDOW.ln()) / (HIGH_WINDOW.ln() - LOW_WINDOW.ln());
    (f * (HIGH_P.ln() - low_p().ln()) + low_p().ln()).exp()
}

/// a(w): packets added per round trip at `w` packets.
pub fn a(w: f64) -> f64 {
    if w <= LOW_WINDOW {
        return 1.0;
    }
    let bw = b(w);
    w * w * p(w) * 2.0 * bw / (2.0 - bw)
}

/// The HighSpeed TCP algorithm.
#[derive(Debug)]
pub struct HighSpeed {
    w: Window,
}

impl HighSpeed {
    /// Initial window of `cfg.initial_window` packets.
    pub fn new(cfg: &Config) -> Self {
        HighSpeed {
            w: Window::new(cfg),
        }
    }

    fn segs(&self) -> f64 {
        self.w.cwnd as f64 / self.w.mss as f64
    }
}

impl CongestionControl for HighSpeed {
    fn name(&self) -> &'static str {
        "highspeed"
    }

    fn on_ack(&mut self, ack: &Ack) {
        if !self.w.ack_opens(ack) {
            return;
        }
        if self.w.slow_start() {
            self.w.cwnd += ack.bytes;
            return;
        }
        let w = self.segs();
        // a(w) packets per window of acknowledged packets.
        self.w.grow(a(w) * ack.bytes as f64 / w);
    }

    fn on_loss(&mut self, l: &Loss) {
        if !self.w.loss_opens(l) {
            return;
        }
        let cut = (self.w.cwnd as f64 * (1.0 - b(self.segs()))) as u64;
        self.w.decrease(l.now, cut);
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
    fn the_response_function_matches_rfc_3649_table() {
        // RFC 3649 appendix B: w = 38 → a 1, b 0.50; 1058 → 8, 0.33; 83000 → 72, 0.10.
        assert_eq!(a(38.0), 1.0);
        assert_eq!(b(38.0), 0.5);
        assert!((a(1058.0) - 8.0).abs() < 1.0, "{}", a(1058.0));
        assert!((b(1058.0) - 0.33).abs() < 0.01, "{}", b(1058.0));
        assert!(a(10_000.0) > a(1058.0) && b(10_000.0) < b(1058.0));
        assert!((b(83_000.0) - 0.1).abs() < 1e-9);
        assert!((a(83_000.0) - 72.0).abs() < 2.0, "{}", a(83_000.0));
    }

    #[test]
    fn a_large_window_grows_faster_and_shrinks_less_than_reno() {
        let mut h = HighSpeed::new(&cfg());
        for i in 0..1048 {
            h.on_ack(&ack(i, 10, 10));
        }
        assert_eq!(h.cwnd(), 1058 * MSS);
        h.on_loss(&loss(5000, 20, 15, 6000));
        let after = h.cwnd();
        let expect = (1058.0 * MSS as f64 * (1.0 - b(1058.0))) as u64;
        assert_eq!(after, expect);
        assert!(
            after > 700 * MSS,
            "removes about a third, not half: {after}"
        );
        // One window of ACKs adds about a(w) ≈ 6 packets (Reno would add one).
        let w = after / MSS;
        for i in 0..w {
            h.on_ack(&ack(10_000 + i, 40, 10));
        }
        let grown = (h.cwnd() - after) / MSS;
        assert!(
            (5..=8).contains(&grown),
            "grew {grown} packets in one window"
        );
        // Small windows are Reno: halved.
        let mut r = HighSpeed::new(&cfg());
        r.on_loss(&loss(1, 20, 15, 10));
        assert_eq!(r.cwnd(), 5 * MSS);
    }
}
