//! Arithmetic in GF(2^8) with the polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11D), generator 2 —
//! the field of `reed-solomon-erasure`, against which the tests cross-check every product.
//!
//! Scalar operations use exp/log tables built at compile time. The slice kernels that do the
//! bulk of the coding work index one 256-entry row of a full multiplication table (64 KiB,
//! also built at compile time), one lookup per byte — no `unsafe`; `benches/coding.rs`
//! measures them against `reed-solomon-erasure`.

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

/// The full multiplication table (64 KiB): the slice kernels index one row of it.
static MUL: [[u8; 256]; 256] = mul_table();

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

/// The row of the multiplication table for `c`.
#[inline]
fn row(c: u8) -> &'static [u8; 256] {
    &MUL[c as usize]
}

/// `dst[i] = c · src[i]` (over the shorter of the two).
pub fn mul_slice(c: u8, src: &[u8], dst: &mut [u8]) {
    let r = row(c);
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = r[s as usize];
    }
}

/// `dst[i] ^= c · src[i]` (over the shorter of the two).
pub fn mul_add_slice(c: u8, src: &[u8], dst: &mut [u8]) {
    match c {
        0 => {}
        1 => dst.iter_mut().zip(src).for_each(|(d, &s)| *d ^= s),
        _ => {
            let r = row(c);
            for (d, &s) in dst.iter_mut().zip(src) {
                *d ^= r[s as usize];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn slice_kernels_agree_with_scalar_products() {
        let src: Vec<u8> = (0..=255).collect();
        for c in [0u8, 1, 2, 0x53, 0xff] {
            let mut d = vec![0u8; 256];
            mul_slice(c, &src, &mut d);
            assert!(d.iter().zip(&src).all(|(&d, &s)| d == mul(c, s)));
            let mut acc: Vec<u8> = src.iter().map(|x| x.wrapping_mul(3)).collect();
            let before = acc.clone();
            mul_add_slice(c, &src, &mut acc);
            assert!(acc
                .iter()
                .zip(&before)
                .zip(&src)
                .all(|((&a, &b), &s)| a == b ^ mul(c, s)));
        }
    }
}
