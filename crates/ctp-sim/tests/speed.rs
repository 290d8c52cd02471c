//! Simulator speed: simulated packets per CPU second, counted two ways: datagrams the
//! endpoints emitted (each one built, sealed, checked and parsed by real ctp endpoints), and
//! packet transmissions the links carried (a datagram once per link it crossed: the "PTS"
//! of the packet-level simulation literature). Ignored by default (it measures, it
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
    let m = &r.metrics;
    println!(
        "{} datagrams ({} link transmissions) in {:.2} CPU s ({:.2} s wall): {:.0} datagrams/CPU s, {:.0} transmissions/CPU s; aggregate {:.0} Mb/s",
        r.result.packets,
        m.transmissions,
        r.result.cpu_secs,
        r.result.wall_secs,
        m.packets_per_sec,
        m.transmissions_per_sec,
        m.aggregate_mbps
    );
    assert!(r.result.packets > 100_000);
}
