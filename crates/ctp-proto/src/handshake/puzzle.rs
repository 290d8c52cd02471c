//! Client puzzles: what a responder under load asks before it spends memory or a
//! Diffie–Hellman on a COOKIE_ECHO (CUSP's CHALLENGE/RESPONSE, with the hash puzzles of
//! Aura, Nikander and Leiwo).
//!
//! The responder measures its load as the number of half-open connections (secure channels
//! created from a cookie whose initiator has not authenticated yet). Below a low watermark
//! it asks nothing ([`difficulty`] is 0: the handshake is what it always was). Above it,
//! INIT_ACK names a difficulty `d` (bits), which the cookie also carries under its MAC, so
//! an initiator cannot lower it; the COOKIE_ECHO must then carry a nonce `n` such that
//! `BLAKE3(challenge ‖ n)` (keyed with a fixed public domain key, [`hash`]) starts with at
//! least `d` zero bits, where the challenge is the cookie's MAC (its last 32 bytes,
//! [`challenge`]). Finding one takes `2^d` hashes on average ([`solve`]); checking it
//! takes one ([`verify`]), of one 64-byte block. The MAC is unpredictable, unique to the
//! cookie and covers all of it (the initiator's address and the minting time included),
//! and the responder checks it before the puzzle, so a solution cannot be computed ahead
//! or reused for another cookie.
//!
//! `d` is 8 at the watermark and rises 2 bits with each doubling of the load, up to the
//! responder's cap (never above [`MAX_DIFFICULTY`]): with the default watermark 64, 128
//! half-open connections ask 10 bits, 256 ask 12, and the default most half-open
//! connections, 1 024, ask the default cap, [`DEFAULT_CAP`] = 16 bits.

/// The most difficulty a responder may ask and an initiator solves: an INIT_ACK asking
/// more is dropped. One hash is one BLAKE3 compression (50–100 ns on one core, release
/// build), so `2^20` of them take 50–100 ms, which the sans-IO core spends in one call.
pub const MAX_DIFFICULTY: u8 = 20;
/// The cap a responder puts on its difficulty by default: `2^16` hashes, some 3–7 ms of
/// one core for a legitimate initiator, while an attacker's core sustains only 150–300
/// half-open connections a second.
pub const DEFAULT_CAP: u8 = 16;
/// Bytes of the challenge: the cookie's MAC.
pub const CHALLENGE_LEN: usize = 32;
/// The difficulty asked at the low watermark.
pub const BASE_DIFFICULTY: u8 = 8;
/// Bits of difficulty added with each doubling of the load above the watermark.
pub const BITS_PER_DOUBLING: u8 = 2;
/// Bytes of a solution on the wire (the nonce, big-endian).
pub const SOLUTION_LEN: usize = 8;
/// The solver gives up after `2^(d + SOLVE_SLACK_BITS)` hashes: the chance that a solvable
/// puzzle has no solution among them is `e^-64`, so giving up only ever bounds the work.
pub const SOLVE_SLACK_BITS: u8 = 6;

/// The public key of the keyed hash: domain separation from every other use of BLAKE3.
const DOMAIN: [u8; 32] = *b"ctp handshake client puzzle v7\0\0";

/// The difficulty (bits) a responder asks with `half_open` connections half-open, given
/// its `low_watermark` and its `cap`: 0 below the watermark, then
/// [`BASE_DIFFICULTY`] + [`BITS_PER_DOUBLING`] per doubling of `half_open / low_watermark`,
/// capped at `cap` and [`MAX_DIFFICULTY`]. A watermark of 0 asks a puzzle always. It never
/// decreases as `half_open` grows.
pub fn difficulty(half_open: usize, low_watermark: usize, cap: u8) -> u8 {
    if half_open < low_watermark {
        return 0;
    }
    let ratio = (half_open / low_watermark.max(1)).max(1);
    let doublings = ratio.ilog2();
    let d = u32::from(BASE_DIFFICULTY) + u32::from(BITS_PER_DOUBLING) * doublings;
    d.min(u32::from(cap.min(MAX_DIFFICULTY))) as u8
}

/// The challenge of a cookie: its last [`CHALLENGE_LEN`] bytes, the responder's MAC
/// (all of a shorter one, which no responder mints).
pub fn challenge(cookie: &[u8]) -> &[u8] {
    &cookie[cookie.len().saturating_sub(CHALLENGE_LEN)..]
}

/// The hash a solution is judged by: keyed BLAKE3 of the challenge and the nonce. One
/// call is one hash (one compression for a challenge of [`CHALLENGE_LEN`] bytes).
pub fn hash(challenge: &[u8], nonce: u64) -> [u8; 32] {
    let mut input = [0u8; CHALLENGE_LEN + SOLUTION_LEN];
    let n = challenge.len().min(CHALLENGE_LEN);
    input[..n].copy_from_slice(&challenge[..n]);
    input[n..n + SOLUTION_LEN].copy_from_slice(&nonce.to_be_bytes());
    if challenge.len() <= CHALLENGE_LEN {
        return *blake3::keyed_hash(&DOMAIN, &input[..n + SOLUTION_LEN]).as_bytes();
    }
    let mut h = blake3::Hasher::new_keyed(&DOMAIN);
    h.update(challenge);
    h.update(&nonce.to_be_bytes());
    *h.finalize().as_bytes()
}

/// Leading zero bits of a hash (counted in its first 64 bits, which is enough for any
/// difficulty up to [`MAX_DIFFICULTY`]).
fn zero_bits(h: &[u8; 32]) -> u32 {
    let mut first = [0u8; 8];
    first.copy_from_slice(&h[..8]);
    u64::from_be_bytes(first).leading_zeros()
}

