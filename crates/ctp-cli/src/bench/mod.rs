//! `ctp bench`: ctp side by side with the transports users would pick instead, on the same
//! paths in one run: goodput, CPU seconds per GB on each side, and ctp's ratio to each peer.
//!
//! Every contender runs as a pair of child processes (receiver, then sender) and is timed by
//! its own report (SRT's and the file-transfer peers' by the bench); CPU time comes from
//! `getrusage(RUSAGE_CHILDREN)` sampled as each child is reaped, so sender and receiver are
//! measured separately. With `--ctp-files` the file-transfer peers (scp and rsync over the
//! bench's own sshd, [`ssh`]; UDT4's file API) join the default set. A peer
//! whose program is not installed is reported as missing, never skipped silently. Every run
//! is capped by `--timeout`; a capped run reports the goodput it reached.
//!
//! Paths ([`paths`]): loopback (unshaped, the CPU-bound ceiling) and, as root, veth pairs
//! between two network namespaces with a `tbf` bottleneck and optional random loss, or long
//! lossy paths between two namespaces through the bench's own IP path emulator ([`emu`]:
//! TUN devices and a user-space forwarder), created and deleted by the bench itself.

pub mod emu;
pub mod flood;
pub mod group;
pub mod http;
pub mod paths;
pub mod peers;
pub mod programs;
pub mod ssh;
pub mod svg;

use crate::cli::BenchArgs;
use crate::failure::Failure;
use crate::output::outln;
use crate::summary::human_bytes;
use paths::{Netns, PathSpec, Place};
use peers::{Contender, PEERS};
use serde::Serialize;

/// One row of a path's table.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Contender, e.g. `ctp reliable`, `ctp reliable:bbr`, `tcp-cubic`, `udt4`.
    pub name: String,
    /// `ok`, `capped: …`, `missing: …` or `failed: …`.
    pub status: String,
    /// Goodput in megabits per second (median of the repetitions).
    pub goodput_mbps: Option<f64>,
    /// Sender CPU seconds per gigabyte moved.
    pub sender_cpu_s_per_gb: Option<f64>,
    /// Receiver CPU seconds per gigabyte moved.
    pub receiver_cpu_s_per_gb: Option<f64>,
    /// The first ctp row's goodput divided by this row's.
    pub ctp_ratio: Option<f64>,
    /// At least one repetition reached the time cap (its goodput is up to the cap).
    pub capped: bool,
    /// Packets the path's loss rule dropped during this contender's runs (lossy paths only).
    pub dropped_packets: Option<u64>,
    /// Packets the sender retransmitted per gigabyte moved (median; ctp contenders, which
    /// report it).
    pub retransmissions_per_gb: Option<f64>,
    /// Every run's received file was compared with the source (size and BLAKE3) by the
    /// bench and was the same (contenders that write a file; a difference fails the run).
    pub verified: bool,
}

/// One path's results.
#[derive(Clone, Debug, Serialize)]
pub struct Section {
    /// The path's name as given (`loopback`, `veth-1g-loss1`, …).
    pub path: String,
    /// What the path is.
    pub description: String,
    /// One row per contender, ctp first.
    pub rows: Vec<Row>,
    /// On an emulated path: each link's figures over all the runs (what the emulator
    /// forwarded, dropped, and how late its departures were).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub emulator: Vec<LinkFigures>,
}

/// One emulated link's figures over a path's runs.
#[derive(Clone, Debug, Serialize)]
pub struct LinkFigures {
    /// The data (sender → receiver) direction.
    pub data: emu::DirectionSummary,
    /// The reverse direction.
    pub reverse: emu::DirectionSummary,
}

