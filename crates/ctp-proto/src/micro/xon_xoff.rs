//! XON/XOFF flow control: the receiver tells the sender to stop when its application buffer
//! is three quarters full and to resume when it has drained to a quarter.
//!
//! The receiver sends its state when it changes and whenever the sender probes (PING), so a
//! lost XON cannot stall the connection. The sender releases segments just ahead of the
//! packetiser (at most [`MAX_AHEAD`] released and not yet sent), so an XOFF stops the flow
//! within that many segments plus what is already in flight.

use super::decl::{Group, MicroDecl, MicroId};
use super::flow_gate::FlowGate;
use crate::engine::event::{Event, EventKind};
use crate::engine::timer::TimerId;
use crate::engine::{Cx, FrameWriter, Microprotocol, Setup, SetupError};
use crate::wire::frame::ty;

/// The declaration of [`MicroId::XonXoff`]: what it needs, excludes and reads.
pub const DECL: MicroDecl = MicroDecl {
    groups: &[Group::FlowControl],
    ..MicroDecl::new(MicroId::XonXoff)
};

/// Segments released and not yet sent at most.
pub const MAX_AHEAD: u64 = 8;

/// The XON/XOFF microprotocol.
#[derive(Debug)]
pub struct XonXoff {
    gate: FlowGate,
    ahead: u64,
    /// The peer told us to stop.
    peer_stopped: bool,
    /// We told the peer to stop.
    stopped_peer: bool,
    owe_state: bool,
}

impl XonXoff {
    /// Registers the sender gate.
    pub fn new(setup: &mut Setup<'_>) -> Result<Self, SetupError> {
        Ok(XonXoff {
            gate: FlowGate::new(setup)?,
            ahead: 0,
            peer_stopped: false,
            stopped_peer: false,
            owe_state: false,
        })
    }

    fn check_buffer(&mut self, cx: &Cx<'_, '_>) {
        let (fill, limit) = (cx.st.app.rx_bytes, cx.st.app.rx_limit);
        if !self.stopped_peer && fill >= limit / 4 * 3 {
            self.stopped_peer = true;
            self.owe_state = true;
        } else if self.stopped_peer && fill <= limit / 4 {
            self.stopped_peer = false;
            self.owe_state = true;
        }
    }

    fn release(&mut self, cx: &mut Cx<'_, '_>) {
        let budget = if self.peer_stopped {
            0
        } else {
            MAX_AHEAD.saturating_sub(self.ahead)
        };
        let released = core::cell::Cell::new(0u64);
        self.gate.release_while(cx, |_| {
            let go = released.get() < budget;
            if go {
                released.set(released.get() + 1);
            }
            go
        });
        self.ahead += released.get();
    }
}

impl Microprotocol for XonXoff {
    fn bindings(&self) -> &'static [EventKind] {
        &[
            EventKind::SegmentReady,
            EventKind::PacketSent,
            EventKind::SegmentDiscarded,
            EventKind::XonXoff,
            EventKind::Ping,
            EventKind::MessageComplete,
            EventKind::UserRead,
        ]
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
            Event::PacketSent(p) => {
                let first = p
                    .seg
                    .and_then(|s| cx.st.segs.get(s))
                    .is_some_and(|s| s.transmissions == 1);
                // Freed right after sending (no ARQ) also counts: the packet carried a segment.
                if first || (p.seg.is_some() && p.seg.and_then(|s| cx.st.segs.get(s)).is_none()) {
                    self.ahead = self.ahead.saturating_sub(1);
                    self.release(cx);
                }
            }
            Event::SegmentDiscarded(_) => {
                self.ahead = self.ahead.saturating_sub(1);
                self.release(cx);
            }
            Event::XonXoff(go) => {
                self.peer_stopped = !go;
                self.release(cx);
            }
            Event::Ping => self.owe_state = true,
            Event::MessageComplete(_) | Event::UserRead => self.check_buffer(cx),
            _ => {}
        }
    }

    fn on_timer(&mut self, _t: TimerId, cx: &mut Cx<'_, '_>) {
        self.gate.on_probe(cx);
    }

    fn writes_frames(&self) -> bool {
        true
    }

    fn write_frames(&mut self, w: &mut FrameWriter<'_>, cx: &mut Cx<'_, '_>) {
        self.check_buffer(cx);
        if self.owe_state && w.room() >= 2 {
            crate::wire::varint::put(w.buf, ty::XON_XOFF);
            w.buf.push(u8::from(!self.stopped_peer));
            self.owe_state = false;
        }
    }
}
