//! Metrics computed from a run's samples: goodput, Jain's fairness index, the UDT stability
//! index, efficiency, RTT inflation, loss and retransmission rates, redundancy overhead,
//! on-time delivery, message latency, ping-pong round trips and peak buffer memory.

use crate::world::RunResult;
use serde::Serialize;

/// A metric a scenario can name in `metrics = [...]` to have the table report it; the table
/// reports every one when the list is absent, and JSON always carries all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Aggregate goodput over the bottleneck's capacity.
    Efficiency,
    /// Jain's index over intervals with two or more active flows.
    Jain,
    /// The UDT paper's fairness index, per stage of the same active flows.
    FairnessIndex,
    /// The UDT stability index.
    Stability,
    /// Aggregate goodput.
    Aggregate,
    /// Datagrams simulated.
    Packets,
    /// Datagrams simulated per CPU second.
    Speed,
    /// Each flow's goodput.
    Goodput,
    /// Each flow's completion time.
    Completion,
    /// Each flow's mean smoothed RTT over its propagation RTT.
    RttInflation,
    /// Each flow's loss rate.
    Loss,
    /// Each flow's retransmission rate.
    Retransmissions,
    /// Each flow's bytes delivered.
    Bytes,
    /// The peak bytes either endpoint of a flow held in its buffers.
    PeakMemory,
    /// Each flow's FEC redundancy overhead.
    Redundancy,
    /// Each message flow's on-time ratio.
    OnTime,
    /// Each message flow's mean latency.
    Latency,
    /// Each ping-pong flow's mean round trip.
    RoundTrip,
}

impl Metric {
    /// Every metric, in the table's order.
    pub const ALL: [Metric; 18] = [
        Metric::Efficiency,
        Metric::Jain,
        Metric::FairnessIndex,
        Metric::Stability,
        Metric::Aggregate,
        Metric::Packets,
        Metric::Speed,
        Metric::Goodput,
        Metric::Completion,
        Metric::RttInflation,
        Metric::Loss,
        Metric::Retransmissions,
        Metric::Bytes,
        Metric::PeakMemory,
        Metric::Redundancy,
        Metric::OnTime,
        Metric::Latency,
        Metric::RoundTrip,
    ];

    /// The name a scenario file uses.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Efficiency => "efficiency",
            Metric::Jain => "jain",
            Metric::FairnessIndex => "fairness_index",
            Metric::Stability => "stability",
            Metric::Aggregate => "aggregate",
            Metric::Packets => "packets",
            Metric::Speed => "speed",
            Metric::Goodput => "goodput",
            Metric::Completion => "completion",
            Metric::RttInflation => "rtt_inflation",
            Metric::Loss => "loss",
            Metric::Retransmissions => "retransmissions",
            Metric::Bytes => "bytes",
            Metric::PeakMemory => "peak_memory",
            Metric::Redundancy => "redundancy",
            Metric::OnTime => "on_time",
            Metric::Latency => "latency",
            Metric::RoundTrip => "round_trip",
        }
    }

    /// The metric a scenario file's name stands for, or an error listing the known names.
    pub fn from_name(name: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| {
                let known: Vec<&str> = Self::ALL.iter().map(|m| m.name()).collect();
                format!("unknown metric `{name}`; known: {}", known.join(", "))
            })
    }
}

/// Jain's fairness index of `xs`: (Σx)² / (n·Σx²); 1 when all are equal. `None` if empty or
/// all zero.
pub fn jain(xs: &[f64]) -> Option<f64> {
    let s: f64 = xs.iter().sum();
    let s2: f64 = xs.iter().map(|x| x * x).sum();
    (!xs.is_empty() && s2 > 0.0).then(|| s * s / (xs.len() as f64 * s2))
}

