//! Network-coded reliability (CTCP, paper 003): the `coded` microprotocol. It replaces
//! retransmission and the congestion window of `reliable` with CTCP's sender loop
//! ([`Scheduler`]: Algorithms 1–4) and the receiver's incremental decoding (Algorithm 5).
//!
//! **Sender.** Every segment is held at its send barrier by this microprotocol. Cut
//! segments are grouped into blocks of `coded_k` in order (a block closes early, shorter,
//! when the application has nothing more queued, so a lone message is not kept waiting);
//! at most `coded_blocks` blocks are open. Each packet the scheduler allows carries one
//! coded symbol, named by a `CODED` frame (path, coded sequence number, block, k, symbol):
//! a block's first `k` are its segments themselves, released to the engine one by one as
//! ordinary DATA frames (the code is systematic); the rest are repair symbols, random
//! combinations of the block whose coefficients the receiver regenerates from the seed.
//! A symbol is the segment's DATA frame, length-prefixed ([`super::symbols`]). Segments
//! are done, and freed, when the receiver reports their block decoded; nothing is ever
//! retransmitted. Packets are paced at the controller's rate.
//!
//! **Receiver.** Every source (DATA) and repair symbol of a block in the window goes into
//! the block's [`Decoder`]; a source symbol is delivered at once by the ordinary receive
//! path, and a segment that did not arrive is rebuilt as soon as the decoder has it and run
//! through the receive path as if it had arrived (sequencing drops a late copy). Each coded
//! packet received is acknowledged in a `CODED_ACK` frame (ranges of coded sequence numbers)
//! with the oldest undecoded block and its degrees of freedom — the paper's per-packet ACK,
//! sent for every [`ACK_EVERY`] packets of a path, at once on a gap in its sequence
//! numbers, within [`MAX_ACK_DELAY`] of an arrival otherwise, and with any packet that
//! leaves meanwhile. The frame says how long it was held, which the sender takes out of
//! its round-trip samples (the token control reads delay as queueing).

use super::decl::{Group, MicroDecl, MicroId, Need};
use super::symbols::{frame_in, segment_symbol, LENGTH_PREFIX};
use crate::coding::blocks::Symbol;
use crate::coding::rlnc::{CodedSymbol, Decoder, Encoder, Reception};
use crate::coding::schedule::{DofAck, PathId, PathState, ScheduleConfig, Scheduler};
use crate::engine::event::{Event, EventKind, HoldBit};
use crate::engine::hold::{Barrier, Rearm};
use crate::engine::segment::SegId;
use crate::engine::timer::TimerId;
use crate::engine::{Cx, FrameWriter, Microprotocol, Setup, SetupError, State};
use crate::wire::coded::{CodedAckFrame, CodedFrame, SeqnoRange, MAX_RANGES};
use core::time::Duration;
use ctp_cc::pace::{PaceClock, Spacing};
use ctp_cc::time::Instant;
use std::collections::{BTreeMap, VecDeque};

/// The declaration of [`MicroId::Coded`]: what it needs, excludes and reads.
pub const DECL: MicroDecl = MicroDecl {
    needs: &[Need {
        micro: MicroId::Sequencing,
        why: "a segment decoded from repair symbols may also arrive itself, and must not be delivered twice",
    }],
    groups: &[
        Group::Reliability,
        Group::CongestionPolicy,
        Group::SegmentCoding,
    ],
    params: &["coded_k", "coded_blocks"],
    ..MicroDecl::new(MicroId::Coded)
};

/// Bytes a packet gives up for coding: the `CODED` frame before a segment, and for a
/// repair symbol the length prefix and segment-number width a symbol adds to the DATA
/// frame it codes. Segments are cut this much shorter, so a repair packet is no larger than
/// a source packet.
pub const CODED_OVERHEAD: usize = CodedFrame::MAX_HEADER + LENGTH_PREFIX + 8;

/// How often a sender with open blocks and tokens but nothing to send looks again (its
/// packets grow stale, and a block that lost some then needs repairs).
const RECHECK: Duration = Duration::from_millis(2);

