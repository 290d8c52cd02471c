//! Scalable TCP (Kelly, "Scalable TCP: improving performance in highspeed wide area
//! networks", 2003): above a legacy window of 16 packets, each acknowledged packet adds
//! a = 0.01 packet and a loss removes b = 1/8 of the window, so the recovery time after a
//! loss does not depend on the rate. Below it, Reno.

use super::{Ack, Config, CongestionControl, Loss, Window};
use crate::time::Instant;

/// Packets added per acknowledged packet.
pub const A: f64 = 0.01;
/// Fraction of the window removed on a loss.
pub const B: f64 = 0.125;
/// Below this window (packets) the algorithm behaves as Reno.
pub const LEGACY_WINDOW: u64 = 16;

/// The Scalable TCP algorithm.
#[derive(Debug)]
pub struct Scalable {
    w: Window,
}

impl Scalable {
    /// Initial window of `cfg.initial_window` packets.
    pub fn new(cfg: &Config) -> Self {
        Scalable {
            w: Window::new(cfg),
        }
    }
}

impl CongestionControl for Scalable {
    fn name(&self) -> &'static str {
        "scalable"
    }

    fn on_ack(&mut self, a: &Ack) {
        if !self.w.ack_opens(a) {
            return;
        }
        if self.w.slow_start() {
            self.w.cwnd += a.bytes;
            return;
        }
        let mss = self.w.mss as f64;
        self.w.grow(if self.w.cwnd < LEGACY_WINDOW * self.w.mss {
            a.bytes as f64 * mss / self.w.cwnd as f64
        } else {
            A * a.bytes as f64
        });
    }

    fn on_loss(&mut self, l: &Loss) {
        if !self.w.loss_opens(l) {
            return;
        }
        let cut = if self.w.cwnd < LEGACY_WINDOW * self.w.mss {
            self.w.cwnd / 2
        } else {
            (self.w.cwnd as f64 * (1.0 - B)) as u64
        };
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
    fn one_percent_per_ack_and_an_eighth_off_per_loss() {
        let mut s = Scalable::new(&cfg());
        for i in 0..190 {
            s.on_ack(&ack(i, 10, 10));
        }
        assert_eq!(s.cwnd(), 200 * MSS);
        s.on_loss(&loss(500, 20, 15, 600));
        assert_eq!(s.cwnd(), 175 * MSS, "−1/8");
        for i in 0..100 {
            s.on_ack(&ack(1000 + i, 40, 10));
        }
        assert_eq!(s.cwnd(), 176 * MSS, "100 acked packets add one");
        s.on_timeout(ms(50), 1);
        assert_eq!(s.cwnd(), 2 * MSS);
        // Below the legacy window a loss halves, as Reno.
        let mut r = Scalable::new(&cfg());
        r.on_loss(&loss(1, 20, 15, 10));
        assert_eq!(r.cwnd(), 5 * MSS);
    }
}
