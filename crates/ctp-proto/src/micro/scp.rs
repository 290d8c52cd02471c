//! An SCP-style congestion policy (after the Streaming Control Protocol of Cen, Pu and
//! Walpole, as CTP uses it): it drives *both* the rate mechanism and the window mechanism
//! from the round-trip time.
//!
//! - Start-up doubles the rate every round trip (each acknowledged byte adds a byte per round
//!   trip, as slow start does for a window, but never beyond 1.5 × the rate they come back
//!   at) until a loss, or until three acknowledgements in a row see the RTT grown by
//!   HyStart++'s threshold (min RTT / 8, within 4–16 ms: a queue is forming). It
//!   then leaves at the rate the acknowledgements arrive at (the bottleneck's rate, measured
//!   while it was saturated), not at half of an overshoot a round trip old: doubling blind for
//!   a whole round trip would overrun a queue of one bandwidth-delay product. For one round
//!   trip after it leaves, it sends at half that rate to drain the queue its last doubling
//!   built, and losses of packets sent before it left do not count again.
//! - Steady state raises the rate by one packet per round trip while the RTT stays within
//!   50 % of its minimum; while it does not, a rate not below the one acknowledgements come
//!   back at steps to a sixteenth under it (so the queue drains instead of growing until it
//!   overflows) and a lower one holds. A loss halves the rate (once per round trip).
//! - A retransmission timeout falls back to the initial rate.
//! - The window follows the rate: 1.5 × rate × smoothed RTT (never under two packets), so a
//!   stream neither bursts beyond what the rate allows nor stalls on the window.

use super::decl::{Group, MicroDecl, MicroId, Need};
use crate::engine::event::{Event, EventKind};
use crate::engine::path::PathVars;
use crate::engine::{Cx, Microprotocol};
use ctp_cc::time::Instant;

/// The declaration of [`MicroId::Scp`]: what it needs, excludes and reads.
pub const DECL: MicroDecl = MicroDecl {
    needs: &[
        Need {
            micro: MicroId::CongestionWindow,
            why: "the policy drives the window mechanism",
        },
        Need {
            micro: MicroId::Pacing,
            why: "the policy drives the pacing (rate) mechanism",
        },
        Need {
            micro: MicroId::AckTracking,
            why: "the policy reacts to acked and lost packets",
        },
    ],
    groups: &[Group::CongestionPolicy],
    params: &["max_udp_payload", "initial_window"],
    ..MicroDecl::new(MicroId::Scp)
};

/// The SCP-style policy.
#[derive(Debug)]
pub struct Scp {
    mss: u64,
    initial_rate: u64,
    startup: bool,
    last_decrease: Option<Instant>,
    last_increase: Option<Instant>,
    /// Consecutive acknowledgements that saw a queue during start-up.
    queued_acks: u32,
    ack_rate: AckRate,
    /// After start-up: the rate to resume once the drain round trip ends at the instant.
    drain: Option<(Instant, u64)>,
}

/// The rate at which acknowledged bytes come back: bytes over intervals of a quarter of the
/// minimum RTT, the largest sample of the current and the previous round trip.
#[derive(Debug, Default)]
struct AckRate {
    start: Option<Instant>,
    bytes: u64,
    current_max: u64,
    previous_max: u64,
}

impl AckRate {
    fn on_ack(&mut self, now: Instant, bytes: u64, min_rtt_us: u64) {
        let Some(start) = self.start else {
            self.start = Some(now);
            return;
        };
        self.bytes += bytes;
        let elapsed = now.saturating_since(start).as_micros() as u64;
        if elapsed >= (min_rtt_us / 4).max(1_000) {
            let rate = self.bytes * 1_000_000 / elapsed;
            self.current_max = self.current_max.max(rate);
            self.start = Some(now);
            self.bytes = 0;
        }
    }

    /// Starts a new round trip of samples.
    fn next_round(&mut self) {
        self.previous_max = self.current_max;
        self.current_max = 0;
    }

    /// Bytes per second, 0 until measured.
    fn estimate(&self) -> u64 {
        self.current_max.max(self.previous_max)
    }
}

impl Scp {
    /// A policy starting at `initial_packets` packets of `mss` bytes per initial RTT guess
    /// (100 ms until measured).
    pub fn new(mss: u64, initial_packets: u64, s: &mut PathVars) -> Self {
        let initial_rate = mss * initial_packets.max(2) * 10; // per 100 ms
        s.pacing_rate = initial_rate;
        s.cwnd = mss * initial_packets.max(2);
        Scp {
            mss,
            initial_rate,
            startup: true,
            last_decrease: None,
            last_increase: None,
            queued_acks: 0,
            ack_rate: AckRate::default(),
            drain: None,
        }
    }

    fn srtt_us(s: &PathVars) -> u64 {
        if s.srtt_us == 0 {
            100_000
        } else {
            s.srtt_us
        }
    }

    fn set_window(&self, s: &mut PathVars) {
        let w = (s.pacing_rate as u128 * Self::srtt_us(s) as u128 * 3 / 2 / 1_000_000) as u64;
        s.cwnd = w.max(2 * self.mss);
    }

    /// Leaves start-up for the measured bottleneck rate (or half the current rate before
    /// anything was measured), draining at half that for one round trip first.
    fn leave_startup(&mut self, now: Instant, s: &mut PathVars) {
        self.startup = false;
        self.last_decrease = Some(now);
        let floor = self.mss * 1_000_000 / Self::srtt_us(s);
        let measured = self.ack_rate.estimate();
        let cruise = if measured > 0 {
            measured.min(s.pacing_rate)
        } else {
            s.pacing_rate / 2
        }
        .max(floor);
        s.pacing_rate = (cruise / 2).max(floor);
        let drain_end = now + core::time::Duration::from_micros(Self::srtt_us(s));
        self.drain = Some((drain_end, cruise));
        self.set_window(s);
    }

