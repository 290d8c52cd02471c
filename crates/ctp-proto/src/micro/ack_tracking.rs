//! Acknowledgement tracking: status tracking apart from retransmission.
//!
//! Sender side: remembers every packet sent, processes ACK (SACK ranges) and NAK frames and
//! *reports* `PacketAcked`, `PacketLost` (packet threshold 3, time threshold 9/8 RTT, or
//! NAK) and `RtoExpired`; it never retransmits. Receiver side: records received packet
//! numbers, acknowledges them (immediately when out of order or every second packet, else
//! after `max_ack_delay`) and NAKs holes once they are three packets old. The ACK floor is
//! CTP's generalised cumulative acknowledgement: the sender announces the lowest packet it
//! still needs news of, and the receiver forgets everything below — received or not, none
//! of it is needed any more.

use super::decl::{MicroDecl, MicroId, Need};
use crate::engine::event::{Event, EventKind, PacketInfo};
use crate::engine::timer::TimerId;
use crate::engine::{Cx, FrameWriter, Microprotocol, Setup, SetupError, State};
use crate::wire::frame::{ty, AckFrame, Frame, NakFrame, PnRange, MAX_RANGES};
use core::time::Duration;
use ctp_cc::time::Instant;
use std::collections::VecDeque;

/// The declaration of [`MicroId::AckTracking`]: what it needs, excludes and reads.
pub const DECL: MicroDecl = MicroDecl {
    needs: &[Need {
        micro: MicroId::Rtt,
        why: "loss detection and the retransmission timer need RTT estimates",
    }],
    params: &["max_ack_delay_us"],
    ..MicroDecl::new(MicroId::AckTracking)
};

/// Packets reordered past this many are declared lost (RFC 9002 kPacketThreshold).
pub const PACKET_THRESHOLD: u64 = 3;
/// Ranges of received packets remembered.
const MAX_RECV_RANGES: usize = 2 * MAX_RANGES;
/// Most NAK ranges waiting to be sent.
const MAX_PENDING_NAKS: usize = MAX_RANGES;
/// The ACK floor is re-announced after it moved this many packets.
const FLOOR_STEP: u64 = 32;
/// Longest back-off exponent of the retransmission timer.
const MAX_BACKOFF: u32 = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SentState {
    Outstanding,
    Acked,
    Lost,
}

#[derive(Clone, Copy, Debug)]
struct Sent {
    info: PacketInfo,
    state: SentState,
}

/// The acknowledgement-tracking microprotocol.
#[derive(Debug)]
pub struct AckTracking {
    // Sender side.
    sent: VecDeque<Sent>,
    base_pn: u64,
    largest_acked: Option<u64>,
    last_eliciting_sent: Instant,
    rto_timer: TimerId,
    loss_timer: TimerId,
    floor_sent: u64,
    /// Outstanding packets that count toward bytes in flight.
    outstanding_in_flight: usize,
    /// Reused buffer for packet numbers found lost.
    scratch: Vec<u64>,
    /// No packet below this number is outstanding (where the loss scan starts).
    scan_from: u64,
    /// The ranges of the last ACK frame processed, highest first.
    prev_ack_ranges: Vec<PnRange>,
    /// Reused buffer for the ranges of the frame being processed.
    scratch_ranges: Vec<PnRange>,
    // Receiver side.
    recv: Vec<PnRange>,
    floor: u64,
    largest_recv_at: Instant,
    unacked_eliciting: u32,
    ack_now: bool,
    ack_timer: TimerId,
    max_ack_delay: Duration,
    nak_horizon: u64,
    pending_naks: Vec<PnRange>,
}

impl AckTracking {
    /// Whether an ACK frame goes into the next packet: one is due, or one can ride along
    /// with data (`data_follows`) while ack-eliciting packets wait to be acknowledged.
    fn ack_owed(&self, data_follows: bool) -> bool {
        (self.ack_now || (self.unacked_eliciting > 0 && data_follows)) && !self.recv.is_empty()
    }

