//! A seed and a scenario give the same trace, byte for byte; another seed gives another.

use ctp_sim::report::run_scenario;
use ctp_sim::scenario::Scenario;

const SMALL: &str = r#"
name = "small"
duration = "3s"
interval = "100ms"
seed = 5
profiles = ["reliable", "datagram", "ctp-audio"]
cc = ["profile", "cubic"]

[bottleneck]
bandwidth = "10Mbps"
delay = "10ms"
queue_packets = 50
loss = { model = "gilbert-elliott", p_good_bad = 0.01, p_bad_good = 0.3 }
reorder = 0.02
duplicate = 0.01
jitter = "1ms"

[[flow]]
start = "0s"

[[flow]]
start = "500ms"
stop = "2500ms"
rtt = "60ms"
"#;

fn hashes(seed: Option<u64>) -> Vec<String> {
    let sc = Scenario::parse(SMALL, "small.toml").expect("parses");
    let rep = run_scenario(&sc, seed, &mut |_, _, _| {}).expect("runs");
    rep.runs
        .iter()
        .map(|r| r.metrics.trace_hash.clone())
        .collect()
}

#[test]
fn same_seed_same_trace_different_seed_different_trace() {
    let a = hashes(None);
    let b = hashes(None);
    assert_eq!(a.len(), 6, "one run per profile and congestion control");
    assert_eq!(a, b);
    let c = hashes(Some(6));
    for (x, y) in a.iter().zip(&c) {
        assert_ne!(x, y);
    }
    // Profiles and controllers behave differently too.
    for i in 0..a.len() {
        for j in 0..i {
            assert_ne!(a[i], a[j], "runs {i} and {j}");
        }
    }
}
