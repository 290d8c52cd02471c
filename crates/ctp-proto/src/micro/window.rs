//! The congestion-window mechanism: a per-transmission send bit that lets a segment go only
//! while the bytes in flight stay within `cwnd`. Policies (NewReno, …) change `cwnd`; this
//! microprotocol only enforces it, and owns the `bytes_in_flight` variable.
//! Retransmissions are released before new data.

use crate::engine::event::{Event, EventKind, HoldBit};
use crate::engine::hold::{Barrier, Rearm};
use crate::engine::segment::SegId;
use crate::engine::{Cx, Microprotocol, Setup, SetupError};
use std::collections::VecDeque;

/// Bytes a segment is assumed to add on the wire beyond its payload, for reservations.
const PACKET_OVERHEAD: u64 = 40;

/// The congestion-window mechanism.
#[derive(Debug)]
pub struct CongestionWindow {
    bit: HoldBit,
    retx: VecDeque<SegId>,
    fresh: VecDeque<SegId>,
    /// Released by us, not yet sent.
    reserved: VecDeque<(SegId, u64)>,
    reserved_bytes: u64,
}

impl CongestionWindow {
    /// Registers the window's send bit.
    pub fn new(setup: &mut Setup<'_>) -> Result<Self, SetupError> {
        Ok(CongestionWindow {
            bit: setup.hold_bit(Barrier::Send, Rearm::PerTransmission)?,
            retx: VecDeque::new(),
            fresh: VecDeque::new(),
            reserved: VecDeque::new(),
            reserved_bytes: 0,
        })
    }

    fn unreserve(&mut self, seg: SegId) {
        // Segments leave in the order they were released, so this is nearly always the front.
        if let Some(i) = self.reserved.iter().position(|&(s, _)| s == seg) {
            let (_, b) = self.reserved.remove(i).unwrap_or((seg, 0));
            self.reserved_bytes -= b;
        }
    }

    fn purge_reserved(&mut self, cx: &Cx<'_, '_>) {
        let segs = &cx.st.segs;
        let mut freed = 0;
        self.reserved.retain(|&(s, b)| {
            let keep = segs.get(s).is_some_and(|x| !x.acked);
            if !keep {
                freed += b;
            }
            keep
        });
        self.reserved_bytes -= freed;
    }

    fn try_release(&mut self, cx: &mut Cx<'_, '_>) {
        let mut purged = false;
        loop {
            let from_retx = !self.retx.is_empty();
            let Some(&seg) = self.retx.front().or(self.fresh.front()) else {
                return;
            };
            let Some(s) = cx.st.segs.get(seg) else {
                self.pop(from_retx);
                continue;
            };
            if s.acked {
                self.pop(from_retx);
                continue;
            }
            let size = s.payload.len() as u64 + PACKET_OVERHEAD;
            let used = cx.st.session.bytes_in_flight + self.reserved_bytes;
            // Always allow one packet when nothing is outstanding, so a tiny window still moves.
            if used > 0 && used + size > cx.st.session.cwnd {
                // Reservations of segments acknowledged before they were sent are stale;
                // drop them (rare, so only when the window blocks) and look again once.
                if purged || self.reserved.is_empty() {
                    return;
                }
                self.purge_reserved(cx);
                purged = true;
                continue;
            }
            self.pop(from_retx);
            self.reserved.push_back((seg, size));
            self.reserved_bytes += size;
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
            EventKind::SegmentReady,
            EventKind::PacketSent,
            EventKind::PacketAcked,
            EventKind::PacketLost,
            EventKind::CongestionChanged,
        ]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        match *ev {
            Event::SegmentReady { seg, retransmit } => {
                if retransmit {
                    self.retx.push_back(seg);
                } else {
                    self.fresh.push_back(seg);
                }
            }
            Event::PacketSent(p) => {
                if let Some(seg) = p.seg {
                    self.unreserve(seg);
                }
                if p.in_flight {
                    cx.st.session.bytes_in_flight += p.bytes as u64;
                }
            }
            Event::PacketAcked(p) | Event::PacketLost(p) => {
                if p.in_flight {
                    let f = &mut cx.st.session.bytes_in_flight;
                    *f = f.saturating_sub(p.bytes as u64);
                }
            }
            Event::CongestionChanged => {}
            _ => return,
        }
        self.try_release(cx);
    }
}
