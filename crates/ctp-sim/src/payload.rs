//! Deterministic application data, so that receivers can check every byte they get.

/// SplitMix64: a fast, well-mixed function of its input.
pub fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Period of the shared pattern: a prime, so that no power-of-two shift or packet-sized
/// misplacement lines the pattern up with itself.
const PERIOD: usize = 65_521;

/// A pseudo-random block of [`PERIOD`] bytes, computed once.
fn pattern() -> &'static [u8] {
    static P: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        (0..PERIOD.div_ceil(8) as u64)
            .flat_map(|w| splitmix(w ^ 0xC7B0_5EED).to_le_bytes())
            .take(PERIOD)
            .collect()
    })
}

/// The 8-byte mask of block `block` of stream `key`.
fn mask(key: u64, block: u64) -> [u8; 8] {
    splitmix(key ^ block.wrapping_mul(0x2545_F491_4F6C_DD1D)).to_le_bytes()
}

/// Calls `f(position in out, pattern slice, mask, phase)` for each run of `len` stream bytes
/// at `offset` that lies within one pattern block.
fn runs(key: u64, offset: u64, len: usize, mut f: impl FnMut(usize, &[u8], [u8; 8], usize)) {
    let pat = pattern();
    let mut done = 0;
    while done < len {
        let o = offset + done as u64;
        let (block, i) = (o / PERIOD as u64, (o % PERIOD as u64) as usize);
        let n = (PERIOD - i).min(len - done);
        f(done, &pat[i..i + n], mask(key, block), i % 8);
        done += n;
    }
}

/// `out[k] = pat[k] ^ m[(phase + k) % 8]`, eight bytes at a time where aligned.
fn masked_copy(out: &mut [u8], pat: &[u8], m: [u8; 8], phase: usize) {
    let head = ((8 - phase % 8) % 8).min(out.len());
    for k in 0..head {
        out[k] = pat[k] ^ m[(phase + k) % 8];
    }
    let mw = u64::from_le_bytes(m);
    let (o8, p8) = (out[head..].chunks_exact_mut(8), pat[head..].chunks_exact(8));
    let tail = o8.len() * 8 + head;
    for (o, p) in o8.zip(p8) {
        let w = u64::from_le_bytes(p.try_into().expect("8 bytes")) ^ mw;
        o.copy_from_slice(&w.to_le_bytes());
    }
    for k in tail..out.len() {
        out[k] = pat[k] ^ m[(k - head) % 8];
    }
}

/// Whether `got[k] == pat[k] ^ m[(phase + k) % 8]` for every k, eight bytes at a time.
fn masked_equal(got: &[u8], pat: &[u8], m: [u8; 8], phase: usize) -> bool {
    let head = ((8 - phase % 8) % 8).min(got.len());
    if (0..head).any(|k| got[k] != pat[k] ^ m[(phase + k) % 8]) {
        return false;
    }
    let mw = u64::from_le_bytes(m);
    let (g8, p8) = (got[head..].chunks_exact(8), pat[head..].chunks_exact(8));
    let tail = g8.len() * 8 + head;
    let mut diff = 0u64;
    for (g, p) in g8.zip(p8) {
        diff |= u64::from_le_bytes(g.try_into().expect("8 bytes"))
            ^ u64::from_le_bytes(p.try_into().expect("8 bytes"))
            ^ mw;
    }
    diff == 0 && (tail..got.len()).all(|k| got[k] == pat[k] ^ m[(k - head) % 8])
}

/// Fills `out` with the stream bytes of `key` starting at `offset`. Byte `o` is byte
/// `o % PERIOD` of a fixed pseudo-random pattern XOR byte `o % 8` of a mask drawn from
/// (`key`, `o / PERIOD`): position-dependent everywhere, and nearly as cheap as a copy.
pub fn fill(key: u64, offset: u64, out: &mut [u8]) {
    runs(key, offset, out.len(), |at, pat, m, phase| {
        masked_copy(&mut out[at..at + pat.len()], pat, m, phase);
    });
}

/// Length of the stream blocks [`block`] yields: stream byte `o` lies in block
/// `o / BLOCK_LEN` at `o % BLOCK_LEN`.
pub const BLOCK_LEN: usize = PERIOD;

/// Most block buffers kept for reuse per thread (64 MiB).
const POOLED_BLOCKS: usize = 1024;

std::thread_local! {
    /// Buffers of blocks whose last slice was dropped, for the next blocks: a bulk sender
    /// goes through a block every 45 packets, and fresh 64-KiB allocations cost page faults
    /// (the allocator hands freed ones back to the system).
    static BLOCK_POOL: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A block's buffer; it goes back to the pool when the block's last slice is dropped.
struct PooledBlock(Vec<u8>);

impl AsRef<[u8]> for PooledBlock {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for PooledBlock {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.0);
        // During thread teardown the pool may be gone: the buffer is then simply freed.
        let _ = BLOCK_POOL.try_with(|p| {
            let mut p = p.borrow_mut();
            if p.len() < POOLED_BLOCKS {
                p.push(buf);
            }
        });
    }
}

/// Block `index` of the stream of `key` ([`BLOCK_LEN`] bytes), to be written in slices
/// without copying.
pub fn block(key: u64, index: u64) -> bytes::Bytes {
    let mut b = BLOCK_POOL
        .with(|p| p.borrow_mut().pop())
        .unwrap_or_else(|| vec![0; BLOCK_LEN]);
    fill(key, index * BLOCK_LEN as u64, &mut b);
    bytes::Bytes::from_owner(PooledBlock(b))
}

/// Position of the first byte of `data` that differs from the stream of `key` at `offset`.
pub fn first_mismatch(key: u64, offset: u64, data: &[u8]) -> Option<usize> {
    let mut first = None;
    runs(key, offset, data.len(), |at, pat, m, phase| {
        let got = &data[at..at + pat.len()];
        if first.is_none() && !masked_equal(got, pat, m, phase) {
            first = got
                .iter()
                .zip(pat)
                .enumerate()
                .position(|(k, (g, p))| g ^ p != m[(phase + k) % 8])
                .map(|k| at + k);
        }
    });
    first
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
    fn a_shifted_or_repeated_block_is_caught() {
        let mut a = vec![0u8; 3 * PERIOD];
        fill(5, 0, &mut a);
        // The same bytes presented one pattern period later: the block masks differ.
        assert!(first_mismatch(5, PERIOD as u64, &a[..PERIOD]).is_some());
        // Shifted by a packet's worth.
        assert!(first_mismatch(5, 1452, &a[..4000]).is_some());
        // Another stream.
        assert_eq!(first_mismatch(6, 0, &a[..16]), Some(0));
    }

    #[test]
    fn blocks_are_the_stream_cut_in_pieces() {
        let mut whole = vec![0u8; 2 * BLOCK_LEN + 10];
        fill(7, 0, &mut whole);
        assert_eq!(&block(7, 0)[..], &whole[..BLOCK_LEN]);
        assert_eq!(&block(7, 1)[..], &whole[BLOCK_LEN..2 * BLOCK_LEN]);
        assert_ne!(block(7, 1), block(8, 1));
    }

    #[test]
    fn messages_detect_corruption() {
        let mut m = message(9, 42, 300);
        assert_eq!(check_message(9, 300, &m), Some(42));
        m[100] ^= 0x10;
        assert_eq!(check_message(9, 300, &m), None);
    }
}
