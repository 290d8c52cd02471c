//! CRC32C packet protection: a 4-byte trailer over the whole packet.
//!
//! A short packet's CRC also covers its *whole* packet number (a pseudo-header, as UDP's
//! checksum covers the addresses and QUIC's AEAD the whole packet number): a copy that the
//! receiver recovers to another number fails to open instead of being taken for another
//! packet. A handshake packet's CRC covers the packet alone ([`seal_long`]).
//!
//! The `crc32c` crate uses the SSE4.2 / ARMv8 CRC instructions when the CPU has them. This
//! protects against corruption the UDP checksum misses (it is optional over IPv4 and weak);
//! it is not a defence against an attacker — that is the AEAD's job.

use super::{PacketProtection, Unprotected};

/// Bytes the trailer adds to every packet.
pub const TRAILER_LEN: usize = 4;

/// CRC32C over every short packet and its whole packet number.
#[derive(Clone, Copy, Debug, Default)]
pub struct Crc32c;

/// The CRC32C of a short packet with whole packet number `pn`.
fn numbered_crc(packet: &[u8], pn: u64) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&pn.to_be_bytes()), packet)
}

/// Splits the trailer off `packet`.
fn split(packet: &[u8]) -> Result<(&[u8], u32), Unprotected> {
    if packet.len() < TRAILER_LEN {
        return Err(Unprotected);
    }
    let (body, t) = packet.split_at(packet.len() - TRAILER_LEN);
    Ok((body, u32::from_be_bytes([t[0], t[1], t[2], t[3]])))
}

impl PacketProtection for Crc32c {
    fn name(&self) -> &'static str {
        "crc32c"
    }

    fn overhead(&self) -> usize {
        TRAILER_LEN
    }

    fn seal(&mut self, pn: u64, buf: &mut Vec<u8>, start: usize, _header_len: usize) {
        let crc = numbered_crc(&buf[start..], pn);
        buf.extend_from_slice(&crc.to_be_bytes());
    }

    fn open(
        &mut self,
        pn: u64,
        packet: &mut [u8],
        header_len: usize,
    ) -> Result<usize, Unprotected> {
        let (body, trailer) = split(packet)?;
        if body.len() < header_len || numbered_crc(body, pn) != trailer {
            return Err(Unprotected);
        }
        Ok(body.len() - header_len)
    }
}

/// Appends the CRC32C of a handshake packet to it.
pub fn seal_long(packet: &mut Vec<u8>) {
    let crc = crc32c::crc32c(packet);
    packet.extend_from_slice(&crc.to_be_bytes());
}

/// Checks a handshake packet's trailer and returns the packet without it.
pub fn open_long(packet: &[u8]) -> Result<&[u8], Unprotected> {
    let (body, trailer) = split(packet)?;
    if crc32c::crc32c(body) != trailer {
        return Err(Unprotected);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_single_bit_flip_of_a_handshake_packet_is_detected() {
        let mut p = b"a ctp packet with some payload".to_vec();
        seal_long(&mut p);
        assert_eq!(open_long(&p).unwrap(), b"a ctp packet with some payload");
        for i in 0..p.len() * 8 {
            let mut q = p.clone();
            q[i / 8] ^= 1 << (i % 8);
            assert_eq!(open_long(&q), Err(Unprotected), "bit {i}");
        }
    }

    /// A short packet opens only with the number it was sealed with: a copy recovered to
    /// another packet number is rejected, as is any bit flip.
    #[test]
    fn a_short_packet_opens_only_with_its_whole_number() {
        let mut p = vec![0xaa; 7];
        let start = p.len();
        p.extend_from_slice(b"header and frames");
        Crc32c.seal(70_000, &mut p, start, 6);
        let mut q = p[start..].to_vec();
        assert_eq!(Crc32c.open(70_000, &mut q, 6), Ok(11));
        assert_eq!(&q[6..17], b" and frames");
        assert_eq!(
            Crc32c.open(70_000 + (1 << 14), &mut q, 6),
            Err(Unprotected),
            "aliased packet number"
        );
        for i in 0..(p.len() - start) * 8 {
            let mut q = p[start..].to_vec();
            q[i / 8] ^= 1 << (i % 8);
            assert_eq!(Crc32c.open(70_000, &mut q, 6), Err(Unprotected), "bit {i}");
        }
    }

    #[test]
    fn short_input_fails_to_open_without_a_panic() {
        assert_eq!(open_long(&[1, 2]), Err(Unprotected));
        assert_eq!(Crc32c.open(1, &mut [1, 2, 3, 4, 5], 3), Err(Unprotected));
    }
}
