//! Path MTU discovery in the manner of DPLPMTUD (RFC 8899): the connection starts at the
//! 1200-byte floor (`BASE_PLPMTU`) and probes larger sizes with packets that carry only a
//! PING and PADDING, never data, so a lost probe loses nothing.
//!
//! - **Search**: binary search between the largest confirmed size and the negotiated
//!   `max_udp_payload` (the configured maximum); a probe acknowledged confirms its size, a
//!   size is given up after [`MAX_PROBES`] probes of it are lost (RFC 8899 `MAX_PROBES`). The
//!   search ends when the interval is narrower than [`SEARCH_STEP`].
//! - **Publication**: each confirmed size is written into the session
//!   (`max_segment_payload`), so fragmentation cuts new segments to it.
//! - **Probe losses are not congestion**: probe packets are flagged (`PacketInfo::probe`);
//!   congestion policies ignore their loss and the retransmission timer does not back off
//!   when only probes are outstanding (RFC 8899 §4.4, RFC 9000 §14.4).
//! - **Black holes**: [`BLACK_HOLE_LOSSES`] losses in a row of data packets larger than the
//!   floor, with no such packet acknowledged in between, fall back to the floor and search
//!   again from there (RFC 8899 §4.3); a completed search is re-run every
//!   [`RAISE_INTERVAL`] (`PMTU_RAISE_TIMER`) in case the path grew.

use super::decl::{MicroDecl, MicroId, Need};
use crate::engine::event::{Event, EventKind, PacketInfo};
use crate::engine::timer::TimerId;
use crate::engine::{Cx, FrameWriter, Microprotocol, Setup, SetupError};
use crate::wire::frame::{ty, Frame};
use crate::wire::sizes::MIN_UDP_PAYLOAD;
use core::time::Duration;

/// The declaration of [`MicroId::Pmtud`]: what it needs, excludes and reads.
pub const DECL: MicroDecl = MicroDecl {
    needs: &[
        Need {
            micro: MicroId::AckTracking,
            why: "a probe size is confirmed when its probe is acknowledged and given up when reported lost",
        },
    ],
    params: &["max_udp_payload"],
    ..MicroDecl::new(MicroId::Pmtud)
};

/// The floor every path must carry (RFC 8899 `BASE_PLPMTU`, QUIC's minimum).
pub const BASE_PLPMTU: usize = MIN_UDP_PAYLOAD as usize;
/// The search stops when the unknown interval is narrower than this many bytes.
pub const SEARCH_STEP: usize = 16;
/// Probes of one size lost before that size is given up.
pub const MAX_PROBES: u32 = 3;
/// Consecutive losses of packets above the floor taken for a black hole.
pub const BLACK_HOLE_LOSSES: u32 = 6;
/// A finished search is repeated after this long.
pub const RAISE_INTERVAL: Duration = Duration::from_secs(600);

/// The path MTU discovery microprotocol.
#[derive(Debug)]
pub struct Pmtud {
    /// Largest size confirmed (the PLPMTU).
    lo: usize,
    /// Largest size not yet ruled out.
    hi: usize,
    /// The configured maximum.
    max: usize,
    /// Packet number and size of the probe in flight.
    probe: Option<(u64, usize)>,
    /// Probes of the current candidate lost.
    failures: u32,
    searching: bool,
    big_losses: u32,
    raise_timer: TimerId,
}

impl Pmtud {
    /// Discovery up to `max` bytes of UDP payload; publishes the floor at once.
    pub fn new(
        setup: &mut Setup<'_>,
        max: usize,
        session: &mut crate::engine::session::Session,
        path: &mut crate::engine::path::PathVars,
    ) -> Result<Self, SetupError> {
        let max = max.max(BASE_PLPMTU);
        session.max_segment_payload = BASE_PLPMTU - session.segment_overhead;
        path.plpmtu = BASE_PLPMTU;
        Ok(Pmtud {
            lo: BASE_PLPMTU,
            hi: max,
            max,
            probe: None,
            failures: 0,
            searching: max > BASE_PLPMTU,
            big_losses: 0,
            raise_timer: setup.timer()?,
        })
    }

    /// The size confirmed so far.
    pub fn plpmtu(&self) -> usize {
        self.lo
    }

