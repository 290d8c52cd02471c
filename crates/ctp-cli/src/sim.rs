//! `ctp sim`: run a simulator scenario or a chaos campaign.

use crate::cli::SimArgs;
use crate::failure::Failure;
use crate::output::outln;
use anyhow::{anyhow, Context};
use ctp_sim::attacker::AttackMode;
use ctp_sim::{chaos, report, scenario::Scenario};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The scenarios shipped with ctp (`scenarios/` of the source tree), built into the binary.
mod shipped {
    include!(concat!(env!("OUT_DIR"), "/scenarios.rs"));
}

/// Finds a scenario: a file as given, `scenarios/NAME.toml` under the current directory, or
/// a shipped scenario of that name; the error lists the shipped names.
fn load(name: &str) -> Result<Scenario, Failure> {
    let usage = |e: ctp_sim::scenario::ScenarioError| Failure::Usage(e.to_string());
    for p in [
        PathBuf::from(name),
        PathBuf::from("scenarios").join(format!("{name}.toml")),
    ] {
        if p.is_file() {
            return Scenario::load(&p).map_err(usage);
        }
    }
    if let Some((_, src)) = shipped::SHIPPED.iter().find(|(n, _)| *n == name) {
        return Scenario::parse(src, &format!("shipped scenario `{name}`")).map_err(usage);
    }
    let names: Vec<&str> = shipped::SHIPPED.iter().map(|(n, _)| *n).collect();
    Err(Failure::Usage(format!(
        "no scenario `{name}`: not a file, and not one of the shipped scenarios ({}, chaos, scale)",
        names.join(", ")
    )))
}

/// Runs `ctp sim`.
pub fn run(a: SimArgs) -> Result<(), Failure> {
    if a.scenario == "chaos" {
        return run_chaos(&a, &AtomicBool::new(false));
    }
    if a.scenario == "scale" {
        return run_scale(&a);
    }
    let sc = load(&a.scenario)?;
    let bar = ProgressBar::new(sc.file.duration.get_ref().0.as_secs().max(1));
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} virtual s")
            .map_err(|e| anyhow!(e))?,
    );
    let rep = report::run_scenario(&sc, a.seed, &mut |i, n, t| {
        bar.set_message(format!("run {}/{n}", i + 1));
        bar.set_position(t.as_secs());
    })
    .map_err(|e| Failure::Usage(e.to_string()))?;
    bar.finish_and_clear();
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&rep).map_err(|e| anyhow!(e))?
        );
    } else {
        outln!("{}", report::table(&rep).trim_end_matches('\n'));
    }
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let svg = dir.join("throughput.svg");
        std::fs::write(&svg, report::plot(&rep))
            .with_context(|| format!("writing {}", svg.display()))?;
        let csv = dir.join("throughput.csv");
        std::fs::write(&csv, report::csv(&rep))
            .with_context(|| format!("writing {}", csv.display()))?;
        eprintln!("wrote {} and {}", svg.display(), csv.display());
    }
    Ok(())
}

/// Runs `ctp sim scale`: what idle secure channels and idle streams cost in heap, per side
/// (see `ctp_sim::scale`).
fn run_scale(a: &SimArgs) -> Result<(), Failure> {
    use ctp_sim::scale::{counting, measure, ScaleConfig};
    if !counting() {
        return Err(Failure::Transfer(anyhow!(
            "the counting allocator is not installed"
        )));
    }
    let cfg = ScaleConfig {
        connections: a.connections.unwrap_or(10_000).max(1),
        ..ScaleConfig::default()
    };
    let r = measure(&cfg, &mut |what| eprintln!("scale: {what}"))
        .map_err(|e| Failure::Transfer(anyhow!(e)))?;
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&r).map_err(|e| anyhow!(e))?
        );
        return Ok(());
    }
    outln!(
        "scale: {} idle {} connections ({} profile) between two in-memory endpoints, {} idle streams ({} connections x {}, one {}-byte message each); heap counted per side",
        r.connections,
        if r.secure { "secure" } else { "plain" },
        r.profile,
        r.streams,
        cfg.stream_connections.min(r.connections),
        cfg.streams_per_connection,
        cfg.message
    );
    outln!("{:<26} {:>12} {:>12}", "heap, bytes", "client", "server");
    outln!(
        "{:<26} {:>12.0} {:>12.0}",
        "per idle connection",
        r.client_per_connection,
        r.server_per_connection
    );
    outln!(
        "{:<26} {:>12.0} {:>12.0}",
        "per idle stream",
        r.client_per_stream,
        r.server_per_stream
    );
    outln!("({:.1} s)", r.wall_secs);
    Ok(())
}

/// How often a chaos campaign reports its progress on stderr.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// What one seed gave, sent from a worker to the reporting thread.
struct SeedOutcome {
    seed: u64,
    attack: Option<AttackMode>,
    injected: u64,
    /// Failure text (a panic included), empty if the seed passed.
    failures: Vec<String>,
    /// Flows a forger left hanging (counted, not failed: see `chaos::Verdict`).
    forger_hangs: usize,
    /// Groups in the seed's world, and those of them that completed.
    groups: (u64, u64),
}

