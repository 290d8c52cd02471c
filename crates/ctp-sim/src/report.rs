//! Running a whole scenario and presenting it: a text table, JSON, CSV series and the plot.

use crate::metrics::{self, RunMetrics};
use crate::scenario::{RunSpec, Scenario};
use crate::world::{RunResult, World};
use core::time::Duration;
use serde::Serialize;
use std::fmt::Write;

/// One run of a scenario with its metrics.
#[derive(Debug, Serialize)]
pub struct RunReport {
    /// Profile.
    pub profile: String,
    /// Congestion control.
    pub cc: String,
    /// Sweep key and value.
    pub sweep: Option<(String, f64)>,
    /// Seed.
    pub seed: u64,
    /// Metrics.
    pub metrics: RunMetrics,
    /// The raw result (samples, counters).
    pub result: RunResult,
}

/// A whole scenario.
#[derive(Debug, Serialize)]
pub struct ScenarioReport {
    /// Scenario name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Every run.
    pub runs: Vec<RunReport>,
    /// Profile/congestion-control pairs that cannot be composed, with why.
    pub skipped: Vec<String>,
}

/// Runs every run of `sc`; `progress(run_index, run_count, virtual_time)`.
pub fn run_scenario(
    sc: &Scenario,
    seed: Option<u64>,
    progress: &mut dyn FnMut(usize, usize, Duration),
) -> Result<ScenarioReport, crate::scenario::ScenarioError> {
    let (specs, skipped): (Vec<RunSpec>, _) = sc.plan(seed)?;
    let n = specs.len();
    let mut runs = Vec::new();
    for (i, r) in specs.into_iter().enumerate() {
        let seed = r.config.seed;
        let result = World::new(r.config).run(&mut |t| progress(i, n, t));
        let metrics = metrics::compute(&result, r.bottleneck_bps);
        runs.push(RunReport {
            profile: r.profile,
            cc: r.cc,
            sweep: r.sweep,
            seed,
            metrics,
            result,
        });
    }
    Ok(ScenarioReport {
        name: sc.file.name.clone(),
        description: sc.file.description.clone(),
        runs,
        skipped,
    })
}

fn opt(x: Option<f64>, prec: usize) -> String {
    x.map_or("-".into(), |v| format!("{v:.prec$}"))
}

fn run_label(r: &RunReport) -> String {
    let mut s = format!("{}/{}", r.profile, r.cc);
    if let Some((k, v)) = &r.sweep {
        let _ = write!(s, " {k}={v}");
    }
    s
}

/// The human-readable table.
pub fn table(rep: &ScenarioReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "scenario {}: {}", rep.name, rep.description);
    let _ = writeln!(
        s,
        "{:<34} {:>6} {:>6} {:>6} {:>9} {:>10} {:>10} {:>10}",
        "run", "effic", "jain", "FI", "stability", "aggr Mb/s", "pkts", "kpkt/cpu-s"
    );
    for r in &rep.runs {
        let m = &r.metrics;
        let _ = writeln!(
            s,
            "{:<34} {:>6} {:>6} {:>6} {:>9} {:>10.2} {:>10} {:>10.0}",
            run_label(r),
            opt(m.efficiency, 3),
            opt(m.jain, 3),
            opt(m.stage_jain, 3),
            opt(m.stability, 3),
            m.aggregate_mbps,
            m.packets,
            m.packets_per_sec / 1e3
        );
        for (i, f) in m.flows.iter().enumerate() {
            let _ = write!(
                s,
                "    flow {i}: goodput {:>8.2} Mb/s  done {:>8} s  rtt x{:>7}  loss {:>6.2}%  retx {:>6.2}%  {} bytes  peak buf {} KiB",
                f.goodput_mbps,
                opt(f.completion_s, 3),
                opt(f.rtt_inflation, 2),
                f.loss_rate * 100.0,
                f.retransmission_rate * 100.0,
                f.bytes_delivered,
                f.peak_buffered_bytes / 1024
            );
            if f.redundancy_overhead > 0.0 {
                let _ = write!(s, "  fec +{:.1}%", f.redundancy_overhead * 100.0);
            }
            if let Some(r) = f.on_time_ratio {
                let _ = write!(s, "  on time {:.1}%", r * 100.0);
            }
            if let Some(l) = f.mean_latency_ms {
                let _ = write!(s, "  latency {l:.1} ms");
            }
            if let Some(r) = f.mean_round_trip_ms {
                let _ = write!(s, "  round trip {r:.2} ms");
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(s, "    trace {}", &m.trace_hash[..16]);
    }
    for k in &rep.skipped {
        let _ = writeln!(s, "not composable, skipped: {k}");
    }
    s
}

/// Per-interval series as CSV: run, profile, cc, sweep, flow, time, goodput, active, srtt.
pub fn csv(rep: &ScenarioReport) -> String {
    let mut s = String::from("run,profile,cc,sweep,flow,t_s,goodput_mbps,active,srtt_us\n");
    for (ri, r) in rep.runs.iter().enumerate() {
        let iv = r.result.interval_us as f64;
        let sweep = r
            .sweep
            .as_ref()
            .map_or(String::new(), |(k, v)| format!("{k}={v}"));
        for (fi, f) in r.result.flows.iter().enumerate() {
            for (k, smp) in f.samples.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "{ri},{},{},{sweep},{fi},{:.6},{:.6},{},{}",
                    r.profile,
                    r.cc,
                    (k + 1) as f64 * iv / 1e6,
                    smp.bytes as f64 * 8.0 / iv,
                    smp.active as u8,
                    smp.srtt_us
                );
            }
        }
    }
    s
}

/// Throughput over time, one line per flow of every run.
pub fn plot(rep: &ScenarioReport) -> String {
    let mut series = Vec::new();
    for r in &rep.runs {
        let iv = r.result.interval_us as f64;
        for (fi, f) in r.result.flows.iter().enumerate() {
            let pts = f
                .samples
                .iter()
                .enumerate()
                .map(|(k, smp)| ((k + 1) as f64 * iv / 1e6, smp.bytes as f64 * 8.0 / iv))
                .collect();
            series.push((format!("{} f{fi}", run_label(r)), pts));
        }
    }
    crate::svg::throughput_plot(&format!("{}: throughput per flow", rep.name), &series)
}
