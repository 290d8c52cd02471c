//! `ctp bench --group`: the group connections measured on loopback, each receiver and each
//! mirror behind a `ctp relay` of its own (rate and one-way delay from `--group-rate` and
//! `--group-delay`), every process a child of the bench:
//!
//! 1. **send to 3**: `ctp send FILE --to R1,R2,R3 --mode all` against three `ctp send` in
//!    sequence and three in parallel, each to one receiver: the time, the goodput each
//!    receiver saw, and the sending processes' CPU time (per GB delivered, and the group's
//!    over one transfer's);
//! 2. **get from 3 vs 1**: `ctp get` from three `ctp serve` mirrors against one;
//! 3. **failover**: the three-mirror get again, one mirror's relay killed (SIGKILL) a third
//!    of the way through the undisturbed three-mirror time.
//!
//! Every received file is compared with the source (size and BLAKE3); a run that fails, or
//! whose file differs, is a failed row with the reason, never a figure. The senders' and
//! fetchers' CPU time comes from `getrusage(RUSAGE_CHILDREN)` across their reaping, as the
//! table's does ([`super::peers`]); the servers (relays, receivers, mirrors) are reaped
//! only once a part is over, so none of theirs is counted. Every child is killed on every
//! way out ([`Fleet`]) and the scratch directory removed ([`Scratch`]).

use super::peers::{
    cpu_children, free_port, last_line, same_file, write_pseudo_random, Output, Scratch,
};
use crate::cli::BenchArgs;
use crate::failure::Failure;
use crate::output::outln;
use crate::summary::human_bytes;
use anyhow::Context;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// Receivers of the send part, mirrors of the get parts.
const N: usize = 3;
/// The file's name: the source, in every mirror's root and every receiver's directory.
const FILE: &str = "bench.bin";
/// Time the servers are given to start listening.
const SETTLE: Duration = Duration::from_millis(300);
/// How often running clients are checked for their exit.
const POLL: Duration = Duration::from_millis(5);

/// Row names.
const GROUP_SEND: &str = "ctp send --to R1,R2,R3 (all)";
const SEQUENTIAL: &str = "3 × ctp send, in sequence";
const PARALLEL: &str = "3 × ctp send, in parallel";
const ONE_MIRROR: &str = "ctp get --from M1";
const THREE_MIRRORS: &str = "ctp get --from M1,M2,M3";
const FAILOVER: &str = "ctp get --from M1,M2,M3, M3 cut";

/// What `--group` runs with.
pub struct Settings {
    /// Bytes of the file.
    pub bytes: u64,
    /// Each relay's rate, as `ctp relay --rate` takes it.
    pub rate: String,
    /// The rate in bits per second.
    pub rate_bps: u64,
    /// Each relay's one-way delay, as `ctp relay --delay` takes it.
    pub delay: String,
    /// Cap of every `ctp send` and `ctp get` the bench runs.
    pub timeout: Duration,
    /// Print JSON instead of the table.
    pub json: bool,
}

impl Settings {
    /// The settings of `a` (`bytes` already parsed); a usage error for a flag that does not
    /// apply to `--group`, or a rate or delay that does not parse.
    pub fn from_args(a: &BenchArgs, bytes: u64) -> Result<Settings, Failure> {
        if a.flood {
            return Err(Failure::Usage(
                "--group and --flood are separate benches: run `ctp bench --group`, then \
                 `ctp bench --flood`"
                    .into(),
            ));
        }
        let table_only = [
            (a.paths != BenchArgs::PATHS, "--paths"),
            (a.peers.is_some(), "--peers"),
            (a.profiles != BenchArgs::PROFILES, "--profiles"),
            (a.cc != BenchArgs::CC, "--cc"),
            (a.baseline.is_some(), "--baseline"),
            (a.insecure_twins, "--insecure-twins"),
            (a.ctp_files, "--ctp-files"),
            (a.repeat != 1, "--repeat"),
            (a.svg.is_some(), "--svg"),
        ];
        if let Some((_, flag)) = table_only.iter().find(|(given, _)| *given) {
            return Err(Failure::Usage(format!(
                "{flag} applies to the path table, not to --group (ctp send and ctp get on \
                 loopback, behind relays set by --group-rate and --group-delay): drop {flag}, \
                 or run `ctp bench` without --group for it"
            )));
        }
        let rate_bps = crate::units::rate_bps(&a.group_rate)
            .map_err(|e| Failure::Usage(format!("--group-rate: {e}")))?;
        crate::units::duration_us(&a.group_delay)
            .map_err(|e| Failure::Usage(format!("--group-delay: {e}")))?;
        Ok(Settings {
            bytes,
            rate: a.group_rate.clone(),
            rate_bps,
            delay: a.group_delay.clone(),
            timeout: Duration::from_secs(a.timeout.max(1)),
            json: a.json,
        })
    }
}

