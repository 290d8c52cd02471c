//! The pacing (rate) mechanism: spaces packets at the session's `pacing_rate`.
//!
//! Its send bit is per-transmission and is set only when it is the *last* bit holding a
//! segment (`HoldLast`), so pacing spaces the packets that are otherwise ready to leave
//! instead of banking credit for segments that are still blocked elsewhere.
//!
//! Credit is a token bucket of one quantum (two packets or half a millisecond of rate,
//! whichever is larger): a packet leaves while its slot has begun and unused credit beyond
//! the quantum is lost. At rates where a quarter millisecond holds at least two packets
//! (about 95 Mb/s and up) the timer wakes the pacer only once that much credit has built
//! up, not when the next single slot begins: packets leave in short trains (at 1 Gb/s about
//! 20 packets every 250 µs) that a runtime sends with one system call, and a wake-up up to
//! 250 µs late costs no rate. Linux's TSO autosizing and FQ pacing settle on bursts of this
//! size at these rates; one packet per timer would cost a system call and a wake-up per
//! packet. Slower flows are spaced packet by packet.
//!
//! When the congestion policy asks for packet pairs (`Session::pacing_pairs`, UDT), every
//! 16th packet leaves right behind the 15th and the gap it skipped is added after it: the
//! rate is unchanged, and the receiver sees one back-to-back pair in 16 packets, spaced by
//! the bottleneck alone.

use crate::engine::event::{Event, EventKind, HoldBit};
use crate::engine::hold::{Barrier, Rearm};
use crate::engine::segment::SegId;
use crate::engine::timer::TimerId;
use crate::engine::{Cx, Microprotocol, Setup, SetupError};
use crate::time::Instant;
use core::time::Duration;
use std::collections::VecDeque;

/// Assumed wire overhead of one segment's packet.
const PACKET_OVERHEAD: u64 = 40;
/// Credit a fast flow's pacer waits for before it wakes: one train, microseconds.
const TRAIN_US: u64 = 250;

/// The pacing microprotocol.
#[derive(Debug)]
pub struct Pacing {
    bit: HoldBit,
    queue: VecDeque<SegId>,
    timer: TimerId,
    /// Earliest time the next packet may leave.
    next_at: Instant,
    /// Packets released, for packet pairs.
    released: u64,
    /// The gap skipped to make a pair, owed after its second packet (microseconds).
    pair_debt: u64,
    /// The fraction of a microsecond the gaps so far left over, in units of 1/rate µs:
    /// gaps are whole microseconds, and truncating each would overshoot the rate (by 3 %
    /// at 1 Gb/s, 13 % at 10 Gb/s).
    gap_remainder: u64,
}

impl Pacing {
    /// Registers the pacing bit and timer.
    pub fn new(setup: &mut Setup<'_>) -> Result<Self, SetupError> {
        Ok(Pacing {
            bit: setup.hold_bit(Barrier::Send, Rearm::PerTransmission)?,
            queue: VecDeque::new(),
            timer: setup.timer()?,
            next_at: Instant::ZERO,
            released: 0,
            pair_debt: 0,
            gap_remainder: 0,
        })
    }

    fn pump(&mut self, cx: &mut Cx<'_, '_>) {
        let rate = cx.st.session.pacing_rate;
        let mss = cx.st.session.max_segment_payload as u64 + PACKET_OVERHEAD;
        let pair_us = (2 * mss * 1_000_000).checked_div(rate);
        let quantum_us = pair_us.map_or(0, |q| q.max(2 * TRAIN_US));
        let train_us = pair_us.map_or(0, |q| if q <= TRAIN_US { TRAIN_US } else { 0 });
        // Credit does not accumulate beyond one quantum.
        let floor = Instant::from_micros(cx.now.as_micros().saturating_sub(quantum_us));
        if self.next_at < floor {
            self.next_at = floor;
        }
        while let Some(&seg) = self.queue.front() {
            let Some(s) = cx.st.segs.get(seg) else {
                self.queue.pop_front();
                cx.raise(Event::SegmentDiscarded(seg));
                continue;
            };
            if rate != 0 && self.next_at > cx.now {
                // A fast flow wakes once a train's worth of credit has built up.
                cx.set_timer(self.timer, self.next_at + Duration::from_micros(train_us));
                return;
            }
            let size = s.payload.len() as u64 + PACKET_OVERHEAD;
            self.queue.pop_front();
            self.released += 1;
            let exact = size * 1_000_000 + self.gap_remainder;
            if let Some(gap) = exact.checked_div(rate) {
                self.gap_remainder = exact % rate;
                if cx.st.session.pacing_pairs && self.released % 16 == 15 {
                    self.pair_debt = gap;
                } else {
                    self.next_at +=
                        Duration::from_micros(gap + core::mem::take(&mut self.pair_debt));
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
