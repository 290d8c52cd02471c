//! Queue disciplines of a link: drop-tail (the default; the limits live in
//! [`crate::link::LinkConfig`]), RED (Floyd & Jacobson 1993) and CoDel (RFC 8289).
//!
//! A link serialises packets first-in first-out at a fixed rate, so the moment a packet will
//! leave the queue is known when it arrives. CoDel's dequeue-time decision is therefore
//! taken at arrival, with the clock set to the packet's departure time; packets are examined
//! in departure order, as a real CoDel examines them. One simplification: CoDel's
//! "queue holds less than one MTU" escape is judged on the sojourn time only.

use crate::loss::chance;
use core::time::Duration;
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

/// Which active queue management a link runs on top of its drop-tail limits.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Aqm {
    /// Drop-tail only.
    #[default]
    DropTail,
    /// Random Early Detection on the average queue length, in packets.
    Red {
        /// Below this average nothing is dropped.
        min_th: f64,
        /// At or above this average every arrival is dropped.
        max_th: f64,
        /// Drop probability as the average reaches `max_th`.
        #[serde(default = "red_max_p")]
        max_p: f64,
        /// Weight of the newest sample in the average.
        #[serde(default = "red_w_q")]
        w_q: f64,
    },
    /// Controlled Delay: drops at dequeue while the sojourn time stays above `target` for
    /// longer than `interval`, ever faster (interval / √count).
    Codel {
        /// Acceptable standing queue delay, µs (RFC 8289 default 5 ms).
        #[serde(default = "codel_target")]
        target_us: u64,
        /// Sliding window over which the minimum delay is judged, µs (default 100 ms).
        #[serde(default = "codel_interval")]
        interval_us: u64,
    },
}

fn red_max_p() -> f64 {
    0.1
}
fn red_w_q() -> f64 {
    0.002
}
fn codel_target() -> u64 {
    5_000
}
fn codel_interval() -> u64 {
    100_000
}

impl Aqm {
    /// Checks the parameters; names the offending field.
    pub fn check(&self) -> Result<(), String> {
        match *self {
            Aqm::DropTail => Ok(()),
            Aqm::Red {
                min_th,
                max_th,
                max_p,
                w_q,
            } => {
                if !(min_th >= 0.0 && max_th > min_th) {
                    return Err(format!(
                        "min_th ({min_th}) must be ≥ 0 and below max_th ({max_th})"
                    ));
                }
                if !(0.0..=1.0).contains(&max_p) {
                    return Err(format!("max_p {max_p} is not a probability (0..=1)"));
                }
                if !(w_q > 0.0 && w_q <= 1.0) {
                    return Err(format!("w_q {w_q} must be in (0, 1]"));
                }
                Ok(())
            }
            Aqm::Codel {
                target_us,
                interval_us,
            } => {
                if target_us == 0 || interval_us <= target_us {
                    return Err(format!(
                        "target_us ({target_us}) must be positive and below interval_us ({interval_us})"
                    ));
                }
                Ok(())
            }
        }
    }
}

/// The running state of a queue discipline.
#[derive(Clone, Debug)]
pub struct AqmState {
    aqm: Aqm,
    // RED.
    avg: f64,
    since_drop: u64,
    idle_since_ns: Option<u64>,
    // CoDel (times in µs).
    first_above: Option<u64>,
    dropping: bool,
    drop_next: u64,
    count: u64,
    last_count: u64,
}

impl AqmState {
    /// Fresh state for `aqm`.
    pub fn new(aqm: Aqm) -> Self {
        AqmState {
            aqm,
            avg: 0.0,
            since_drop: 0,
            idle_since_ns: None,
            first_above: None,
            dropping: false,
            drop_next: 0,
            count: 0,
            last_count: 0,
        }
    }

    /// Called on arrival with the queue length (packets, before this one) and the time a
    /// typical packet takes to serialise; true = drop the arrival (RED).
    pub fn on_arrival(
        &mut self,
        now_ns: u64,
        queue_len: usize,
        packet_time_ns: u64,
        rng: &mut ChaCha8Rng,
    ) -> bool {
        let Aqm::Red {
            min_th,
            max_th,
            max_p,
            w_q,
        } = self.aqm
        else {
            return false;
        };
        if queue_len == 0 {
            // The queue was idle: age the average as if `m` small packets had gone by.
            let idle = self.idle_since_ns.unwrap_or(now_ns);
            let m = now_ns.saturating_sub(idle) / packet_time_ns.max(1);
            self.avg *= (1.0 - w_q).powf(m as f64);
        }
        self.avg = (1.0 - w_q) * self.avg + w_q * queue_len as f64;
        self.idle_since_ns = None;
        if self.avg < min_th {
            self.since_drop = 0;
            return false;
        }
        if self.avg >= max_th {
            self.since_drop = 0;
            return true;
        }
        self.since_drop += 1;
        let pb = max_p * (self.avg - min_th) / (max_th - min_th);
        let denom = 1.0 - self.since_drop as f64 * pb;
        let pa = if denom <= 0.0 { 1.0 } else { pb / denom };
        if chance(rng, pa) {
            self.since_drop = 0;
            true
        } else {
            false
        }
    }