/// One open block at the sender.
#[derive(Debug)]
struct TxBlock {
    id: u64,
    segs: Vec<SegId>,
    encoder: Encoder<Vec<u8>>,
}

/// One block in the receiver's window.
#[derive(Debug)]
struct RxBlock {
    decoder: Decoder,
    /// Source symbols that reached the receive path (arrived, or rebuilt and reinjected).
    delivered: Vec<bool>,
}

/// A source symbol's `CODED` frame waiting for the DATA frame of its packet.
#[derive(Clone, Copy, Debug)]
struct PendingSource {
    path: u64,
    seqno: u64,
    block: u64,
    k: u16,
    index: u16,
}

/// The coded packets lately received on one of the sender's paths.
#[derive(Debug)]
struct PathAcks {
    path: u64,
    /// Sequence numbers received, lowest first; the last [`ACK_HISTORY`] numbers are
    /// acknowledged again with every new one, so one lost `CODED_ACK` costs the sender no
    /// loss reports (each acknowledgement's loss would count as its packets' loss).
    ranges: Vec<SeqnoRange>,
    /// Packets arrived since the last `CODED_ACK`.
    unacked: u32,
    /// When the oldest of them arrived.
    first_unacked_at: Instant,
    /// When the newest arrived (the acknowledgement's delay counts from it).
    newest_at: Instant,
    /// An acknowledgement is owed now, not only with the next packet that leaves.
    due: bool,
    /// The largest number the last `CODED_ACK` carried: the history is kept below it, and
    /// everything received since is kept until an acknowledgement carried it (a burst
    /// longer than the history, taken before the next packet leaves, would otherwise read
    /// as losses at the sender).
    acked_largest: u64,
}

/// How far below the largest sequence number received acknowledgements are repeated.
const ACK_HISTORY: u64 = 64;

/// Packets of a path acknowledged together (the paper acknowledges each one: a datagram
/// and a wake-up on both sides per data packet, the largest CPU cost of the profile).
const ACK_EVERY: u32 = 4;

/// The longest train of packets a path sends at once ([`Coded::spacing`]).
const MAX_TRAIN: Duration = Duration::from_millis(1);

/// The longest a received packet waits for its acknowledgement.
const MAX_ACK_DELAY: Duration = Duration::from_millis(1);

/// The `coded` microprotocol (both directions).
#[derive(Debug)]
pub struct Coded {
    send_bit: HoldBit,
    done_bit: HoldBit,
    dealloc_bit: HoldBit,
    timer: TimerId,
    /// The receiver's: an acknowledgement's [`MAX_ACK_DELAY`] is up.
    ack_timer: TimerId,
    k: u16,
    symbol_size: usize,
    mss: u64,
    // Sender side.
    sched: Scheduler,
    /// Segments cut but in no block yet, in order.
    waiting: VecDeque<SegId>,
    open: VecDeque<TxBlock>,
    /// Each path's pacer (path `i` is the connection's route `i`).
    pace: Vec<PaceClock>,
    /// The path asked first for the next packet (the paths take turns).
    turn: usize,
    /// A packet may leave now (computed where the time is known, for `owes_frames`).
    ready: bool,
    /// Losses (and timeouts) of the scheduler's paths already counted in the statistics.
    lost_reported: u64,
    repair: Vec<u8>,
    pool: Vec<Vec<u8>>,
    // Receiver side.
    max_blocks: u64,
    rx: BTreeMap<u64, RxBlock>,
    rx_current: u64,
    pending: Option<PendingSource>,
    /// Coded sequence numbers received lately, per path.
    acks: Vec<PathAcks>,
    shard: Vec<u8>,
}

