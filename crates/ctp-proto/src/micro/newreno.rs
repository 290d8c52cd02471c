//! NewReno congestion policy (RFC 6582 / RFC 9002 style): slow start, congestion avoidance,
//! one multiplicative decrease per recovery period, collapse to the minimum window on a
//! retransmission timeout. It changes only the shared `cwnd` (and, for pacing, the rate of
//! 1.25 × cwnd / srtt — 2 × in slow start); the window and pacing mechanisms enforce them.
//!
//! The arithmetic is the congestion-control library's [`crate::cc::newreno::NewReno`]; this
//! microprotocol is its lean binding for the built-in profiles: it listens to
//! acknowledgements, losses and timeouts only (no per-packet sent/received events, no
//! delivery-rate samples), and publishes a pacing rate only once the RTT is known.

use crate::cc::{self, Ack, CongestionControl, Loss};
use crate::engine::event::{Event, EventKind};
use crate::engine::session::Session;
use crate::engine::{Cx, Microprotocol};

/// The NewReno policy.
#[derive(Debug)]
pub struct NewReno {
    algo: cc::newreno::NewReno,
}

impl NewReno {
    /// A policy with an initial window of `initial_packets` segments of `mss` bytes.
    pub fn new(mss: u64, initial_packets: u64, s: &mut Session) -> Self {
        let algo = cc::newreno::NewReno::new(&cc::Config {
            mss,
            initial_window: initial_packets,
            ..cc::Config::default()
        });
        s.cwnd = algo.cwnd();
        NewReno { algo }
    }

    /// Current slow-start threshold.
    pub fn ssthresh(&self) -> u64 {
        self.algo.ssthresh()
    }

    fn publish(&self, cx: &mut Cx<'_, '_>) {
        let s = &mut cx.st.session;
        s.cwnd = self.algo.cwnd();
        if s.srtt_us > 0 {
            s.pacing_rate = self.algo.pacing_rate();
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
        let now = cx.now;
        let s = &cx.st.session;
        match *ev {
            Event::PacketAcked(p) if p.in_flight => self.algo.on_ack(&Ack {
                now,
                pn: p.pn,
                bytes: p.bytes as u64,
                sent_at: p.sent_at,
                rtt_us: now.saturating_since(p.sent_at).as_micros() as u64,
                srtt_us: s.srtt_us,
                min_rtt_us: s.min_rtt_us,
                bytes_in_flight: s.bytes_in_flight,
                delivery_rate: 0,
            }),
            Event::PacketLost(p) if p.in_flight => self.algo.on_loss(&Loss {
                now,
                first_pn: p.pn,
                last_pn: p.pn,
                bytes: p.bytes as u64,
                sent_at: p.sent_at,
                largest_sent_pn: 0,
                srtt_us: s.srtt_us,
            }),
            Event::RtoExpired { backoff } => self.algo.on_timeout(now, backoff),
            _ => return,
        }
        self.publish(cx);
    }
}
