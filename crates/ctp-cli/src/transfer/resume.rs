//! Resuming: files are compared in fixed blocks of [`BLOCK`] bytes, each named by its
//! BLAKE3, so that a partial copy the receiver kept is reused up to its first block that
//! differs from the sender's file.
//!
//! With `ctp send --resume` the receiver writes a file under a fixed hidden name next to
//! its destination, `.NAME.ctp-partial`, beside a sidecar `.NAME.ctp-partial.resume` that
//! names the manifest entry (path, size, mtime) the content belongs to. A transfer that
//! breaks leaves both. The next `--resume` transfer of the same entry finds them: the
//! receiver offers the BLAKE3 of every complete block it holds, the sender reads its own
//! file block by block and starts after the last block that matches, and the receiver
//! hashes the reused prefix again into the whole file's BLAKE3, so the file is still
//! verified end to end. A partial copy of another version of the file (other size or
//! mtime) is thrown away.

use super::header::DIGEST_LEN;
use super::manifest::Entry;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::io::SeekFrom;
use std::path::{Path, PathBuf};
use tokio::fs::File;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

pub use super::header::BLOCK;

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

/// A partial copy kept for resuming: its content and its sidecar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partial {
    /// The content received so far.
    pub data: PathBuf,
    /// What the content belongs to ([`Sidecar`], JSON).
    pub sidecar: PathBuf,
}

/// The manifest entry a partial copy belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Sidecar {
    path: String,
    size: u64,
    mtime_secs: i64,
    mtime_nanos: u32,
}

impl Sidecar {
    fn of(e: &Entry) -> Self {
        Sidecar {
            path: e.path.clone(),
            size: e.size,
            mtime_secs: e.mtime.secs,
            mtime_nanos: e.mtime.nanos,
        }
    }
}

impl Partial {
    /// The partial copy of the file stored at `dest`.
    pub fn of(dest: &Path) -> Self {
        Partial {
            data: super::tempname::hidden_path(dest, ".ctp-partial"),
            sidecar: super::tempname::hidden_path(dest, ".ctp-partial.resume"),
        }
    }

    /// The BLAKE3 of each complete block this partial copy holds of `entry`'s content:
    /// none when there is no copy, or when it belongs to another version of the file (it
    /// is removed then).
    pub async fn offer(&self, entry: &Entry) -> Result<Vec<[u8; DIGEST_LEN]>> {
        let sidecar = match tokio::fs::read(&self.sidecar).await {
            Ok(b) => serde_json::from_slice::<Sidecar>(&b).ok(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(_) => None,
        };
        let mut file = match (sidecar, File::open(&self.data).await) {
            (Some(s), Ok(f)) if s == Sidecar::of(entry) => f,
            _ => {
                self.remove();
                return Ok(Vec::new());
            }
        };
        let have = file.metadata().await?.len().min(entry.size);
        block_hashes(&mut file, have, entry.size)
            .await
            .with_context(|| format!("reading {}", self.data.display()))
    }

    /// Opens the copy to go on at `start`, which the sender chose among the `offered`
    /// blocks: the file is cut there and positioned at its end, and the returned hasher
    /// has read the prefix kept. From 0 the copy is (re)created and the sidecar written
    /// for `entry`.
    pub async fn open(
        &self,
        entry: &Entry,
        start: u64,
        offered: usize,
    ) -> Result<(File, blake3::Hasher)> {
        let offered_len = match offered {
            0 => 0,
            n => block_range(n as u64 - 1, entry.size).1,
        };
        if start > offered_len || (!start.is_multiple_of(BLOCK) && start != entry.size) {
            bail!(
                "the sender starts at byte {start}, but {offered_len} bytes in whole blocks were offered"
            );
        }
        if start == 0 {
            let file = File::create(&self.data)
                .await
                .with_context(|| format!("cannot create {}", self.data.display()))?;
            let sidecar = serde_json::to_vec(&Sidecar::of(entry))?;
            tokio::fs::write(&self.sidecar, sidecar)
                .await
                .with_context(|| format!("cannot write {}", self.sidecar.display()))?;
            return Ok((file, blake3::Hasher::new()));
        }
        let mut file = tokio::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.data)
            .await
            .with_context(|| format!("cannot open {}", self.data.display()))?;
        file.set_len(start).await?;
        let hasher = hash_prefix(&mut file, start)
            .await
            .with_context(|| format!("reading {}", self.data.display()))?;
        if file.stream_position().await? != start {
            bail!("{} is shorter than the part offered", self.data.display());
        }
        Ok((file, hasher))
    }

