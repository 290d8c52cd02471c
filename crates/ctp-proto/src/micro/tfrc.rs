//! TFRC: TCP-friendly rate control (RFC 5348) driving the rate (pacing) mechanism.
//!
//! The rate follows the TCP throughput equation (RFC 5348 §3.1, b = 1, t_RTO = 4R):
//!
//! > X_Bps = s / (R*sqrt(2*b*p/3) + t_RTO * (3*sqrt(3*b*p/8)) * p * (1+32*p^2))
//!
//! capped at twice the rate the receiver actually got over the last round trip. Before the
//! first loss the rate doubles every round trip (slow start). The loss event rate `p` comes
//! from the average loss interval over the last eight intervals with RFC 5348 §5.4's weights
//! (1, 1, 1, 1, 0.8, 0.6, 0.4, 0.2); losses within one round trip form one loss event.
//!
//! Deviation, written down: RFC 5348 measures `p` at the receiver; here the sender measures
//! it from ack tracking's loss reports (the "sender-side" variant), so that TFRC composes
//! with the same feedback every other policy uses. If a window mechanism is present, its
//! window is set to twice the rate times the RTT so that it never limits the rate.

use super::decl::{Group, MicroDecl, MicroId, Need};
use crate::engine::event::{Event, EventKind};
use crate::engine::path::PathVars;
use crate::engine::{Cx, Microprotocol};
use ctp_cc::time::Instant;
use std::collections::VecDeque;

/// The declaration of [`MicroId::Tfrc`]: what it needs, excludes and reads.
pub const DECL: MicroDecl = MicroDecl {
    needs: &[
        Need {
            micro: MicroId::Pacing,
            why: "the policy sets the rate the pacing mechanism enforces",
        },
        Need {
            micro: MicroId::AckTracking,
            why: "the loss event rate comes from acked and lost packets",
        },
    ],
    groups: &[Group::CongestionPolicy],
    params: &["max_udp_payload", "initial_window"],
    ..MicroDecl::new(MicroId::Tfrc)
};

const WEIGHTS: [f64; 8] = [1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2];

/// The TCP throughput equation: bytes per second for segment size `s` bytes, round-trip
/// time `rtt` seconds and loss event rate `p`.
pub fn throughput_equation(s: f64, rtt: f64, p: f64) -> f64 {
    if p <= 0.0 {
        return f64::INFINITY;
    }
    let t_rto = 4.0 * rtt;
    let denom = rtt * (2.0 * p / 3.0).sqrt()
        + t_rto * (3.0 * (3.0 * p / 8.0).sqrt()) * p * (1.0 + 32.0 * p * p);
    s / denom
}

/// The TFRC policy.
#[derive(Debug)]
pub struct Tfrc {
    s: u64,
    /// Closed loss intervals (packets), newest first.
    intervals: VecDeque<u64>,
    /// Packets acknowledged since the last loss event.
    current: u64,
    last_event: Option<Instant>,
    slow_start: bool,
    /// Bytes acknowledged in the current round trip, and when it started.
    round_bytes: u64,
    round_start: Option<Instant>,
    /// Receive rate over the last full round trip, bytes per second.
    x_recv: u64,
}

impl Tfrc {
    /// A policy for segments of `s` bytes starting at `initial_packets` per 100 ms.
    pub fn new(s: u64, initial_packets: u64, session: &mut PathVars) -> Self {
        session.pacing_rate = s * initial_packets.max(2) * 10;
        Tfrc {
            s,
            intervals: VecDeque::new(),
            current: 0,
            last_event: None,
            slow_start: true,
            round_bytes: 0,
            round_start: None,
            x_recv: 0,
        }
    }

    /// Loss event rate from the average loss interval (0 before the first loss).
    pub fn loss_event_rate(&self) -> f64 {
        if self.intervals.is_empty() {
            return 0.0;
        }
        let avg = |with_current: bool| {
            let mut values: Vec<u64> = Vec::with_capacity(9);
            if with_current {
                values.push(self.current);
            }
            values.extend(self.intervals.iter().copied());
            let (mut sum, mut wsum) = (0.0, 0.0);
            for (v, w) in values.iter().zip(WEIGHTS) {
                sum += *v as f64 * w;
                wsum += w;
            }
            sum / wsum
        };
        let mean = avg(true).max(avg(false)).max(1.0);
        1.0 / mean
    }

