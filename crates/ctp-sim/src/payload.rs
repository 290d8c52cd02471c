//! Deterministic application data, so that receivers can check every byte they get.

/// SplitMix64: a fast, well-mixed function of its input.
pub fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Fills `out` with the stream bytes of `key` starting at `offset`: byte `o` is byte `o % 8`
/// of `splitmix(key ^ (o / 8) * K)`, so the stream depends on position and one hash covers
/// eight bytes.
pub fn fill(key: u64, offset: u64, out: &mut [u8]) {
    let word = |w: u64| splitmix(key ^ w.wrapping_mul(0x2545_F491_4F6C_DD1D)).to_le_bytes();
    let mut i = 0;
    let mut o = offset;
    while i < out.len() {
        let w = word(o >> 3);
        let k = (o & 7) as usize;
        let n = (8 - k).min(out.len() - i);
        out[i..i + n].copy_from_slice(&w[k..k + n]);
        i += n;
        o += n as u64;
    }
}

/// Position of the first byte of `data` that differs from the stream of `key` at `offset`.
pub fn first_mismatch(key: u64, offset: u64, data: &[u8]) -> Option<usize> {
    let mut buf = [0u8; 4096];
    let mut done = 0;
    while done < data.len() {
        let n = (data.len() - done).min(buf.len());
        fill(key, offset + done as u64, &mut buf[..n]);
        if buf[..n] == data[done..done + n] {
            done += n;
            continue;
        }
        if let Some(i) = (0..n).find(|&i| buf[i] != data[done + i]) {
            return Some(done + i);
        }
        done += n;
    }
    None
}

/// A self-checking datagram message: 8-byte id, then content derived from (key, id).
pub fn message(key: u64, id: u64, len: usize) -> Vec<u8> {
    let len = len.max(8);
    let mut m = vec![0u8; len];
    m[..8].copy_from_slice(&id.to_le_bytes());
    fill(splitmix(key ^ id), 0, &mut m[8..]);
    m
}

/// The id of a message if its content is intact and of the expected length.
pub fn check_message(key: u64, len: usize, m: &[u8]) -> Option<u64> {
    if m.len() != len.max(8) {
        return None;
    }
    let id = u64::from_le_bytes(m[..8].try_into().ok()?);
    first_mismatch(splitmix(key ^ id), 0, &m[8..])
        .is_none()
        .then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_is_position_dependent_and_checkable() {
        let mut a = vec![0u8; 100];
        fill(3, 50, &mut a);
        let mut whole = vec![0u8; 150];
        fill(3, 0, &mut whole);
        assert_eq!(&whole[50..], &a[..]);
        assert_eq!(first_mismatch(3, 50, &a), None);
        a[7] ^= 1;
        assert_eq!(first_mismatch(3, 50, &a), Some(7));
    }

    #[test]
    fn messages_detect_corruption() {
        let mut m = message(9, 42, 300);
        assert_eq!(check_message(9, 300, &m), Some(42));
        m[100] ^= 0x10;
        assert_eq!(check_message(9, 300, &m), None);
    }
}