    fn publish(&self, cx: &mut Cx<'_, '_>) {
        cx.st.path.plpmtu = self.lo;
        cx.st.session.max_segment_payload = self.lo - cx.st.session.segment_overhead;
    }

    fn candidate(&self) -> usize {
        self.lo + (self.hi - self.lo).div_ceil(2)
    }

    fn check_done(&mut self, cx: &mut Cx<'_, '_>) {
        if self.searching && self.hi < self.lo + SEARCH_STEP {
            self.searching = false;
            cx.set_timer(self.raise_timer, cx.now + RAISE_INTERVAL);
        }
    }

    fn on_acked(&mut self, p: PacketInfo, cx: &mut Cx<'_, '_>) {
        if p.probe {
            if self.probe.is_some_and(|(pn, _)| pn == p.pn) {
                self.probe = None;
            }
            // A late acknowledgement of an older probe confirms its size just as well.
            if p.bytes > self.lo && p.bytes <= self.hi {
                self.lo = p.bytes;
                self.failures = 0;
                self.publish(cx);
            }
            self.check_done(cx);
        } else if p.bytes > BASE_PLPMTU {
            self.big_losses = 0;
        }
    }

    fn on_probe_lost(&mut self, p: PacketInfo, cx: &mut Cx<'_, '_>) {
        cx.st.stats.pmtu_probes_lost += 1;
        if self.probe.is_some_and(|(pn, _)| pn == p.pn) {
            self.probe = None;
            self.failures += 1;
            if self.failures >= MAX_PROBES {
                self.failures = 0;
                self.hi = (p.bytes - 1).max(self.lo);
            }
            self.check_done(cx);
        }
    }

    /// A data packet was lost: repeated losses of packets above the floor mean a black hole.
    fn on_lost(&mut self, p: PacketInfo, cx: &mut Cx<'_, '_>) {
        if p.bytes <= BASE_PLPMTU || self.lo <= BASE_PLPMTU {
            return;
        }
        self.big_losses += 1;
        if self.big_losses >= BLACK_HOLE_LOSSES {
            // Back to the floor, then search the whole range again.
            cx.st.stats.pmtu_black_holes += 1;
            self.big_losses = 0;
            self.lo = BASE_PLPMTU;
            self.hi = self.max;
            self.failures = 0;
            self.probe = None;
            self.searching = true;
            cx.cancel_timer(self.raise_timer);
            self.publish(cx);
        }
    }
}

impl Microprotocol for Pmtud {
    fn bindings(&self) -> &'static [EventKind] {
        &[
            EventKind::PacketAcked,
            EventKind::PacketLost,
            EventKind::ProbeLost,
            EventKind::LateAck,
        ]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        match *ev {
            Event::PacketAcked(p) | Event::LateAck(p) => self.on_acked(p, cx),
            Event::PacketLost(p) => self.on_lost(p, cx),
            Event::ProbeLost(p) => self.on_probe_lost(p, cx),
            _ => {}
        }
    }

    fn on_timer(&mut self, _t: TimerId, _cx: &mut Cx<'_, '_>) {
        if !self.searching {
            self.hi = self.max;
            self.searching = self.hi >= self.lo + SEARCH_STEP;
        }
    }

    fn writes_frames(&self) -> bool {
        true
    }

    fn write_frames(&mut self, w: &mut FrameWriter<'_>, cx: &mut Cx<'_, '_>) {
        if !self.searching || self.probe.is_some() {
            return;
        }
        let size = self.candidate();
        let s = &cx.st.path;
        // Probes are subject to congestion control like any packet (RFC 8899 §4.4).
        if s.cwnd != u64::MAX && s.bytes_in_flight + size as u64 > s.cwnd {
            return;
        }
        let body_end = w.body_end_for(size);
        // A probe carries nothing else (an ACK lost with it would stall the peer): it waits
        // for a packet no other microprotocol wrote into.
        let len = w.packet_len();
        if len != w.header_len() || len + 1 >= body_end || w.room() < body_end - len {
            return;
        }
        Frame::emit_simple(w.buf, ty::PING, None);
        w.pad_to(body_end); // PADDING to the probed size
        w.ack_eliciting = true;
        w.probe = true;
        self.probe = Some((cx.st.next_pn, size));
        cx.st.stats.pmtu_probes_sent += 1;
    }
}
