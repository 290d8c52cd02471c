//! Fragmentation and coalescing (CTP's message-to-segment conversion).
//!
//! Send side: cuts queued messages and stream chunks into pieces, packing several small
//! messages into one segment and spreading a large one over many; each segment's payload is
//! at most the session's `max_segment_payload`. Receive side: reassembles pieces of accepted
//! segments into whole messages and raises `MessageComplete`.

use crate::engine::app::Completed;
use crate::engine::event::{Event, EventKind, Reassembled};
use crate::engine::{Cx, Microprotocol, CUT_AHEAD};
use crate::wire::frame::{Deps, Piece, PieceFlags};
use bytes::Bytes;
use std::collections::BTreeMap;

/// Segments cut per event before yielding, so event queues stay short.
const BATCH: usize = 32;
/// Smallest piece whose data a segment references instead of copying (below it a copy is
/// cheaper than the reference count).
const MIN_REFERENCED: usize = 256;
/// Largest reservation made for a message before its size is known.
const MAX_SIZE_HINT: usize = 256 * 1024;
/// Incomplete messages kept at once when the profile is unreliable.
const MAX_PARTIALS_UNRELIABLE: usize = 64;

#[derive(Debug, Default)]
struct Partial {
    buf: Vec<u8>,
    got: usize,
    total: Option<usize>,
    stream: bool,
    fin: bool,
    sent_us: Option<u64>,
    urgent: bool,
    deps: Vec<u64>,
}

/// The fragmentation / coalescing microprotocol.
#[derive(Debug)]
pub struct Fragmentation {
    max_message: usize,
    reliable: bool,
    /// A sequencing microprotocol filters arrivals (binds `SegmentAccepted`); without one
    /// (CTP-Minimal) every arrival is taken (binds `SegmentArrived`).
    deduplicated: bool,
    partials: BTreeMap<u64, Partial>,
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

    /// Cuts queued data into at most [`BATCH`] segments, while fewer than
    /// [`CUT_AHEAD`] wait to be sent.
    fn cut(&mut self, cx: &mut Cx<'_, '_>) {
        let mut deps_buf = Vec::new();
        for _ in 0..BATCH {
            if !cx.st.wants_cut(CUT_AHEAD) {
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
                let extra = stamp.map_or(0, crate::wire::varint::len) + deps.wire_len();
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
                    msg,
                    offset: out.cut as u64,
                    data: &out.data[out.cut..out.cut + take],
                    ts: stamp,
                    deps,
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
            cx.submit(seg);
        }
        if cx.st.wants_cut(CUT_AHEAD) {
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
        if off == 0 && last {
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
                },
                cx,
            );
            return;
        }
        let hint = self.size_hint;
        let p = self.partials.entry(piece.msg).or_insert_with(|| Partial {
            buf: Vec::with_capacity(hint),
            ..Partial::default()
        });
        if off == p.buf.len() {
            // In order, the common case: append without zero-filling first.
            p.buf.extend_from_slice(piece.data);
        } else {
            if p.buf.len() < end {
                p.buf.resize(end, 0);
            }
            p.buf[off..end].copy_from_slice(piece.data);
        }
        p.got += piece.data.len();
        p.stream = stream;
        if piece.ts.is_some() {
            p.sent_us = piece.ts;
        }
        p.urgent |= urgent;
        if !piece.deps.is_empty() {
            p.deps = deps.collect();
        }
        if last {
            p.total = Some(end);
            p.fin = fin;
        }
        if p.total.is_some_and(|t| p.got >= t) {
            let p = self.partials.remove(&piece.msg).unwrap_or_default();
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
                },
                cx,
            );
        } else if !self.reliable && self.partials.len() > MAX_PARTIALS_UNRELIABLE {
            self.partials.pop_first();
            cx.st.stats.messages_abandoned += 1;
        }
    }

    /// Parks the message behind the delivery barrier and announces it; with no delivery
    /// bit registered it goes to the application at once.
    fn complete(&mut self, msg: u64, mut c: Completed, cx: &mut Cx<'_, '_>) {
        c.pending = cx.st.holds.deliver;
        let slot = cx.st.app.park(c);
        if cx.st.holds.deliver == 0 {
            cx.deliver_now(slot);
        } else {
            cx.raise(Event::MessageComplete(Reassembled { msg, slot }));
        }
    }

    /// Bytes held in incomplete messages.
    pub fn partial_bytes(&self) -> usize {
        self.partials.values().map(|p| p.buf.len()).sum()
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
