//! Arithmetic in GF(2^8) with the polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11D), generator 2 —
//! the field of `reed-solomon-erasure`, against which the tests cross-check every product.
//!
//! Scalar operations use exp/log tables built at compile time. The slice kernels that do the
//! bulk of the coding work — [`mul_add_slice`] (`dst[i] ^= c·src[i]`) and [`mul_slice`]
//! (`dst[i] = c·dst[i]`) — run on the best [`Kernel`] of the CPU, chosen once at run time:
//!
//! - **AVX2** and **SSSE3** (x86-64): the split-nibble method. `c·x = c·(x & 0x0f) ^
//!   c·(x & 0xf0)`, and each half takes one of 16 values, so two 16-entry tables per
//!   coefficient (`NIBBLES`, 8 KiB for all 256, built at compile time) turn the product into
//!   two `pshufb` table look-ups and a XOR over 32 (AVX2) or 16 (SSSE3) bytes at a time. The
//!   intrinsics, the crate's only `unsafe`, are in the child module `x86`.
//! - **Scalar** (every other CPU, and the tails shorter than a vector): one row of a full
//!   multiplication table (64 KiB, built at compile time), one look-up per byte.
//!
//! Coefficients 0 and 1 never reach a table: `c = 0` is a no-op for `mul_add_slice` and a
//! fill for `mul_slice`, `c = 1` a XOR or nothing. `benches/coding.rs` measures the kernels.

/// The reduction polynomial.
pub const POLY: u16 = 0x11d;

const fn tables() -> ([u8; 512], [u8; 256]) {
    let mut exp = [0u8; 512];
    let mut log = [0u8; 256];
    let mut x: u16 = 1;
    let mut i = 0;
    while i < 255 {
        exp[i] = x as u8;
        log[x as usize] = i as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= POLY;
        }
        i += 1;
    }
    // Doubled so that exp[log a + log b] needs no reduction.
    while i < 512 {
        exp[i] = exp[i - 255];
        i += 1;
    }
    (exp, log)
}

const TABLES: ([u8; 512], [u8; 256]) = tables();
static EXP: [u8; 512] = TABLES.0;
static LOG: [u8; 256] = TABLES.1;

const fn mul_table() -> [[u8; 256]; 256] {
    let (exp, log) = tables();
    let mut t = [[0u8; 256]; 256];
    let mut a = 1;
    while a < 256 {
        let mut b = 1;
        while b < 256 {
            t[a][b] = exp[log[a] as usize + log[b] as usize];
            b += 1;
        }
        a += 1;
    }
    t
}

/// The full multiplication table (64 KiB): the scalar kernels index one row of it.
static MUL: [[u8; 256]; 256] = mul_table();

/// The split-nibble tables: `NIBBLES[c][0][i] = c·i` and `NIBBLES[c][1][i] = c·(i << 4)` for
/// `i < 16`, so that `c·x = NIBBLES[c][0][x & 15] ^ NIBBLES[c][1][x >> 4]`.
static NIBBLES: [[[u8; 16]; 2]; 256] = nibble_tables();

const fn nibble_tables() -> [[[u8; 16]; 2]; 256] {
    let full = mul_table();
    let mut t = [[[0u8; 16]; 2]; 256];
    let mut c = 0;
    while c < 256 {
        let mut i = 0;
        while i < 16 {
            t[c][0][i] = full[c][i];
            t[c][1][i] = full[c][i << 4];
            i += 1;
        }
        c += 1;
    }
    t
}

/// a · b.
#[inline]
pub fn mul(a: u8, b: u8) -> u8 {
    if a == 0 || b == 0 {
        0
    } else {
        EXP[LOG[a as usize] as usize + LOG[b as usize] as usize]
    }
}

/// The multiplicative inverse of a non-zero `a` (`inv(0)` is defined as 0).
#[inline]
pub fn inv(a: u8) -> u8 {
    if a == 0 {
        0
    } else {
        EXP[255 - LOG[a as usize] as usize]
    }
}

/// a / b for non-zero `b` (`a / 0` is defined as 0).
#[inline]
pub fn div(a: u8, b: u8) -> u8 {
    mul(a, inv(b))
}

/// a^n, with 0^0 = 1.
pub fn pow(a: u8, n: usize) -> u8 {
    if n == 0 {
        1
    } else if a == 0 {
        0
    } else {
        EXP[(LOG[a as usize] as usize * n) % 255]
    }
}

