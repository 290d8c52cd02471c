//! Scenario files: every shipped one parses; errors name the key and the line.

use ctp_sim::scenario::Scenario;
use std::path::Path;

const BASE: &str = r#"name = "t"
duration = "1s"

[bottleneck]
bandwidth = "10Mbps"
delay = "5ms"
"#;

fn err(extra: &str) -> String {
    let src = format!("{BASE}{extra}");
    match Scenario::parse(&src, "t.toml") {
        Ok(_) => panic!("accepted:\n{src}"),
        Err(e) => e.to_string(),
    }
}

/// Inserts a top-level `line` as line 3.
fn err_top(line: &str) -> String {
    let src = BASE.replacen(
        "duration = \"1s\"\n",
        &format!("duration = \"1s\"\n{line}\n"),
        1,
    ) + "[[flow]]\n";
    match Scenario::parse(&src, "t.toml") {
        Ok(_) => panic!("accepted:\n{src}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn every_shipped_scenario_parses_and_has_runs() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).expect("scenarios/") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "toml") {
            let sc = Scenario::load(&p).unwrap_or_else(|e| panic!("{e}"));
            let (runs, _) = sc.plan(None).expect("runs");
            assert!(!runs.is_empty(), "{}", p.display());
            n += 1;
        }
    }
    assert!(n >= 6, "only {n} scenarios");
}

#[test]
fn runs_cross_profiles_with_every_congestion_control_and_skip_what_cannot_compose() {
    let src = BASE.replacen(
        "duration = \"1s\"\n",
        "duration = \"1s\"\nprofiles = [\"reliable\", \"ctp-minimal\"]\ncc = [\"profile\", \"cubic\", \"bbr\"]\n",
        1,
    ) + "[[flow]]\n";
    let sc = Scenario::parse(&src, "t.toml").expect("valid");
    let (runs, skipped) = sc.plan(None).unwrap();
    let names: Vec<_> = runs
        .iter()
        .map(|r| format!("{}/{}", r.profile, r.cc))
        .collect();
    // ctp-minimal has no acknowledgements, so only its own (absent) policy runs.
    assert_eq!(
        names,
        [
            "reliable/newreno (own)",
            "reliable/cubic",
            "reliable/bbr",
            "ctp-minimal/none (own)"
        ]
    );
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(skipped[0].starts_with("ctp-minimal/cubic"));
    // The controller is really in the composition.
    let m = runs[1].config.flows[0].profile.micros;
    assert!(m.has(ctp_proto::MicroId::Cc) && !m.has(ctp_proto::MicroId::NewReno));
    assert!(runs[0].config.flows[0]
        .profile
        .micros
        .has(ctp_proto::MicroId::NewReno));
}

#[test]
fn a_valid_minimal_scenario_parses() {
    Scenario::parse(&format!("{BASE}\n[[flow]]\n"), "t.toml").expect("valid");
}

#[test]
fn a_flow_may_name_its_own_profile() {
    let src = BASE.replacen(
        "duration = \"1s\"\n",
        "duration = \"1s\"\nprofiles = [\"reliable\"]\ncc = [\"profile\"]\n",
        1,
    ) + "[[flow]]\n[[flow]]\nprofile = \"datagram\"\n";
    let sc = Scenario::parse(&src, "t.toml").expect("valid");
    let runs = sc.runs(None).unwrap();
    assert_eq!(runs.len(), 1);
    let names: Vec<_> = runs[0]
        .config
        .flows
        .iter()
        .map(|f| f.profile.name.as_str())
        .collect();
    assert_eq!(names, ["reliable", "datagram"]);
}

#[test]
fn unknown_keys_name_the_key_and_line() {
    let e = err_top("colour = \"red\"");
    assert!(e.contains("t.toml:3") && e.contains("colour"), "{e}");
    let e = err("[[flow]]\n[bottleneck.extra]\n");
    assert!(e.contains("t.toml:8") && e.contains("extra"), "{e}");
    let e = err("[[flow]]\nstrat = \"1s\"\n");
    assert!(e.contains("t.toml:8") && e.contains("strat"), "{e}");
}

