//! NewReno congestion policy (RFC 6582 / RFC 9002 style): slow start, congestion avoidance,
//! one multiplicative decrease per recovery period, collapse to the minimum window on a
//! retransmission timeout. It changes only the shared `cwnd` (and, for pacing, the rate of
//! 1.25 × cwnd / srtt — 2 × in slow start); the window and pacing mechanisms enforce them.
//!
//! The arithmetic is the congestion-control library's [`ctp_cc::newreno::NewReno`]; this
//! microprotocol is its lean binding for the built-in profiles: it listens to
//! acknowledgements, losses and timeouts only (no per-packet sent/received events, no
//! delivery-rate samples), and publishes a pacing rate only once the RTT is known.

use super::cc::{ack, loss};
use super::decl::{Group, MicroDecl, MicroId, Need};
use crate::engine::event::{Event, EventKind};
use crate::engine::path::PathVars;
use crate::engine::{Cx, Microprotocol};
use ctp_cc::{self as cc, CongestionControl};

/// The declaration of [`MicroId::NewReno`]: what it needs, excludes and reads.
pub const DECL: MicroDecl = MicroDecl {
    needs: &[
        Need {
            micro: MicroId::CongestionWindow,
            why: "a congestion policy needs the window mechanism it drives",
        },
        Need {
            micro: MicroId::AckTracking,
            why: "the policy reacts to acked and lost packets",
        },
    ],
    groups: &[Group::CongestionPolicy],
    params: &["max_udp_payload", "initial_window"],
    ..MicroDecl::new(MicroId::NewReno)
};

/// The NewReno policy.
#[derive(Debug)]
pub struct NewReno {
    algo: cc::newreno::NewReno,
}

impl NewReno {
    /// A policy with an initial window of `initial_packets` segments of `mss` bytes.
    pub fn new(mss: u64, initial_packets: u64, s: &mut PathVars) -> Self {
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
        let s = &mut cx.st.path;
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
        let s = &cx.st.path;
        match *ev {
            Event::PacketAcked(p) if p.in_flight => self.algo.on_ack(&ack(now, p, s, 0)),
            Event::PacketLost(p) if p.in_flight => self.algo.on_loss(&loss(now, p, s, 0)),
            Event::RtoExpired { backoff } => self.algo.on_timeout(now, backoff),
            _ => return,
        }
        self.publish(cx);
    }
}
