//! The receiving side: check the manifest's every path against `--out`, write each file to
//! a hidden temporary name, verify it, then rename it into place with its mode and mtime.
//!
//! Nothing is written outside `--out`: a path in the manifest is relative and has no `..`
//! ([`super::manifest::check_path`]), and no existing component under `--out` it goes
//! through may be a symbolic link or anything but a directory (the receiver creates the
//! missing ones itself), so a path can neither climb out nor be redirected.

use super::header::{Hello, Plan, Reply, DIGEST_LEN, FLAG_RESUME};
use super::incoming::Incoming;
use super::manifest::{Entry, Kind, Manifest, MAX_MANIFEST, MODE_MASK};
use super::pipeline::{Digest, WriteBehind};
use super::precheck;
use super::resume::{self, Partial};
use super::tempname::{self, temp_path};
use super::CHUNK;
use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use ctp::Connection;
use indicatif::ProgressBar;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use tokio::io::AsyncWriteExt;

pub use super::incoming::next_chunk;

/// A file being received under a temporary name. Unless the transfer completed, the name
/// is removed when this is dropped (also on panic or cancellation) — except a partial copy
/// kept for resuming ([`TempFile::resumable`]), which stays with its sidecar until it is
/// committed or [`TempFile::discard`]ed.
struct TempFile {
    path: PathBuf,
    keep: bool,
    /// The resume sidecar that goes with a resumable partial copy.
    sidecar: Option<PathBuf>,
}

impl TempFile {
    /// A fresh temporary name, removed on failure.
    fn fresh(path: PathBuf) -> Self {
        TempFile {
            path,
            keep: false,
            sidecar: None,
        }
    }

    /// A partial copy kept on failure, for resuming.
    fn resumable(p: &Partial) -> Self {
        TempFile {
            path: p.data.clone(),
            keep: true,
            sidecar: Some(p.sidecar.clone()),
        }
    }

    /// Removes the file (and its sidecar) when dropped, resumable or not: its content is
    /// wrong.
    fn discard(&mut self) {
        self.keep = false;
    }

    /// Syncs the temporary file (`file`, everything written), gives it the mode and mtime
    /// of `attrs` (if any), then moves it to `dest`: only a complete, durable file ever
    /// appears under its final name, and an existing file there is replaced only with
    /// `overwrite` (without it the move is a hard link, which fails if `dest` appeared
    /// meanwhile, then the temporary name's removal).
    async fn commit(
        mut self,
        file: std::fs::File,
        dest: &Path,
        overwrite: bool,
        attrs: Option<&Entry>,
    ) -> anyhow::Result<()> {
        if let Some(e) = attrs {
            set_attributes(file, e).await?;
        } else {
            tokio::task::spawn_blocking(move || file.sync_all())
                .await?
                .context("syncing to disk")?;
        }
        match tempname::move_into_place(&self.path, dest, overwrite) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                bail!("{}", precheck::exists(dest))
            }
            Err(e) => {
                return Err(e).with_context(|| format!("renaming into {}", dest.display()));
            }
        }
        if let Some(s) = &self.sidecar {
            let _ = std::fs::remove_file(s);
        }
        self.keep = true;
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_file(&self.path);
            if let Some(s) = &self.sidecar {
                let _ = std::fs::remove_file(s);
            }
        }
    }
}

/// Where the raw stream goes when the user asked for `out`.
fn raw_destination(out: &Path) -> PathBuf {
    if out.is_dir() {
        out.join(RAW_NAME)
    } else {
        out.to_path_buf()
    }
}

/// Checks, before any of its content is accepted, that a file described by `entry` can be
/// stored at `dest` for `--out out` ([`precheck::check`]). The one place each received
/// file is checked.
fn check_before_accepting(out: &Path, dest: &Path, entry: &Entry, overwrite: bool) -> Result<()> {
    precheck::check(out, dest, Some(entry.size), overwrite)
}

/// Gives the file `f` the permission bits ([`MODE_MASK`]) and modification time of `e`,
/// then syncs it.
async fn set_attributes(f: std::fs::File, e: &Entry) -> Result<()> {
    let (mode, mtime) = (e.mode & MODE_MASK, e.mtime.to_system());
    tokio::task::spawn_blocking(move || {
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.set_modified(mtime)?;
        f.sync_all()
    })
    .await
    .context("setting the file's attributes")?
    .context("setting the mode and time, and syncing to disk")
}

