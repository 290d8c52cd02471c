//! BBR v1 (Cardwell et al., "BBR: Congestion-Based Congestion Control", and
//! draft-cardwell-iccrg-bbr-congestion-control-00): a model of the path — the bottleneck
//! bandwidth (a max filter over the delivery-rate samples of the last 10 round trips) and the
//! round-trip propagation time (min RTT over 10 s) — sets the pacing rate
//! (`pacing_gain × BtlBw`) and the window (`cwnd_gain × BtlBw × RTprop`).
//!
//! - Startup: gain 2/ln 2 ≈ 2.885 until BtlBw grows less than 25 % for 3 rounds (full pipe).
//! - Drain: gain 1/2.885 until the bytes in flight fall to one BDP.
//! - ProbeBW: pacing gain cycles 1.25, 0.75, 1 × 6, one phase per RTprop but at least
//!   [`PHASE_FLOOR_US`] (a few pacing trains); cwnd gain 2.
//! - ProbeRTT: when RTprop was not refreshed for 10 s, the window drops to 4 packets for
//!   200 ms (and one round trip).
//!
//! Loss is not a congestion signal: losses change nothing. A timeout shrinks the window to
//! 4 packets until the next ACK recomputes it from the model (simplified recovery).
//!
//! **`bbr-fair`** ([`Bbr::fair`]) is BBR that yields to loss-based flows. BBR v1 keeps up to
//! twice the BDP in flight whatever it loses, so a drop-tail queue of about one BDP is its
//! own and a Reno or CUBIC flow beside it starves (`friendliness-newreno`: Jain's index
//! 0.53, 94 against 3 Mb/s; `bbr-fair` 0.86). Here a loss reported while the smoothed RTT shows a queue (more
//! than 1/8 of the minimum RTT plus 2 ms above it: congestion losses at a drop-tail
//! bottleneck come with its queue full, link errors do not — TCP Veno's idea, as in
//! `udt-noisy`) caps the bytes in flight at [`FAIR_BETA`] of its window (or of what was in
//! flight, when more), once per
//! round trip (a loss of a packet sent before the last cut does not cut again); the cap
//! grows by one packet per window acknowledged, as Reno's window does, while the samples
//! show a queue, by an eighth per round trip after a round without one ([`FAIR_REGROWTH`]),
//! and is dropped once the model's own window is below it. Random loss on a path that holds no queue changes
//! nothing, so a long lossy path runs at BBR's speed. (BBR v2 bounds its inflight on a
//! loss *rate* above 2 % per round instead; ctp qualifies each loss by the queue, which
//! also tells a congestion loss at 5 % random loss from the loss itself.)
//!
//! Outside ProbeRTT the window carries two allowances on top of `cwnd_gain × BDP`, as Linux
//! BBR and the later drafts do: the *ACK-aggregation* excess (the most data acknowledged in
//! one burst beyond what `BtlBw` explains, a max over 10 rounds — draft-cardwell-iccrg-bbr
//! -congestion-control-02 §4.6.4.5, "extra_acked") and a *quantization budget* of three send
//! quanta (one quantum: a millisecond at the pacing rate, at least two and at most 64 KiB of
//! packets). On a path whose propagation delay is tens of microseconds the BDP is a handful
//! of packets, while acknowledgements arrive in bursts a millisecond or more apart
//! (delayed ACKs, batched receive): without the allowances the window, not the pacing rate,
//! limits the flow far below the bottleneck.

use super::{Ack, Config, CongestionControl, Loss};
use crate::time::Instant;
use core::time::Duration;

/// What is left of the bytes in flight after a congestion loss (`bbr-fair`): CUBIC's β.
pub const FAIR_BETA: f64 = 0.7;

/// After a round without a queue, the cap grows by the bytes acknowledged over this
/// (`bbr-fair`): by an eighth per round trip.
const FAIR_REGROWTH: u64 = 8;

