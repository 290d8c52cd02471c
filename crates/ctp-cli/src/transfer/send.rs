//! The sending side: stream a file (never loaded whole), then wait for the receiver's verdict.

use super::header::{FileHeader, Reply, DIGEST_LEN};
use super::CHUNK;
use anyhow::{bail, Context, Result};
use bytes::BytesMut;
use ctp::Connection;
use indicatif::ProgressBar;
use std::path::Path;
use tokio::fs::File;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Longest reply accepted from the receiver.
const MAX_REPLY: u64 = 4 + u16::MAX as u64;

/// Sends `path` as `name` over `conn` and returns the BLAKE3 digest once the receiver
/// confirmed that it stored the file with that digest.
pub async fn send_file(
    conn: &mut Connection,
    path: &Path,
    name: &str,
    progress: &ProgressBar,
) -> Result<[u8; DIGEST_LEN]> {
    let mut file = File::open(path)
        .await
        .with_context(|| format!("cannot open {}", path.display()))?;
    let size = file.metadata().await?.len();
    progress.set_length(size);
    conn.write_all(
        &FileHeader {
            name: name.to_string(),
            size,
        }
        .encode(),
    )
    .await
    .context("sending the header")?;
    let (sent, digest) = stream_file(conn, &mut file, path, size, progress).await?;
    if sent < size {
        bail!(
            "{} shrank while being sent ({} of {} bytes read)",
            path.display(),
            sent,
            size
        );
    }
    conn.write_all(&digest)
        .await
        .context("sending the checksum")?;
    conn.shutdown().await.context("finishing the stream")?;
    let mut reply = Vec::new();
    (&mut *conn)
        .take(MAX_REPLY)
        .read_to_end(&mut reply)
        .await
        .context("waiting for the receiver's confirmation")?;
    if reply.is_empty() {
        bail!("the receiver closed without confirming the file");
    }
    match Reply::decode(&reply)? {
        Reply::Ok(d) if d == digest => Ok(digest),
        Reply::Ok(_) => bail!("the receiver stored content with a different checksum"),
        Reply::Err(reason) => bail!("the receiver rejected the file: {reason}"),
    }
}

/// Sends `path` as a plain stream (`--raw`: no ctp header, no checksum on the wire), then
/// closes the connection, which marks the end of the file; returns the local BLAKE3 digest
/// once the close completed (everything was acknowledged). `finish_first` ends the stream
/// before closing (ctp profiles, whose readers see end-of-stream from it; a UDT peer sees
/// the end from the close itself).
pub async fn send_raw(
    conn: &mut Connection,
    path: &Path,
    progress: &ProgressBar,
    finish_first: bool,
) -> Result<[u8; DIGEST_LEN]> {
    let mut file = File::open(path)
        .await
        .with_context(|| format!("cannot open {}", path.display()))?;
    let size = file.metadata().await?.len();
    progress.set_length(size);
    let (_, digest) = stream_file(conn, &mut file, path, u64::MAX, progress).await?;
    if finish_first {
        conn.shutdown().await.context("finishing the stream")?;
    }
    conn.close()
        .await
        .context("closing (the receiver did not acknowledge everything)")?;
    Ok(digest)
}

/// Streams `file` from its current position until its end or `limit` bytes, hashing what
/// it sends; returns the bytes sent and their BLAKE3 digest. The blocks read go to the
/// connection without another copy (it keeps them until acknowledged); a block's memory is
/// reused once the connection let go of it.
async fn stream_file(
    conn: &Connection,
    file: &mut File,
    path: &Path,
    limit: u64,
    progress: &ProgressBar,
) -> Result<(u64, [u8; DIGEST_LEN])> {
    let mut hasher = blake3::Hasher::new();
    let mut buf = BytesMut::with_capacity(CHUNK);
    let mut sent = 0u64;
    while sent < limit {
        buf.reserve(CHUNK);
        let want = (limit - sent).min(CHUNK as u64) as usize;
        let n = (&mut *file)
            .take(want as u64)
            .read_buf(&mut buf)
            .await
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        let block = buf.split().freeze();
        hasher.update(&block);
        conn.write_bytes(block).await.context("sending")?;
        sent += n as u64;
        progress.set_position(sent);
    }
    Ok((sent, *hasher.finalize().as_bytes()))
}
