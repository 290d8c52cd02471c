//! Row-major storage of equal-width rows in one buffer, and the row operation of Gaussian
//! elimination over GF(2^8) on it.

use super::gf256::Kernel;

/// Row `r` of `width`-byte rows.
pub(crate) fn row(buf: &[u8], width: usize, r: usize) -> &[u8] {
    &buf[r * width..(r + 1) * width]
}

/// Row `r` of `width`-byte rows, mutably.
pub(crate) fn row_mut(buf: &mut [u8], width: usize, r: usize) -> &mut [u8] {
    &mut buf[r * width..(r + 1) * width]
}

/// Row `target` ^= `factor` · row `source` (two different rows of one buffer).
pub(crate) fn add_scaled_row(
    kernel: Kernel,
    buf: &mut [u8],
    width: usize,
    target: usize,
    source: usize,
    factor: u8,
) {
    debug_assert_ne!(target, source);
    let (dst, src) = if target < source {
        let (low, high) = buf.split_at_mut(source * width);
        (row_mut(low, width, target), &high[..width])
    } else {
        let (low, high) = buf.split_at_mut(target * width);
        (&mut high[..width], row(low, width, source))
    };
    kernel.mul_add_slice(dst, src, factor);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coding::gf256;

    #[test]
    fn add_scaled_row_changes_only_the_target_in_either_order() {
        let width = 5;
        let original: Vec<u8> = (1..=20).collect();
        for (target, source) in [(0, 3), (3, 0), (1, 2), (2, 1)] {
            let mut buf = original.clone();
            add_scaled_row(Kernel::detected(), &mut buf, width, target, source, 7);
            for r in 0..4 {
                let expected: Vec<u8> = if r == target {
                    row(&original, width, r)
                        .iter()
                        .zip(row(&original, width, source))
                        .map(|(&t, &s)| t ^ gf256::mul(7, s))
                        .collect()
                } else {
                    row(&original, width, r).to_vec()
                };
                assert_eq!(
                    row(&buf, width, r),
                    &expected[..],
                    "{target} {source} row {r}"
                );
            }
        }
    }
}
