//! The sending side: the manifest, then each file streamed (never loaded whole) from where
//! the receiver's copy ends, then the receiver's verdict on the whole transfer.

use super::header::{Hello, Plan, Reply, DIGEST_LEN, FLAG_RESUME};
use super::incoming::Incoming;
use super::manifest::{Entry, Kind, Manifest, Mtime, MAX_MANIFEST};
use super::pipeline::ReadAhead;
use super::ratelimit::RateLimit;
use super::source::Sources;
use super::{resume, CHUNK};
use crate::progress::Sending;
use anyhow::{bail, Context, Result};
use ctp::Connection;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use tokio::fs::File;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Longest reply accepted from the receiver.
const MAX_REPLY: u64 = 4 + u16::MAX as u64;

/// What a completed transfer sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent {
    /// The digest both sides agreed on: the file's BLAKE3 for a single file, otherwise the
    /// manifest's ([`Manifest::digest`]).
    pub digest: [u8; DIGEST_LEN],
    /// Content bytes that crossed the connection (fewer than the files hold when the
    /// receiver already had a part of them).
    pub sent: u64,
}

/// How to send.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendOptions {
    /// Ask the receiver to keep what arrives of a file if the transfer breaks, and to
    /// offer what it kept (`--resume`).
    pub resume: bool,
    /// Most bits per second of file content (`--limit-rate`).
    pub limit_bps: Option<u64>,
}

/// Sends everything in `sources` over `conn` as `opts` say, and returns once the receiver
/// confirmed that it stored all of it with the digests sent. `progress` counts content
/// bytes (its length is set here); a line is printed above it for each file completed.
pub async fn send_files(
    conn: &Connection,
    sources: &Sources,
    opts: &SendOptions,
    progress: &Sending,
) -> Result<Sent> {
    let manifest = &sources.manifest;
    progress.set_length(manifest.total_bytes());
    let hello = Hello {
        flags: if opts.resume { FLAG_RESUME } else { 0 },
        manifest: manifest.clone(),
    };
    let opening = hello.encode();
    if opening.len() > 10 + MAX_MANIFEST as usize {
        bail!(
            "the manifest takes {} bytes, more than a receiver accepts ({MAX_MANIFEST}): send the files in several transfers",
            opening.len() - 10
        );
    }
    conn.write_bytes(opening.into())
        .await
        .context("sending the manifest")?;
    let sizes: Vec<u64> = manifest.files().map(|e| e.size).collect();
    let mut incoming = Incoming::new(conn);
    let plan = incoming
        .frame("the receiver's answer", plan_limit(&sizes), |b| {
            Plan::decode(b, &sizes)
        })
        .await?;
    let offers = match plan {
        Plan::Go(offers) => offers,
        Plan::Refused(reason) => bail!("the receiver refused the transfer: {reason}"),
    };
    let mut pace = opts
        .limit_bps
        .map(|bps| RateLimit::new(bps, std::time::Instant::now()));
    let mut digests = Vec::with_capacity(sizes.len());
    let mut sent = 0;
    for ((entry, path), theirs) in sources.file_paths().zip(&offers) {
        progress.set_message(entry.path.clone());
        let (digest, n) = send_one(conn, entry, path, theirs, &mut pace, progress)
            .await
            .with_context(|| format!("sending {}", path.display()))?;
        progress.println(crate::progress::file_done(&entry.path, entry.size));
        digests.push(digest);
        sent += n;
    }
    conn.finish().await.context("finishing the stream")?;
    let expected = manifest.digest(&digests);
    let reply = incoming
        .rest(MAX_REPLY as usize)
        .await
        .context("waiting for the receiver's confirmation")?;
    if reply.is_empty() {
        bail!("the receiver closed without confirming the transfer");
    }
    match Reply::decode(&reply)? {
        Reply::Ok(d) if d == expected => {}
        Reply::Ok(_) => bail!("the receiver stored content with a different checksum"),
        Reply::Err(reason) => bail!("the receiver rejected the transfer: {reason}"),
    }
    Ok(Sent {
        digest: if manifest.is_single_file() {
            digests[0]
        } else {
            expected
        },
        sent,
    })
}

