//! `ctp bench`: ctp side by side with the transports users would pick instead, on the same
//! path in one run: goodput, CPU seconds per GB on each side, and ctp's ratio to each peer.
//!
//! Every contender runs as a pair of child processes (receiver, then sender) and is timed by
//! the receiver's own report; CPU time comes from `getrusage(RUSAGE_CHILDREN)` sampled as
//! each child is reaped, so sender and receiver are measured separately. A peer whose program
//! is not installed is reported as missing, never skipped silently. Every run is bounded by
//! `--timeout`.
//!
//! Paths: loopback (unshaped, the CPU-bound ceiling). The namespace paths with `tbf` and
//! `iptables` loss are not built yet; asking for them says so.

pub mod peers;
pub mod svg;

use crate::cli::BenchArgs;
use crate::output::outln;
use crate::Failure;
use serde::Serialize;

/// One row of the table.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Contender, e.g. `ctp reliable`, `tcp-cubic`, `udt4`.
    pub name: String,
    /// `ok`, `missing: …` or `failed: …`.
    pub status: String,
    /// Goodput in megabits per second (median of the repetitions).
    pub goodput_mbps: Option<f64>,
    /// Sender CPU seconds per gigabyte moved.
    pub sender_cpu_s_per_gb: Option<f64>,
    /// Receiver CPU seconds per gigabyte moved.
    pub receiver_cpu_s_per_gb: Option<f64>,
    /// The first ctp row's goodput divided by this row's.
    pub ctp_ratio: Option<f64>,
}

/// Known peers, in table order.
pub const PEERS: &[&str] = &["tcp-cubic", "tcp-bbr", "udt4", "srt", "quinn"];

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// Runs `ctp bench`.
pub async fn run(a: BenchArgs) -> Result<(), Failure> {
    if a.path != "loopback" {
        return Err(Failure::Usage(format!(
            "--path {}: only `loopback` exists so far (the veth + tbf namespace paths are not built yet)",
            a.path
        )));
    }
    let bytes =
        crate::units::size_bytes(&a.bytes).map_err(|e| Failure::Usage(format!("--bytes: {e}")))?;
    if a.repeat == 0 || a.repeat > 20 {
        return Err(Failure::Usage("--repeat must be 1..=20".into()));
    }
    let peers: Vec<String> = a
        .peers
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if let Some(bad) = peers.iter().find(|p| !PEERS.contains(&p.as_str())) {
        return Err(Failure::Usage(format!(
            "unknown peer `{bad}`; known: {}",
            PEERS.join(", ")
        )));
    }
    let profiles: Vec<String> = a
        .profiles
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    for p in &profiles {
        let prof = crate::profiles::resolve(p)?;
        if !prof.is_reliable() {
            return Err(Failure::Usage(format!(
                "profile `{p}` is not reliable; bench moves files"
            )));
        }
    }
    let env = peers::Env::prepare(bytes, a.timeout)
        .await
        .map_err(Failure::Transfer)?;
    let mut rows = Vec::new();
    let mut contenders: Vec<peers::Contender> = profiles
        .iter()
        .map(|p| peers::Contender::Ctp(p.clone()))
        .collect();
    contenders.extend(peers.iter().map(|p| peers::Contender::Peer(p.clone())));
    for c in &contenders {
        if !a.json {
            eprintln!("ctp bench: {} …", c.name());
        }
        let mut goodput = Vec::new();
        let mut snd = Vec::new();
        let mut rcv = Vec::new();
        let mut status = "ok".to_string();
        for _ in 0..a.repeat {
            match env.run(c).await {
                Ok(m) => {
                    goodput.push(m.goodput_mbps);
                    snd.push(m.sender_cpu_s * 1e9 / bytes as f64);
                    rcv.push(m.receiver_cpu_s * 1e9 / bytes as f64);
                }
                Err(e) => {
                    status = e;
                    break;
                }
            }
        }
        rows.push(Row {
            name: c.name(),
            status,
            goodput_mbps: median(goodput),
            sender_cpu_s_per_gb: median(snd),
            receiver_cpu_s_per_gb: median(rcv),
            ctp_ratio: None,
        });
    }
    let reference = rows.first().and_then(|r| r.goodput_mbps);
    for r in rows.iter_mut().skip(1) {
        r.ctp_ratio = match (reference, r.goodput_mbps) {
            (Some(c), Some(p)) if p > 0.0 => Some(c / p),
            _ => None,
        };
    }
    if let Some(path) = &a.svg {
        std::fs::write(
            path,
            svg::bars(
                &rows,
                &format!("loopback, {} per run", crate::summary::human_bytes(bytes)),
            ),
        )
        .map_err(|e| Failure::Transfer(anyhow::anyhow!("writing {}: {e}", path.display())))?;
    }
    if a.json {
        outln!(
            "{}",
            serde_json::json!({ "path": a.path, "bytes": bytes, "repeat": a.repeat, "rows": rows })
        );
        return Ok(());
    }
    outln!(
        "path: {}   bytes per run: {}   repetitions: {} (median)",
        a.path,
        crate::summary::human_bytes(bytes),
        a.repeat
    );
    outln!(
        "{:<22} {:>12} {:>12} {:>12} {:>10}  status",
        "contender",
        "goodput",
        "snd CPU",
        "rcv CPU",
        "ctp ÷ it"
    );
    let f = |v: Option<f64>, unit: &str| v.map_or("—".to_string(), |x| format!("{x:.1}{unit}"));
    for r in &rows {
        outln!(
            "{:<22} {:>12} {:>12} {:>12} {:>10}  {}",
            r.name,
            f(r.goodput_mbps, " Mb/s"),
            f(r.sender_cpu_s_per_gb, " s/GB"),
            f(r.receiver_cpu_s_per_gb, " s/GB"),
            r.ctp_ratio.map_or("—".to_string(), |x| format!("{x:.2}")),
            r.status
        );
    }
    Ok(())
}
