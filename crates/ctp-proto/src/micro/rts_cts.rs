//! RTS/CTS flow control: the sender asks before sending (RTS with the number of segments
//! waiting); the receiver answers with clearance (CTS: segments below a sequence number may
//! be sent), as many as its application buffer has room for.
//!
//! A request that gets no answer is repeated on the probe timer; a repeated request is
//! answered again, so losses only delay.

use super::decl::{Group, MicroDecl, MicroId, Need};
use super::flow_gate::FlowGate;
use crate::engine::event::{Event, EventKind};
use crate::engine::timer::TimerId;
use crate::engine::{Cx, FrameWriter, Microprotocol, Setup, SetupError};
use crate::wire::frame::{ty, Frame};

/// The declaration of [`MicroId::RtsCts`]: what it needs, excludes and reads.
pub const DECL: MicroDecl = MicroDecl {
    needs: &[Need {
        micro: MicroId::Sequencing,
        why: "clearance is counted in segment sequence numbers",
    }],
    groups: &[Group::FlowControl],
    ..MicroDecl::new(MicroId::RtsCts)
};

/// The RTS/CTS microprotocol.
#[derive(Debug)]
pub struct RtsCts {
    gate: FlowGate,
    /// Sender: segments below this may be sent.
    cleared: u64,
    owe_rts: bool,
    /// Receiver: the clearance last granted, and a request to answer.
    granted: u64,
    asked: Option<u64>,
}

impl RtsCts {
    /// A gate starting with nothing cleared: `local_seg_isn` is our first segment,
    /// `peer_seg_isn` the peer's.
    pub fn new(
        setup: &mut Setup<'_>,
        local_seg_isn: u64,
        peer_seg_isn: u64,
    ) -> Result<Self, SetupError> {
        Ok(RtsCts {
            gate: FlowGate::new(setup)?,
            cleared: local_seg_isn,
            owe_rts: false,
            granted: peer_seg_isn,
            asked: None,
        })
    }

    fn release(&mut self, cx: &mut Cx<'_, '_>) {
        let cleared = self.cleared;
        self.gate.release_while(cx, |seq| seq < cleared);
        if self.gate.waiting() > 0 {
            self.owe_rts = true;
        }
    }

    /// Clearance the receiver can give for a request of `n` more segments: never beyond
    /// what its buffer holds counting from the segments already received, never less than
    /// what it cleared before.
    fn clearance(&self, n: u64, cx: &Cx<'_, '_>) -> u64 {
        let app = &cx.st.app;
        let per_segment = cx.st.session.max_segment_payload.max(1);
        let room = (app.rx_limit.saturating_sub(app.rx_bytes) / per_segment) as u64;
        let fits = cx.st.session.recv_seg_cum + room;
        self.granted.max(fits.min(self.granted + n))
    }
}

impl Microprotocol for RtsCts {
    fn bindings(&self) -> &'static [EventKind] {
        &[EventKind::SegmentReady, EventKind::Rts, EventKind::Cts]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        match *ev {
            Event::SegmentReady {
                seg,
                retransmit: false,
            } => {
                self.gate.hold(seg);
                self.release(cx);
            }
            Event::Cts(upto) => {
                self.cleared = self.cleared.max(upto);
                self.owe_rts = false;
                self.release(cx);
            }
            Event::Rts(n) => self.asked = Some(n),
            _ => {}
        }
    }

    fn on_timer(&mut self, _t: TimerId, cx: &mut Cx<'_, '_>) {
        if self.gate.on_probe(cx) {
            self.owe_rts = true;
        }
    }

    fn writes_frames(&self) -> bool {
        true
    }

    fn write_frames(&mut self, w: &mut FrameWriter<'_>, cx: &mut Cx<'_, '_>) {
        if self.owe_rts && w.room() > 9 {
            Frame::emit_simple(w.buf, ty::RTS, Some(self.gate.waiting() as u64));
            self.owe_rts = false;
            w.ack_eliciting = true;
        }
        if let Some(n) = self.asked {
            if w.room() > 9 {
                let upto = self.clearance(n, cx);
                Frame::emit_simple(w.buf, ty::CTS, Some(upto));
                self.granted = upto;
                self.asked = None;
            }
        }
    }
}
