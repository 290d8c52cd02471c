//! The receiving side: write to a hidden temporary file, verify, then rename into place.

use super::header::{FileHeader, Reply, DIGEST_LEN};
use super::pipeline::{Digest, WriteBehind};
use super::precheck::{self, NAME_MAX};
use super::CHUNK;
use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use ctp::Connection;
use indicatif::ProgressBar;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::io::AsyncWriteExt;

/// Removes the temporary file unless the transfer completed (also on panic or cancellation).
struct TempFile {
    path: PathBuf,
    keep: bool,
}

impl TempFile {
    /// Syncs the temporary file (`file`, everything written), then moves it to `dest`:
    /// only a complete, durable file ever appears under its final name, and an existing
    /// file there is replaced only with `overwrite` (without it the move is a hard link,
    /// which fails if `dest` appeared meanwhile, then the temporary name's removal).
    async fn commit(
        mut self,
        file: std::fs::File,
        dest: &Path,
        overwrite: bool,
    ) -> anyhow::Result<()> {
        tokio::task::spawn_blocking(move || file.sync_all())
            .await?
            .context("syncing to disk")?;
        if overwrite {
            tokio::fs::rename(&self.path, dest)
                .await
                .with_context(|| format!("renaming into {}", dest.display()))?;
            self.keep = true;
            return Ok(());
        }
        match tokio::fs::hard_link(&self.path, dest).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                bail!("{}", precheck::exists(dest))
            }
            // A file system without hard links: check, then rename.
            Err(_) if !dest.exists() => tokio::fs::rename(&self.path, dest)
                .await
                .with_context(|| format!("renaming into {}", dest.display()))?,
            Err(_) => bail!("{}", precheck::exists(dest)),
        }
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The temporary name's own bytes beyond the file's: `.`, `.ctp-partial-`, pid, nanos.
const TEMP_EXTRA: usize = 1 + 13 + 10 + 1 + 8;

fn temp_path(dest: &Path) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut base = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The temporary name must fit NAME_MAX too: a long name is cut (at a character).
    let room = NAME_MAX - TEMP_EXTRA;
    if base.len() > room {
        let mut end = room;
        while !base.is_char_boundary(end) {
            end -= 1;
        }
        base.truncate(end);
    }
    dest.with_file_name(format!(
        ".{base}.ctp-partial-{}-{nanos:08x}",
        std::process::id()
    ))
}

/// Outcome of a received file.
pub struct Received {
    /// Where it was stored.
    pub path: PathBuf,
    /// Content bytes.
    pub bytes: u64,
    /// BLAKE3 digest.
    pub digest: [u8; DIGEST_LEN],
    /// Whether the sender confirmed that this is what it sent (false only for a raw
    /// stream on the UDT4 wire, whose completeness nothing proves).
    pub verified: bool,
}

/// Receives one file over `conn` into `out`; tells the sender the verdict either way.
pub async fn recv_file(
    conn: &mut Connection,
    out: &Path,
    overwrite: bool,
    progress: &ProgressBar,
) -> Result<Received> {
    match receive(conn, out, overwrite, progress).await {
        Ok(r) => {
            conn.write_all(&Reply::Ok(r.digest).encode())
                .await
                .context("confirming to the sender")?;
            conn.shutdown().await.context("finishing the reply")?;
            Ok(r)
        }
        Err(e) => {
            // A sender already waiting reads the reason in the reply; one still sending
            // learns it from the abort.
            let reason = format!("{e:#}");
            let _ = conn.write_all(&Reply::Err(reason.clone()).encode()).await;
            let _ = conn.shutdown().await;
            super::abort_with(conn, &reason).await;
            Err(e)
        }
    }
}

async fn receive(
    conn: &mut Connection,
    out: &Path,
    overwrite: bool,
    progress: &ProgressBar,
) -> Result<Received> {
    // Pieces are taken as they arrived (no read buffer per connection).
    let mut pending = Vec::new();
    let header = loop {
        if let Some((h, used)) = FileHeader::decode(&pending)? {
            pending.drain(..used);
            break h;
        }
        let Some(chunk) = next_chunk(conn).await.context("reading the header")? else {
            bail!("the sender closed before sending a file header");
        };
        pending.extend_from_slice(&chunk);
    };
    let dest = precheck::admit(out, &header.name, Some(header.size), overwrite)?;
    let tmp = TempFile {
        path: temp_path(&dest),
        keep: false,
    };
    progress.set_length(header.size);
    let mut sink = Sink {
        writer: Some(write_behind(&tmp.path)?),
        size: header.size,
        got: 0,
        trailer: Vec::with_capacity(DIGEST_LEN),
    };
    sink.feed(Bytes::from(pending), &tmp.path).await?;
    while let Some(chunk) = next_chunk(conn).await? {
        sink.feed(chunk, &tmp.path).await?;
        progress.set_position(sink.got);
    }
    if sink.got < header.size {
        bail!(
            "the stream ended after {} of {} bytes",
            sink.got,
            header.size
        );
    }
    if sink.trailer.len() != DIGEST_LEN {
        bail!("the checksum trailer is missing or truncated");
    }
    let (file, digest) = sink.finish(&tmp.path).await?;
    if sink.trailer[..] != digest[..] {
        bail!("checksum mismatch: the content is corrupt; nothing was stored");
    }
    tmp.commit(file, &dest, overwrite).await?;
    Ok(Received {
        path: dest,
        bytes: header.size,
        digest,
        verified: true,
    })
}

