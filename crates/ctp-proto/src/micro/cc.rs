//! The congestion-policy microprotocol that runs any algorithm of the [`ctp_cc`] library
//! (also the `newreno` microprotocol of the built-in profiles, with the library's NewReno).
//!
//! It adapts engine events to the algorithm's hooks — `PacketSent` → `on_packet_sent`,
//! `PacketAcked` → `on_ack` (with the RTT sample, the smoothed and minimum RTT and a
//! delivery-rate sample), `PacketLost` → `on_loss`, `RtoExpired` → `on_timeout`,
//! `PacketReceived` → `on_packet_received`, a `CC_MSG` frame from the peer → `on_custom` —
//! and after each one writes the algorithm's
//! outputs into the shared `cwnd` and `pacing_rate`, raising `CongestionChanged` when they
//! changed. The window and pacing mechanisms enforce them, exactly as for `newreno`. An
//! algorithm that talks to its peer (UDT's receiver-side link-capacity estimate) has its
//! messages written as `CC_MSG` frames into outgoing packets.
//!
//! Delivery-rate samples come from a [`DeliveryRate`] sampler, kept only for algorithms
//! that read per-packet events.

use super::decl::{Group, MicroDecl, MicroId, Need};
use crate::engine::event::{Event, EventKind, PacketInfo};
use crate::engine::path::PathVars;
use crate::engine::{Cx, FrameWriter, Microprotocol};
use crate::wire::frame::Frame;
use ctp_cc::rate::{Acks, DeliveryRate};
use ctp_cc::time::Instant;
use ctp_cc::{Ack, AnyCc, CcKind, Config, CongestionControl, Loss, Sent, MAX_CC_MSG};

/// The declaration of [`MicroId::Cc`]: what it needs, excludes and reads.
pub const DECL: MicroDecl = MicroDecl {
    needs: &[
        Need {
            micro: MicroId::CongestionWindow,
            why: "the algorithm's window is enforced by the window mechanism (rate-only algorithms leave it open)",
        },
        Need {
            micro: MicroId::AckTracking,
            why: "the algorithm reacts to acked and lost packets",
        },
    ],
    groups: &[Group::CongestionPolicy],
    params: &["cc", "cc_rate_kbps", "max_udp_payload", "initial_window", "flow_window"],
    ..MicroDecl::new(MicroId::Cc)
};

/// The library's view of an acknowledged packet.
pub(crate) fn ack(now: Instant, p: PacketInfo, s: &PathVars, delivery_rate: u64) -> Ack {
    Ack {
        now,
        pn: p.pn,
        bytes: p.bytes as u64,
        sent_at: p.sent_at,
        rtt_us: now.saturating_since(p.sent_at).as_micros() as u64,
        srtt_us: s.srtt_us,
        min_rtt_us: s.min_rtt_us,
        bytes_in_flight: s.bytes_in_flight,
        delivery_rate,
    }
}

/// The library's view of a lost packet.
pub(crate) fn loss(now: Instant, p: PacketInfo, s: &PathVars, largest_sent_pn: u64) -> Loss {
    Loss {
        now,
        first_pn: p.pn,
        last_pn: p.pn,
        bytes: p.bytes as u64,
        sent_at: p.sent_at,
        largest_sent_pn,
        srtt_us: s.srtt_us,
    }
}

/// The `cc` microprotocol: one algorithm from the library, driving the shared variables.
#[derive(Debug)]
pub struct CcPolicy {
    algo: AnyCc,
    largest_sent: u64,
    rate: DeliveryRate,
}

impl CcPolicy {
    /// Builds `kind` from `cfg` and publishes its initial window and rate.
    pub fn new(kind: CcKind, cfg: &Config, s: &mut PathVars) -> Self {
        let algo = kind.build(cfg);
        let wants = algo.wants_packet_events();
        s.cwnd = algo.cwnd();
        s.pacing_rate = algo.pacing_rate();
        s.pacing_pairs = algo.packet_pairs();
        CcPolicy {
            algo,
            largest_sent: 0,
            rate: if wants {
                DeliveryRate::new(cfg.max_window, Acks::Selective)
            } else {
                DeliveryRate::off()
            },
        }
    }

