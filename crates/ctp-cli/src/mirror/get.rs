//! `ctp get NAME --from A,B,C --out PATH [--hash B3SUM]`: one file from several `ctp serve`
//! mirrors at once, segment by segment, each segment checked against the file's BLAKE3
//! tree ([`super::tree`]) so that a mirror serving bad data is caught at the first bad
//! segment, named, and its segments fetched from the others.
//!
//! The entries every mirror sends give the file's BLAKE3 hash; the hash trusted is
//! `--hash` (what `b3sum` prints), or else the one most mirrors agree on (more than half of
//! those that answered: otherwise the command says they disagree and asks for `--hash`).
//! Each mirror has [`PIPELINE`] segments under way at a time and gets the next as one
//! arrives, so a faster mirror serves more; once none is left to hand out, an idle mirror
//! also asks for a segment under way elsewhere (the end game), so a mirror that died
//! silently or crawls holds nothing back. The file is written under a hidden temporary
//! name beside `--out` and appears under its name only whole and verified.

use super::tree::{self, SEGMENT};
use super::wire::{self, Info, Request, MAX_LINE, SERVICE};
use crate::addr::Target;
use crate::cli::GetArgs;
use crate::connect::{client_endpoint, open_connection, reliable_profile, security};
use crate::failure::Failure;
use crate::outln;
use crate::progress;
use crate::summary::{hex, human_bytes};
use crate::transfer::tempname::{move_into_place, temp_path};
use anyhow::anyhow;
use ctp::{Connection, StreamKind};
use std::collections::VecDeque;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinSet;

/// Segments requested from one mirror at a time.
const PIPELINE: usize = 4;

/// Where a mirror stands.
#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    Good,
    /// Unreachable or its connection ended: why.
    Failed(String),
    /// Served something that does not match the file: what.
    Bad(String),
}

struct Mirror {
    target: Target,
    conn: Option<Connection>,
    state: State,
    in_flight: usize,
    segments: u64,
}

/// Fetches `a.name` from the mirrors of `a.from` into `a.out`.
pub async fn get(a: GetArgs) -> Result<(), Failure> {
    let t = &a.transport;
    let profile = reliable_profile(t)?;
    let expected = a
        .hash
        .as_deref()
        .map(parse_hash)
        .transpose()
        .map_err(Failure::Usage)?;
    let out = destination(&a.out, &a.name, a.overwrite)?;
    let started = Instant::now();
    let mut mirrors = Vec::new();
    let mut asking = JoinSet::new();
    for (i, target) in a.from.iter().enumerate() {
        let mut p = profile.clone();
        let channel = security(a.security.for_peer(target), &mut p)?.channel();
        let ep = client_endpoint(target.resolved, None, t, &p, channel).await?;
        let (to, name) = (target.resolved, a.name.clone());
        asking.spawn(async move {
            let asked = async {
                let conn = open_connection(&ep, to, false, &p, &[])
                    .await
                    .map_err(|e| e.to_string())?;
                let answer = request(&conn, &Request::Info(name)).await?;
                let info = Info::parse(&answer)?;
                Ok::<_, String>((conn, info))
            }
            .await;
            (i, ep, asked)
        });
        mirrors.push(Mirror {
            target: target.clone(),
            conn: None,
            state: State::Failed("no answer".into()),
            in_flight: 0,
            segments: 0,
        });
    }
    let mut infos: Vec<Option<Info>> = vec![None; mirrors.len()];
    let mut endpoints = Vec::new();
    while let Some(joined) = asking.join_next().await {
        let (i, ep, asked) = joined.map_err(|e| anyhow!("a mirror task failed: {e}"))?;
        endpoints.push(ep);
        match asked {
            Ok((conn, info)) => {
                mirrors[i].conn = Some(conn);
                mirrors[i].state = State::Good;
                infos[i] = Some(info);
            }
            Err(why) => mirrors[i].state = State::Failed(why),
        }
    }
    let (trusted, info) = choose(&a.name, expected, &mut mirrors, &infos)?;
    for m in mirrors.iter().filter(|m| m.state != State::Good) {
        eprintln!("ctp: {}: {}", m.target.typed, state_text(&m.state));
    }
    let pb = progress::bar(info.size, "get", t.json);
    let result = fetch(&a.name, &info, &mut mirrors, &out, a.overwrite, &pb).await;
    pb.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    for ep in &endpoints {
        ep.close();
    }
    let outcome = Outcome {
        name: &a.name,
        out: &out,
        size: info.size,
        hash: trusted,
        secs,
        got: result.is_ok(),
    };
    report(&outcome, &mirrors, t.json);
    result.map_err(|e| Failure::Transfer(anyhow!("getting {} failed: {e}", a.name)))
}

