//! The x86-64 split-nibble kernels (SSSE3 and AVX2): the crate's only `unsafe` code.
//!
//! A product `c·x` is `lo[x & 15] ^ hi[x >> 4]` with the coefficient's two 16-entry tables
//! (`super::NIBBLES`); `pshufb` (`_mm_shuffle_epi8`, `_mm256_shuffle_epi8` on each 128-bit
//! lane) looks up 16 or 32 bytes at once. Each kernel handles the whole vectors of its
//! slices and returns how many bytes it did; the caller finishes the tail with the tables.
//!
//! Soundness: a kernel runs only through a token ([`Ssse3`], [`Avx2`]) that can be made only
//! by `detect`, after `is_x86_feature_detected!` found the instruction set on this CPU. The
//! `#[target_feature]` functions are private to this module. The `unsafe` blocks are the
//! calls into them and the unaligned loads and stores, whose pointers come from arrays of
//! exactly the vector's length.
#![allow(unsafe_code)]

use std::arch::x86_64::{
    __m128i, __m256i, _mm256_and_si256, _mm256_broadcastsi128_si256, _mm256_loadu_si256,
    _mm256_set1_epi8, _mm256_shuffle_epi8, _mm256_srli_epi16, _mm256_storeu_si256,
    _mm256_xor_si256, _mm_and_si128, _mm_loadu_si128, _mm_set1_epi8, _mm_shuffle_epi8,
    _mm_srli_epi16, _mm_storeu_si128, _mm_xor_si128,
};

/// A coefficient's low-nibble and high-nibble product tables.
pub(super) type NibbleTables = [[u8; 16]; 2];

/// Proof that this CPU has SSSE3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Ssse3(());

/// Proof that this CPU has AVX2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Avx2(());

impl Ssse3 {
    /// The token, if the CPU has SSSE3.
    pub(super) fn detect() -> Option<Ssse3> {
        std::is_x86_feature_detected!("ssse3").then_some(Ssse3(()))
    }

    /// `dst[i] ^= c·src[i]` over whole 16-byte vectors (`dst` and `src` of one length);
    /// returns the bytes done.
    pub(super) fn mul_add(self, dst: &mut [u8], src: &[u8], tables: &NibbleTables) -> usize {
        // SAFETY: an `Ssse3` exists only once `detect` found SSSE3 on this CPU.
        unsafe { mul_add_ssse3(dst, src, tables) }
    }

    /// `dst[i] = c·dst[i]` over whole 16-byte vectors; returns the bytes done.
    pub(super) fn mul(self, dst: &mut [u8], tables: &NibbleTables) -> usize {
        // SAFETY: as in `mul_add`, the token proves SSSE3.
        unsafe { mul_ssse3(dst, tables) }
    }
}

impl Avx2 {
    /// The token, if the CPU has AVX2.
    pub(super) fn detect() -> Option<Avx2> {
        std::is_x86_feature_detected!("avx2").then_some(Avx2(()))
    }

    /// `dst[i] ^= c·src[i]` over whole 32-byte vectors and at most one 16-byte one (`dst`
    /// and `src` of one length); returns the bytes done.
    pub(super) fn mul_add(self, dst: &mut [u8], src: &[u8], tables: &NibbleTables) -> usize {
        // SAFETY: an `Avx2` exists only once `detect` found AVX2 (which implies SSSE3).
        unsafe { mul_add_avx2(dst, src, tables) }
    }

    /// `dst[i] = c·dst[i]` over whole 32-byte vectors and at most one 16-byte one; returns
    /// the bytes done.
    pub(super) fn mul(self, dst: &mut [u8], tables: &NibbleTables) -> usize {
        // SAFETY: as in `mul_add`, the token proves AVX2.
        unsafe { mul_avx2(dst, tables) }
    }
}

/// Loads 16 bytes.
#[target_feature(enable = "ssse3")]
fn load_128(bytes: &[u8; 16]) -> __m128i {
    // SAFETY: `bytes` is 16 readable bytes; `loadu` accepts any alignment.
    unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
}

/// Stores 16 bytes.
#[target_feature(enable = "ssse3")]
fn store_128(bytes: &mut [u8; 16], v: __m128i) {
    // SAFETY: `bytes` is 16 writable bytes; `storeu` accepts any alignment.
    unsafe { _mm_storeu_si128(bytes.as_mut_ptr().cast(), v) }
}

