//! The `udt` profile (UDT4 wire format) inside the simulator: its endpoints take the wire
//! format of the flow's profile.

mod common;

use common::{assert_delivered_exactly, run};
use ctp_sim::report::ScenarioReport;

/// One 4-MB flow of the `udt` profile under UDT native control over a 100 Mb/s bottleneck
/// of one-way `delay` with the given `impairments` (lines of its `[bottleneck]` table).
fn udt_bulk_run(delay: &str, impairments: &str) -> ScenarioReport {
    run(&format!(
        r#"
name = "udt-bulk"
duration = "60s"
profiles = ["udt"]
cc = ["udt"]
stop_when_done = true
[bottleneck]
bandwidth = "100Mbps"
delay = "{delay}"
{impairments}
[[flow]]
bytes = 4000000
"#
    ))
}

#[test]
fn a_udt_bulk_flow_completes_verified_over_a_lossy_bottleneck() {
    let rep = udt_bulk_run("20ms", r#"loss = { model = "bernoulli", p = 0.01 }"#);
    let f = &rep.runs[0].result.flows[0];
    assert_delivered_exactly(f, 4_000_000, "udt");
    assert!(f.retransmissions > 0, "1% loss must cost retransmissions");
}

#[test]
fn window_controllers_over_the_udt4_wire_cut_once_per_loss_event() {
    // The loss-sweep path without random loss: slow start overflows the 200-packet queue
    // and the NAKs of that one overflow arrive over a round trip. NewReno and CUBIC must
    // cut once for them, as over the composed engine (2.2 s), not once per NAK (a window
    // of two packets: 29 s for the same 4 MB).
    let rep = run(r#"
name = "udt-window-cc"
duration = "60s"
profiles = ["udt"]
cc = ["newreno", "cubic"]
stop_when_done = true
[bottleneck]
bandwidth = "20Mbps"
delay = "50ms"
queue_packets = 200
[[flow]]
bytes = 4000000
"#);
    for r in &rep.runs {
        let f = &r.result.flows[0];
        assert_delivered_exactly(f, 4_000_000, &r.cc);
        let done_s = f.completion_us.expect("completed") as f64 / 1e6;
        assert!(done_s < 4.0, "{}: {done_s} s", r.cc);
        assert!(
            f.retransmissions > 0,
            "{}: slow start must overflow the queue",
            r.cc
        );
    }
}

#[test]
fn corruption_on_the_udt4_wire_is_dropped_by_the_modelled_udp_checksum() {
    // UDT4's packets carry no integrity check of their own: a flipped bit would reach the
    // endpoint as data (or as a wrong sequence number) if the receiving host's UDP checksum
    // did not drop the datagram first.
    let rep = udt_bulk_run("10ms", "corrupt = 0.02\nimpair_reverse = true");
    let run = &rep.runs[0];
    let corrupted: u64 = run.result.links.iter().map(|l| l.corrupted).sum();
    assert!(corrupted > 20, "only {corrupted} datagrams corrupted");
    assert_eq!(run.result.udp_checksum_drops, corrupted);
    assert_eq!(run.metrics.corrupt_dropped, corrupted);
    assert_eq!(
        run.result.bad_checksum, 0,
        "UDT4 endpoints check nothing themselves"
    );
    assert_delivered_exactly(
        &run.result.flows[0],
        4_000_000,
        "udt over a corrupting link",
    );
}

#[test]
fn a_udt_flow_resends_a_tail_lost_in_an_outage_though_the_peer_keeps_alive() {
    // Chaos seed 1431 as a scenario: three flows fill a 1 Mb/s bottleneck's 500-packet
    // queue (seconds of queueing: the EXP interval, RTT + 4·RTTVar, grows above a second),
    // and the `udt` flow's last packets die in a 1.7-s outage. No later packet reveals the
    // gap, so only the sender's EXP timer can presume them lost; the idle receiver's
    // keep-alives (one a second) kept restarting it until the run's end.
    let rep = run(r#"
name = "udt-tail"
duration = "120s"
seed = 1431
nic = "10Gbps"
profiles = ["reliable"]
cc = ["profile"]
stop_when_done = true
[bottleneck]
bandwidth = "1Mbps"
delay = "49821us"
queue_packets = 500
reorder = 0.14261578
reorder_extra = "7510us"
outages = [{ at = "1273816us", for = "1682343us" }]
[[flow]]
start = "216788us"
rtt = "127964us"
bytes = 124261
[[flow]]
profile = "udt-dgram"
start = "1184886us"
rtt = "105090us"
bytes = 102060
message_size = 3825
[[flow]]
profile = "udt"
start = "435661us"
rtt = "132632us"
bytes = 107482
"#);
    for (i, f) in rep.runs[0].result.flows.iter().enumerate() {
        assert!(
            f.completed,
            "flow {i} ({}) did not complete: {} of {} bytes delivered, retransmissions {}",
            f.profile, f.bytes_delivered, f.bytes_sent, f.retransmissions
        );
    }
    let f = &rep.runs[0].result.flows[2];
    assert_delivered_exactly(f, 107_482, "udt, tail lost in an outage");
    assert!(f.retransmissions > 0, "the tail must have been sent again");
}

#[test]
fn a_delay_based_controller_over_the_udt4_wire_takes_the_paths_own_base_rtt() {
    // The first ACK carries UDT's initial RTT, 100 ms, on this 104-ms path. Vegas took it
    // for the base RTT, saw a standing queue of 4 % of its window that was not there and
    // held the flow at 25 Mb/s; from the sender's own samples it opens as over the
    // composed engine, up to the send buffer (8 MiB: ~640 Mb/s at 104 ms).
    let rep = run(r#"
name = "udt-vegas"
duration = "8s"
profiles = ["udt"]
cc = ["vegas"]
[bottleneck]
bandwidth = "1Gbps"
delay = "52ms"
queue_packets = 8000
[[flow]]
"#);
    let m = &rep.runs[0].metrics;
    assert!(
        m.aggregate_mbps > 300.0,
        "udt/vegas: {:.1} Mb/s",
        m.aggregate_mbps
    );
    assert_eq!(rep.runs[0].result.flows[0].violations, Vec::<String>::new());
    assert_eq!(
        rep.runs[0].result.flows[0].limit_violations,
        Vec::<String>::new()
    );
}
