//! Addresses and paths: nodes with several addresses, several paths between two nodes
//! (each with links of its own), NAT rebinding at a given time, paths going down and up.
//!
//! A connection follows its peer to a new address (ctp-proto's path validation): the
//! newest packet from a new address moves it there, a challenge validates the address,
//! and until then at most three times what came from it is sent to it.

mod common;

use common::{assert_delivered_exactly, run};
use ctp_sim::net::NetStats;
use ctp_sim::report::RunReport;
use ctp_sim::scenario::Scenario;
use std::net::SocketAddr;

/// Flow 0's client address by default (given explicitly: a plain run all the same).
const CLIENT: &str = "10.0.0.0:1000";
const SECOND: &str = "10.0.0.2:1000";
const REBOUND: &str = "10.0.0.9:4000";

/// One reliable bulk flow of `bytes` over a 20 Mb/s, 10 ms bottleneck, client at
/// [`CLIENT`], with `flow_extra` appended to its `[[flow]]` table.
fn one_flow(duration: &str, bytes: u64, flow_extra: &str) -> String {
    one_flow_of("reliable", duration, bytes, flow_extra)
}

/// [`one_flow`] with `profile`.
fn one_flow_of(profile: &str, duration: &str, bytes: u64, flow_extra: &str) -> String {
    format!(
        r#"
name = "paths"
duration = "{duration}"
interval = "500ms"
seed = 3
profiles = ["{profile}"]
cc = ["profile"]
stop_when_done = true
[bottleneck]
bandwidth = "20Mbps"
delay = "10ms"
queue_packets = 100
[[flow]]
bytes = {bytes}
client = "{CLIENT}"
{flow_extra}
"#
    )
}

fn net(r: &RunReport) -> &NetStats {
    r.result.net.as_ref().expect("net counters reported")
}

/// Datagrams delivered from `addr`.
fn from(r: &RunReport, addr: &str) -> u64 {
    let a: SocketAddr = addr.parse().expect("address");
    net(r)
        .delivered_from
        .iter()
        .find(|c| c.address == a)
        .map_or_else(|| panic!("{addr} not counted"), |c| c.datagrams)
}