/// One row: a way of moving the file, measured once.
#[derive(Clone, Debug, Serialize)]
pub struct GroupRow {
    /// What ran, e.g. `ctp send --to R1,R2,R3 (all)`.
    pub name: String,
    /// `ok`, or `failed: …` with the reason (the figures are then absent).
    pub status: String,
    /// Wall time from the first process's start to the last one's exit, seconds.
    pub seconds: Option<f64>,
    /// Goodput each receiver saw, Mb/s: the file's bits over the time of the process that
    /// delivered it, averaged over the receivers.
    pub goodput_mbps: Option<f64>,
    /// CPU seconds (user and system) of the sending or fetching processes.
    pub cpu_s: Option<f64>,
    /// Those CPU seconds per GB delivered (the file's bytes times the receivers that got
    /// it).
    pub cpu_s_per_gb: Option<f64>,
    /// Every file received was compared with the source (size and BLAKE3) and was the same.
    pub verified: bool,
}

impl GroupRow {
    fn failed(name: &str, why: impl std::fmt::Display) -> GroupRow {
        GroupRow {
            name: name.to_string(),
            status: format!("failed: {why}"),
            seconds: None,
            goodput_mbps: None,
            cpu_s: None,
            cpu_s_per_gb: None,
            verified: false,
        }
    }

    /// A verified run that delivered `bytes` to each of `copies` receivers.
    fn measured(name: &str, t: &Timing, bytes: u64, copies: usize) -> GroupRow {
        let bits = bytes as f64 * 8.0;
        let each: Vec<f64> = t.each.iter().map(|s| bits / s.max(1e-6) / 1e6).collect();
        GroupRow {
            name: name.to_string(),
            status: "ok".into(),
            seconds: Some(t.seconds),
            goodput_mbps: Some(each.iter().sum::<f64>() / each.len().max(1) as f64),
            cpu_s: Some(t.cpu_s),
            cpu_s_per_gb: Some(t.cpu_s / (bytes as f64 * copies as f64 / 1e9)),
            verified: true,
        }
    }
}

/// `a / b`, when both are known and `b` is positive.
fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// Part 1: one sender, three receivers.
#[derive(Debug, Serialize)]
pub struct SendPart {
    /// The group send, three sends in sequence, three in parallel.
    pub rows: Vec<GroupRow>,
    /// The sequence's time over the group's (above 1: the group is faster).
    pub speedup_over_sequential: Option<f64>,
    /// The parallel sends' time over the group's (above 1: the group is faster; the goal).
    pub speedup_over_parallel: Option<f64>,
    /// The group sender's CPU over one transfer's (a third of the sequence's: each of its
    /// sends is the file to one receiver, alone): what sending the file to three costs
    /// against sending it to one. The goal is at most 1.5.
    pub cpu_over_one_transfer: Option<f64>,
    /// The group sender's CPU per GB delivered over one transfer's (a third of the above).
    pub cpu_per_gb_over_one_transfer: Option<f64>,
}

impl SendPart {
    fn new(rows: Vec<GroupRow>) -> SendPart {
        let [group, sequence, parallel] = [0, 1, 2].map(|i| &rows[i]);
        SendPart {
            speedup_over_sequential: ratio(sequence.seconds, group.seconds),
            speedup_over_parallel: ratio(parallel.seconds, group.seconds),
            cpu_over_one_transfer: ratio(group.cpu_s, sequence.cpu_s.map(|c| c / 3.0)),
            cpu_per_gb_over_one_transfer: ratio(group.cpu_s_per_gb, sequence.cpu_s_per_gb),
            rows,
        }
    }
}