impl Coded {
    /// Blocks of `k` segments, `max_blocks` open at once; `segment_max` is the largest
    /// segment payload, `mss` the largest packet the controller counts.
    pub fn new(
        setup: &mut Setup<'_>,
        k: u16,
        max_blocks: u16,
        segment_max: usize,
        cc_config: ctp_cc::Config,
        now: Instant,
    ) -> Result<Self, SetupError> {
        if k == 0 || max_blocks == 0 {
            return Err(SetupError::Invalid("coded block shape"));
        }
        // A symbol: length prefix, DATA type, the segment number (8 bytes at most), payload.
        let symbol_size = LENGTH_PREFIX + 1 + 8 + segment_max;
        let mut sched = Scheduler::new(ScheduleConfig {
            max_blocks: max_blocks as usize,
            cc_config,
            // The paper's rule: a block is sent for its expected arrivals, no margin. A
            // block that comes up short waits a round trip for its last symbols, while the
            // other open blocks keep the path busy; a margin sent 35 % more repairs at 5 %
            // loss (most of them arriving at blocks already decoded) for no goodput.
            margin_sd: 0.0,
            ..ScheduleConfig::default()
        });
        sched.add_path(now);
        Ok(Coded {
            send_bit: setup.hold_bit(Barrier::Send, Rearm::Once)?,
            done_bit: setup.hold_bit(Barrier::Done, Rearm::Once)?,
            dealloc_bit: setup.hold_bit(Barrier::Deallocate, Rearm::Once)?,
            timer: setup.timer()?,
            ack_timer: setup.timer()?,
            k,
            symbol_size,
            mss: cc_config.mss.max(1),
            sched,
            waiting: VecDeque::new(),
            open: VecDeque::new(),
            pace: vec![PaceClock::new()],
            turn: 0,
            ready: false,
            lost_reported: 0,
            repair: vec![0; symbol_size],
            pool: Vec::new(),
            max_blocks: u64::from(max_blocks),
            rx: BTreeMap::new(),
            rx_current: 0,
            pending: None,
            acks: Vec::new(),
            shard: Vec::new(),
        })
    }

    // ----- sender -----

    /// Opens blocks from the waiting segments: whole ones, or a short one when the
    /// application has nothing more queued.
    fn open_blocks(&mut self, cx: &mut Cx<'_, '_>) {
        while !self.waiting.is_empty() && !self.sched.blocks().is_full() {
            let whole = self.waiting.len() >= self.k as usize;
            // A short block only when nothing more can be cut now (nothing queued, or only
            // on streams waiting at their barriers, which the receiver moves only once it
            // has these segments) and the path has nothing else to send: a sender between
            // two writes would otherwise cut many tiny blocks, each costing a repair
            // symbol of its own.
            if !whole && (cx.st.app.tx.has_ready() || self.any_path_wants(cx)) {
                return;
            }
            let n = self.waiting.len().min(self.k as usize);
            let segs: Vec<SegId> = self.waiting.drain(..n).collect();
            let mut symbols = Vec::with_capacity(n);
            for &seg in &segs {
                let mut shard = self.pool.pop().unwrap_or_default();
                match cx.st.segs.get_mut(seg) {
                    Some(s) => {
                        s.flatten_body();
                        segment_symbol(s.seq, &s.payload, &mut shard);
                    }
                    None => shard.clear(),
                }
                symbols.push(shard);
            }
            let (Ok(encoder), Ok(id)) = (
                Encoder::new(symbols, self.symbol_size),
                self.sched.open_block(n as u16),
            ) else {
                // Cannot happen: the shape was checked at set-up and the window has room.
                return;
            };
            self.open.push_back(TxBlock { id, segs, encoder });
        }
    }

    /// Whether segment `seg` waits only for this microprotocol's send bit.
    fn only_mine(&self, seg: SegId, st: &State) -> bool {
        st.segs
            .get(seg)
            .is_some_and(|s| s.holds.send & !(1 << self.send_bit) == 0)
    }

    fn block(&self, id: u64) -> Option<&TxBlock> {
        open_block(&self.open, id)
    }

    /// Adds a scheduler path for every route the connection made usable since.
    fn sync_paths(&mut self, cx: &Cx<'_, '_>) {
        while self.sched.path_count() < cx.st.routes.span() {
            self.sched.add_path(cx.now);
            self.pace.push(PaceClock::new());
        }
    }

    /// Whether any path the connection lets carry data has a symbol to send.
    fn any_path_wants(&mut self, cx: &Cx<'_, '_>) -> bool {
        (0..self.sched.path_count())
            .any(|p| cx.st.routes.is_usable(p) && self.sched.peek(p, cx.now).is_some())
    }