    /// Registers the tracker's timers.
    pub fn new(setup: &mut Setup<'_>, max_ack_delay: Duration) -> Result<Self, SetupError> {
        Ok(AckTracking {
            sent: VecDeque::new(),
            base_pn: 0,
            largest_acked: None,
            last_eliciting_sent: Instant::ZERO,
            rto_timer: setup.timer()?,
            loss_timer: setup.timer()?,
            floor_sent: 0,
            outstanding_in_flight: 0,
            scratch: Vec::new(),
            scan_from: 0,
            prev_ack_ranges: Vec::new(),
            scratch_ranges: Vec::new(),
            recv: Vec::new(),
            floor: 0,
            largest_recv_at: Instant::ZERO,
            unacked_eliciting: 0,
            ack_now: false,
            ack_timer: setup.timer()?,
            max_ack_delay,
            nak_horizon: 0,
            pending_naks: Vec::new(),
        })
    }

    fn on_sent(&mut self, info: PacketInfo, cx: &mut Cx<'_, '_>) {
        if self.sent.is_empty() {
            self.base_pn = info.pn;
        }
        // Packet numbers are consecutive; anything else is a bug in the packetiser.
        debug_assert_eq!(info.pn, self.base_pn + self.sent.len() as u64);
        // Packets that elicit no acknowledgement (pure ACKs) are never reported on: they
        // are recorded only to keep packet numbers consecutive, and pruned at once.
        let state = if info.in_flight {
            SentState::Outstanding
        } else {
            SentState::Acked
        };
        self.sent.push_back(Sent { info, state });
        if info.in_flight {
            self.outstanding_in_flight += 1;
            self.last_eliciting_sent = info.sent_at;
            self.arm_rto(cx);
        } else {
            self.prune(cx);
        }
        cx.st.stats.tracked_packets = self.sent.len() as u64;
    }

    fn rto(&self, cx: &Cx<'_, '_>) -> Duration {
        Duration::from_micros(cx.st.path.rto_us) * (1 << cx.st.path.rto_backoff.min(MAX_BACKOFF))
    }

    fn arm_rto(&mut self, cx: &mut Cx<'_, '_>) {
        if self.outstanding_in_flight > 0 {
            let at = self.last_eliciting_sent + self.rto(cx);
            cx.set_timer(self.rto_timer, at);
        } else {
            cx.cancel_timer(self.rto_timer);
        }
    }

    fn entry(&mut self, pn: u64) -> Option<&mut Sent> {
        let i = pn.checked_sub(self.base_pn)?;
        self.sent.get_mut(usize::try_from(i).ok()?)
    }

    fn mark(&mut self, pn: u64, to: SentState, cx: &mut Cx<'_, '_>) {
        let Some(s) = self.entry(pn) else { return };
        if s.state != SentState::Outstanding {
            return;
        }
        s.state = to;
        let info = s.info;
        self.outstanding_in_flight -= 1;
        if to == SentState::Acked {
            cx.raise(Event::PacketAcked(info));
        } else if info.probe {
            cx.raise(Event::ProbeLost(info));
        } else {
            if info.in_flight {
                cx.st.stats.packets_lost += 1;
            }
            cx.raise(Event::PacketLost(info));
        }
    }

    /// Forgets packets from the front that need no more attention: acknowledged ones at
    /// once, lost ones after a few RTTs (until then a late acknowledgement still counts).
    fn prune(&mut self, cx: &Cx<'_, '_>) {
        let keep_lost = Self::loss_delay(cx) * 3;
        while let Some(s) = self.sent.front() {
            let done = match s.state {
                SentState::Outstanding => false,
                SentState::Acked => true,
                SentState::Lost => s.info.sent_at + keep_lost <= cx.now,
            };
            if !done {
                break;
            }
            self.sent.pop_front();
            self.base_pn += 1;
        }
    }

    /// A packet declared lost was acknowledged after all (reordering, a slow ACK): its
    /// data arrived, so its segment need not be sent again.
    fn late_ack(&mut self, pn: u64, cx: &mut Cx<'_, '_>) {
        let Some(s) = self.entry(pn) else { return };
        s.state = SentState::Acked;
        let info = s.info;
        cx.st.stats.spurious_losses += 1;
        cx.raise(Event::LateAck(info));
    }

