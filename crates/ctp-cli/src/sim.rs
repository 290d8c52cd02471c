//! `ctp sim`: run a simulator scenario or a chaos campaign.

use crate::cli::SimArgs;
use crate::Failure;
use anyhow::{anyhow, Context};
use ctp_sim::{chaos, report, scenario::Scenario};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;

/// Finds a scenario: a path as given, or `scenarios/NAME.toml`.
fn locate(name: &str) -> PathBuf {
    let p = PathBuf::from(name);
    if p.exists() {
        return p;
    }
    let q = PathBuf::from("scenarios").join(format!("{name}.toml"));
    if q.exists() {
        q
    } else {
        p
    }
}

/// Runs `ctp sim`.
pub fn run(a: SimArgs) -> Result<(), Failure> {
    if a.scenario == "chaos" {
        return run_chaos(&a);
    }
    let path = locate(&a.scenario);
    let sc = Scenario::load(&path).map_err(|e| Failure::Usage(e.to_string()))?;
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
        println!(
            "{}",
            serde_json::to_string_pretty(&rep).map_err(|e| anyhow!(e))?
        );
    } else {
        print!("{}", report::table(&rep));
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

fn run_chaos(a: &SimArgs) -> Result<(), Failure> {
    let n = a.seeds.unwrap_or(100);
    let start = a.start.unwrap_or(0);
    let bar = ProgressBar::new(n);
    let mut failed = 0u64;
    for seed in start..start.saturating_add(n) {
        let v = chaos::run_seed(seed);
        if !v.failures.is_empty() {
            failed += 1;
            bar.suspend(|| {
                eprintln!("seed {seed} FAILED: {}", v.failures.join("; "));
                eprintln!("  replay: {}", chaos::replay_command(seed));
            });
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let summary = format!(
        "chaos: {n} seeds from {start}: {} passed, {failed} failed",
        n - failed
    );
    if a.json {
        println!(
            "{}",
            serde_json::json!({"seeds": n, "start": start, "failed": failed})
        );
    } else {
        println!("{summary}");
    }
    if failed > 0 {
        return Err(Failure::Transfer(anyhow!(summary)));
    }
    Ok(())
}
