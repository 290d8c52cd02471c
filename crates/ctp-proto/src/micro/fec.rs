//! Forward error correction with a systematic Reed–Solomon block code (CTP's FEC
//! microprotocol), usable alone or together with ARQ.
//!
//! Sender: holds a *deallocate* bit on every segment until the block of `k` consecutive
//! segments it belongs to has been encoded, then sends `m` REPAIR frames. A block that does
//! not fill within the flush delay is encoded with the segments it has. Each shard is the
//! segment's whole DATA frame, length-prefixed and zero-padded to the block's longest.
//!
//! Receiver: remembers recent DATA frames; when a block has at least `k` of its `k + m`
//! shards but misses data, it rebuilds the missing DATA frames and hands them to the engine,
//! which runs them through the receive path as if they had arrived (so sequencing, reassembly
//! and ordering treat them like any segment). Repair shards never reach the application.

use super::decl::{Group, MicroDecl, MicroId, Need};
use super::symbols::{frame_bytes, frame_in, shard_of};
use crate::coding::rs::ReedSolomon;
use crate::engine::event::{Event, EventKind, HoldBit};
use crate::engine::hold::{Barrier, Rearm};
use crate::engine::segment::SegId;
use crate::engine::timer::TimerId;
use crate::engine::{Cx, FrameWriter, Microprotocol, Setup, SetupError};
use crate::wire::frame::RepairFrame;
use core::time::Duration;
use std::collections::{BTreeMap, VecDeque};

/// The declaration of [`MicroId::Fec`]: what it needs, excludes and reads.
pub const DECL: MicroDecl = MicroDecl {
    needs: &[Need {
        micro: MicroId::Sequencing,
        why: "a recovered segment may also arrive late and must not be delivered twice",
    }],
    groups: &[Group::SegmentCoding],
    params: &["fec_k", "fec_m", "fec_flush_ms"],
    ..MicroDecl::new(MicroId::Fec)
};

/// Recent DATA frames remembered by the receiver.
const RECENT_FRAMES: usize = 2048;
/// Incomplete blocks remembered by the receiver.
const OPEN_BLOCKS: usize = 128;
/// Repair frames waiting to be sent at most (beyond, the oldest are dropped).
const MAX_OWED: usize = 1024;

#[derive(Debug, Default)]
struct RxBlock {
    k: u8,
    m: u8,
    len: usize,
    repairs: Vec<Option<Vec<u8>>>,
    done: bool,
}

/// The FEC microprotocol.
#[derive(Debug)]
pub struct Fec {
    code: ReedSolomon,
    dealloc: HoldBit,
    flush: TimerId,
    flush_after: Duration,
    // Sender side.
    block: Vec<(SegId, u64)>,
    owed: VecDeque<Vec<u8>>,
    shards: Vec<Vec<u8>>,
    parity: Vec<Vec<u8>>,
    // Receiver side.
    recent: BTreeMap<u64, Vec<u8>>,
    blocks: BTreeMap<u64, RxBlock>,
    pool: Vec<Vec<u8>>,
}

impl Fec {
    /// `k` data segments and `m` repair shards per block; a partial block is encoded after
    /// `flush_after`.
    pub fn new(
        setup: &mut Setup<'_>,
        k: u8,
        m: u8,
        flush_after: Duration,
    ) -> Result<Self, SetupError> {
        let code = ReedSolomon::new(k as usize, m as usize)
            .map_err(|_| SetupError::Invalid("fec block shape"))?;
        Ok(Fec {
            code,
            dealloc: setup.hold_bit(Barrier::Deallocate, Rearm::Once)?,
            flush: setup.timer()?,
            flush_after,
            block: Vec::new(),
            owed: VecDeque::new(),
            shards: Vec::new(),
            parity: Vec::new(),
            recent: BTreeMap::new(),
            blocks: BTreeMap::new(),
            pool: Vec::new(),
        })
    }

    fn on_first_send(&mut self, seg: SegId, cx: &mut Cx<'_, '_>) {
        let Some(seq) = cx.st.segs.get(seg).map(|s| s.seq) else {
            return;
        };
        if let Some(&(_, first)) = self.block.first() {
            if seq != first + self.block.len() as u64 {
                // Not consecutive (cannot happen with in-order first transmissions): close
                // the block so that the receiver's arithmetic stays right.
                self.encode(cx);
            }
        }
        self.block.push((seg, seq));
        if self.block.len() == self.code.data_shards() {
            self.encode(cx);
        } else if self.block.len() == 1 {
            cx.set_timer(self.flush, cx.now + self.flush_after);
        }
    }

