//! Tests that pin the network model: bandwidth, delay, loss rate, queue bound.

mod common;

use common::assert_delivered_exactly;
use core::time::Duration;
use ctp_proto::Instant;
use ctp_sim::link::{DropKind, Link, LinkConfig};
use ctp_sim::LossModel;
use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;

fn link(cfg: LinkConfig) -> Link {
    Link::new(cfg, ChaCha8Rng::seed_from_u64(42))
}

fn t(us: u64) -> Instant {
    Instant::from_micros(us)
}

/// Offers a packet of 1200 bytes every `gap_us` for `n` packets; returns arrival times.
fn offer(l: &mut Link, n: u64, gap_us: u64) -> Vec<(Instant, usize)> {
    let mut out = Vec::new();
    let mut arrivals = Vec::new();
    for i in 0..n {
        out.clear();
        if l.send(t(i * gap_us), vec![0u8; 1200], &mut out).is_ok() {
            arrivals.extend(out.iter().map(|(at, b)| (*at, b.len())));
        }
    }
    arrivals
}

/// One `reliable` bulk flow of `bytes` over a dumbbell whose bottleneck is `bn` both ways,
/// ending when it is done (a minute at most), its sender's limits checked at every step.
fn one_bulk_flow(bn: LinkConfig, access: Duration, bytes: u64, seed: u64) -> ctp_sim::SimConfig {
    ctp_sim::SimConfig {
        seed,
        topology: ctp_sim::Topology::dumbbell(bn.clone(), bn, &[access]),
        flows: vec![ctp_sim::FlowSpec::bulk(
            ctp_proto::Profile::reliable(),
            Some(bytes),
        )],
        duration: Duration::from_secs(60),
        interval: Duration::from_millis(100),
        handshake_timeout: Duration::from_secs(10),
        stop_when_done: true,
        check_limits: true,
        attacker: None,
        groups: Vec::new(),
    }
}

#[test]
fn a_10_mbps_link_never_carries_more_than_10_mbps() {
    // Offered at 20 Mb/s (1200 B every 480 µs); the queue is unlimited.
    let mut l = link(LinkConfig {
        bandwidth_bps: 10_000_000,
        delay: Duration::from_millis(5),
        ..LinkConfig::default()
    });
    let arr = offer(&mut l, 5000, 480);
    assert_eq!(arr.len(), 5000);
    // Over every window of 10 ms and of 100 ms, delivered bits ≤ 10 Mb/s × window + one
    // packet (a window may catch the tail of a packet that started before it).
    for window in [10_000u64, 100_000] {
        let end = arr.last().unwrap().0.as_micros();
        let mut start = arr[0].0.as_micros();
        let mut peak = 0.0f64;
        while start + window <= end {
            let bits: u64 = arr
                .iter()
                .filter(|(a, _)| (start..start + window).contains(&a.as_micros()))
                .map(|(_, s)| *s as u64 * 8)
                .sum();
            assert!(
                bits <= 10 * window + 1200 * 8,
                "{bits} bits in {window} µs from {start}"
            );
            peak = peak.max(bits as f64 / window as f64);
            start += window / 2;
        }
        // And the link is actually used at close to its rate.
        assert!(peak > 9.5, "peak {peak} Mb/s over {window} µs");
    }
}

#[test]
fn a_50_ms_link_delays_by_50_ms() {
    let mut l = link(LinkConfig {
        delay: Duration::from_millis(50),
        ..LinkConfig::default()
    });
    let arr = offer(&mut l, 100, 1000);
    for (i, (at, _)) in arr.iter().enumerate() {
        assert_eq!(at.as_micros(), i as u64 * 1000 + 50_000);
    }
    // With a bandwidth, the delay comes on top of serialisation: 1200 B at 96 Mb/s = 100 µs.
    let mut l = link(LinkConfig {
        delay: Duration::from_millis(50),
        bandwidth_bps: 96_000_000,
        ..LinkConfig::default()
    });
    let arr = offer(&mut l, 1, 1000);
    assert_eq!(arr[0].0.as_micros(), 50_100);
}

#[test]
fn a_1_percent_bernoulli_link_drops_about_1_percent() {
    let mut l = link(LinkConfig {
        loss: LossModel::Bernoulli { p: 0.01 },
        ..LinkConfig::default()
    });
    let n = 100_000u64;
    let arr = offer(&mut l, n, 10);
    let lost = n - arr.len() as u64;
    // Binomial(100000, 0.01): mean 1000, sd ≈ 31.5; ±5 sd.
    assert!((843..=1157).contains(&lost), "lost {lost} of {n}");
    assert_eq!(l.stats.loss_drops, lost);
}

