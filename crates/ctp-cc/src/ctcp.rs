//! CTCP's token-based congestion control (Kim, ParandehGheibi, Urbina, Médard: "CTCP: Coded
//! TCP using Multiple Paths", Algorithm 2), and the loss-rate estimates of its Algorithm 1
//! that the controller and the coded sender share ([`LossRates`]).
//!
//! A *token* lets the sender transmit one packet (coded or not); the controller's window is
//! `tokens × mss`. Tokens come back when a packet is acknowledged or found lost, so the
//! window is the number of packets the path may hold, as a TCP window is. What differs from
//! a loss-based window is what makes it shrink:
//!
//! - **Slow start**: +1 token per acknowledged packet, until `ss_threshold` (set by a
//!   timeout) — or, a deviation from the paper, until the path shows a queue
//!   (δ > [`BETA`], below): the paper's `ss_threshold` is unbounded until the first
//!   timeout, so without this rule a path would leave slow start only by overflowing its
//!   queue. (Exiting at α instead cost a third of the throughput in the scheduler's model:
//!   unpaced bursts show a short queue long before the path is full.)
//! - **Congestion avoidance**, Vegas-like, once per acknowledged packet:
//!   `δ = 1 − RTT_min / RTT` is the share of the round trip spent queued (RTT the smoothed
//!   round trip, RTT_min the smallest sample). Between [`ALPHA`] and [`BETA`] the tokens
//!   hold. The listing in the paper keeps δ a fraction of the round trip (its constants α,
//!   β are not given; ours are below) and moves the tokens by `1/tokens` per ACK — a packet
//!   per round trip — up below α and down above β. Deviation: outside the band the tokens
//!   move once per round trip to what leaves [`TARGET`] of the round trip queued, `tokens
//!   ← tokens · (1 − δ) / (1 − TARGET)` (`tokens · RTT_min / RTT` is the window that fills
//!   the path with no queue), as FAST TCP's update does; growth is at most
//!   [`MAX_ROUND_GROWTH`] per round trip. Slow start ends on the same drain. Measured
//!   through `ctp relay` (200 Mb/s, 60 ms, a queue of 1000 datagrams, a path of about a
//!   thousand packets): slow start overshot by about a path's worth, the queue filled, and
//!   a packet per round trip took the rest of the transfer to drain it (the round trip
//!   stayed near 110 ms and the queue dropped packets); and a window that slow start left
//!   short took as long to grow back (20 Mb/s for a whole 128 MiB transfer).
//! - **Random loss does not shrink the window**: coding repairs it, so a loss only returns
//!   its token. A *surge* in the loss rate — the short-term estimate `p` above the
//!   long-term one plus its deviation, `p > p_long + p_stdlong` — is the paper's sign of
//!   congestion. The paper's amount of decrease is lost in the published text; here a surge
//!   stops growth, and when the path also holds a queue (δ ≥ [`ALPHA`]) it shrinks the
//!   tokens by `1/tokens` per acknowledged packet. A scattered loss on an empty path
//!   therefore never costs a token (a surge without a queue only pauses growth).
//! - **A timeout** (no acknowledgement for an RTO): `ss_threshold ← tokens / 2`, tokens back
//!   to the initial number, slow start again; acknowledgements of packets sent before the
//!   timeout change nothing (the paper: "any ACKs for packets sent prior to the timeout
//!   has no effect"). Doubling the RTO is the stack's (its `backoff`).
//!
//! The controller keeps its own [`LossRates`], fed by its events: every acknowledged packet
//! is a 0 of the paper's loss series, preceded by the 1s of the packets declared lost since
//! the previous acknowledgement (`on_loss`). Window algorithms pace at a gain over
//! `cwnd / srtt`, as the others of this crate do.

use super::{window_pacing, Ack, Config, CongestionControl, Loss};
use crate::time::Instant;