/// The hash to trust and a matching mirror's entries; marks the mirrors that disagree.
fn choose(
    name: &str,
    expected: Option<[u8; 32]>,
    mirrors: &mut [Mirror],
    infos: &[Option<Info>],
) -> Result<([u8; 32], Info), Failure> {
    let roots: Vec<Option<[u8; 32]>> = infos
        .iter()
        .map(|i| i.as_ref().and_then(|i| tree::root(i.size, &i.entries)))
        .collect();
    let answered = roots.iter().flatten().count();
    let listing = |mirrors: &[Mirror]| {
        mirrors
            .iter()
            .zip(&roots)
            .map(|(m, r)| match r {
                Some(r) => format!("{} has BLAKE3 {}", m.target.typed, hex(r)),
                None => format!("{}: {}", m.target.typed, state_text(&m.state)),
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let trusted = match expected {
        Some(h) => h,
        None => {
            let mut best = None;
            let mut best_count = 0;
            for r in roots.iter().flatten() {
                let n = roots.iter().filter(|x| x.as_ref() == Some(r)).count();
                if n > best_count {
                    (best, best_count) = (Some(*r), n);
                }
            }
            match best {
                Some(r) if best_count * 2 > answered => r,
                Some(_) => {
                    return Err(Failure::Transfer(anyhow!(
                        "the mirrors disagree about {name} ({}): pass --hash with its BLAKE3 (b3sum) to say which is right",
                        listing(mirrors)
                    )))
                }
                None => {
                    return Err(Failure::Transfer(anyhow!(
                        "no mirror has {name}: {}",
                        listing(mirrors)
                    )))
                }
            }
        }
    };
    for (m, r) in mirrors.iter_mut().zip(&roots) {
        if let Some(r) = r.filter(|r| *r != trusted) {
            m.state = State::Bad(format!(
                "its {name} is another file (BLAKE3 {}, not {})",
                hex(&r),
                hex(&trusted)
            ));
        }
    }
    let good = roots.iter().position(|r| *r == Some(trusted));
    match good.and_then(|i| infos[i].clone()) {
        Some(info) => Ok((trusted, info)),
        None => Err(Failure::Transfer(anyhow!(
            "no mirror has {name} with BLAKE3 {}: {}",
            hex(&trusted),
            listing(mirrors)
        ))),
    }
}

/// Fetches every segment of the file `info` describes from the good mirrors into a
/// temporary file (a name of its own: two downloads to one place do not share it), then
/// puts it at `out` (replacing what is there only with `overwrite`).
async fn fetch(
    name: &str,
    info: &Info,
    mirrors: &mut [Mirror],
    out: &Path,
    overwrite: bool,
    pb: &indicatif::ProgressBar,
) -> Result<(), String> {
    let temp = temp_path(out);
    let file = std::fs::File::create(&temp)
        .and_then(|f| f.set_len(info.size).map(|()| f))
        .map_err(|e| format!("cannot write {}: {e}", temp.display()))?;
    let _remove = RemoveOnDrop(temp.clone());
    let file = Arc::new(file);
    let count = tree::segment_count(info.size);
    let mut queue: VecDeque<u64> = (0..count).collect();
    let mut have = vec![false; count as usize];
    let mut done = 0;
    let mut tasks = JoinSet::new();
    // Which mirrors each segment is under way at.
    let mut asked: Vec<Vec<usize>> = vec![Vec::new(); count as usize];
    while done < count {
        for (m, mirror) in mirrors.iter_mut().enumerate() {
            while mirror.state == State::Good && mirror.in_flight < PIPELINE {
                // The queue first; once it is empty, a segment under way at one other
                // mirror only (the end game: a mirror that died or crawls holds nothing
                // back).
                let next = queue.pop_front().or_else(|| {
                    (0..count).find(|&s| {
                        let at = &asked[s as usize];
                        !have[s as usize] && at.len() == 1 && at[0] != m
                    })
                });
                let Some(seg) = next else { break };
                let Some(conn) = mirror.conn.clone() else {
                    break;
                };
                mirror.in_flight += 1;
                asked[seg as usize].push(m);
                let req = Request::Get(name.to_string(), seg);
                tasks.spawn(async move { (m, seg, request(&conn, &req).await) });
            }
        }
        let Some(joined) = tasks.join_next().await else {
            let states: Vec<String> = mirrors
                .iter()
                .map(|m| format!("{}: {}", m.target.typed, state_text(&m.state)))
                .collect();
            return Err(format!(
                "no mirror is left for the {} segments missing ({})",
                count - done,
                states.join("; ")
            ));
        };
        let (m, seg, answer) = joined.map_err(|e| format!("a segment task failed: {e}"))?;
        let mirror = &mut mirrors[m];
        mirror.in_flight -= 1;
        asked[seg as usize].retain(|&x| x != m);
        let len = tree::segment_len(info.size, seg);
        let checked = answer.and_then(|a| {
            let (n, data) = wire::header(&a).map(|(n, d)| (n, d.to_vec()))?;
            let ok = n == len
                && data.len() as u64 == len
                && tree::segment_entry(info.size, seg, &data) == info.entries[seg as usize];
            Ok((ok, data))
        });
        match checked {
            Ok((true, data)) => {
                if !have[seg as usize] {
                    have[seg as usize] = true;
                    done += 1;
                    mirror.segments += 1;
                    let f = file.clone();
                    tokio::task::spawn_blocking(move || f.write_all_at(&data, seg * SEGMENT))
                        .await
                        .map_err(|e| e.to_string())?
                        .map_err(|e| format!("cannot write {}: {e}", temp.display()))?;
                    pb.inc(len);
                }
            }
            Ok((false, _)) | Err(_) => {
                let lost = match checked {
                    Err(why) => State::Failed(why),
                    Ok(_) => State::Bad(format!(
                        "served corrupted data (segment {seg}, bytes {}..{})",
                        seg * SEGMENT,
                        seg * SEGMENT + len
                    )),
                };
                if mirror.state == State::Good {
                    mirror.state = lost;
                    eprintln!(
                        "ctp: {}: {}; its segments come from the other mirrors",
                        mirror.target.typed,
                        state_text(&mirror.state)
                    );
                }
                if !have[seg as usize] && asked[seg as usize].is_empty() {
                    queue.push_front(seg);
                }
            }
        }
    }
    file.sync_all()
        .map_err(|e| format!("cannot write {}: {e}", temp.display()))?;
    place(&temp, out, overwrite)
}

/// Sends `req` on a stream of its own and reads the whole answer.
async fn request(conn: &Connection, req: &Request) -> Result<Vec<u8>, String> {
    let mut s = conn
        .open_stream_for(StreamKind::Bidirectional, 0, SERVICE)
        .map_err(|e| e.to_string())?;
    s.write_all(&req.encode())
        .await
        .map_err(|e| e.to_string())?;
    s.shutdown().await.map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    (&mut s)
        .take(SEGMENT + MAX_LINE as u64)
        .read_to_end(&mut answer)
        .await
        .map_err(|e| e.to_string())?;
    Ok(answer)
}

/// Where the file goes: `out`, or `out/NAME's last component` when `out` is a directory;
/// refused when something is there already (unless `overwrite`).
fn destination(out: &Path, name: &str, overwrite: bool) -> Result<PathBuf, Failure> {
    let path = if out.is_dir() {
        let base = Path::new(name)
            .file_name()
            .ok_or_else(|| Failure::Usage(format!("{name} names no file")))?;
        out.join(base)
    } else {
        out.to_path_buf()
    };
    if path.exists() && !overwrite {
        return Err(Failure::Usage(format!(
            "{} exists already (pass --overwrite to replace it)",
            path.display()
        )));
    }
    Ok(path)
}

/// Puts the finished temporary file at `out`, replacing what is there only with
/// `overwrite` (a file that appeared there during the download is kept).
fn place(temp: &Path, out: &Path, overwrite: bool) -> Result<(), String> {
    move_into_place(temp, out, overwrite).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => format!(
            "{} appeared during the download and was kept (pass --overwrite to replace it)",
            out.display()
        ),
        _ => format!("cannot move the file to {}: {e}", out.display()),
    })
}

/// Removes a temporary file unless it was moved into place.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn parse_hash(s: &str) -> Result<[u8; 32], String> {
    blake3::Hash::from_hex(s)
        .map(|h| *h.as_bytes())
        .map_err(|_| {
            format!("--hash {s}: not a BLAKE3 hash (64 hexadecimal digits, as b3sum prints)")
        })
}

