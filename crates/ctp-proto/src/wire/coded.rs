//! The frames of the `coded` microprotocol (CTCP, paper 003): `CODED`, which names the
//! coded symbol a packet carries, and `CODED_ACK`, the receiver's degrees of freedom and the
//! coded packets it received.
//!
//! ```text
//! CODED     = type path seqno block k symbol [len payload]
//! CODED_ACK = type path current_block current_dofs ack_delay count lo len (gap len)*
//! ```
//!
//! Every field is a varint. `symbol < k` is source symbol `symbol`, carried by the packet's
//! DATA frame (no payload here); `symbol ≥ k` is the repair symbol whose coefficients come
//! from seed `symbol − k`, and its payload follows. `seqno` numbers the coded packets on
//! path `path` (the sender's numbering; the receiver echoes both). `CODED_ACK`'s ranges of
//! sequence numbers go lowest first: the first is `lo ..= lo + len`, each next one starts
//! `gap + 2` after the previous one's end (so two ranges never touch). `ack_delay` is how long,
//! in microseconds, the receiver held the acknowledgement after the newest packet in it
//! arrived (QUIC's ACK Delay): the sender takes it out of its round-trip samples.

use super::{varint, Reader, WireError};

/// The `CODED` frame's type (listed with the others as `frame::CODED`).
pub const CODED: u64 = 0x13;
/// The `CODED_ACK` frame's type (`frame::CODED_ACK`).
pub const CODED_ACK: u64 = 0x14;
/// Most ranges in one `CODED_ACK`.
pub const MAX_RANGES: usize = 64;

/// Coded sequence numbers `lo ..= hi`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqnoRange {
    /// First sequence number.
    pub lo: u64,
    /// Last sequence number (inclusive).
    pub hi: u64,
}

/// Largest source-block size a `CODED` frame may name.
pub const MAX_CODED_K: u64 = 1024;
/// Longest repair payload accepted.
pub const MAX_CODED_PAYLOAD: usize = 65_535;

/// A `CODED` frame: which coded symbol of which block the packet carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodedFrame<'a> {
    /// The sender's path the packet left on.
    pub path: u64,
    /// The packet's coded sequence number on that path.
    pub seqno: u64,
    /// Block number.
    pub block: u64,
    /// Source symbols in the block (1 ..= [`MAX_CODED_K`]).
    pub k: u16,
    /// Below `k`: the source symbol index; from `k` on: `k` + the repair symbol's seed.
    pub symbol: u64,
    /// A repair symbol's bytes (empty for a source symbol: the DATA frame carries it).
    pub payload: &'a [u8],
}

impl<'a> CodedFrame<'a> {
    /// The source symbol index, if this is a source symbol.
    pub fn source_index(&self) -> Option<u16> {
        (self.symbol < u64::from(self.k)).then_some(self.symbol as u16)
    }

    /// The repair symbol's seed, if this is a repair symbol.
    pub fn repair_seed(&self) -> Option<u32> {
        self.symbol
            .checked_sub(u64::from(self.k))
            .and_then(|s| u32::try_from(s).ok())
    }

    /// Appends the frame.
    pub fn emit(&self, out: &mut Vec<u8>) {
        varint::put(out, CODED);
        for v in [
            self.path,
            self.seqno,
            self.block,
            u64::from(self.k),
            self.symbol,
        ] {
            varint::put(out, v);
        }
        if self.source_index().is_none() {
            varint::put(out, self.payload.len() as u64);
            out.extend_from_slice(self.payload);
        }
    }

    /// The most a frame without its payload takes (every field at its largest).
    pub const MAX_HEADER: usize = 1 + 8 + 8 + 8 + 2 + 8 + 3;