/// The longest answer a receiver may give to a manifest of files of `sizes`: a digest
/// for every block of every file, or a refusal.
fn plan_limit(sizes: &[u64]) -> usize {
    let blocks: u64 = sizes.iter().map(|s| s.div_ceil(resume::BLOCK)).sum();
    let go = 6 + 4 * sizes.len() as u64 + blocks * DIGEST_LEN as u64;
    go.max(MAX_REPLY) as usize
}

/// Sends one file's section: where it starts (after the blocks of `theirs` that match),
/// the content from there (no faster than `pace` allows), the whole content's BLAKE3.
/// Returns the digest and the content bytes sent.
async fn send_one(
    conn: &Connection,
    entry: &Entry,
    path: &Path,
    theirs: &[[u8; DIGEST_LEN]],
    pace: &mut Option<RateLimit>,
    progress: &Sending,
) -> Result<([u8; DIGEST_LEN], u64)> {
    let mut file = File::open(path).await.context("cannot open it")?;
    let size = file.metadata().await?.len();
    if size != entry.size {
        bail!(
            "it changed size since the manifest was made ({} bytes, then {size})",
            entry.size
        );
    }
    let mut whole = blake3::Hasher::new();
    let start = resume::matching_prefix(&mut file, size, theirs, &mut whole)
        .await
        .context("reading it")?;
    progress.wrote(start);
    conn.write_bytes(start.to_be_bytes().to_vec().into())
        .await
        .context("sending")?;
    let file = file.into_std().await;
    let (n, digest) = stream_file(conn, file, path, size - start, pace, progress, whole).await?;
    if n < size - start {
        bail!(
            "it shrank while being sent ({} of {size} bytes read)",
            start + n
        );
    }
    conn.write_bytes(digest.to_vec().into())
        .await
        .context("sending the checksum")?;
    Ok((digest, n))
}

/// Sends the single file `path` under `name` (a one-entry manifest) and returns its BLAKE3
/// once the receiver confirmed it.
pub async fn send_file(
    conn: &Connection,
    path: &Path,
    name: &str,
    progress: &Sending,
) -> Result<[u8; DIGEST_LEN]> {
    let meta =
        std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    let sources = Sources {
        manifest: Manifest {
            entries: vec![Entry {
                path: name.to_string(),
                kind: Kind::File,
                size: meta.len(),
                mode: meta.permissions().mode() & 0o7777,
                mtime: meta.modified().map(Mtime::from_system).unwrap_or_default(),
            }],
        },
        paths: vec![path.to_path_buf()],
        warnings: Vec::new(),
    };
    let opts = SendOptions::default();
    Ok(send_files(conn, &sources, &opts, progress).await?.digest)
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
    limit_bps: Option<u64>,
    progress: &Sending,
    native: bool,
) -> Result<([u8; DIGEST_LEN], bool)> {
    let file = File::open(path)
        .await
        .with_context(|| format!("cannot open {}", path.display()))?;
    let size = file.metadata().await?.len();
    progress.set_length(size);
    let mut pace = limit_bps.map(|bps| RateLimit::new(bps, std::time::Instant::now()));
    let file = file.into_std().await;
    let hasher = blake3::Hasher::new();
    let (_, digest) = stream_file(conn, file, path, u64::MAX, &mut pace, progress, hasher).await?;
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

/// Streams `file` from its current position until its end or `limit` bytes, no faster than
/// `pace` allows; returns the bytes sent and the digest of what `hasher` held followed by
/// them. The blocks are read and hashed ahead on a thread of their own ([`ReadAhead`]) and
/// go to the connection without another copy (it keeps them until acknowledged).
async fn stream_file(
    conn: &Connection,
    file: std::fs::File,
    path: &Path,
    limit: u64,
    pace: &mut Option<RateLimit>,
    progress: &Sending,
    hasher: blake3::Hasher,
) -> Result<(u64, [u8; DIGEST_LEN])> {
    let piece = pace.as_ref().map_or(CHUNK, |p| p.piece().clamp(1, CHUNK));
    let reading = || format!("reading {}", path.display());
    let mut blocks = ReadAhead::start(file, piece, limit, hasher).with_context(reading)?;
    let mut sent = 0u64;
    while let Some(block) = blocks.next().await {
        let block = block.with_context(reading)?;
        let n = block.len() as u64;
        if let Some(p) = pace {
            p.wait(n).await;
        }
        conn.write_bytes(block).await.context("sending")?;
        sent += n;
        progress.wrote(n);
    }
    Ok((sent, blocks.digest().await.with_context(reading)?))
}