/// The figures of every link of an emulated path so far (none for other paths).
fn emulator_figures(netns: Option<&Netns>) -> Vec<LinkFigures> {
    let Some(e) = netns.and_then(Netns::emulator) else {
        return Vec::new();
    };
    (0..e.links())
        .filter_map(|i| e.stats(i))
        .map(|(data, reverse)| LinkFigures {
            data: data.summary(),
            reverse: reverse.summary(),
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

fn list(s: &str) -> Vec<String> {
    s.split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The ctp contenders: each profile with each `--cc` entry, or with the congestion control
/// it names (`PROFILE:CC`). Every combination is checked now, so a bad one is a usage error
/// before anything runs.
fn ctp_contenders(profiles: &str, ccs: &str) -> Result<Vec<Contender>, Failure> {
    let ccs = list(ccs);
    if ccs.is_empty() {
        return Err(Failure::Usage(
            "--cc is empty: give `profile` (the profile's own) and/or algorithm names".into(),
        ));
    }
    let mut out = Vec::new();
    for item in list(profiles) {
        let (profile, pinned) = match item.rsplit_once(':') {
            Some((p, cc)) => (p.to_string(), vec![cc.to_string()]),
            None => (item.clone(), ccs.clone()),
        };
        let prof = crate::profiles::resolve(&profile)?;
        if !prof.is_reliable() {
            return Err(Failure::Usage(format!(
                "profile `{profile}` is not reliable; bench moves files"
            )));
        }
        for cc in pinned {
            let cc = (cc != "profile").then_some(cc);
            if let Some(name) = &cc {
                crate::profiles::with_cc(prof.clone(), name)?;
            }
            let c = Contender::Ctp {
                profile: profile.clone(),
                cc,
                baseline: false,
                insecure: false,
            };
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    if out.is_empty() {
        return Err(Failure::Usage(
            "--profiles is empty: give at least one ctp profile".into(),
        ));
    }
    Ok(out)
}

/// Each ctp contender followed by a twin: `baseline` run by the `--baseline` binary (as
/// that binary runs by default), or else run with `--insecure`.
fn with_twins(contenders: Vec<Contender>, baseline: bool) -> Vec<Contender> {
    contenders
        .into_iter()
        .flat_map(|c| {
            let twin = match &c {
                // (The baseline binary runs as it does by default: no insecure twin.)
                Contender::Ctp {
                    profile,
                    cc,
                    baseline: false,
                    ..
                } => Some(Contender::Ctp {
                    profile: profile.clone(),
                    cc: cc.clone(),
                    baseline,
                    insecure: !baseline,
                }),
                _ => None,
            };
            core::iter::once(c).chain(twin)
        })
        .collect()
}

/// The `--baseline` binary must be a file that can be run.
fn check_baseline(path: &std::path::Path) -> Result<(), Failure> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|e| {
        Failure::Usage(format!(
            "--baseline {}: {e} (give the path of a ctp binary, e.g. target/release/ctp \
             of an earlier checkout)",
            path.display()
        ))
    })?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(Failure::Usage(format!(
            "--baseline {}: not an executable file",
            path.display()
        )));
    }
    Ok(())
}

/// Deletes the namespaces of benches that are no longer running (and kills the processes
/// left in them); returns what was deleted. An emulated path's TUN devices are gone
/// already: they closed with the process that held them.
fn clean_stale() -> Result<Vec<String>, Failure> {
    let stale = paths::stale();
    paths::kill_inside(&stale);
    let left = paths::delete(&stale);
    if !left.is_empty() {
        return Err(Failure::Transfer(anyhow::anyhow!(
            "could not delete stale namespaces {} (try `ip netns del NAME`)",
            left.join(", ")
        )));
    }
    Ok(stale)
}

/// Runs `ctp bench`.
pub async fn run(a: BenchArgs) -> Result<(), Failure> {
    if a.cleanup {
        if !paths::is_root() {
            return Err(Failure::Usage(
                "--cleanup deletes network namespaces and needs root".into(),
            ));
        }
        let gone = clean_stale()?;
        outln!(
            "{}",
            if gone.is_empty() {
                "no stale bench namespaces".to_string()
            } else {
                format!("deleted {}", gone.join(", "))
            }
        );
        return Ok(());
    }
    if let Some(listen) = a.flood_server {
        return flood::serve(listen).await;
    }
    let bytes = a.bytes.as_deref().unwrap_or(if a.group {
        BenchArgs::GROUP_BYTES
    } else {
        BenchArgs::BYTES
    });
    let bytes =
        crate::units::size_bytes(bytes).map_err(|e| Failure::Usage(format!("--bytes: {e}")))?;
    if a.group {
        return group::run(group::Settings::from_args(&a, bytes)?).await;
    }
    if a.flood {
        if !(1..=8000).contains(&a.flood_idle) {
            return Err(Failure::Usage("--flood-idle must be 1..=8000".into()));
        }
        let timeout = std::time::Duration::from_secs(a.timeout);
        return flood::run(bytes, a.flood_idle, a.flood_pps, timeout, a.json).await;
    }
    if a.repeat == 0 || a.repeat > 20 {
        return Err(Failure::Usage("--repeat must be 1..=20".into()));
    }
    let mut specs =
        PathSpec::parse_list(&a.paths).map_err(|e| Failure::Usage(format!("--paths: {e}")))?;
    let peers = match &a.peers {
        Some(p) => list(p),
        None => peers::default_peers(a.ctp_files),
    };
    if let Some(bad) = peers.iter().find(|p| !PEERS.contains(&p.as_str())) {
        return Err(Failure::Usage(format!(
            "unknown peer `{bad}`; known: {}",
            PEERS.join(", ")
        )));
    }
    let mut contenders = ctp_contenders(&a.profiles, &a.cc)?;
    if let Some(b) = &a.baseline {
        check_baseline(b)?;
        contenders = with_twins(contenders, true);
    }
    if a.insecure_twins {
        contenders = with_twins(contenders, false);
    }
    contenders.extend(peers.iter().map(|p| Contender::Peer(p.clone())));

    if specs.iter().any(|(_, s)| s.needs_root()) {
        if paths::is_root() {
            let gone = clean_stale()?;
            if !gone.is_empty() {
                eprintln!(
                    "ctp bench: deleted namespaces left by an earlier bench: {}",
                    gone.join(", ")
                );
            }
        } else {
            let skipped: Vec<&str> = specs
                .iter()
                .filter(|(_, s)| s.needs_root())
                .map(|(n, _)| n.as_str())
                .collect();
            eprintln!(
                "ctp bench: NOT ROOT: the veth and emulated paths ({}) need root to create \
                 network namespaces; running on loopback only (run as root, e.g. with sudo, for them)",
                skipped.join(", ")
            );
            specs = vec![("loopback".into(), PathSpec::Loopback)];
        }
    }

    let env = peers::Env::prepare(bytes, a.timeout, &peers, a.ctp_files, a.baseline.clone())
        .await
        .map_err(Failure::Transfer)?;
    // The table is printed a path at a time, so a long run shows results as they come.
    if !a.json {
        outln!(
            "bytes per run: {}   repetitions: {} (median)   time cap per run: {} s",
            human_bytes(bytes),
            a.repeat,
            a.timeout
        );
    }
    let mut sections = Vec::new();
    for (name, spec) in &specs {
        let section = run_path(&env, name, spec, &contenders, a.repeat, a.json).await;
        if !a.json {
            print_section(&section);
        }
        sections.push(section);
    }

    let subtitle = format!("{} per run", human_bytes(bytes));
    if let Some(path) = &a.svg {
        std::fs::write(path, svg::bars(&sections, &subtitle))
            .map_err(|e| Failure::Transfer(anyhow::anyhow!("writing {}: {e}", path.display())))?;
    }
    if a.json {
        outln!(
            "{}",
            serde_json::json!({
                "bytes": bytes,
                "repeat": a.repeat,
                "timeout_s": a.timeout,
                "paths": sections,
            })
        );
        return Ok(());
    }
    Ok(())
}

/// Seed of the emulated paths' loss: every run of a bench sees the same loss pattern.
const EMULATOR_SEED: u64 = 28;

/// Runs every contender on one path (its namespaces live as long as this call).
async fn run_path(
    env: &peers::Env,
    name: &str,
    spec: &PathSpec,
    contenders: &[Contender],
    repeat: usize,
    quiet: bool,
) -> Section {
    let section = |rows, emulator| Section {
        path: name.to_string(),
        description: spec.describe(),
        rows,
        emulator,
    };
    let netns = match spec {
        PathSpec::Loopback => None,
        PathSpec::Veth {
            rate_bps,
            loss_percent,
        } => Some(Netns::veth(*rate_bps, *loss_percent)),
        PathSpec::Emulated { links } => Some(Netns::emulated(links, EMULATOR_SEED)),
    };
    let netns = match netns.transpose() {
        Ok(ns) => ns,
        Err(e) => {
            let status = format!("failed: setting up the path: {e:#}");
            eprintln!("ctp bench: {name}: {status}");
            return section(
                contenders
                    .iter()
                    .map(|c| row(c.name(), status.clone()))
                    .collect(),
                Vec::new(),
            );
        }
    };
    let place = netns.as_ref().map_or(Place::Loopback, Place::Namespaces);
    // Round-robin: every contender runs once per round, so a machine that slows down or
    // speeds up during the bench (other tenants, thermal state) weighs on all alike instead
    // of on whichever contender ran last.
    let mut tallies: Vec<Tally> = contenders.iter().map(|c| Tally::new(c.name())).collect();
    for round in 1..=repeat {
        for (c, tally) in contenders.iter().zip(&mut tallies) {
            if tally.failed() {
                continue;
            }
            if !quiet {
                let of = if repeat > 1 {
                    format!(" (run {round} of {repeat})")
                } else {
                    String::new()
                };
                eprintln!("ctp bench: {name}: {}{of} …", c.name());
            }
            tally.run(env, c, place, netns.as_ref()).await;
        }
    }
    let mut rows: Vec<Row> = tallies.into_iter().map(|t| t.finish(env.bytes())).collect();
    let reference = rows.first().and_then(|r| r.goodput_mbps);
    for r in rows.iter_mut().skip(1) {
        r.ctp_ratio = match (reference, r.goodput_mbps) {
            (Some(c), Some(p)) if p > 0.0 => Some(c / p),
            _ => None,
        };
    }
    section(rows, emulator_figures(netns.as_ref()))
}

fn row(name: String, status: String) -> Row {
    Row {
        name,
        status,
        goodput_mbps: None,
        sender_cpu_s_per_gb: None,
        receiver_cpu_s_per_gb: None,
        ctp_ratio: None,
        capped: false,
        dropped_packets: None,
        retransmissions_per_gb: None,
        verified: false,
    }
}

/// The runs of one contender on one path so far.
struct Tally {
    row: Row,
    goodput: Vec<f64>,
    sender_cpu: Vec<f64>,
    receiver_cpu: Vec<f64>,
    capped_bytes: Vec<u64>,
    retransmissions: Vec<f64>,
    /// Runs whose received file the bench compared with the source.
    verified: usize,
}

impl Tally {
    fn new(name: String) -> Self {
        Tally {
            row: row(name, "ok".into()),
            goodput: Vec::new(),
            sender_cpu: Vec::new(),
            receiver_cpu: Vec::new(),
            capped_bytes: Vec::new(),
            retransmissions: Vec::new(),
            verified: 0,
        }
    }

    /// Whether a run failed, which ends this contender's runs on this path.
    fn failed(&self) -> bool {
        self.row.status != "ok"
    }

    /// One run, its figures (CPU per GB) added to the tally.
    async fn run(
        &mut self,
        env: &peers::Env,
        c: &Contender,
        place: Place<'_>,
        netns: Option<&Netns>,
    ) {
        let r = &mut self.row;
        if let Some(ns) = netns {
            if let Err(e) = ns.drops(true) {
                r.status = format!("failed: reading the loss rule: {e:#}");
                return;
            }
        }
        let m = env.run(c, place).await;
        if let Some(Ok(Some(d))) = netns.map(|ns| ns.drops(false)) {
            *r.dropped_packets.get_or_insert(0) += d;
        }
        match m {
            Ok(m) => {
                let gb = m.bytes.max(1) as f64 / 1e9;
                self.goodput.push(m.goodput_mbps);
                self.sender_cpu.push(m.sender_cpu_s / gb);
                self.receiver_cpu.push(m.receiver_cpu_s / gb);
                self.retransmissions
                    .extend(m.retransmissions.map(|n| n as f64 / gb));
                self.verified += usize::from(m.verified);
                if m.capped {
                    r.capped = true;
                    self.capped_bytes.push(m.bytes);
                }
            }
            Err(e) => r.status = e,
        }
    }

    /// The row: the median of each figure over the runs.
    fn finish(self, bytes: u64) -> Row {
        let mut r = self.row;
        if r.capped && r.status == "ok" {
            r.status = format!(
                "capped: stopped at the time cap after moving {} of {}",
                human_bytes(*self.capped_bytes.iter().min().unwrap_or(&0)),
                human_bytes(bytes)
            );
        }
        r.verified = r.status == "ok" && self.verified > 0 && self.verified == self.goodput.len();
        r.goodput_mbps = median(self.goodput);
        r.sender_cpu_s_per_gb = median(self.sender_cpu);
        r.receiver_cpu_s_per_gb = median(self.receiver_cpu);
        r.retransmissions_per_gb = median(self.retransmissions);
        r
    }
}

/// A figure of a table with one decimal and its unit, or `—` when there is none.
fn cell(v: Option<f64>, unit: &str) -> String {
    v.map_or("—".to_string(), |x| format!("{x:.1}{unit}"))
}

/// Prints one path's table.
fn print_section(s: &Section) {
    outln!("");
    outln!("== {} — {}", s.path, s.description);
    outln!(
        "{:<24} {:>14} {:>12} {:>12} {:>9} {:>8} {:>8}  status",
        "contender",
        "goodput",
        "snd CPU",
        "rcv CPU",
        "ctp ÷ it",
        "retx/GB",
        "dropped"
    );
    for r in &s.rows {
        outln!(
            "{:<24} {:>14} {:>12} {:>12} {:>9} {:>8} {:>8}  {}",
            r.name,
            cell(r.goodput_mbps, " Mb/s"),
            cell(r.sender_cpu_s_per_gb, " s/GB"),
            cell(r.receiver_cpu_s_per_gb, " s/GB"),
            r.ctp_ratio.map_or("—".to_string(), |x| format!("{x:.2}")),
            r.retransmissions_per_gb
                .map_or("—".to_string(), |x| format!("{x:.0}")),
            r.dropped_packets.map_or("—".to_string(), |d| d.to_string()),
            r.status
        );
    }
    let lateness = |d: &emu::DirectionSummary| {
        let us = |v: Option<u64>| v.map_or("—".to_string(), |x| x.to_string());
        format!(
            "p50 {} / p99 {} / max {} µs{}",
            us(d.late_p50_us),
            us(d.late_p99_us),
            d.late_max_us,
            if d.realtime { "" } else { " (not real-time)" }
        )
    };
    for (i, l) in s.emulator.iter().enumerate() {
        let m = &l.data.model;
        outln!(
            "emulator link {i}: data {} packets in, {} out, {} lost, {} queue drops, {} oversize; \
             departure lateness data {}, reverse {}; forwarders' CPU {:.1} s",
            m.in_datagrams,
            m.out_datagrams,
            m.dropped_loss,
            m.dropped_queue,
            l.data.oversize + l.reverse.oversize,
            lateness(&l.data),
            lateness(&l.reverse),
            l.data.cpu_s + l.reverse.cpu_s
        );
    }
}