/// Below this share of the round trip spent in a queue, tokens grow (`+1/tokens` per ACK).
pub const ALPHA: f64 = 0.05;
/// Above this share of the round trip spent in a queue, tokens shrink (`−1/tokens` per
/// ACK), and slow start ends.
pub const BETA: f64 = 0.15;
/// The share of the round trip a drain leaves queued (between α and β).
pub const TARGET: f64 = (ALPHA + BETA) / 2.0;
/// Most a window grows in one round trip in congestion avoidance (an empty path's update
/// is `1 / (1 − TARGET)` ≈ 1.11).
pub const MAX_ROUND_GROWTH: f64 = 1.5;
/// Fewest tokens a path keeps.
pub const MIN_TOKENS: f64 = 2.0;
/// Most tokens a path may hold (a bound on arithmetic, far above any real window).
pub const MAX_TOKENS: f64 = 1e9;
/// Gain of the short-term loss estimate `p` (the paper's μ): a memory of about 32 packets.
pub const SHORT_GAIN: f64 = 1.0 / 32.0;
/// Gain of the long-term loss estimate `p_long` and of its deviation (the paper's ν,
/// ν < μ): a memory of about 1024 packets.
pub const LONG_GAIN: f64 = 1.0 / 1024.0;

/// The loss-rate estimates of CTCP's Algorithm 1, per path: exponential averages of the
/// series of packet outcomes (0 acknowledged, 1 lost).
///
/// An acknowledgement that reveals `losses` lost packets before it is, in the paper's
/// order, one 0 and `losses` 1s, folded in a single step:
///
/// ```text
/// p         ← p·(1−μ)^(losses+1)      + 1 − (1−μ)^losses
/// p_long    ← p_long·(1−ν)^(losses+1) + 1 − (1−ν)^losses
/// p_stdlong ← p_stdlong·(1−ν) + ν·|p − p_long|
/// ```
///
/// Every value stays in `[0, 1]` whatever the input (no division, no NaN).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossRates {
    p: f64,
    p_long: f64,
    p_stdlong: f64,
    short_gain: f64,
    long_gain: f64,
    /// Packet outcomes folded since the estimates started (or were reset).
    outcomes: u64,
    /// The weight those outcomes carry in `p_long`, `1 − (1−ν)^outcomes`: kept as they
    /// are folded, not worked out at every query (the scheduler asks several times per
    /// packet sent).
    weight: f64,
}

impl Default for LossRates {
    fn default() -> Self {
        LossRates::new(SHORT_GAIN, LONG_GAIN)
    }
}

impl LossRates {
    /// Estimates starting at 0 with the given gains (μ short-term, ν long-term); each gain
    /// is clamped into `[1e-6, 1]` (a NaN becomes the default), so the update is always an
    /// average.
    pub fn new(short_gain: f64, long_gain: f64) -> Self {
        let clamp = |g: f64, default: f64| {
            if g.is_nan() {
                default
            } else {
                g.clamp(1e-6, 1.0)
            }
        };
        LossRates {
            p: 0.0,
            p_long: 0.0,
            p_stdlong: 0.0,
            short_gain: clamp(short_gain, SHORT_GAIN),
            long_gain: clamp(long_gain, LONG_GAIN),
            outcomes: 0,
            weight: 0.0,
        }
    }

    /// One acknowledged packet, preceded by `losses` lost ones.
    pub fn record(&mut self, losses: u64) {
        let fold = |value: f64, gain: f64| {
            let keep = 1.0 - gain;
            let lost = keep.powf(losses as f64);
            (value * lost * keep + 1.0 - lost).clamp(0.0, 1.0)
        };
        self.p = fold(self.p, self.short_gain);
        self.p_long = fold(self.p_long, self.long_gain);
        let deviation = (self.p - self.p_long).abs();
        self.p_stdlong =
            (self.p_stdlong * (1.0 - self.long_gain) + self.long_gain * deviation).clamp(0.0, 1.0);
        self.outcomes = self.outcomes.saturating_add(losses).saturating_add(1);
        self.weight = 1.0 - (1.0 - self.long_gain).powf(self.outcomes as f64);
    }

    /// Back to the defaults (the paper resets the estimates after a timeout).
    pub fn reset(&mut self) {
        *self = LossRates::new(self.short_gain, self.long_gain);
    }

