//! Frames: the on-wire encoding of message attributes (type varint + fields).
//!
//! A profile's packets carry only the frames its microprotocols use. `DATA` must be the last
//! frame of a packet (it runs to the end), so it needs no length field.

use super::coded::{CodedAckFrame, CodedFrame};
use super::{varint, Reader, WireError};

/// Most ranges one ACK or NAK frame may carry.
pub const MAX_RANGES: usize = 64;
/// Longest close reason carried on the wire, in bytes.
pub const MAX_REASON: usize = 512;

/// Frame type codes.
pub mod ty {
    /// Zero bytes that fill a packet up to a size.
    pub const PADDING: u64 = 0x00;
    /// Asks for an acknowledgement; keeps a path alive.
    pub const PING: u64 = 0x01;
    /// Selective acknowledgement of packet-number ranges.
    pub const ACK: u64 = 0x02;
    /// Negative acknowledgement: packet-number ranges detected missing.
    pub const NAK: u64 = 0x03;
    /// The sender no longer needs acknowledgements below this packet number.
    pub const ACK_FLOOR: u64 = 0x04;
    /// Flow-control credit: the receiver accepts segments below this sequence number.
    pub const MAX_SEG: u64 = 0x05;
    /// Closes the connection with a code and a reason.
    pub const CLOSE: u64 = 0x07;
    /// One segment: sequence number then message pieces to the end of the packet.
    pub const DATA: u64 = 0x08;
    /// A forward-error-correction repair shard for a block of segments.
    pub const REPAIR: u64 = 0x09;
    /// XON/XOFF flow control: 1 = send, 0 = stop.
    pub const XON_XOFF: u64 = 0x0a;
    /// Request to send: the sender has this many segments waiting.
    pub const RTS: u64 = 0x0b;
    /// Clear to send: segments below this sequence number may be sent.
    pub const CTS: u64 = 0x0c;
    /// One compressed segment: sequence number, inflated length, then an LZ4 block of the
    /// pieces to the end of the packet.
    pub const DATA_Z: u64 = 0x0d;
    /// A custom control message from one congestion-control algorithm to its peer
    /// (Composable UDT's `sendCustomMsg`): a length, then at most `MAX_CC_MSG` bytes.
    pub const CC_MSG: u64 = 0x0e;
    /// Path validation: 8 unpredictable bytes the peer must echo from the address being
    /// validated.
    pub const PATH_CHALLENGE: u64 = 0x0f;
    /// Path validation: the 8 bytes of a `PATH_CHALLENGE`, echoed.
    pub const PATH_RESPONSE: u64 = 0x10;
    /// Per-stream flow control (CUSP's barrier): a stream id, then the offset below which
    /// its sender may send.
    pub const STREAM_BARRIER: u64 = 0x11;
    /// The sender of a stream waits at its barrier: a stream id, then that barrier (asks
    /// for a barrier update that may have been lost).
    pub const STREAM_BLOCKED: u64 = 0x12;
    /// The coded symbol a packet carries (the `coded` microprotocol): see
    /// [`super::super::coded`].
    pub const CODED: u64 = super::super::coded::CODED;
    /// The receiver's degrees of freedom and the coded packets it received.
    pub const CODED_ACK: u64 = super::super::coded::CODED_ACK;
}

/// Largest custom congestion-control message.
pub use ctp_cc::MAX_CC_MSG;

/// Close codes carried by `CLOSE`.
pub mod close_code {
    /// Orderly close after all data was delivered.
    pub const GRACEFUL: u64 = 0;
    /// The application aborted the connection.
    pub const ABORT: u64 = 1;
    /// The connection was idle for longer than its idle timeout.
    pub const IDLE: u64 = 2;
    /// A protocol violation was detected.
    pub const PROTOCOL: u64 = 3;
    /// So many packets failed to open that the keys had to be abandoned (the AEAD's
    /// integrity limit).
    pub const INTEGRITY_LIMIT: u64 = 4;
}

/// Flags of one message piece inside a `DATA` frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PieceFlags(pub u8);

impl PieceFlags {
    /// The piece belongs to the ordered byte stream rather than to a discrete message.
    pub const STREAM: u8 = 0x01;
    /// The piece is the last fragment of its message.
    pub const LAST: u8 = 0x02;
    /// The byte stream ends with this piece.
    pub const FIN: u8 = 0x04;
    /// A sender timestamp (varint, microseconds) follows the flags.
    pub const TIMESTAMP: u8 = 0x08;
    /// The message is urgent (out of band): it may bypass the ordering in force.
    pub const URGENT: u8 = 0x10;
    /// A list of predecessor message ids follows the message id (causal ordering).
    pub const DEPS: u8 = 0x20;
    /// The piece runs to the end of its segment and carries no length field: set on a piece
    /// that fills the rest of the segment, the common case of bulk data (set by [`Piece::emit`]).
    pub const TO_END: u8 = 0x40;
    /// A stream field (varint) follows the flags (and timestamp): the piece belongs to
    /// that stream. Without it the piece is on stream 0, the connection's default stream.
    /// The field is `id << 2 | reset << 1 | service`: with `service` set a varint service
    /// id follows it (the stream's first piece names the service it is for); with `reset`
    /// a varint reset code follows (the sender abandoned the stream at this offset).
    pub const STREAM_ID: u8 = 0x80;

