//! A path's loss estimate and the redundancy it calls for (CTCP, Algorithm 1).
//!
//! Every packet a path sends takes the path's next *sequence number* (`seqno_nxt`, counted
//! per path, unrelated to the data it carries). The receiver acknowledges every packet it
//! gets, naming its sequence number. As in the paper, an acknowledgement of `ack_seqno` at
//! or above the oldest unresolved number `seqno_una` declares the packets between them
//! lost (`losses = ack_seqno − seqno_una`) and resolves them all (`seqno_una ←
//! ack_seqno + 1`); one below it (a late or duplicated acknowledgement) changes nothing.
//! The estimates are then folded by [`ctp_cc::ctcp::LossRates`] (shared with the `ctcp`
//! congestion controller, so both read the same equations):
//!
//! ```text
//! p         ← p·(1−μ)^(losses+1)      + 1 − (1−μ)^losses        short term (μ)
//! p_long    ← p_long·(1−ν)^(losses+1) + 1 − (1−ν)^losses        long term (ν < μ)
//! p_stdlong ← p_stdlong·(1−ν) + ν·|p − p_long|                  their deviation
//! ```
//!
//! **Redundancy.** TCP/NC sends `R ≈ 1/(1−p)` coded packets per source symbol so that, in
//! expectation, every symbol arrives; CTCP's scheduler sends from a block until
//! `(1−p)·(packets in flight) ≥ dofs missing`, which is the same `R`. Here
//! `R = 1 / (1 − p̂)` with `p̂ = p_long` (corrected for its start at 0: divided by the
//! weight of the outcomes so far, `1 − (1−ν)^n`), bounded to `[1, max_redundancy]` (default
//! [`DEFAULT_MAX_REDUNDANCY`] = 2, i.e. `p̂` capped at ½). Deviations, and why:
//!
//! - `p_long`, not the paper's `p`: between two scattered losses the short-term `p` decays
//!   to nearly 0 (at 1 % loss it spends most of its time below 0.3 %), and a block sized by
//!   it would wait a round trip for its last symbol about every other time; and two losses
//!   close together lift it to several times the rate. Sizing by `max(p, p_long)` (this
//!   module's first rule), or by `p` during a surge (`p > p_long + p_stdlong`: at 1 %
//!   random loss `p` crosses it all the time), gave every open block repairs for those
//!   swings: through the in-memory pair (60 ms, loss each way), repairs per segment at 1 /
//!   5 / 20 % loss were 8.1 / 17 / 57 % with the surge rule and 4.6 / 11 / 30 % with
//!   `p_long`. A real change of the loss rate reaches `p_long` within about a thousand
//!   packets (at 200 Mb/s, one 60 ms round trip), and meanwhile the receiver's degrees of
//!   freedom ask for what is missing. The surge still drives the token controller.
//! - The cap: above 50 % loss a path carries less than it costs; doubling every block is
//!   the most this module asks, and the scheduler's feedback (the receiver's dofs for the
//!   current block) repairs what the cap leaves short.
//!
//! What the acknowledgements measure is the loss of the packet *or of its acknowledgement*:
//! a lost ACK counts its packet lost, as in the paper. Reordering beyond one packet counts
//! as loss too (the paper's rule has no reordering window). A timeout resolves everything
//! sent ([`LossEstimator::on_timeout`]: `seqno_una ← seqno_nxt`, Algorithm 2) and resets
//! the estimates to their defaults (0), as the paper does after a timeout.

use ctp_cc::ctcp::{LossRates, LONG_GAIN, SHORT_GAIN};

/// Default bound on the redundancy: at most two coded packets per source symbol.
pub const DEFAULT_MAX_REDUNDANCY: f64 = 2.0;
/// Largest bound accepted for the redundancy (a larger one is clamped to it).
pub const MAX_REDUNDANCY_BOUND: f64 = 16.0;

/// The estimator's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossParams {
    /// Gain μ of the short-term estimate `p` (memory about `1/μ` packets).
    pub short_gain: f64,
    /// Gain ν of the long-term estimate `p_long` and of its deviation (ν < μ).
    pub long_gain: f64,
    /// Upper bound on the redundancy `R`, clamped into `[1, MAX_REDUNDANCY_BOUND]`.
    pub max_redundancy: f64,
}

