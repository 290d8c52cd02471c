//! Compression: per-segment payload compression (LZ4 block format, `lz4_flex`, pure Rust).
//!
//! Send side: the microprotocol holds a send bit on every new segment; on `SegmentReady` it
//! compresses the segment's pieces and keeps the result only when it is strictly smaller
//! (inflated-length prefix included), so a packet never grows; the segment then goes out as a
//! `DATA_Z` frame instead of `DATA`. Retransmissions reuse the stored form.
//!
//! Receive side: the packetiser inflates a `DATA_Z` frame while it validates the packet, into
//! a buffer of exactly the announced length (at most the negotiated UDP payload and
//! [`MAX_INFLATED`]); a block that does not inflate to that length, or whose pieces do not
//! parse, makes the whole packet malformed: dropped before anything (acknowledgement
//! included) takes effect, and counted in `decompress_failed`. The inflated segment then
//! enters the receive path as an ordinary `SegmentArrived`.

use super::decl::{Group, MicroDecl, MicroId};
use crate::engine::event::{Event, EventKind, HoldBit};
use crate::engine::hold::{Barrier, Rearm};
use crate::engine::{Cx, Microprotocol, Setup, SetupError};
use crate::wire::frame::{CompressedFrame, DataFrame, MAX_INFLATED};
use crate::wire::{varint, WireError};

/// The declaration of [`MicroId::Compression`]: what it needs, excludes and reads.
pub const DECL: MicroDecl = MicroDecl {
    groups: &[Group::SegmentCoding],
    params: &["max_udp_payload"],
    ..MicroDecl::new(MicroId::Compression)
};

/// Segments shorter than this are not worth compressing.
const MIN_COMPRESS: usize = 64;

/// The compression microprotocol.
#[derive(Debug)]
pub struct Compression {
    bit: HoldBit,
    scratch: Vec<u8>,
}

impl Compression {
    /// Registers the send bit that holds a segment until it is compressed.
    pub fn new(setup: &mut Setup<'_>) -> Result<Self, SetupError> {
        Ok(Compression {
            bit: setup.hold_bit(Barrier::Send, Rearm::Once)?,
            scratch: Vec::new(),
        })
    }

    /// Replaces `payload` by its compressed form when that is strictly smaller; returns
    /// whether it did.
    fn compress(&mut self, payload: &mut Vec<u8>) -> bool {
        let n = payload.len();
        if !(MIN_COMPRESS..=MAX_INFLATED).contains(&n) {
            return false;
        }
        let out = &mut self.scratch;
        out.clear();
        varint::put(out, n as u64);
        let prefix = out.len();
        // Room for a block that saves at least one byte; a longer one is useless.
        let Some(room) = n.checked_sub(prefix + 1).filter(|&r| r > 0) else {
            return false;
        };
        out.resize(prefix + lz4_flex::block::get_maximum_output_size(n), 0);
        match lz4_flex::block::compress_into(payload, &mut out[prefix..]) {
            Ok(len) if len <= room => {
                out.truncate(prefix + len);
                std::mem::swap(payload, out);
                true
            }
            _ => false,
        }
    }
}

/// Inflates a compressed segment into `out` (cleared first) and checks its pieces. Never
/// writes more than the frame announced, which is at most `limit`.
pub fn inflate<'b>(
    z: &CompressedFrame<'_>,
    limit: usize,
    out: &'b mut Vec<u8>,
) -> Result<DataFrame<'b>, WireError> {
    if z.inflated_len > limit.min(MAX_INFLATED) {
        return Err(WireError::TooLarge("inflated segment"));
    }
    out.clear();
    out.resize(z.inflated_len, 0);
    match lz4_flex::block::decompress_into(z.block, out) {
        Ok(n) if n == z.inflated_len => {}
        _ => return Err(WireError::Invalid("compressed segment")),
    }
    DataFrame::from_body(z.seg, out)
}

