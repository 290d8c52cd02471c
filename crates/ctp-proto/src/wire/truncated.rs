//! Numbers sent as their low bits: QUIC's packet-number encoding (RFC 9000 §17.1 and
//! appendix A.3) in varint form. A 1-, 2- or 4-byte varint carries the low 6, 14 or 30 bits
//! of the number; an 8-byte one carries it whole. The receiver recovers the number as the
//! one with those low bits closest to the value it expects next.
//!
//! Packet numbers and segment numbers travel this way. The sender picks the length from how
//! far the receiver's expectation can be from the number: for a packet number, the distance
//! to the largest number the receiver has acknowledged; when it cannot bound the distance
//! (nothing acknowledged yet, or a profile without acknowledgements) it sends 30 bits, which
//! the receiver recovers correctly unless 2^29 numbers in a row went missing.

use super::{Reader, WireError};

/// Bits a varint of each length carries.
const BITS: [u32; 4] = [6, 14, 30, 62];

/// A number as sent: its low `bits` bits (all of them when `bits` is 62).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Truncated {
    low: u64,
    bits: u32,
}

impl Truncated {
    /// The shortest encoding of `value` that a receiver recovers when the number it expects
    /// next is within `distance` of `value`; `None` when the distance is unknown (30 bits).
    pub fn encode(value: u64, distance: Option<u64>) -> Self {
        let bits = match distance {
            None => 30,
            Some(d) => {
                let span = d.saturating_add(1).saturating_mul(2);
                BITS.into_iter()
                    .find(|&b| b < 62 && span < 1 << b)
                    .unwrap_or(62)
            }
        };
        Self::with_bits(value, bits)
    }

    /// `value` whole (an 8-byte varint), whatever the receiver expects.
    pub fn whole(value: u64) -> Self {
        Self::with_bits(value, 62)
    }

    fn with_bits(value: u64, bits: u32) -> Self {
        Truncated {
            low: value & ((1u64 << bits) - 1),
            bits,
        }
    }

    /// Bytes on the wire.
    pub fn wire_len(self) -> usize {
        match self.bits {
            6 => 1,
            14 => 2,
            30 => 4,
            _ => 8,
        }
    }

    /// Appends the encoding to `out`.
    pub fn put(self, out: &mut Vec<u8>) {
        let v = self.low;
        match self.bits {
            6 => out.push(v as u8),
            14 => out.extend_from_slice(&((v as u16) | 0x4000).to_be_bytes()),
            30 => out.extend_from_slice(&((v as u32) | 0x8000_0000).to_be_bytes()),
            _ => out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes()),
        }
    }

    /// Reads one encoding.
    pub fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let first = *r.peek().ok_or(WireError::Truncated)?;
        let bits = BITS[usize::from(first >> 6)];
        Ok(Truncated {
            low: super::varint::get(r)?,
            bits,
        })
    }

    /// The number whose low bits these are that lies closest to `expected` (the next value
    /// the receiver expects: one past the largest it has seen).
    pub fn expand(self, expected: u64) -> u64 {
        if self.bits >= 62 {
            return self.low;
        }
        let win = 1u64 << self.bits;
        let (hwin, mask) = (win / 2, win - 1);
        let candidate = (expected & !mask) | self.low;
        if candidate.saturating_add(hwin) <= expected && candidate < (1 << 62) - win {
            candidate + win
        } else if candidate > expected.saturating_add(hwin) && candidate >= win {
            candidate - win
        } else {
            candidate
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(t: Truncated) -> Truncated {
        let mut out = Vec::new();
        t.put(&mut out);
        assert_eq!(out.len(), t.wire_len());
        let mut r = Reader::new(&out);
        let back = Truncated::read(&mut r).unwrap();
        assert!(r.is_empty());
        back
    }

    #[test]
    fn length_follows_the_distance() {
        assert_eq!(Truncated::encode(1000, Some(0)).wire_len(), 1);
        assert_eq!(Truncated::encode(1000, Some(30)).wire_len(), 1);
        assert_eq!(Truncated::encode(1000, Some(31)).wire_len(), 2);
        assert_eq!(Truncated::encode(1000, Some(8190)).wire_len(), 2);
        assert_eq!(Truncated::encode(1000, Some(8191)).wire_len(), 4);
        assert_eq!(Truncated::encode(1000, None).wire_len(), 4);
        assert_eq!(Truncated::encode(1000, Some(1 << 40)).wire_len(), 8);
        assert_eq!(Truncated::whole(5).wire_len(), 8);
    }

    #[test]
    fn rfc_9000_example() {
        // Appendix A.3: largest 0xa82f30ea, truncated 0x9b32 (16 bits there; 14 here, so
        // the same idea with this encoding's window).
        let t = Truncated::encode(0xa82f_9b32, Some(0xa82f_9b32 - 0xa82f_30ea));
        assert_eq!(t.wire_len(), 4);
        assert_eq!(round_trip(t).expand(0xa82f_30eb), 0xa82f_9b32);
    }

    proptest! {
        #[test]
        fn the_receiver_recovers_any_number_within_the_distance(
            value in 0u64..(1 << 61),
            behind in 0u64..(1 << 20),
            ahead in 0u64..(1 << 20),
        ) {
            // The receiver expects anything from `behind` before the value (it has not seen
            // the packets in between) to `ahead` after it (a late or repeated number).
            let distance = behind.max(ahead);
            let t = round_trip(Truncated::encode(value, Some(distance)));
            for expected in [value.saturating_sub(behind), value.saturating_add(ahead)] {
                prop_assert_eq!(t.expand(expected), value);
            }
        }

        #[test]
        fn without_a_distance_30_bits_recover_up_to_2_to_the_29(
            value in 0u64..(1 << 61),
            behind in 0u64..(1 << 29),
        ) {
            let t = round_trip(Truncated::encode(value, None));
            prop_assert_eq!(t.expand(value.saturating_sub(behind)), value);
        }
    }
}
