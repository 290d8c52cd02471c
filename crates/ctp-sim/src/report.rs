//! Running a whole scenario and presenting it: a text table, JSON, CSV series and the plot.

use crate::metrics::{self, FlowMetrics, Metric, RunMetrics};
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
    /// The group's delivery mode, if the scenario has a group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_mode: Option<String>,
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
    /// What the table reports (the scenario's `metrics`; JSON carries every metric).
    #[serde(skip)]
    pub reported: Vec<Metric>,
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
            group_mode: r.group_mode,
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
        reported: sc.reported_metrics(),
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
    if let Some(m) = &r.group_mode {
        let _ = write!(s, " group {m}");
    }
    s
}

/// A run-level column of the table: its metric, header, width and cell.
type RunColumn = (Metric, &'static str, usize, fn(&RunMetrics) -> String);

/// The run-level columns, in the table's order (the per-flow metrics go on flow lines).
const RUN_COLUMNS: [RunColumn; 7] = [
    (Metric::Efficiency, "effic", 6, |r| opt(r.efficiency, 3)),
    (Metric::Jain, "jain", 6, |r| opt(r.jain, 3)),
    (Metric::FairnessIndex, "FI", 6, |r| opt(r.stage_jain, 3)),
    (Metric::Stability, "stability", 9, |r| opt(r.stability, 3)),
    (Metric::Aggregate, "aggr Mb/s", 10, |r| {
        format!("{:.2}", r.aggregate_mbps)
    }),
    (Metric::Packets, "pkts", 10, |r| r.packets.to_string()),
    (Metric::Speed, "kpkt/cpu-s", 10, |r| {
        format!("{:.0}", r.packets_per_sec / 1e3)
    }),
];

/// A per-flow field of the table, if the flow has it (a bulk flow has no on-time ratio).
fn flow_field(m: Metric, f: &FlowMetrics) -> Option<String> {
    Some(match m {
        Metric::Goodput => format!("goodput {:>8.2} Mb/s", f.goodput_mbps),
        Metric::Completion => format!("done {:>8} s", opt(f.completion_s, 3)),
        Metric::RttInflation => format!("rtt x{:>7}", opt(f.rtt_inflation, 2)),
        Metric::Loss => format!("loss {:>6.2}%", f.loss_rate * 100.0),
        Metric::Retransmissions => format!("retx {:>6.2}%", f.retransmission_rate * 100.0),
        Metric::Bytes => format!("{} bytes", f.bytes_delivered),
        Metric::PeakMemory => format!("peak buf {} KiB", f.peak_buffered_bytes / 1024),
        Metric::Redundancy if f.redundancy_overhead > 0.0 => {
            format!("repairs +{:.1}%", f.redundancy_overhead * 100.0)
        }
        Metric::OnTime => format!("on time {:.1}%", f.on_time_ratio? * 100.0),
        Metric::Latency => format!("latency {:.1} ms", f.mean_latency_ms?),
        Metric::RoundTrip => format!("round trip {:.2} ms", f.mean_round_trip_ms?),
        _ => return None,
    })
}

/// The human-readable table: the run-level metrics the scenario reports as columns, then
/// a line per flow with its per-flow metrics, then the run's trace hash.
pub fn table(rep: &ScenarioReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "scenario {}: {}", rep.name, rep.description);
    let columns: Vec<&RunColumn> = RUN_COLUMNS
        .iter()
        .filter(|c| rep.reported.contains(&c.0))
        .collect();
    let _ = write!(s, "{:<34}", "run");
    for &&(_, h, w, _) in &columns {
        let _ = write!(s, " {h:>w$}");
    }
    let _ = writeln!(s);
    for r in &rep.runs {
        let m = &r.metrics;
        let _ = write!(s, "{:<34}", run_label(r));
        for &&(_, _, w, cell) in &columns {
            let _ = write!(s, " {:>w$}", cell(m));
        }
        let _ = writeln!(s);
        for (i, f) in m.flows.iter().enumerate() {
            let fields: Vec<String> = rep
                .reported
                .iter()
                .filter_map(|&k| flow_field(k, f))
                .collect();
            if !fields.is_empty() {
                let _ = writeln!(s, "    flow {i}: {}", fields.join("  "));
            }
            if let Some(fr) = r.result.flows.get(i) {
                streams_lines(&mut s, i, fr);
            }
        }
        for g in &r.result.groups {
            group_lines(&mut s, g);
        }
        let _ = writeln!(s, "    trace {}", &m.trace_hash[..16]);
    }
    for k in &rep.skipped {
        let _ = writeln!(s, "not composable, skipped: {k}");
    }
    s
}

/// A group's lines: how many messages were done and when (or why it failed), then per
/// member its copies and deliveries (or why it failed).
fn group_lines(s: &mut String, g: &crate::group::GroupResult) {
    let secs = g.completion_us.map(|us| us as f64 / 1e6);
    let _ = write!(
        s,
        "    group {}: {}/{} messages done",
        g.mode, g.done, g.messages
    );
    match (&g.failure, secs) {
        (Some(why), _) => {
            let _ = writeln!(s, "; FAILED: {why}");
        }
        (None, Some(t)) => {
            let _ = writeln!(s, " in {t:.3} s");
        }
        (None, None) => {
            let _ = writeln!(s, "; not finished");
        }
    }
    for m in &g.members {
        let _ = writeln!(
            s,
            "      member flow {}: {} copies, {} acknowledged, {} delivered  {}",
            m.flow, m.copies, m.copies_done, m.delivered, m.state
        );
    }
    for v in &g.violations {
        let _ = writeln!(s, "      VIOLATION: {v}");
    }
}

/// A `streams` flow's lines: messages held by another stream's retransmission, then one
/// line per stream (its delays are generation to delivery, of its messages).
fn streams_lines(s: &mut String, i: usize, f: &crate::world::FlowResult) {
    let Some(held) = f.held_by_other else {
        return;
    };
    let ms = |x: Option<u64>| opt(x.map(|v| v as f64 / 1e3), 1);
    let late: u64 = f.streams.iter().map(|st| st.late).sum();
    let _ = writeln!(
        s,
        "    flow {i}: {} streams; {late} late messages, {held} held by another stream's retransmission",
        f.streams.len()
    );
    for st in &f.streams {
        let _ = write!(
            s,
            "      stream {:>3} prio {:>3}: {:>9} bytes  done {:>7} s",
            st.stream,
            st.priority,
            st.bytes_delivered,
            opt(st.completion_us.map(|v| v as f64 / 1e6), 3),
        );
        if st.messages {
            let _ = write!(
                s,
                "  delay ms p50 {:>6} p99 {:>6} max {:>6}  late {:>3}  held {:>3}",
                ms(st.delay_p50_us),
                ms(st.delay_p99_us),
                ms(st.delay_max_us),
                st.late,
                st.held_by_other
            );
        }
        let _ = writeln!(s);
    }
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