#[test]
fn a_drop_tail_queue_of_n_packets_never_holds_n_plus_1() {
    for n in [1usize, 5, 64] {
        let mut l = link(LinkConfig {
            bandwidth_bps: 1_000_000,
            queue_packets: n,
            ..LinkConfig::default()
        });
        let mut out = Vec::new();
        let mut drops = 0;
        // Bursts far above the rate, with pauses that let the queue drain partly.
        for i in 0..20_000u64 {
            let now = t(i * 100 + (i / 500) * 50_000);
            out.clear();
            match l.send(now, vec![0u8; 1000], &mut out) {
                Ok(_) => {}
                Err((DropKind::Queue, _)) => drops += 1,
                Err((k, _)) => panic!("unexpected drop {k:?}"),
            }
            assert!(
                l.queue_len(now) <= n,
                "queue of {n} holds {}",
                l.queue_len(now)
            );
        }
        assert_eq!(l.stats.max_queue_packets, n as u64);
        assert!(drops > 0);
    }
}

#[test]
fn a_byte_limited_queue_respects_its_bytes() {
    let mut l = link(LinkConfig {
        bandwidth_bps: 1_000_000,
        queue_bytes: 5000,
        ..LinkConfig::default()
    });
    let mut out = Vec::new();
    for i in 0..1000u64 {
        out.clear();
        let _ = l.send(t(i * 10), vec![0u8; 1300], &mut out);
    }
    assert!(l.stats.max_queue_bytes <= 5000);
    assert_eq!(l.stats.max_queue_packets, 3);
}

#[test]
fn outages_drop_everything_while_down() {
    let mut l = link(LinkConfig {
        down: vec![(t(1000), t(2000))],
        ..LinkConfig::default()
    });
    let arr = offer(&mut l, 30, 100);
    assert_eq!(arr.len(), 20);
    assert_eq!(l.stats.down_drops, 10);
}

#[test]
fn corruption_is_caught_by_the_endpoints_integrity_check() {
    use ctp_sim::World;
    let bn = LinkConfig {
        bandwidth_bps: 10_000_000,
        delay: Duration::from_millis(5),
        corrupt: 0.05,
        ..LinkConfig::default()
    };
    let r = World::new(one_bulk_flow(bn, Duration::ZERO, 300_000, 3)).run(&mut |_| {});
    let corrupted: u64 = r.links.iter().map(|l| l.corrupted).sum();
    assert!(corrupted > 10);
    // Caught by the trailer, or (a short packet's connection id hit) by the lookup.
    assert_eq!(
        r.bad_checksum + r.unknown_connection,
        corrupted,
        "every corrupted datagram is caught"
    );
    assert!(r.bad_checksum > r.unknown_connection);
    assert_delivered_exactly(&r.flows[0], 300_000, "corrupting link");
}

/// The speed figure's second unit: every datagram counts once per link it crossed. On a
/// dumbbell (access link, then the bottleneck) with nothing dropped that is two per datagram,
/// but for the last few still on their first link when the run ends; a datagram lost on
/// the bottleneck crossed one.
#[test]
fn link_transmissions_count_each_datagram_once_per_link_it_crossed() {
    use ctp_sim::{metrics, World};
    let run = |loss: f64| {
        let bn = LinkConfig {
            bandwidth_bps: 20_000_000,
            delay: Duration::from_millis(5),
            loss: if loss > 0.0 {
                LossModel::Bernoulli { p: loss }
            } else {
                LossModel::None
            },
            ..LinkConfig::default()
        };
        let cfg = one_bulk_flow(bn, Duration::from_millis(1), 400_000, 5);
        let r = World::new(cfg).run(&mut |_| {});
        assert_delivered_exactly(&r.flows[0], 400_000, "dumbbell");
        let m = metrics::compute(&r, 20_000_000);
        let lost: u64 = r.links.iter().map(|l| l.loss_drops).sum();
        (
            r.packets,
            m.transmissions,
            lost,
            m.transmissions_per_sec / m.packets_per_sec,
        )
    };
    let (packets, transmissions, lost, ratio) = run(0.0);
    // Datagrams on their first link when the run stopped.
    let unfinished = |packets: u64, lost: u64, transmissions: u64| {
        (2 * packets - lost)
            .checked_sub(transmissions)
            .expect("never more than two per datagram")
    };
    assert_eq!(lost, 0);
    assert!(packets > 300);
    assert!(unfinished(packets, lost, transmissions) <= 2);
    let expected = transmissions as f64 / packets as f64;
    assert!(
        (ratio - expected).abs() < 1e-9,
        "per CPU second too: {ratio}"
    );
    let (packets, transmissions, lost, _) = run(0.02);
    assert!(lost > 0);
    assert!(unfinished(packets, lost, transmissions) <= 2);
}