/// Startup gain, 2/ln 2.
pub const HIGH_GAIN: f64 = 2.885;
/// ProbeBW pacing-gain cycle.
pub const CYCLE: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// Shortest ProbeBW gain phase, microseconds. A phase is one RTprop, but on a path of tens
/// of microseconds that is shorter than one pacing train (250 µs) and than the receiver's
/// ACK batching: a 1.25 phase would end before the pacer had sent any faster, so the
/// bandwidth filter never saw the headroom it probes for and every scheduling hiccup of the
/// sender left the nearly empty bottleneck idle. Measured on the bench's veth path (1 Gbit/s
/// tbf, RTprop ≈ 100 µs): 913–918 Mb/s without the floor, 942–945 Mb/s with it.
pub const PHASE_FLOOR_US: u64 = 2_000;
/// Rounds the bandwidth max filter spans.
const BW_ROUNDS: usize = 10;

/// A maximum over the last [`BW_ROUNDS`] rounds: one slot per round, the oldest reused.
#[derive(Clone, Copy, Debug, Default)]
struct RoundMax {
    slots: [u64; BW_ROUNDS],
}

impl RoundMax {
    fn slot(&mut self, round: u64) -> &mut u64 {
        &mut self.slots[(round % BW_ROUNDS as u64) as usize]
    }

    /// Starts `round`: forgets the value of the round it replaces.
    fn start(&mut self, round: u64) {
        *self.slot(round) = 0;
    }

    /// Takes `v` into `round`'s maximum.
    fn update(&mut self, round: u64, v: u64) {
        let s = self.slot(round);
        *s = (*s).max(v);
    }

    fn max(&self) -> u64 {
        self.slots.iter().copied().max().unwrap_or(0)
    }
}
/// RTprop expires after this long.
const RTPROP_WINDOW: Duration = Duration::from_secs(10);
/// ProbeRTT lasts at least this long.
const PROBE_RTT_TIME: Duration = Duration::from_millis(200);
/// Largest send quantum, bytes (one GSO train).
const MAX_SEND_QUANTUM: u64 = 64 * 1024;
/// Send quanta the window keeps room for beyond the BDP.
const QUANTIZATION_QUANTA: u64 = 3;

/// BBR's state machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Exponential search for the bottleneck bandwidth.
    Startup,
    /// Draining the queue Startup built.
    Drain,
    /// Steady state, cycling the pacing gain.
    ProbeBw,
    /// Refreshing the min-RTT estimate.
    ProbeRtt,
}

/// The BBR algorithm.
#[derive(Debug)]
pub struct Bbr {
    mss: u64,
    mode: Mode,
    /// Per-round maximum delivery rate, indexed by round % 10.
    /// Delivery-rate maximum per round (BtlBw is its maximum).
    bw: RoundMax,
    round: u64,
    round_start: Option<Instant>,
    rtprop_us: u64,
    rtprop_at: Instant,
    full_bw: u64,
    full_bw_rounds: u32,
    cycle_index: usize,
    cycle_start: Instant,
    probe_rtt_done: Option<Instant>,
    cwnd: u64,
    init_cwnd: u64,
    pacing_gain: f64,
    cwnd_gain: f64,
    /// ACK-aggregation excess maximum per round.
    extra_acked: RoundMax,
    /// Start of the current aggregation epoch.
    agg_start: Instant,
    /// Bytes acknowledged since `agg_start`.
    agg_delivered: u64,
    /// `bbr-fair`: congestion losses cap the bytes in flight.
    yields: bool,
    /// The cap on bytes in flight a congestion loss set (`u64::MAX`: none).
    inflight_hi: u64,
    /// When the cap was last cut: losses of packets sent before it belong to that cut.
    cut_at: Option<Instant>,
    /// Bytes in flight at the last acknowledgement.
    inflight: u64,
    /// Longest round trip sampled in the current round, microseconds.
    round_max_rtt_us: u64,
    /// No sample of the last whole round showed a queue.
    quiet_round: bool,
}