    /// Packets currently remembered by the sender side.
    pub fn tracked(&self) -> usize {
        self.sent.len()
    }

    fn on_ack(&mut self, ack: AckFrame<'_>, cx: &mut Cx<'_, '_>) {
        let next_pn = self.base_pn + self.sent.len() as u64;
        if ack.largest >= next_pn {
            // Acknowledges a packet never sent: ignore the whole frame.
            cx.st.stats.malformed_dropped += 1;
            return;
        }
        let newly_largest = self.largest_acked.is_none_or(|l| ack.largest > l);
        if let Some(s) = self.entry(ack.largest) {
            // A round trip of a path the connection left says nothing about this one.
            let this_path = s.info.path == cx.st.path.id;
            if newly_largest && s.state == SentState::Outstanding && s.info.in_flight && this_path {
                let rtt = cx.now.saturating_since(s.info.sent_at);
                cx.raise(Event::RttSample {
                    rtt_us: rtt.as_micros() as u64,
                    ack_delay_us: ack.delay_us,
                });
            }
        }
        let mut any_new = false;
        // Packets the previous ACK frame covered are acknowledged already (a state never
        // left): only the rest of each range is walked, highest first, so a frame repeating
        // a window's worth of ranges costs what it adds.
        let prev = std::mem::take(&mut self.prev_ack_ranges);
        let mut this = std::mem::take(&mut self.scratch_ranges);
        this.clear();
        // Both lists run highest first: a covered range wholly above this one is above
        // every later one too, so it is passed over once per frame, not once per range.
        let mut above = 0;
        for r in ack.ranges() {
            this.push(r);
            while prev.get(above).is_some_and(|c| c.lo > r.hi) {
                above += 1;
            }
            let lo = r.lo.max(self.base_pn);
            for_each_uncovered(r.hi, lo, &prev[above..], |pn| {
                match self.entry(pn).map(|s| s.state) {
                    Some(SentState::Outstanding) => {
                        any_new = true;
                        self.mark(pn, SentState::Acked, cx);
                    }
                    Some(SentState::Lost) => self.late_ack(pn, cx),
                    _ => {}
                }
            });
        }
        self.prev_ack_ranges = this;
        self.scratch_ranges = prev;
        if newly_largest {
            self.largest_acked = Some(ack.largest);
            cx.st.session.peer_acked_pn = Some(ack.largest);
        }
        if any_new {
            cx.st.path.rto_backoff = 0;
        }
        self.detect_losses(cx);
        self.prune(cx);
        self.arm_rto(cx);
        cx.st.stats.tracked_packets = self.sent.len() as u64;
    }

    fn loss_delay(cx: &Cx<'_, '_>) -> Duration {
        let s = &cx.st.path;
        let rtt = s.srtt_us.max(s.latest_rtt_us).max(1000);
        Duration::from_micros(rtt * 9 / 8)
    }

    /// Declares lost the outstanding packets below the largest acknowledged one that are
    /// three packets or 9/8 RTT older, and arms the loss timer for the next candidate.
    ///
    /// Packets are sent in packet-number order, so once one outstanding packet is not lost
    /// yet, no later one is: the scan stops there. It starts at `scan_from`, below which no
    /// packet is outstanding (a packet never becomes outstanding again), so an ACK costs the
    /// packets it settles, not the whole window.
    fn detect_losses(&mut self, cx: &mut Cx<'_, '_>) {
        let Some(largest) = self.largest_acked else {
            return;
        };
        let delay = Self::loss_delay(cx);
        let mut earliest_pending: Option<Instant> = None;
        let mut lost = std::mem::take(&mut self.scratch);
        lost.clear();
        let mut i = self.scan_from.saturating_sub(self.base_pn) as usize;
        while let Some(s) = self.sent.get(i) {
            if s.info.pn >= largest {
                break;
            }
            if s.state == SentState::Outstanding {
                if s.info.pn + PACKET_THRESHOLD <= largest || s.info.sent_at + delay <= cx.now {
                    lost.push(s.info.pn);
                } else {
                    earliest_pending = Some(s.info.sent_at + delay);
                    break;
                }
            }
            i += 1;
        }
        self.scan_from = self.base_pn + i as u64;
        for &pn in &lost {
            self.mark(pn, SentState::Lost, cx);
        }
        self.scratch = lost;
        match earliest_pending {
            Some(at) => cx.set_timer(self.loss_timer, at),
            None => cx.cancel_timer(self.loss_timer),
        }
    }

