//! Variable-length integers (QUIC style, RFC 9000 §16): the two high bits of the first byte
//! give the length (1, 2, 4 or 8 bytes), the rest is the big-endian value, up to 2^62 - 1.

use super::{Reader, WireError};

/// Largest value a varint can carry.
pub const MAX: u64 = (1 << 62) - 1;

/// Number of bytes `v` takes on the wire.
pub const fn len(v: u64) -> usize {
    if v < 1 << 6 {
        1
    } else if v < 1 << 14 {
        2
    } else if v < 1 << 30 {
        4
    } else {
        8
    }
}

/// Appends `v` (clamped to [`MAX`]) to `out`.
pub fn put(out: &mut Vec<u8>, v: u64) {
    let v = v.min(MAX);
    match len(v) {
        1 => out.push(v as u8),
        2 => out.extend_from_slice(&((v as u16) | 0x4000).to_be_bytes()),
        4 => out.extend_from_slice(&((v as u32) | 0x8000_0000).to_be_bytes()),
        _ => out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes()),
    }
}

/// Reads one varint.
pub fn get(r: &mut Reader<'_>) -> Result<u64, WireError> {
    let first = r.u8()?;
    let extra = (1usize << (first >> 6)) - 1;
    let mut v = u64::from(first & 0x3f);
    for _ in 0..extra {
        v = (v << 8) | u64::from(r.u8()?);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trips(v in 0u64..=MAX) {
            let mut out = Vec::new();
            put(&mut out, v);
            prop_assert_eq!(out.len(), len(v));
            let mut r = Reader::new(&out);
            prop_assert_eq!(get(&mut r).unwrap(), v);
            prop_assert!(r.is_empty());
        }
    }

    #[test]
    fn truncated_input_is_an_error() {
        let mut out = Vec::new();
        put(&mut out, 1 << 40);
        let mut r = Reader::new(&out[..5]);
        assert_eq!(get(&mut r), Err(WireError::Truncated));
    }
}
