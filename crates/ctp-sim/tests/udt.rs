//! The `udt` profile (UDT4 wire format) inside the simulator: its endpoints take the wire
//! format of the flow's profile.

use ctp_sim::report::run_scenario;
use ctp_sim::scenario::Scenario;

#[test]
fn a_udt_bulk_flow_completes_verified_over_a_lossy_bottleneck() {
    let sc = Scenario::parse(
        r#"
name = "udt-bulk"
duration = "60s"
profiles = ["udt"]
cc = ["udt"]
stop_when_done = true
[bottleneck]
bandwidth = "100Mbps"
delay = "20ms"
loss = { model = "bernoulli", p = 0.01 }
[[flow]]
bytes = 4000000
"#,
        "udt.toml",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let rep = run_scenario(&sc, None, &mut |_, _, _| {}).expect("runs");
    let f = &rep.runs[0].result.flows[0];
    assert!(f.completed, "{f:?}");
    assert_eq!(f.bytes_delivered, 4_000_000);
    assert!(f.violations.is_empty(), "{:?}", f.violations);
    assert!(f.retransmissions > 0, "1% loss must cost retransmissions");
}