/// Part 2: one file from three mirrors against one.
#[derive(Debug, Serialize)]
pub struct GetPart {
    /// The get from one mirror, then from three.
    pub rows: Vec<GroupRow>,
    /// The one-mirror time over the three-mirror time (the goal is at least 2.7).
    pub speedup: Option<f64>,
}

/// Part 3: the three-mirror get with one mirror's relay killed on the way.
#[derive(Debug, Serialize)]
pub struct FailoverPart {
    /// The get.
    pub rows: Vec<GroupRow>,
    /// When the third mirror's relay was killed, seconds after the get started.
    pub cut_after_s: f64,
    /// The get's time over the undisturbed three-mirror time of part 2.
    pub time_over_undisturbed: Option<f64>,
}

/// Everything `--group` measured.
#[derive(Debug, Serialize)]
pub struct GroupReport {
    /// Bytes of the file.
    pub bytes: u64,
    /// Each relay's rate, each direction.
    pub rate: String,
    /// Each relay's one-way delay.
    pub delay: String,
    /// Cap of each `ctp send` and `ctp get`, seconds.
    pub timeout_s: u64,
    /// Part 1.
    pub send: SendPart,
    /// Part 2.
    pub get: GetPart,
    /// Part 3.
    pub failover: FailoverPart,
}

/// Child processes of the bench, each with its output read as it comes: killed when
/// dropped, so none outlives the bench on any way out (an error, a panic, Ctrl-C).
#[derive(Default)]
struct Fleet {
    members: Vec<Member>,
}

struct Member {
    what: String,
    child: Child,
    output: Option<Output>,
}

impl Fleet {
    /// Starts `cmd` (`what` names it in errors); its index.
    fn start(&mut self, what: String, mut cmd: Command) -> anyhow::Result<usize> {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {what}"))?;
        let output = Some(Output::capture(&mut child));
        self.members.push(Member {
            what,
            child,
            output,
        });
        Ok(self.members.len() - 1)
    }

    /// Gives the servers time to start listening; fails naming one that exited.
    async fn settle(&mut self) -> anyhow::Result<()> {
        tokio::time::sleep(SETTLE).await;
        for i in 0..self.members.len() {
            if let Some(status) = self.exited(i) {
                anyhow::bail!("{}", self.why(i, status).await);
            }
        }
        Ok(())
    }

    /// Member `i`'s exit status if it has exited (it is reaped then).
    fn exited(&mut self, i: usize) -> Option<ExitStatus> {
        self.members[i].child.try_wait().ok().flatten()
    }

    /// Why member `i` ended with `status`: its last line on stderr.
    async fn why(&mut self, i: usize, status: ExitStatus) -> String {
        let m = &mut self.members[i];
        let err = match m.output.take() {
            Some(o) => o.collect().await.1,
            None => String::new(),
        };
        format!("{} exited ({status}): {}", m.what, last_line(&err))
    }

    /// Kills member `i` with SIGKILL; it is reaped by [`Self::stop`], so its CPU time never
    /// enters a run's.
    fn kill(&mut self, i: usize) {
        let _ = self.members[i].child.start_kill();
    }

    /// Kills and reaps every member.
    async fn stop(mut self) {
        for m in &mut self.members {
            let _ = m.child.start_kill();
            let _ = m.child.wait().await;
        }
        self.members.clear();
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        // (Reaped later by the runtime; `stop` reaps them at once.)
        for m in &mut self.members {
            let _ = m.child.start_kill();
        }
    }
}

/// A fleet member to kill with SIGKILL once `at` has passed since the clients started.
struct Cut<'a> {
    at: Duration,
    fleet: &'a mut Fleet,
    member: usize,
}

/// What a run of clients measured.
struct Timing {
    /// From the first client's start to the last one's exit.
    seconds: f64,
    /// Each client's time, its start to its exit.
    each: Vec<f64>,
    /// The clients' CPU seconds (user and system).
    cpu_s: f64,
}