/// `dst[i] ^= c · src[i]` over the shorter of the two slices (a shorter `src` is a
/// zero-padded one), on the CPU's best [`Kernel`].
#[inline]
pub fn mul_add_slice(dst: &mut [u8], src: &[u8], c: u8) {
    Kernel::detected().mul_add_slice(dst, src, c)
}

/// `dst[i] = c · dst[i]`, on the CPU's best [`Kernel`].
#[inline]
pub fn mul_slice(dst: &mut [u8], c: u8) {
    Kernel::detected().mul_slice(dst, c)
}

/// A set of slice kernels. Holding one proves the CPU can run it: the SIMD kernels are only
/// handed out by [`Kernel::detected`], [`Kernel::avx2`] and [`Kernel::ssse3`], which check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kernel(Isa);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Isa {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Ssse3(x86::Ssse3),
    #[cfg(target_arch = "x86_64")]
    Avx2(x86::Avx2),
}

impl Kernel {
    /// The fastest kernel this CPU runs, detected on the first call and cached.
    #[inline]
    pub fn detected() -> Kernel {
        static DETECTED: std::sync::OnceLock<Kernel> = std::sync::OnceLock::new();
        *DETECTED.get_or_init(|| {
            Kernel::avx2()
                .or_else(Kernel::ssse3)
                .unwrap_or_else(Kernel::scalar)
        })
    }

    /// The table kernel, which runs everywhere.
    pub fn scalar() -> Kernel {
        Kernel(Isa::Scalar)
    }

    /// The AVX2 kernel, if this CPU has AVX2.
    pub fn avx2() -> Option<Kernel> {
        #[cfg(target_arch = "x86_64")]
        return x86::Avx2::detect().map(|token| Kernel(Isa::Avx2(token)));
        #[cfg(not(target_arch = "x86_64"))]
        None
    }

    /// The SSSE3 kernel, if this CPU has SSSE3.
    pub fn ssse3() -> Option<Kernel> {
        #[cfg(target_arch = "x86_64")]
        return x86::Ssse3::detect().map(|token| Kernel(Isa::Ssse3(token)));
        #[cfg(not(target_arch = "x86_64"))]
        None
    }

    /// Every kernel this CPU runs, the scalar one first.
    pub fn available() -> impl Iterator<Item = Kernel> {
        [Some(Kernel::scalar()), Kernel::ssse3(), Kernel::avx2()]
            .into_iter()
            .flatten()
    }

    /// The kernel's name: `scalar`, `ssse3` or `avx2`.
    pub fn name(self) -> &'static str {
        match self.0 {
            Isa::Scalar => "scalar",
            #[cfg(target_arch = "x86_64")]
            Isa::Ssse3(_) => "ssse3",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2(_) => "avx2",
        }
    }

    /// `dst[i] ^= c · src[i]` over the shorter of the two slices.
    pub fn mul_add_slice(self, dst: &mut [u8], src: &[u8], c: u8) {
        let n = dst.len().min(src.len());
        let (dst, src) = (&mut dst[..n], &src[..n]);
        match c {
            0 => {}
            1 => dst.iter_mut().zip(src).for_each(|(d, &s)| *d ^= s),
            _ => {
                let done = match self.0 {
                    Isa::Scalar => 0,
                    #[cfg(target_arch = "x86_64")]
                    Isa::Ssse3(t) => t.mul_add(dst, src, &NIBBLES[c as usize]),
                    #[cfg(target_arch = "x86_64")]
                    Isa::Avx2(t) => t.mul_add(dst, src, &NIBBLES[c as usize]),
                };
                scalar_mul_add(&mut dst[done..], &src[done..], c);
            }
        }
    }

    /// `dst[i] = c · dst[i]`.
    pub fn mul_slice(self, dst: &mut [u8], c: u8) {
        match c {
            0 => dst.fill(0),
            1 => {}
            _ => {
                let done = match self.0 {
                    Isa::Scalar => 0,
                    #[cfg(target_arch = "x86_64")]
                    Isa::Ssse3(t) => t.mul(dst, &NIBBLES[c as usize]),
                    #[cfg(target_arch = "x86_64")]
                    Isa::Avx2(t) => t.mul(dst, &NIBBLES[c as usize]),
                };
                scalar_mul(&mut dst[done..], c);
            }
        }
    }
}