/// Whether `nonce` solves the puzzle of `challenge` at `difficulty`: one hash (none at
/// difficulty 0, which every nonce solves).
pub fn verify(challenge: &[u8], difficulty: u8, nonce: u64) -> bool {
    difficulty == 0 || zero_bits(&hash(challenge, nonce)) >= u32::from(difficulty)
}

/// A solution and what it cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Solution {
    /// The nonce COOKIE_ECHO carries.
    pub nonce: u64,
    /// Hashes computed to find it (`2^d` on average).
    pub hashes: u64,
}

/// The most hashes [`solve`] computes at `difficulty`.
pub fn max_hashes(difficulty: u8) -> u64 {
    1u64 << (difficulty.min(MAX_DIFFICULTY) + SOLVE_SLACK_BITS)
}

/// Finds a nonce that solves the puzzle of `challenge` at `difficulty`, trying `start`,
/// `start + 1`, …; deterministic, and bounded by [`max_hashes`]. `None` when
/// `difficulty` exceeds [`MAX_DIFFICULTY`] or (with probability `e^-64`) no nonce tried
/// solved it. Difficulty 0 costs nothing.
pub fn solve(challenge: &[u8], difficulty: u8, start: u64) -> Option<Solution> {
    if difficulty > MAX_DIFFICULTY {
        return None;
    }
    if difficulty == 0 {
        return Some(Solution {
            nonce: start,
            hashes: 0,
        });
    }
    let want = u32::from(difficulty);
    (0..max_hashes(difficulty)).find_map(|i| {
        let nonce = start.wrapping_add(i);
        (zero_bits(&hash(challenge, nonce)) >= want).then_some(Solution {
            nonce,
            hashes: i + 1,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_puzzle_below_the_watermark_then_two_bits_per_doubling() {
        assert_eq!(difficulty(0, 64, 20), 0);
        assert_eq!(difficulty(63, 64, 20), 0);
        assert_eq!(difficulty(64, 64, 20), 8);
        assert_eq!(difficulty(127, 64, 20), 8);
        assert_eq!(difficulty(128, 64, 20), 10);
        assert_eq!(difficulty(256, 64, 20), 12);
        assert_eq!(difficulty(4096, 64, 20), 20);
        assert_eq!(difficulty(1 << 30, 64, 20), 20, "capped");
        assert_eq!(difficulty(1 << 30, 64, 14), 14, "the responder's cap");
        assert_eq!(
            difficulty(1 << 30, 64, 200),
            MAX_DIFFICULTY,
            "never above the wire's"
        );
        assert_eq!(difficulty(0, 0, 20), 8, "watermark 0: always a puzzle");
        assert_eq!(difficulty(usize::MAX, usize::MAX, 20), 8);
        let mut last = 0;
        for n in 0..100_000 {
            let d = difficulty(n, 64, 20);
            assert!(d >= last, "difficulty fell from {last} to {d} at {n}");
            last = d;
        }
    }

    #[test]
    fn a_solution_verifies_and_costs_what_the_difficulty_says() {
        let cookie = [7u8; CHALLENGE_LEN];
        for d in [1u8, 4, 8, 12] {
            let s = solve(&cookie, d, 0).expect("solvable");
            assert!(verify(&cookie, d, s.nonce));
            assert!(zero_bits(&hash(&cookie, s.nonce)) >= u32::from(d));
            // Every nonce before it failed: the count is exact.
            for n in 0..s.nonce {
                assert!(
                    !verify(&cookie, d, n),
                    "{n} solves {d} bits before {}",
                    s.nonce
                );
            }
            assert_eq!(s.hashes, s.nonce + 1);
        }
        // Another cookie (one bit of it) or a harder difficulty: the nonce fails.
        let s = solve(&cookie, 12, 0).unwrap();
        let still = (0..16)
            .filter(|&i| {
                let mut other = cookie;
                other[i * 2] ^= 1;
                verify(&other, 12, s.nonce)
            })
            .count();
        assert!(still < 2, "{still} of 16 other cookies take the same nonce");
        let z = zero_bits(&hash(&cookie, s.nonce)) as u8;
        assert!(!verify(&cookie, z + 1, s.nonce));
        assert!(verify(&cookie, 0, 12345), "difficulty 0 accepts anything");
        assert_eq!(solve(&cookie, MAX_DIFFICULTY + 1, 0), None);
        assert_eq!(solve(&cookie, 0, 9).unwrap().hashes, 0);
    }

    #[test]
    fn solving_costs_about_two_to_the_d_hashes_verifying_one() {
        // Deterministic inputs: the mean over 64 cookies at d = 10 is near 1024 (the
        // geometric distribution's standard error here is 128).
        let d = 10u8;
        let total: u64 = (0..64u8)
            .map(|i| solve(&[i; 32], d, 0).unwrap().hashes)
            .sum();
        let mean = total / 64;
        assert!(
            (512..2048).contains(&mean),
            "mean {mean} hashes for {d} bits"
        );
        let s = solve(&[3; 32], d, 1 << 40).unwrap();
        assert!(verify(&[3; 32], d, s.nonce));
        assert!(s.nonce >= 1 << 40);
        // A cookie's challenge is its MAC, the last 32 bytes.
        let cookie: Vec<u8> = (0..100).collect();
        assert_eq!(challenge(&cookie), &cookie[68..]);
        assert_eq!(challenge(&cookie[..5]), &cookie[..5]);
        // A longer challenge (never minted) still hashes all of itself.
        assert_ne!(hash(&[1; 40], 0), hash(&[1; 32], 0));
    }
}