    /// The block path `p`'s next symbol belongs to, and the segment it is when it is a
    /// source symbol; `None` when the path has nothing to send or the segment is held by
    /// another microprotocol.
    fn candidate(&mut self, p: PathId, st: &State, now: Instant) -> Option<(u64, Option<SegId>)> {
        match self.sched.peek(p, now)? {
            (b, Symbol::Source(i)) => {
                let seg = *self.block(b)?.segs.get(i as usize)?;
                self.only_mine(seg, st).then_some((b, Some(seg)))
            }
            (b, Symbol::Repair(_)) => Some((b, None)),
        }
    }

    /// How path `p`'s packets are grouped: trains of a 32nd of its round trip, from the
    /// pacer's ordinary 250 µs up to [`MAX_TRAIN`]. Each packet costs a wake-up on both
    /// sides, and a train of a millisecond is eight of them at 100 Mb/s where 250 µs is
    /// two (sender CPU 22.0 → 16.1 s/GB on two 100 Mbit/s paths of 60 ms); the burst
    /// queues at most a 32nd of the path's delay, which the token control tolerates.
    fn spacing(&self, p: PathId) -> Spacing {
        let srtt = self.sched.srtt(p);
        let train = srtt.map_or(Duration::ZERO, |r| r / 32).min(MAX_TRAIN);
        Spacing::TrainsOf(train.as_micros() as u64)
    }

    /// Works out whether a packet may leave now on some path, and arms the timer for the
    /// next moment something may change.
    fn refresh(&mut self, cx: &mut Cx<'_, '_>) {
        let now = cx.now;
        self.sync_paths(cx);
        self.open_blocks(cx);
        let mut ready = false;
        let mut any_wanted = false;
        let mut at = self.sched.poll_timeout();
        let mut consider = |t: Instant| at = Some(at.map_or(t, |a| a.min(t)));
        for p in 0..self.sched.path_count() {
            if !cx.st.routes.is_usable(p) {
                continue;
            }
            let rate = self.sched.pacing_rate(p);
            let spacing = self.spacing(p);
            let paced = self.pace[p].ready(now, rate, self.mss, spacing);
            let wanted = self.candidate(p, cx.st, now).is_some();
            ready |= paced && wanted;
            any_wanted |= wanted;
            if wanted && !paced {
                consider(self.pace[p].wake_at(rate, self.mss, spacing));
            }
        }
        self.ready = ready;
        if !any_wanted && self.sched.blocks().open_count() > 0 {
            consider(now + RECHECK);
        }
        match at {
            Some(t) => cx.set_timer(self.timer, t.max(now)),
            None => cx.cancel_timer(self.timer),
        }
        self.publish_path(cx);
    }

    /// The scheduler's view of the paths, for the engine's other users (close, keepalive,
    /// statistics): losses summed, the round trip and timeout of the fastest path that is
    /// up, the windows and packets out summed.
    fn publish_path(&mut self, cx: &mut Cx<'_, '_>) {
        let (mut lost, mut window, mut in_flight) = (0, 0, 0);
        let mut fastest: Option<(Duration, Duration)> = None;
        for p in 0..self.sched.path_count() {
            let Some(s) = self.sched.path_stats(p) else {
                continue;
            };
            lost += s.lost + s.timeouts;
            window += s.window;
            in_flight += s.in_flight;
            if let (Some(srtt), PathState::Up) = (s.srtt, s.state) {
                if fastest.is_none_or(|(f, _)| srtt < f) {
                    fastest = Some((srtt, s.rto));
                }
            }
        }
        cx.st.stats.packets_lost += lost.saturating_sub(self.lost_reported);
        self.lost_reported = lost;
        if let Some((srtt, rto)) = fastest {
            cx.st.path.srtt_us = srtt.as_micros() as u64;
            cx.st.path.rto_us = rto.as_micros() as u64;
        }
        cx.st.path.cwnd = window * self.mss;
        cx.st.path.bytes_in_flight = in_flight * self.mss;
    }

