//! UDT native congestion control (Gu & Grossman, "UDT: UDP-based data transfer for
//! high-speed wide area networks", §3; draft-gg-udt-03 §6): DAIMD rate control on a fixed
//! interval SYN = 10 ms, a window that follows the receive rate, random loss decrease, and
//! an optional noisy-link mode.
//!
//! Rate increase, once per SYN without loss since the previous one (draft §6.3):
//!
//! > B = (link capacity − current sending rate), packets/s; if the current period is above
//! > the one before the last decrease, B is limited to capacity/9.
//! > inc = max(10^(ceil(log10(B × MSS × 8))) × Beta / MSS, 1/MSS), Beta = 0.0000015
//! > SND = (SND × SYN) / (SND × inc + SYN)
//!
//! (with 1500-byte packets: B < 0.1 Mb/s gives 0.00067 packets per SYN, 10–100 Mb/s 0.1,
//! 100–1000 Mb/s 1, the paper's table 1). Window: slow start grows it by every acknowledged
//! packet until the first loss or the flow window, with no inter-packet delay; afterwards
//! `W = receive rate × (RTT + SYN) + 16` packets.
//!
//! Random loss decrease (the paper's figure 7): "a congestion event is a particular loss
//! event when the largest sequence number of the lost packets in this loss event is greater
//! than the largest sequence number that has been sent when the last rate decrease
//! occurred." A congestion event increases the period by 1/8 (the rate drops by 1/9),
//! updates `AvgNAK = ceil(AvgNAK·7/8 + NumNAK/8)` and draws `DR` uniformly in `1..=AvgNAK`;
//! every `DR`-th further loss event of the epoch increases it again, at most 4 times
//! (0.889⁵ ≈ 0.55: never below half within an epoch). The draw is seeded with the largest
//! sequence number sent, as UDT4 does, so concurrent flows de-synchronise but runs repeat.
//!
//! Freeze (§3.3.1): after the decrease of a congestion event "the packet sending is
//! stopped for the next SYN time" ([`CongestionControl::paused_until`]; the pacing
//! mechanism holds every packet, retransmissions too). UDT4 does not do this; without it a
//! short-RTT flow sharing a drop-tail queue with long-RTT flows is cut about twice as often
//! as they are: it learns of the overflow first, and the packets it sends right after its
//! decrease still meet the full queue (the long-RTT flows have not slowed down yet), which
//! starts a new congestion epoch one short round trip later. Pausing one SYN drains its
//! share of the queue while the others' signals arrive. `rtt-fairness` (40 µs / 16 ms /
//! 110 ms, 60 s): the 40 µs flow went from 2× the others' congestion events to as many.
//! Deviation, written down: the freeze only when the smoothed RTT shows a queue (as the
//! noisy mode reads it): with none there is nothing to drain, and a pause would only idle
//! the link (random loss on a short path).
//!
//! Noisy link (§3.3.2): "UDT does not react to the first packet loss in a congestion event
//! … This algorithm is equivalent to removing Step 1.a": isolated random losses never cut
//! the rate; a second loss in one epoch does. That suits the "small non-congestion losses"
//! the paper has in mind; at 1 % random loss a long path sees several losses in every epoch
//! and the rate withers. So noisy mode also ignores a loss while the smoothed RTT shows no
//! queue (within 1/8 of the minimum RTT, plus 2 ms): congestion losses at a drop-tail
//! bottleneck come with its queue full, link errors do not (the idea of TCP Veno). A
//! deviation from the paper, written down.
//!
//! Link capacity (§3.4, packet pairs): the sender's pacing sends every 16th packet right
//! behind the 15th; the receiver's instance turns the spacing of consecutive full-size
//! arrivals into rate samples and, every 16 arrivals, takes the third largest of the last
//! [`PAIR_WINDOW`] (the median of the window's ~4 pair samples: a pair is spaced by the
//! bottleneck alone, other arrivals also by the pacing) as the capacity. It reports it to the
//! sender's instance in a custom message ([`CapacityMessage`], a `CC_MSG` frame) when it
//! moved by more than 1/16. Until a report arrives the sender uses the largest delivery-rate
//! sample (decaying by 1/1024 per SYN); [`Udt::set_link_capacity`] sets it from outside.
//!
//! Deviations, written down: each packet ack tracking declares lost counts as one loss event
//! (UDT counts NAK packets). The receive rate is the delivery rate smoothed by 7/8. Arrival
//! times have microsecond resolution, so capacities far above 10 Gb/s cannot be measured.