/// The client rebinds at 2 s, while sending 20 MB (8 s at 20 Mb/s).
fn rebinding(keep: &str) -> String {
    one_flow(
        "6s",
        20_000_000,
        &format!(r#"events = [{{ at = "2s", node = "client", rebind = "{REBOUND}"{keep} }}]"#),
    )
}

#[test]
fn after_a_client_rebinding_the_server_follows_it_to_the_new_address() {
    let before = run(&one_flow("6s", 20_000_000, ""));
    let r = &before.runs[0];
    assert_eq!(r.result.unknown_connection, 0);
    assert!(
        r.result.net.is_none(),
        "no addressing counters in a plain run"
    );

    let after = run(&rebinding(""));
    let r = &after.runs[0];
    let n = net(r);
    assert_eq!(n.rebinds, 1);
    assert!(from(r, CLIENT) > 1000, "{n:?}");
    // The client's datagrams are seen from the new address after the rebinding, and the
    // server takes them.
    assert!(from(r, REBOUND) > 1000, "{n:?}");
    assert_eq!(r.result.unknown_connection, 0, "{n:?}");
    // What the server sent to the old address before it followed is dropped (the NAT
    // forgot it): no more than about a round trip's worth.
    assert!(n.stale_dropped > 0 && n.stale_dropped < 200, "{n:?}");
}

#[test]
fn a_nat_that_keeps_the_old_mapping_still_delivers_to_the_old_address() {
    // The server follows the client within a round trip, long before a mapping kept for
    // 100 ms or 10 s expires: what it sent meanwhile arrives, nothing is dropped.
    for keep in [r#", keep = "10s""#, r#", keep = "100ms""#] {
        let rep = run(&rebinding(keep));
        let n = net(&rep.runs[0]);
        assert!(n.stale_delivered > 0, "{keep}: {n:?}");
        assert_eq!(n.stale_dropped, 0, "{keep}: {n:?}");
    }
}

#[test]
fn a_rebound_server_is_followed_by_its_client() {
    let new = "10.1.0.9:5000";
    let rep = run(&one_flow(
        "20s",
        20_000_000,
        &format!(r#"events = [{{ at = "2s", node = "server", rebind = "{new}" }}]"#),
    ));
    let r = &rep.runs[0];
    let n = net(r);
    // The client's datagrams to the server's old address are dropped until the server's
    // first answer from the new one moves the client there.
    assert!(n.stale_dropped > 0 && n.stale_dropped < 200, "{n:?}");
    assert!(from(r, new) > 1000, "{n:?}");
    assert_eq!(r.result.unknown_connection, 0, "{n:?}");
    assert_delivered_exactly(&r.result.flows[0], 20_000_000, "server rebinding");
}

#[test]
fn a_transfer_survives_a_nat_rebinding() {
    let rep = run(&one_flow(
        "20s",
        20_000_000,
        &format!(r#"events = [{{ at = "2s", node = "client", rebind = "{REBOUND}" }}]"#),
    ));
    let r = &rep.runs[0];
    assert_delivered_exactly(&r.result.flows[0], 20_000_000, "rebinding");
    assert!(from(r, REBOUND) > 1000);
    assert_eq!(r.result.unknown_connection, 0);
}

/// A second client address with a path of its own: 5 Mb/s, 40 ms one way.
const SECOND_PATH: &str = r#"
[[flow.paths]]
client = "10.0.0.2:1000"
bandwidth = "5Mbps"
delay = "40ms"
queue_packets = 100
"#;

/// Link indices of a run's topology: the flow's own path's forward and reverse links.
fn second_path_links(text: &str) -> (usize, usize) {
    let sc = Scenario::parse(text, "t.toml").expect("parses");
    let runs = sc.runs(None).expect("runs");
    let t = &runs[0].config.topology;
    assert_eq!(t.routes.len(), 2, "the flow's two routes");
    (t.routes[1][0][1], t.routes[1][1][1])
}

/// A second path like the first (20 Mb/s, 10 ms one way), from the second address.
const TWIN_PATH: &str = r#"
[[flow.paths]]
client = "10.0.0.2:1000"
bandwidth = "20Mbps"
delay = "10ms"
queue_packets = 100
"#;

#[test]
fn two_paths_carry_one_transfer() {
    let text = one_flow(
        "20s",
        4_000_000,
        &format!("source = \"alternate\"\n{TWIN_PATH}"),
    );
    let (fwd, rev) = second_path_links(&text);
    let rep = run(&text);
    let r = &rep.runs[0];
    let links = &r.result.links;
    // Both paths carry the client's datagrams, one each in turn...
    assert!(links[0].carried > 100, "bottleneck: {:?}", links[0]);
    assert!(links[fwd].carried > 100, "second path: {:?}", links[fwd]);
    assert!(links[0].offered.abs_diff(links[fwd].offered) <= 1);
    // ...the server takes all of them and answers where the newest came from: both...
    assert_eq!(r.result.unknown_connection, 0);
    assert!(links[1].carried > 10, "first path back: {:?}", links[1]);
    assert!(
        links[rev].carried > 10,
        "second path back: {:?}",
        links[rev]
    );
    assert!(from(r, CLIENT) > 100 && from(r, SECOND) > 100);
    // ...and the transfer is whole.
    assert_delivered_exactly(&r.result.flows[0], 4_000_000, "two paths");
}

#[test]
fn over_paths_of_different_delay_the_server_answers_on_the_fast_one() {
    // Each datagram of the slow path arrives behind a newer one of the fast path, so the
    // server never moves to the slow one (it follows only the newest packet).
    let text = one_flow(
        "3s",
        500_000,
        &format!("source = \"alternate\"\n{SECOND_PATH}"),
    );
    let (fwd, rev) = second_path_links(&text);
    let rep = run(&text);
    let links = &rep.runs[0].result.links;
    assert!(links[fwd].carried > 10, "second path: {:?}", links[fwd]);
    assert_eq!(links[rev].offered, 0, "second path back: {:?}", links[rev]);
    assert_eq!(rep.runs[0].result.unknown_connection, 0);
}

#[test]
fn a_transfer_moves_to_the_other_path_when_its_path_dies() {
    // The client sends from its primary address, through the bottleneck; that path dies
    // at 1 s for good. After two retransmission timeouts in a row the connection moves to
    // the client's second address, the server follows, and the transfer completes there.
    let text = one_flow(
        "30s",
        4_000_000,
        &format!("events = [{{ at = \"1s\", path = 0, state = \"down\" }}]\n{SECOND_PATH}"),
    );
    let (fwd, rev) = second_path_links(&text);
    let rep = run(&text);
    let r = &rep.runs[0];
    let links = &r.result.links;
    assert!(links[0].down_drops > 0, "{:?}", links[0]);
    assert!(
        links[fwd].carried > 100 && links[rev].carried > 100,
        "{links:?}"
    );
    let f = &r.result.flows[0];
    assert_delivered_exactly(f, 4_000_000, "primary path dead");
    assert!(f.completion_us.unwrap() > 1_000_000);
    assert!(from(r, SECOND) > 100);
    assert_eq!(r.result.unknown_connection, 0);
}

/// Ping-pong rounds of 64 bytes on a flow whose client sends from `source`.
fn ping_pong(source: &str, events: &str) -> String {
    format!(
        r#"
name = "pp-paths"
duration = "20s"
seed = 4
profiles = ["reliable"]
cc = ["profile"]
stop_when_done = true
[bottleneck]
bandwidth = "100Mbps"
delay = "5ms"
[[flow]]
kind = "ping-pong"
rounds = 20
message_size = 64
client = "{CLIENT}"
source = "{source}"
events = [{events}]
{SECOND_PATH}
"#
    )
}

#[test]
fn each_path_has_its_own_delay_and_the_flow_picks_its_source_address() {
    for (source, lo, hi) in [(CLIENT, 10_000, 10_500), (SECOND, 80_000, 81_000)] {
        let rep = run(&ping_pong(source, ""));
        let f = &rep.runs[0].result.flows[0];
        assert!(f.completed, "{source}: {f:?}");
        assert_eq!(f.round_trips_us.len(), 20);
        for &rtt in &f.round_trips_us {
            assert!((lo..hi).contains(&rtt), "{source}: round trip {rtt} µs");
        }
        // The whole connection runs between one client address and the server: nothing
        // unknown, the other path idle.
        assert_eq!(rep.runs[0].result.unknown_connection, 0);
    }
}

#[test]
fn a_path_that_dies_stops_carrying_and_one_that_returns_carries_again() {
    // A client with one address, so nowhere else to go: its path is down from 1 s to 2 s.
    let text = one_flow(
        "20s",
        3_000_000,
        r#"events = [{ at = "1s", path = 0, state = "down" }, { at = "2s", path = 0, state = "up" }]"#,
    );
    let rep = run(&text);
    let r = &rep.runs[0];
    let f = &r.result.flows[0];
    // Nothing delivered while it is down (the sample ending at 2 s; the last datagrams
    // sent before 1 s arrive by 1.02 s, and what waited behind a gap comes out with them
    // in the sample ending at 1.5 s)...
    let bytes = |i: usize| f.samples[i].bytes;
    assert!(bytes(1) > 0, "{:?}", f.samples);
    assert!(bytes(2) < bytes(1) / 4, "{:?}", f.samples);
    assert_eq!(bytes(3), 0, "{:?}", f.samples);
    assert!(r.result.links[0].down_drops > 0 || r.result.links[1].down_drops > 0);
    // ...and the transfer completes once it is back.
    assert_delivered_exactly(f, 3_000_000, "path back up");
    assert!(f.completion_us.unwrap() > 2_000_000);

    // A path that dies for good: nothing more is delivered.
    let text = text.replace(r#", { at = "2s", path = 0, state = "up" }"#, "");
    let rep = run(&text);
    let f = &rep.runs[0].result.flows[0];
    assert!(!f.completed);
    assert!(
        f.samples[3..].iter().all(|s| s.bytes == 0),
        "{:?}",
        f.samples
    );
}

#[test]
fn the_same_seed_gives_the_same_trace_with_paths_and_rebinds() {
    let text = one_flow(
        "4s",
        20_000_000,
        &format!(
            r#"source = "alternate"
events = [{{ at = "1s", node = "client", rebind = "{REBOUND}", keep = "200ms" }},
          {{ at = "2s", path = 1, state = "down" }}]
{SECOND_PATH}"#
        ),
    );
    let hash = |t: &str| run(t).runs[0].metrics.trace_hash.clone();
    let a = hash(&text);
    assert_eq!(a, hash(&text));
    assert_ne!(a, hash(&text.replace("seed = 3", "seed = 4")));
    assert_ne!(a, hash(&text.replace("at = \"1s\"", "at = \"1500ms\"")));
}

fn parse_err(text: &str) -> String {
    match Scenario::parse(text, "t.toml") {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn addressing_errors_name_the_key_and_line() {
    let cases = [
        ("server = \"nowhere\"", "flow[0].server"),
        ("source = \"10.0.0.7:1\"", "flow[0].source"),
        (
            "events = [{ at = \"1s\", node = \"router\", rebind = \"10.0.0.9:1\" }]",
            "flow[0].events[0].node",
        ),
        (
            "events = [{ at = \"1s\", path = 2, state = \"down\" }]",
            "flow[0].events[0].path",
        ),
        (
            "events = [{ at = \"1s\", path = 0, state = \"sideways\" }]",
            "flow[0].events[0].state",
        ),
        (
            "events = [{ at = \"1s\", path = 0, keep = \"1s\", state = \"down\" }]",
            "flow[0].events[0]",
        ),
        (
            "events = [{ at = \"1s\", node = \"client\" }]",
            "flow[0].events[0]",
        ),
        ("[[flow.paths]]\nbandwidth = \"1Mbps\"", "flow[0].paths[0]"),
    ];
    for (extra, key) in cases {
        let e = parse_err(&one_flow("1s", 1000, extra));
        assert!(e.contains(&format!("`{key}`")), "{extra}: {e}");
        assert!(e.starts_with("t.toml:"), "{e}");
    }
    // Two nodes with one address.
    let e = parse_err(&one_flow("1s", 1000, &format!("server = \"{CLIENT}\"")));
    assert!(e.contains(CLIENT), "{e}");
    // Addresses belong to a flow's own paths only.
    let e = parse_err(&one_flow("1s", 1000, "").replace(
        "delay = \"10ms\"",
        "delay = \"10ms\"\nclient = \"10.0.0.3:1\"",
    ));
    assert!(e.contains("`bottleneck`"), "{e}");
}

#[test]
fn datagrams_between_addresses_no_path_joins_are_counted_and_go_nowhere() {
    // The client's second address reaches only the server's second address; it sends to
    // the server's first from there.
    let text = one_flow(
        "2s",
        1000,
        &format!(
            r#"source = "{SECOND}"
[[flow.paths]]
client = "{SECOND}"
server = "10.1.0.5:2000"
bandwidth = "5Mbps""#
        ),
    );
    let rep = run(&text);
    let r = &rep.runs[0];
    assert!(net(r).no_path > 0, "{:?}", net(r));
    assert!(r.result.links.iter().all(|l| l.offered == 0));
    assert_eq!(r.result.flows[0].connected_us, None);
}

/// Goodput of flow 0 over the samples from `from` to `to` seconds (500 ms intervals), Mb/s.
fn goodput_mbps(r: &RunReport, from: f64, to: f64) -> f64 {
    let samples = &r.result.flows[0].samples;
    let (a, b) = ((from * 2.0) as usize, (to * 2.0) as usize);
    let bytes: u64 = samples[a..b].iter().map(|s| s.bytes).sum();
    bytes as f64 * 8.0 / (to - from) / 1e6
}

#[test]
fn a_coded_flow_runs_over_both_paths_and_rides_out_one_dying_and_returning() {
    // Two twin 20 Mb/s paths; `coded` sends over both at once. The second dies at 3 s and
    // returns at 5 s: meanwhile the first carries the transfer alone, and once the second
    // answers again it is used again. The server never moves: both are its routes.
    let events = r#"events = [{ at = "3s", path = 1, state = "down" }, { at = "5s", path = 1, state = "up" }]"#;
    let text = one_flow_of(
        "coded",
        "20s",
        50_000_000,
        &format!("{events}\n{TWIN_PATH}"),
    );
    let (fwd, _) = second_path_links(&text);
    let rep = run(&text);
    let r = &rep.runs[0];
    let f = &r.result.flows[0];
    assert_delivered_exactly(f, 50_000_000, "coded over two paths");
    assert_eq!(f.retransmissions, 0, "coded: nothing retransmitted");
    let links = &r.result.links;
    assert!(links[fwd].down_drops > 0, "{:?}", links[fwd]);
    let (before, during, after) = (
        goodput_mbps(r, 1.0, 3.0),
        goodput_mbps(r, 3.5, 5.0),
        goodput_mbps(r, 7.0, 8.0),
    );
    assert!(
        before > 30.0,
        "both paths carry it: {before:.1} Mb/s of 2 × 20"
    );
    assert!(
        (12.0..21.0).contains(&during),
        "the first path alone while the second is down: {during:.1} Mb/s"
    );
    assert!(
        after > 30.0,
        "both again once the second returns: {after:.1} Mb/s"
    );
    assert!(from(r, CLIENT) > 1000 && from(r, SECOND) > 1000);
    assert_eq!(r.result.unknown_connection, 0);
}