    /// Parses the body (after the type).
    pub(super) fn parse(r: &mut Reader<'a>) -> Result<Self, WireError> {
        let path = r.varint()?;
        let seqno = r.varint()?;
        let block = r.varint()?;
        let k = r.varint()?;
        if k == 0 || k > MAX_CODED_K {
            return Err(WireError::Invalid("coded block size"));
        }
        let symbol = r.varint()?;
        if symbol >= k && symbol - k > u64::from(u32::MAX) {
            return Err(WireError::Invalid("coded repair seed"));
        }
        let mut f = CodedFrame {
            path,
            seqno,
            block,
            k: k as u16,
            symbol,
            payload: &[],
        };
        if f.source_index().is_none() {
            f.payload = r.length_prefixed(MAX_CODED_PAYLOAD, "coded repair symbol")?;
            if f.payload.is_empty() {
                return Err(WireError::Invalid("empty coded repair symbol"));
            }
        }
        Ok(f)
    }
}

/// A `CODED_ACK` frame: the receiver's oldest undecoded block, its degrees of freedom there,
/// and the coded packets of one path it received since its last acknowledgement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodedAckFrame<'a> {
    /// The path the acknowledged packets came on (the sender's numbering).
    pub path: u64,
    /// The receiver's oldest block not yet decoded.
    pub current_block: u64,
    /// Degrees of freedom it holds of that block.
    pub current_dofs: u64,
    /// Microseconds the receiver held this acknowledgement after its newest packet arrived.
    pub ack_delay_us: u64,
    count: u64,
    raw: &'a [u8],
}

impl<'a> CodedAckFrame<'a> {
    /// The acknowledged sequence-number ranges, lowest first (validated at parsing).
    pub fn ranges(&self) -> impl Iterator<Item = SeqnoRange> + 'a {
        let mut r = Reader::new(self.raw);
        let mut prev_hi: Option<u64> = None;
        let mut left = self.count;
        core::iter::from_fn(move || {
            if left == 0 {
                return None;
            }
            left -= 1;
            let range = next_range(&mut r, prev_hi).ok()?;
            prev_hi = Some(range.hi);
            Some(range)
        })
    }

    /// Appends a frame acknowledging `ranges` (lowest first, not touching, at most
    /// [`MAX_RANGES`] are used) with the receiver's block report `(current_block,
    /// current_dofs)`; nothing when there is no range.
    pub fn emit(
        out: &mut Vec<u8>,
        path: u64,
        report: (u64, u64),
        ack_delay_us: u64,
        ranges: &[SeqnoRange],
    ) {
        let ranges = &ranges[..ranges.len().min(MAX_RANGES)];
        if ranges.is_empty() {
            return;
        }
        varint::put(out, CODED_ACK);
        let (current_block, current_dofs) = report;
        let fields = [path, current_block, current_dofs, ack_delay_us];
        for v in fields.into_iter().chain([ranges.len() as u64]) {
            varint::put(out, v);
        }
        let mut prev_hi: Option<u64> = None;
        for r in ranges {
            let start = match prev_hi {
                None => r.lo,
                Some(h) => r.lo - h - 2,
            };
            varint::put(out, start);
            varint::put(out, r.hi - r.lo);
            prev_hi = Some(r.hi);
        }
    }

    /// The most a frame of `ranges` ranges takes.
    pub const fn max_len(ranges: usize) -> usize {
        1 + 5 * 8 + ranges * 16
    }

    /// Parses the body (after the type).
    pub(super) fn parse(r: &mut Reader<'a>) -> Result<Self, WireError> {
        let path = r.varint()?;
        let current_block = r.varint()?;
        let current_dofs = r.varint()?;
        if current_dofs > MAX_CODED_K {
            return Err(WireError::Invalid("coded ack dofs"));
        }
        let ack_delay_us = r.varint()?;
        let count = r.varint()?;
        if count == 0 || count > MAX_RANGES as u64 {
            return Err(WireError::TooLarge("coded ack range count"));
        }
        let start = r.clone();
        let mut prev_hi = None;
        for _ in 0..count {
            prev_hi = Some(next_range(r, prev_hi)?.hi);
        }
        let used = start.remaining() - r.remaining();
        let mut raw = start;
        Ok(CodedAckFrame {
            path,
            current_block,
            current_dofs,
            ack_delay_us,
            count,
            raw: raw.bytes(used)?,
        })
    }
}

