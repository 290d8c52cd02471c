//! A group controller (after GTP, Wu & Chien, "GTP: group transport protocol for lambda-
//! grids", 2004): one rate budget shared by a set of connections, assigned by the receiver.
//!
//! Design (sans-IO, no locks): the party that owns the budget — the receiving runtime, or
//! the simulator — keeps a [`GroupBudget`]: the total rate, and each member's demand. It
//! computes max-min fair shares ([`GroupBudget::share`]) whenever membership or demands
//! change, and delivers each member's share to that connection's controller as a
//! [`RateMessage`] through `on_custom` (locally, or over whatever control channel the
//! application has; ctp puts no new frame on the wire for it). The [`Group`] controller
//! paces at its assigned share; between assignments it protects the network on its own:
//! a loss event (once per round trip) cuts the rate by 1/8, a timeout halves it, and ACKs
//! regrow it toward the share by at most the acknowledged bytes per round trip
//! (slow-start-like), never above it. The window is twice the rate times the RTT.

use super::{Ack, Config, CongestionControl, Loss, RateMessage};
use crate::time::Instant;

/// A member of a group budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemberId(pub usize);

/// The shared budget, owned by the runtime or simulator (not by any connection).
#[derive(Clone, Debug, Default)]
pub struct GroupBudget {
    total: u64,
    /// Demand per member (bytes/s; `u64::MAX` = as much as it can get); `None` once left.
    demands: Vec<Option<u64>>,
}

impl GroupBudget {
    /// A budget of `total` bytes per second.
    pub fn new(total: u64) -> Self {
        GroupBudget {
            total,
            demands: Vec::new(),
        }
    }

    /// Changes the total.
    pub fn set_total(&mut self, total: u64) {
        self.total = total;
    }

    /// Adds a member with unlimited demand.
    pub fn join(&mut self) -> MemberId {
        self.demands.push(Some(u64::MAX));
        MemberId(self.demands.len() - 1)
    }

    /// Removes a member; its share goes to the others.
    pub fn leave(&mut self, m: MemberId) {
        if let Some(d) = self.demands.get_mut(m.0) {
            *d = None;
        }
    }

    /// Sets a member's demand (bytes per second), e.g. the rate its receiver measured.
    pub fn set_demand(&mut self, m: MemberId, bytes_per_s: u64) {
        if let Some(Some(d)) = self.demands.get_mut(m.0) {
            *d = bytes_per_s;
        }
    }

    /// The max-min fair share of `m` (0 for an unknown or departed member).
    pub fn share(&self, m: MemberId) -> u64 {
        let Some(Some(demand)) = self.demands.get(m.0).copied() else {
            return 0;
        };
        // Water-filling: the level L with Σ min(d_i, L) = total.
        let mut active: Vec<u64> = self.demands.iter().flatten().copied().collect();
        active.sort_unstable();
        let mut left = self.total;
        let mut n = active.len() as u64;
        for d in active {
            let fair = left / n.max(1);
            if d >= fair {
                return demand.min(fair);
            }
            left -= d;
            n -= 1;
        }
        demand
    }

    /// The control message carrying `m`'s share, for its controller's `on_custom`.
    pub fn message(&self, m: MemberId) -> [u8; 9] {
        RateMessage(self.share(m)).encode()
    }
}

/// Slowest rate the controller goes down to, bytes per second.
const MIN_RATE: u64 = 1_000;

/// The group member's controller.
#[derive(Debug)]
pub struct Group {
    mss: u64,
    assigned: u64,
    rate: u64,
    srtt_us: u64,
    last_cut: Option<Instant>,
}

impl Group {
    /// Starts at `cfg.rate` until the first assignment.
    pub fn new(cfg: &Config) -> Self {
        let rate = cfg.rate.max(MIN_RATE);
        Group {
            mss: cfg.mss.max(1),
            assigned: rate,
            rate,
            srtt_us: 0,
            last_cut: None,
        }
    }

