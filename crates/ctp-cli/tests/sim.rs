//! `ctp sim` end to end: a small scenario with --json and --out, a bad scenario, chaos.

use std::process::Command;

const CTP: &str = env!("CARGO_BIN_EXE_ctp");

const SMALL: &str = r#"name = "tiny"
duration = "2s"
interval = "200ms"
profiles = ["reliable"]
cc = ["profile", "cubic"]

[bottleneck]
bandwidth = "5Mbps"
delay = "10ms"
queue_packets = 30

[[flow]]

[[flow]]
start = "500ms"
"#;

#[test]
fn sim_writes_table_json_svg_and_csv() {
    let dir = tempfile::tempdir().unwrap();
    let sc = dir.path().join("tiny.toml");
    std::fs::write(&sc, SMALL).unwrap();
    let out = dir.path().join("out");
    let o = Command::new(CTP)
        .args([
            "sim",
            sc.to_str().unwrap(),
            "--seed",
            "3",
            "--json",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["name"], "tiny");
    assert_eq!(v["runs"][0]["seed"], 3);
    let eff = v["runs"][0]["metrics"]["efficiency"].as_f64().unwrap();
    assert!(eff > 0.3 && eff <= 1.0, "efficiency {eff}");
    assert_eq!(v["runs"][1]["cc"], "cubic");
    let svg = std::fs::read_to_string(out.join("throughput.svg")).unwrap();
    assert_eq!(svg.matches("<polyline").count(), 2 * 2);
    let csv = std::fs::read_to_string(out.join("throughput.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2 * 2 * 10);

    let o = Command::new(CTP)
        .args(["sim", sc.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success());
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains("reliable/newreno (own)")
            && table.contains("reliable/cubic")
            && table.contains("flow 1"),
        "{table}"
    );
}

#[test]
fn a_bad_scenario_is_a_usage_error_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let sc = dir.path().join("bad.toml");
    std::fs::write(&sc, SMALL.replace("queue_packets", "queue_pakets")).unwrap();
    let o = Command::new(CTP)
        .args(["sim", sc.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("bad.toml:10") && e.contains("queue_pakets"),
        "{e}"
    );
}

#[test]
fn chaos_runs_seeds_and_reports() {
    let o = Command::new(CTP)
        .args(["sim", "chaos", "--seeds", "5", "--start", "10"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("5 seeds from 10: 5 passed"));
}

/// A shipped scenario runs by name from any directory (it is built into the binary), and an
/// unknown name is a usage error that lists the shipped ones.
#[test]
fn shipped_scenarios_run_by_name_anywhere() {
    let elsewhere = tempfile::tempdir().unwrap();
    let o = Command::new(CTP)
        .args(["sim", "rto-latency", "--json"])
        .current_dir(elsewhere.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["name"], "rto-latency",
        "the shipped scenario's report: {v}"
    );
    assert!(v["runs"].as_array().is_some_and(|r| !r.is_empty()));
    let o = Command::new(CTP)
        .args(["sim", "no-such-scenario"])
        .current_dir(elsewhere.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("rto-latency") && err.contains("no scenario"),
        "{err}"
    );
}