impl Microprotocol for Compression {
    fn bindings(&self) -> &'static [EventKind] {
        &[EventKind::SegmentReady]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        let Event::SegmentReady { seg, retransmit } = *ev else {
            return;
        };
        if !retransmit {
            let st = &mut *cx.st;
            if let Some(s) = st.segs.get_mut(seg).filter(|s| !s.compressed) {
                s.flatten_body();
                let before = s.payload.len();
                if self.compress(&mut s.payload) {
                    s.compressed = true;
                    st.stats.segments_compressed += 1;
                    st.stats.compression_saved_bytes += (before - s.payload.len()) as u64;
                }
            }
        }
        cx.release(seg, Barrier::Send, self.bit);
    }

    fn decodes_segments(&self) -> bool {
        true
    }

    fn decode_segment<'b>(
        &self,
        z: &CompressedFrame<'_>,
        limit: usize,
        out: &'b mut Vec<u8>,
    ) -> Result<DataFrame<'b>, WireError> {
        inflate(z, limit, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::hold::HoldRegistry;
    use crate::engine::timer::Timers;
    use crate::wire::frame::{Deps, Piece, PieceFlags};

    fn micro() -> Compression {
        let mut holds = HoldRegistry::default();
        let mut timers = Timers::default();
        let mut setup = Setup {
            holds: &mut holds,
            timers: &mut timers,
            index: 0,
        };
        Compression::new(&mut setup).unwrap()
    }

    fn pieces(data: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        Piece {
            flags: PieceFlags(PieceFlags::LAST),
            stream: 0,
            msg: 7,
            offset: 0,
            data,
            ts: None,
            deps: Deps::NONE,
            service: None,
            reset: None,
        }
        .emit(&mut v);
        v
    }

    fn frame(payload: &[u8]) -> CompressedFrame<'_> {
        let mut r = crate::wire::Reader::new(payload);
        let len = r.varint().unwrap() as usize;
        CompressedFrame {
            seg: 3,
            inflated_len: len,
            block: r.rest(),
        }
    }

    #[test]
    fn compressible_pieces_shrink_and_inflate_back() {
        let mut m = micro();
        let text = b"the quick brown fox jumps over the lazy dog; ".repeat(25);
        let original = pieces(&text);
        let mut p = original.clone();
        assert!(m.compress(&mut p));
        assert!(
            p.len() < original.len() / 4,
            "{} vs {}",
            p.len(),
            original.len()
        );
        let mut out = Vec::new();
        let d = inflate(&frame(&p), 1452, &mut out).unwrap();
        assert_eq!(d.payload(), &original[..]);
        assert_eq!(d.seg, 3);
    }

    #[test]
    fn incompressible_or_tiny_pieces_stay_as_they_are() {
        let mut m = micro();
        let noise = super::super::tests::incompressible(0x1234_5678_9abc_def0, 1200);
        for data in [&noise[..], &b"short"[..]] {
            let original = pieces(data);
            let mut p = original.clone();
            assert!(!m.compress(&mut p));
            assert_eq!(p, original, "never expanded, never touched");
        }
    }

    #[test]
    fn bombs_and_garbage_are_errors_not_panics() {
        let mut m = micro();
        let mut p = pieces(&[0u8; 1000]);
        assert!(m.compress(&mut p));
        let f = frame(&p);
        let mut out = Vec::new();
        // Announced longer than the limit: refused before inflating.
        assert!(inflate(&f, 500, &mut out).is_err());
        // The block inflates to more than announced: refused, output never beyond it.
        let short = CompressedFrame {
            inflated_len: 100,
            ..f
        };
        assert!(inflate(&short, 1452, &mut out).is_err());
        assert!(out.len() <= 100);
        // Announced longer than the block inflates to.
        let long = CompressedFrame {
            inflated_len: f.inflated_len + 1,
            ..f
        };
        assert!(inflate(&long, 1452, &mut out).is_err());
        // Arbitrary bytes, and a valid block of something that is not pieces.
        for block in [&[0xffu8; 40][..], &[0x10, 1, 2][..], &[0xf0, 0, 0, 0][..]] {
            let g = CompressedFrame {
                seg: 1,
                inflated_len: 1000,
                block,
            };
            assert!(inflate(&g, 1452, &mut out).is_err());
        }
        let not_pieces = lz4_flex::block::compress(&[0xee; 300]);
        let g = CompressedFrame {
            seg: 1,
            inflated_len: 300,
            block: &not_pieces,
        };
        assert!(inflate(&g, 1452, &mut out).is_err());
    }
}
