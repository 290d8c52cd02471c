//! Receive-side admission: whether a received segment may enter the connection's receive
//! state, before anything (its acknowledgement included) happens.
//!
//! Three rules keep what a peer can make the receiver hold bounded by the receive buffer
//! (`Params::recv_buffer`, [`AppIo::rx_limit`](super::app::AppIo::rx_limit)):
//! 1. a segment beyond the flow credit given to the peer, or with a body larger than the
//!    negotiated UDP payload, breaks the protocol: the connection closes with a `CLOSE` of
//!    code `PROTOCOL` (QUIC's FLOW_CONTROL_ERROR);
//! 2. while the receiver holds less than the credited share of its buffer
//!    ([`AppIo::credit_limit`](super::app::AppIo::credit_limit)), every segment is taken;
//!    above it only the next segment in order is, and only while the application's unread
//!    data is below a quarter of the buffer. A refused segment's packet is not acknowledged
//!    (its other frames still act), so the sender retransmits it later: nothing is lost;
//! 3. holding more than [`AppIo::hard_limit`](super::app::AppIo::hard_limit) after a
//!    packet breaks the protocol: no sender within its credit gets there.

use super::session::CloseReason;
use super::State;

/// What happens to a received segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// It enters the receive state.
    Take,
    /// The receiver is full: the packet is not acknowledged and its segment is dropped.
    Refuse,
    /// The peer broke the protocol: what it did.
    Violation(String),
}

impl State {
    /// Decides on segment `seg` with a body of `body` bytes (see the module's rules).
    pub fn admit_segment(&self, seg: u64, body: usize) -> Admission {
        let s = &self.session;
        if body > s.peer_segment_max {
            return Admission::Violation(format!(
                "a segment of {body} bytes, more than the negotiated {}",
                s.peer_segment_max
            ));
        }
        if seg >= s.recv_credit {
            return Admission::Violation(format!(
                "segment {} sent beyond the flow credit ({} segments granted)",
                seg.wrapping_sub(s.peer_seg_isn),
                s.recv_credit.wrapping_sub(s.peer_seg_isn)
            ));
        }
        if seg < s.recv_seg_cum {
            // Already received: sequencing drops it, at no cost.
            return Admission::Take;
        }
        let app = &self.app;
        if app.held() < app.credit_limit()
            || (seg == s.recv_seg_cum && app.unread() < app.rx_limit / 4)
        {
            Admission::Take
        } else {
            Admission::Refuse
        }
    }

    /// After a packet: a receive state above the hard limit closes the connection as a
    /// protocol violation (rule 3).
    pub fn check_held(&mut self) {
        let held = self.app.held();
        if held > self.app.hard_limit() && self.session.close.is_none() {
            self.stats.protocol_violations += 1;
            self.session.close = Some(CloseReason::ProtocolViolation(format!(
                "it made the receiver hold {held} bytes, more than its {}-byte receive buffer",
                self.app.rx_limit
            )));
        }
    }
}