use super::{mix64, Ack, Config, CongestionControl, Loss, Sent};
use crate::time::Instant;
use core::time::Duration;

/// The rate-control interval, microseconds.
pub const SYN_US: u64 = 10_000;
/// Beta of the increase formula.
pub const BETA: f64 = 0.000_001_5;

/// Increase, packets per SYN, for an available bandwidth `b_pkts` packets/s of `mss` bytes.
pub fn increase(b_pkts: f64, mss: f64) -> f64 {
    let min = 1.0 / mss;
    if b_pkts <= 0.0 {
        return min;
    }
    (10f64.powf((b_pkts * mss * 8.0).log10().ceil()) * BETA / mss).max(min)
}

/// Arrivals per capacity estimate (about four packet pairs).
pub const PAIR_WINDOW: usize = 64;

/// The receiver's link-capacity report: `b'C'` then bytes per second, 8 bytes little-endian.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapacityMessage(pub u64);

impl CapacityMessage {
    /// Tag byte.
    pub const TAG: u8 = b'C';

    /// Writes the message into `out`; returns its length.
    pub fn encode(self, out: &mut [u8]) -> usize {
        out[0] = Self::TAG;
        out[1..9].copy_from_slice(&self.0.to_le_bytes());
        9
    }

    /// Parses a message; `None` for anything else.
    pub fn decode(msg: &[u8]) -> Option<Self> {
        match msg {
            [Self::TAG, rest @ ..] if rest.len() == 8 => {
                Some(CapacityMessage(u64::from_le_bytes(rest.try_into().ok()?)))
            }
            _ => None,
        }
    }
}

/// The receiver side of packet-pair estimation: rate samples from consecutive arrivals.
#[derive(Debug)]
struct PairEstimator {
    last_arrival: Option<Instant>,
    /// Samples taken so far (the window holds the last [`PAIR_WINDOW`]).
    taken: u64,
    /// Rate samples of the current window (boxed: the algorithm lives inline in the
    /// microprotocol enum).
    samples: Box<[u64; PAIR_WINDOW]>,
    filled: usize,
    reported: u64,
    pending: Option<u64>,
}

impl PairEstimator {
    fn new() -> Self {
        PairEstimator {
            last_arrival: None,
            taken: 0,
            samples: Box::new([0; PAIR_WINDOW]),
            filled: 0,
            reported: 0,
            pending: None,
        }
    }

    /// A full-size packet arrived.
    fn on_arrival(&mut self, now: Instant, bytes: u64) {
        let Some(prev) = self.last_arrival.replace(now) else {
            return;
        };
        let gap = now.saturating_since(prev).as_micros() as u64;
        if gap == 0 {
            return; // below the clock's resolution
        }
        self.samples[self.filled] = bytes * 1_000_000 / gap;
        self.filled = (self.filled + 1) % PAIR_WINDOW;
        self.taken += 1;
        // Every 16 arrivals (one pair), over the window so far: the first estimate comes
        // after 16 packets (in slow start they all leave back to back).
        if self.taken.is_multiple_of(16) {
            let n = (self.taken as usize).min(PAIR_WINDOW);
            let mut sorted = *self.samples;
            let window = &mut sorted[..n];
            window.sort_unstable();
            let estimate = window[n - 3];
            if estimate.abs_diff(self.reported) > self.reported / 16 {
                self.reported = estimate;
                self.pending = Some(estimate);
            }
        }
    }
}

/// `DR`: the random loss-decrease interval in `1..=avg_nak`, seeded with `lsd`.
pub fn decrease_interval(avg_nak: u64, lsd: u64) -> u64 {
    let r = (mix64(lsd) >> 11) as f64 / (1u64 << 53) as f64;
    ((avg_nak as f64 * r).ceil() as u64).max(1)
}

/// UDT native congestion control (`noisy` selects the noisy-link mode).
#[derive(Debug)]
pub struct Udt {
    mss: f64,
    noisy: bool,
    slow_start: bool,
    cwnd_pkts: f64,
    max_window: f64,
    /// Packet-sending period, microseconds (0 while in slow start).
    period_us: f64,
    last_dec_period: f64,
    last_rc: Option<Instant>,
    loss_since_rc: bool,
    /// Receive rate, packets/s (0 until known).
    recv_rate: f64,
    /// Link capacity, packets/s (0 until known).
    capacity: f64,
    /// The capacity came from the receiver's packet pairs (it then does not decay).
    capacity_measured: bool,
    rtt_us: f64,
    /// Smallest RTT seen, microseconds (`u64::MAX` until measured).
    min_rtt_us: u64,
    largest_sent: u64,
    lsd: u64,
    nak_count: u64,
    dec_count: u64,
    avg_nak: u64,
    dec_random: u64,
    pairs: PairEstimator,
    /// Sending stops until then after a congestion event (one SYN): the freeze.
    frozen_until: Option<Instant>,
}

