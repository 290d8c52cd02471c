//! One direction of a link: serialisation at a bandwidth, a bounded drop-tail queue,
//! propagation delay, jitter and the impairments (loss, reordering, duplication,
//! corruption, outages).

use crate::aqm::{Aqm, AqmState};
use crate::loss::{chance, uniform, LossModel, LossState};
use core::time::Duration;
use ctp_proto::Instant;
use rand_chacha::ChaCha8Rng;
use rand_core::Rng;
use std::collections::VecDeque;

/// Static description of one link direction.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    /// Bits per second; 0 means infinitely fast (no serialisation delay, no queue).
    pub bandwidth_bps: u64,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Extra delay drawn uniformly from `[0, jitter]` for every packet.
    pub jitter: Duration,
    /// Queue limit in packets, counting the one being serialised; 0 = unlimited.
    pub queue_packets: usize,
    /// Queue limit in bytes; 0 = unlimited.
    pub queue_bytes: usize,
    /// Active queue management on top of the drop-tail limits.
    pub aqm: Aqm,
    /// Random loss on the wire (after the queue).
    pub loss: LossModel,
    /// Probability a packet is held back by an extra random delay (reordering).
    pub reorder: f64,
    /// Largest extra delay of a reordered packet.
    pub reorder_extra: Duration,
    /// Probability a packet is delivered twice.
    pub duplicate: f64,
    /// Probability one bit of a packet is flipped.
    pub corrupt: f64,
    /// Outages: `[from, until)` intervals in which every packet offered is dropped.
    pub down: Vec<(Instant, Instant)>,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            bandwidth_bps: 0,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            queue_packets: 0,
            queue_bytes: 0,
            aqm: Aqm::DropTail,
            loss: LossModel::None,
            reorder: 0.0,
            reorder_extra: Duration::from_millis(1),
            duplicate: 0.0,
            corrupt: 0.0,
            down: Vec::new(),
        }
    }
}

/// Why a link dropped a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropKind {
    /// The drop-tail queue was full.
    Queue,
    /// The queue discipline (RED, CoDel) chose it.
    Aqm,
    /// The loss model chose it.
    Loss,
    /// The link was down.
    Down,
}

/// Whether the copies of a packet a link carried arrive as they were sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Carried {
    /// As sent.
    Intact,
    /// With one bit flipped (every copy, when duplicated: corruption comes first).
    Corrupted,
}

/// Counters of one link direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LinkStats {
    /// Packets offered to the link.
    pub offered: u64,
    /// Packets put on the wire (after queue and loss; duplicates count twice).
    pub carried: u64,
    /// Bytes put on the wire.
    pub carried_bytes: u64,
    /// Dropped by the full queue.
    pub queue_drops: u64,
    /// Dropped by the queue discipline (RED at arrival, CoDel at departure).
    pub aqm_drops: u64,
    /// Dropped by the loss model.
    pub loss_drops: u64,
    /// Dropped while the link was down.
    pub down_drops: u64,
    /// Duplicated.
    pub duplicated: u64,
    /// Corrupted (one bit flipped).
    pub corrupted: u64,
    /// Given extra reordering delay.
    pub reordered: u64,
    /// Most packets ever queued at once (including the one being serialised).
    pub max_queue_packets: u64,
    /// Most bytes ever queued at once.
    pub max_queue_bytes: u64,
}

/// One link direction with its queue and its own random numbers.
pub struct Link {
    cfg: LinkConfig,
    rng: ChaCha8Rng,
    loss: LossState,
    aqm: AqmState,
    /// When the wire is free again, nanoseconds (kept exact so that rounding arrivals to
    /// the clock's microseconds never changes the rate).
    busy_until_ns: u64,
    /// Departure time (ns) and size of each packet in the queue.
    queue: VecDeque<(u64, usize)>,
    queued_bytes: usize,
    /// Counters.
    pub stats: LinkStats,
}