    /// Encodes the current (possibly partial) block, queues its repair frames and lets its
    /// segments go.
    fn encode(&mut self, cx: &mut Cx<'_, '_>) {
        cx.cancel_timer(self.flush);
        if self.block.is_empty() {
            return;
        }
        let k = self.block.len();
        let first = self.block[0].1;
        let mut frames: Vec<Vec<u8>> = Vec::with_capacity(k);
        for &(seg, seq) in &self.block {
            let mut f = self.pool.pop().unwrap_or_default();
            let s = cx.st.segs.get_mut(seg).map(|s| {
                s.flatten_body();
                &*s
            });
            frame_bytes(seq, s.map_or(&[][..], |s| &s.payload), &mut f);
            frames.push(f);
        }
        let len = 2 + frames.iter().map(Vec::len).max().unwrap_or(0);
        let code = if k == self.code.data_shards() {
            self.code.clone()
        } else {
            match ReedSolomon::new(k, self.code.parity_shards()) {
                Ok(c) => c,
                Err(_) => return,
            }
        };
        self.shards.resize_with(k, Vec::new);
        for (s, f) in self.shards.iter_mut().zip(&frames) {
            shard_of(f, len, s);
        }
        let refs: Vec<&[u8]> = self.shards.iter().map(Vec::as_slice).collect();
        self.parity.resize_with(code.parity_shards(), Vec::new);
        if code.encode(&refs, &mut self.parity).is_ok() {
            for (i, p) in self.parity.iter().enumerate() {
                let mut out = Vec::with_capacity(RepairFrame::wire_len(first, p.len()));
                RepairFrame {
                    first_seg: first,
                    k: k as u8,
                    m: code.parity_shards() as u8,
                    index: i as u8,
                    shard: p,
                }
                .emit(&mut out);
                if self.owed.len() == MAX_OWED {
                    self.owed.pop_front();
                }
                self.owed.push_back(out);
            }
        }
        self.pool.extend(frames);
        for (seg, _) in self.block.drain(..) {
            cx.release(seg, Barrier::Deallocate, self.dealloc);
        }
    }

    fn remember(&mut self, seq: u64, payload: &[u8]) {
        if self.recent.contains_key(&seq) {
            return;
        }
        let mut f = self.pool.pop().unwrap_or_default();
        frame_bytes(seq, payload, &mut f);
        self.recent.insert(seq, f);
        while self.recent.len() > RECENT_FRAMES {
            if let Some((_, old)) = self.recent.pop_first() {
                self.pool.push(old);
            }
        }
    }

    fn on_repair(&mut self, r: RepairFrame<'_>, cx: &mut Cx<'_, '_>) {
        if r.shard.len() < 2 {
            // Every shard starts with its frame's 2-byte length: this one was not encoded
            // by a peer that follows the protocol.
            cx.st.stats.malformed_dropped += 1;
            return;
        }
        let b = self.blocks.entry(r.first_seg).or_default();
        if b.done {
            return;
        }
        if b.repairs.is_empty() {
            b.k = r.k;
            b.m = r.m;
            b.len = r.shard.len();
            b.repairs = vec![None; r.m as usize];
        }
        if (b.k, b.m, b.len) != (r.k, r.m, r.shard.len()) {
            cx.st.stats.malformed_dropped += 1;
            return;
        }
        b.repairs[r.index as usize] = Some(r.shard.to_vec());
        while self.blocks.len() > OPEN_BLOCKS {
            self.blocks.pop_first();
        }
        self.try_decode(r.first_seg, cx);
    }

    fn try_decode(&mut self, first: u64, cx: &mut Cx<'_, '_>) {
        let Some(b) = self.blocks.get_mut(&first) else {
            return;
        };
        let (k, m, len) = (b.k as usize, b.m as usize, b.len);
        let present = (0..k as u64)
            .filter(|i| self.recent.contains_key(&(first + i)))
            .count();
        if present == k {
            b.done = true;
            return;
        }
        if present + b.repairs.iter().flatten().count() < k {
            return;
        }
        let mut shards: Vec<Option<Vec<u8>>> = Vec::with_capacity(k + m);
        for i in 0..k as u64 {
            shards.push(self.recent.get(&(first + i)).and_then(|f| {
                (f.len() + 2 <= len).then(|| {
                    let mut s = Vec::new();
                    shard_of(f, len, &mut s);
                    s
                })
            }));
        }
        shards.extend(b.repairs.iter().cloned());
        b.done = true;
        let Ok(code) = ReedSolomon::new(k, m) else {
            return;
        };
        if code.reconstruct_data(&mut shards).is_err() {
            return;
        }
        for i in 0..k as u64 {
            if self.recent.contains_key(&(first + i)) {
                continue;
            }
            let Some(s) = shards[i as usize].as_ref() else {
                continue;
            };
            let Some(frame) = frame_in(s) else {
                continue;
            };
            cx.st.stats.fec_recovered += 1;
            cx.st.reinject.push(frame.to_vec());
        }
    }
}

impl Microprotocol for Fec {
    fn bindings(&self) -> &'static [EventKind] {
        &[
            EventKind::PacketSent,
            EventKind::SegmentArrived,
            EventKind::RepairArrived,
        ]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        match *ev {
            Event::PacketSent(p) => {
                if let Some(seg) = p.seg {
                    if cx.st.segs.get(seg).is_some_and(|s| s.transmissions == 1) {
                        self.on_first_send(seg, cx);
                    }
                }
            }
            Event::SegmentArrived(d) => {
                self.remember(d.seg, d.payload());
                // A late data segment may be what a waiting block lacked.
                if let Some((&first, _)) = self.blocks.range(..=d.seg).next_back() {
                    if !self.blocks[&first].done {
                        self.try_decode(first, cx);
                    }
                }
            }
            Event::RepairArrived(r) => self.on_repair(r, cx),
            _ => {}
        }
    }

    fn on_timer(&mut self, _t: TimerId, cx: &mut Cx<'_, '_>) {
        self.encode(cx);
    }

    fn writes_frames(&self) -> bool {
        true
    }

    fn write_frames(&mut self, w: &mut FrameWriter<'_>, cx: &mut Cx<'_, '_>) {
        while let Some(f) = self.owed.front() {
            if f.len() > w.room() {
                break;
            }
            w.buf.extend_from_slice(f);
            cx.st.stats.fec_repairs_sent += 1;
            if let Some(f) = self.owed.pop_front() {
                self.pool.push(f);
            }
        }
    }
}