    /// Short-term loss rate `p`.
    pub fn p(&self) -> f64 {
        self.p
    }

    /// Long-term loss rate `p_long`.
    pub fn p_long(&self) -> f64 {
        self.p_long
    }

    /// `p_long` without the bias of its start at 0: divided by the weight its `n` outcomes
    /// so far carry, `1 − (1−ν)^n` (as Adam's moment estimates are), so that a path's first
    /// few hundred packets are not planned as if it lost almost nothing. The same as
    /// `p_long` once `n` is several times `1/ν`.
    pub fn p_long_unbiased(&self) -> f64 {
        if self.weight <= 0.0 {
            return 0.0;
        }
        (self.p_long / self.weight).clamp(0.0, 1.0)
    }

    /// Long-term mean deviation of `p` from `p_long` (the paper's `p_stdlong`).
    pub fn p_stdlong(&self) -> f64 {
        self.p_stdlong
    }

    /// True when the short-term loss rate jumped above the long-term one by more than its
    /// usual deviation (`p > p_long + p_stdlong`): the paper's sign of congestion.
    pub fn surge(&self) -> bool {
        self.p > self.p_long + self.p_stdlong
    }
}

/// Slow start or congestion avoidance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// +1 token per acknowledged packet.
    SlowStart,
    /// Vegas-like: the share of the round trip spent queued decides.
    CongestionAvoidance,
}

/// The CTCP token controller (one per path).
#[derive(Debug)]
pub struct Ctcp {
    mss: u64,
    initial_tokens: f64,
    tokens: f64,
    ss_threshold: f64,
    mode: Mode,
    min_rtt_us: u64,
    srtt_us: u64,
    rates: LossRates,
    /// Packets declared lost since the last acknowledgement.
    pending_losses: u64,
    /// Packets sent at or before this time were sent before the last timeout.
    timeout_at: Option<Instant>,
    /// When the tokens were last moved: a packet sent later shows the effect.
    steered_at: Option<Instant>,
}

impl Ctcp {
    /// `cfg.initial_window` tokens (at least [`MIN_TOKENS`]), slow start.
    pub fn new(cfg: &Config) -> Self {
        let initial_tokens = (cfg.initial_window as f64).max(MIN_TOKENS);
        Ctcp {
            mss: cfg.mss.max(1),
            initial_tokens,
            tokens: initial_tokens,
            ss_threshold: f64::INFINITY,
            mode: Mode::SlowStart,
            min_rtt_us: u64::MAX,
            srtt_us: 0,
            rates: LossRates::default(),
            pending_losses: 0,
            timeout_at: None,
            steered_at: None,
        }
    }

    /// Tokens: packets the path may hold in flight (fractional between whole packets).
    pub fn tokens(&self) -> f64 {
        self.tokens
    }

    /// Slow start or congestion avoidance.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The controller's loss estimates.
    pub fn loss_rates(&self) -> &LossRates {
        &self.rates
    }

    /// Share of the round trip spent queued, `1 − RTT_min / RTT` (0 until measured).
    pub fn queue_share(&self) -> f64 {
        if self.srtt_us == 0 || self.min_rtt_us == u64::MAX {
            return 0.0;
        }
        (1.0 - self.min_rtt_us as f64 / self.srtt_us as f64).max(0.0)
    }

    fn set_tokens(&mut self, tokens: f64) {
        self.tokens = tokens.clamp(MIN_TOKENS, MAX_TOKENS);
    }

    /// Moves the tokens, once per round trip, to what leaves [`TARGET`] of the round trip
    /// queued (growing by [`MAX_ROUND_GROWTH`] at most).
    fn steer(&mut self, a: &Ack, delta: f64) {
        if self.steered_at.is_some_and(|t| a.sent_at <= t) {
            return; // the last move has not shown yet
        }
        let factor = ((1.0 - delta) / (1.0 - TARGET)).min(MAX_ROUND_GROWTH);
        self.set_tokens(self.tokens * factor);
        self.steered_at = Some(a.now);
    }
}