    fn on_nak(&mut self, nak: NakFrame<'_>, cx: &mut Cx<'_, '_>) {
        cx.st.stats.naks_received += 1;
        let next_pn = self.base_pn + self.sent.len() as u64;
        for r in nak.ranges() {
            let lo = r.lo.max(self.base_pn);
            let hi = r.hi.min(next_pn.saturating_sub(1));
            let mut pn = lo;
            while pn <= hi {
                self.mark(pn, SentState::Lost, cx);
                pn += 1;
            }
        }
        self.prune(cx);
        self.arm_rto(cx);
    }

    fn on_rto(&mut self, cx: &mut Cx<'_, '_>) {
        // Only path-MTU probes outstanding: they are lost, which says nothing about the
        // path's congestion, so no expiry is reported and the timer does not back off.
        let only_probes = self
            .sent
            .iter()
            .filter(|s| s.state == SentState::Outstanding)
            .all(|s| s.info.probe);
        if !only_probes {
            cx.st.stats.rto_expiries += 1;
            let backoff = &mut cx.st.path.rto_backoff;
            *backoff = (*backoff + 1).min(MAX_BACKOFF);
            let backoff = *backoff;
            cx.raise(Event::RtoExpired { backoff });
        }
        let mut lost = std::mem::take(&mut self.scratch);
        lost.clear();
        lost.extend(
            self.sent
                .iter()
                .filter(|s| s.state == SentState::Outstanding)
                .map(|s| s.info.pn),
        );
        for &pn in &lost {
            self.mark(pn, SentState::Lost, cx);
        }
        self.scratch = lost;
        self.prune(cx);
        cx.cancel_timer(self.loss_timer);
        // Re-armed by the next ack-eliciting packet.
    }

    // ----- receiver side -----

    fn on_received(&mut self, pn: u64, ack_eliciting: bool, cx: &mut Cx<'_, '_>) {
        if pn < self.floor {
            return;
        }
        let largest = self.recv.first().map(|r| r.hi);
        let duplicate = self.recv.iter().any(|r| r.lo <= pn && pn <= r.hi);
        if duplicate {
            // The sender may have missed our acknowledgement.
            self.ack_now |= ack_eliciting;
            return;
        }
        insert_range(&mut self.recv, pn);
        if largest.is_none_or(|l| pn > l) {
            self.largest_recv_at = cx.now;
        }
        if ack_eliciting {
            self.unacked_eliciting += 1;
            let in_order = largest.is_none_or(|l| pn == l + 1);
            if !in_order || self.unacked_eliciting >= 2 {
                self.ack_now = true;
            } else if cx.st.timers.deadline(self.ack_timer).is_none() {
                cx.set_timer(self.ack_timer, cx.now + self.max_ack_delay);
            }
        }
        self.find_holes();
    }

    fn find_holes(&mut self) {
        let Some(largest) = self.recv.first().map(|r| r.hi) else {
            return;
        };
        let horizon = largest.saturating_sub(PACKET_THRESHOLD);
        if horizon <= self.nak_horizon {
            return;
        }
        for w in self.recv.windows(2) {
            let (hole_lo, hole_hi) = (w[1].hi + 1, w[0].lo - 1);
            if hole_hi < self.nak_horizon {
                break;
            }
            let lo = hole_lo.max(self.nak_horizon);
            let hi = hole_hi.min(horizon);
            if lo <= hi {
                if let Some(adjacent) = self
                    .pending_naks
                    .iter_mut()
                    .find(|r| r.hi + 1 == lo || hi + 1 == r.lo)
                {
                    adjacent.lo = adjacent.lo.min(lo);
                    adjacent.hi = adjacent.hi.max(hi);
                } else if self.pending_naks.len() < MAX_PENDING_NAKS {
                    self.pending_naks.push(PnRange { lo, hi });
                }
            }
        }
        self.nak_horizon = horizon + 1;
    }