impl Udt {
    /// UDT with the normal loss handling.
    pub fn new(cfg: &Config) -> Self {
        Udt {
            mss: cfg.mss.max(1) as f64,
            noisy: false,
            slow_start: true,
            cwnd_pkts: cfg.initial_window.max(2) as f64,
            max_window: cfg.max_window.max(2) as f64,
            period_us: 0.0,
            last_dec_period: 1.0,
            last_rc: None,
            loss_since_rc: false,
            recv_rate: 0.0,
            capacity: 0.0,
            capacity_measured: false,
            rtt_us: 100_000.0,
            min_rtt_us: u64::MAX,
            largest_sent: 0,
            lsd: 0,
            nak_count: 1,
            dec_count: 1,
            avg_nak: 0,
            dec_random: 1,
            pairs: PairEstimator::new(),
            frozen_until: None,
        }
    }

    /// UDT in noisy-link mode: ignores the first loss of each congestion event, and every
    /// loss while the path holds no queue (`udt-noisy`).
    pub fn noisy(cfg: &Config) -> Self {
        Udt {
            noisy: true,
            ..Udt::new(cfg)
        }
    }

    /// Sets the link capacity (bytes per second), e.g. from a receiver-side packet-pair
    /// estimate; later delivery-rate samples only raise it.
    pub fn set_link_capacity(&mut self, bytes_per_s: u64) {
        self.capacity = bytes_per_s as f64 / self.mss;
    }

    /// True until the first loss (or the flow window) ends slow start.
    pub fn in_slow_start(&self) -> bool {
        self.slow_start
    }

    /// Packet-sending period, microseconds (0 in slow start).
    pub fn period_us(&self) -> f64 {
        self.period_us
    }

    fn end_slow_start(&mut self) {
        self.slow_start = false;
        // UDT4 starts from the receive rate; a loss early in slow start (before many
        // samples) can leave that far below what the window was carrying, and a flow that
        // starts at a few packets a second on a busy link barely climbs, so it is at least
        // half the window's rate.
        let window_rate = self.cwnd_pkts * 1e6 / (self.rtt_us + SYN_US as f64);
        self.period_us = 1e6 / self.recv_rate.max(window_rate / 2.0);
        self.lsd = self.largest_sent;
    }

    /// True when `srtt_us` shows no queue on the path: within 1/8 of the minimum RTT
    /// (plus 2 ms for jitter). Congestion losses at a drop-tail queue come with it full.
    fn no_queue(&self, srtt_us: u64) -> bool {
        self.min_rtt_us != u64::MAX
            && srtt_us > 0
            && srtt_us <= self.min_rtt_us + self.min_rtt_us / 8 + 2_000
    }

    fn decrease(&mut self) {
        self.period_us = (self.period_us * 1.125).ceil();
    }
}

impl CongestionControl for Udt {
    fn wants_packet_events(&self) -> bool {
        true
    }

    fn packet_pairs(&self) -> bool {
        true
    }

    fn sends_messages(&self) -> bool {
        true
    }

    fn on_packet_received(&mut self, now: Instant, bytes: u64) {
        // Only data-sized packets: acknowledgements on the reverse path say nothing.
        if bytes as f64 * 2.0 >= self.mss {
            self.pairs.on_arrival(now, bytes);
        }
    }

    fn poll_message(&mut self, out: &mut [u8; super::MAX_CC_MSG]) -> usize {
        self.pairs
            .pending
            .take()
            .map_or(0, |c| CapacityMessage(c).encode(out))
    }

    fn on_custom(&mut self, _now: Instant, msg: &[u8]) {
        if let Some(CapacityMessage(c)) = CapacityMessage::decode(msg) {
            if c > 0 {
                self.capacity = c as f64 / self.mss;
                self.capacity_measured = true;
            }
        }
    }

