//! Packet protection: what makes a received packet believable before one byte of it is
//! parsed.
//!
//! Every short (data) packet is sealed when it is built and opened when it arrives, in one
//! place each ([`crate::packet`]), through a [`PacketProtection`] keyed by the packet's
//! *whole* number. The number travels truncated ([`crate::wire::truncated`]); the receiver
//! recovers it from its low bits, and because the protection covers the whole number, a
//! packet recovered to a number it was not sealed with (a late copy, or a corrupted one)
//! fails to open, as a QUIC packet whose nonce is wrong fails its AEAD.
//!
//! [`Crc32c`] is the first implementation: integrity against corruption the UDP checksum
//! misses, no defence against an attacker. [`Aead`] (the secure channel) is the second:
//! AES-128-GCM or ChaCha20-Poly1305 with keys from the handshake, header protection (the
//! hooks below), key updates and a replay window.
//!
//! Handshake (long-header) packets carry no connection keys yet: they are checked with
//! [`crc32c::seal_long`] / [`crc32c::open_long`].

pub mod aead;
pub mod crc32c;

pub use self::aead::{Aead, AeadStats, KeyLimits, Suite};
pub use self::crc32c::Crc32c;

/// A packet that failed to open: corrupted, forged, or recovered to the wrong number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("packet protection failed")]
pub struct Unprotected;

/// Seals outgoing and opens incoming short packets of one connection.
///
/// A packet is `header ‖ payload`, the header `header_len` bytes long with the truncated
/// packet number at `pn_offset` within it. Sealing protects the payload, authenticates the
/// header and the whole packet number, and appends [`PacketProtection::overhead`] bytes;
/// opening undoes it in place or fails, changing nothing anyone reads.
pub trait PacketProtection: Send + core::fmt::Debug {
    /// A short name for statistics and logs (`crc32c`, `chacha20-poly1305`, …).
    fn name(&self) -> &'static str;

    /// Bytes sealing adds to a packet (a trailer or an authentication tag).
    fn overhead(&self) -> usize;

    /// Seals the packet at `buf[start..]` (header, then payload) sent with whole packet
    /// number `pn`: appends the overhead.
    fn seal(&mut self, pn: u64, buf: &mut Vec<u8>, start: usize, header_len: usize);

    /// Opens a received packet (header, protected payload, overhead) that was recovered to
    /// whole packet number `pn`. On success the payload lies at
    /// `packet[header_len..header_len + len]` and `len` is returned.
    fn open(&mut self, pn: u64, packet: &mut [u8], header_len: usize)
        -> Result<usize, Unprotected>;

    /// True once so many packets failed to open that the keys can no longer be trusted to
    /// keep a forgery out (an AEAD's integrity limit, RFC 9001 §6.6): the connection must
    /// close. Never, by default.
    fn integrity_exhausted(&self) -> bool {
        false
    }

    /// Header protection, applied to a sealed packet (its truncated packet number starts at
    /// `pn_offset`): masks the number so that an observer cannot read it. None by default.
    fn protect_header(&self, _packet: &mut [u8], _pn_offset: usize) {}

    /// Removes header protection before the packet number is read. None by default.
    fn unprotect_header(&self, _packet: &mut [u8], _pn_offset: usize) -> Result<(), Unprotected> {
        Ok(())
    }
}
