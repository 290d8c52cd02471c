//! Segment sequencing on the receive side: duplicate suppression and the cumulative point
//! (every segment below `recv_seg_cum` was received or is no longer needed).
//!
//! Sequence numbers themselves are assigned by the send path when a segment is created
//! (starting from the random initial number exchanged in the handshake).

use super::decl::{MicroDecl, MicroId};
use crate::engine::event::{Event, EventKind};
use crate::engine::{Cx, Microprotocol};

/// The declaration of [`MicroId::Sequencing`]: what it needs, excludes and reads.
pub const DECL: MicroDecl = MicroDecl {
    params: &["flow_window"],
    ..MicroDecl::new(MicroId::Sequencing)
};

/// How the window of acceptable sequence numbers moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowMode {
    /// Reliable: the window starts at the cumulative point and is as wide as the flow
    /// window; anything beyond it is dropped (the peer broke flow control).
    Strict,
    /// Unreliable: a segment far ahead slides the window forward, giving up on older holes.
    Sliding,
}

/// Receive-side sequencing microprotocol.
#[derive(Debug)]
pub struct Sequencing {
    mode: WindowMode,
    /// Bitmap of received segments starting at `recv_seg_cum`, as a ring.
    bits: Vec<u64>,
    width: u64,
    started: bool,
}

impl Sequencing {
    /// A sequencer with a window of `width` segments (rounded up to a multiple of 64). Its
    /// bitmap is allocated when the first segment arrives out of order: a connection whose
    /// segments come in order (or not at all) never needs it.
    pub fn new(mode: WindowMode, width: u64) -> Self {
        let words = width.div_ceil(64).max(1);
        Sequencing {
            mode,
            bits: Vec::new(),
            width: words * 64,
            started: false,
        }
    }

    fn bit(&self, seq: u64) -> bool {
        let i = seq % self.width;
        self.bits[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    fn set(&mut self, seq: u64, v: bool) {
        let i = seq % self.width;
        let w = &mut self.bits[(i / 64) as usize];
        if v {
            *w |= 1 << (i % 64);
        } else {
            *w &= !(1 << (i % 64));
        }
    }

    /// Records `seq`; true when it is new and inside the window.
    fn accept(&mut self, seq: u64, cx: &mut Cx<'_, '_>) -> bool {
        let cum = &mut cx.st.session.recv_seg_cum;
        if !self.started {
            *cum = cx.st.session.peer_seg_isn;
            self.started = true;
        }
        if seq < *cum {
            cx.st.stats.duplicate_segments += 1;
            return false;
        }
        if self.bits.is_empty() {
            if seq == *cum {
                // In order with nothing out of order held: no bitmap needed.
                *cum += 1;
                return true;
            }
            self.bits = vec![0; (self.width / 64) as usize];
        }
        if seq >= *cum + self.width {
            match self.mode {
                WindowMode::Strict => {
                    cx.st.stats.out_of_window_segments += 1;
                    return false;
                }
                WindowMode::Sliding => {
                    let new_cum = seq + 1 - self.width;
                    let mut s = *cum;
                    while s < new_cum.min(*cum + self.width) {
                        // Clear the bits that leave the window.
                        let i = s % self.width;
                        self.bits[(i / 64) as usize] &= !(1 << (i % 64));
                        s += 1;
                    }
                    if new_cum >= *cum + self.width {
                        self.bits.iter_mut().for_each(|w| *w = 0);
                    }
                    *cum = new_cum;
                }
            }
        }
        if self.bit(seq) {
            cx.st.stats.duplicate_segments += 1;
            return false;
        }
        self.set(seq, true);
        let mut c = cx.st.session.recv_seg_cum;
        while self.bit(c) {
            self.set(c, false);
            c += 1;
        }
        cx.st.session.recv_seg_cum = c;
        true
    }
}

impl Microprotocol for Sequencing {
    fn bindings(&self) -> &'static [EventKind] {
        &[EventKind::SegmentArrived]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        if let Event::SegmentArrived(d) = *ev {
            if self.accept(d.seg, cx) {
                cx.raise(Event::SegmentAccepted(d));
            }
        }
    }
}