    fn send_symbol(&mut self, w: &mut FrameWriter<'_>, cx: &mut Cx<'_, '_>) {
        let now = cx.now;
        // Room for the frame and the largest symbol, as a source or as a repair.
        if w.room() < CodedFrame::MAX_HEADER + 3 + self.symbol_size {
            return;
        }
        // The paths take turns: the first, from this turn's, that is paced and has a symbol.
        let n = self.sched.path_count();
        let turn = self.turn;
        let picked = (0..n).map(|i| (turn + i) % n).find_map(|p| {
            if !cx.st.routes.may_carry(p) {
                return None;
            }
            let rate = self.sched.pacing_rate(p);
            let spacing = self.spacing(p);
            if !self.pace[p].ready(now, rate, self.mss, spacing) {
                return None;
            }
            self.candidate(p, cx.st, now).map(|c| (p, rate, c))
        });
        let Some((path, rate, (chosen, seg))) = picked else {
            return;
        };
        let Some(tx) = self.sched.send_from(path, now, chosen) else {
            return;
        };
        let Some(block) = open_block(&self.open, tx.block) else {
            return;
        };
        let k = block.encoder.k() as u16;
        let mut frame = CodedFrame {
            path: path as u64,
            seqno: tx.seqno,
            block: tx.block,
            k,
            symbol: 0,
            payload: &[],
        };
        let bytes = match tx.symbol {
            Symbol::Source(i) => {
                frame.symbol = u64::from(i);
                frame.emit(w.buf);
                if let Some(seg) = seg {
                    cx.release(seg, Barrier::Send, self.send_bit);
                }
                self.mss
            }
            Symbol::Repair(n) => {
                if block.encoder.repair(n, &mut self.repair).is_err() {
                    return;
                }
                frame.symbol = u64::from(k) + u64::from(n);
                frame.payload = &self.repair;
                frame.emit(w.buf);
                cx.st.stats.coded_repairs_sent += 1;
                self.repair.len() as u64
            }
        };
        if let Some(gap) = self.pace[path].gap_us(bytes, rate) {
            self.pace[path].delay(gap);
        }
        cx.st.routes.chosen = Some(path as u8);
        self.turn = (path + 1) % n;
        w.ack_eliciting = true;
    }

    fn on_ack(&mut self, a: CodedAckFrame<'_>, cx: &mut Cx<'_, '_>) {
        let Some(unresolved) = usize::try_from(a.path)
            .ok()
            .and_then(|p| self.sched.unresolved(p).map(|r| (p, r)))
        else {
            cx.st.stats.malformed_dropped += 1;
            return;
        };
        let (path, window) = unresolved;
        let ack = |seqno| DofAck {
            seqno,
            current_block: a.current_block,
            current_dofs: a.current_dofs as u32,
            ack_delay: Duration::from_micros(a.ack_delay_us),
        };
        let mut any = false;
        for r in a.ranges() {
            // Only numbers still unresolved say anything (and bound the work a peer can ask).
            let lo = r.lo.max(window.start);
            let hi = r.hi.saturating_add(1).min(window.end);
            for seqno in lo..hi {
                self.sched.on_ack(path, cx.now, ack(seqno));
                any = true;
            }
        }
        if !any {
            // Still news of the receiver's blocks.
            self.sched
                .on_ack(path, cx.now, ack(window.start.saturating_sub(1)));
        }
        self.free_decoded(cx);
    }

    /// Lets go of the segments of every block the receiver decoded.
    fn free_decoded(&mut self, cx: &mut Cx<'_, '_>) {
        let current = self.sched.blocks().current();
        while self.open.front().is_some_and(|b| b.id < current) {
            let Some(b) = self.open.pop_front() else {
                break;
            };
            for &seg in &b.segs {
                cx.release(seg, Barrier::Done, self.done_bit);
                cx.release(seg, Barrier::Deallocate, self.dealloc_bit);
            }
            self.pool.extend(b.encoder.into_symbols());
        }
    }

    // ----- receiver -----

