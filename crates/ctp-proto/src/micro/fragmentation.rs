//! Fragmentation and coalescing (CTP's message-to-segment conversion).
//!
//! Send side: cuts queued messages and stream chunks into pieces, packing several small
//! messages into one segment and spreading a large one over many; each segment's payload is
//! at most the session's `max_segment_payload`. Receive side: reassembles pieces of accepted
//! segments into whole messages and raises `MessageComplete`.

use super::decl::{MicroDecl, MicroId};
use crate::engine::app::Completed;
use crate::engine::event::{Event, EventKind, Reassembled};
use crate::engine::{Cx, Microprotocol};
use crate::wire::frame::{Deps, Piece, PieceFlags};
use bytes::Bytes;
use std::collections::BTreeMap;

/// The declaration of [`MicroId::Fragmentation`]: what it needs, excludes and reads.
pub const DECL: MicroDecl = MicroDecl {
    params: &["max_message"],
    ..MicroDecl::new(MicroId::Fragmentation)
};

/// Segments cut per event before yielding, so event queues stay short.
const BATCH: usize = 32;
/// Smallest piece whose data a segment references instead of copying (below it a copy is
/// cheaper than the reference count).
const MIN_REFERENCED: usize = 256;
/// Largest reservation made for a message before its size is known.
const MAX_SIZE_HINT: usize = 256 * 1024;
/// Incomplete messages kept at once when the profile is unreliable.
const MAX_PARTIALS_UNRELIABLE: usize = 64;

/// A message in reassembly. Memory follows the data received, never the offsets a piece
/// claims: bytes from offset 0 on are appended to `buf`; a piece beyond a gap waits in
/// `ahead` (overlaps trimmed) until the gap is filled.
#[derive(Debug, Default)]
struct Partial {
    buf: Vec<u8>,
    ahead: BTreeMap<usize, Vec<u8>>,
    ahead_bytes: usize,
    total: Option<usize>,
    stream: bool,
    fin: bool,
    sent_us: Option<u64>,
    urgent: bool,
    deps: Vec<u64>,
    service: Option<u64>,
}

impl Partial {
    /// Bytes this message holds (what the receive account is charged, bookkeeping aside).
    fn held(&self) -> usize {
        self.buf.capacity() + self.ahead_bytes
    }

    /// Stores `data` at `off` (`off + data.len()` within `max`); bytes already held are
    /// kept as they are.
    fn insert(&mut self, off: usize, data: &[u8], max: usize) {
        let end = off + data.len();
        let have = self.buf.len();
        if off <= have {
            if end > have {
                grow(&mut self.buf, end - have, max);
                self.buf.extend_from_slice(&data[have - off..]);
                self.absorb_ahead(max);
            }
            return;
        }
        // Beyond a gap: keep only the parts no waiting piece covers.
        let mut at = off;
        while at < end {
            let covering = self
                .ahead
                .range(..=at)
                .next_back()
                .map(|(&o, p)| o + p.len());
            if let Some(stop) = covering.filter(|&stop| stop > at) {
                at = stop;
                continue;
            }
            let next = self
                .ahead
                .range(at..)
                .next()
                .map_or(end, |(&o, _)| o.min(end));
            let piece = data[at - off..next - off].to_vec();
            self.ahead_bytes += piece.len();
            self.ahead.insert(at, piece);
            at = next;
        }
    }

    /// Appends the waiting pieces the contiguous bytes now reach.
    fn absorb_ahead(&mut self, max: usize) {
        while let Some(entry) = self.ahead.first_entry() {
            let off = *entry.key();
            let have = self.buf.len();
            if off > have {
                return;
            }
            let piece = entry.remove();
            self.ahead_bytes -= piece.len();
            let end = off + piece.len();
            if end > have {
                grow(&mut self.buf, end - have, max);
                self.buf.extend_from_slice(&piece[have - off..]);
            }
        }
    }
}

