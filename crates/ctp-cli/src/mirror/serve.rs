//! `ctp serve --root DIR --listen ADDR`: answers `ctp get` — a file's segment entries and
//! its segments — for the files under DIR, nothing outside it.

use super::tree::{self, SEGMENT};
use super::wire::{self, Info, Request, MAX_LINE, SERVICE};
use crate::cli::ServeArgs;
use crate::connect::{
    announce_listening, endpoint_options, key_note, reliable_profile, security, with_channel,
};
use crate::failure::Failure;
use anyhow::Context;
use ctp::{Connection, Endpoint, Stream};
use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Segment entries computed, by file, size and modification time.
type Entries = Arc<Mutex<HashMap<(PathBuf, u64, SystemTime), Arc<Vec<[u8; 32]>>>>>;

/// Serves the files under `a.root` until interrupted.
pub async fn serve(a: ServeArgs) -> Result<(), Failure> {
    let root = std::fs::canonicalize(&a.root)
        .ok()
        .filter(|r| r.is_dir())
        .ok_or_else(|| Failure::Usage(format!("--root {}: not a directory", a.root.display())))?;
    let t = &a.transport;
    let mut profile = reliable_profile(t)?;
    let sec = security(a.security.for_listener(), &mut profile)?;
    let note = key_note(&sec);
    let opts = endpoint_options(t, &profile, true)?;
    let ep = Endpoint::bind(a.listen, with_channel(opts, sec.channel()))
        .await
        .with_context(|| format!("cannot listen on {}", a.listen))?;
    announce_listening(&ep, &format!("serving {} ", root.display()), t, &note);
    let entries: Entries = Arc::default();
    let root = Arc::new(root);
    while let Some(conn) = ep.accept().await {
        tokio::spawn(serve_connection(conn, root.clone(), entries.clone()));
    }
    Ok(())
}

async fn serve_connection(conn: Connection, root: Arc<PathBuf>, entries: Entries) {
    while let Ok(stream) = conn.accept_stream().await {
        if stream.service() != Some(SERVICE) {
            let _ = stream.reset(1);
            continue;
        }
        tokio::spawn(answer(stream, root.clone(), entries.clone()));
    }
}

/// Reads one request from `s` and answers it.
async fn answer(mut s: Stream, root: Arc<PathBuf>, entries: Entries) {
    let mut line = Vec::new();
    let read = (&mut s)
        .take(MAX_LINE as u64 + 1)
        .read_to_end(&mut line)
        .await;
    let reply = match read {
        Err(_) => return,
        Ok(_) if line.len() > MAX_LINE || line.last() != Some(&b'\n') => {
            wire::refusal("a request is one line of at most 4096 bytes")
        }
        Ok(_) => match Request::parse(&line[..line.len() - 1]) {
            Err(e) => wire::refusal(&e),
            Ok(req) => {
                let (root, entries) = (root.clone(), entries.clone());
                tokio::task::spawn_blocking(move || reply(&root, &entries, req))
                    .await
                    .unwrap_or_else(|_| wire::refusal("the server failed"))
            }
        },
    };
    if s.write_all(&reply).await.is_ok() {
        let _ = s.shutdown().await;
    }
}

/// The answer to `req` (blocking: reads the file).
fn reply(root: &Path, entries: &Entries, req: Request) -> Vec<u8> {
    let result = match req {
        Request::Info(name) => open(root, &name).and_then(|(f, path, size, mtime)| {
            let e = entries_of(entries, &f, path, size, mtime)?;
            Ok(Info {
                size,
                entries: e.to_vec(),
            }
            .encode())
        }),
        Request::Get(name, i) => open(root, &name).and_then(|(f, _, size, _)| {
            if i >= tree::segment_count(size) {
                return Err(format!("{name} has no segment {i}"));
            }
            let mut out = Vec::new();
            let len = tree::segment_len(size, i);
            out.extend_from_slice(format!("OK {len}\n").as_bytes());
            let at = out.len();
            out.resize(at + len as usize, 0);
            f.read_exact_at(&mut out[at..], i * SEGMENT)
                .map_err(|e| format!("reading {name}: {e}"))?;
            Ok(out)
        }),
    };
    result.unwrap_or_else(|e| wire::refusal(&e))
}

/// The file `name` names under `root`: never outside it (no absolute names, no `..`, no
/// link out of it).
fn open(root: &Path, name: &str) -> Result<(std::fs::File, PathBuf, u64, SystemTime), String> {
    let missing = || format!("no such file: {name}");
    let rel = Path::new(name);
    if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(missing());
    }
    let path = std::fs::canonicalize(root.join(rel)).map_err(|_| missing())?;
    if !path.starts_with(root) {
        return Err(missing());
    }
    let f = std::fs::File::open(&path).map_err(|_| missing())?;
    let m = f.metadata().map_err(|_| missing())?;
    if !m.is_file() {
        return Err(missing());
    }
    let mtime = m.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    Ok((f, path, m.len(), mtime))
}

/// The segment entries of `f`, computed once per (file, size, modification time).
fn entries_of(
    cache: &Entries,
    f: &std::fs::File,
    path: PathBuf,
    size: u64,
    mtime: SystemTime,
) -> Result<Arc<Vec<[u8; 32]>>, String> {
    let key = (path, size, mtime);
    if let Some(e) = cache.lock().map_err(|_| "poisoned")?.get(&key) {
        return Ok(e.clone());
    }
    let mut buf = vec![0; SEGMENT as usize];
    let mut out = Vec::new();
    for i in 0..tree::segment_count(size) {
        let len = tree::segment_len(size, i) as usize;
        f.read_exact_at(&mut buf[..len], i * SEGMENT)
            .map_err(|e| format!("reading: {e}"))?;
        out.push(tree::segment_entry(size, i, &buf[..len]));
    }
    let out = Arc::new(out);
    cache
        .lock()
        .map_err(|_| "poisoned")?
        .insert(key, out.clone());
    Ok(out)
}
