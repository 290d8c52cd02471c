//! Packet integrity: a CRC32C over the whole packet, appended as a 4-byte trailer.
//!
//! Short (data) packets carry their packet and segment numbers truncated to their low bits;
//! their CRC also covers the *whole* numbers (a pseudo-header, as UDP's checksum covers the
//! addresses and QUIC's AEAD the whole packet number): a late copy that the receiver
//! recovers to other numbers fails the check instead of being taken for another packet.
//!
//! The `crc32c` crate uses the SSE4.2 / ARMv8 CRC instructions when the CPU has them. This
//! protects against corruption the UDP checksum misses (it is optional over IPv4 and weak);
//! it is not a defence against an attacker — that is the AEAD's job once a profile has one.

use super::WireError;

/// Bytes the trailer adds to every packet.
pub const TRAILER_LEN: usize = 4;

/// Appends the CRC32C of `packet` to it (a handshake packet; short packets use
/// [`seal_numbered`]).
pub fn seal(packet: &mut Vec<u8>) {
    let crc = crc32c::crc32c(packet);
    packet.extend_from_slice(&crc.to_be_bytes());
}

/// The CRC32C of a short packet with whole packet number `pn` and, when it carries a
/// segment, whole segment number `seg`.
fn numbered_crc(packet: &[u8], pn: u64, seg: Option<u64>) -> u32 {
    let mut pseudo = [0u8; 16];
    pseudo[..8].copy_from_slice(&pn.to_be_bytes());
    let n = match seg {
        Some(s) => {
            pseudo[8..].copy_from_slice(&s.to_be_bytes());
            16
        }
        None => 8,
    };
    crc32c::crc32c_append(crc32c::crc32c(&pseudo[..n]), packet)
}

/// Appends the trailer of the short packet at `buf[start..]`: its CRC32C with the whole
/// packet number `pn` and segment number `seg` (if it carries one) covered too.
pub fn seal_numbered(buf: &mut Vec<u8>, start: usize, pn: u64, seg: Option<u64>) {
    let crc = numbered_crc(&buf[start..], pn, seg);
    buf.extend_from_slice(&crc.to_be_bytes());
}

/// A received packet and its trailer, not yet checked: a short packet's numbers must be
/// recovered first ([`Unchecked::verify`]).
#[derive(Clone, Copy, Debug)]
pub struct Unchecked<'p> {
    /// The packet without its trailer.
    pub packet: &'p [u8],
    trailer: u32,
}

impl<'p> Unchecked<'p> {
    /// Splits off the trailer.
    pub fn split(packet: &'p [u8]) -> Result<Self, WireError> {
        if packet.len() < TRAILER_LEN {
            return Err(WireError::Truncated);
        }
        let (body, t) = packet.split_at(packet.len() - TRAILER_LEN);
        Ok(Unchecked {
            packet: body,
            trailer: u32::from_be_bytes([t[0], t[1], t[2], t[3]]),
        })
    }

    /// True when the trailer matches the packet alone (a handshake packet).
    pub fn verify_plain(&self) -> bool {
        crc32c::crc32c(self.packet) == self.trailer
    }

    /// True when the trailer matches the packet with these whole numbers.
    pub fn verify(&self, pn: u64, seg: Option<u64>) -> bool {
        numbered_crc(self.packet, pn, seg) == self.trailer
    }
}

/// Checks the trailer and returns the packet without it.
pub fn open(packet: &[u8]) -> Result<&[u8], WireError> {
    let u = Unchecked::split(packet)?;
    if !u.verify_plain() {
        return Err(WireError::BadChecksum);
    }
    Ok(u.packet)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_single_bit_flip_is_detected() {
        let mut p = b"a ctp packet with some payload".to_vec();
        seal(&mut p);
        assert_eq!(open(&p).unwrap(), b"a ctp packet with some payload");
        for i in 0..p.len() * 8 {
            let mut q = p.clone();
            q[i / 8] ^= 1 << (i % 8);
            assert_eq!(open(&q), Err(WireError::BadChecksum), "bit {i}");
        }
    }

    /// A short packet's trailer holds only with the numbers it was sealed with: a copy
    /// recovered to another packet or segment number is rejected, as is any bit flip.
    #[test]
    fn numbered_trailer_covers_the_whole_numbers() {
        let mut p = vec![0xaa; 7];
        let start = p.len();
        p.extend_from_slice(b"header and frames");
        seal_numbered(&mut p, start, 70_000, Some(12));
        let u = Unchecked::split(&p[start..]).unwrap();
        assert_eq!(u.packet, b"header and frames");
        assert!(u.verify(70_000, Some(12)));
        assert!(
            !u.verify(70_000 + (1 << 14), Some(12)),
            "aliased packet number"
        );
        assert!(
            !u.verify(70_000, Some(12 + (1 << 6))),
            "aliased segment number"
        );
        assert!(!u.verify(70_000, None));
        for i in 0..u.packet.len() * 8 {
            let mut q = p[start..].to_vec();
            q[i / 8] ^= 1 << (i % 8);
            assert!(
                !Unchecked::split(&q).unwrap().verify(70_000, Some(12)),
                "bit {i}"
            );
        }
    }

    #[test]
    fn short_input_is_truncated_not_a_panic() {
        assert_eq!(open(&[1, 2]), Err(WireError::Truncated));
    }
}