    fn on_ack(&mut self, bytes: usize, cx: &mut Cx<'_, '_>) {
        let now = cx.now;
        let s = &mut cx.st.path;
        if s.min_rtt_us == u64::MAX {
            return; // nothing to judge a queue or a rate against yet
        }
        self.ack_rate.on_ack(now, bytes as u64, s.min_rtt_us);
        let changed = if self.startup {
            self.startup_ack(now, bytes as u64, s)
        } else if self.drain.is_some() {
            self.drain_ack(now, s)
        } else {
            self.steady_ack(now, s)
        };
        if changed {
            cx.raise(Event::CongestionChanged);
        }
    }

    /// True (and a new round of ack-rate samples) once per smoothed RTT.
    fn new_round(&mut self, now: Instant, srtt_us: u64) -> bool {
        let due = self
            .last_increase
            .is_none_or(|t| now.saturating_since(t).as_micros() as u64 >= srtt_us);
        if due {
            self.last_increase = Some(now);
            self.ack_rate.next_round();
        }
        due
    }

    /// Start-up: leave on a queue, otherwise grow the rate by what this ack carried.
    fn startup_ack(&mut self, now: Instant, bytes: u64, s: &mut PathVars) -> bool {
        // HyStart++'s delay threshold: min RTT / 8, clamped to 4..16 ms.
        let threshold = (s.min_rtt_us / 8).clamp(4_000, 16_000);
        if s.latest_rtt_us > s.min_rtt_us + threshold {
            self.queued_acks += 1;
        } else {
            self.queued_acks = 0;
        }
        if self.queued_acks >= 3 {
            self.leave_startup(now, s);
            self.last_increase = Some(now);
            return true;
        }
        // Slow start in rate terms: each acknowledged byte adds a byte per round trip, so
        // a round trip of acknowledgements doubles the rate, smoothly rather than in one
        // step (a step would overshoot by up to a whole rate for a round trip). Never
        // beyond 1.5 × the rate acknowledgements come back at: past the bottleneck, the
        // queue then grows by at most half a bandwidth-delay product in the round trip it
        // takes to see it.
        let srtt = Self::srtt_us(s);
        let grown = s.pacing_rate.saturating_add(bytes * 1_000_000 / srtt);
        let measured = self.ack_rate.estimate();
        let cap = if measured > 0 {
            (measured * 3 / 2).max(s.pacing_rate)
        } else {
            u64::MAX
        };
        s.pacing_rate = grown.min(cap);
        self.set_window(s);
        self.new_round(now, srtt);
        true
    }

    /// The round trip after start-up: half rate until it ends, then the cruise rate.
    fn drain_ack(&mut self, now: Instant, s: &mut PathVars) -> bool {
        let Some((end, cruise)) = self.drain else {
            return false;
        };
        if now < end {
            return false;
        }
        self.drain = None;
        s.pacing_rate = s.pacing_rate.max(cruise);
        self.last_increase = Some(now);
        self.set_window(s);
        true
    }

    /// Steady state, once per round trip: one packet more while the RTT stays within 50 %
    /// of its minimum; otherwise, while the rate is not below what comes back, the queue is
    /// not draining (holding would let it grow until it overflows): step to a sixteenth
    /// under the measured rate, then hold.
    fn steady_ack(&mut self, now: Instant, s: &mut PathVars) -> bool {
        let srtt = Self::srtt_us(s);
        if !self.new_round(now, srtt) {
            return false;
        }
        if s.srtt_us * 2 <= s.min_rtt_us * 3 {
            s.pacing_rate += self.mss * 1_000_000 / srtt;
        } else {
            let measured = self.ack_rate.estimate();
            if measured > 0 && s.pacing_rate >= measured {
                s.pacing_rate = (measured - measured / 16).max(self.mss * 1_000_000 / srtt);
            }
        }
        self.set_window(s);
        true
    }

    fn on_loss(&mut self, sent_at: Instant, cx: &mut Cx<'_, '_>) {
        if self.last_decrease.is_some_and(|t| sent_at <= t) {
            return;
        }
        let now = cx.now;
        self.last_decrease = Some(now);
        let s = &mut cx.st.path;
        if self.startup {
            self.leave_startup(now, s);
        } else if let Some((end, cruise)) = self.drain {
            // A loss while draining: resume at half the cruise rate.
            self.drain = Some((end, cruise / 2));
        } else {
            s.pacing_rate = (s.pacing_rate / 2).max(self.mss * 1_000_000 / Self::srtt_us(s));
            self.set_window(s);
        }
        cx.raise(Event::CongestionChanged);
    }

    /// Whether the policy is still in start-up.
    pub fn in_startup(&self) -> bool {
        self.startup
    }
}

impl Microprotocol for Scp {
    fn bindings(&self) -> &'static [EventKind] {
        &[
            EventKind::PacketAcked,
            EventKind::PacketLost,
            EventKind::RtoExpired,
        ]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        match *ev {
            Event::PacketAcked(p) if p.in_flight => self.on_ack(p.bytes, cx),
            Event::PacketLost(p) if p.in_flight => self.on_loss(p.sent_at, cx),
            Event::RtoExpired { .. } => {
                self.startup = true;
                self.queued_acks = 0;
                self.drain = None;
                self.last_decrease = Some(cx.now);
                cx.st.path.pacing_rate = self.initial_rate;
                self.set_window(&mut cx.st.path);
                cx.raise(Event::CongestionChanged);
            }
            _ => {}
        }
    }
}
