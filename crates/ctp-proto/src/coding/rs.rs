//! A systematic Reed–Solomon erasure code over GF(2^8): `k` data shards, `m` parity shards;
//! any `k` of the `k + m` recover the data.
//!
//! The encoding matrix is built as `reed-solomon-erasure` builds it — a `(k+m) × k`
//! Vandermonde matrix multiplied by the inverse of its top `k × k` square, so its top is the
//! identity (systematic) — which makes the parity shards byte-for-byte identical to that
//! library's (the tests check it).

use super::{gf256, rows};

/// Most shards in a block (the field has 256 elements).
pub const MAX_SHARDS: usize = 256;

/// Why a code could not be built or a block not decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RsError {
    /// `k` or `m` is zero, or `k + m` exceeds [`MAX_SHARDS`].
    #[error("invalid code: k = {k}, m = {m} (need k ≥ 1, m ≥ 1, k + m ≤ 256)")]
    Shape {
        /// Data shards.
        k: usize,
        /// Parity shards.
        m: usize,
    },
    /// Fewer than `k` shards are present.
    #[error("too few shards: {present} of the {k} needed")]
    TooFewShards {
        /// Shards present.
        present: usize,
        /// Shards needed.
        k: usize,
    },
    /// Shards have different lengths, or the slice has the wrong count.
    #[error("shards must all have the same length and there must be k + m of them")]
    Mismatch,
}

/// A Reed–Solomon code with fixed `k` and `m`.
#[derive(Clone, Debug)]
pub struct ReedSolomon {
    k: usize,
    m: usize,
    /// Row-major `(k + m) × k` encoding matrix; rows `k..` produce the parity.
    matrix: Vec<u8>,
}

/// Inverts a square row-major matrix by Gauss–Jordan elimination; `None` when singular.
fn invert(mut a: Vec<u8>, n: usize) -> Option<Vec<u8>> {
    let kernel = gf256::Kernel::detected();
    let mut inv = vec![0u8; n * n];
    for i in 0..n {
        inv[i * n + i] = 1;
    }
    for col in 0..n {
        let pivot = (col..n).find(|&r| a[r * n + col] != 0)?;
        if pivot != col {
            for j in 0..n {
                a.swap(pivot * n + j, col * n + j);
                inv.swap(pivot * n + j, col * n + j);
            }
        }
        let p = gf256::inv(a[col * n + col]);
        kernel.mul_slice(rows::row_mut(&mut a, n, col), p);
        kernel.mul_slice(rows::row_mut(&mut inv, n, col), p);
        for r in 0..n {
            let f = a[r * n + col];
            if r != col && f != 0 {
                rows::add_scaled_row(kernel, &mut a, n, r, col, f);
                rows::add_scaled_row(kernel, &mut inv, n, r, col, f);
            }
        }
    }
    Some(inv)
}

/// Row-major product of an `r × n` and an `n × c` matrix.
fn multiply(a: &[u8], b: &[u8], r: usize, n: usize, c: usize) -> Vec<u8> {
    let mut out = vec![0u8; r * c];
    for i in 0..r {
        for j in 0..c {
            out[i * c + j] = (0..n).fold(0, |acc, t| acc ^ gf256::mul(a[i * n + t], b[t * c + j]));
        }
    }
    out
}

impl ReedSolomon {
    /// A code with `k` data and `m` parity shards.
    pub fn new(k: usize, m: usize) -> Result<Self, RsError> {
        if k == 0 || m == 0 || k + m > MAX_SHARDS {
            return Err(RsError::Shape { k, m });
        }
        let n = k + m;
        let vandermonde: Vec<u8> = (0..n)
            .flat_map(|r| (0..k).map(move |c| gf256::pow(r as u8, c)))
            .collect();
        let top = invert(vandermonde[..k * k].to_vec(), k).ok_or(RsError::Shape { k, m })?;
        Ok(ReedSolomon {
            k,
            m,
            matrix: multiply(&vandermonde, &top, n, k, k),
        })
    }

    /// Data shards per block.
    pub fn data_shards(&self) -> usize {
        self.k
    }

    /// Parity shards per block.
    pub fn parity_shards(&self) -> usize {
        self.m
    }

    /// Computes the `m` parity shards of `data` (all of one length) into `parity`.
    pub fn encode(&self, data: &[&[u8]], parity: &mut [Vec<u8>]) -> Result<(), RsError> {
        let len = data.first().map_or(0, |d| d.len());
        if data.len() != self.k || parity.len() != self.m || data.iter().any(|d| d.len() != len) {
            return Err(RsError::Mismatch);
        }
        for (p, out) in parity.iter_mut().enumerate() {
            out.clear();
            out.resize(len, 0);
            let row = &self.matrix[(self.k + p) * self.k..(self.k + p + 1) * self.k];
            for (c, d) in row.iter().zip(data) {
                gf256::mul_add_slice(out, d, *c);
            }
        }
        Ok(())
    }