fn next_range(r: &mut Reader<'_>, prev_hi: Option<u64>) -> Result<SeqnoRange, WireError> {
    let start = r.varint()?;
    let len = r.varint()?;
    let lo = match prev_hi {
        None => Some(start),
        Some(h) => h.checked_add(2).and_then(|x| x.checked_add(start)),
    }
    .filter(|&lo| lo <= varint::MAX)
    .ok_or(WireError::Invalid("coded ack gap"))?;
    let hi = lo
        .checked_add(len)
        .filter(|&h| h <= varint::MAX)
        .ok_or(WireError::Invalid("coded ack range"))?;
    Ok(SeqnoRange { lo, hi })
}

#[cfg(test)]
mod tests {
    use super::super::frame::Frame;
    use super::*;

    fn parse(bytes: &[u8]) -> Result<Frame<'_>, WireError> {
        Frame::parse(&mut Reader::new(bytes), 0)
    }

    #[test]
    fn source_and_repair_frames_round_trip() {
        let source = CodedFrame {
            path: 1,
            seqno: 70_000,
            block: 12,
            k: 64,
            symbol: 5,
            payload: &[],
        };
        let mut out = Vec::new();
        source.emit(&mut out);
        assert_eq!(parse(&out), Ok(Frame::Coded(source)));
        assert_eq!(source.source_index(), Some(5));
        assert_eq!(source.repair_seed(), None);

        let repair = CodedFrame {
            symbol: 64 + 9,
            payload: b"combination",
            ..source
        };
        out.clear();
        repair.emit(&mut out);
        assert_eq!(parse(&out), Ok(Frame::Coded(repair)));
        assert_eq!(repair.repair_seed(), Some(9));
        assert_eq!(repair.source_index(), None);
    }

    #[test]
    fn bad_coded_frames_are_refused() {
        let mut out = Vec::new();
        CodedFrame {
            path: 0,
            seqno: 0,
            block: 0,
            k: 4,
            symbol: 4,
            payload: b"x",
        }
        .emit(&mut out);
        // k = 0, then k above the maximum.
        for k in [0u64, MAX_CODED_K + 1] {
            let mut bad = Vec::new();
            for v in [CODED, 0, 0, 0, k, 0] {
                varint::put(&mut bad, v);
            }
            assert!(parse(&bad).is_err(), "k = {k}");
        }
        // A repair whose payload is cut short.
        assert!(parse(&out[..out.len() - 1]).is_err());
        // An empty repair payload.
        let mut empty = out.clone();
        let n = empty.len();
        empty[n - 2] = 0;
        empty.truncate(n - 1);
        assert!(parse(&empty).is_err());
    }

    #[test]
    fn ack_ranges_round_trip_lowest_first() {
        let ranges = [
            SeqnoRange { lo: 3, hi: 9 },
            SeqnoRange { lo: 11, hi: 11 },
            SeqnoRange { lo: 400, hi: 1000 },
        ];
        let mut out = Vec::new();
        CodedAckFrame::emit(&mut out, 2, (17, 30), 1234, &ranges);
        assert!(out.len() <= CodedAckFrame::max_len(ranges.len()));
        let Ok(Frame::CodedAck(a)) = parse(&out) else {
            panic!("not a coded ack: {:?}", parse(&out));
        };
        assert_eq!((a.path, a.current_block, a.current_dofs), (2, 17, 30));
        assert_eq!(a.ack_delay_us, 1234);
        assert_eq!(a.ranges().collect::<Vec<_>>(), ranges);
    }

    #[test]
    fn bad_acks_are_refused() {
        let mut zero = Vec::new();
        for v in [CODED_ACK, 0, 0, 0, 0, 0] {
            varint::put(&mut zero, v);
        }
        assert!(parse(&zero).is_err(), "no range");
        let mut overflow = Vec::new();
        for v in [CODED_ACK, 0, 0, 0, 0, 2, varint::MAX - 1, 0, 5, 0] {
            varint::put(&mut overflow, v);
        }
        assert!(parse(&overflow).is_err(), "a range past the largest number");
        let mut dofs = Vec::new();
        for v in [CODED_ACK, 0, 0, MAX_CODED_K + 1, 0, 1, 0, 0] {
            varint::put(&mut dofs, v);
        }
        assert!(parse(&dofs).is_err(), "more dofs than a block has");
    }
}