/// Outcome of a received transfer.
pub struct Received {
    /// Where it was stored: the file, or the `--out` directory of several entries.
    pub path: PathBuf,
    /// Content bytes of all files.
    pub bytes: u64,
    /// Content bytes that crossed the connection (fewer than `bytes` when a partial copy
    /// kept from an earlier attempt was reused).
    pub received: u64,
    /// Files stored.
    pub files: u64,
    /// Directories created or kept.
    pub dirs: u64,
    /// BLAKE3 digest: of the file, or of the manifest ([`Manifest::digest`]).
    pub digest: [u8; DIGEST_LEN],
    /// Whether the sender confirmed that this is what it sent (false only for a raw
    /// stream on the UDT4 wire, whose completeness nothing proves).
    pub verified: bool,
}

/// Receives a transfer (the manifest, then each file) over `conn` into `out`; tells the
/// sender the verdict either way.
pub async fn recv_files(
    conn: &mut Connection,
    out: &Path,
    overwrite: bool,
    progress: &ProgressBar,
) -> Result<Received> {
    match receive(conn, out, overwrite, progress).await {
        Ok((r, agreed)) => {
            conn.write_all(&Reply::Ok(agreed).encode())
                .await
                .context("confirming to the sender")?;
            conn.shutdown().await.context("finishing the reply")?;
            Ok(r)
        }
        Err(e) => {
            // A sender waiting for the answer to its manifest or for the verdict reads the
            // reason in the reply; one still sending learns it from the abort.
            let reason = format!("{e:#}");
            let _ = conn.write_all(&Reply::Err(reason.clone()).encode()).await;
            let _ = conn.shutdown().await;
            super::abort_with(conn, &reason).await;
            Err(e)
        }
    }
}

/// Receives the transfer; returns it and the digest both sides compare at the end.
async fn receive(
    conn: &Connection,
    out: &Path,
    overwrite: bool,
    progress: &ProgressBar,
) -> Result<(Received, [u8; DIGEST_LEN])> {
    let mut incoming = Incoming::new(conn);
    let hello = incoming
        .frame("the manifest", 10 + MAX_MANIFEST as usize, Hello::decode)
        .await?;
    let manifest = &hello.manifest;
    let resume = hello.flags & FLAG_RESUME != 0;
    let dests = place(out, manifest, overwrite, resume)?;
    create_directories(out, manifest, &dests)?;
    let mut offers = Vec::with_capacity(manifest.files().count());
    let mut kept = Vec::with_capacity(offers.capacity());
    for (entry, dest) in manifest.entries.iter().zip(&dests) {
        if entry.kind != Kind::File {
            continue;
        }
        let (offer, k) = if !resume {
            (Vec::new(), Kept::Nothing)
        } else if resume::already_stored(dest, entry) {
            (resume::offer_stored(dest, entry).await?, Kept::Stored)
        } else {
            let offer = Partial::of(dest).offer(entry).await?;
            let n = offer.len();
            (offer, Kept::Partial(n))
        };
        offers.push(offer);
        kept.push(k);
    }
    conn.write_bytes(Plan::Go(offers).encode().into())
        .await
        .context("answering the manifest")?;
    progress.set_length(manifest.total_bytes());
    let mut digests = Vec::new();
    let mut received = 0;
    let files = manifest.entries.iter().zip(&dests);
    for ((entry, dest), kept) in files.filter(|(e, _)| e.kind == Kind::File).zip(kept) {
        progress.set_message(entry.path.clone());
        let (digest, n) = receive_file(&mut incoming, entry, dest, overwrite, kept, progress)
            .await
            .with_context(|| format!("receiving {}", entry.path))?;
        progress.println(crate::progress::file_done(&entry.path, entry.size));
        digests.push(digest);
        received += n;
    }
    incoming.end().await?;
    directory_attributes(manifest, &dests).await?;
    let (files, dirs) = manifest.counts();
    let agreed = manifest.digest(&digests);
    let single = manifest.is_single_file();
    Ok((
        Received {
            path: if single {
                dests[0].clone()
            } else {
                out.to_path_buf()
            },
            bytes: manifest.total_bytes(),
            received,
            files,
            dirs,
            digest: if single { digests[0] } else { agreed },
            verified: true,
        },
        agreed,
    ))
}

/// What the receiver already has of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kept {
    /// Nothing: the sender did not ask to resume.
    Nothing,
    /// A partial copy, of which this many blocks were offered.
    Partial(usize),
    /// The file itself, stored by an earlier transfer ([`resume::already_stored`]).
    Stored,
}