/// The bench's files and how it starts `ctp`.
struct Bench {
    exe: PathBuf,
    dir: Scratch,
    source: PathBuf,
    hash: blake3::Hash,
    s: Settings,
}

/// `127.0.0.1:PORT` with a port free a moment ago.
fn local_addr() -> String {
    format!("127.0.0.1:{}", free_port())
}

/// Removes everything in `dir`.
fn clear(dir: &Path) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        let _ = std::fs::remove_file(&p).or_else(|_| std::fs::remove_dir_all(&p));
    }
}

impl Bench {
    /// `ctp ARGS` with the bench's own identity and known peers, not the user's.
    fn ctp<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Command {
        let mut c = Command::new(&self.exe);
        c.args(args)
            .env("CTP_CONFIG_DIR", self.dir.path().join("keys"));
        c
    }

    /// Starts a relay in front of `to`; its address.
    fn relay(&self, fleet: &mut Fleet, what: String, to: &str) -> anyhow::Result<String> {
        let listen = local_addr();
        let (rate, delay) = (&self.s.rate, &self.s.delay);
        let args = [
            "relay", "--listen", &listen, "--to", to, "--rate", rate, "--delay", delay,
        ];
        fleet.start(what, self.ctp(&args))?;
        Ok(listen)
    }

    /// Runs the clients of `batches`: those of a batch start together, a batch once the
    /// previous one has exited; each is capped at the timeout. `cut` is carried out on the
    /// way (and left in place if the clients ended first). Fails with the first client that
    /// fails.
    async fn clients(
        &self,
        batches: Vec<Vec<Command>>,
        cut: &mut Option<Cut<'_>>,
    ) -> Result<Timing, String> {
        let c0 = cpu_children();
        let t0 = Instant::now();
        let mut each = Vec::new();
        for batch in batches {
            let mut running = Fleet::default();
            let r = self.batch(&mut running, batch, t0, cut, &mut each).await;
            // Every client reaped before the CPU time is read, also after a failure.
            running.stop().await;
            r?;
        }
        Ok(Timing {
            seconds: t0.elapsed().as_secs_f64(),
            each,
            cpu_s: cpu_children() - c0,
        })
    }