impl Bbr {
    /// Initial window of `cfg.initial_window` packets.
    pub fn new(cfg: &Config) -> Self {
        let mss = cfg.mss.max(1);
        let init = mss * cfg.initial_window.max(4);
        Bbr {
            mss,
            mode: Mode::Startup,
            bw: RoundMax::default(),
            round: 0,
            round_start: None,
            rtprop_us: u64::MAX,
            rtprop_at: Instant::ZERO,
            full_bw: 0,
            full_bw_rounds: 0,
            cycle_index: 0,
            cycle_start: Instant::ZERO,
            probe_rtt_done: None,
            cwnd: init,
            init_cwnd: init,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            extra_acked: RoundMax::default(),
            agg_start: Instant::ZERO,
            agg_delivered: 0,
            yields: false,
            inflight_hi: u64::MAX,
            cut_at: None,
            inflight: 0,
            round_max_rtt_us: 0,
            quiet_round: false,
        }
    }

    /// `bbr-fair`: BBR whose bytes in flight a loss in a queue caps (module documentation).
    pub fn fair(cfg: &Config) -> Self {
        Bbr {
            yields: true,
            ..Bbr::new(cfg)
        }
    }

    /// The cap on bytes in flight the last congestion loss set, if any (`bbr-fair`).
    pub fn inflight_cap(&self) -> Option<u64> {
        (self.inflight_hi != u64::MAX).then_some(self.inflight_hi)
    }

    /// True when `srtt_us` shows no queue on the path: within 1/8 of the minimum RTT plus
    /// 2 ms (as `udt-noisy` judges).
    fn no_queue(&self, srtt_us: u64) -> bool {
        self.rtprop_us != u64::MAX
            && srtt_us > 0
            && srtt_us <= self.rtprop_us + self.rtprop_us / 8 + 2_000
    }

    /// Grows the cap with the bytes `acked` by a packet sent after the last cut: by one
    /// packet per window acknowledged (Reno's growth), or by an eighth per round trip
    /// ([`FAIR_REGROWTH`]) after a whole round in which no sample showed a queue — the cap
    /// then is not what keeps a queue short, and a flow alone on a lossy path gets back to
    /// its model's window in tens of round trips instead of hundreds (a loss-based flow
    /// beside it keeps a queue most of the time). Drops the cap once the model's window
    /// `target` no longer reaches it.
    fn grow_cap(&mut self, sent_at: Instant, acked: u64, target: u64) {
        if self.inflight_hi == u64::MAX || self.cut_at.is_some_and(|c| sent_at < c) {
            return;
        }
        self.inflight_hi += if self.quiet_round {
            acked / FAIR_REGROWTH
        } else {
            (self.mss * acked / self.inflight_hi.max(1)).max(1)
        };
        if target < self.inflight_hi {
            self.inflight_hi = u64::MAX;
        }
    }

    /// ACK-aggregation excess, bytes: the most data acknowledged in one burst beyond what
    /// the bandwidth estimate explains, over the last 10 rounds.
    pub fn extra_acked(&self) -> u64 {
        self.extra_acked.max()
    }

    /// One send quantum, bytes: a millisecond at the pacing rate, 2 packets to 64 KiB.
    fn send_quantum(&self) -> u64 {
        (self.pacing_rate() / 1000).clamp(2 * self.mss, MAX_SEND_QUANTUM.max(2 * self.mss))
    }

    /// Measures how far the acknowledged data runs ahead of `BtlBw` in the current
    /// aggregation epoch; an epoch ends (and the next starts) when the acknowledgements fall
    /// back to the expected rate.
    fn update_ack_aggregation(&mut self, now: Instant, acked: u64) {
        let bw = self.btl_bw();
        if bw == 0 {
            return;
        }
        let interval_us = now.saturating_since(self.agg_start).as_micros();
        let mut expected = (u128::from(bw) * interval_us / 1_000_000) as u64;
        if self.agg_delivered <= expected {
            self.agg_delivered = 0;
            self.agg_start = now;
            expected = 0;
        }
        self.agg_delivered += acked;
        let extra = (self.agg_delivered - expected).min(self.cwnd);
        self.extra_acked.update(self.round, extra);
    }

    /// Current mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Bottleneck-bandwidth estimate, bytes per second.
    pub fn btl_bw(&self) -> u64 {
        self.bw.max()
    }