    /// True when `bit` is set.
    pub fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }
}

/// A fragment of a message (or of the byte stream) inside a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece<'a> {
    /// Stream / last / fin flags.
    pub flags: PieceFlags,
    /// The stream it belongs to (0: the connection's default stream). On another stream,
    /// `msg` is the offset in the stream of the chunk's first byte.
    pub stream: u64,
    /// Message sequence number.
    pub msg: u64,
    /// Offset of this fragment inside its message.
    pub offset: u64,
    /// Fragment bytes.
    pub data: &'a [u8],
    /// Sender timestamp in microseconds, when the profile stamps messages.
    pub ts: Option<u64>,
    /// Messages that must be delivered before this one (causal ordering).
    pub deps: Deps<'a>,
    /// On a stream's first piece, the service the stream is for (an id the applications
    /// agree on, as a port; a request names the service its reply should go to).
    pub service: Option<u64>,
    /// The sender abandoned the stream here, with this code (a stream other than 0).
    pub reset: Option<u64>,
}

/// Largest stream id a piece can name (the stream field keeps two bits beside it).
pub const MAX_STREAM_ID: u64 = varint::MAX >> 2;

/// Most predecessors one message may name (causal ordering).
pub const MAX_DEPS: usize = 16;

/// The predecessors a message names, encoded as varint distances below its own id
/// (`msg - dep - 1`), so recent predecessors take one byte each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deps<'a> {
    count: u8,
    raw: &'a [u8],
}

impl<'a> Deps<'a> {
    /// No predecessors.
    pub const NONE: Deps<'static> = Deps { count: 0, raw: &[] };

    /// Encodes `deps` (each below `msg`, at most [`MAX_DEPS`]) into `buf` and returns a view of
    /// it; ids not below `msg` and any beyond the limit are left out.
    pub fn encode(msg: u64, deps: &[u64], buf: &'a mut Vec<u8>) -> Deps<'a> {
        buf.clear();
        let mut count = 0u8;
        for &d in deps.iter().filter(|&&d| d < msg).take(MAX_DEPS) {
            varint::put(buf, msg - d - 1);
            count += 1;
        }
        Deps { count, raw: buf }
    }

    /// Number of predecessors.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True when the message names no predecessor.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes the list takes on the wire (count included), 0 when empty.
    pub fn wire_len(&self) -> usize {
        if self.count == 0 {
            0
        } else {
            1 + self.raw.len()
        }
    }

    /// The predecessor ids of message `msg` (validated when the piece was parsed).
    pub fn iter(&self, msg: u64) -> impl Iterator<Item = u64> + 'a {
        let mut r = Reader::new(self.raw);
        (0..self.count).map_while(move |_| {
            let d = r.varint().ok()?;
            msg.checked_sub(d)?.checked_sub(1)
        })
    }

    fn parse(r: &mut Reader<'a>, msg: u64) -> Result<Deps<'a>, WireError> {
        let count = r.varint()?;
        if count == 0 || count > MAX_DEPS as u64 {
            return Err(WireError::Invalid("dependency count"));
        }
        let start = r.clone();
        for _ in 0..count {
            let d = r.varint()?;
            if d >= msg {
                return Err(WireError::Invalid("dependency id"));
            }
        }
        let used = start.remaining() - r.remaining();
        Ok(Deps {
            count: count as u8,
            raw: start_slice(&start, used),
        })
    }
}

impl Piece<'_> {
    /// Bytes the piece takes on the wire with an explicit length.
    pub fn wire_len(msg: u64, offset: u64, len: usize) -> usize {
        Self::wire_len_to_end(msg, offset, len) + varint::len(len as u64)
    }

    /// Bytes the piece takes on the wire as the segment's last piece (no length field).
    pub fn wire_len_to_end(msg: u64, offset: u64, len: usize) -> usize {
        1 + varint::len(msg) + varint::len(offset) + len
    }

    /// Bytes the stream field takes (with the service id and reset code after it); 0 on
    /// stream 0.
    pub fn stream_field_len(stream: u64, service: Option<u64>, reset: Option<u64>) -> usize {
        if stream == 0 {
            return 0;
        }
        varint::len(stream << 2) + service.map_or(0, varint::len) + reset.map_or(0, varint::len)
    }

    /// Appends the piece to `out` with an explicit length (the TIMESTAMP and DEPS flags
    /// follow `ts` and `deps`); more pieces may follow it in the segment.
    pub fn emit(&self, out: &mut Vec<u8>) {
        self.emit_as(out, false);
    }

