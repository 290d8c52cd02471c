//! The sending side: stream a file (never loaded whole), then wait for the receiver's verdict.

use super::header::{FileHeader, Reply, DIGEST_LEN};
use super::pipeline::ReadAhead;
use super::CHUNK;
use crate::progress::Sending;
use anyhow::{bail, Context, Result};
use ctp::Connection;
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
    progress: &Sending,
) -> Result<[u8; DIGEST_LEN]> {
    let file = File::open(path)
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
    let (sent, digest) = stream_file(conn, file.into_std().await, path, size, progress).await?;
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
/// closes the connection; returns the local BLAKE3 digest and whether the receiver confirmed
/// it. On the ctp wire (`native`) the stream's end (FIN) marks the end of the file and the
/// receiver answers with the digest of what it received ([`Reply`]): a different digest, an
/// error or no answer fails the transfer, and the connection is then aborted so that the
/// receiver discards the file. On the UDT4 wire the close itself marks the end, nothing
/// comes back, and the content stays unverified (`false`).
pub async fn send_raw(
    conn: &mut Connection,
    path: &Path,
    progress: &Sending,
    native: bool,
) -> Result<([u8; DIGEST_LEN], bool)> {
    let file = File::open(path)
        .await
        .with_context(|| format!("cannot open {}", path.display()))?;
    let size = file.metadata().await?.len();
    progress.set_length(size);
    let (_, digest) = stream_file(conn, file.into_std().await, path, u64::MAX, progress).await?;
    if !native {
        conn.close()
            .await
            .context("closing (the receiver did not acknowledge everything)")?;
        return Ok((digest, false));
    }
    conn.shutdown().await.context("finishing the stream")?;
    if let Err(e) = raw_verdict(conn, &digest).await {
        // Dropping the connection would close it gracefully, which the receiver takes as
        // the sender's approval.
        super::abort_with(conn, &format!("{e:#}")).await;
        return Err(e);
    }
    conn.close()
        .await
        .context("closing (the receiver did not acknowledge everything)")?;
    Ok((digest, true))
}

/// Reads the raw receiver's report of what it received and compares it with `digest`.
async fn raw_verdict(conn: &mut Connection, digest: &[u8; DIGEST_LEN]) -> Result<()> {
    let mut reply = Vec::new();
    (&mut *conn)
        .take(MAX_REPLY)
        .read_to_end(&mut reply)
        .await
        .context("waiting for the receiver's checksum")?;
    if reply.is_empty() {
        bail!(
            "the receiver closed without reporting its checksum (it failed, or is an older ctp): the content is not confirmed"
        );
    }
    match Reply::decode(&reply)? {
        Reply::Ok(d) if d == *digest => Ok(()),
        Reply::Ok(d) => bail!(
            "checksum mismatch: the receiver got content with a different checksum (blake3 {}, sent {})",
            crate::summary::hex(&d),
            crate::summary::hex(digest)
        ),
        Reply::Err(reason) => bail!("the receiver rejected the file: {reason}"),
    }
}

/// Streams `file` from its current position until its end or `limit` bytes, hashing what
/// it sends; returns the bytes sent and their BLAKE3 digest. The blocks are read and hashed
/// ahead on a thread of their own ([`ReadAhead`]) and go to the connection without another
/// copy (it keeps them until acknowledged).
async fn stream_file(
    conn: &Connection,
    file: std::fs::File,
    path: &Path,
    limit: u64,
    progress: &Sending,
) -> Result<(u64, [u8; DIGEST_LEN])> {
    let reading = || format!("reading {}", path.display());
    let mut blocks = ReadAhead::start(file, CHUNK, limit).with_context(reading)?;
    let mut sent = 0u64;
    while let Some(block) = blocks.next().await {
        let block = block.with_context(reading)?;
        let n = block.len() as u64;
        conn.write_bytes(block).await.context("sending")?;
        sent += n;
        progress.wrote(n);
    }
    Ok((sent, blocks.digest().await.with_context(reading)?))
}