    /// The algorithm.
    pub fn algorithm(&self) -> &AnyCc {
        &self.algo
    }

    /// The algorithm, mutably (e.g. `Blast::set_rate` through a match on [`AnyCc`]).
    pub fn algorithm_mut(&mut self) -> &mut AnyCc {
        &mut self.algo
    }

    fn publish(&self, s: &mut PathVars) -> bool {
        let (cwnd, rate) = (self.algo.cwnd(), self.algo.pacing_rate());
        let paused_until = self.algo.paused_until();
        let changed = s.cwnd != cwnd || s.pacing_rate != rate || s.paused_until != paused_until;
        s.cwnd = cwnd;
        s.pacing_rate = rate;
        s.paused_until = paused_until;
        changed
    }

    /// Slots in the ring now (tests).
    #[cfg(test)]
    pub(crate) fn ring_len(&self) -> usize {
        self.rate.ring_len()
    }
}

impl Microprotocol for CcPolicy {
    fn bindings(&self) -> &'static [EventKind] {
        // Per-packet events only for the algorithms that read them: the others (NewReno,
        // the default of most profiles) cost nothing per packet sent or received.
        if self.algo.wants_packet_events() {
            &[
                EventKind::PacketSent,
                EventKind::PacketAcked,
                EventKind::PacketLost,
                EventKind::RtoExpired,
                EventKind::PacketReceived,
                EventKind::CcMessage,
                EventKind::CongestionMessage,
            ]
        } else {
            &[
                EventKind::PacketAcked,
                EventKind::PacketLost,
                EventKind::RtoExpired,
                EventKind::CcMessage,
                EventKind::CongestionMessage,
            ]
        }
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        let now = cx.now;
        match *ev {
            Event::PacketSent(p) if p.in_flight => {
                self.largest_sent = self.largest_sent.max(p.pn);
                // Not `idle` even with nothing in flight: whether the window counted this
                // packet yet depends on the composition's order. A pause then gives one low
                // sample, which BBR's maximum filter passes over.
                self.rate.on_sent(p.pn, now, false);
                self.algo.on_packet_sent(&Sent {
                    now,
                    pn: p.pn,
                    bytes: p.bytes as u64,
                    bytes_in_flight: cx.st.path.bytes_in_flight,
                });
            }
            Event::PacketAcked(p) if p.in_flight => {
                let delivery_rate = self.rate.on_acked(p.pn, p.bytes as u64, now);
                self.algo.on_ack(&ack(now, p, &cx.st.path, delivery_rate));
            }
            Event::PacketLost(p) if p.in_flight => {
                self.rate.on_lost(p.pn);
                self.algo
                    .on_loss(&loss(now, p, &cx.st.path, self.largest_sent));
            }
            Event::RtoExpired { backoff } => self.algo.on_timeout(now, backoff),
            Event::PacketReceived { bytes, .. } => self.algo.on_packet_received(now, bytes as u64),
            // The peer's algorithm's message, or the application's: the same hook.
            Event::CcMessage(msg) | Event::CongestionMessage(msg) => self.algo.on_custom(now, msg),
            _ => return,
        }
        if self.publish(&mut cx.st.path) {
            cx.raise(Event::CongestionChanged);
        }
    }

    fn writes_frames(&self) -> bool {
        self.algo.sends_messages()
    }

    fn write_frames(&mut self, w: &mut FrameWriter<'_>, _cx: &mut Cx<'_, '_>) {
        // Type and length take two bytes (a message is at most 32 bytes).
        if w.room() < MAX_CC_MSG + 2 {
            return;
        }
        let mut msg = [0u8; MAX_CC_MSG];
        let n = self.algo.poll_message(&mut msg);
        if n > 0 {
            Frame::emit_cc_msg(w.buf, &msg[..n]);
        }
    }
}
