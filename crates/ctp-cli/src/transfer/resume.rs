//! Resuming: files are compared in fixed blocks of [`BLOCK`] bytes, each named by its
//! BLAKE3, so that a partial copy the receiver kept is reused up to its first block that
//! differs from the sender's file.

use super::header::DIGEST_LEN;
use std::io::SeekFrom;
use tokio::fs::File;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

/// Bytes of a resume block.
pub const BLOCK: u64 = 1 << 20;

/// The byte range of block `i` of a `size`-byte file (the last block may be short).
pub fn block_range(i: u64, size: u64) -> (u64, u64) {
    (i * BLOCK, ((i + 1) * BLOCK).min(size))
}

/// Reads `file` from its start, block by block, while each block's BLAKE3 equals the next
/// of `theirs`, feeding `whole` with what matched; returns the length that matched and
/// leaves `file` positioned there.
pub async fn matching_prefix(
    file: &mut File,
    size: u64,
    theirs: &[[u8; DIGEST_LEN]],
    whole: &mut blake3::Hasher,
) -> std::io::Result<u64> {
    let mut buf = Vec::with_capacity(BLOCK as usize);
    let mut matched = 0;
    for (i, hash) in theirs.iter().enumerate() {
        let (from, to) = block_range(i as u64, size);
        buf.clear();
        (&mut *file).take(to - from).read_to_end(&mut buf).await?;
        if buf.len() as u64 != to - from || blake3::hash(&buf).as_bytes() != hash {
            break;
        }
        whole.update(&buf);
        matched = to;
    }
    file.seek(SeekFrom::Start(matched)).await?;
    Ok(matched)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_prefix_ends_at_the_first_block_that_differs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let size = 3 * BLOCK + 10;
        let data: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let hashes: Vec<[u8; 32]> = (0..4)
            .map(|i| {
                let (a, b) = block_range(i, size);
                *blake3::hash(&data[a as usize..b as usize]).as_bytes()
            })
            .collect();
        for (theirs, expect) in [
            (hashes.clone(), size),
            (hashes[..2].to_vec(), 2 * BLOCK),
            (vec![hashes[0], [0; 32], hashes[2]], BLOCK),
            (vec![], 0),
        ] {
            let mut f = File::open(&path).await.unwrap();
            let mut whole = blake3::Hasher::new();
            let got = matching_prefix(&mut f, size, &theirs, &mut whole)
                .await
                .unwrap();
            assert_eq!(got, expect);
            assert_eq!(whole.finalize(), blake3::hash(&data[..expect as usize]));
            let mut rest = Vec::new();
            f.read_to_end(&mut rest).await.unwrap();
            assert_eq!(
                rest.len() as u64,
                size - expect,
                "positioned at the prefix's end"
            );
        }
    }
}