    fn name(&self) -> &'static str {
        if self.noisy {
            "udt-noisy"
        } else {
            "udt"
        }
    }

    fn on_packet_sent(&mut self, s: &Sent) {
        self.largest_sent = self.largest_sent.max(s.pn);
    }

    fn on_ack(&mut self, a: &Ack) {
        if a.srtt_us > 0 {
            self.rtt_us = a.srtt_us as f64;
        }
        self.min_rtt_us = self.min_rtt_us.min(a.min_rtt_us);
        let sample = a.delivery_rate as f64 / self.mss;
        if sample > 0.0 {
            self.recv_rate = if self.recv_rate == 0.0 {
                sample
            } else {
                self.recv_rate * 0.875 + sample * 0.125
            };
            self.capacity = self.capacity.max(sample);
        }
        if self.slow_start {
            self.cwnd_pkts += a.bytes as f64 / self.mss;
            if self.cwnd_pkts > self.max_window {
                self.end_slow_start();
            }
            return;
        }
        if self.recv_rate > 0.0 {
            self.cwnd_pkts = self.recv_rate * (self.rtt_us + SYN_US as f64) / 1e6 + 16.0;
        }
        if self
            .last_rc
            .is_some_and(|t| a.now.saturating_since(t).as_micros() < SYN_US as u128)
        {
            return;
        }
        self.last_rc = Some(a.now);
        if !self.capacity_measured {
            self.capacity -= self.capacity / 1024.0;
        }
        if core::mem::take(&mut self.loss_since_rc) {
            return;
        }
        let mut b = self.capacity - 1e6 / self.period_us;
        if self.period_us > self.last_dec_period && self.capacity / 9.0 < b {
            b = self.capacity / 9.0;
        }
        let inc = increase(b, self.mss);
        let syn = SYN_US as f64;
        self.period_us = (self.period_us * syn / (self.period_us * inc + syn)).max(0.01);
    }

    fn on_loss(&mut self, l: &Loss) {
        self.largest_sent = self.largest_sent.max(l.largest_sent_pn);
        if self.slow_start {
            self.end_slow_start();
            return;
        }
        if self.noisy && self.no_queue(l.srtt_us) {
            return; // a link error, not congestion: the path holds no queue
        }
        self.loss_since_rc = true;
        if l.last_pn > self.lsd {
            // A congestion event: a new epoch.
            self.last_dec_period = self.period_us;
            if !self.noisy {
                self.decrease();
                if !self.no_queue(l.srtt_us) {
                    self.frozen_until = Some(l.now + Duration::from_micros(SYN_US));
                }
            }
            self.avg_nak =
                (self.avg_nak as f64 * 0.875 + self.nak_count as f64 * 0.125).ceil() as u64;
            self.nak_count = 1;
            self.dec_count = 1;
            self.lsd = self.largest_sent;
            self.dec_random = decrease_interval(self.avg_nak, self.lsd);
        } else {
            let more = self.dec_count < 5;
            self.dec_count += 1;
            if more {
                self.nak_count += 1;
                if self.nak_count.is_multiple_of(self.dec_random) {
                    self.decrease();
                    self.lsd = self.largest_sent;
                }
            }
        }
    }

    fn on_timeout(&mut self, _now: Instant, _backoff: u32) {
        // UDT4: a timeout only ends slow start; the lost packets are NAKed anyway.
        if self.slow_start {
            self.end_slow_start();
        }
    }

    fn cwnd(&self) -> u64 {
        (self.cwnd_pkts * self.mss) as u64
    }

    fn paused_until(&self) -> Option<Instant> {
        self.frozen_until
    }

    fn pacing_rate(&self) -> u64 {
        if self.slow_start || self.period_us <= 0.0 {
            0
        } else {
            (self.mss * 1e6 / self.period_us) as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::*;

    fn sent(u: &mut impl CongestionControl, pn: u64) {
        u.on_packet_sent(&Sent {
            now: ms(0),
            pn,
            bytes: MSS,
            bytes_in_flight: 0,
        });
    }

    /// A UDT sender past slow start at 1000 packets/s (1 MB/s) on a 10 MB/s link.
    fn steady(noisy: bool) -> Udt {
        let mut u = if noisy {
            Udt::noisy(&cfg())
        } else {
            Udt::new(&cfg())
        };
        for i in 0..5 {
            u.on_ack(&Ack {
                delivery_rate: 1_000_000,
                ..ack(i, 100 + i, 100)
            });
        }
        assert_eq!(u.cwnd(), 15 * MSS, "slow start adds every acked packet");
        assert_eq!(u.pacing_rate(), 0, "no inter-packet delay in slow start");
        sent(&mut u, 100);
        u.on_loss(&loss(50, 110, 100, 100));
        assert!(!u.in_slow_start());
        assert_eq!(u.period_us(), 1000.0, "period = 1 / receive rate");
        assert_eq!(u.pacing_rate(), 1_000_000);
        u.set_link_capacity(10_000_000);
        u
    }

    #[test]
    fn the_receiver_measures_capacity_from_packet_pairs_and_reports_it() {
        let mut rx = Udt::new(&cfg());
        let mut out = [0u8; super::super::MAX_CC_MSG];
        // Paced at one packet per 1000 µs, every 16th right behind the one before (10 µs):
        // the bottleneck carries MSS bytes per 10 µs.
        let mut now = 0u64;
        for i in 0..2 * PAIR_WINDOW as u64 {
            now += if i % 16 == 15 { 10 } else { 1000 };
            rx.on_packet_received(Instant::from_micros(now), MSS);
            // Acknowledgement-sized packets from the reverse path are not samples.
            rx.on_packet_received(Instant::from_micros(now), 60);
        }
        let n = rx.poll_message(&mut out);
        assert_eq!(
            CapacityMessage::decode(&out[..n]),
            Some(CapacityMessage(MSS * 100_000)),
            "capacity = MSS / 10 µs"
        );
        assert_eq!(rx.poll_message(&mut out), 0, "reported once until it moves");
        assert_eq!(CapacityMessage::decode(b"C1"), None);
    }

    #[test]
    fn a_reported_capacity_sets_the_available_bandwidth_of_the_increase() {
        // Same sender, two capacities: with ten times the room the period falls faster.
        let step = |capacity: u64| {
            let mut u = steady(false);
            let mut msg = [0u8; 9];
            CapacityMessage(capacity).encode(&mut msg);
            u.on_custom(ms(0), &msg);
            for i in 0..20 {
                u.on_ack(&ack(200 + i, 300 + i * 11, 100));
            }
            u.period_us()
        };
        let (small, large) = (step(2_000_000), step(200_000_000));
        assert!(large < small, "period {large} µs vs {small} µs");
        assert!(small < 1000.0, "both still increase");
    }

    #[test]
    fn the_increase_formula_matches_the_papers_table() {
        // 1500-byte packets: B in Mb/s → packets per SYN.
        let pkts = |mbps: f64| mbps * 1e6 / 8.0 / 1500.0;
        assert!((increase(pkts(0.05), 1500.0) - 1.0 / 1500.0).abs() < 1e-12);
        assert!((increase(pkts(0.5), 1500.0) - 0.001).abs() < 1e-12);
        assert!((increase(pkts(5.0), 1500.0) - 0.01).abs() < 1e-12);
        assert!((increase(pkts(50.0), 1500.0) - 0.1).abs() < 1e-12);
        assert!((increase(pkts(500.0), 1500.0) - 1.0).abs() < 1e-9);
        assert_eq!(increase(-3.0, 1500.0), 1.0 / 1500.0);
    }

    #[test]
    fn increases_once_per_syn_from_the_capacity_and_decreases_one_ninth() {
        let mut u = steady(false);
        // First SYN: B = min(10000 − 1000, 10000/9) = 1111 pkt/s = 8.9 Mb/s → inc 0.015.
        u.on_ack(&ack(61, 200, 100));
        let expect = 1000.0 * 10_000.0 / (1000.0 * 0.015 + 10_000.0);
        assert!((u.period_us() - expect).abs() < 1e-9, "{}", u.period_us());
        assert!(
            u.pacing_rate().abs_diff(1_001_500) <= 1,
            "{}",
            u.pacing_rate()
        );
        // Within the same SYN nothing more.
        u.on_ack(&ack(62, 205, 100));
        assert!((u.period_us() - expect).abs() < 1e-9);
        // A congestion event (lost packet above LSD): period × 1.125, ceiled.
        sent(&mut u, 300);
        u.on_loss(&loss(150, 207, 200, 300));
        assert_eq!(u.period_us(), 1124.0);
        assert_eq!(u.pacing_rate(), 1_000_000_000 / 1124);
        // The next SYN brings no increase: a loss happened since the last one.
        u.on_ack(&ack(63, 211, 100));
        assert_eq!(u.period_us(), 1124.0);
        // AvgNAK = 1, so DR = 1: every further loss event of the epoch decreases, four at most.
        let before = u.pacing_rate();
        for i in 0..10 {
            u.on_loss(&loss(151 + i, 221, 200, 300));
        }
        assert_eq!(
            u.period_us(),
            1803.0,
            "1124 → 1265 → 1424 → 1602 → 1803, then no more"
        );
        assert!(
            u.pacing_rate() * 2 > before,
            "never below half within an epoch"
        );
        // A timeout after slow start changes nothing.
        u.on_timeout(ms(300), 1);
        assert_eq!(u.pacing_rate(), 1_000_000_000 / 1803);
    }

    #[test]
    fn a_congestion_event_stops_sending_for_one_syn_and_further_decreases_do_not() {
        let mut u = steady(false);
        assert_eq!(
            u.paused_until(),
            None,
            "the end of slow start does not freeze"
        );
        sent(&mut u, 300);
        u.on_loss(&queued_loss(150, 207, 200, 300));
        assert_eq!(
            u.paused_until(),
            Some(ms(217)),
            "one SYN from the congestion event"
        );
        // Further loss events of the epoch decrease (DR = 1: 1125 → 1266) but do not freeze.
        u.on_loss(&queued_loss(151, 230, 200, 300));
        assert_eq!(u.period_us(), 1266.0);
        assert_eq!(u.paused_until(), Some(ms(217)));
        // The next congestion event freezes from its own time.
        sent(&mut u, 600);
        u.on_loss(&queued_loss(450, 400, 390, 600));
        assert_eq!(u.paused_until(), Some(ms(410)));
        // Noisy mode does not decrease on a congestion event, so it does not freeze.
        let mut n = steady(true);
        sent(&mut n, 300);
        n.on_loss(&queued_loss(150, 207, 200, 300));
        assert_eq!(n.paused_until(), None);
        // Nor does a congestion event while the path holds no queue: nothing to drain.
        let mut q = steady(false);
        sent(&mut q, 300);
        q.on_loss(&loss(150, 207, 200, 300)); // srtt 100 ms = the minimum RTT
        assert!(q.period_us() > 1000.0, "it still decreases");
        assert_eq!(q.paused_until(), None);
    }

    /// A loss report whose smoothed RTT shows a queue (150 ms over a 100 ms minimum).
    fn queued_loss(pn: u64, now_ms: u64, sent_ms: u64, largest: u64) -> Loss {
        Loss {
            srtt_us: 150_000,
            ..loss(pn, now_ms, sent_ms, largest)
        }
    }

    #[test]
    fn noisy_links_ignore_isolated_losses_but_not_repeated_ones() {
        let mut u = steady(true);
        let rate = u.pacing_rate();
        for k in 0..5u64 {
            // Each loss is above everything sent at the previous event: isolated.
            sent(&mut u, 1000 * (k + 2));
            u.on_loss(&queued_loss(
                1000 * (k + 1) + 500,
                300 + k * 50,
                280,
                1000 * (k + 2),
            ));
        }
        assert_eq!(
            u.pacing_rate(),
            rate,
            "isolated random losses do not cut the rate"
        );
        u.on_loss(&queued_loss(6000, 600, 580, 6000));
        assert!(u.pacing_rate() < rate, "a second loss in one event does");
        // The normal mode cuts on the first one.
        let mut n = steady(false);
        sent(&mut n, 2000);
        n.on_loss(&queued_loss(1500, 300, 280, 2000));
        assert!(n.pacing_rate() < rate);
    }

    #[test]
    fn noisy_links_ignore_every_loss_while_the_path_holds_no_queue() {
        let mut u = steady(true);
        let rate = u.pacing_rate();
        // Many losses in one epoch, but the smoothed RTT is the minimum: link errors.
        sent(&mut u, 5000);
        for k in 0..20u64 {
            u.on_loss(&loss(1000 + k * 100, 300 + k, 280, 5000));
        }
        assert_eq!(u.pacing_rate(), rate);
        // The normal mode reads them as congestion.
        let mut n = steady(false);
        sent(&mut n, 5000);
        for k in 0..20u64 {
            n.on_loss(&loss(1000 + k * 100, 300 + k, 280, 5000));
        }
        assert!(n.pacing_rate() < rate);
    }

    #[test]
    fn the_decrease_interval_is_random_in_range_and_repeatable() {
        let draws: Vec<u64> = (0..100).map(|lsd| decrease_interval(8, lsd)).collect();
        assert!(draws.iter().all(|d| (1..=8).contains(d)));
        let mut distinct = draws.clone();
        distinct.sort();
        distinct.dedup();
        assert!(distinct.len() >= 6, "{distinct:?}");
        assert_eq!(decrease_interval(8, 42), decrease_interval(8, 42));
        assert_eq!(decrease_interval(0, 42), 1);
    }
}