    fn on_coded(&mut self, f: CodedFrame<'_>, cx: &mut Cx<'_, '_>) {
        if f.block >= self.rx_current + self.max_blocks {
            // Beyond any window the sender may have open: not from a peer that follows
            // the protocol.
            cx.st.stats.malformed_dropped += 1;
            return;
        }
        if let Some(index) = f.source_index() {
            self.pending = Some(PendingSource {
                path: f.path,
                seqno: f.seqno,
                block: f.block,
                k: f.k,
                index,
            });
            return;
        }
        let Some(seed) = f.repair_seed() else {
            return;
        };
        if f.payload.len() != self.symbol_size {
            cx.st.stats.malformed_dropped += 1;
            return;
        }
        let app = &cx.st.app;
        let next_in_order = f.block == self.rx_current && app.unread() < app.rx_limit / 4;
        if app.held() >= app.credit_limit() && !next_in_order {
            // The receive buffer is as full as segments out of order may make it (the
            // admission rule for segments): the segments this repair would rebuild could
            // not be taken either. Not acknowledged, so the sender counts it lost. The
            // oldest undecoded block is let in as the next segment in order is, or a
            // buffer full of later data would wait for it forever; its segments add at
            // most a block to what is held, within the receiver's slack.
            cx.st.stats.segments_refused += 1;
            return;
        }
        self.owe_ack(f.path, f.seqno, cx);
        if f.block < self.rx_current {
            return; // decoded already
        }
        let Some(b) = self.rx_block(f.block, f.k, cx) else {
            return;
        };
        match b.decoder.receive(CodedSymbol::Repair(seed), f.payload) {
            Ok(Reception::Innovative) => self.deliver_decoded(f.block, cx),
            Ok(Reception::NotInnovative) => cx.st.stats.coded_not_innovative += 1,
            Err(_) => cx.st.stats.malformed_dropped += 1,
        }
    }

    fn on_segment(&mut self, seq: u64, payload: &[u8], cx: &mut Cx<'_, '_>) {
        let Some(p) = self.pending.take() else {
            return; // rebuilt here, or not a coded packet
        };
        self.owe_ack(p.path, p.seqno, cx);
        if p.block < self.rx_current {
            return;
        }
        let mut shard = std::mem::take(&mut self.shard);
        segment_symbol(seq, payload, &mut shard);
        if shard.len() > self.symbol_size {
            self.shard = shard;
            cx.st.stats.malformed_dropped += 1;
            return;
        }
        shard.resize(self.symbol_size, 0);
        let Some(b) = self.rx_block(p.block, p.k, cx) else {
            self.shard = shard;
            return;
        };
        let symbol = CodedSymbol::Source(p.index as usize);
        let received = b.decoder.receive(symbol, &shard);
        self.shard = shard;
        let Some(b) = self.rx.get_mut(&p.block) else {
            return;
        };
        match received {
            Ok(Reception::Innovative) => {
                b.delivered[p.index as usize] = true;
                self.deliver_decoded(p.block, cx);
            }
            Ok(Reception::NotInnovative) => {
                b.delivered[p.index as usize] = true;
                cx.st.stats.coded_not_innovative += 1;
            }
            Err(_) => cx.st.stats.malformed_dropped += 1,
        }
    }

    /// The block's decoder, made on its first symbol (`None`, counted, when `k` disagrees
    /// with what the block's earlier symbols said).
    fn rx_block(&mut self, id: u64, k: u16, cx: &mut Cx<'_, '_>) -> Option<&mut RxBlock> {
        let size = self.symbol_size;
        if let std::collections::btree_map::Entry::Vacant(e) = self.rx.entry(id) {
            e.insert(RxBlock {
                decoder: Decoder::new(k as usize, size).ok()?,
                delivered: vec![false; k as usize],
            });
        }
        let b = self.rx.get_mut(&id)?;
        if b.decoder.k() != k as usize {
            cx.st.stats.malformed_dropped += 1;
            return None;
        }
        Some(b)
    }

