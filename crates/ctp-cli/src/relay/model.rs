//! The relay's impairment model, one per direction: a bounded drop-tail queue drained at a
//! fixed rate, random loss (Bernoulli or Gilbert–Elliott), propagation delay with jitter,
//! reordering (extra delay for some datagrams) and duplication.
//!
//! Pure and seeded: it decides, for a datagram arriving at `now`, whether it is dropped and
//! when each copy leaves — no sockets, no clock — so tests check it on counts. The bench's
//! IP path emulator ([`crate::bench::emu`]) runs the same model on IP packets.

use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::VecDeque;

/// Random loss.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Loss {
    /// No random loss.
    None,
    /// Each datagram is lost with this probability.
    Bernoulli(f64),
    /// Gilbert–Elliott: `p` good→bad, `r` bad→good per datagram; loss probability `1 - k`
    /// in the good state and `1 - h` in the bad state (netem's convention).
    GilbertElliott {
        /// Good → bad transition probability.
        p: f64,
        /// Bad → good transition probability.
        r: f64,
        /// Delivery probability in the bad state.
        h: f64,
        /// Delivery probability in the good state.
        k: f64,
    },
}

/// Impairments of one direction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Impairments {
    /// One-way propagation delay, microseconds.
    pub delay_us: u64,
    /// Uniform jitter added to the delay, ± microseconds.
    pub jitter_us: u64,
    /// Rate limit in bits per second (`None`: unlimited).
    pub rate_bps: Option<u64>,
    /// Datagrams the queue holds at most (waiting for the rate limit).
    pub queue_limit: usize,
    /// Random loss.
    pub loss: Loss,
    /// Probability that a datagram is held back by up to `reorder_extra_us` more.
    pub reorder: f64,
    /// Largest extra delay of a reordered datagram, microseconds.
    pub reorder_extra_us: u64,
    /// Probability that a datagram is delivered twice.
    pub duplicate: f64,
}

impl Default for Impairments {
    fn default() -> Self {
        Impairments {
            delay_us: 0,
            jitter_us: 0,
            rate_bps: None,
            queue_limit: 1000,
            loss: Loss::None,
            reorder: 0.0,
            reorder_extra_us: 10_000,
            duplicate: 0.0,
        }
    }
}

/// Counters of one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Datagrams received.
    pub in_datagrams: u64,
    /// Bytes received.
    pub in_bytes: u64,
    /// Datagrams forwarded (copies included).
    pub out_datagrams: u64,
    /// Bytes forwarded.
    pub out_bytes: u64,
    /// Dropped by random loss.
    pub dropped_loss: u64,
    /// Dropped because the queue was full.
    pub dropped_queue: u64,
    /// Extra copies sent.
    pub duplicated: u64,
    /// Datagrams given extra delay (reordered).
    pub reordered: u64,
}

/// What happens to one datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Dropped by random loss.
    Lost,
    /// Dropped: the queue was full.
    QueueFull,
    /// Sent at these times (microseconds; two for a duplicate).
    Forward(Vec<u64>),
}

/// The model of one direction.
#[derive(Debug)]
pub struct Direction {
    cfg: Impairments,
    rng: ChaCha8Rng,
    /// When the rate-limited link is free again, microseconds.
    busy_until: u64,
    /// Departure times of datagrams still queued (not yet serialised).
    queued: VecDeque<u64>,
    bad_state: bool,
    /// Counters so far.
    pub counters: Counters,
}

impl Direction {
    /// A direction with its impairments and random seed.
    pub fn new(cfg: Impairments, seed: u64) -> Self {
        Direction {
            cfg,
            rng: ChaCha8Rng::seed_from_u64(seed),
            busy_until: 0,
            queued: VecDeque::new(),
            bad_state: false,
            counters: Counters::default(),
        }
    }

    fn uniform(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.uniform() < p
    }

    fn lost(&mut self) -> bool {
        match self.cfg.loss {
            Loss::None => false,
            Loss::Bernoulli(p) => self.chance(p),
            Loss::GilbertElliott { p, r, h, k } => {
                let flip = if self.bad_state { r } else { p };
                if self.chance(flip) {
                    self.bad_state = !self.bad_state;
                }
                let deliver = if self.bad_state { h } else { k };
                !self.chance(deliver)
            }
        }
    }

    /// Decides the fate of a datagram of `len` bytes arriving at `now_us`.
    pub fn admit(&mut self, now_us: u64, len: usize) -> Verdict {
        self.counters.in_datagrams += 1;
        self.counters.in_bytes += len as u64;
        while self.queued.front().is_some_and(|&t| t <= now_us) {
            self.queued.pop_front();
        }
        let depart = match self.cfg.rate_bps {
            Some(rate) if rate > 0 => {
                if self.queued.len() >= self.cfg.queue_limit {
                    self.counters.dropped_queue += 1;
                    return Verdict::QueueFull;
                }
                let start = self.busy_until.max(now_us);
                self.busy_until = start + (len as u64 * 8 * 1_000_000).div_ceil(rate);
                self.queued.push_back(self.busy_until);
                self.busy_until
            }
            _ => now_us,
        };
        if self.lost() {
            self.counters.dropped_loss += 1;
            return Verdict::Lost;
        }
        let mut at = depart + self.cfg.delay_us;
        if self.cfg.jitter_us > 0 {
            let j = (self.uniform() * (2 * self.cfg.jitter_us + 1) as f64) as u64;
            at = (at + j).saturating_sub(self.cfg.jitter_us).max(depart);
        }
        if self.chance(self.cfg.reorder) {
            self.counters.reordered += 1;
            at += 1 + (self.uniform() * self.cfg.reorder_extra_us as f64) as u64;
        }
        let mut times = vec![at];
        if self.chance(self.cfg.duplicate) {
            self.counters.duplicated += 1;
            times.push(at + 1);
        }
        self.counters.out_datagrams += times.len() as u64;
        self.counters.out_bytes += (times.len() * len) as u64;
        Verdict::Forward(times)
    }

