//! A segment as a symbol of a block code, shared by the codes that protect segments (`fec`,
//! `coded`): the segment's DATA frame, with its number written whole, length-prefixed and
//! zero-padded to the block's symbol size. Both sides rebuild the frame from the segment
//! number and payload, so the number is an offset from zero, not from the sender's first
//! segment as on the wire: the symbol must not depend on either side's numbering. A frame
//! rebuilt from a decoded symbol goes through the receive path as if it had arrived.

use crate::wire::frame::Frame;

/// Bytes a symbol adds to its DATA frame: the frame's 2-byte length.
pub const LENGTH_PREFIX: usize = 2;

/// The DATA frame of segment `seq` carrying `payload`, into `out`.
pub fn frame_bytes(seq: u64, payload: &[u8], out: &mut Vec<u8>) {
    out.clear();
    Frame::emit_data_header(out, seq);
    out.extend_from_slice(payload);
}

/// A symbol: 2-byte length, the frame, zero padding to `len`.
pub fn shard_of(frame: &[u8], len: usize, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&(frame.len() as u16).to_be_bytes());
    out.extend_from_slice(frame);
    out.resize(len, 0);
}

/// The symbol of segment `seq` carrying `payload`, unpadded (2-byte length, DATA frame),
/// into `out`: [`frame_bytes`] and [`shard_of`] in one pass, without the frame's own copy.
pub fn segment_symbol(seq: u64, payload: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&[0; LENGTH_PREFIX]);
    Frame::emit_data_header(out, seq);
    out.extend_from_slice(payload);
    let frame_len = (out.len() - LENGTH_PREFIX) as u16;
    out[..LENGTH_PREFIX].copy_from_slice(&frame_len.to_be_bytes());
}

/// The frame a symbol holds (`None` when its length does not fit: not a symbol a peer
/// following the protocol made).
pub fn frame_in(shard: &[u8]) -> Option<&[u8]> {
    let n = u16::from_be_bytes([*shard.first()?, *shard.get(1)?]) as usize;
    shard.get(LENGTH_PREFIX..LENGTH_PREFIX + n)
}