    /// Hands every newly decoded segment of block `id` to the receive path, and moves the
    /// window past the blocks that are complete.
    fn deliver_decoded(&mut self, id: u64, cx: &mut Cx<'_, '_>) {
        if let Some(b) = self.rx.get_mut(&id) {
            for i in 0..b.delivered.len() {
                if b.delivered[i] || !b.decoder.is_decoded(i) {
                    continue;
                }
                b.delivered[i] = true;
                if let Some(frame) = b.decoder.symbol(i).and_then(frame_in) {
                    cx.st.stats.coded_recovered += 1;
                    cx.st.reinject.push(frame.to_vec());
                }
            }
        }
        while self
            .rx
            .get(&self.rx_current)
            .is_some_and(|b| b.decoder.is_complete())
        {
            self.rx.remove(&self.rx_current);
            self.rx_current += 1;
        }
    }

    /// Records the arrival of coded packet `seqno` of `path`, and when its acknowledgement
    /// is owed.
    fn owe_ack(&mut self, path: u64, seqno: u64, cx: &mut Cx<'_, '_>) {
        let now = cx.now;
        let i = match self.acks.iter().position(|a| a.path == path) {
            Some(i) => i,
            None => {
                self.acks.push(PathAcks {
                    path,
                    ranges: Vec::new(),
                    unacked: 0,
                    first_unacked_at: now,
                    newest_at: now,
                    due: false,
                    acked_largest: 0,
                });
                self.acks.len() - 1
            }
        };
        let a = &mut self.acks[i];
        // A number that does not follow the largest one says a packet was lost (or came
        // late): news the sender's loss estimate and scheduler want at once.
        let in_order = a.ranges.last().is_some_and(|r| seqno == r.hi + 1);
        insert_seqno(&mut a.ranges, seqno);
        if a.unacked == 0 {
            a.first_unacked_at = now;
        }
        a.unacked += 1;
        a.newest_at = now;
        a.due |= !in_order || a.unacked >= ACK_EVERY;
        let new_deadline = a.unacked == 1 && !a.due;
        // Forget what lies beyond the history (and beyond the ranges a frame carries).
        let floor = a.acked_largest.saturating_sub(ACK_HISTORY);
        a.ranges.retain(|r| r.hi >= floor);
        if let Some(first) = a.ranges.first_mut() {
            first.lo = first.lo.max(floor);
        }
        let excess = a.ranges.len().saturating_sub(MAX_RANGES);
        a.ranges.drain(..excess);
        if new_deadline {
            self.arm_ack_timer(cx);
        }
    }

    /// Makes every acknowledgement whose delay is up owed now.
    fn on_ack_timer(&mut self, cx: &mut Cx<'_, '_>) {
        for a in &mut self.acks {
            if a.unacked > 0 && a.first_unacked_at + MAX_ACK_DELAY <= cx.now {
                a.due = true;
            }
        }
        self.arm_ack_timer(cx);
    }

    /// Arms the acknowledgement timer for the earliest delay still running (a timer left
    /// for an acknowledgement sent meanwhile finds nothing due).
    fn arm_ack_timer(&mut self, cx: &mut Cx<'_, '_>) {
        let next = self
            .acks
            .iter()
            .filter(|a| a.unacked > 0 && !a.due)
            .map(|a| a.first_unacked_at + MAX_ACK_DELAY)
            .min();
        match next {
            Some(at) => cx.set_timer(self.ack_timer, at),
            None => cx.cancel_timer(self.ack_timer),
        }
    }

    /// Acknowledges, in this packet, what arrived since the last acknowledgement: on every
    /// path whose acknowledgement is due, and on every other one too when the packet
    /// leaves anyway.
    fn write_acks(&mut self, w: &mut FrameWriter<'_>, now: Instant) {
        let dofs = self
            .rx
            .get(&self.rx_current)
            .map_or(0, |b| b.decoder.rank() as u64);
        let owed = w.owed;
        for a in self
            .acks
            .iter_mut()
            .filter(|a| a.due || (owed && a.unacked > 0))
        {
            if w.room() < CodedAckFrame::max_len(a.ranges.len()) {
                return;
            }
            let held = now.saturating_since(a.newest_at).as_micros() as u64;
            CodedAckFrame::emit(w.buf, a.path, (self.rx_current, dofs), held, &a.ranges);
            a.acked_largest = a.ranges.last().map_or(0, |r| r.hi);
            a.unacked = 0;
            a.due = false;
        }
    }
}

