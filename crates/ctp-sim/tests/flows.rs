//! Flow kinds (bulk, constant bit rate, ping-pong), several paths, interface back-pressure
//! and queue disciplines, each pinned on a small scenario.

mod common;

use common::run;
use ctp_sim::report::ScenarioReport;
use ctp_sim::scenario::Scenario;

/// A flow's goodput per sample interval of `interval_s` seconds, Mb/s.
fn goodput_mbps(f: &ctp_sim::FlowResult, interval_s: f64) -> Vec<f64> {
    f.samples
        .iter()
        .map(|s| s.bytes as f64 * 8.0 / 1e6 / interval_s)
        .collect()
}

#[test]
fn ping_pong_on_a_clean_path_measures_the_propagation_round_trip() {
    let rep = run(r#"
name = "pp"
duration = "10s"
profiles = ["reliable"]
stop_when_done = true
[bottleneck]
bandwidth = "100Mbps"
delay = "5ms"
[[flow]]
kind = "ping-pong"
rounds = 50
message_size = 64
"#);
    let f = &rep.runs[0].result.flows[0];
    assert!(f.completed, "{f:?}");
    assert_eq!(f.round_trips_us.len(), 50);
    assert_eq!(f.msgs_delivered, 50);
    // 10 ms of propagation plus serialisation of two small packets on each of the four
    // links: every round lies between 10 and 10.5 ms.
    for &rtt in &f.round_trips_us {
        assert!((10_000..10_500).contains(&rtt), "round trip {rtt} µs");
    }
    assert!(f.violations.is_empty(), "{:?}", f.violations);
    assert!(f.limit_violations.is_empty(), "{:?}", f.limit_violations);
}

#[test]
fn ping_pong_under_loss_gives_up_rounds_of_an_unreliable_profile_after_the_deadline() {
    let rep = run(r#"
name = "pp-loss"
duration = "60s"
profiles = ["datagram"]
stop_when_done = true
[bottleneck]
bandwidth = "100Mbps"
delay = "5ms"
loss = { model = "bernoulli", p = 0.2 }
[[flow]]
kind = "ping-pong"
rounds = 200
deadline = "100ms"
message_size = 64
"#);
    let f = &rep.runs[0].result.flows[0];
    assert!(f.completed);
    assert_eq!(f.msgs_sent, 200);
    // About 20% of requests are lost (the reverse direction is clean).
    let answered = f.msgs_delivered;
    assert!(
        (140..=180).contains(&answered),
        "{answered} of 200 answered"
    );
    assert!(f.round_trips_us.iter().all(|&r| r < 100_000));
}

fn cbr(deadline: &str) -> ctp_sim::FlowResult {
    // 128 kb/s of 160-byte messages = 100 messages per second, for 10 s, over a 20 ms path.
    let rep = run(&format!(
        r#"
name = "cbr"
duration = "30s"
profiles = ["datagram"]
stop_when_done = true
[bottleneck]
bandwidth = "10Mbps"
delay = "20ms"
[[flow]]
kind = "cbr"
rate = "128kbps"
message_size = 160
bytes = 160000
deadline = "{deadline}"
"#
    ));
    rep.runs[0].result.flows[0].clone()
}

#[test]
fn a_cbr_flow_sends_at_its_rate_and_counts_late_messages() {
    let f = cbr("25ms");
    assert_eq!(f.msgs_sent, 1000);
    assert_eq!(f.msgs_delivered, 1000, "a clean path loses nothing");
    // One-way: 20 ms plus serialisation; all within 25 ms, none within 19 ms.
    assert_eq!(f.msgs_on_time, 1000);
    assert!(
        (20_000..21_000).contains(&f.latency_max_us),
        "{}",
        f.latency_max_us
    );
    // Completion takes the 10 s the rate implies.
    let done = f.completion_us.unwrap();
    assert!((9_900_000..10_500_000).contains(&done), "{done}");
    let f = cbr("19ms");
    assert_eq!((f.msgs_delivered, f.msgs_on_time), (1000, 0));
}

#[test]
fn a_flow_on_a_second_path_sees_that_path_and_not_the_bottleneck() {
    let rep = run(r#"
name = "paths"
duration = "20s"
profiles = ["reliable"]
stop_when_done = true
[bottleneck]
bandwidth = "10Mbps"
delay = "10ms"
[[path]]
bandwidth = "10Mbps"
delay = "40ms"
[[flow]]
bytes = 200000
[[flow]]
bytes = 200000
path = 1
"#);
    let r = &rep.runs[0].result;
    assert_eq!(r.flows[0].prop_rtt_us, 20_000);
    assert_eq!(r.flows[1].prop_rtt_us, 80_000);
    // Each path carried only its own flow's data.
    let (p0, p1) = (&r.links[0], &r.links[2]);
    assert!(p0.carried_bytes >= 200_000 && p0.carried_bytes < 300_000);
    assert!(p1.carried_bytes >= 200_000 && p1.carried_bytes < 300_000);
    for f in &r.flows {
        assert!(f.completed && f.bytes_delivered == 200_000);
    }
    // A flow on a path that does not exist is an error naming the key.
    let e = Scenario::parse(
        "name = \"x\"\nduration = \"1s\"\n[bottleneck]\nbandwidth = \"1Mbps\"\n[[flow]]\npath = 2\n",
        "x.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("x.toml:6") && e.contains("flow[0].path"), "{e}");
}

#[test]
fn a_profile_without_congestion_control_is_held_to_its_interface_rate() {
    let rep = run(r#"
name = "blast"
duration = "2s"
profiles = ["ctp-minimal"]
nic = "100Mbps"
[bottleneck]
bandwidth = "10Mbps"
delay = "5ms"
queue_packets = 50
[[flow]]
"#);
    let r = &rep.runs[0].result;
    let access = &r.links[2];
    // The interface never drops (the sender waits for it) and never exceeds 100 Mb/s.
    assert_eq!(access.queue_drops, 0);
    assert!(
        access.carried_bytes * 8 <= 100_000_000 * 2 + 12_000,
        "{access:?}"
    );
    assert!(access.carried_bytes * 8 > 90_000_000 * 2, "{access:?}");
    // The bottleneck drops the excess at its queue.
    assert!(r.links[0].queue_drops > r.links[0].carried / 2);
}

#[test]
fn codel_keeps_the_standing_queue_short_where_drop_tail_fills_it() {
    let scenario = |aqm: &str| {
        format!(
            r#"
name = "aqm"
duration = "20s"
profiles = ["reliable"]
[bottleneck]
bandwidth = "10Mbps"
delay = "10ms"
queue_packets = 1000
{aqm}
[params]
send_buffer = 33554432
[[flow]]
"#
        )
    };
    let tail = run(&scenario(""));
    let codel = run(&scenario("aqm = { kind = \"codel\" }"));
    let inflation = |r: &ScenarioReport| r.runs[0].metrics.flows[0].rtt_inflation.unwrap();
    let (t, c) = (inflation(&tail), inflation(&codel));
    // 1000 packets of 1.2 kB at 10 Mb/s is ~1 s of queue against a 20 ms path.
    assert!(t > 5.0, "drop-tail RTT inflation {t}");
    assert!(c < 3.0, "CoDel RTT inflation {c}");
    assert!(codel.runs[0].result.links[0].aqm_drops > 0);
    assert_eq!(tail.runs[0].result.links[0].aqm_drops, 0);
    // Both still use the link.
    for r in [&tail, &codel] {
        assert!(r.runs[0].metrics.efficiency.unwrap() > 0.8);
    }
}

#[test]
fn scp_start_up_fills_a_long_path_without_overrunning_a_one_bdp_queue() {
    // 20 Mb/s, 100 ms RTT, a queue of about one bandwidth-delay product, no random loss:
    // the SCP policy of `ctp-video` must find the link rate without dropping a packet in
    // start-up (an unreliable profile never gets those back) and then keep the link busy.
    let rep = run(r#"
name = "scp-start-up"
duration = "60s"
interval = "100ms"
profiles = ["ctp-video"]
cc = ["profile"]
stop_when_done = true
[bottleneck]
bandwidth = "20Mbps"
delay = "50ms"
queue_packets = 200
[[flow]]
bytes = 8000000
"#);
    let r = &rep.runs[0];
    let f = &r.result.flows[0];
    assert!(f.completed, "{f:?}");
    let drops: u64 = r.result.links.iter().map(|l| l.queue_drops).sum();
    assert_eq!(drops, 0, "the queue overflowed");
    assert_eq!(
        f.bytes_delivered, f.bytes_sent,
        "{:?} {:?}",
        f.sender_close, f.receiver_close
    );
    // A second of cruising before the end runs at the link rate (100 ms samples).
    let mbps = goodput_mbps(f, 0.1);
    let cruise = &mbps[mbps.len() - 13..mbps.len() - 3];
    assert!(
        cruise.iter().all(|&g| g > 18.0),
        "cruise goodput {cruise:?} Mb/s of 20"
    );
}

#[test]
fn udt_and_bbr_fill_a_path_whose_window_exceeds_a_thousand_packets() {
    // 200 Mb/s × 104 ms is ~1800 packets in flight: both algorithms read delivery-rate
    // samples, which must exist for every packet of such a window (they once came from a
    // ring of 1024 slots and stopped there), and UDT needs the receiver's packet-pair
    // capacity report to know how much room is left.
    let rep = run(r#"
name = "long-window"
duration = "12s"
interval = "1s"
profiles = ["reliable"]
cc = ["udt", "bbr"]
[bottleneck]
bandwidth = "200Mbps"
delay = "52ms"
queue_packets = 2000
[params]
send_buffer = 33554432
[[flow]]
"#);
    for r in &rep.runs {
        let f = &r.result.flows[0];
        let mbps = goodput_mbps(f, 1.0);
        // Seconds 8-11 at the link rate; BBR's ProbeRTT (4 packets for 200 ms once the
        // min-RTT estimate is 10 s old) may dent one of them, so the mean is judged, with a
        // floor per second.
        let late = &mbps[8..12];
        let mean = late.iter().sum::<f64>() / late.len() as f64;
        assert!(
            mean > 180.0 && late.iter().all(|&g| g > 150.0),
            "{}: goodput {mbps:?} Mb/s of 200",
            r.cc
        );
        // The application writes just in time (`SEND_AHEAD`), yet keeps the path full:
        // the sender holds what is in flight or awaits retransmission (UDT's window runs
        // to ~11 MB here) and a little unsent, not 32 MiB of send buffer on top.
        assert!(
            f.peak_sender_buffered < 16 << 20,
            "{}: {} bytes buffered at the sender",
            r.cc,
            f.peak_sender_buffered
        );
    }
}

#[test]
fn udt_noisy_link_mode_keeps_the_link_at_one_percent_random_loss_where_newreno_collapses() {
    // UDT §3.3.2 on a 100 Mb/s, 100 ms path with 1 % random (non-congestion) loss.
    let rep = run(r#"
name = "noisy"
duration = "20s"
interval = "1s"
profiles = ["reliable"]
cc = ["udt-noisy", "profile"]
[bottleneck]
bandwidth = "100Mbps"
delay = "50ms"
queue_packets = 1000
loss = { model = "bernoulli", p = 0.01 }
[params]
send_buffer = 33554432
[[flow]]
"#);
    // Mean goodput of the second half (past the ramp-up), Mb/s of 100.
    let kept = |cc: &str| {
        let r = rep.runs.iter().find(|r| r.cc.starts_with(cc)).expect(cc);
        goodput_mbps(&r.result.flows[0], 1.0)[10..20]
            .iter()
            .sum::<f64>()
            / 10.0
    };
    assert!(kept("udt-noisy") >= 80.0, "udt-noisy {}", kept("udt-noisy"));
    assert!(kept("newreno") < 20.0, "newreno {}", kept("newreno"));
}

#[test]
fn udt_shares_a_link_among_round_trip_times_fairly_by_the_papers_index_where_newreno_does_not() {
    // The rtt-fairness experiment (UDT paper §5.2.1) scaled down: three flows with round
    // trips of 1, 16 and 60 ms on 200 Mb/s. FI is the paper's Table 4 index (Jain of each
    // flow's mean goodput over the stage); NewReno gives the short-RTT flow most of the link.
    let rep = run(r#"
name = "small-rtt-fairness"
duration = "12s"
interval = "500ms"
profiles = ["reliable"]
cc = ["udt", "profile"]
[bottleneck]
bandwidth = "200Mbps"
delay = "10us"
queue_packets = 1000
[params]
send_buffer = 33554432
[[flow]]
rtt = "1ms"
[[flow]]
rtt = "16ms"
[[flow]]
rtt = "60ms"
"#);
    let m = |cc: &str| {
        &rep.runs
            .iter()
            .find(|r| r.cc.starts_with(cc))
            .expect(cc)
            .metrics
    };
    let udt = m("udt");
    assert!(
        udt.efficiency.unwrap() >= 0.90,
        "udt efficiency {:?}",
        udt.efficiency
    );
    // The scaled-down run lands between 0.98 and 0.99 depending on details as small as
    // 4 bytes of packet header (0.981 with 4-byte packet numbers, ≥ 0.99 with 2-byte ones);
    // the contrast with NewReno is what this test pins. Issue 4's ≥ 0.99 is judged on the
    // full scenarios (`ctp sim rtt-fairness`, `udt-fairness-paper`).
    assert!(
        udt.stage_jain.unwrap() >= 0.98,
        "udt FI {:?}",
        udt.stage_jain
    );
    // NewReno favours the short-RTT flow: its index stays well below UDT's (0.55–0.81 in
    // this scaled-down run as packet sizes changed, against UDT's 0.98–0.99).
    let reno = m("newreno");
    assert!(
        reno.stage_jain.unwrap() + 0.1 < udt.stage_jain.unwrap(),
        "newreno FI {:?} against udt {:?}",
        reno.stage_jain,
        udt.stage_jain
    );
}

#[test]
fn bbr_fair_shares_a_queue_with_newreno_where_bbr_starves_it_and_keeps_a_lossy_path_full() {
    // `friendliness-newreno` shortened: a flow under each controller, then a NewReno flow
    // from 5 s, on 100 Mb/s, 40 ms RTT with a one-BDP drop-tail queue. TCP-friendly here
    // means at least as fair to NewReno as CUBIC, Linux's default, is.
    let shared = run(r#"
name = "friendliness"
duration = "30s"
interval = "1s"
profiles = ["reliable"]
cc = ["bbr-fair", "bbr", "cubic"]
[bottleneck]
bandwidth = "100Mbps"
delay = "20ms"
queue_packets = 350
[params]
send_buffer = 33554432
[[flow]]
[[flow]]
start = "5s"
cc = "newreno"
"#);
    let jain = |cc: &str| {
        let r = shared.runs.iter().find(|r| r.cc == cc).expect(cc);
        r.metrics.jain.expect("two flows ran together")
    };
    let (fair, cubic) = (jain("bbr-fair"), jain("cubic"));
    assert!(
        fair >= 0.8 && fair >= cubic,
        "bbr-fair {fair}, cubic {cubic} beside newreno"
    );
    assert!(jain("bbr") < 0.75, "bbr beside newreno: {}", jain("bbr"));
    // 1 % random loss on an otherwise empty 100 Mb/s, 100 ms path: no queue, so the losses
    // cap nothing (NewReno keeps under 20 Mb/s here: the test above).
    let lossy = run(r#"
name = "noisy"
duration = "20s"
interval = "1s"
profiles = ["reliable"]
cc = ["bbr-fair"]
[bottleneck]
bandwidth = "100Mbps"
delay = "50ms"
queue_packets = 1000
loss = { model = "bernoulli", p = 0.01 }
[params]
send_buffer = 33554432
[[flow]]
"#);
    let kept = goodput_mbps(&lossy.runs[0].result.flows[0], 1.0)[10..20]
        .iter()
        .sum::<f64>()
        / 10.0;
    assert!(kept >= 85.0, "bbr-fair at 1 % loss: {kept} Mb/s");
}

#[test]
fn a_coded_receiver_acknowledges_a_few_packets_at_a_time() {
    // The paper acknowledges every packet: a datagram back (and a wake-up on both sides)
    // per data packet. Several at a time, with the hold reported, keeps the round trip the
    // token control reads the path's.
    let text = r#"
name = "coded-acks"
duration = "30s"
profiles = ["coded"]
cc = ["profile"]
stop_when_done = true
[bottleneck]
bandwidth = "100Mbps"
delay = "20ms"
queue_packets = 400
[[flow]]
bytes = 20000000
"#;
    let sc = Scenario::parse(text, "t.toml").expect("parses");
    let runs = sc.runs(None).expect("runs");
    let routes = &runs[0].config.topology.routes[0];
    let (fwd, back) = (routes[0][1], routes[1][1]);
    let rep = run(text);
    let r = &rep.runs[0].result;
    let f = &r.flows[0];
    assert!(f.completed && f.bytes_delivered == 20_000_000, "{f:?}");
    let (data, acks) = (r.links[fwd].offered, r.links[back].offered);
    assert!(
        acks * 3 <= data,
        "{acks} acknowledgement packets for {data} data packets"
    );
}