/// Creates the temporary file at `path` and a write-behind thread for it.
fn write_behind(path: &Path) -> Result<WriteBehind> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    WriteBehind::start(file).context("starting the writer")
}

/// Queues `piece` on `writer`; when the writer stopped, its write error (taking it).
async fn write_piece(writer: &mut Option<WriteBehind>, piece: Bytes, path: &Path) -> Result<()> {
    let Some(w) = writer.as_mut() else {
        bail!("writing {}: the writer stopped", path.display());
    };
    if w.write(piece).await.is_ok() {
        return Ok(());
    }
    Err(finish_writer(writer, path)
        .await
        .err()
        .unwrap_or_else(|| anyhow!("writing {}: the writer stopped", path.display())))
}

/// Waits for `writer` to write everything queued: the file and the digest of its content.
async fn finish_writer(
    writer: &mut Option<WriteBehind>,
    path: &Path,
) -> Result<(std::fs::File, Digest)> {
    let Some(w) = writer.take() else {
        bail!("writing {}: the writer stopped", path.display());
    };
    w.finish()
        .await
        .with_context(|| format!("writing {}", path.display()))
}

/// Splits the incoming stream into content (hashed and written) and the digest trailer.
struct Sink {
    writer: Option<WriteBehind>,
    size: u64,
    got: u64,
    trailer: Vec<u8>,
}

impl Sink {
    async fn feed(&mut self, data: Bytes, path: &Path) -> Result<()> {
        let content = ((self.size - self.got) as usize).min(data.len());
        if content > 0 {
            write_piece(&mut self.writer, data.slice(..content), path).await?;
            self.got += content as u64;
        }
        self.trailer.extend_from_slice(&data[content..]);
        if self.trailer.len() > DIGEST_LEN {
            bail!(
                "the sender sent more than the announced {} bytes",
                self.size
            );
        }
        Ok(())
    }

    /// Waits for the content to be written: the file and the content's digest.
    async fn finish(&mut self, path: &Path) -> Result<(std::fs::File, Digest)> {
        finish_writer(&mut self.writer, path).await
    }
}

/// The next received piece of `conn`'s stream (at most [`CHUNK`] bytes, not copied):
/// `None` at its orderly end, an error when the connection broke before it.
pub async fn next_chunk(conn: &Connection) -> Result<Option<bytes::Bytes>> {
    conn.read_chunk(CHUNK)
        .await
        .context("receiving (the connection broke before an orderly close)")
}

/// Receives a plain stream (`--raw`: no ctp header or checksum) into `out`; the file is
/// renamed into place only once the stream is known to be the sender's, whole (a broken
/// connection leaves nothing behind). On the ctp wire (`native`) that takes the stream's
/// end mark (FIN; a close without it may have cut the stream anywhere), then this side
/// reports the digest of what it received ([`Reply`]) and commits only when the sender,
/// having compared it with its own, closes gracefully. The UDT4 wire has no end mark: the
/// close is the end, and the file is stored unverified.
pub async fn recv_raw(
    conn: &mut Connection,
    out: &Path,
    overwrite: bool,
    progress: &ProgressBar,
    native: bool,
) -> Result<Received> {
    let r = receive_raw(conn, out, overwrite, progress, native).await;
    if let (Err(e), true) = (&r, native) {
        // Tell a sender still waiting for the report why there is none (best effort).
        let _ = conn.write_all(&Reply::Err(format!("{e:#}")).encode()).await;
        let _ = conn.shutdown().await;
    }
    r
}

async fn receive_raw(
    conn: &mut Connection,
    out: &Path,
    overwrite: bool,
    progress: &ProgressBar,
    native: bool,
) -> Result<Received> {
    let dest = precheck::admit(out, RAW_NAME, None, overwrite)?;
    let tmp = TempFile {
        path: temp_path(&dest),
        keep: false,
    };
    let mut writer = Some(write_behind(&tmp.path)?);
    let mut got = 0u64;
    while let Some(chunk) = next_chunk(conn).await? {
        got += chunk.len() as u64;
        write_piece(&mut writer, chunk, &tmp.path).await?;
        progress.set_position(got);
    }
    let (file, digest) = finish_writer(&mut writer, &tmp.path).await?;
    if native {
        if !conn.peer_finished() {
            bail!(
                "the sender closed without finishing the stream (no end-of-stream mark) after {got} bytes: the file may be cut short; nothing was stored"
            );
        }
        // Report what arrived; the sender closes gracefully only if it sent the same.
        // (An older sender may already have closed: the close then decides alone.)
        let _ = conn.write_all(&Reply::Ok(digest).encode()).await;
        let _ = conn.shutdown().await;
        match conn.closed().await {
            ctp::CloseReason::Graceful => {}
            r => bail!("the sender did not confirm the content ({r}); nothing was stored"),
        }
    }
    tmp.commit(file, &dest, overwrite).await?;
    Ok(Received {
        path: dest,
        bytes: got,
        digest,
        verified: native,
    })
}

/// File name a raw stream gets when `--out` is a directory (a raw stream carries no name).
pub const RAW_NAME: &str = "received.raw";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_temporary_name_of_a_long_name_fits_the_file_system() {
        let long = "é".repeat(127); // 254 bytes: a valid name
        let tmp = temp_path(&Path::new("/data").join(&long));
        let name = tmp.file_name().unwrap().len();
        assert!(name <= NAME_MAX, "{name} bytes");
        assert!(tmp.to_str().is_some(), "cut at a character boundary");
    }
}