/// Open block `id` at the sender.
fn open_block(open: &VecDeque<TxBlock>, id: u64) -> Option<&TxBlock> {
    let first = open.front()?.id;
    open.get(id.checked_sub(first)? as usize)
}

/// Adds `seqno` to ranges kept lowest first and not touching.
fn insert_seqno(ranges: &mut Vec<SeqnoRange>, seqno: u64) {
    // The common case: at or just past the end.
    if let Some(last) = ranges.last_mut() {
        if seqno == last.hi + 1 {
            last.hi = seqno;
            return;
        }
        if seqno > last.hi {
            ranges.push(SeqnoRange {
                lo: seqno,
                hi: seqno,
            });
            return;
        }
    } else {
        ranges.push(SeqnoRange {
            lo: seqno,
            hi: seqno,
        });
        return;
    }
    let i = ranges.partition_point(|r| r.hi < seqno);
    if ranges[i].lo <= seqno {
        return; // already there
    }
    let joins_before = i > 0 && ranges[i - 1].hi + 1 == seqno;
    let joins_after = ranges[i].lo == seqno + 1;
    match (joins_before, joins_after) {
        (true, true) => {
            ranges[i - 1].hi = ranges[i].hi;
            ranges.remove(i);
        }
        (true, false) => ranges[i - 1].hi = seqno,
        (false, true) => ranges[i].lo = seqno,
        (false, false) => ranges.insert(
            i,
            SeqnoRange {
                lo: seqno,
                hi: seqno,
            },
        ),
    }
}

impl Microprotocol for Coded {
    fn bindings(&self) -> &'static [EventKind] {
        &[
            EventKind::UserData,
            EventKind::SegmentReady,
            EventKind::PacketSent,
            EventKind::PacketReceived,
            EventKind::SegmentArrived,
            EventKind::CodedArrived,
            EventKind::CodedAckArrived,
        ]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        match *ev {
            Event::SegmentReady {
                seg,
                retransmit: false,
            } => {
                self.waiting.push_back(seg);
                self.refresh(cx);
            }
            Event::UserData | Event::PacketSent(_) => self.refresh(cx),
            Event::PacketReceived { .. } => self.pending = None,
            Event::SegmentArrived(d) => self.on_segment(d.seg, d.payload(), cx),
            Event::CodedArrived(f) => self.on_coded(f, cx),
            Event::CodedAckArrived(a) => {
                self.on_ack(a, cx);
                self.refresh(cx);
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, t: TimerId, cx: &mut Cx<'_, '_>) {
        if t == self.ack_timer {
            self.on_ack_timer(cx);
            return;
        }
        self.sched.on_timer(cx.now);
        self.refresh(cx);
    }

    fn writes_frames(&self) -> bool {
        true
    }

    fn owes_frames(&self, _st: &State) -> bool {
        self.ready || self.acks.iter().any(|a| a.due)
    }

    fn write_frames(&mut self, w: &mut FrameWriter<'_>, cx: &mut Cx<'_, '_>) {
        self.write_acks(w, cx.now);
        // Only when `owes_frames` said so: the engine skips a packet nobody owes, so a
        // symbol written otherwise would depend on whether another writer owed one.
        if self.ready {
            self.send_symbol(w, cx);
        }
        self.ready = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(lo: u64, hi: u64) -> SeqnoRange {
        SeqnoRange { lo, hi }
    }

    #[test]
    fn received_numbers_become_ranges_lowest_first() {
        let mut v = Vec::new();
        for s in [5, 6, 7, 10, 9, 2, 7, 8, 3, 0] {
            insert_seqno(&mut v, s);
        }
        assert_eq!(v, [r(0, 0), r(2, 3), r(5, 10)]);
        insert_seqno(&mut v, 1);
        assert_eq!(v, [r(0, 3), r(5, 10)]);
        insert_seqno(&mut v, 4);
        assert_eq!(v, [r(0, 10)]);
    }
}