    /// Round-trip propagation estimate, microseconds.
    pub fn rtprop_us(&self) -> u64 {
        self.rtprop_us
    }

    /// Current pacing gain.
    pub fn pacing_gain(&self) -> f64 {
        self.pacing_gain
    }

    fn bdp(&self) -> u64 {
        if self.rtprop_us == u64::MAX {
            return self.init_cwnd;
        }
        (self.btl_bw() as u128 * self.rtprop_us as u128 / 1_000_000) as u64
    }

    fn enter_probe_bw(&mut self, now: Instant) {
        self.mode = Mode::ProbeBw;
        self.cycle_index = 0;
        self.cycle_start = now;
        self.pacing_gain = CYCLE[0];
        self.cwnd_gain = 2.0;
    }
}

impl CongestionControl for Bbr {
    fn wants_packet_events(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        if self.yields {
            "bbr-fair"
        } else {
            "bbr"
        }
    }

    fn on_ack(&mut self, a: &Ack) {
        let now = a.now;
        // Rounds: a round ends when a packet sent after it began is acknowledged.
        let new_round = self.round_start.is_none_or(|s| a.sent_at >= s);
        if new_round {
            self.quiet_round = self.round_max_rtt_us > 0 && self.no_queue(self.round_max_rtt_us);
            self.round_max_rtt_us = 0;
            self.round += 1;
            self.round_start = Some(now);
            self.bw.start(self.round);
            self.extra_acked.start(self.round);
        }
        self.bw.update(self.round, a.delivery_rate);
        self.update_ack_aggregation(now, a.bytes);
        self.inflight = a.bytes_in_flight;
        self.round_max_rtt_us = self.round_max_rtt_us.max(a.rtt_us);
        let rtt = a.rtt_us.max(1);
        let expired =
            self.rtprop_us != u64::MAX && now.saturating_since(self.rtprop_at) > RTPROP_WINDOW;
        if rtt <= self.rtprop_us || expired {
            if expired && self.mode != Mode::ProbeRtt {
                self.mode = Mode::ProbeRtt;
                self.pacing_gain = 1.0;
                self.probe_rtt_done = Some(now + PROBE_RTT_TIME);
            }
            self.rtprop_us = rtt;
            self.rtprop_at = now;
        }
        match self.mode {
            Mode::Startup if new_round && self.btl_bw() > 0 => {
                let bw = self.btl_bw();
                if bw >= self.full_bw + self.full_bw / 4 {
                    self.full_bw = bw;
                    self.full_bw_rounds = 0;
                } else {
                    self.full_bw_rounds += 1;
                    if self.full_bw_rounds >= 3 {
                        self.mode = Mode::Drain;
                        self.pacing_gain = 1.0 / HIGH_GAIN;
                        self.cwnd_gain = HIGH_GAIN;
                    }
                }
            }
            Mode::Drain if a.bytes_in_flight <= self.bdp() => self.enter_probe_bw(now),
            Mode::ProbeBw => {
                let phase = Duration::from_micros(self.rtprop_us.clamp(PHASE_FLOOR_US, 10_000_000));
                if now.saturating_since(self.cycle_start) >= phase {
                    self.cycle_index = (self.cycle_index + 1) % CYCLE.len();
                    self.cycle_start = now;
                    self.pacing_gain = CYCLE[self.cycle_index];
                }
            }
            Mode::ProbeRtt if self.probe_rtt_done.is_some_and(|d| now >= d) => {
                self.rtprop_at = now;
                self.enter_probe_bw(now);
            }
            _ => {}
        }
        self.cwnd = if self.mode == Mode::ProbeRtt {
            4 * self.mss
        } else if self.btl_bw() == 0 {
            self.init_cwnd.max(self.cwnd)
        } else {
            let target = (self.cwnd_gain * self.bdp() as f64) as u64
                + self.extra_acked()
                + QUANTIZATION_QUANTA * self.send_quantum();
            self.grow_cap(a.sent_at, a.bytes, target);
            target.min(self.inflight_hi).max(4 * self.mss)
        };
    }