/// Makes room for `extra` more bytes in `buf`, doubling as a `Vec` does but never beyond
/// `max` (the largest message), so a buffer's capacity stays within what the message may
/// need.
fn grow(buf: &mut Vec<u8>, extra: usize, max: usize) {
    let need = buf.len() + extra;
    if need > buf.capacity() {
        let target = need.next_power_of_two().min(max).max(need);
        buf.reserve_exact(target - buf.len());
    }
}

/// The fragmentation / coalescing microprotocol.
#[derive(Debug)]
pub struct Fragmentation {
    max_message: usize,
    reliable: bool,
    /// A sequencing microprotocol filters arrivals (binds `SegmentAccepted`); without one
    /// (CTP-Minimal) every arrival is taken (binds `SegmentArrived`).
    deduplicated: bool,
    /// Messages in reassembly, by stream and message number.
    partials: BTreeMap<(u64, u64), Partial>,
    /// Size of the last message reassembled from several pieces, rounded up to a power of
    /// two: a new one reserves that much at once instead of growing piece by piece (stream
    /// chunks are all alike).
    size_hint: usize,
}

impl Fragmentation {
    /// A segmenter accepting messages up to `max_message` bytes; `reliable` tells whether
    /// every piece will eventually arrive (otherwise stale partial messages are abandoned);
    /// `deduplicated` whether a sequencing microprotocol screens arrivals first.
    pub fn new(max_message: usize, reliable: bool, deduplicated: bool) -> Self {
        Fragmentation {
            max_message,
            reliable,
            deduplicated,
            partials: BTreeMap::new(),
            size_hint: 0,
        }
    }

    /// Cuts queued data into at most [`BATCH`] segments, while fewer than the cut-ahead
    /// ([`crate::engine::State::cut_ahead`]) wait to be sent.
    fn cut(&mut self, cx: &mut Cx<'_, '_>) {
        let mut deps_buf = Vec::new();
        // Pieces of watched streams' chunks in the segment being cut (rarely any).
        let mut watched = Vec::new();
        let ahead = cx.st.cut_ahead();
        for _ in 0..BATCH {
            if !cx.st.wants_cut(ahead) {
                return;
            }
            if cx.st.app.tx.front_mut().is_none() {
                // What is queued waits at its streams' barriers.
                return;
            }
            let seq = cx.st.session.next_seg_seq;
            let Some(seg) = cx.st.segs.alloc(seq, &cx.st.holds) else {
                return;
            };
            cx.st.session.next_seg_seq += 1;
            let room_total = cx.st.session.max_segment_payload;
            let st = &mut *cx.st;
            let s = st.segs.get_mut(seg).expect("just allocated");
            let mut first_msg = None;
            // A stream other than 0 starts a chunk only below its barrier (its peer's
            // per-stream flow control): the queue never offers one at it.
            while let Some(out) = st.app.tx.front_mut() {
                let msg = *out.msg.get_or_insert_with(|| {
                    let m = st.session.next_msg_seq;
                    st.session.next_msg_seq += 1;
                    m
                });
                let left = out.data.len() - out.cut;
                let room = room_total.saturating_sub(s.body_len());
                // The first piece of a message carries its timestamp, if the profile stamps.
                let stamp = if out.cut == 0 { out.sent_us } else { None };
                // So does its list of predecessors (causal ordering).
                let deps = if out.cut == 0 && !out.deps.is_empty() {
                    Deps::encode(msg, &out.deps, &mut deps_buf)
                } else {
                    Deps::NONE
                };
                // A piece that fills the rest of the segment runs to its end without a
                // length field; one that leaves room says how long it is.
                let service = if out.cut == 0 { out.service } else { None };
                let stream_len = Piece::stream_field_len(out.stream_id, service, out.reset);
                let extra =
                    stamp.map_or(0, crate::wire::varint::len) + deps.wire_len() + stream_len;
                let to_end_overhead = Piece::wire_len_to_end(msg, out.cut as u64, 0) + extra;
                if room <= to_end_overhead {
                    break;
                }
                let overhead = Piece::wire_len(msg, out.cut as u64, left) - left + extra;
                let to_end = left + overhead > room;
                let take = if to_end {
                    left.min(room - to_end_overhead)
                } else {
                    left
                };
                let last = take == left;
                let mut flags = 0;
                if out.stream {
                    flags |= PieceFlags::STREAM;
                }
                if out.urgent {
                    flags |= PieceFlags::URGENT;
                }
                if last {
                    flags |= PieceFlags::LAST;
                    if out.fin {
                        flags |= PieceFlags::FIN;
                    }
                }
                let piece = Piece {
                    flags: PieceFlags(flags),
                    stream: out.stream_id,
                    msg,
                    offset: out.cut as u64,
                    data: &out.data[out.cut..out.cut + take],
                    ts: stamp,
                    deps,
                    service,
                    reset: out.reset,
                };
                let data = out.cut..out.cut + take;
                if to_end {
                    // The data stays in the application's buffer; the packet takes it
                    // from there (one copy fewer on the bulk path).
                    piece.emit_header_to_end(&mut s.payload);
                    s.tail = out.data.slice(data);
                } else if s.inner.is_none() && take >= MIN_REFERENCED {
                    // The end of a chunk with more to follow in this segment: referenced
                    // too (a segment references at most one such piece).
                    piece.emit_header_with_length(&mut s.payload);
                    s.inner = Some((s.payload.len(), out.data.slice(data)));
                } else {
                    piece.emit(&mut s.payload);
                }
                if out.stream_id == 0 {
                    first_msg = first_msg.or(Some(msg));
                } else if out.watched {
                    watched.push((out.stream_id, msg));
                }
                out.cut += take;
                st.app.tx_bytes -= take;
                st.stats.app_bytes_sent += take as u64;
                if last {
                    st.app.tx.pop_front();
                }
                if to_end || !last {
                    break;
                }
            }
            if let Some(m) = first_msg {
                cx.st.segs.holds_msg(seg, m);
            }
            for (stream, chunk) in watched.drain(..) {
                cx.st.segs.holds_chunk(seg, stream, chunk);
            }
            cx.submit(seg);
        }
        if cx.st.wants_cut(ahead) {
            cx.raise(Event::UserData);
        }
    }