/// Coefficient of variation (population standard deviation / mean). `None` if the mean is 0
/// or there are fewer than two values.
pub fn coefficient_of_variation(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    if mean <= 0.0 {
        return None;
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    Some(var.sqrt() / mean)
}

/// Metrics of one flow.
#[derive(Clone, Debug, Serialize)]
pub struct FlowMetrics {
    /// Profile.
    pub profile: String,
    /// Goodput, Mb/s: delivered bytes over the completion time for a finished transfer,
    /// otherwise the mean over the intervals in which the flow was active.
    pub goodput_mbps: f64,
    /// Completion time, seconds (flows with a byte count that finished).
    pub completion_s: Option<f64>,
    /// Mean sender srtt over active intervals / propagation RTT.
    pub rtt_inflation: Option<f64>,
    /// Packets declared lost / packets sent.
    pub loss_rate: f64,
    /// Retransmitted segments / segments sent.
    pub retransmission_rate: f64,
    /// Application bytes delivered.
    pub bytes_delivered: u64,
    /// Forward-error-correction repair packets / data segments sent.
    pub redundancy_overhead: f64,
    /// Messages delivered within the flow's deadline / messages sent (message flows).
    pub on_time_ratio: Option<f64>,
    /// Mean latency of delivered messages (generation to delivery), ms.
    pub mean_latency_ms: Option<f64>,
    /// Ping-pong: mean round-trip time of the answered rounds, ms.
    pub mean_round_trip_ms: Option<f64>,
    /// Most bytes either endpoint of the flow held in its buffers at once.
    pub peak_buffered_bytes: u64,
}

/// Metrics of a whole run.
#[derive(Clone, Debug, Serialize)]
pub struct RunMetrics {
    /// Per flow.
    pub flows: Vec<FlowMetrics>,
    /// Aggregate goodput / bottleneck bandwidth, over intervals with at least one active flow.
    pub efficiency: Option<f64>,
    /// Mean over intervals with two or more active flows of Jain's index of their goodput.
    pub jain: Option<f64>,
    /// The UDT paper's fairness index (its Table 4, `FI`): for each stage (a maximal run of
    /// intervals with the same set of active flows, two or more), Jain's index of the
    /// flows' mean goodput over the stage; the mean over the stages.
    pub stage_jain: Option<f64>,
    /// The smallest per-stage index of [`RunMetrics::stage_jain`].
    pub stage_jain_min: Option<f64>,
    /// Mean over flows of the coefficient of variation of their per-interval goodput.
    pub stability: Option<f64>,
    /// Aggregate goodput, Mb/s, over intervals with at least one active flow.
    pub aggregate_mbps: f64,
    /// Datagrams emitted by the endpoints.
    pub packets: u64,
    /// Datagrams per CPU second of the run's thread.
    pub packets_per_sec: f64,
    /// Packet transmissions the links carried: a datagram counts once per link it crossed
    /// (the unit of packet-level simulator speed in the literature, "PTS": packet
    /// transmissions per second; Fujimoto et al., MASCOTS 2003).
    pub transmissions: u64,
    /// Link transmissions per CPU second of the run's thread.
    pub transmissions_per_sec: f64,
    /// Corrupted datagrams caught: by the endpoints' integrity check, or, for a wire format
    /// without one (UDT4's), by the receiving host's UDP checksum.
    pub corrupt_dropped: u64,
    /// Trace hash.
    pub trace_hash: String,
}

fn mbps(bytes: u64, interval_us: u64) -> f64 {
    bytes as f64 * 8.0 / interval_us as f64
}

/// Computes the metrics of `r`; `bottleneck_bps` is the capacity efficiency is measured
/// against (0 = unknown).
pub fn compute(r: &RunResult, bottleneck_bps: u64) -> RunMetrics {
    let iv = r.interval_us.max(1);
    let n_int = r.flows.iter().map(|f| f.samples.len()).max().unwrap_or(0);
    let mut jains = Vec::new();
    let mut effs = Vec::new();
    let mut aggs = Vec::new();
    // Stages: (active flow indices, per-flow goodput sums, intervals).
    let mut stages: Vec<(Vec<usize>, Vec<f64>, usize)> = Vec::new();
    for i in 0..n_int {
        let ids: Vec<usize> = (0..r.flows.len())
            .filter(|&f| r.flows[f].samples.get(i).is_some_and(|s| s.active))
            .collect();
        if !ids.is_empty() {
            if stages.last().is_none_or(|st| st.0 != ids) {
                stages.push((ids.clone(), vec![0.0; ids.len()], 0));
            }
            let st = stages.last_mut().expect("pushed");
            for (k, &f) in ids.iter().enumerate() {
                st.1[k] += mbps(r.flows[f].samples[i].bytes, iv);
            }
            st.2 += 1;
        }
        let active: Vec<f64> = r
            .flows
            .iter()
            .filter_map(|f| f.samples.get(i))
            .filter(|s| s.active)
            .map(|s| mbps(s.bytes, iv))
            .collect();
        if active.is_empty() {
            continue;
        }
        let agg: f64 = active.iter().sum();
        aggs.push(agg);
        if bottleneck_bps > 0 {
            effs.push(agg * 1e6 / bottleneck_bps as f64);
        }
        if active.len() >= 2 {
            if let Some(j) = jain(&active) {
                jains.push(j);
            }
        }
    }
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let stage_jains: Vec<f64> = stages
        .iter()
        .filter(|st| st.0.len() >= 2)
        .filter_map(|st| jain(&st.1))
        .collect();
    let mut covs = Vec::new();
    let flows = r
        .flows
        .iter()
        .map(|f| {
            let act: Vec<_> = f.samples.iter().filter(|s| s.active).collect();
            let rates: Vec<f64> = act.iter().map(|s| mbps(s.bytes, iv)).collect();
            if let Some(c) = coefficient_of_variation(&rates) {
                covs.push(c);
            }
            let srtts: Vec<f64> = act
                .iter()
                .filter(|s| s.srtt_us > 0)
                .map(|s| s.srtt_us as f64)
                .collect();
            // A finished transfer: bytes over its duration (slow start included); otherwise
            // the mean over the intervals the flow was active.
            let goodput = match (f.completion_us, mean(&rates)) {
                (Some(c), _) if c > 0 => f.bytes_delivered as f64 * 8.0 / c as f64,
                (_, Some(g)) => g,
                _ => 0.0,
            };
            FlowMetrics {
                profile: f.profile.clone(),
                goodput_mbps: goodput,
                completion_s: f.completion_us.map(|c| c as f64 / 1e6),
                rtt_inflation: mean(&srtts)
                    .filter(|_| f.prop_rtt_us > 0)
                    .map(|s| s / f.prop_rtt_us as f64),
                loss_rate: f.packets_lost as f64 / f.packets_sent.max(1) as f64,
                retransmission_rate: f.retransmissions as f64 / f.segments_sent.max(1) as f64,
                bytes_delivered: f.bytes_delivered,
                redundancy_overhead: f.repairs_sent as f64 / f.segments_sent.max(1) as f64,
                on_time_ratio: (f.msgs_sent > 0)
                    .then(|| f.msgs_on_time as f64 / f.msgs_sent as f64),
                mean_latency_ms: (f.msgs_delivered > 0)
                    .then(|| f.latency_sum_us as f64 / f.msgs_delivered as f64 / 1e3),
                mean_round_trip_ms: (!f.round_trips_us.is_empty()).then(|| {
                    f.round_trips_us.iter().sum::<u64>() as f64
                        / f.round_trips_us.len() as f64
                        / 1e3
                }),
                peak_buffered_bytes: f.peak_sender_buffered.max(f.peak_receiver_buffered),
            }
        })
        .collect();
    let transmissions = r.links.iter().map(|l| l.carried).sum();
    RunMetrics {
        flows,
        efficiency: mean(&effs),
        jain: mean(&jains),
        stage_jain: mean(&stage_jains),
        stage_jain_min: stage_jains.iter().copied().reduce(f64::min),
        stability: mean(&covs),
        aggregate_mbps: mean(&aggs).unwrap_or(0.0),
        packets: r.packets,
        packets_per_sec: r.packets as f64 / r.cpu_secs.max(1e-9),
        transmissions,
        transmissions_per_sec: transmissions as f64 / r.cpu_secs.max(1e-9),
        corrupt_dropped: r.bad_checksum + r.udp_checksum_drops,
        trace_hash: r.trace_hash.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_is_one_when_equal_and_one_over_n_when_one_takes_all() {
        assert!((jain(&[3.0, 3.0, 3.0]).unwrap() - 1.0).abs() < 1e-12);
        assert!((jain(&[5.0, 0.0, 0.0, 0.0]).unwrap() - 0.25).abs() < 1e-12);
        assert_eq!(jain(&[]), None);
    }

    #[test]
    fn the_stage_index_averages_each_flows_goodput_over_a_stage_before_comparing() {
        // 1-s intervals, goodput in Mb/s (bytes = Mb/s × 125 000); `None` = not active.
        let flow = |mbps: &[Option<u64>]| crate::app::FlowResult {
            samples: mbps
                .iter()
                .map(|m| crate::app::Sample {
                    bytes: m.unwrap_or(0) * 125_000,
                    active: m.is_some(),
                    srtt_us: 0,
                })
                .collect(),
            ..Default::default()
        };
        let run = |flows| RunResult {
            flows,
            groups: Vec::new(),
            links: Vec::new(),
            bad_checksum: 0,
            unknown_connection: 0,
            udp_checksum_drops: 0,
            trace_hash: String::new(),
            packets: 0,
            virtual_us: 0,
            wall_secs: 1.0,
            cpu_secs: 1.0,
            interval_us: 1_000_000,
            stuck: None,
            attack: None,
            net: None,
        };
        // Alone, then two flows trading 100/300 and 300/100: every interval is unfair
        // (Jain 0.8) but over the stage both moved the same (the paper's FI = 1); the
        // oscillation is what the stability index measures.
        let m = compute(
            &run(vec![
                flow(&[Some(400), Some(300), Some(100), Some(300), Some(100)]),
                flow(&[None, Some(100), Some(300), Some(100), Some(300)]),
            ]),
            400_000_000,
        );
        assert!((m.jain.unwrap() - 0.8).abs() < 1e-12, "{:?}", m.jain);
        assert!((m.stage_jain.unwrap() - 1.0).abs() < 1e-12);
        // A third flow joins half as fast: a second stage, fair in the mean only if its
        // flows averaged the same.
        let m = compute(
            &run(vec![
                flow(&[Some(200), Some(200), Some(200), Some(200)]),
                flow(&[Some(200), Some(200), Some(100), Some(100)]),
                flow(&[None, None, Some(100), Some(100)]),
            ]),
            400_000_000,
        );
        let second = 400.0f64.powi(2) / (3.0 * (200.0f64.powi(2) + 2.0 * 100.0f64.powi(2)));
        assert!((m.stage_jain_min.unwrap() - second).abs() < 1e-12);
        assert!((m.stage_jain.unwrap() - (1.0 + second) / 2.0).abs() < 1e-12);
    }

    #[test]
    fn coefficient_of_variation_of_constant_is_zero() {
        assert_eq!(coefficient_of_variation(&[2.0, 2.0, 2.0]), Some(0.0));
        let c = coefficient_of_variation(&[1.0, 3.0]).unwrap();
        assert!((c - 0.5).abs() < 1e-12);
    }
}