    fn srtt_s(s: &PathVars) -> f64 {
        if s.srtt_us == 0 {
            0.1
        } else {
            s.srtt_us as f64 / 1e6
        }
    }

    fn update(&mut self, cx: &mut Cx<'_, '_>) {
        let s = &mut cx.st.path;
        let rtt = Self::srtt_s(s);
        let cap = if self.x_recv > 0 {
            2 * self.x_recv
        } else {
            u64::MAX
        };
        let floor = (self.s as f64 / 64.0) as u64;
        let rate = if self.slow_start {
            s.pacing_rate
        } else {
            throughput_equation(self.s as f64, rtt, self.loss_event_rate())
                .min(u64::MAX as f64 / 2.0) as u64
        };
        s.pacing_rate = rate.min(cap).max(floor.max(1));
        if s.cwnd != u64::MAX {
            s.cwnd = ((s.pacing_rate as f64 * rtt * 2.0) as u64).max(2 * self.s);
        }
        cx.raise(Event::CongestionChanged);
    }

    fn on_ack(&mut self, bytes: u64, cx: &mut Cx<'_, '_>) {
        self.current += 1;
        self.round_bytes += bytes;
        let now = cx.now;
        let rtt_us = (Self::srtt_s(&cx.st.path) * 1e6) as u64;
        let start = *self.round_start.get_or_insert(now);
        let elapsed = now.saturating_since(start).as_micros() as u64;
        if elapsed >= rtt_us.max(1) {
            self.x_recv = self.round_bytes * 1_000_000 / elapsed.max(1);
            self.round_bytes = 0;
            self.round_start = Some(now);
            if self.slow_start {
                cx.st.path.pacing_rate = cx.st.path.pacing_rate.saturating_mul(2);
            }
            self.update(cx);
        }
    }

    fn on_loss(&mut self, sent_at: Instant, cx: &mut Cx<'_, '_>) {
        // Losses of packets sent before the last loss event belong to it.
        if self.last_event.is_some_and(|t| sent_at <= t) {
            return;
        }
        self.last_event = Some(cx.now);
        if self.slow_start {
            // RFC 5348 §6.3.1: seed the history with the interval that matches half the rate.
            self.slow_start = false;
            let rtt = Self::srtt_s(&cx.st.path);
            let target = (cx.st.path.pacing_rate / 2) as f64;
            let mut seeded = 1u64;
            while seeded < 1 << 30
                && throughput_equation(self.s as f64, rtt, 1.0 / seeded as f64) < target
            {
                seeded *= 2;
            }
            self.intervals.push_front(seeded);
        } else {
            self.intervals.push_front(self.current.max(1));
        }
        self.intervals.truncate(WEIGHTS.len());
        self.current = 0;
        self.update(cx);
    }
}

impl Microprotocol for Tfrc {
    fn bindings(&self) -> &'static [EventKind] {
        &[
            EventKind::PacketAcked,
            EventKind::PacketLost,
            EventKind::RtoExpired,
        ]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        match *ev {
            Event::PacketAcked(p) if p.in_flight => self.on_ack(p.bytes as u64, cx),
            Event::PacketLost(p) if p.in_flight => self.on_loss(p.sent_at, cx),
            Event::RtoExpired { .. } => {
                // No feedback for a timeout: halve (RFC 5348 §4.4, no-feedback timer).
                let s = &mut cx.st.path;
                s.pacing_rate = (s.pacing_rate / 2).max((self.s / 64).max(1));
                self.x_recv /= 2;
                cx.raise(Event::CongestionChanged);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_throughput_equation_matches_rfc_5348() {
        // s = 1460 B, R = 100 ms, p = 1%: about 164 kB/s.
        let x = throughput_equation(1460.0, 0.1, 0.01);
        assert!((x - 164_000.0).abs() < 1_000.0, "{x}");
        // More loss, less rate; longer RTT, less rate.
        assert!(throughput_equation(1460.0, 0.1, 0.05) < x / 2.0);
        assert!(throughput_equation(1460.0, 0.2, 0.01) < x);
        assert!(throughput_equation(1460.0, 0.1, 0.0).is_infinite());
    }
}
