//! Sizes of the wire format that the packet builders and the microprotocols both count
//! with: what a data packet spends around its segment, and the smallest datagram.

/// Smallest UDP payload a profile may use (the QUIC floor, also DPLPMTUD's base).
pub const MIN_UDP_PAYLOAD: u16 = 1200;

/// Bytes of header and framing a packet spends around one segment's payload, plus room
/// for control frames riding along: [`PACKET_OVERHEAD`] and [`CONTROL_RESERVE`].
pub const SEGMENT_OVERHEAD: usize = PACKET_OVERHEAD as usize + CONTROL_RESERVE;

/// Bytes a data packet adds to its segment's payload, at most: the short header (flags,
/// 4-byte connection id, packet number in up to 4 bytes), the DATA frame's type and
/// segment offset (up to 4 bytes for the first 2^30 segments of a connection), the CRC32C
/// seal. A packet number takes 1–2 bytes once the peer acknowledged something and 4 before
/// (see `State::pn_on_wire`); a whole one or a later segment's offset (8 bytes) takes 4
/// more, which the control reserve covers, so a segment always fits a packet of its own.
/// The pacer counts a segment's packet as its payload plus this.
pub const PACKET_OVERHEAD: u64 = (1 + 4 + 4) + (1 + 4) + 4;

/// Room a data packet keeps for control frames (an ACK of a few ranges, the ACK floor).
/// A packet whose control frames need more carries them alone and the segment goes in the
/// next one; a larger reserve would cost every data packet those bytes instead.
pub const CONTROL_RESERVE: usize = 24;

/// Bytes an AEAD's tag (16) adds to a packet beyond the CRC32C trailer (4) that
/// [`PACKET_OVERHEAD`] counts: a secure channel's segments are this much smaller.
pub const AEAD_EXTRA: usize = 12;