    /// Datagrams waiting in the queue at `now_us`.
    #[cfg(test)]
    pub fn queue_len(&mut self, now_us: u64) -> usize {
        while self.queued.front().is_some_and(|&t| t <= now_us) {
            self.queued.pop_front();
        }
        self.queued.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bernoulli_bounds(n: u64, p: f64) -> (u64, u64) {
        let mean = n as f64 * p;
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        ((mean - 5.0 * sd) as u64, (mean + 5.0 * sd) as u64)
    }

    #[test]
    fn bernoulli_loss_drops_about_p() {
        let mut d = Direction::new(
            Impairments {
                loss: Loss::Bernoulli(0.01),
                ..Default::default()
            },
            7,
        );
        let n = 200_000;
        for i in 0..n {
            d.admit(i, 1000);
        }
        let (lo, hi) = bernoulli_bounds(n, 0.01);
        assert!(
            (lo..=hi).contains(&d.counters.dropped_loss),
            "{} not in {lo}..{hi}",
            d.counters.dropped_loss
        );
    }

    #[test]
    fn gilbert_elliott_loses_in_bursts() {
        // Average loss ~ p/(p+r) in the bad state = 1/(1+9) = 10% of the time, all lost there.
        let ge = Loss::GilbertElliott {
            p: 0.01,
            r: 0.09,
            h: 0.0,
            k: 1.0,
        };
        let mut d = Direction::new(
            Impairments {
                loss: ge,
                ..Default::default()
            },
            3,
        );
        let mut lost = Vec::new();
        for i in 0..200_000u64 {
            lost.push(d.admit(i, 100) == Verdict::Lost);
        }
        let total = lost.iter().filter(|&&l| l).count() as f64;
        let bursts = lost.windows(2).filter(|w| w[1] && !w[0]).count() as f64;
        assert!(
            (0.08..0.12).contains(&(total / 200_000.0)),
            "loss rate {}",
            total / 200_000.0
        );
        assert!(
            total / bursts > 5.0,
            "mean burst {} should be ~1/r = 11",
            total / bursts
        );
    }

    #[test]
    fn the_queue_never_exceeds_its_bound_and_the_rate_is_never_exceeded() {
        let cfg = Impairments {
            rate_bps: Some(10_000_000),
            queue_limit: 50,
            ..Default::default()
        };
        let mut d = Direction::new(cfg, 1);
        let mut departures = Vec::new();
        // Offer 100 Mb/s for a while: ten times the rate.
        for i in 0..20_000u64 {
            let now = i * 120; // 1500 B every 120 µs
            if let Verdict::Forward(t) = d.admit(now, 1500) {
                departures.push(t[0]);
            }
            assert!(d.queue_len(now) <= 50);
        }
        assert!(d.counters.dropped_queue > 0);
        // 1500 B at 10 Mb/s = 1200 µs apart at least.
        assert!(departures.windows(2).all(|w| w[1] - w[0] >= 1200));
    }

    #[test]
    fn every_datagram_is_delayed_at_least_the_delay_and_jitter_stays_bounded() {
        let cfg = Impairments {
            delay_us: 30_000,
            jitter_us: 2_000,
            ..Default::default()
        };
        let mut d = Direction::new(cfg, 9);
        for i in 0..10_000u64 {
            let now = i * 100;
            let Verdict::Forward(t) = d.admit(now, 500) else {
                panic!("no loss configured")
            };
            assert!(
                t[0] >= now + 28_000 && t[0] <= now + 32_000,
                "{}",
                t[0] - now
            );
        }
    }

    #[test]
    fn reordering_and_duplication_happen_at_their_rates() {
        let cfg = Impairments {
            reorder: 0.1,
            duplicate: 0.05,
            delay_us: 1000,
            ..Default::default()
        };
        let mut d = Direction::new(cfg, 11);
        let n = 100_000;
        let mut times = Vec::new();
        for i in 0..n {
            if let Verdict::Forward(t) = d.admit(i * 10, 100) {
                times.push(t[0]);
            }
        }
        let (lo, hi) = bernoulli_bounds(n, 0.1);
        assert!((lo..=hi).contains(&d.counters.reordered));
        let (lo, hi) = bernoulli_bounds(n, 0.05);
        assert!((lo..=hi).contains(&d.counters.duplicated));
        assert!(
            times.windows(2).any(|w| w[1] < w[0]),
            "some datagrams overtake others"
        );
        assert_eq!(d.counters.out_datagrams, n + d.counters.duplicated);
    }
}