fn state_text(s: &State) -> String {
    match s {
        State::Good => "good".into(),
        State::Failed(why) => format!("failed: {why}"),
        State::Bad(why) => format!("bad: {why}"),
    }
}

/// What a `get` came to, for its report.
struct Outcome<'a> {
    name: &'a str,
    out: &'a Path,
    size: u64,
    hash: [u8; 32],
    secs: f64,
    /// The file is in place.
    got: bool,
}

/// Prints what was fetched from where, and the mirrors that failed or were bad.
fn report(o: &Outcome<'_>, mirrors: &[Mirror], json: bool) {
    let Outcome {
        name,
        out,
        size,
        hash,
        secs,
        got,
    } = *o;
    let hash = &hash;
    if json && !got {
        return;
    }
    if json {
        let rows: Vec<_> = mirrors
            .iter()
            .map(|m| {
                serde_json::json!({
                    "mirror": m.target.resolved.to_string(),
                    "state": state_text(&m.state),
                    "segments": m.segments,
                })
            })
            .collect();
        outln!(
            "{}",
            serde_json::json!({
                "get": {
                    "name": name,
                    "path": out.display().to_string(),
                    "bytes": size,
                    "seconds": secs,
                    "blake3": hex(hash),
                    "mirrors": rows,
                }
            })
        );
        return;
    }
    for m in mirrors {
        outln!(
            "{}: {} ({} segments)",
            m.target.typed,
            state_text(&m.state),
            m.segments
        );
    }
    if !got {
        return;
    }
    outln!(
        "got {name} ({}) as {} in {secs:.2} s: {:.1} Mb/s\nblake3 {}",
        human_bytes(size),
        out.display(),
        size as f64 * 8.0 / secs.max(1e-6) / 1e6,
        hex(hash)
    );
}