/// Where each entry of `manifest` goes under `out`, every file checked
/// ([`check_before_accepting`]) before anything is written — except, when resuming, a
/// file already stored there: a single file may be stored under the name `out` gives,
/// anything else needs `out` to be a directory.
fn place(out: &Path, manifest: &Manifest, overwrite: bool, resume: bool) -> Result<Vec<PathBuf>> {
    let check = |dest: &Path, e: &Entry| {
        if resume && resume::already_stored(dest, e) {
            return Ok(());
        }
        check_before_accepting(out, dest, e, overwrite)
    };
    if manifest.is_single_file() && !out.is_dir() {
        let dest = out.to_path_buf();
        check(&dest, &manifest.entries[0])?;
        return Ok(vec![dest]);
    }
    if !out.is_dir() {
        bail!(
            "{} is not a directory: several files or a directory need --out to name one",
            out.display()
        );
    }
    // Each file fits on its own (checked below); all of them together must fit too.
    precheck::room_for(out, manifest.total_bytes())?;
    let mut dests = Vec::with_capacity(manifest.entries.len());
    for e in &manifest.entries {
        let dest = inside(out, &e.path)?;
        match e.kind {
            Kind::File => check(&dest, e)?,
            Kind::Dir => match dest.symlink_metadata() {
                Ok(m) if !m.is_dir() => bail!(
                    "{} exists and is not a directory (nothing is written through links)",
                    dest.display()
                ),
                _ => {}
            },
        }
        dests.push(dest);
    }
    Ok(dests)
}

/// `out` joined with the relative path `rel` (already checked: no `..`, not absolute),
/// refused when a component on the way that exists is not a plain directory, such as a
/// symbolic link that would lead elsewhere.
fn inside(out: &Path, rel: &str) -> Result<PathBuf> {
    let mut at = out.to_path_buf();
    let mut parts = rel.split('/').peekable();
    while let Some(part) = parts.next() {
        at.push(part);
        if parts.peek().is_none() {
            break;
        }
        match at.symlink_metadata() {
            Ok(m) if m.is_dir() => {}
            Ok(_) => bail!(
                "{} is not a directory (a link or a file): nothing is written through it",
                at.display()
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Nothing deeper exists either: the receiver creates it all.
                for rest in parts {
                    at.push(rest);
                }
                break;
            }
            Err(e) => bail!("cannot read {}: {e}", at.display()),
        }
    }
    Ok(at)
}

/// Creates the directories of `manifest` and those its files go in, under `out`; a
/// component that appeared as anything but a plain directory meanwhile is refused.
fn create_directories(out: &Path, manifest: &Manifest, dests: &[PathBuf]) -> Result<()> {
    for (e, dest) in manifest.entries.iter().zip(dests) {
        let dir = match e.kind {
            Kind::Dir => dest.as_path(),
            Kind::File => match dest.parent() {
                Some(p) if p.starts_with(out) && p != out => p,
                _ => continue,
            },
        };
        let rel = dir.strip_prefix(out).unwrap_or(dir);
        let mut at = out.to_path_buf();
        for part in rel.components() {
            at.push(part);
            match std::fs::create_dir(&at) {
                Ok(()) => {}
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                    if !at.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                        bail!(
                            "{} is not a directory (a link or a file): nothing is written through it",
                            at.display()
                        );
                    }
                }
                Err(err) => bail!("cannot create the directory {}: {err}", at.display()),
            }
        }
    }
    Ok(())
}

/// Gives each directory of `manifest` its mode and mtime, deepest first, once every file
/// is in (storing a file changes its directory's mtime; a read-only mode would stop it).
async fn directory_attributes(manifest: &Manifest, dests: &[PathBuf]) -> Result<()> {
    for (e, dest) in manifest.entries.iter().zip(dests).rev() {
        if e.kind != Kind::Dir {
            continue;
        }
        let (dir, mode, mtime) = (dest.clone(), e.mode & MODE_MASK, e.mtime.to_system());
        tokio::task::spawn_blocking(move || {
            std::fs::File::open(&dir)?.set_modified(mtime)?;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode))
        })
        .await
        .context("setting a directory's attributes")?
        .with_context(|| format!("setting the mode and time of {}", dest.display()))?;
    }
    Ok(())
}