    /// Appends the piece to `out` as the last of its segment: it runs to the end, so it
    /// carries no length field. Nothing may be appended to the segment after it.
    pub fn emit_to_end(&self, out: &mut Vec<u8>) {
        self.emit_as(out, true);
    }

    /// Appends everything of the piece but its data, as the last of its segment: the caller
    /// puts the data after it (without copying it into `out`).
    pub fn emit_header_to_end(&self, out: &mut Vec<u8>) {
        self.emit_header(out, true);
    }

    /// Appends everything of the piece but its data, with its length field: the caller
    /// puts the data right after it (without copying it into `out`).
    pub fn emit_header_with_length(&self, out: &mut Vec<u8>) {
        self.emit_header(out, false);
    }

    fn emit_as(&self, out: &mut Vec<u8>, to_end: bool) {
        self.emit_header(out, to_end);
        out.extend_from_slice(self.data);
    }

    fn emit_header(&self, out: &mut Vec<u8>, to_end: bool) {
        let mut flags = match self.ts {
            Some(_) => self.flags.0 | PieceFlags::TIMESTAMP,
            None => self.flags.0 & !PieceFlags::TIMESTAMP,
        };
        if self.deps.is_empty() {
            flags &= !PieceFlags::DEPS;
        } else {
            flags |= PieceFlags::DEPS;
        }
        if to_end {
            flags |= PieceFlags::TO_END;
        } else {
            flags &= !PieceFlags::TO_END;
        }
        if self.stream == 0 {
            flags &= !PieceFlags::STREAM_ID;
        } else {
            flags |= PieceFlags::STREAM_ID;
        }
        out.push(flags);
        if let Some(ts) = self.ts {
            varint::put(out, ts);
        }
        if self.stream != 0 {
            let marks = u64::from(self.reset.is_some()) << 1 | u64::from(self.service.is_some());
            varint::put(out, self.stream << 2 | marks);
            if let Some(service) = self.service {
                varint::put(out, service);
            }
            if let Some(code) = self.reset {
                varint::put(out, code);
            }
        }
        varint::put(out, self.msg);
        if !self.deps.is_empty() {
            varint::put(out, self.deps.count as u64);
            out.extend_from_slice(self.deps.raw);
        }
        varint::put(out, self.offset);
        if !to_end {
            varint::put(out, self.data.len() as u64);
        }
    }

    fn parse<'a>(r: &mut Reader<'a>) -> Result<Piece<'a>, WireError> {
        // Every bit of the flags byte has a meaning: none is invalid.
        let flags = r.u8()?;
        let ts = if flags & PieceFlags::TIMESTAMP != 0 {
            Some(r.varint()?)
        } else {
            None
        };
        let (mut stream, mut service, mut reset) = (0, None, None);
        if flags & PieceFlags::STREAM_ID != 0 {
            let field = r.varint()?;
            stream = field >> 2;
            if stream == 0 {
                return Err(WireError::Invalid("stream id 0 given explicitly"));
            }
            if field & 1 != 0 {
                service = Some(r.varint()?);
            }
            if field & 2 != 0 {
                reset = Some(r.varint()?);
            }
        }
        let msg = r.varint()?;
        let deps = if flags & PieceFlags::DEPS != 0 {
            Deps::parse(r, msg)?
        } else {
            Deps::NONE
        };
        let offset = r.varint()?;
        let data = if flags & PieceFlags::TO_END != 0 {
            r.rest()
        } else {
            let len = r.varint()?;
            if len > r.remaining() as u64 {
                return Err(WireError::Truncated);
            }
            r.bytes(len as usize)?
        };
        Ok(Piece {
            flags: PieceFlags(flags),
            stream,
            msg,
            offset,
            data,
            ts,
            deps,
            service,
            reset,
        })
    }
}

/// A `DATA` frame: one segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataFrame<'a> {
    /// Segment sequence number (kept across retransmissions).
    pub seg: u64,
    raw: &'a [u8],
}

impl<'a> DataFrame<'a> {
    /// Bytes of the segment's body (its encoded pieces).
    pub fn body_len(&self) -> usize {
        self.raw.len()
    }

    /// The pieces of the segment (validated when the frame was parsed).
    pub fn pieces(&self) -> impl Iterator<Item = Piece<'a>> + 'a {
        let mut r = Reader::new(self.raw);
        core::iter::from_fn(move || {
            if r.is_empty() {
                None
            } else {
                Piece::parse(&mut r).ok()
            }
        })
    }

    /// The encoded pieces (the segment payload as sent).
    pub fn payload(&self) -> &'a [u8] {
        self.raw
    }

    /// Bytes of payload (pieces with their small headers).
    pub fn payload_len(&self) -> usize {
        self.raw.len()
    }
}

