//! An SCP-style congestion policy (after the Streaming Control Protocol of Cen, Pu and
//! Walpole, as CTP uses it): it drives *both* the rate mechanism and the window mechanism
//! from the round-trip time.
//!
//! - Start-up doubles the rate every round trip until a loss, or until the RTT grows 25 %
//!   over its minimum (a queue is forming).
//! - Steady state raises the rate by one packet per round trip while the RTT stays within
//!   50 % of its minimum, holds it otherwise, and halves it on a loss (once per round trip).
//! - A retransmission timeout falls back to the initial rate.
//! - The window follows the rate: 1.5 × rate × smoothed RTT (never under two packets), so a
//!   stream neither bursts beyond what the rate allows nor stalls on the window.

use crate::engine::event::{Event, EventKind};
use crate::engine::session::Session;
use crate::engine::{Cx, Microprotocol};
use crate::time::Instant;

/// The SCP-style policy.
#[derive(Debug)]
pub struct Scp {
    mss: u64,
    initial_rate: u64,
    startup: bool,
    last_decrease: Option<Instant>,
    last_increase: Option<Instant>,
}

impl Scp {
    /// A policy starting at `initial_packets` packets of `mss` bytes per initial RTT guess
    /// (100 ms until measured).
    pub fn new(mss: u64, initial_packets: u64, s: &mut Session) -> Self {
        let initial_rate = mss * initial_packets.max(2) * 10; // per 100 ms
        s.pacing_rate = initial_rate;
        s.cwnd = mss * initial_packets.max(2);
        Scp {
            mss,
            initial_rate,
            startup: true,
            last_decrease: None,
            last_increase: None,
        }
    }

    fn srtt_us(s: &Session) -> u64 {
        if s.srtt_us == 0 {
            100_000
        } else {
            s.srtt_us
        }
    }

    fn set_window(&self, s: &mut Session) {
        let w = (s.pacing_rate as u128 * Self::srtt_us(s) as u128 * 3 / 2 / 1_000_000) as u64;
        s.cwnd = w.max(2 * self.mss);
    }

    fn on_ack(&mut self, cx: &mut Cx<'_, '_>) {
        let now = cx.now;
        let s = &mut cx.st.session;
        let srtt = Self::srtt_us(s);
        let once_per_rtt = self
            .last_increase
            .is_none_or(|t| now.saturating_since(t).as_micros() as u64 >= srtt);
        if !once_per_rtt || s.min_rtt_us == u64::MAX {
            return;
        }
        self.last_increase = Some(now);
        let queueing = s.srtt_us * 4 > s.min_rtt_us * 5;
        if self.startup {
            if queueing {
                self.startup = false;
            } else {
                s.pacing_rate = s.pacing_rate.saturating_mul(2);
            }
        } else if s.srtt_us * 2 <= s.min_rtt_us * 3 {
            s.pacing_rate += self.mss * 1_000_000 / srtt;
        }
        self.set_window(s);
        cx.raise(Event::CongestionChanged);
    }

    fn on_loss(&mut self, sent_at: Instant, cx: &mut Cx<'_, '_>) {
        if self.last_decrease.is_some_and(|t| sent_at <= t) {
            return;
        }
        self.last_decrease = Some(cx.now);
        self.startup = false;
        let s = &mut cx.st.session;
        s.pacing_rate = (s.pacing_rate / 2).max(self.mss * 1_000_000 / Self::srtt_us(s));
        self.set_window(s);
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
            Event::PacketAcked(p) if p.in_flight => self.on_ack(cx),
            Event::PacketLost(p) if p.in_flight => self.on_loss(p.sent_at, cx),
            Event::RtoExpired { .. } => {
                self.startup = true;
                self.last_decrease = Some(cx.now);
                cx.st.session.pacing_rate = self.initial_rate;
                self.set_window(&mut cx.st.session);
                cx.raise(Event::CongestionChanged);
            }
            _ => {}
        }
    }
}
