//! The pacing (rate) mechanism: spaces packets at the session's `pacing_rate`.
//!
//! Its send bit is per-transmission and is set only when it is the *last* bit holding a
//! segment (`HoldLast`), so pacing spaces the packets that are otherwise ready to leave
//! instead of banking credit for segments that are still blocked elsewhere.
//!
//! Credit and trains follow [`ctp_cc::pace`]: up to one quantum of credit, and a fast flow
//! wakes only once a train's worth (250 µs) has built up — except under UDT's rate control,
//! whose packets are spaced one by one.
//!
//! When the congestion policy asks for packet pairs (`PathVars::pacing_pairs`, UDT), every
//! 16th packet leaves right behind the 15th and the gap it skipped is added after it: the
//! rate is unchanged, and the receiver sees one back-to-back pair in 16 packets, spaced by
//! the bottleneck alone.

use super::decl::{Group, MicroDecl, MicroId, NeedOneOf};
use crate::engine::event::{Event, EventKind, HoldBit};
use crate::engine::hold::{Barrier, Rearm};
use crate::engine::segment::SegId;
use crate::engine::timer::TimerId;
use crate::engine::{Cx, Microprotocol, Setup, SetupError};
use crate::wire::sizes::PACKET_OVERHEAD;
use ctp_cc::pace::{PaceClock, Spacing};
use std::collections::VecDeque;

/// The declaration of [`MicroId::Pacing`]: what it needs, excludes and reads.
pub const DECL: MicroDecl = MicroDecl {
    needs_one_of: &[NeedOneOf {
        group: Group::CongestionPolicy,
        why: "the pacing mechanism needs a policy to set its rate",
    }],
    ..MicroDecl::new(MicroId::Pacing)
};

/// The pacing microprotocol.
#[derive(Debug)]
pub struct Pacing {
    bit: HoldBit,
    queue: VecDeque<SegId>,
    timer: TimerId,
    /// When the next packet may leave.
    clock: PaceClock,
    /// Packets released, for packet pairs.
    released: u64,
    /// The gap skipped to make a pair, owed after its second packet (microseconds).
    pair_debt: u64,
}

impl Pacing {
    /// Registers the pacing bit and timer.
    pub fn new(setup: &mut Setup<'_>) -> Result<Self, SetupError> {
        Ok(Pacing {
            bit: setup.hold_bit(Barrier::Send, Rearm::PerTransmission)?,
            queue: VecDeque::new(),
            timer: setup.timer()?,
            clock: PaceClock::new(),
            released: 0,
            pair_debt: 0,
        })
    }

    fn pump(&mut self, cx: &mut Cx<'_, '_>) {
        let rate = cx.st.path.pacing_rate;
        let mss = cx.st.session.max_segment_payload as u64 + PACKET_OVERHEAD;
        // UDT's rate control (it asks for packet pairs) wants its packets evenly spaced.
        let spacing = if cx.st.path.pacing_pairs {
            Spacing::Packets
        } else {
            Spacing::Trains
        };
        if let Some(until) = cx.st.path.paused_until {
            self.clock.hold_until(until);
        }
        while let Some(&seg) = self.queue.front() {
            let Some(s) = cx.st.segs.get(seg) else {
                self.queue.pop_front();
                cx.raise(Event::SegmentDiscarded(seg));
                continue;
            };
            if !self.clock.ready(cx.now, rate, mss, spacing) {
                cx.set_timer(self.timer, self.clock.wake_at(rate, mss, spacing));
                return;
            }
            let size = s.body_len() as u64 + PACKET_OVERHEAD;
            self.queue.pop_front();
            self.released += 1;
            if let Some(gap) = self.clock.gap_us(size, rate) {
                if cx.st.path.pacing_pairs && self.released % 16 == 15 {
                    self.pair_debt = gap;
                } else {
                    self.clock.delay(gap + core::mem::take(&mut self.pair_debt));
                }
            }
            cx.release(seg, Barrier::Send, self.bit);
        }
        cx.cancel_timer(self.timer);
    }
}

impl Microprotocol for Pacing {
    fn bindings(&self) -> &'static [EventKind] {
        &[EventKind::HoldLast, EventKind::CongestionChanged]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        match *ev {
            Event::HoldLast { seg, bit } if bit == self.bit => {
                self.queue.push_back(seg);
                self.pump(cx);
            }
            Event::CongestionChanged if !self.queue.is_empty() => self.pump(cx),
            _ => {}
        }
    }

    fn on_timer(&mut self, _t: TimerId, cx: &mut Cx<'_, '_>) {
        self.pump(cx);
    }
}