impl Link {
    /// A link with its configuration and its own random stream.
    pub fn new(cfg: LinkConfig, rng: ChaCha8Rng) -> Self {
        let loss = LossState::new(cfg.loss);
        let aqm = AqmState::new(cfg.aqm);
        Link {
            cfg,
            rng,
            loss,
            aqm,
            busy_until_ns: 0,
            queue: VecDeque::new(),
            queued_bytes: 0,
            stats: LinkStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    /// Packets in the queue at `now` (including the one being serialised).
    pub fn queue_len(&mut self, now: Instant) -> usize {
        self.drain(now);
        self.queue.len()
    }

    /// When the packet at the head of the queue will have left it, if any is queued.
    pub fn next_departure(&self) -> Option<Instant> {
        self.queue
            .front()
            .map(|&(ns, _)| Instant::from_micros(ns.div_ceil(1000)))
    }

    fn drain(&mut self, now: Instant) {
        let now_ns = now.as_micros().saturating_mul(1000);
        while let Some(&(finish, size)) = self.queue.front() {
            if finish > now_ns {
                break;
            }
            self.queue.pop_front();
            self.queued_bytes -= size;
            if self.queue.is_empty() {
                self.aqm.on_empty(finish);
            }
        }
    }

    fn serialisation_ns(&self, size: usize) -> u64 {
        if self.cfg.bandwidth_bps == 0 {
            return 0;
        }
        // In 64 bits while the product fits (any datagram; a 128-bit division is several
        // times slower and runs twice per packet), else in 128.
        match (size as u64).checked_mul(8_000_000_000) {
            Some(bits_ns) => bits_ns.div_ceil(self.cfg.bandwidth_bps),
            None => {
                let ns = (size as u128 * 8_000_000_000).div_ceil(self.cfg.bandwidth_bps as u128);
                ns.min(u64::MAX as u128) as u64
            }
        }
    }

    /// Offers a packet at `now`. On success pushes one or two `(arrival, bytes)` onto `out`
    /// (two when duplicated) and says whether they were corrupted on the way; otherwise
    /// says why it was dropped and hands the bytes back.
    pub fn send(
        &mut self,
        now: Instant,
        mut bytes: Vec<u8>,
        out: &mut Vec<(Instant, Vec<u8>)>,
    ) -> Result<Carried, (DropKind, Vec<u8>)> {
        self.stats.offered += 1;
        if self.cfg.down.iter().any(|&(a, b)| a <= now && now < b) {
            self.stats.down_drops += 1;
            return Err((DropKind::Down, bytes));
        }
        let size = bytes.len();
        let finish = if self.cfg.bandwidth_bps == 0 {
            now
        } else {
            self.drain(now);
            let full_p = self.cfg.queue_packets > 0 && self.queue.len() >= self.cfg.queue_packets;
            let full_b =
                self.cfg.queue_bytes > 0 && self.queued_bytes + size > self.cfg.queue_bytes;
            if full_p || full_b {
                self.stats.queue_drops += 1;
                return Err((DropKind::Queue, bytes));
            }
            let now_ns = now.as_micros().saturating_mul(1000);
            let ser = self.serialisation_ns(size);
            if self
                .aqm
                .on_arrival(now_ns, self.queue.len(), ser, &mut self.rng)
            {
                self.stats.aqm_drops += 1;
                return Err((DropKind::Aqm, bytes));
            }
            let start = self.busy_until_ns.max(now_ns);
            let sojourn = Duration::from_nanos(start - now_ns);
            if self.aqm.on_departure(start / 1000, sojourn) {
                // Dropped at the head: it held its place in the queue until then.
                self.queue.push_back((start, size));
                self.queued_bytes += size;
                self.stats.aqm_drops += 1;
                return Err((DropKind::Aqm, bytes));
            }
            let finish = start + ser;
            self.busy_until_ns = finish;
            self.queue.push_back((finish, size));
            self.queued_bytes += size;
            self.stats.max_queue_packets =
                self.stats.max_queue_packets.max(self.queue.len() as u64);
            self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(self.queued_bytes as u64);
            // Arrivals are rounded up to the clock's microsecond; the wire keeps nanoseconds.
            Instant::from_micros(finish.div_ceil(1000))
        };
        if self.loss.lose(&mut self.rng) {
            self.stats.loss_drops += 1;
            return Err((DropKind::Loss, bytes));
        }
        let mut carried = Carried::Intact;
        if !bytes.is_empty() && chance(&mut self.rng, self.cfg.corrupt) {
            let i = (self.rng.next_u64() % size as u64) as usize;
            bytes[i] ^= 1 << (self.rng.next_u64() % 8);
            self.stats.corrupted += 1;
            carried = Carried::Corrupted;
        }
        let copies = if chance(&mut self.rng, self.cfg.duplicate) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        for c in 0..copies {
            let mut at = finish + self.cfg.delay;
            if !self.cfg.jitter.is_zero() {
                let j = uniform(&mut self.rng) * self.cfg.jitter.as_micros() as f64;
                at += Duration::from_micros(j as u64);
            }
            if chance(&mut self.rng, self.cfg.reorder) {
                self.stats.reordered += 1;
                let j = uniform(&mut self.rng) * self.cfg.reorder_extra.as_micros() as f64;
                at += Duration::from_micros(j as u64);
            }
            self.stats.carried += 1;
            self.stats.carried_bytes += size as u64;
            if c + 1 == copies {
                out.push((at, std::mem::take(&mut bytes)));
            } else {
                out.push((at, bytes.clone()));
            }
        }
        Ok(carried)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::SeedableRng;

    fn link(bandwidth_bps: u64) -> Link {
        let cfg = LinkConfig {
            bandwidth_bps,
            ..LinkConfig::default()
        };
        Link::new(cfg, ChaCha8Rng::seed_from_u64(1))
    }

    #[test]
    fn serialisation_time_is_exact_and_rounds_up_in_either_width() {
        assert_eq!(link(10_000_000).serialisation_ns(1500), 1_200_000);
        // 1 byte at 3 b/s: 8/3 s, rounded up to the nanosecond.
        assert_eq!(link(3).serialisation_ns(1), 2_666_666_667);
        // A size whose bit-nanoseconds overflow 64 bits takes the 128-bit path.
        let huge = usize::MAX / 2;
        let expect = (huge as u128 * 8_000_000_000).div_ceil(u64::MAX as u128);
        assert_eq!(u128::from(link(u64::MAX).serialisation_ns(huge)), expect);
        assert_eq!(link(1).serialisation_ns(huge), u64::MAX, "saturates");
    }
}
