//! Packet integrity: a CRC32C over the whole packet, appended as a 4-byte trailer.
//!
//! The `crc32c` crate uses the SSE4.2 / ARMv8 CRC instructions when the CPU has them. This
//! protects against corruption the UDP checksum misses (it is optional over IPv4 and weak);
//! it is not a defence against an attacker — that is the AEAD's job once a profile has one.

use super::WireError;

/// Bytes the trailer adds to every packet.
pub const TRAILER_LEN: usize = 4;

/// Appends the CRC32C of `packet` to it.
pub fn seal(packet: &mut Vec<u8>) {
    seal_from(packet, 0);
}

/// Appends the CRC32C of the packet that starts at `start` in `buf` (datagrams before it
/// are left alone).
pub fn seal_from(buf: &mut Vec<u8>, start: usize) {
    let crc = crc32c::crc32c(&buf[start..]);
    buf.extend_from_slice(&crc.to_be_bytes());
}

/// Checks the trailer and returns the packet without it.
pub fn open(packet: &[u8]) -> Result<&[u8], WireError> {
    if packet.len() < TRAILER_LEN {
        return Err(WireError::Truncated);
    }
    let (body, trailer) = packet.split_at(packet.len() - TRAILER_LEN);
    let expected = u32::from_be_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
    if crc32c::crc32c(body) != expected {
        return Err(WireError::BadChecksum);
    }
    Ok(body)
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

    #[test]
    fn short_input_is_truncated_not_a_panic() {
        assert_eq!(open(&[1, 2]), Err(WireError::Truncated));
    }
}