impl CongestionControl for Ctcp {
    fn name(&self) -> &'static str {
        "ctcp"
    }

    fn on_ack(&mut self, a: &Ack) {
        let rtt = a.rtt_us.max(1);
        self.min_rtt_us = self.min_rtt_us.min(rtt).min(a.min_rtt_us.max(1));
        self.srtt_us = if a.srtt_us > 0 { a.srtt_us } else { rtt };
        self.rates.record(core::mem::take(&mut self.pending_losses));
        if self.timeout_at.is_some_and(|t| a.sent_at <= t) {
            return; // sent before the timeout: no effect
        }
        let delta = self.queue_share();
        let step = 1.0 / self.tokens;
        match self.mode {
            Mode::SlowStart => {
                self.set_tokens(self.tokens + 1.0);
                if delta > BETA {
                    self.mode = Mode::CongestionAvoidance;
                    self.steer(a, delta);
                } else if self.tokens > self.ss_threshold {
                    self.mode = Mode::CongestionAvoidance;
                }
            }
            Mode::CongestionAvoidance => {
                if delta > BETA || (delta < ALPHA && !self.rates.surge()) {
                    self.steer(a, delta);
                }
            }
        }
        if self.rates.surge() && delta >= ALPHA && self.mode == Mode::CongestionAvoidance {
            self.set_tokens(self.tokens - step);
        }
    }

    fn on_loss(&mut self, l: &Loss) {
        // Random loss returns the token and feeds the loss estimate; the window stays.
        let lost = l.last_pn.saturating_sub(l.first_pn).saturating_add(1);
        self.pending_losses = self.pending_losses.saturating_add(lost);
    }

    fn on_timeout(&mut self, now: Instant, _backoff: u32) {
        self.ss_threshold = (self.tokens / 2.0).max(MIN_TOKENS);
        self.tokens = self.initial_tokens;
        self.mode = Mode::SlowStart;
        self.pending_losses = 0;
        self.timeout_at = Some(now);
    }

    fn cwnd(&self) -> u64 {
        (self.tokens * self.mss as f64) as u64
    }

    fn pacing_rate(&self) -> u64 {
        window_pacing(self.cwnd(), self.srtt_us, self.mode == Mode::SlowStart)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::*;

    /// Acknowledges `n` packets, one per millisecond from `from_ms`, each with `rtt_ms`.
    fn acks(c: &mut Ctcp, first_pn: u64, n: u64, from_ms: u64, rtt_ms: u64) {
        for i in 0..n {
            c.on_ack(&ack(first_pn + i, from_ms + i, rtt_ms));
        }
    }

    #[test]
    fn grows_on_an_empty_path() {
        let mut c = Ctcp::new(&cfg());
        assert_eq!(c.cwnd(), 10 * MSS);
        // Slow start: +1 token per ACK while the RTT stays at its minimum.
        acks(&mut c, 0, 20, 1000, 100);
        assert_eq!(c.mode(), Mode::SlowStart);
        assert_eq!(c.cwnd(), 30 * MSS);
        // A queue (RTT 100 → 130 ms: 23 % of the round trip queued > β) ends slow start.
        c.on_ack(&ack(20, 1100, 130));
        assert_eq!(c.mode(), Mode::CongestionAvoidance);
        // Drained: the queue taken out of the window at once.
        assert!(c.tokens() < 31.0 * 0.9, "{}", c.tokens());
        // Back on an empty path, once per round trip by 1 / (1 − TARGET).
        let before = c.tokens();
        acks(&mut c, 21, 100, 1200, 100);
        let grown = c.tokens() / before;
        assert!(
            (grown - 1.0 / 0.9).abs() < 0.01,
            "{before} → {}",
            c.tokens()
        );
        acks(&mut c, 121, 100, 1300, 100);
        assert!(c.tokens() > before * 1.2, "{before} → {}", c.tokens());
        assert!(c.pacing_rate() > 0);
    }

    #[test]
    fn holds_in_the_band_and_shrinks_when_the_rtt_shows_a_queue() {
        let mut c = Ctcp::new(&cfg());
        acks(&mut c, 0, 10, 1000, 100);
        c.on_ack(&ack(10, 1010, 200)); // leaves slow start
        let start = c.tokens();
        // 10 % of the round trip queued: between α and β, tokens hold.
        acks(&mut c, 11, 50, 1100, 111);
        assert_eq!(c.tokens(), start);
        // 50 % queued: drained to what leaves 10 % queued.
        acks(&mut c, 61, 40, 1200, 200);
        assert!(c.tokens() < start - 1.5, "{start} → {}", c.tokens());
        // Never below the floor.
        acks(&mut c, 101, 10_000, 1300, 200);
        assert_eq!(c.tokens(), MIN_TOKENS);
    }

    #[test]
    fn ignores_a_scattered_loss_and_backs_off_on_timeout() {
        let mut c = Ctcp::new(&cfg());
        acks(&mut c, 0, 10, 1000, 100);
        c.on_ack(&ack(10, 1010, 130)); // congestion avoidance at 21 tokens
        let before = c.cwnd();
        c.on_loss(&loss(11, 1020, 920, 20));
        assert_eq!(c.cwnd(), before, "a loss returns its token, no more");
        // The ACKs after it, on an empty path: the surge pauses growth, never cuts.
        for pn in 12..300 {
            c.on_ack(&ack(pn, 1020 + pn, 100));
            assert!(c.cwnd() >= before, "pn {pn}: {} < {before}", c.cwnd());
        }
        assert!(c.cwnd() > before, "growth resumes once the surge passed");
        assert!(c.loss_rates().p() > 0.0 && c.loss_rates().p_long() > 0.0);
        // A timeout: ssthresh to half, tokens to the initial number, slow start.
        let grown = c.tokens();
        c.on_timeout(ms(2000), 1);
        assert_eq!(c.cwnd(), 10 * MSS);
        assert_eq!(c.mode(), Mode::SlowStart);
        // ACKs of packets sent before the timeout change nothing…
        c.on_ack(&ack(400, 2050, 100));
        assert_eq!(c.cwnd(), 10 * MSS);
        // …later ones slow-start up to half the old window, then avoid congestion.
        acks(&mut c, 500, 40, 2200, 100);
        assert_eq!(c.mode(), Mode::CongestionAvoidance);
        assert!(c.tokens() < grown, "{} ≥ {grown}", c.tokens());
    }

    #[test]
    fn a_loss_surge_on_a_queued_path_shrinks_the_tokens() {
        let mut c = Ctcp::new(&cfg());
        acks(&mut c, 0, 10, 1000, 100);
        c.on_ack(&ack(10, 1010, 200)); // congestion avoidance
        acks(&mut c, 11, 2000, 1100, 110); // 9 % queued: holds, rates settle at 0
        let before = c.tokens();
        // Every other packet lost while 9 % of the round trip is queued.
        for i in 0..40u64 {
            let pn = 3000 + 2 * i;
            c.on_loss(&loss(pn, 4000 + i, 3900 + i, pn + 1));
            c.on_ack(&ack(pn + 1, 4000 + i, 110));
        }
        assert!(c.loss_rates().surge());
        assert!(c.tokens() < before - 1.0, "{before} → {}", c.tokens());
    }

    #[test]
    fn loss_rates_fold_several_losses_in_one_step() {
        let mut r = LossRates::new(0.5, 0.25);
        r.record(1);
        // One 0 then one 1: p = 0·0.25 + 1 − 0.5.
        assert_eq!(r.p(), 0.5);
        assert_eq!(r.p_long(), 0.25);
        assert_eq!(r.p_stdlong(), 0.25 * 0.25);
        // A huge gap saturates at 1, never NaN.
        r.record(u64::MAX);
        assert_eq!((r.p(), r.p_long()), (1.0, 1.0));
        assert!(r.p_stdlong().is_finite());
        r.reset();
        assert_eq!((r.p(), r.p_long(), r.p_stdlong()), (0.0, 0.0, 0.0));
        let odd = LossRates::new(f64::NAN, -3.0);
        assert_eq!(odd, LossRates::new(SHORT_GAIN, 1e-6));
    }
}