    async fn batch(
        &self,
        running: &mut Fleet,
        batch: Vec<Command>,
        t0: Instant,
        cut: &mut Option<Cut<'_>>,
        each: &mut Vec<f64>,
    ) -> Result<(), String> {
        let start = Instant::now();
        for cmd in batch {
            let what = format!(
                "`ctp {}`",
                cmd.as_std()
                    .get_args()
                    .map(|a| a.to_string_lossy())
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            running.start(what, cmd).map_err(|e| format!("{e:#}"))?;
        }
        let deadline = start + self.s.timeout;
        let mut left: Vec<usize> = (0..running.members.len()).collect();
        loop {
            if cut.as_ref().is_some_and(|c| t0.elapsed() >= c.at) {
                if let Some(c) = cut.take() {
                    c.fleet.kill(c.member);
                }
            }
            let mut still = Vec::new();
            for i in left {
                match running.exited(i) {
                    None => still.push(i),
                    Some(st) if st.success() => each.push(start.elapsed().as_secs_f64()),
                    Some(st) => return Err(running.why(i, st).await),
                }
            }
            left = still;
            if left.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "still running at the time cap of {} s (--timeout)",
                    self.s.timeout.as_secs()
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Compares each of `files` with the source, then removes it.
    async fn verify(&self, files: Vec<PathBuf>) -> Result<(), String> {
        let (bytes, hash) = (self.s.bytes, self.hash);
        let checked = tokio::task::spawn_blocking(move || {
            let r = files
                .iter()
                .try_for_each(|f| same_file(f, bytes, hash).map_err(|e| format!("{e:#}")));
            for f in &files {
                let _ = std::fs::remove_file(f);
            }
            r
        });
        checked
            .await
            .map_err(|e| format!("comparing the received files: {e}"))?
    }

    /// Runs `batches`, then checks `files` (what they should have delivered: `copies` times
    /// the file).
    async fn row(
        &self,
        name: &str,
        batches: Vec<Vec<Command>>,
        files: Vec<PathBuf>,
        cut: &mut Option<Cut<'_>>,
    ) -> GroupRow {
        if !self.s.json {
            eprintln!("ctp bench --group: {name} …");
        }
        let copies = files.len();
        let t = match self.clients(batches, cut).await {
            Ok(t) => t,
            Err(why) => return GroupRow::failed(name, why),
        };
        match self.verify(files).await {
            Ok(()) => GroupRow::measured(name, &t, self.s.bytes, copies),
            Err(why) => GroupRow::failed(name, why),
        }
    }

    /// Part 1, with its receivers and their relays in `fleet`.
    async fn send_rows(&self, fleet: &mut Fleet) -> Vec<GroupRow> {
        let names = [GROUP_SEND, SEQUENTIAL, PARALLEL];
        let (relays, dirs) = match self.receivers(fleet).await {
            Ok(r) => r,
            Err(e) => {
                let why = format!("starting the receivers: {e:#}");
                return names.map(|n| GroupRow::failed(n, &why)).to_vec();
            }
        };
        let send = |to: &String| {
            let mut c = self.ctp(&["send"]);
            c.arg(&self.source).args([to, "--json"]);
            c
        };
        let group = {
            let mut c = self.ctp(&["send"]);
            c.arg(&self.source)
                .args(["--to", &relays.join(","), "--mode", "all", "--json"]);
            c
        };
        let plans = [
            (GROUP_SEND, vec![vec![group]]),
            (SEQUENTIAL, relays.iter().map(|r| vec![send(r)]).collect()),
            (PARALLEL, vec![relays.iter().map(send).collect()]),
        ];
        let mut rows = Vec::new();
        for (name, batches) in plans {
            dirs.iter().for_each(|d| clear(d));
            let files = dirs.iter().map(|d| d.join(FILE)).collect();
            rows.push(self.row(name, batches, files, &mut None).await);
        }
        rows
    }

    /// Starts the receivers, each behind its relay; the relays' addresses and the
    /// receivers' directories.
    async fn receivers(&self, fleet: &mut Fleet) -> anyhow::Result<(Vec<String>, Vec<PathBuf>)> {
        let (mut relays, mut dirs) = (Vec::new(), Vec::new());
        for i in 1..=N {
            let dir = self.dir.path().join(format!("rx{i}"));
            std::fs::create_dir_all(&dir).context("creating a receiver's directory")?;
            let listen = local_addr();
            let mut recv = self.ctp(&["recv", "--listen", &listen, "--json", "--out"]);
            recv.arg(&dir);
            fleet.start(format!("receiver R{i}"), recv)?;
            relays.push(self.relay(fleet, format!("R{i}'s relay"), &listen)?);
            dirs.push(dir);
        }
        fleet.settle().await?;
        Ok((relays, dirs))
    }

    /// Starts the mirrors, each behind its relay: the relays' addresses and fleet indices,
    /// and the mirrors' own addresses.
    async fn mirrors(
        &self,
        fleet: &mut Fleet,
    ) -> anyhow::Result<(Vec<String>, Vec<usize>, Vec<String>)> {
        let (mut relays, mut indices, mut direct) = (Vec::new(), Vec::new(), Vec::new());
        for i in 1..=N {
            let root = self.dir.path().join(format!("m{i}"));
            std::fs::create_dir_all(&root).context("creating a mirror's root")?;
            // The same file under every root (a copy where hard links are not allowed).
            std::fs::hard_link(&self.source, root.join(FILE))
                .or_else(|_| std::fs::copy(&self.source, root.join(FILE)).map(drop))
                .context("putting the file under a mirror's root")?;
            let listen = local_addr();
            let mut serve = self.ctp(&["serve", "--listen", &listen, "--root"]);
            serve.arg(&root);
            fleet.start(format!("mirror M{i}"), serve)?;
            relays.push(self.relay(fleet, format!("M{i}'s relay"), &listen)?);
            indices.push(fleet.members.len() - 1);
            direct.push(listen);
        }
        fleet.settle().await?;
        Ok((relays, indices, direct))
    }

    /// `ctp get` of the file from `from` into the bench's `got` file.
    fn get(&self, from: &[String]) -> (Command, PathBuf) {
        let out = self.dir.path().join("got.bin");
        let _ = std::fs::remove_file(&out);
        let mut c = self.ctp(&["get", FILE, "--from", &from.join(","), "--json", "--out"]);
        c.arg(&out);
        (c, out)
    }

    /// Parts 2 and 3, with the mirrors and their relays in `fleet`.
    async fn get_rows(&self, fleet: &mut Fleet) -> (Vec<GroupRow>, GroupRow, f64) {
        // Before the undisturbed time is known: a third of the three mirrors' share at the
        // rate.
        let planned = self.s.bytes as f64 * 8.0 / self.s.rate_bps as f64 / N as f64 / 3.0;
        let fail_all = |why: String| {
            (
                vec![
                    GroupRow::failed(ONE_MIRROR, &why),
                    GroupRow::failed(THREE_MIRRORS, &why),
                ],
                GroupRow::failed(FAILOVER, &why),
                planned,
            )
        };
        let (relays, indices, direct) = match self.mirrors(fleet).await {
            Ok(m) => m,
            Err(e) => return fail_all(format!("starting the mirrors: {e:#}")),
        };
        // Each mirror reads the file for its segment entries on the first request: done
        // now, directly (no relay), so that no measured get waits for it.
        let (warm, out) = self.get(&direct);
        if let Err(why) = self.clients(vec![vec![warm]], &mut None).await {
            return fail_all(format!("warming the mirrors up: {why}"));
        }
        let _ = std::fs::remove_file(out);

        let mut rows = Vec::new();
        for (name, from) in [(ONE_MIRROR, &relays[..1]), (THREE_MIRRORS, &relays[..])] {
            let (c, out) = self.get(from);
            rows.push(self.row(name, vec![vec![c]], vec![out], &mut None).await);
        }
        let cut_after = rows[1].seconds.map_or(planned, |s| s / 3.0);
        let mut cut = Some(Cut {
            at: Duration::from_secs_f64(cut_after),
            fleet,
            member: indices[N - 1],
        });
        let (c, out) = self.get(&relays);
        let mut failover = self.row(FAILOVER, vec![vec![c]], vec![out], &mut cut).await;
        if cut.is_some() && failover.status == "ok" {
            failover = GroupRow::failed(
                FAILOVER,
                format!("the get ended before M3's relay was to be killed at {cut_after:.2} s"),
            );
        }
        (rows, failover, cut_after)
    }
}

/// Runs `ctp bench --group`.
pub async fn run(s: Settings) -> Result<(), Failure> {
    let dir = Scratch::create("ctp-bench-group").context("creating the bench directory")?;
    let source = dir.path().join(FILE);
    let hash = write_pseudo_random(&source, s.bytes).context("writing the bench file")?;
    let bench = Bench {
        exe: std::env::current_exe().context("locating the ctp binary")?,
        dir,
        source,
        hash,
        s,
    };
    if !bench.s.json {
        outln!(
            "file: {}   each receiver and mirror behind its own relay: {}, {} one way   \
             time cap per ctp send/get: {} s",
            human_bytes(bench.s.bytes),
            bench.s.rate,
            bench.s.delay,
            bench.s.timeout.as_secs()
        );
    }

    let mut fleet = Fleet::default();
    let send = SendPart::new(bench.send_rows(&mut fleet).await);
    fleet.stop().await;
    if !bench.s.json {
        print_send(&send);
    }

    let mut fleet = Fleet::default();
    let (rows, failover, cut_after_s) = bench.get_rows(&mut fleet).await;
    fleet.stop().await;
    let get = GetPart {
        speedup: ratio(rows[0].seconds, rows[1].seconds),
        rows,
    };
    let failover = FailoverPart {
        time_over_undisturbed: ratio(failover.seconds, get.rows[1].seconds),
        rows: vec![failover],
        cut_after_s,
    };
    if !bench.s.json {
        print_get(&get, &failover);
        return Ok(());
    }
    let report = GroupReport {
        bytes: bench.s.bytes,
        rate: bench.s.rate.clone(),
        delay: bench.s.delay.clone(),
        timeout_s: bench.s.timeout.as_secs(),
        send,
        get,
        failover,
    };
    outln!(
        "{}",
        serde_json::to_string_pretty(&report).expect("serialisable")
    );
    Ok(())
}

/// A ratio for the table's notes.
fn times(v: Option<f64>) -> String {
    v.map_or("—".into(), |x| format!("{x:.2}×"))
}

fn print_rows(title: &str, rows: &[GroupRow]) {
    let cell = super::cell;
    outln!("");
    outln!("== {title}");
    outln!(
        "{:<34} {:>9} {:>15} {:>9} {:>11}  status",
        "contender",
        "time",
        "goodput/rcv",
        "CPU",
        "CPU/GB"
    );
    for r in rows {
        outln!(
            "{:<34} {:>9} {:>15} {:>9} {:>11}  {}",
            r.name,
            cell(r.seconds, " s"),
            cell(r.goodput_mbps, " Mb/s"),
            cell(r.cpu_s, " s"),
            cell(r.cpu_s_per_gb, " s/GB"),
            r.status
        );
    }
}

fn print_send(p: &SendPart) {
    print_rows("send to 3 receivers (CPU: the sending processes')", &p.rows);
    outln!(
        "group: {} faster than in sequence, {} than in parallel (goal: above 1); the sender's \
         CPU {} one transfer's (goal: at most 1.5×; per GB delivered {})",
        times(p.speedup_over_sequential),
        times(p.speedup_over_parallel),
        times(p.cpu_over_one_transfer),
        times(p.cpu_per_gb_over_one_transfer)
    );
}

fn print_get(g: &GetPart, f: &FailoverPart) {
    print_rows("get from 3 mirrors vs 1 (CPU: ctp get's)", &g.rows);
    outln!(
        "three mirrors: {} faster than one (goal: at least 2.7×)",
        times(g.speedup)
    );
    print_rows(
        &format!(
            "failover: M3's relay killed {:.2} s into the 3-mirror get",
            f.cut_after_s
        ),
        &f.rows,
    );
    outln!(
        "{} the undisturbed 3-mirror time{}",
        times(f.time_over_undisturbed),
        if f.rows[0].verified {
            "; the file arrived byte-exact"
        } else {
            ""
        }
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(seconds: f64, each: Vec<f64>, cpu_s: f64) -> Timing {
        Timing {
            seconds,
            each,
            cpu_s,
        }
    }

    #[test]
    fn rows_count_every_copy_delivered_and_ratios_need_both_figures() {
        let mib = 1 << 20;
        // One process delivering to three receivers in 2 s with 0.6 CPU seconds.
        let g = GroupRow::measured(GROUP_SEND, &timing(2.0, vec![2.0], 0.6), 100 * mib, 3);
        assert!((g.goodput_mbps.unwrap() - 100.0 * mib as f64 * 8.0 / 2.0 / 1e6).abs() < 1e-9);
        let gb = 3.0 * 100.0 * mib as f64 / 1e9;
        assert!((g.cpu_s_per_gb.unwrap() - 0.6 / gb).abs() < 1e-9);
        // Three processes of 1, 2 and 4 s: each receiver's goodput, averaged.
        let s = GroupRow::measured(SEQUENTIAL, &timing(7.0, vec![1.0, 2.0, 4.0], 0.9), 8, 3);
        let want = (64.0 + 32.0 + 16.0) / 3.0 / 1e6;
        assert!((s.goodput_mbps.unwrap() - want).abs() < 1e-12);
        let p = GroupRow::failed(PARALLEL, "x");
        assert_eq!(p.status, "failed: x");
        assert!(!p.verified && p.seconds.is_none());
        let part = SendPart::new(vec![g, s, p]);
        assert_eq!(part.speedup_over_sequential, Some(3.5));
        assert_eq!(part.speedup_over_parallel, None);
        // The group's 0.6 s against one of the sequence's three transfers (0.3 s): 2×.
        assert!((part.cpu_over_one_transfer.unwrap() - 2.0).abs() < 1e-9);
        assert!(part.cpu_per_gb_over_one_transfer.is_some());
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
    }
}