    /// Fills in the missing data shards of a block (indices `0..k` are data, `k..k+m` parity)
    /// from any `k` shards present. Parity shards are not rebuilt.
    pub fn reconstruct_data(&self, shards: &mut [Option<Vec<u8>>]) -> Result<(), RsError> {
        if shards.len() != self.k + self.m {
            return Err(RsError::Mismatch);
        }
        if shards[..self.k].iter().all(Option::is_some) {
            return Ok(());
        }
        let present: Vec<usize> = (0..shards.len())
            .filter(|&i| shards[i].is_some())
            .take(self.k)
            .collect();
        if present.len() < self.k {
            return Err(RsError::TooFewShards {
                present: present.len(),
                k: self.k,
            });
        }
        let len = shards[present[0]].as_ref().map_or(0, Vec::len);
        if present
            .iter()
            .any(|&i| shards[i].as_ref().map_or(0, Vec::len) != len)
        {
            return Err(RsError::Mismatch);
        }
        let sub: Vec<u8> = present
            .iter()
            .flat_map(|&i| self.matrix[i * self.k..(i + 1) * self.k].iter().copied())
            .collect();
        let decode = invert(sub, self.k).ok_or(RsError::Mismatch)?;
        let missing_rows: Vec<usize> = (0..self.k).filter(|&i| shards[i].is_none()).collect();
        for missing in missing_rows {
            let mut out = vec![0u8; len];
            for (j, &src) in present.iter().enumerate() {
                if let Some(s) = shards[src].as_ref() {
                    gf256::mul_add_slice(&mut out, s, decode[missing * self.k + j]);
                }
            }
            shards[missing] = Some(out);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn block(k: usize, len: usize, seed: u8) -> Vec<Vec<u8>> {
        (0..k)
            .map(|i| (0..len).map(|j| (i * 31 + j * 7) as u8 ^ seed).collect())
            .collect()
    }

    #[test]
    fn parity_is_identical_to_reed_solomon_erasure() {
        for (k, m) in [(1, 1), (4, 1), (5, 2), (10, 4), (32, 8)] {
            let data = block(k, 300, k as u8);
            let ours = ReedSolomon::new(k, m).unwrap();
            let mut parity = vec![Vec::new(); m];
            let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
            ours.encode(&refs, &mut parity).unwrap();
            let theirs = reed_solomon_erasure::galois_8::ReedSolomon::new(k, m).unwrap();
            let mut shards: Vec<Vec<u8>> = data.clone();
            shards.extend(vec![vec![0u8; 300]; m]);
            theirs.encode(&mut shards).unwrap();
            assert_eq!(&shards[k..], &parity[..], "k={k} m={m}");
        }
    }

    proptest! {
        #[test]
        fn any_k_of_n_shards_recover_the_data(k in 1usize..12, m in 1usize..6, len in 1usize..200, seed in any::<u8>(), drop_mask in any::<u32>()) {
            let rs = ReedSolomon::new(k, m).unwrap();
            let data = block(k, len, seed);
            let mut parity = vec![Vec::new(); m];
            let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
            rs.encode(&refs, &mut parity).unwrap();
            let mut shards: Vec<Option<Vec<u8>>> = data.iter().cloned().chain(parity).map(Some).collect();
            // Drop up to m shards.
            let mut dropped = 0;
            for (i, shard) in shards.iter_mut().enumerate() {
                if dropped < m && drop_mask & (1 << i) != 0 {
                    *shard = None;
                    dropped += 1;
                }
            }
            rs.reconstruct_data(&mut shards).unwrap();
            for i in 0..k {
                prop_assert_eq!(shards[i].as_ref().unwrap(), &data[i]);
            }
        }
    }

    #[test]
    fn too_few_shards_and_bad_shapes_are_errors() {
        let rs = ReedSolomon::new(3, 1).unwrap();
        let mut shards = vec![Some(vec![1u8; 4]), None, None, Some(vec![2u8; 4])];
        assert_eq!(
            rs.reconstruct_data(&mut shards),
            Err(RsError::TooFewShards { present: 2, k: 3 })
        );
        assert!(ReedSolomon::new(0, 1).is_err() && ReedSolomon::new(200, 57).is_err());
        let mut p = vec![Vec::new(); 1];
        assert_eq!(
            rs.encode(&[&[1u8][..], &[1, 2][..], &[1][..]], &mut p),
            Err(RsError::Mismatch)
        );
    }
}
