//! ARQ reliability: retransmits segments whose packets were reported lost or timed out.
//!
//! It holds a *done* and a *deallocate* bit on every segment and sets both when a packet
//! carrying the segment is acknowledged; until then the segment stays in memory and is put
//! back on the send path (in a new packet, with a new packet number) after each loss.

use super::decl::{Group, MicroDecl, MicroId, Need};
use crate::engine::event::{Event, EventKind, HoldBit};
use crate::engine::hold::{Barrier, Rearm};
use crate::engine::{Cx, Microprotocol, Setup, SetupError};

/// The declaration of [`MicroId::Arq`]: what it needs, excludes and reads.
pub const DECL: MicroDecl = MicroDecl {
    needs: &[
        Need {
            micro: MicroId::AckTracking,
            why: "it retransmits what ack-tracking reports lost",
        },
        Need {
            micro: MicroId::Sequencing,
            why: "retransmitted segments are recognised by their sequence numbers",
        },
    ],
    groups: &[Group::Reliability],
    ..MicroDecl::new(MicroId::Arq)
};

/// The ARQ microprotocol.
#[derive(Debug)]
pub struct Arq {
    done: HoldBit,
    dealloc: HoldBit,
}

impl Arq {
    /// Registers ARQ's hold bits.
    pub fn new(setup: &mut Setup<'_>) -> Result<Self, SetupError> {
        Ok(Arq {
            done: setup.hold_bit(Barrier::Done, Rearm::Once)?,
            dealloc: setup.hold_bit(Barrier::Deallocate, Rearm::Once)?,
        })
    }
}

impl Microprotocol for Arq {
    fn bindings(&self) -> &'static [EventKind] {
        &[
            EventKind::PacketAcked,
            EventKind::LateAck,
            EventKind::PacketLost,
        ]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        match *ev {
            Event::PacketAcked(p) | Event::LateAck(p) => {
                let Some(seg) = p.seg else { return };
                let Some(s) = cx.st.segs.get_mut(seg) else {
                    return;
                };
                if s.acked {
                    return;
                }
                s.acked = true;
                cx.release(seg, Barrier::Done, self.done);
                cx.release(seg, Barrier::Deallocate, self.dealloc);
            }
            Event::PacketLost(p) => {
                let Some(seg) = p.seg else { return };
                if cx.st.segs.get(seg).is_some_and(|s| !s.acked) {
                    cx.requeue(seg);
                }
            }
            _ => {}
        }
    }
}