    fn on_loss(&mut self, l: &Loss) {
        if !self.yields || self.cut_at.is_some_and(|c| l.sent_at < c) || self.no_queue(l.srtt_us) {
            return;
        }
        // From the window (the model's, or the cap) when more than was last in flight: the
        // report of bytes in flight lags, and the window is what the flow may send.
        let base = self.inflight.max(self.cwnd);
        self.inflight_hi = ((base as f64 * FAIR_BETA) as u64).max(4 * self.mss);
        self.cwnd = self.cwnd.min(self.inflight_hi);
        self.cut_at = Some(l.now);
    }

    fn on_timeout(&mut self, _now: Instant, _backoff: u32) {
        self.cwnd = 4 * self.mss;
    }

    fn cwnd(&self) -> u64 {
        self.cwnd
    }

    fn pacing_rate(&self) -> u64 {
        (self.pacing_gain * self.btl_bw() as f64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::*;

    fn rated(pn: u64, now_ms: u64, rtt_ms: u64, rate: u64, inflight: u64) -> Ack {
        Ack {
            delivery_rate: rate,
            bytes_in_flight: inflight,
            ..ack(pn, now_ms, rtt_ms)
        }
    }

    #[test]
    fn startup_drain_probe_bw_cycle_and_loss_is_ignored() {
        let mut b = Bbr::new(&cfg());
        assert_eq!(b.mode(), Mode::Startup);
        // Each 100 ms round the rate doubles, then it plateaus at 1 MB/s.
        let mut now = 0;
        for (i, rate) in [
            125_000u64, 250_000, 500_000, 1_000_000, 1_000_000, 1_000_000, 1_000_000,
        ]
        .into_iter()
        .enumerate()
        {
            now += 100;
            b.on_ack(&rated(i as u64, now, 100, rate, 200_000));
            if i < 6 {
                assert_eq!(b.mode(), Mode::Startup, "round {i}");
            }
        }
        assert_eq!(b.mode(), Mode::Drain, "3 rounds without 25 % growth");
        assert_eq!(b.btl_bw(), 1_000_000);
        assert_eq!(b.pacing_rate(), ((1.0 / HIGH_GAIN) * 1_000_000.0) as u64);
        // In flight falls to one BDP (1 MB/s × 100 ms): ProbeBW, gain 1.25 then 0.75 then 1.
        now += 1;
        b.on_ack(&rated(10, now, 100, 1_000_000, 100_000));
        assert_eq!(b.mode(), Mode::ProbeBw);
        assert_eq!(b.pacing_rate(), 1_250_000);
        // cwnd gain 2 × BDP, plus one packet of ACK-aggregation excess (one ACK per round,
        // far below the expected rate) and three send quanta (1.25 KB rounds up to 2 packets).
        let window = 2 * 100_000 + MSS + 3 * 2 * MSS;
        assert_eq!(b.extra_acked(), MSS);
        assert_eq!(b.cwnd(), window);
        now += 100;
        b.on_ack(&rated(11, now, 100, 1_000_000, 100_000));
        assert_eq!(b.pacing_rate(), 750_000);
        now += 100;
        b.on_ack(&rated(12, now, 100, 1_000_000, 100_000));
        assert_eq!(b.pacing_rate(), 1_000_000);
        // Loss is not a signal.
        b.on_loss(&loss(13, now, now - 50, 20));
        assert_eq!((b.pacing_rate(), b.cwnd()), (1_000_000, window));
        // A timeout shrinks the window to 4 packets until the model speaks again.
        b.on_timeout(ms(now + 10), 1);
        assert_eq!(b.cwnd(), 4 * MSS);
        b.on_ack(&rated(14, now + 20, 100, 1_000_000, 0));
        assert_eq!(b.cwnd(), window);
    }

    /// A BBR in ProbeBW at 1 MB/s over a 1 ms path (a BDP of one packet).
    fn probing_at_one_megabyte_per_second() -> (Bbr, u64) {
        let mut b = Bbr::new(&cfg());
        let mut pn = 0;
        for now in 1..=20 {
            b.on_ack(&rated(pn, now, 1, 1_000_000, 0));
            pn += 1;
        }
        assert_eq!(b.mode(), Mode::ProbeBw);
        assert_eq!(b.btl_bw(), 1_000_000);
        (b, pn)
    }

    /// A controller built by `make` past startup on a 1 MB/s, 100 ms path (BDP 100 kB),
    /// 200 kB in flight; returns it, the next packet number and the time (ms).
    fn settled(make: fn(&Config) -> Bbr) -> (Bbr, u64, u64) {
        let mut b = make(&cfg());
        let (mut pn, mut now) = (0, 100);
        while b.mode() != Mode::ProbeBw || pn < 100 {
            now += 10;
            b.on_ack(&rated(pn, now, 100, 1_000_000, 90_000));
            pn += 1;
            assert!(pn < 1000, "never settled: {:?}", b.mode());
        }
        // Then rounds whose samples show a queue (150 ms over the 100 ms minimum).
        for _ in 0..40 {
            now += 10;
            b.on_ack(&rated(pn, now, 150, 1_000_000, 200_000));
            pn += 1;
        }
        (b, pn, now)
    }

    /// A loss of packet `pn`, sent at `sent_ms`, reported at `now_ms` with smoothed RTT
    /// `srtt_ms` (the path's minimum is 100 ms).
    fn loss_at(pn: u64, now_ms: u64, sent_ms: u64, srtt_ms: u64) -> Loss {
        Loss {
            srtt_us: srtt_ms * 1000,
            ..loss(pn, now_ms, sent_ms, pn + 100)
        }
    }

    #[test]
    fn bbr_fair_caps_its_inflight_on_a_loss_in_a_queue_only_once_per_round_and_regrows() {
        let (mut b, pn, now) = settled(Bbr::fair);
        let model = b.cwnd();
        assert!(model > 200_000, "two BDPs and the allowances: {model}");
        // A link error: the path holds no queue (srtt at the minimum). Nothing changes.
        b.on_loss(&loss_at(pn - 5, now, now - 100, 100));
        assert_eq!((b.inflight_cap(), b.cwnd()), (None, model));
        // A loss with a queue (srtt 150 ms over 100): 0.7 of the window (more than the
        // 200 kB in flight).
        b.on_loss(&loss_at(pn - 4, now, now - 100, 150));
        let cap = model * 7 / 10;
        assert_eq!(b.inflight_cap(), Some(cap));
        assert_eq!(b.cwnd(), cap);
        // More losses of packets sent before that cut belong to the same event.
        b.on_loss(&loss_at(pn - 3, now + 5, now - 95, 150));
        assert_eq!(b.inflight_cap(), Some(cap));
        // While the samples show a queue, acknowledgements of packets sent after the cut
        // grow the cap by a packet per window (~145 of 1 kB): about one packet per 145
        // acknowledgements.
        let mut t = now;
        for i in 0..145 {
            t += 1;
            b.on_ack(&Ack {
                sent_at: ms(t - 150).max(ms(now)),
                ..rated(pn + i, t + 150, 150, 1_000_000, 140_000)
            });
        }
        let grown = b.inflight_cap().expect("still capped");
        assert!(
            (cap + 800..=cap + 1100).contains(&grown),
            "{grown} from {cap}"
        );
        assert_eq!(b.cwnd(), grown);
        // The next congestion loss cuts again, from the window now.
        b.on_loss(&loss_at(pn + 144, t + 151, t, 150));
        let cut = grown * 7 / 10;
        assert_eq!(b.inflight_cap(), Some(cut));
        // Rounds in which no sample shows a queue (the loss was a link error after all):
        // the cap grows by an eighth of what is acknowledged, not a packet per window.
        let (mut t, mut pn) = (t + 200, pn + 200);
        for _ in 0..300 {
            t += 1;
            b.on_ack(&rated(pn, t, 100, 1_000_000, 100_000));
            pn += 1;
        }
        let regrown = b.inflight_cap().map_or(u64::MAX, |c| c - cut);
        assert!(
            regrown > 100 * 1000 / 8,
            "{regrown} bytes in 300 acknowledgements"
        );
    }

    #[test]
    fn bbr_fair_drops_its_cap_once_the_model_window_is_below_it_and_bbr_never_caps() {
        let (mut b, pn, now) = settled(Bbr::fair);
        b.on_loss(&loss_at(pn - 1, now, now - 100, 150));
        assert!(b.inflight_cap().is_some());
        // The bandwidth estimate falls (the old maxima age out over 10 rounds) until the
        // model's window is below the cap: the cap goes.
        let mut t = now + 100;
        for i in 0..400 {
            t += 10;
            b.on_ack(&rated(pn + i, t, 100, 200_000, 20_000));
        }
        assert_eq!(b.inflight_cap(), None, "cwnd {}", b.cwnd());
        let (mut v1, pn, now) = settled(Bbr::new);
        let before = v1.cwnd();
        v1.on_loss(&loss_at(pn - 1, now, now - 100, 150));
        assert_eq!((v1.inflight_cap(), v1.cwnd()), (None, before));
    }

    #[test]
    fn bursts_of_acknowledgements_widen_the_window_by_the_burst() {
        // The same 1 MB/s of acknowledgements, once one per millisecond and once in bursts
        // of ten every ten milliseconds (delayed, batched ACKs): the bursty path's window
        // must hold a whole burst beyond what the smooth one needs.
        let (mut smooth, mut pn) = probing_at_one_megabyte_per_second();
        let (mut bursty, _) = probing_at_one_megabyte_per_second();
        for now in 21..=120 {
            smooth.on_ack(&rated(pn, now, 1, 1_000_000, 0));
            pn += 1;
        }
        for burst in 1..=10u64 {
            for _ in 0..10 {
                bursty.on_ack(&rated(pn, 20 + 10 * burst, 1, 1_000_000, 0));
                pn += 1;
            }
        }
        assert!(smooth.extra_acked() <= MSS, "{}", smooth.extra_acked());
        assert_eq!(bursty.extra_acked(), 10 * MSS);
        assert!(
            bursty.cwnd() >= smooth.cwnd() + 9 * MSS,
            "bursty {} smooth {}",
            bursty.cwnd(),
            smooth.cwnd()
        );
        // ProbeRTT still drains to 4 packets whatever the excess.
        bursty.on_ack(&rated(pn, 11_000, 2, 1_000_000, 0));
        assert_eq!(bursty.mode(), Mode::ProbeRtt);
        assert_eq!(bursty.cwnd(), 4 * MSS);
    }

    #[test]
    fn gain_phases_last_at_least_the_floor_on_a_sub_millisecond_path() {
        // RTprop is 1 ms, under the 2 ms floor: the gain may change only every 2 ms.
        let (mut b, mut pn) = probing_at_one_megabyte_per_second();
        let mut gain = b.pacing_gain();
        let mut changes = Vec::new();
        for now in 21..=60 {
            b.on_ack(&rated(pn, now, 1, 1_000_000, 0));
            pn += 1;
            if b.pacing_gain() != gain {
                gain = b.pacing_gain();
                changes.push(now);
            }
        }
        assert!(changes.len() >= 4, "{changes:?}");
        assert!(
            changes
                .windows(2)
                .all(|w| (w[1] - w[0]) * 1000 >= PHASE_FLOOR_US),
            "{changes:?}"
        );
    }

    #[test]
    fn probe_rtt_after_ten_seconds_without_a_lower_rtt() {
        let mut b = Bbr::new(&cfg());
        for i in 0..8 {
            b.on_ack(&rated(i, 100 * (i + 1), 100, 1_000_000, 0));
        }
        assert_eq!(b.mode(), Mode::ProbeBw);
        b.on_ack(&rated(20, 11_000, 120, 1_000_000, 0));
        assert_eq!(b.mode(), Mode::ProbeRtt);
        assert_eq!(b.cwnd(), 4 * MSS);
        b.on_ack(&rated(21, 11_300, 100, 1_000_000, 0));
        assert_eq!(b.mode(), Mode::ProbeBw);
        assert_eq!(b.rtprop_us(), 100_000);
    }
}