impl<'a> DataFrame<'a> {
    /// A segment whose pieces are `body` (for instance just decompressed); checks them.
    pub fn from_body(seg: u64, body: &'a [u8]) -> Result<Self, WireError> {
        let mut check = Reader::new(body);
        if check.is_empty() {
            return Err(WireError::Invalid("empty segment"));
        }
        while !check.is_empty() {
            Piece::parse(&mut check)?;
        }
        Ok(DataFrame { seg, raw: body })
    }
}

/// Largest segment body a compressed segment may inflate to (the decompression bound).
pub const MAX_INFLATED: usize = 65_536;

/// A `DATA_Z` frame: one segment whose pieces are compressed (LZ4 block format).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompressedFrame<'a> {
    /// Segment sequence number.
    pub seg: u64,
    /// Length of the pieces once inflated (at most [`MAX_INFLATED`]).
    pub inflated_len: usize,
    /// The compressed block.
    pub block: &'a [u8],
}

/// An inclusive range of packet numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PnRange {
    /// First packet number.
    pub lo: u64,
    /// Last packet number (inclusive).
    pub hi: u64,
}

/// An `ACK` frame: ranges of received packet numbers, highest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckFrame<'a> {
    /// Largest packet number acknowledged.
    pub largest: u64,
    /// How long the receiver held the acknowledgement of `largest`, in microseconds.
    pub delay_us: u64,
    first: u64,
    count: u64,
    raw: &'a [u8],
}

impl<'a> AckFrame<'a> {
    /// The acknowledged ranges, highest first (validated when the frame was parsed).
    pub fn ranges(&self) -> impl Iterator<Item = PnRange> + 'a {
        let mut r = Reader::new(self.raw);
        let mut next = Some(PnRange {
            lo: self.largest - self.first,
            hi: self.largest,
        });
        let mut left = self.count;
        core::iter::from_fn(move || {
            let cur = next.take()?;
            if left > 0 {
                left -= 1;
                next = next_ack_range(&mut r, cur.lo).ok();
            }
            Some(cur)
        })
    }

    /// Encodes an ACK frame from ranges given highest first (at most [`MAX_RANGES`] are used).
    pub fn emit(out: &mut Vec<u8>, delay_us: u64, ranges: impl Iterator<Item = PnRange> + Clone) {
        let n = ranges.clone().take(MAX_RANGES).count();
        let mut it = ranges.take(MAX_RANGES);
        let Some(first) = it.next() else { return };
        varint::put(out, ty::ACK);
        varint::put(out, first.hi);
        varint::put(out, delay_us);
        varint::put(out, (n - 1) as u64);
        varint::put(out, first.hi - first.lo);
        let mut prev_lo = first.lo;
        for r in it {
            varint::put(out, prev_lo - r.hi - 2);
            varint::put(out, r.hi - r.lo);
            prev_lo = r.lo;
        }
    }
}

fn next_ack_range(r: &mut Reader<'_>, prev_lo: u64) -> Result<PnRange, WireError> {
    let gap = r.varint()?;
    let len = r.varint()?;
    let hi = prev_lo
        .checked_sub(gap + 2)
        .ok_or(WireError::Invalid("ack gap"))?;
    let lo = hi.checked_sub(len).ok_or(WireError::Invalid("ack range"))?;
    Ok(PnRange { lo, hi })
}

/// A `NAK` frame: ranges of packet numbers the receiver found missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NakFrame<'a> {
    count: u64,
    raw: &'a [u8],
}

impl<'a> NakFrame<'a> {
    /// The missing ranges (validated when the frame was parsed).
    pub fn ranges(&self) -> impl Iterator<Item = PnRange> + 'a {
        let mut r = Reader::new(self.raw);
        (0..self.count).map_while(move |_| nak_range(&mut r).ok())
    }

    /// Encodes a NAK frame (at most [`MAX_RANGES`] ranges).
    pub fn emit(out: &mut Vec<u8>, ranges: &[PnRange]) {
        let ranges = &ranges[..ranges.len().min(MAX_RANGES)];
        if ranges.is_empty() {
            return;
        }
        varint::put(out, ty::NAK);
        varint::put(out, ranges.len() as u64);
        for r in ranges {
            varint::put(out, r.lo);
            varint::put(out, r.hi - r.lo);
        }
    }
}

fn nak_range(r: &mut Reader<'_>) -> Result<PnRange, WireError> {
    let lo = r.varint()?;
    let len = r.varint()?;
    let hi = lo
        .checked_add(len)
        .filter(|&h| h <= varint::MAX)
        .ok_or(WireError::Invalid("nak range"))?;
    Ok(PnRange { lo, hi })
}

/// A `REPAIR` frame: parity shard `index` of the block of `k` segments starting at
/// `first_seg`, protected by `m` parity shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RepairFrame<'a> {
    /// Sequence number of the block's first segment.
    pub first_seg: u64,
    /// Data segments in the block.
    pub k: u8,
    /// Parity shards of the block.
    pub m: u8,
    /// Which parity shard this is (0..m).
    pub index: u8,
    /// The shard.
    pub shard: &'a [u8],
}