impl Default for LossParams {
    fn default() -> Self {
        LossParams {
            short_gain: SHORT_GAIN,
            long_gain: LONG_GAIN,
            max_redundancy: DEFAULT_MAX_REDUNDANCY,
        }
    }
}

/// What an acknowledgement did to the estimate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckOutcome {
    /// It resolved `losses` lost packets before it and itself.
    Counted {
        /// Packets between the oldest unresolved one and the acknowledged one.
        losses: u64,
    },
    /// Below the oldest unresolved number (late, duplicated, or from before a timeout):
    /// ignored.
    Stale,
    /// For a number never sent: malformed, ignored and counted.
    NeverSent,
}

/// One path's loss estimate: sequence numbers, the estimates, the redundancy.
#[derive(Clone, Debug)]
pub struct LossEstimator {
    rates: LossRates,
    seqno_una: u64,
    seqno_nxt: u64,
    max_redundancy: f64,
    losses: u64,
    acks: u64,
    stale: u64,
    never_sent: u64,
}

impl Default for LossEstimator {
    fn default() -> Self {
        LossEstimator::new(LossParams::default())
    }
}

impl LossEstimator {
    /// An estimator with nothing sent and every estimate at 0.
    pub fn new(params: LossParams) -> Self {
        let max_redundancy = if params.max_redundancy.is_nan() {
            DEFAULT_MAX_REDUNDANCY
        } else {
            params.max_redundancy.clamp(1.0, MAX_REDUNDANCY_BOUND)
        };
        LossEstimator {
            rates: LossRates::new(params.short_gain, params.long_gain),
            seqno_una: 0,
            seqno_nxt: 0,
            max_redundancy,
            losses: 0,
            acks: 0,
            stale: 0,
            never_sent: 0,
        }
    }

    /// Takes the next sequence number for a packet about to leave.
    pub fn send(&mut self) -> u64 {
        let seqno = self.seqno_nxt;
        self.seqno_nxt = self.seqno_nxt.saturating_add(1);
        seqno
    }

    /// The receiver acknowledged the packet numbered `ack_seqno`.
    pub fn on_ack(&mut self, ack_seqno: u64) -> AckOutcome {
        if ack_seqno >= self.seqno_nxt {
            self.never_sent += 1;
            return AckOutcome::NeverSent;
        }
        if ack_seqno < self.seqno_una {
            self.stale += 1;
            return AckOutcome::Stale;
        }
        let losses = ack_seqno - self.seqno_una;
        self.rates.record(losses);
        self.seqno_una = ack_seqno + 1;
        self.losses += losses;
        self.acks += 1;
        AckOutcome::Counted { losses }
    }

    /// A timeout: everything sent is resolved, the estimates go back to their defaults.
    pub fn on_timeout(&mut self) {
        self.seqno_una = self.seqno_nxt;
        self.rates.reset();
    }

    /// The estimates (`p`, `p_long`, `p_stdlong`).
    pub fn rates(&self) -> &LossRates {
        &self.rates
    }

    /// Short-term loss rate `p`.
    pub fn p(&self) -> f64 {
        self.rates.p()
    }

    /// Long-term loss rate `p_long`.
    pub fn p_long(&self) -> f64 {
        self.rates.p_long()
    }

    /// Long-term deviation `p_stdlong`.
    pub fn p_stdlong(&self) -> f64 {
        self.rates.p_stdlong()
    }

    /// The loss rate the redundancy is sized for: `p_long` (without its start-up bias:
    /// [`LossRates::p_long_unbiased`]), capped so that the redundancy stays within its
    /// bound.
    pub fn planning_loss(&self) -> f64 {
        let cap = 1.0 - 1.0 / self.max_redundancy;
        self.rates.p_long_unbiased().min(cap)
    }

    /// Expected share of this path's packets that arrive, `1 − p̂ = 1/R`: the weight of a
    /// packet in flight when the scheduler counts what a block will receive.
    pub fn expected_delivery(&self) -> f64 {
        1.0 - self.planning_loss()
    }