/// Loads 32 bytes.
#[target_feature(enable = "avx2")]
fn load_256(bytes: &[u8; 32]) -> __m256i {
    // SAFETY: `bytes` is 32 readable bytes; `loadu` accepts any alignment.
    unsafe { _mm256_loadu_si256(bytes.as_ptr().cast()) }
}

/// Stores 32 bytes.
#[target_feature(enable = "avx2")]
fn store_256(bytes: &mut [u8; 32], v: __m256i) {
    // SAFETY: `bytes` is 32 writable bytes; `storeu` accepts any alignment.
    unsafe { _mm256_storeu_si256(bytes.as_mut_ptr().cast(), v) }
}

/// `c·x` for 16 bytes.
#[target_feature(enable = "ssse3")]
fn product_128(x: __m128i, lo: __m128i, hi: __m128i) -> __m128i {
    let mask = _mm_set1_epi8(0x0f);
    let low = _mm_and_si128(x, mask);
    let high = _mm_and_si128(_mm_srli_epi16::<4>(x), mask);
    _mm_xor_si128(_mm_shuffle_epi8(lo, low), _mm_shuffle_epi8(hi, high))
}

/// `c·x` for 32 bytes (tables broadcast to both lanes).
#[target_feature(enable = "avx2")]
fn product_256(x: __m256i, lo: __m256i, hi: __m256i) -> __m256i {
    let mask = _mm256_set1_epi8(0x0f);
    let low = _mm256_and_si256(x, mask);
    let high = _mm256_and_si256(_mm256_srli_epi16::<4>(x), mask);
    _mm256_xor_si256(_mm256_shuffle_epi8(lo, low), _mm256_shuffle_epi8(hi, high))
}

#[target_feature(enable = "ssse3")]
fn mul_add_ssse3(dst: &mut [u8], src: &[u8], tables: &NibbleTables) -> usize {
    let (lo, hi) = (load_128(&tables[0]), load_128(&tables[1]));
    let (dst, _) = dst.as_chunks_mut::<16>();
    let (src, _) = src.as_chunks::<16>();
    for (d, s) in dst.iter_mut().zip(src) {
        let p = product_128(load_128(s), lo, hi);
        store_128(d, _mm_xor_si128(load_128(d), p));
    }
    dst.len().min(src.len()) * 16
}

#[target_feature(enable = "ssse3")]
fn mul_ssse3(dst: &mut [u8], tables: &NibbleTables) -> usize {
    let (lo, hi) = (load_128(&tables[0]), load_128(&tables[1]));
    let (dst, _) = dst.as_chunks_mut::<16>();
    for d in dst.iter_mut() {
        store_128(d, product_128(load_128(d), lo, hi));
    }
    dst.len() * 16
}

#[target_feature(enable = "avx2")]
fn mul_add_avx2(dst: &mut [u8], src: &[u8], tables: &NibbleTables) -> usize {
    let lo = _mm256_broadcastsi128_si256(load_128(&tables[0]));
    let hi = _mm256_broadcastsi128_si256(load_128(&tables[1]));
    let (dst32, _) = dst.as_chunks_mut::<32>();
    let (src32, _) = src.as_chunks::<32>();
    for (d, s) in dst32.iter_mut().zip(src32) {
        let p = product_256(load_256(s), lo, hi);
        store_256(d, _mm256_xor_si256(load_256(d), p));
    }
    let done = dst32.len().min(src32.len()) * 32;
    done + mul_add_ssse3(&mut dst[done..], &src[done..], tables)
}

#[target_feature(enable = "avx2")]
fn mul_avx2(dst: &mut [u8], tables: &NibbleTables) -> usize {
    let lo = _mm256_broadcastsi128_si256(load_128(&tables[0]));
    let hi = _mm256_broadcastsi128_si256(load_128(&tables[1]));
    let (dst32, _) = dst.as_chunks_mut::<32>();
    for d in dst32.iter_mut() {
        store_256(d, product_256(load_256(d), lo, hi));
    }
    let done = dst32.len() * 32;
    done + mul_ssse3(&mut dst[done..], tables)
}