impl RepairFrame<'_> {
    /// Appends the frame.
    pub fn emit(&self, out: &mut Vec<u8>) {
        varint::put(out, ty::REPAIR);
        varint::put(out, self.first_seg);
        out.extend_from_slice(&[self.k, self.m, self.index]);
        varint::put(out, self.shard.len() as u64);
        out.extend_from_slice(self.shard);
    }

    /// Bytes the frame takes for a shard of `len` bytes.
    pub fn wire_len(first_seg: u64, len: usize) -> usize {
        1 + varint::len(first_seg) + 3 + varint::len(len as u64) + len
    }
}

/// Longest repair shard accepted.
pub const MAX_SHARD: usize = 65_536;

/// The 8 bytes of a path-validation frame.
fn path_token(r: &mut Reader<'_>) -> Result<[u8; 8], WireError> {
    let b = r.bytes(8)?;
    let mut t = [0u8; 8];
    t.copy_from_slice(b);
    Ok(t)
}

/// One decoded frame, borrowing from the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A run of padding bytes.
    Padding,
    /// Keep-alive / acknowledgement request.
    Ping,
    /// Selective acknowledgement.
    Ack(AckFrame<'a>),
    /// Negative acknowledgement.
    Nak(NakFrame<'a>),
    /// Acknowledgement floor (generalised cumulative acknowledgement).
    AckFloor(u64),
    /// Flow-control credit in segments.
    MaxSeg(u64),
    /// XON (true) or XOFF (false).
    XonXoff(bool),
    /// Request to send this many segments.
    Rts(u64),
    /// Clear to send below this segment sequence number.
    Cts(u64),
    /// A custom message for the congestion-control algorithm.
    CcMsg(&'a [u8]),
    /// Connection close.
    Close {
        /// Close code (see [`close_code`]).
        code: u64,
        /// Human-readable reason (UTF-8, possibly lossy).
        reason: &'a [u8],
    },
    /// A data segment.
    Data(DataFrame<'a>),
    /// A compressed data segment.
    DataZ(CompressedFrame<'a>),
    /// A forward-error-correction repair shard.
    Repair(RepairFrame<'a>),
    /// Which coded symbol the packet carries (and a repair symbol's bytes).
    Coded(CodedFrame<'a>),
    /// The receiver's degrees of freedom and coded packets received.
    CodedAck(CodedAckFrame<'a>),
    /// A path-validation challenge.
    PathChallenge([u8; 8]),
    /// A path-validation response.
    PathResponse([u8; 8]),
    /// A stream's new barrier: its sender may send below `offset`.
    StreamBarrier {
        /// The stream (not 0).
        stream: u64,
        /// The barrier.
        offset: u64,
    },
    /// A stream's sender waits at its barrier `offset`.
    StreamBlocked {
        /// The stream (not 0).
        stream: u64,
        /// The barrier it waits at.
        offset: u64,
    },
}

impl<'a> Frame<'a> {
    /// Parses the next frame. The caller loops until the reader is empty. Segment numbers
    /// travel whole, as their offset from the sender's first one, `seg_base` (its initial
    /// segment number, agreed in the handshake) — as QUIC's stream offsets do: a number
    /// that needs no reference to be recovered cannot be recovered wrong.
    pub fn parse(r: &mut Reader<'a>, seg_base: u64) -> Result<Frame<'a>, WireError> {
        let t = r.varint()?;
        Ok(match t {
            ty::PADDING => {
                // A run of zeros collapses into one frame.
                let rest = r.rest();
                if rest.iter().any(|&b| b != 0) {
                    return Err(WireError::Invalid("padding"));
                }
                Frame::Padding
            }
            ty::PING => Frame::Ping,
            ty::ACK => {
                let largest = r.varint()?;
                let delay_us = r.varint()?;
                let count = r.varint()?;
                if count >= MAX_RANGES as u64 {
                    return Err(WireError::TooLarge("ack range count"));
                }
                let first = r.varint()?;
                let mut lo = largest
                    .checked_sub(first)
                    .ok_or(WireError::Invalid("ack range"))?;
                let start = r.clone();
                for _ in 0..count {
                    lo = next_ack_range(r, lo)?.lo;
                }
                let used = start.remaining() - r.remaining();
                let raw = start_slice(&start, used);
                Frame::Ack(AckFrame {
                    largest,
                    delay_us,
                    first,
                    count,
                    raw,
                })
            }
            ty::NAK => {
                let count = r.varint()?;
                if count == 0 || count > MAX_RANGES as u64 {
                    return Err(WireError::TooLarge("nak range count"));
                }
                let start = r.clone();
                for _ in 0..count {
                    nak_range(r)?;
                }
                let used = start.remaining() - r.remaining();
                Frame::Nak(NakFrame {
                    count,
                    raw: start_slice(&start, used),
                })
            }
            ty::ACK_FLOOR => Frame::AckFloor(r.varint()?),
            ty::MAX_SEG => Frame::MaxSeg(r.varint()?),
            ty::XON_XOFF => match r.u8()? {
                0 => Frame::XonXoff(false),
                1 => Frame::XonXoff(true),
                _ => return Err(WireError::Invalid("xon/xoff state")),
            },
            ty::RTS => Frame::Rts(r.varint()?),
            ty::CTS => Frame::Cts(r.varint()?),
            ty::CC_MSG => Frame::CcMsg(r.length_prefixed(MAX_CC_MSG, "cc message")?),
            ty::PATH_CHALLENGE => Frame::PathChallenge(path_token(r)?),
            ty::PATH_RESPONSE => Frame::PathResponse(path_token(r)?),
            ty::STREAM_BARRIER | ty::STREAM_BLOCKED => {
                let stream = r.varint()?;
                if stream == 0 || stream > MAX_STREAM_ID {
                    return Err(WireError::Invalid("stream id of a barrier"));
                }
                let offset = r.varint()?;
                if t == ty::STREAM_BARRIER {
                    Frame::StreamBarrier { stream, offset }
                } else {
                    Frame::StreamBlocked { stream, offset }
                }
            }
            ty::CLOSE => {
                let code = r.varint()?;
                let reason = r.length_prefixed(MAX_REASON, "close reason")?;
                Frame::Close { code, reason }
            }
            ty::DATA => {
                let seg = seg_number(r, seg_base)?;
                let raw = r.rest();
                let mut check = Reader::new(raw);
                if check.is_empty() {
                    return Err(WireError::Invalid("empty segment"));
                }
                while !check.is_empty() {
                    Piece::parse(&mut check)?;
                }
                Frame::Data(DataFrame { seg, raw })
            }
            ty::DATA_Z => {
                let seg = seg_number(r, seg_base)?;
                let len = r.varint()?;
                if len == 0 || len > MAX_INFLATED as u64 {
                    return Err(WireError::TooLarge("inflated segment"));
                }
                let block = r.rest();
                if block.is_empty() {
                    return Err(WireError::Invalid("empty compressed segment"));
                }
                Frame::DataZ(CompressedFrame {
                    seg,
                    inflated_len: len as usize,
                    block,
                })
            }
            ty::REPAIR => {
                let first_seg = r.varint()?;
                let (k, m, index) = (r.u8()?, r.u8()?, r.u8()?);
                if k == 0 || m == 0 || index >= m || k as usize + m as usize > 256 {
                    return Err(WireError::Invalid("repair block shape"));
                }
                let shard = r.length_prefixed(MAX_SHARD, "repair shard")?;
                Frame::Repair(RepairFrame {
                    first_seg,
                    k,
                    m,
                    index,
                    shard,
                })
            }
            ty::CODED => Frame::Coded(CodedFrame::parse(r)?),
            ty::CODED_ACK => Frame::CodedAck(CodedAckFrame::parse(r)?),
            other => return Err(WireError::Unknown("frame", other)),
        })
    }

    /// Appends a frame that has no variable-length body.
    pub fn emit_simple(out: &mut Vec<u8>, t: u64, value: Option<u64>) {
        varint::put(out, t);
        if let Some(v) = value {
            varint::put(out, v);
        }
    }

    /// Appends a `CLOSE` frame; the reason is cut to [`MAX_REASON`] bytes at a char boundary.
    pub fn emit_close(out: &mut Vec<u8>, code: u64, reason: &str) {
        let mut end = reason.len().min(MAX_REASON);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        varint::put(out, ty::CLOSE);
        varint::put(out, code);
        varint::put(out, end as u64);
        out.extend_from_slice(&reason.as_bytes()[..end]);
    }

    /// Appends a `PATH_CHALLENGE` (`response` false) or `PATH_RESPONSE` frame.
    pub fn emit_path(out: &mut Vec<u8>, response: bool, token: [u8; 8]) {
        let t = if response {
            ty::PATH_RESPONSE
        } else {
            ty::PATH_CHALLENGE
        };
        varint::put(out, t);
        out.extend_from_slice(&token);
    }

    /// Appends a `STREAM_BARRIER` (`blocked` false) or `STREAM_BLOCKED` frame.
    pub fn emit_stream_barrier(out: &mut Vec<u8>, blocked: bool, stream: u64, offset: u64) {
        let t = if blocked {
            ty::STREAM_BLOCKED
        } else {
            ty::STREAM_BARRIER
        };
        varint::put(out, t);
        varint::put(out, stream);
        varint::put(out, offset);
    }

    /// Bytes a `STREAM_BARRIER` or `STREAM_BLOCKED` frame takes.
    pub fn stream_barrier_len(stream: u64, offset: u64) -> usize {
        1 + varint::len(stream) + varint::len(offset)
    }

    /// Appends a `CC_MSG` frame (`msg` at most [`MAX_CC_MSG`] bytes; longer is cut).
    pub fn emit_cc_msg(out: &mut Vec<u8>, msg: &[u8]) {
        let msg = &msg[..msg.len().min(MAX_CC_MSG)];
        varint::put(out, ty::CC_MSG);
        varint::put(out, msg.len() as u64);
        out.extend_from_slice(msg);
    }

    /// Appends the header of a `DATA` frame for the segment `offset` past the sender's
    /// first; pieces follow with [`Piece::emit`].
    pub fn emit_data_header(out: &mut Vec<u8>, offset: u64) {
        varint::put(out, ty::DATA);
        varint::put(out, offset);
    }

    /// Appends a whole `DATA` frame: the segment `offset` past the sender's first, carrying
    /// `pieces`.
    pub fn emit_data(out: &mut Vec<u8>, offset: u64, pieces: &[Piece<'_>]) {
        Self::emit_data_header(out, offset);
        for p in pieces {
            p.emit(out);
        }
    }

    /// Appends the header of a `DATA_Z` frame; the inflated length and block follow.
    pub fn emit_compressed_header(out: &mut Vec<u8>, offset: u64) {
        varint::put(out, ty::DATA_Z);
        varint::put(out, offset);
    }
}

/// A segment number: its offset from `seg_base`, read whole.
fn seg_number(r: &mut Reader<'_>, seg_base: u64) -> Result<u64, WireError> {
    seg_base
        .checked_add(r.varint()?)
        .ok_or(WireError::Invalid("segment number"))
}

fn start_slice<'a>(start: &Reader<'a>, used: usize) -> &'a [u8] {
    let mut s = start.clone();
    s.bytes(used).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(buf: &[u8]) -> Result<Vec<Frame<'_>>, WireError> {
        let mut r = Reader::new(buf);
        let mut v = Vec::new();
        while !r.is_empty() {
            v.push(Frame::parse(&mut r, 0)?);
        }
        Ok(v)
    }

    #[test]
    fn ack_ranges_round_trip() {
        let ranges = [
            PnRange { lo: 90, hi: 100 },
            PnRange { lo: 50, hi: 80 },
            PnRange { lo: 3, hi: 3 },
        ];
        let mut out = Vec::new();
        AckFrame::emit(&mut out, 25, ranges.iter().copied());
        let frames = parse_all(&out).unwrap();
        let Frame::Ack(a) = frames[0] else {
            panic!("not an ack: {frames:?}")
        };
        assert_eq!(a.largest, 100);
        assert_eq!(a.delay_us, 25);
        assert_eq!(a.ranges().collect::<Vec<_>>(), ranges);
    }

    #[test]
    fn nak_and_simple_frames_round_trip() {
        let mut out = Vec::new();
        NakFrame::emit(&mut out, &[PnRange { lo: 7, hi: 9 }]);
        Frame::emit_simple(&mut out, ty::MAX_SEG, Some(12345));
        Frame::emit_close(&mut out, close_code::ABORT, "disk full");
        Frame::emit_data_header(&mut out, 42);
        Piece {
            flags: PieceFlags(PieceFlags::LAST),
            stream: 0,
            msg: 3,
            offset: 0,
            data: b"hi",
            ts: None,
            deps: Deps::NONE,
            service: None,
            reset: None,
        }
        .emit(&mut out);
        let f = parse_all(&out).unwrap();
        let Frame::Nak(n) = f[0] else { panic!() };
        assert_eq!(n.ranges().collect::<Vec<_>>(), [PnRange { lo: 7, hi: 9 }]);
        assert_eq!(f[1], Frame::MaxSeg(12345));
        assert_eq!(
            f[2],
            Frame::Close {
                code: 1,
                reason: b"disk full"
            }
        );
        let Frame::Data(d) = f[3] else { panic!() };
        assert_eq!(d.seg, 42);
        let p: Vec<_> = d.pieces().collect();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].data, b"hi");
    }

    #[test]
    fn a_piece_running_to_the_end_of_its_segment_carries_no_length() {
        let data = [7u8; 300];
        let bulk = Piece {
            flags: PieceFlags(PieceFlags::STREAM),
            stream: 0,
            msg: 3,
            offset: 1 << 20,
            data: &data,
            ts: None,
            deps: Deps::NONE,
            service: None,
            reset: None,
        };
        let (mut explicit, mut to_end) = (Vec::new(), Vec::new());
        bulk.emit(&mut explicit);
        bulk.emit_to_end(&mut to_end);
        assert_eq!(explicit.len(), Piece::wire_len(3, 1 << 20, 300));
        assert_eq!(to_end.len(), Piece::wire_len_to_end(3, 1 << 20, 300));
        assert_eq!(explicit.len() - to_end.len(), varint::len(300));
        // A short piece with its length, then one running to the end of the frame.
        let mut out = Vec::new();
        Frame::emit_data_header(&mut out, 9);
        Piece {
            flags: PieceFlags(PieceFlags::LAST),
            stream: 0,
            msg: 2,
            data: b"tail",
            offset: 0,
            ..bulk
        }
        .emit(&mut out);
        bulk.emit_to_end(&mut out);
        let f = parse_all(&out).unwrap();
        let Frame::Data(d) = f[0] else { panic!() };
        let p: Vec<_> = d.pieces().collect();
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].msg, p[0].data), (2, &b"tail"[..]));
        assert!(!p[0].flags.has(PieceFlags::TO_END));
        assert_eq!((p[1].msg, p[1].offset, p[1].data), (3, 1 << 20, &data[..]));
        assert!(p[1].flags.has(PieceFlags::TO_END));
        // Without the flag the same bytes lack their length field: malformed.
        let flags_at = out.len() - to_end.len();
        out[flags_at] &= !PieceFlags::TO_END;
        assert!(parse_all(&out).is_err());
    }

    #[test]
    fn a_stream_piece_carries_its_service_and_reset_code() {
        let mut out = Vec::new();
        Frame::emit_data_header(&mut out, 5);
        let base = Piece {
            flags: PieceFlags(PieceFlags::STREAM | PieceFlags::LAST | PieceFlags::STREAM_ID),
            stream: 6,
            msg: 0,
            offset: 0,
            data: b"req",
            ts: None,
            deps: Deps::NONE,
            service: Some(300),
            reset: None,
        };
        base.emit(&mut out);
        let reset = Piece {
            flags: PieceFlags(base.flags.0 | PieceFlags::FIN),
            msg: 3,
            data: b"",
            service: None,
            reset: Some(7),
            ..base
        };
        reset.emit(&mut out);
        let plain = Piece {
            service: None,
            ..base
        };
        plain.emit(&mut out);
        let f = parse_all(&out).unwrap();
        let Frame::Data(d) = f[0] else { panic!() };
        let p: Vec<_> = d.pieces().collect();
        assert_eq!(p, vec![base, reset, plain]);
        let mut one = Vec::new();
        plain.emit(&mut one);
        assert_eq!(
            Piece::wire_len(0, 0, 3) + Piece::stream_field_len(6, None, None),
            one.len()
        );
    }

    #[test]
    fn stream_barrier_frames_round_trip() {
        let mut out = Vec::new();
        Frame::emit_stream_barrier(&mut out, false, 6, 1 << 20);
        Frame::emit_stream_barrier(&mut out, true, 7, 23_360);
        assert_eq!(
            out.len(),
            Frame::stream_barrier_len(6, 1 << 20) + Frame::stream_barrier_len(7, 23_360)
        );
        let f = parse_all(&out).unwrap();
        assert_eq!(
            f,
            vec![
                Frame::StreamBarrier {
                    stream: 6,
                    offset: 1 << 20
                },
                Frame::StreamBlocked {
                    stream: 7,
                    offset: 23_360
                }
            ]
        );
        let mut zero = Vec::new();
        Frame::emit_stream_barrier(&mut zero, false, 0, 5);
        assert!(parse_all(&zero).is_err(), "stream 0 has no barrier");
    }

    #[test]
    fn cc_messages_round_trip_and_oversized_ones_are_errors() {
        let mut out = Vec::new();
        Frame::emit_cc_msg(&mut out, b"C12345678");
        assert_eq!(parse_all(&out).unwrap(), vec![Frame::CcMsg(b"C12345678")]);
        // Emitting cuts to the limit; a frame announcing more is malformed.
        let mut out = Vec::new();
        Frame::emit_cc_msg(&mut out, &[7u8; MAX_CC_MSG + 5]);
        assert_eq!(
            parse_all(&out).unwrap(),
            vec![Frame::CcMsg(&[7u8; MAX_CC_MSG])]
        );
        let mut bad = Vec::new();
        varint::put(&mut bad, ty::CC_MSG);
        varint::put(&mut bad, MAX_CC_MSG as u64 + 1);
        bad.extend_from_slice(&[0u8; MAX_CC_MSG + 1]);
        assert!(parse_all(&bad).is_err());
    }

    #[test]
    fn malformed_frames_are_errors() {
        // ACK whose first range goes below zero.
        let mut out = Vec::new();
        for v in [ty::ACK, 5, 0, 0, 9] {
            varint::put(&mut out, v);
        }
        assert_eq!(parse_all(&out), Err(WireError::Invalid("ack range")));
        // Piece longer than the packet.
        let mut out = Vec::new();
        Frame::emit_data_header(&mut out, 1);
        out.extend_from_slice(&[0, 1, 0, 50, 1, 2]);
        assert_eq!(parse_all(&out), Err(WireError::Truncated));
        // Unknown frame type.
        assert_eq!(parse_all(&[0x3f]), Err(WireError::Unknown("frame", 0x3f)));
        // Nonzero bytes after padding.
        assert_eq!(parse_all(&[0, 0, 1]), Err(WireError::Invalid("padding")));
    }
}