fn one_seed(seed: u64) -> SeedOutcome {
    match std::panic::catch_unwind(|| chaos::run_seed(seed)) {
        Ok(v) => SeedOutcome {
            seed,
            attack: v.attack,
            injected: v.run.attack.map_or(0, |a| a.injected),
            failures: v.failures,
            forger_hangs: v.forger_hangs.len(),
            groups: (
                v.run.groups.len() as u64,
                v.run.groups.iter().filter(|g| g.completed).count() as u64,
            ),
        },
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            SeedOutcome {
                seed,
                attack: chaos::config(seed).attacker.map(|a| a.mode),
                injected: 0,
                failures: vec![format!("panicked: {msg}")],
                forger_hangs: 0,
                groups: (0, 0),
            }
        }
    }
}

fn attack_name(m: Option<AttackMode>) -> &'static str {
    match m {
        None => "no attacker",
        Some(AttackMode::OffPath) => "off-path attacker",
        Some(AttackMode::Observer) => "on-path observer",
        Some(AttackMode::Forger) => "forger",
    }
}

/// Runs `ctp sim chaos`: seeds `start..start + n` on every core (each seed's run is
/// deterministic, whichever thread takes it), failures printed as they come with the
/// command that replays them, progress on stderr every few seconds; `stop` (Ctrl-C) ends it
/// early with a summary.
pub fn run_chaos(a: &SimArgs, stop: &AtomicBool) -> Result<(), Failure> {
    let n = a.seeds.unwrap_or(100);
    let start = a.start.unwrap_or(0);
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |j| j.get()))
        .max(1);
    // Panics are reported per seed; the default hook would print each one's backtrace too.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let next = AtomicU64::new(0);
    let (tx, rx) = mpsc::channel::<SeedOutcome>();
    let began = Instant::now();
    let mut done = 0u64;
    let mut failing = Vec::new();
    let mut injected = 0u64;
    let mut forger_hangs = 0u64;
    let (mut groups, mut groups_completed) = (0u64, 0u64);
    let mut attacked = [0u64; 3];
    // Seeds done below this one, all of them (where a stopped campaign resumes).
    let mut resume = start;
    let mut finished = std::collections::BTreeSet::new();
    std::thread::scope(|s| {
        for _ in 0..jobs.min(n.max(1) as usize) {
            let tx = tx.clone();
            let next = &next;
            s.spawn(move || loop {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                if tx.send(one_seed(start + i)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut last = Instant::now();
        loop {
            match rx.recv_timeout(Duration::from_millis(250)) {
                Ok(o) => {
                    done += 1;
                    injected += o.injected;
                    forger_hangs += o.forger_hangs as u64;
                    groups += o.groups.0;
                    groups_completed += o.groups.1;
                    if let Some(m) = o.attack {
                        attacked[m as usize] += 1;
                    }
                    finished.insert(o.seed);
                    while finished.remove(&resume) {
                        resume += 1;
                    }
                    if !o.failures.is_empty() {
                        eprintln!(
                            "seed {} FAILED ({}): {}",
                            o.seed,
                            attack_name(o.attack),
                            o.failures.join("; ")
                        );
                        eprintln!("  replay: {}", chaos::replay_command(o.seed));
                        failing.push(o.seed);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            if last.elapsed() >= PROGRESS_EVERY {
                last = Instant::now();
                let secs = began.elapsed().as_secs_f64();
                let rate = done as f64 / secs.max(1e-9);
                let eta = (n - done) as f64 / rate.max(1e-9);
                eprintln!(
                    "chaos: {done}/{n} seeds ({:.1}%), {rate:.0} seeds/s on {jobs} threads, \
                     {} failed, {injected} datagrams injected, {:.0} s elapsed, about {:.0} s left",
                    100.0 * done as f64 / n.max(1) as f64,
                    failing.len(),
                    secs,
                    eta
                );
            }
        }
    });
    std::panic::set_hook(hook);
    failing.sort_unstable();
    let interrupted = done < n;
    let secs = began.elapsed().as_secs_f64();
    let failed = failing.len() as u64;
    let mut summary = format!(
        "chaos: {done} seeds from {start}: {} passed, {failed} failed",
        done - failed
    );
    summary += &format!(
        " ({} off-path attackers, {} on-path observers, {} forgers; {injected} datagrams injected; {forger_hangs} flows left hanging by a forger, expected without authentication; {groups} groups, {groups_completed} completed, the others failed with a reason; {:.0} seeds/s)",
        attacked[0],
        attacked[1],
        attacked[2],
        done as f64 / secs.max(1e-9)
    );
    if interrupted {
        summary += &format!("; stopped early: resume with --start {resume}");
    }
    if a.json {
        outln!(
            "{}",
            serde_json::json!({
                "seeds": done, "start": start, "failed": failed, "failing": failing,
                "injected": injected, "off_path": attacked[0], "observers": attacked[1],
                "forgers": attacked[2], "forger_hangs": forger_hangs,
                "groups": groups, "groups_completed": groups_completed,
                "interrupted": interrupted, "resume": resume,
                "secs": secs,
            })
        );
    } else {
        outln!("{summary}");
        if !failing.is_empty() {
            outln!("failing seeds: {failing:?}");
        }
    }
    if failed > 0 {
        return Err(Failure::Transfer(anyhow!(summary)));
    }
    if interrupted {
        return Err(Failure::Interrupted);
    }
    Ok(())
}
