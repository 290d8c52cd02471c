//! The congestion-window mechanism: a per-transmission send bit that lets a segment go only
//! while the bytes in flight stay within `cwnd`. Policies (NewReno, …) change `cwnd`; this
//! microprotocol only enforces it, and owns the `bytes_in_flight` variable.
//! Retransmissions are released before new data.
//!
//! The window sees a segment only once flow control (and any other once-per-segment gate)
//! has let it go ([`Event::SegmentCleared`]): a released segment must leave promptly, or the
//! room reserved for it is lost to segments that can. Reserving room for segments flow
//! control still held deadlocked a connection: after a loss halved the window, the
//! retransmission the receiver needed to move its credit waited behind them forever.

use super::decl::{Group, MicroDecl, MicroId, Need, NeedOneOf};
use crate::engine::event::{Event, EventKind, HoldBit};
use crate::engine::hold::{Barrier, Rearm};
use crate::engine::segment::SegId;
use crate::engine::{Cx, Microprotocol, Setup, SetupError};
use crate::wire::sizes::SEGMENT_OVERHEAD;
use std::collections::VecDeque;

/// The declaration of [`MicroId::CongestionWindow`]: what it needs, excludes and reads.
pub const DECL: MicroDecl = MicroDecl {
    needs: &[Need {
        micro: MicroId::AckTracking,
        why: "the window shrinks as packets are acked or lost",
    }],
    needs_one_of: &[NeedOneOf {
        group: Group::CongestionPolicy,
        why: "a congestion mechanism needs a policy to set its window",
    }],
    ..MicroDecl::new(MicroId::CongestionWindow)
};

/// The congestion-window mechanism.
#[derive(Debug)]
pub struct CongestionWindow {
    bit: HoldBit,
    retx: VecDeque<SegId>,
    fresh: VecDeque<SegId>,
    /// Segments released by us and not yet sent or discarded. Every release ends in exactly
    /// one `PacketSent` carrying the segment or one `SegmentDiscarded`, so a counter suffices.
    reserved: u64,
}

impl CongestionWindow {
    /// Registers the window's send bit.
    pub fn new(setup: &mut Setup<'_>) -> Result<Self, SetupError> {
        Ok(CongestionWindow {
            bit: setup.hold_bit(Barrier::Send, Rearm::PerTransmission)?,
            retx: VecDeque::new(),
            fresh: VecDeque::new(),
            reserved: 0,
        })
    }

    fn try_release(&mut self, cx: &mut Cx<'_, '_>) {
        // The most a segment's packet can take (control frames riding along included): the
        // window is a bound, so a released segment is counted at its largest.
        let per_segment = (cx.st.session.max_segment_payload + SEGMENT_OVERHEAD) as u64;
        loop {
            let from_retx = !self.retx.is_empty();
            let Some(&seg) = self.retx.front().or(self.fresh.front()) else {
                return;
            };
            if cx.st.segs.get(seg).is_none_or(|s| s.acked) {
                self.pop(from_retx);
                continue;
            }
            let used = cx.st.path.bytes_in_flight + self.reserved * per_segment;
            // Always allow one packet when nothing is outstanding, so a tiny window still moves.
            if used > 0 && used + per_segment > cx.st.path.cwnd {
                return;
            }
            self.pop(from_retx);
            self.reserved += 1;
            let peak = &mut cx.st.stats.cwnd_peak;
            *peak = (*peak).max(cx.st.path.cwnd);
            cx.release(seg, Barrier::Send, self.bit);
        }
    }

    fn pop(&mut self, from_retx: bool) {
        if from_retx {
            self.retx.pop_front();
        } else {
            self.fresh.pop_front();
        }
    }
}

impl Microprotocol for CongestionWindow {
    fn bindings(&self) -> &'static [EventKind] {
        &[
            EventKind::SegmentCleared,
            EventKind::PacketSent,
            EventKind::SegmentDiscarded,
            EventKind::PacketAcked,
            EventKind::PacketLost,
            EventKind::ProbeLost,
            EventKind::CongestionChanged,
        ]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        match *ev {
            Event::SegmentCleared { seg, retransmit } => {
                if retransmit {
                    self.retx.push_back(seg);
                } else {
                    self.fresh.push_back(seg);
                }
            }
            Event::PacketSent(p) => {
                if p.seg.is_some() {
                    self.reserved = self.reserved.saturating_sub(1);
                }
                if p.in_flight {
                    cx.st.path.bytes_in_flight += p.bytes as u64;
                }
            }
            Event::SegmentDiscarded(_) => self.reserved = self.reserved.saturating_sub(1),
            Event::PacketAcked(p) | Event::PacketLost(p) | Event::ProbeLost(p) => {
                // A packet of a path the connection left counts on no path now.
                if p.in_flight && p.path == cx.st.path.id {
                    let f = &mut cx.st.path.bytes_in_flight;
                    *f = f.saturating_sub(p.bytes as u64);
                }
            }
            Event::CongestionChanged => {}
            _ => return,
        }
        self.try_release(cx);
    }
}