    fn reassemble(&mut self, piece: Piece<'_>, cx: &mut Cx<'_, '_>) {
        let end = piece.offset.saturating_add(piece.data.len() as u64);
        if end > self.max_message as u64 {
            cx.st.stats.malformed_dropped += 1;
            return;
        }
        let (off, end) = (piece.offset as usize, end as usize);
        let stream = piece.flags.has(PieceFlags::STREAM);
        let last = piece.flags.has(PieceFlags::LAST);
        let fin = piece.flags.has(PieceFlags::FIN);
        let urgent = piece.flags.has(PieceFlags::URGENT);
        let deps = piece.deps.iter(piece.msg);
        let key = (piece.stream, piece.msg);
        if off == 0 && last && !self.partials.contains_key(&key) {
            // The common case: a whole message in one piece.
            let data = Bytes::copy_from_slice(piece.data);
            self.complete(
                piece.msg,
                Completed {
                    data,
                    stream,
                    fin,
                    sent_us: piece.ts,
                    urgent,
                    deps: deps.collect(),
                    pending: 0,
                    stream_id: piece.stream,
                    service: piece.service,
                    reset: piece.reset,
                },
                cx,
            );
            return;
        }
        let max = self.max_message;
        let app = &mut cx.st.app;
        let (p, before) = match self.partials.entry(key) {
            std::collections::btree_map::Entry::Occupied(e) => {
                let p = e.into_mut();
                let held = p.held();
                (p, held)
            }
            std::collections::btree_map::Entry::Vacant(e) => {
                app.partial_messages += 1;
                // A message starting in order reserves what the last one needed; one
                // starting beyond a gap reserves nothing until the gap is filled.
                let hint = if off == 0 { self.size_hint.min(max) } else { 0 };
                let p = e.insert(Partial {
                    buf: Vec::with_capacity(hint),
                    ..Partial::default()
                });
                (p, 0)
            }
        };
        if p.total.is_some_and(|t| end > t) || (last && p.total.is_some_and(|t| t != end)) {
            // Contradicts the end an earlier piece gave: keep what was there.
            cx.st.stats.malformed_dropped += 1;
            return;
        }
        p.insert(off, piece.data, max);
        app.partial_bytes = app.partial_bytes + p.held() - before;
        p.stream = stream;
        if piece.ts.is_some() {
            p.sent_us = piece.ts;
        }
        p.urgent |= urgent;
        if piece.service.is_some() {
            p.service = piece.service;
        }
        if !piece.deps.is_empty() {
            p.deps = deps.collect();
        }
        if last {
            p.total = Some(end);
            p.fin = fin;
        }
        if p.total.is_some_and(|t| p.buf.len() >= t) {
            let p = self.remove_partial(key, cx).unwrap_or_default();
            let mut buf = p.buf;
            buf.truncate(p.total.unwrap_or(0));
            // Rounded up to a power of two: stream writes cut at odd places (a 16 KiB write
            // shortened by a buffer's edge) would otherwise make the next full-sized message
            // outgrow the reservation and reallocate.
            self.size_hint = buf.len().next_power_of_two().min(MAX_SIZE_HINT);
            self.complete(
                piece.msg,
                Completed {
                    data: Bytes::from(buf),
                    stream: p.stream,
                    fin: p.fin,
                    sent_us: p.sent_us,
                    urgent: p.urgent,
                    deps: p.deps,
                    pending: 0,
                    stream_id: piece.stream,
                    service: p.service,
                    // A reset is one empty piece, never reassembled.
                    reset: None,
                },
                cx,
            );
        } else if !self.reliable {
            // Without retransmission a missing piece may never come: give up on the
            // oldest incomplete messages rather than hold more than the buffer allows.
            while self.partials.len() > MAX_PARTIALS_UNRELIABLE
                || (cx.st.app.held() > cx.st.app.credit_limit() && !self.partials.is_empty())
            {
                let oldest = *self.partials.keys().next().expect("not empty");
                self.remove_partial(oldest, cx);
                cx.st.stats.messages_abandoned += 1;
            }
        }
    }