    fn on_floor(&mut self, floor: u64) {
        if floor <= self.floor {
            return;
        }
        self.floor = floor;
        self.recv.retain_mut(|r| {
            r.lo = r.lo.max(floor);
            r.hi >= floor
        });
        self.nak_horizon = self.nak_horizon.max(floor);
        self.pending_naks.retain(|r| r.hi >= floor);
    }
}

/// Calls `f` for every packet number from `hi` down to `lo` that none of `covered` (disjoint
/// ranges, highest first) contains, highest first.
fn for_each_uncovered(hi: u64, lo: u64, covered: &[PnRange], mut f: impl FnMut(u64)) {
    let mut walk = |from: u64, down_to: u64| {
        let mut pn = from;
        while pn >= down_to {
            f(pn);
            if pn == 0 {
                break;
            }
            pn -= 1;
        }
    };
    if hi < lo {
        return;
    }
    let mut cur = hi;
    for c in covered {
        if c.lo > cur {
            continue;
        }
        if c.hi < lo {
            break;
        }
        if c.hi < cur {
            walk(cur, (c.hi + 1).max(lo));
        }
        if c.lo <= lo {
            return;
        }
        cur = c.lo - 1;
    }
    walk(cur, lo);
}

/// Inserts `pn` into ranges kept in descending order, merging neighbours and keeping at
/// most [`MAX_RECV_RANGES`] (the oldest are forgotten).
fn insert_range(ranges: &mut Vec<PnRange>, pn: u64) {
    // Ranges before `i` end at or above `pn`.
    let i = ranges
        .iter()
        .position(|r| r.hi < pn)
        .unwrap_or(ranges.len());
    if i > 0 && ranges[i - 1].lo <= pn {
        return; // already recorded
    }
    let joins_above = i > 0 && ranges[i - 1].lo == pn + 1;
    let joins_below = i < ranges.len() && ranges[i].hi + 1 == pn;
    match (joins_above, joins_below) {
        (true, true) => {
            ranges[i - 1].lo = ranges[i].lo;
            ranges.remove(i);
        }
        (true, false) => ranges[i - 1].lo = pn,
        (false, true) => ranges[i].hi = pn,
        (false, false) => ranges.insert(i, PnRange { lo: pn, hi: pn }),
    }
    ranges.truncate(MAX_RECV_RANGES);
}

