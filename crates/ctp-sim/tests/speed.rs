//! Simulator speed: simulated packets per CPU second. Ignored by default (it measures, it
//! does not assert a speed); run with
//! `cargo test --release -p ctp-sim --test speed -- --ignored --nocapture`.
//! `CTP_SIM_SPEED_DURATION=2s` shortens the run (for instruction counts under callgrind,
//! which, unlike CPU time, do not move with the machine's load).

use ctp_sim::report::run_scenario;
use ctp_sim::scenario::Scenario;

const BENCH: &str = r#"
name = "speed"
duration = "10s"
interval = "1s"
profiles = ["reliable"]
cc = ["profile"]

[bottleneck]
bandwidth = "1Gbps"
delay = "5ms"
queue_packets = 1000

[params]
send_buffer = 33554432

[[flow]]

[[flow]]
start = "1s"
"#;

#[test]
#[ignore]
fn simulated_packets_per_cpu_second() {
    let text = match std::env::var("CTP_SIM_SPEED_DURATION") {
        Ok(d) => BENCH.replace("duration = \"10s\"", &format!("duration = \"{d}\"")),
        Err(_) => BENCH.to_string(),
    };
    let sc = Scenario::parse(&text, "speed.toml").expect("parses");
    let rep = run_scenario(&sc, None, &mut |_, _, _| {}).expect("runs");
    let r = &rep.runs[0];
    let hops: u64 = r.result.links.iter().map(|l| l.offered).sum();
    println!(
        "{} datagrams ({} link hops) in {:.2} CPU s ({:.2} s wall): {:.0} datagrams/CPU s, {:.0} hops/CPU s; aggregate {:.0} Mb/s",
        r.result.packets,
        hops,
        r.result.cpu_secs,
        r.result.wall_secs,
        r.metrics.packets_per_sec,
        hops as f64 / r.result.cpu_secs,
        r.metrics.aggregate_mbps
    );
    assert!(r.result.packets > 100_000);
}