    /// Takes an incomplete message out of reassembly, and out of the receive account.
    fn remove_partial(&mut self, key: (u64, u64), cx: &mut Cx<'_, '_>) -> Option<Partial> {
        let p = self.partials.remove(&key)?;
        let app = &mut cx.st.app;
        app.partial_bytes -= p.held();
        app.partial_messages -= 1;
        Some(p)
    }

    /// Parks the message behind the delivery barrier and announces it; with no delivery
    /// bit registered it goes to the application at once.
    fn complete(&mut self, msg: u64, mut c: Completed, cx: &mut Cx<'_, '_>) {
        c.pending = cx.st.holds.deliver;
        let stream = c.stream_id;
        let slot = cx.st.app.park(c);
        if cx.st.holds.deliver == 0 {
            cx.deliver_now(slot);
        } else {
            cx.raise(Event::MessageComplete(Reassembled { msg, slot, stream }));
        }
    }

    /// Bytes held in incomplete messages.
    pub fn partial_bytes(&self) -> usize {
        self.partials.values().map(Partial::held).sum()
    }
}

impl Microprotocol for Fragmentation {
    fn bindings(&self) -> &'static [EventKind] {
        if self.deduplicated {
            &[
                EventKind::UserData,
                EventKind::SegmentDone,
                EventKind::SegmentAccepted,
            ]
        } else {
            &[
                EventKind::UserData,
                EventKind::SegmentDone,
                EventKind::SegmentArrived,
            ]
        }
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        match *ev {
            Event::UserData | Event::SegmentDone(_) => self.cut(cx),
            Event::SegmentAccepted(d) | Event::SegmentArrived(d) => {
                for piece in d.pieces() {
                    self.reassemble(piece, cx);
                }
            }
            _ => {}
        }
    }
}