    /// The share last assigned, bytes per second.
    pub fn assigned(&self) -> u64 {
        self.assigned
    }
}

impl CongestionControl for Group {
    fn name(&self) -> &'static str {
        "group"
    }

    fn on_ack(&mut self, a: &Ack) {
        self.srtt_us = a.srtt_us;
        if self.rate < self.assigned {
            // Regrow by the acknowledged bytes per RTT: rate += bytes / srtt.
            let step = (a.bytes * 1_000_000)
                .checked_div(a.srtt_us)
                .unwrap_or(a.bytes);
            self.rate = (self.rate + step).min(self.assigned);
        }
    }

    fn on_loss(&mut self, l: &Loss) {
        self.srtt_us = l.srtt_us;
        if self.last_cut.is_some_and(|t| l.sent_at <= t) {
            return;
        }
        self.last_cut = Some(l.now);
        self.rate = (self.rate - self.rate / 8).max(MIN_RATE);
    }

    fn on_timeout(&mut self, now: Instant, _backoff: u32) {
        self.last_cut = Some(now);
        self.rate = (self.rate / 2).max(MIN_RATE);
    }

    fn on_custom(&mut self, _now: Instant, msg: &[u8]) {
        if let Some(RateMessage(r)) = RateMessage::decode(msg) {
            self.assigned = r.max(MIN_RATE);
            self.rate = self.assigned;
        }
    }

    fn cwnd(&self) -> u64 {
        if self.srtt_us == 0 {
            return u64::MAX;
        }
        ((self.rate as u128 * self.srtt_us as u128 * 2 / 1_000_000) as u64).max(4 * self.mss)
    }

    fn pacing_rate(&self) -> u64 {
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::*;

    #[test]
    fn the_budget_is_shared_max_min_fair() {
        let mut g = GroupBudget::new(10_000_000);
        let a = g.join();
        let b = g.join();
        let c = g.join();
        g.set_demand(a, 1_000_000);
        assert_eq!(g.share(a), 1_000_000, "a small demand is met");
        assert_eq!(g.share(b), 4_500_000, "the rest is split");
        assert_eq!(g.share(c), 4_500_000);
        g.leave(c);
        assert_eq!((g.share(b), g.share(c)), (9_000_000, 0));
        assert_eq!(g.share(MemberId(99)), 0);
        g.set_total(4_000_000);
        assert_eq!((g.share(a), g.share(b)), (1_000_000, 3_000_000));
    }

    #[test]
    fn the_member_follows_its_assignment_and_backs_off_between_them() {
        let mut budget = GroupBudget::new(8_000_000);
        let me = budget.join();
        let _other = budget.join();
        let mut cc = Group::new(&cfg());
        assert_eq!(cc.pacing_rate(), 1_000_000);
        cc.on_custom(ms(0), &budget.message(me));
        assert_eq!(cc.pacing_rate(), 4_000_000, "half of the budget");
        cc.on_loss(&loss(5, 100, 90, 10));
        cc.on_loss(&loss(6, 101, 90, 10));
        assert_eq!(cc.pacing_rate(), 3_500_000, "−1/8 once per loss event");
        assert_eq!(cc.cwnd(), 700_000, "2 × rate × 100 ms");
        // ACKs regrow toward the share: 1000 bytes per 10 ms RTT = +100 kB/s per ACK.
        for i in 0..3 {
            cc.on_ack(&ack(10 + i, 200, 10));
        }
        assert_eq!(cc.pacing_rate(), 3_800_000);
        for i in 0..10 {
            cc.on_ack(&ack(20 + i, 210, 10));
        }
        assert_eq!(cc.pacing_rate(), 4_000_000, "never above the share");
        cc.on_timeout(ms(300), 1);
        assert_eq!(cc.pacing_rate(), 2_000_000);
        cc.on_custom(ms(400), b"junk");
        assert_eq!(cc.assigned(), 4_000_000);
    }
}
