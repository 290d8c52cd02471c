//! Receiver-window flow control, counted in segments (as UDT's flow window is).
//!
//! Receiver: grants credit `MAX_SEG = recv_seg_cum + n`, `n` at most the window and at most
//! as many full segments (of the negotiated UDP payload) as fit in the room left in the
//! credited share of the receive buffer ([`AppIo::credit_room`]), so that everything the
//! credit lets in fits: what the receiver holds plus the segments it may still receive
//! never exceeds that share. Credit once given is never taken back; a segment beyond it
//! breaks the protocol (see `engine::admission`).
//!
//! [`AppIo::credit_room`]: crate::engine::app::AppIo::credit_room
//! Sender: holds a send bit (set once per segment) until the segment's sequence number is
//! below the credit. A sender blocked with nothing in flight probes with PING on the
//! retransmission timeout, and a PING makes the receiver repeat its credit, so a lost
//! credit update cannot deadlock the connection.

use super::decl::{Group, MicroDecl, MicroId, Need};
use super::flow_gate::FlowGate;
use crate::engine::event::{Event, EventKind};
use crate::engine::timer::TimerId;
use crate::engine::{Cx, FrameWriter, Microprotocol, Setup, SetupError, State};
use crate::wire::frame::{ty, Frame};

/// The declaration of [`MicroId::FlowWindow`]: what it needs, excludes and reads.
pub const DECL: MicroDecl = MicroDecl {
    needs: &[Need {
        micro: MicroId::Sequencing,
        why: "credit is counted in segment sequence numbers",
    }],
    groups: &[Group::FlowControl],
    params: &["flow_window"],
    ..MicroDecl::new(MicroId::FlowWindow)
};

/// The flow-window microprotocol.
#[derive(Debug)]
pub struct FlowWindow {
    gate: FlowGate,
    window: u64,
    granted: u64,
    repeat: bool,
}

impl FlowWindow {
    /// A flow window of `window` segments; the peer starts with credit up to
    /// `peer_seg_isn + window` (agreed in the handshake, so nothing needs announcing first).
    pub fn new(setup: &mut Setup<'_>, window: u64, peer_seg_isn: u64) -> Result<Self, SetupError> {
        Ok(FlowWindow {
            gate: FlowGate::new(setup)?,
            window,
            granted: peer_seg_isn + window,
            repeat: false,
        })
    }

    fn release_allowed(&mut self, cx: &mut Cx<'_, '_>) {
        let limit = cx.st.session.peer_max_seg;
        self.gate.release_while(cx, |seq| seq < limit);
    }

    fn step(&self) -> u64 {
        (self.window / 8).max(1)
    }

    fn credit(&self, st: &State) -> u64 {
        let fit = (st.app.credit_room() / st.session.peer_segment_max.max(1)) as u64;
        self.granted
            .max(st.session.recv_seg_cum + self.window.min(fit))
    }

    /// Whether a MAX_SEG frame is due: the credit grew by an eighth of the window, or one
    /// was asked for.
    fn announce_owed(&self, credit: u64) -> bool {
        credit >= self.granted + self.step() || self.repeat
    }
}

impl Microprotocol for FlowWindow {
    fn bindings(&self) -> &'static [EventKind] {
        &[EventKind::SegmentReady, EventKind::MaxSeg, EventKind::Ping]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        match *ev {
            Event::SegmentReady {
                seg,
                retransmit: false,
            } => {
                self.gate.hold(seg);
                self.release_allowed(cx);
            }
            Event::MaxSeg(v) => {
                cx.st.session.peer_max_seg = cx.st.session.peer_max_seg.max(v);
                self.release_allowed(cx);
            }
            Event::Ping => self.repeat = true,
            _ => {}
        }
    }

    fn on_timer(&mut self, _t: TimerId, cx: &mut Cx<'_, '_>) {
        self.gate.on_probe(cx);
    }

    fn writes_frames(&self) -> bool {
        true
    }

    fn owes_frames(&self, st: &State) -> bool {
        self.announce_owed(self.credit(st))
    }

    fn write_frames(&mut self, w: &mut FrameWriter<'_>, cx: &mut Cx<'_, '_>) {
        let credit = self.credit(cx.st);
        if self.announce_owed(credit) && w.room() > 9 {
            Frame::emit_simple(w.buf, ty::MAX_SEG, Some(credit));
            self.granted = credit;
            cx.st.session.recv_credit = credit;
            self.repeat = false;
        }
    }
}
