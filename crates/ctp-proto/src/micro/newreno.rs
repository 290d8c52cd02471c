//! NewReno congestion policy (RFC 6582 / RFC 9002 style): slow start, congestion avoidance,
//! one multiplicative decrease per recovery period, collapse to the minimum window on a
//! retransmission timeout. It changes only the shared `cwnd` (and, for pacing, the rate of
//! 1.25 × cwnd / srtt — 2 × in slow start); the window and pacing mechanisms enforce them.

use crate::engine::event::{Event, EventKind};
use crate::engine::{Cx, Microprotocol};
use crate::time::Instant;

/// The NewReno policy.
#[derive(Debug)]
pub struct NewReno {
    mss: u64,
    ssthresh: u64,
    recovery_start: Option<Instant>,
    acked_in_ca: u64,
    min_window: u64,
}

impl NewReno {
    /// A policy with an initial window of `initial_packets` segments of `mss` bytes.
    pub fn new(mss: u64, initial_packets: u64, s: &mut crate::engine::session::Session) -> Self {
        s.cwnd = mss * initial_packets.max(2);
        NewReno {
            mss,
            ssthresh: u64::MAX,
            recovery_start: None,
            acked_in_ca: 0,
            min_window: 2 * mss,
        }
    }

    /// Current slow-start threshold.
    pub fn ssthresh(&self) -> u64 {
        self.ssthresh
    }

    fn update_rate(&self, cx: &mut Cx<'_, '_>) {
        let s = &mut cx.st.session;
        if s.srtt_us > 0 {
            let gain = if s.cwnd < self.ssthresh { 2.0 } else { 1.25 };
            s.pacing_rate = (gain * s.cwnd as f64 * 1e6 / s.srtt_us as f64) as u64;
        }
        cx.raise(Event::CongestionChanged);
    }
}

impl Microprotocol for NewReno {
    fn bindings(&self) -> &'static [EventKind] {
        &[
            EventKind::PacketAcked,
            EventKind::PacketLost,
            EventKind::RtoExpired,
        ]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        match *ev {
            Event::PacketAcked(p) if p.in_flight => {
                if self.recovery_start.is_some_and(|r| p.sent_at <= r) {
                    // Still recovering from a loss in this window: no growth.
                    self.update_rate(cx);
                    return;
                }
                let s = &mut cx.st.session;
                if s.cwnd < self.ssthresh {
                    s.cwnd += p.bytes as u64;
                } else {
                    self.acked_in_ca += p.bytes as u64;
                    if self.acked_in_ca >= s.cwnd {
                        self.acked_in_ca -= s.cwnd;
                        s.cwnd += self.mss;
                    }
                }
                self.update_rate(cx);
            }
            Event::PacketLost(p) if p.in_flight => {
                if self.recovery_start.is_some_and(|r| p.sent_at <= r) {
                    return;
                }
                self.recovery_start = Some(cx.now);
                let s = &mut cx.st.session;
                self.ssthresh = (s.cwnd / 2).max(self.min_window);
                s.cwnd = self.ssthresh;
                self.acked_in_ca = 0;
                self.update_rate(cx);
            }
            Event::RtoExpired { .. } => {
                let s = &mut cx.st.session;
                self.ssthresh = (s.cwnd / 2).max(self.min_window);
                s.cwnd = self.min_window;
                self.recovery_start = Some(cx.now);
                self.update_rate(cx);
            }
            _ => {}
        }
    }
}