    /// Removes the copy and its sidecar.
    pub fn remove(&self) {
        let _ = std::fs::remove_file(&self.data);
        let _ = std::fs::remove_file(&self.sidecar);
    }
}

/// Whether `dest` already holds `entry`: a regular file (not a link) of its size and
/// mtime, as a receiver leaves a file it stored. Its content is checked all the same (the
/// sender compares every block and the receiver the whole digest).
pub fn already_stored(dest: &Path, entry: &Entry) -> bool {
    dest.symlink_metadata().is_ok_and(|m| {
        m.is_file()
            && m.len() == entry.size
            && m.modified().ok().map(super::manifest::Mtime::from_system) == Some(entry.mtime)
    })
}

/// The blocks of the file `entry` already stored at `dest`, offered whole.
pub async fn offer_stored(dest: &Path, entry: &Entry) -> Result<Vec<[u8; DIGEST_LEN]>> {
    let mut file = File::open(dest)
        .await
        .with_context(|| format!("cannot open {}", dest.display()))?;
    block_hashes(&mut file, entry.size, entry.size)
        .await
        .with_context(|| format!("reading {}", dest.display()))
}

/// The BLAKE3 of the whole file already stored at `dest` (`size` bytes), to compare with
/// the sender's.
pub async fn hash_stored(dest: &Path, size: u64) -> Result<[u8; DIGEST_LEN]> {
    let mut file = File::open(dest)
        .await
        .with_context(|| format!("cannot open {}", dest.display()))?;
    let h = hash_prefix(&mut file, size)
        .await
        .with_context(|| format!("reading {}", dest.display()))?;
    Ok(*h.finalize().as_bytes())
}

/// The BLAKE3 of each complete block among the first `have` bytes of `file`, read from
/// its current position, for a content of `size` bytes (the last block may be short).
async fn block_hashes(
    file: &mut File,
    have: u64,
    size: u64,
) -> std::io::Result<Vec<[u8; DIGEST_LEN]>> {
    let mut hashes = Vec::new();
    let mut buf = Vec::with_capacity(BLOCK as usize);
    for i in 0.. {
        let (from, to) = block_range(i, size);
        if from >= to || to > have {
            break;
        }
        buf.clear();
        (&mut *file).take(to - from).read_to_end(&mut buf).await?;
        hashes.push(*blake3::hash(&buf).as_bytes());
    }
    Ok(hashes)
}

/// A hasher fed with the next `len` bytes of `file` (fewer if it ends first).
async fn hash_prefix(file: &mut File, len: u64) -> std::io::Result<blake3::Hasher> {
    let mut hasher = blake3::Hasher::new();
    let mut reader = (&mut *file).take(len);
    let mut buf = vec![0u8; BLOCK as usize];
    loop {
        let n = reader.read(&mut buf).await?;
        if n == 0 {
            return Ok(hasher);
        }
        hasher.update(&buf[..n]);
    }
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

    #[tokio::test]
    async fn a_partial_copy_of_another_version_is_thrown_away() {
        use crate::transfer::manifest::{Kind, Mtime};
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("f.bin");
        let mut entry = Entry {
            path: "f.bin".into(),
            kind: Kind::File,
            size: 2 * BLOCK + 1,
            mode: 0o644,
            mtime: Mtime { secs: 5, nanos: 0 },
        };
        let p = Partial::of(&dest);
        assert!(p.offer(&entry).await.unwrap().is_empty(), "no copy yet");
        let (mut f, _) = p.open(&entry, 0, 0).await.unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut f, &vec![3u8; BLOCK as usize + 10])
            .await
            .unwrap();
        // A tokio file finishes a write in the background: flushed, it is on the file
        // before the copy is offered (dropped unflushed, the offer could read it short).
        tokio::io::AsyncWriteExt::flush(&mut f).await.unwrap();
        drop(f);
        let offer = p.offer(&entry).await.unwrap();
        assert_eq!(
            offer,
            [*blake3::hash(&vec![3u8; BLOCK as usize]).as_bytes()]
        );
        let (_, h) = p.open(&entry, BLOCK, offer.len()).await.unwrap();
        assert_eq!(h.finalize(), blake3::hash(&vec![3u8; BLOCK as usize]));
        assert_eq!(
            std::fs::metadata(&p.data).unwrap().len(),
            BLOCK,
            "cut there"
        );
        assert!(
            p.open(&entry, 2 * BLOCK, 1).await.is_err(),
            "beyond the offer"
        );
        entry.mtime.secs = 6;
        assert!(p.offer(&entry).await.unwrap().is_empty(), "another version");
        assert!(!p.data.exists() && !p.sidecar.exists(), "removed");
    }
}