#[test]
fn impossible_values_name_the_key_and_line() {
    // Negative bandwidth (line 5 of BASE replaced).
    let src = BASE.replace("\"10Mbps\"", "\"-10Mbps\"") + "[[flow]]\n";
    let e = Scenario::parse(&src, "t.toml").unwrap_err().to_string();
    assert!(e.contains("t.toml:5") && e.contains("negative"), "{e}");
    // Loss above 1.
    let e = err("[[flow]]\n[bottleneck.loss]\nmodel = \"bernoulli\"\np = 1.5\n");
    assert!(e.contains("bottleneck.loss") && e.contains("1.5"), "{e}");
    // A flow stopping before it starts.
    let e = err("[[flow]]\nstart = \"2s\"\nstop = \"1s\"\n");
    assert!(e.contains("t.toml:9") && e.contains("flow[0].stop"), "{e}");
    // Unknown profile, listing the known ones.
    let e = err_top("profiles = [\"reliable\", \"turbo\"]");
    assert!(
        e.contains("t.toml:3") && e.contains("turbo") && e.contains("reliable, datagram"),
        "{e}"
    );
    // Unknown congestion control, listing the known ones.
    let e = err_top("cc = [\"warp\"]");
    assert!(
        e.contains("t.toml:3") && e.contains("warp") && e.contains("newreno, cubic"),
        "{e}"
    );
    // A parameter the engine rejects.
    let e = err("[params]\nflow_window = 1\n[[flow]]\n");
    assert!(
        e.contains("t.toml:8") && e.contains("params.flow_window"),
        "{e}"
    );
    // A sweep value out of range.
    let e = err("[[flow]]\n[sweep]\nkey = \"loss\"\nvalues = [0.1, 2.0]\n");
    assert!(e.contains("t.toml:10") && e.contains("sweep.values"), "{e}");
    // Unknown per-flow profile and congestion control.
    let e = err("[[flow]]\nprofile = \"warp\"\n");
    assert!(
        e.contains("t.toml:8") && e.contains("flow[0].profile") && e.contains("datagram"),
        "{e}"
    );
    let e = err("[[flow]]\ncc = \"warp\"\n");
    assert!(
        e.contains("t.toml:8") && e.contains("flow[0].cc") && e.contains("bbr"),
        "{e}"
    );
    // A flow whose RTT is below the bottleneck's own round trip.
    let e = err("[[flow]]\nrtt = \"1ms\"\n");
    assert!(e.contains("t.toml:8") && e.contains("flow[0].rtt"), "{e}");
    // An unknown metric to report, listing the known ones.
    let e = err_top("metrics = [\"goodput\", \"happiness\"]");
    assert!(
        e.contains("t.toml:3")
            && e.contains("`metrics`")
            && e.contains("happiness")
            && e.contains("efficiency, jain"),
        "{e}"
    );
}

#[test]
fn the_table_reports_the_metrics_the_scenario_names_and_json_all() {
    let src = BASE.replacen(
        "duration = \"1s\"\n",
        "duration = \"1s\"\nprofiles = [\"reliable\"]\ncc = [\"profile\"]\nmetrics = [\"goodput\", \"efficiency\", \"completion\"]\n",
        1,
    ) + "[[flow]]\nbytes = 100000\n";
    let sc = Scenario::parse(&src, "t.toml").expect("valid");
    let rep = ctp_sim::report::run_scenario(&sc, None, &mut |_, _, _| {}).expect("runs");
    let table = ctp_sim::report::table(&rep);
    let lines: Vec<&str> = table.lines().collect();
    // The header: the run-level metric named, in the table's order, and no other.
    let header: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(header, ["run", "effic"], "{table}");
    // A flow line: the per-flow metrics named, in the table's order, and no other.
    let flow = lines[3].trim_start();
    assert!(
        flow.starts_with("flow 0: goodput") && flow.contains("done"),
        "{table}"
    );
    for absent in ["loss", "retx", "bytes", "peak buf", "rtt x"] {
        assert!(!flow.contains(absent), "{absent} in {flow}");
    }
    assert!(lines[4].trim_start().starts_with("trace "), "{table}");
    // JSON carries every metric whatever the table shows.
    let json = serde_json::to_string(&rep).expect("serialises");
    for key in ["\"jain\"", "\"loss_rate\"", "\"stability\""] {
        assert!(json.contains(key), "{key} missing from the JSON");
    }
    // Without `metrics`, every column.
    let all = ctp_sim::report::table(
        &ctp_sim::report::run_scenario(
            &Scenario::parse(
                &src.replace(
                    "metrics = [\"goodput\", \"efficiency\", \"completion\"]\n",
                    "",
                ),
                "t.toml",
            )
            .expect("valid"),
            None,
            &mut |_, _, _| {},
        )
        .expect("runs"),
    );
    let header: Vec<&str> = all
        .lines()
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "run",
            "effic",
            "jain",
            "FI",
            "stability",
            "aggr",
            "Mb/s",
            "pkts",
            "kpkt/cpu-s"
        ],
        "{all}"
    );
}
