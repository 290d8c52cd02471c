//! Deterministic application data, so that receivers can check every byte they get.
//!
//! Every stream and every message reads one shared pseudo-random pattern of [`PERIOD`]
//! bytes from a phase drawn from its key: byte `o` of the data of key `k` is
//! `pattern[(phase(k) + o) % PERIOD]`. The data is position-dependent over a megabyte and
//! differs between keys, and it costs nothing to produce: a sender hands out slices of the
//! pattern itself (static [`Bytes`], no copy, no reference count to touch), and a receiver
//! checks what it got by comparing it with the pattern. (Stop 22: the simulator used to
//! write every stream byte into fresh 64-KiB blocks; at 1 Gb/s those blocks, held until
//! acknowledged, were megabytes of memory written once and read once, and the simulator
//! waited on it.)

use bytes::Bytes;

/// SplitMix64: a fast, well-mixed function of its input.
pub fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Period of the shared pattern: the largest prime below 2^20, so that data misplaced by a
/// packet count or a power of two never lines up with itself, and a misplacement must be
/// by a whole megabyte to go unnoticed.
pub const PERIOD: usize = 1_048_573;

/// The pseudo-random pattern, computed once per process and never freed.
fn pattern() -> &'static [u8] {
    static P: std::sync::OnceLock<&'static [u8]> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        let bytes: Vec<u8> = (0..PERIOD.div_ceil(8) as u64)
            .flat_map(|w| splitmix(w ^ 0xC7B0_5EED).to_le_bytes())
            .take(PERIOD)
            .collect();
        Vec::leak(bytes)
    })
}

/// Where in the pattern byte `offset` of the data of `key` lies.
fn position(key: u64, offset: u64) -> usize {
    ((splitmix(key) % PERIOD as u64 + offset % PERIOD as u64) % PERIOD as u64) as usize
}

/// The data of `key` from `offset` on, up to `max` bytes: fewer where the pattern wraps.
fn run_at(key: u64, offset: u64, max: usize) -> &'static [u8] {
    let i = position(key, offset);
    &pattern()[i..i + max.min(PERIOD - i)]
}

/// Calls `f(position in the data, pattern slice)` for each run of `len` data bytes of `key`
/// at `offset` that does not wrap around the pattern.
fn runs(key: u64, offset: u64, len: usize, mut f: impl FnMut(usize, &'static [u8])) {
    let mut done = 0;
    while done < len {
        let run = run_at(key, offset + done as u64, len - done);
        f(done, run);
        done += run.len();
    }
}

/// Fills `out` with the data of `key` starting at `offset`.
pub fn fill(key: u64, offset: u64, out: &mut [u8]) {
    runs(key, offset, out.len(), |at, pat| {
        out[at..at + pat.len()].copy_from_slice(pat);
    });
}

/// The data of `key` from `offset` on, up to `max` bytes (fewer where the pattern wraps),
/// without copying.
pub fn stream_slice(key: u64, offset: u64, max: usize) -> Bytes {
    Bytes::from_static(run_at(key, offset, max))
}

/// Position of the first byte of `data` that differs from the data of `key` at `offset`.
pub fn first_mismatch(key: u64, offset: u64, data: &[u8]) -> Option<usize> {
    let mut first = None;
    runs(key, offset, data.len(), |at, pat| {
        let got = &data[at..at + pat.len()];
        if first.is_none() && got != pat {
            first = got
                .iter()
                .zip(pat)
                .position(|(g, p)| g != p)
                .map(|k| at + k);
        }
    });
    first
}

/// The message ids a receiver delivered, one bit each: catches a message delivered twice.
#[derive(Debug, Default)]
pub struct Delivered(Vec<u64>);

impl Delivered {
    /// Records message `id`; false if it was delivered before.
    pub fn first_time(&mut self, id: u64) -> bool {
        let (w, b) = ((id / 64) as usize, id % 64);
        if self.0.len() <= w {
            self.0.resize(w + 1, 0);
        }
        let new = self.0[w] & (1 << b) == 0;
        self.0[w] |= 1 << b;
        new
    }
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
    fn shifted_data_or_another_key_is_caught() {
        let mut a = vec![0u8; 3 * PERIOD];
        fill(5, 0, &mut a);
        // Shifted by a packet's worth, by a power of two, by the old 64-KiB block length.
        for shift in [1452u64, 1 << 16, 1 << 19, 65_521] {
            assert!(first_mismatch(5, shift, &a[..4000]).is_some(), "{shift}");
        }
        // Another stream.
        assert_eq!(first_mismatch(6, 0, &a[..16]), Some(0));
        // Only a whole period lines up (the documented blind spot).
        assert_eq!(first_mismatch(5, PERIOD as u64, &a[..4000]), None);
    }

    #[test]
    fn slices_are_the_stream_and_stop_where_the_pattern_wraps() {
        let mut whole = vec![0u8; 2 * PERIOD];
        fill(7, 0, &mut whole);
        let mut off = 0u64;
        while off < whole.len() as u64 {
            let max = 300_000.min(whole.len() - off as usize);
            let s = stream_slice(7, off, max);
            assert!(!s.is_empty() && s.len() <= max);
            assert_eq!(&s[..], &whole[off as usize..off as usize + s.len()]);
            off += s.len() as u64;
        }
        assert_ne!(stream_slice(7, 10, 64), stream_slice(8, 10, 64));
    }

    #[test]
    fn a_wrapping_run_is_filled_and_checked_across_the_wrap() {
        // The first byte after the pattern's end, for key 9.
        let wrap = (PERIOD - position(9, 0)) as u64;
        let mut a = vec![0u8; 100];
        fill(9, wrap - 50, &mut a);
        assert_eq!(first_mismatch(9, wrap - 50, &a), None);
        assert_eq!(a[50], pattern()[0]);
        a[60] ^= 0x80;
        assert_eq!(first_mismatch(9, wrap - 50, &a), Some(60));
    }

    #[test]
    fn messages_detect_corruption() {
        let mut m = message(9, 42, 300);
        assert_eq!(check_message(9, 300, &m), Some(42));
        m[100] ^= 0x10;
        assert_eq!(check_message(9, 300, &m), None);
    }
}