    /// Tells RED when the queue went empty (for the idle-time ageing of its average).
    pub fn on_empty(&mut self, at_ns: u64) {
        if self.idle_since_ns.is_none() {
            self.idle_since_ns = Some(at_ns);
        }
    }

    /// Called for each packet, in departure order, at its departure time with the time it
    /// waited; true = drop it at the head instead of sending it (CoDel).
    pub fn on_departure(&mut self, now_us: u64, sojourn: Duration) -> bool {
        let Aqm::Codel {
            target_us,
            interval_us,
        } = self.aqm
        else {
            return false;
        };
        let control_law =
            |t: u64, count: u64| t + (interval_us as f64 / (count as f64).sqrt()) as u64;
        let mut ok_to_drop = false;
        if (sojourn.as_micros() as u64) < target_us {
            self.first_above = None;
        } else {
            match self.first_above {
                None => self.first_above = Some(now_us + interval_us),
                Some(t) if now_us >= t => ok_to_drop = true,
                Some(_) => {}
            }
        }
        if self.dropping {
            if !ok_to_drop {
                self.dropping = false;
                return false;
            }
            if now_us >= self.drop_next {
                self.count += 1;
                self.drop_next = control_law(self.drop_next, self.count);
                return true;
            }
            return false;
        }
        if ok_to_drop {
            self.dropping = true;
            let delta = self.count.saturating_sub(self.last_count);
            self.count = if delta > 1 && now_us.saturating_sub(self.drop_next) < 16 * interval_us {
                delta
            } else {
                1
            };
            self.drop_next = control_law(now_us, self.count);
            self.last_count = self.count;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::SeedableRng;

    #[test]
    fn red_never_drops_below_min_and_always_above_max() {
        let red = Aqm::Red {
            min_th: 5.0,
            max_th: 15.0,
            max_p: 0.1,
            w_q: 1.0,
        };
        let mut s = AqmState::new(red);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for _ in 0..1000 {
            assert!(!s.on_arrival(0, 4, 1000, &mut rng));
        }
        for _ in 0..1000 {
            assert!(s.on_arrival(0, 15, 1000, &mut rng));
        }
        // In between, some but not all.
        let drops = (0..10_000)
            .filter(|_| s.on_arrival(0, 10, 1000, &mut rng))
            .count();
        assert!(drops > 100 && drops < 5000, "{drops}");
    }

    #[test]
    fn codel_leaves_a_short_queue_alone_and_drops_a_standing_one_ever_faster() {
        let mut s = AqmState::new(Aqm::Codel {
            target_us: 5_000,
            interval_us: 100_000,
        });
        // 4 ms of queueing delay: below target, never a drop.
        for t in 0..10_000u64 {
            assert!(!s.on_departure(t * 100, Duration::from_millis(4)));
        }
        // A standing 20 ms queue: the first drop comes one interval after it appeared,
        // then drops come closer together (interval / √count).
        let start = 2_000_000u64;
        let drops: Vec<u64> = (0..20_000u64)
            .map(|i| start + i * 100)
            .filter(|&t| s.on_departure(t, Duration::from_millis(20)))
            .collect();
        assert_eq!(drops[0], start + 100_000);
        assert!(drops.len() > 5);
        let gaps: Vec<u64> = drops.windows(2).map(|w| w[1] - w[0]).collect();
        // Non-increasing, up to the 100 µs step of the departures.
        assert!(gaps.windows(2).all(|g| g[1] <= g[0] + 100), "{gaps:?}");
        assert!(gaps[0] <= 100_000 && *gaps.last().unwrap() < 50_000);
        // The queue drains: dropping stops.
        assert!(!s.on_departure(start + 3_000_000, Duration::from_millis(1)));
        assert!(!s.on_departure(start + 3_000_100, Duration::from_millis(20)));
    }

    #[test]
    fn bad_parameters_are_named() {
        let e = Aqm::Red {
            min_th: 10.0,
            max_th: 5.0,
            max_p: 0.1,
            w_q: 0.002,
        }
        .check()
        .unwrap_err();
        assert!(e.contains("min_th"), "{e}");
        let e = Aqm::Codel {
            target_us: 0,
            interval_us: 100,
        }
        .check()
        .unwrap_err();
        assert!(e.contains("target_us"), "{e}");
    }
}