/// Receives one file's section into a temporary name next to `dest`, checks its digest,
/// and renames it into place; returns the digest and the content bytes received. A file
/// resumed goes to its partial copy, which is kept if the transfer breaks; one already
/// stored is only checked.
async fn receive_file(
    incoming: &mut Incoming<'_>,
    entry: &Entry,
    dest: &Path,
    overwrite: bool,
    kept: Kept,
    progress: &ProgressBar,
) -> Result<([u8; DIGEST_LEN], u64)> {
    let start = u64::from_be_bytes(incoming.array("the file's start").await?);
    let (mut tmp, file, hasher) = match kept {
        Kept::Stored => return check_stored(incoming, entry, dest, start, progress).await,
        Kept::Partial(offered) => {
            let partial = Partial::of(dest);
            let (file, hasher) = partial.open(entry, start, offered).await?;
            (TempFile::resumable(&partial), file, hasher)
        }
        Kept::Nothing if start != 0 => {
            bail!("the sender starts at byte {start}, but nothing was kept to resume from")
        }
        Kept::Nothing => {
            let tmp = TempFile::fresh(temp_path(dest));
            let file = tokio::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp.path)
                .await
                .with_context(|| format!("cannot create {}", tmp.path.display()))?;
            (tmp, file, blake3::Hasher::new())
        }
    };
    progress.inc(start);
    let mut writer =
        Some(WriteBehind::start(file.into_std().await, hasher).context("starting the writer")?);
    let copied = copy(
        incoming,
        &mut writer,
        entry.size - start,
        progress,
        &tmp.path,
    )
    .await;
    if let Err(e) = copied {
        // What arrived is kept for the next attempt (a no-op without resuming).
        let _ = finish_writer(&mut writer, &tmp.path).await;
        return Err(e);
    }
    let trailer: [u8; DIGEST_LEN] = incoming.array("the checksum").await?;
    let (file, digest) = finish_writer(&mut writer, &tmp.path).await?;
    if trailer != digest {
        tmp.discard();
        bail!("checksum mismatch: the content is corrupt; nothing was stored");
    }
    tmp.commit(file, dest, overwrite, Some(entry)).await?;
    Ok((digest, entry.size - start))
}

/// Checks that the file already stored at `dest` is the sender's: the sender found every
/// block equal (it starts at the end) and the whole digest matches. It is left as it is.
async fn check_stored(
    incoming: &mut Incoming<'_>,
    entry: &Entry,
    dest: &Path,
    start: u64,
    progress: &ProgressBar,
) -> Result<([u8; DIGEST_LEN], u64)> {
    let differs = || {
        anyhow::anyhow!(
            "{} already exists with other content than the sender's, though of the same size and time (remove it to receive the sender's)",
            dest.display()
        )
    };
    if start != entry.size {
        return Err(differs());
    }
    let trailer: [u8; DIGEST_LEN] = incoming.array("the checksum").await?;
    if resume::hash_stored(dest, entry.size).await? != trailer {
        return Err(differs());
    }
    progress.inc(entry.size);
    Ok((trailer, 0))
}

/// Copies the next `len` bytes of the stream to `writer` (writing `path`), counting them
/// on `progress`.
async fn copy(
    incoming: &mut Incoming<'_>,
    writer: &mut Option<WriteBehind>,
    len: u64,
    progress: &ProgressBar,
    path: &Path,
) -> Result<()> {
    let mut left = len;
    while left > 0 {
        let Some(piece) = incoming.piece(left.min(CHUNK as u64) as usize).await? else {
            bail!("the stream ended {left} bytes before the end of the file");
        };
        let n = piece.len() as u64;
        write_piece(writer, piece, path).await?;
        left -= n;
        progress.inc(n);
    }
    Ok(())
}

/// Creates the temporary file at `path` and a write-behind thread for it.
fn write_behind(path: &Path) -> Result<WriteBehind> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    WriteBehind::start(file, blake3::Hasher::new()).context("starting the writer")
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
    let dest = raw_destination(out);
    precheck::check(out, &dest, None, overwrite)?;
    let tmp = TempFile::fresh(temp_path(&dest));
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
    tmp.commit(file, &dest, overwrite, None).await?;
    Ok(Received {
        path: dest,
        bytes: got,
        received: got,
        files: 1,
        dirs: 0,
        digest,
        verified: native,
    })
}

/// File name a raw stream gets when `--out` is a directory (a raw stream carries no name).
pub const RAW_NAME: &str = "received.raw";