impl Microprotocol for AckTracking {
    fn bindings(&self) -> &'static [EventKind] {
        &[
            EventKind::PacketSent,
            EventKind::AckFrame,
            EventKind::NakFrame,
            EventKind::PacketReceived,
            EventKind::AckFloor,
        ]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        match *ev {
            Event::PacketSent(info) => self.on_sent(info, cx),
            Event::AckFrame(a) => self.on_ack(a, cx),
            Event::NakFrame(n) => self.on_nak(n, cx),
            Event::PacketReceived {
                pn,
                ack_eliciting,
                probe,
                ..
            } => {
                self.on_received(pn, ack_eliciting, cx);
                // A path-MTU probe is acknowledged at once (RFC 8899 §4.1): its sender is
                // waiting for the answer, and a delayed one would look like a loss.
                self.ack_now |= probe;
            }
            Event::AckFloor(f) => self.on_floor(f),
            _ => {}
        }
    }

    fn on_timer(&mut self, timer: TimerId, cx: &mut Cx<'_, '_>) {
        if timer == self.rto_timer {
            self.on_rto(cx);
        } else if timer == self.loss_timer {
            self.detect_losses(cx);
            self.prune(cx);
            self.arm_rto(cx);
        } else if timer == self.ack_timer {
            self.ack_now = true;
        }
    }

    fn writes_frames(&self) -> bool {
        true
    }

    fn owes_frames(&self, _st: &State) -> bool {
        self.ack_owed(false) || !self.pending_naks.is_empty()
    }

    fn write_frames(&mut self, w: &mut FrameWriter<'_>, cx: &mut Cx<'_, '_>) {
        if self.ack_owed(!cx.st.segs.sendable.is_empty()) {
            let delay = cx.now.saturating_since(self.largest_recv_at).as_micros() as u64;
            let before = w.buf.len();
            AckFrame::emit(w.buf, delay, self.recv.iter().copied());
            if w.room() == 0 && w.buf.len() > before {
                // Never let an ACK overflow the packet: fall back to fewer ranges.
                w.buf.truncate(before);
                AckFrame::emit(w.buf, delay, self.recv.iter().copied().take(4));
            }
            self.ack_now = false;
            self.unacked_eliciting = 0;
            cx.cancel_timer(self.ack_timer);
            cx.st.stats.acks_sent += 1;
        }
        if !self.pending_naks.is_empty() && w.room() > 8 + self.pending_naks.len() * 16 {
            NakFrame::emit(w.buf, &self.pending_naks);
            self.pending_naks.clear();
            cx.st.stats.naks_sent += 1;
        }
        // The floor rides along with data; it never makes a packet of its own.
        let floor = self.sent.front().map_or(self.base_pn, |s| s.info.pn);
        let data_follows = !cx.st.segs.sendable.is_empty();
        if data_follows && floor >= self.floor_sent + FLOOR_STEP && w.room() > 9 {
            Frame::emit_simple(w.buf, ty::ACK_FLOOR, Some(floor));
            self.floor_sent = floor;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(v: &[(u64, u64)]) -> Vec<PnRange> {
        v.iter().map(|&(lo, hi)| PnRange { lo, hi }).collect()
    }

    /// The walk over a range minus the previous frame's ranges visits exactly the
    /// uncovered packet numbers, highest first (checked against a brute force).
    #[test]
    fn uncovered_walk_matches_brute_force() {
        let covered_sets: [&[(u64, u64)]; 5] = [
            &[],
            &[(20, 30)],
            &[(40, 45), (20, 30), (0, 5)],
            &[(35, 60), (10, 12)],
            &[(0, 100)],
        ];
        for c in covered_sets {
            let c = ranges(c);
            for lo in [0u64, 3, 10, 21, 31] {
                for hi in [0u64, 4, 11, 25, 38, 50, 70] {
                    let mut got = Vec::new();
                    for_each_uncovered(hi, lo, &c, |pn| got.push(pn));
                    let want: Vec<u64> = (lo..=hi)
                        .rev()
                        .filter(|&pn| !c.iter().any(|r| r.lo <= pn && pn <= r.hi))
                        .collect();
                    assert_eq!(got, want, "hi {hi} lo {lo} covered {c:?}");
                }
            }
        }
    }

    #[test]
    fn received_ranges_merge_and_stay_descending() {
        let mut r = Vec::new();
        for pn in [5, 7, 6, 1, 2, 10, 3] {
            insert_range(&mut r, pn);
        }
        assert_eq!(r, ranges(&[(10, 10), (5, 7), (1, 3)]));
        insert_range(&mut r, 4);
        assert_eq!(r, ranges(&[(10, 10), (1, 7)]));
        insert_range(&mut r, 9);
        insert_range(&mut r, 8);
        assert_eq!(r, ranges(&[(1, 10)]));
        insert_range(&mut r, 0);
        assert_eq!(r, ranges(&[(0, 10)]));
    }

    #[test]
    fn range_count_is_bounded() {
        let mut r = Vec::new();
        for pn in (0..1000).map(|i| i * 2) {
            insert_range(&mut r, pn);
        }
        assert_eq!(r.len(), MAX_RECV_RANGES);
        assert_eq!(r[0], PnRange { lo: 1998, hi: 1998 });
    }
}