    /// Redundancy `R = 1/(1 − p̂)`: coded packets to send per source symbol, in
    /// `[1, max_redundancy]`.
    pub fn redundancy(&self) -> f64 {
        (1.0 / self.expected_delivery()).clamp(1.0, self.max_redundancy)
    }

    /// The bound on [`Self::redundancy`].
    pub fn max_redundancy(&self) -> f64 {
        self.max_redundancy
    }

    /// Oldest sequence number not yet acknowledged nor declared lost.
    pub fn seqno_una(&self) -> u64 {
        self.seqno_una
    }

    /// Sequence number the next packet takes.
    pub fn seqno_nxt(&self) -> u64 {
        self.seqno_nxt
    }

    /// Packets sent and not yet resolved.
    pub fn unresolved(&self) -> u64 {
        self.seqno_nxt - self.seqno_una
    }

    /// Packets declared lost so far.
    pub fn losses(&self) -> u64 {
        self.losses
    }

    /// Acknowledgements counted so far.
    pub fn acks(&self) -> u64 {
        self.acks
    }

    /// Acknowledgements ignored as stale, and as naming a number never sent.
    pub fn ignored(&self) -> (u64, u64) {
        (self.stale, self.never_sent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand_chacha::rand_core::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Sends `n` packets through a Bernoulli(`rate`) loss, acknowledging each one that
    /// arrives; returns the averages of `p`, `p_long` and `R` over the last half.
    fn bernoulli(e: &mut LossEstimator, rate: f64, n: u64, seed: u64) -> (f64, f64, f64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (mut sp, mut sl, mut sr, mut count) = (0.0, 0.0, 0.0, 0.0);
        for i in 0..n {
            let seqno = e.send();
            let lost = (rng.next_u64() as f64 / u64::MAX as f64) < rate;
            if !lost {
                e.on_ack(seqno);
            }
            if i >= n / 2 {
                sp += e.p();
                sl += e.p_long();
                sr += e.redundancy();
                count += 1.0;
            }
        }
        (sp / count, sl / count, sr / count)
    }

    #[test]
    fn estimates_converge_to_an_injected_loss_rate_and_redundancy_follows() {
        for (rate, seed) in [(0.0, 1), (0.01, 2), (0.05, 3), (0.20, 4)] {
            let mut e = LossEstimator::default();
            let (p, p_long, r) = bernoulli(&mut e, rate, 200_000, seed);
            let measured = e.losses() as f64 / (e.seqno_una() as f64);
            eprintln!(
                "loss {rate}: p {p:.4} p_long {p_long:.4} (now {:.4}) stdlong {:.4} R {r:.4} (measured {measured:.4})",
                e.p_long(),
                e.p_stdlong()
            );
            if rate == 0.0 {
                assert_eq!((p, p_long, r), (0.0, 0.0, 1.0));
                assert_eq!(e.p_stdlong(), 0.0);
                continue;
            }
            let near = |x: f64, tol: f64| (x - rate).abs() <= tol * rate;
            assert!(near(p, 0.15), "p {p} for {rate}");
            assert!(near(p_long, 0.10), "mean p_long {p_long} for {rate}");
            assert!(
                near(e.p_long(), 0.5),
                "final p_long {} for {rate}",
                e.p_long()
            );
            // R is sized for p_long (or p in a surge): near 1/(1−rate).
            let ideal = 1.0 / (1.0 - rate);
            assert!(
                r >= ideal * 0.995 && r <= ideal * (1.0 + rate),
                "R {r} for {rate}"
            );
            // The deviation of the short-term estimate is of the order of the rate itself.
            assert!(e.p_stdlong() > 0.0 && e.p_stdlong() < 2.0 * rate);
        }
    }

    #[test]
    fn a_burst_lifts_p_at_once_and_p_long_slowly() {
        let mut e = LossEstimator::default();
        bernoulli(&mut e, 0.01, 20_000, 7);
        let (p0, long0, r0) = (e.p(), e.p_long(), e.redundancy());
        // Twenty packets lost in a row, then one arrives.
        for _ in 0..20 {
            e.send();
        }
        let seqno = e.send();
        assert_eq!(e.on_ack(seqno), AckOutcome::Counted { losses: 20 });
        assert!(e.p() > 0.4 && e.p() > p0 + 0.35, "p {p0} → {}", e.p());
        assert!(
            e.p_long() < long0 + 0.025,
            "p_long {long0} → {}",
            e.p_long()
        );
        assert!(e.rates().surge());
        // The redundancy follows p_long: a burst moves it a little, not every block's
        // plan (the receiver's dofs ask for what the burst took).
        let r = e.redundancy();
        assert!(r > r0 && r < r0 + 0.05, "R {r0} → {r}");
        // The burst passes: p decays within a few hundred packets, p_long keeps its trace.
        for _ in 0..300 {
            let s = e.send();
            e.on_ack(s);
        }
        assert!(e.p() < 0.01, "p {}", e.p());
        assert!(e.p_long() > long0 * 0.9, "p_long {}", e.p_long());
    }

    #[test]
    fn redundancy_is_bounded() {
        let mut e = LossEstimator::new(LossParams {
            max_redundancy: 1.5,
            ..LossParams::default()
        });
        for _ in 0..1000 {
            e.send();
        }
        let s = e.send();
        e.on_ack(s);
        assert!(e.p() > 0.99);
        assert_eq!(e.redundancy(), 1.5);
        assert!((e.expected_delivery() - 1.0 / 1.5).abs() < 1e-12);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let e = LossEstimator::new(LossParams {
                max_redundancy: bad,
                ..LossParams::default()
            });
            assert!(
                (1.0..=MAX_REDUNDANCY_BOUND).contains(&e.max_redundancy()),
                "{bad}"
            );
            assert_eq!(e.redundancy(), 1.0);
        }
    }

    #[test]
    fn odd_acknowledgements_are_counted_and_change_nothing() {
        let mut e = LossEstimator::default();
        assert_eq!(e.on_ack(0), AckOutcome::NeverSent);
        assert_eq!((e.p(), e.redundancy(), e.unresolved()), (0.0, 1.0, 0));
        for _ in 0..5 {
            e.send();
        }
        assert_eq!(e.on_ack(2), AckOutcome::Counted { losses: 2 });
        assert_eq!(e.on_ack(2), AckOutcome::Stale);
        assert_eq!(e.on_ack(1), AckOutcome::Stale);
        assert_eq!(e.on_ack(9), AckOutcome::NeverSent);
        assert_eq!(e.ignored(), (2, 2));
        assert_eq!((e.seqno_una(), e.unresolved()), (3, 2));
        // A timeout resolves the rest and forgets the estimates.
        e.on_timeout();
        assert_eq!((e.unresolved(), e.p(), e.p_long()), (0, 0.0, 0.0));
        assert_eq!(e.on_ack(4), AckOutcome::Stale, "sent before the timeout");
    }

    proptest! {
        #[test]
        fn no_input_makes_an_estimate_leave_its_range(
            ops in proptest::collection::vec((0u8..4, any::<u64>()), 0..200),
            short_gain in proptest::num::f64::ANY,
            long_gain in proptest::num::f64::ANY,
            max_redundancy in proptest::num::f64::ANY,
        ) {
            let mut e = LossEstimator::new(LossParams { short_gain, long_gain, max_redundancy });
            for (op, x) in ops {
                match op {
                    0 => { e.send(); }
                    1 => { e.on_ack(x); }
                    2 => { let n = e.seqno_nxt(); e.on_ack(n.saturating_sub(1 + x % 8)); }
                    _ => e.on_timeout(),
                }
                for v in [e.p(), e.p_long(), e.p_stdlong(), e.planning_loss()] {
                    prop_assert!((0.0..=1.0).contains(&v), "{v}");
                }
                let r = e.redundancy();
                prop_assert!(r.is_finite() && r >= 1.0 && r <= e.max_redundancy());
                prop_assert!(e.expected_delivery() > 0.0 && e.expected_delivery() <= 1.0);
                prop_assert!(e.seqno_una() <= e.seqno_nxt());
            }
        }
    }
}
