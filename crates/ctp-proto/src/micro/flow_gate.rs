//! The sender half every flow-control microprotocol shares: a send bit set once per segment,
//! a queue of segments the receiver has not yet allowed, and a probe that keeps asking
//! (PING on the retransmission timeout) while the queue is blocked, so that a lost
//! permission cannot deadlock the connection.

use crate::engine::event::HoldBit;
use crate::engine::hold::{Barrier, Rearm};
use crate::engine::segment::SegId;
use crate::engine::timer::TimerId;
use crate::engine::{Cx, Setup, SetupError};
use core::time::Duration;
use std::collections::VecDeque;

/// Sender-side gate of a flow-control microprotocol.
#[derive(Debug)]
pub struct FlowGate {
    bit: HoldBit,
    blocked: VecDeque<SegId>,
    probe: TimerId,
}

impl FlowGate {
    /// Registers the gate's send bit and probe timer.
    pub fn new(setup: &mut Setup<'_>) -> Result<Self, SetupError> {
        Ok(FlowGate {
            bit: setup.hold_bit(Barrier::Send, Rearm::Once)?,
            blocked: VecDeque::new(),
            probe: setup.timer()?,
        })
    }

    /// The probe timer (to recognise it in `on_timer`).
    pub fn probe_timer(&self) -> TimerId {
        self.probe
    }

    /// Segments waiting for permission.
    pub fn waiting(&self) -> usize {
        self.blocked.len()
    }

    /// Queues a new segment.
    pub fn hold(&mut self, seg: SegId) {
        self.blocked.push_back(seg);
    }

    /// Releases queued segments, oldest first, while `allowed(seq)` says so; arms or cancels
    /// the probe.
    pub fn release_while(&mut self, cx: &mut Cx<'_, '_>, allowed: impl Fn(u64) -> bool) {
        while let Some(&seg) = self.blocked.front() {
            match cx.st.segs.get(seg) {
                None => {
                    self.blocked.pop_front();
                }
                Some(s) if allowed(s.seq) => {
                    self.blocked.pop_front();
                    cx.release(seg, Barrier::Send, self.bit);
                }
                Some(_) => break,
            }
        }
        if self.blocked.is_empty() {
            cx.cancel_timer(self.probe);
        } else if cx.st.timers.deadline(self.probe).is_none() {
            let at = cx.now + Duration::from_micros(cx.st.path.rto_us);
            cx.set_timer(self.probe, at);
        }
    }

    /// The probe fired: owe the peer a PING while still blocked. Returns whether blocked.
    pub fn on_probe(&mut self, cx: &mut Cx<'_, '_>) -> bool {
        if self.blocked.is_empty() {
            return false;
        }
        cx.st.session.ping_owed = true;
        let at = cx.now + Duration::from_micros(cx.st.path.rto_us);
        cx.set_timer(self.probe, at);
        true
    }
}