/// The table kernel of `mul_add_slice` for `c ≥ 2` (equal lengths).
fn scalar_mul_add(dst: &mut [u8], src: &[u8], c: u8) {
    let row = &MUL[c as usize];
    for (d, &s) in dst.iter_mut().zip(src) {
        *d ^= row[s as usize];
    }
}

/// The table kernel of `mul_slice` for `c ≥ 2`.
fn scalar_mul(dst: &mut [u8], c: u8) {
    let row = &MUL[c as usize];
    for d in dst {
        *d = row[*d as usize];
    }
}

#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use reed_solomon_erasure::galois_8 as reference;

    #[test]
    fn every_product_matches_the_reference_field() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), reference::mul(a, b), "{a} * {b}");
            }
            if a != 0 {
                assert_eq!(mul(a, inv(a)), 1);
                assert_eq!(div(a, a), 1);
            }
            for n in [0usize, 1, 2, 7, 254, 255, 300] {
                assert_eq!(pow(a, n), reference::exp(a, n), "{a}^{n}");
            }
        }
    }

    /// The reference: one scalar product per byte.
    fn reference_mul_add(dst: &mut [u8], src: &[u8], c: u8) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d ^= mul(c, s);
        }
    }

    #[test]
    fn slice_kernels_agree_with_scalar_products() {
        let src: Vec<u8> = (0..=255).collect();
        for kernel in Kernel::available() {
            for c in 0..=255u8 {
                let mut d = src.clone();
                kernel.mul_slice(&mut d, c);
                assert!(
                    d.iter().zip(&src).all(|(&d, &s)| d == mul(c, s)),
                    "{kernel:?} {c}"
                );
                let mut acc: Vec<u8> = src.iter().map(|x| x.wrapping_mul(3)).collect();
                let mut expected = acc.clone();
                kernel.mul_add_slice(&mut acc, &src, c);
                reference_mul_add(&mut expected, &src, c);
                assert_eq!(acc, expected, "{kernel:?} {c}");
            }
        }
    }

    #[test]
    fn the_detected_kernel_is_the_best_available_and_simd_is_tested_here() {
        let best = Kernel::available().last().unwrap();
        assert_eq!(Kernel::detected(), best);
        // This machine (x86-64 with AVX2) must exercise the SIMD paths, or the equality
        // tests below compare the scalar kernel with itself.
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            let names: Vec<&str> = Kernel::available().map(Kernel::name).collect();
            assert_eq!(names, ["scalar", "ssse3", "avx2"]);
        }
    }

    #[test]
    fn a_shorter_source_is_a_zero_padded_one() {
        let mut dst = vec![7u8; 40];
        mul_add_slice(&mut dst, &[1u8; 33], 2);
        assert!(dst[..33].iter().all(|&d| d == 7 ^ 2));
        assert!(dst[33..].iter().all(|&d| d == 7));
    }

    proptest! {
        #[test]
        fn simd_kernels_equal_the_scalar_kernel(
            c in any::<u8>(),
            len in 0usize..=300,
            dst_offset in 0usize..32,
            src_offset in 0usize..32,
            seed in any::<u64>(),
        ) {
            let bytes = |n: usize, salt: u64| -> Vec<u8> {
                (0..n as u64).map(|i| (seed ^ salt).wrapping_mul(i + 1).rotate_left(29) as u8).collect()
            };
            let src_buf = bytes(len + src_offset, 1);
            let dst_buf = bytes(len + dst_offset, 2);
            let src = &src_buf[src_offset..];
            let mut expected_add = dst_buf.clone();
            Kernel::scalar().mul_add_slice(&mut expected_add[dst_offset..], src, c);
            let mut expected_mul = dst_buf.clone();
            Kernel::scalar().mul_slice(&mut expected_mul[dst_offset..], c);
            let mut reference = dst_buf.clone();
            reference_mul_add(&mut reference[dst_offset..], src, c);
            prop_assert_eq!(&expected_add, &reference);
            for kernel in Kernel::available() {
                let mut got = dst_buf.clone();
                kernel.mul_add_slice(&mut got[dst_offset..], src, c);
                prop_assert_eq!(&got, &expected_add, "mul_add {:?}", kernel);
                let mut got = dst_buf.clone();
                kernel.mul_slice(&mut got[dst_offset..], c);
                prop_assert_eq!(&got, &expected_mul, "mul {:?}", kernel);
            }
        }
    }
}
