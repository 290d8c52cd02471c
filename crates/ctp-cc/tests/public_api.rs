//! The library as another stack sees it: only public paths, no ctp engine anywhere.

use core::time::Duration;
use ctp_cc::group::GroupBudget;
use ctp_cc::pace::{PaceClock, Spacing};
use ctp_cc::rate::{Acks, DeliveryRate};
use ctp_cc::udt::CapacityMessage;
use ctp_cc::{
    by_name, known_names, Ack, AnyCc, CcKind, Config, CongestionControl, Instant, Loss,
    RateMessage, Sent, MAX_CC_MSG,
};

const MSS: u64 = 1000;

fn cfg() -> Config {
    Config {
        mss: MSS,
        initial_window: 10,
        rate: 1_000_000,
        max_window: 1000,
    }
}

fn at(us: u64) -> Instant {
    Instant::from_micros(us)
}

/// An acknowledgement of a full packet sent at `sent_us`, on a path whose RTT is the
/// sample's.
fn ack(pn: u64, sent_us: u64, now_us: u64, delivery_rate: u64) -> Ack {
    let rtt = now_us - sent_us;
    Ack {
        now: at(now_us),
        pn,
        bytes: MSS,
        sent_at: at(sent_us),
        rtt_us: rtt,
        srtt_us: rtt,
        min_rtt_us: rtt,
        bytes_in_flight: 0,
        delivery_rate,
    }
}

fn loss(pn: u64, sent_us: u64, now_us: u64) -> Loss {
    Loss {
        now: at(now_us),
        first_pn: pn,
        last_pn: pn,
        bytes: MSS,
        sent_at: at(sent_us),
        largest_sent_pn: pn + 10,
        srtt_us: 50_000,
    }
}

#[test]
fn every_kind_builds_from_its_name_and_its_number_and_runs_as_a_trait_object() {
    assert_eq!(CcKind::ALL.len(), 15);
    assert_eq!(CcKind::default(), CcKind::NewReno);
    for &kind in CcKind::ALL {
        assert_eq!(CcKind::from_name(kind.name()), Some(kind));
        assert_eq!(CcKind::from_id(kind.id()), Some(kind));
        assert!(known_names().contains(kind.name()));
        assert!(!kind.describe().is_empty());
        let built = by_name(kind.name(), &cfg()).expect("a known name");
        assert_eq!(built.name(), kind.name());
        let mut boxed: Box<dyn CongestionControl> = Box::new(kind.build(&cfg()));
        assert!(boxed.cwnd() > 0, "{}", kind.name());
        boxed.on_ack(&ack(0, 0, 50_000, 0));
        assert!(boxed.cwnd() > 0, "{}", kind.name());
    }
    let err = by_name("reno2", &cfg()).unwrap_err();
    assert_eq!(err.name, "reno2");
    let shown = err.to_string();
    assert!(
        shown.contains("`reno2`") && shown.contains("bbr"),
        "{shown}"
    );
    let _: &dyn std::error::Error = &err;
}

#[test]
fn a_loss_halves_newreno_once_per_window_and_a_timeout_collapses_it() {
    let mut cc = CcKind::NewReno.build(&cfg());
    assert_eq!(cc.cwnd(), 10 * MSS);
    for pn in 0..10 {
        cc.on_ack(&ack(pn, 0, 50_000, 0));
    }
    assert_eq!(cc.cwnd(), 20 * MSS, "slow start");
    let paced = cc
        .pacing_period_us(MSS)
        .expect("paced once the RTT is known");
    cc.on_loss(&loss(10, 50_000, 101_000));
    assert_eq!(cc.cwnd(), 10 * MSS);
    cc.on_loss(&loss(11, 50_100, 101_100));
    assert_eq!(cc.cwnd(), 10 * MSS, "a second loss of the same window");
    assert!(
        cc.pacing_period_us(MSS).unwrap() > paced,
        "a smaller window paces slower"
    );
    cc.on_timeout(at(2_000_000), 1);
    assert_eq!(cc.cwnd(), 2 * MSS);
}

#[test]
fn every_loss_based_window_algorithm_backs_off_and_bbr_does_not() {
    for name in [
        "newreno",
        "cubic",
        "scalable",
        "highspeed",
        "bic",
        "westwood",
    ] {
        let mut cc = by_name(name, &cfg()).unwrap();
        for pn in 0..30 {
            cc.on_ack(&ack(pn, pn * 100, 50_000 + pn * 100, 0));
        }
        let before = cc.cwnd();
        cc.on_loss(&loss(40, 60_000, 110_000));
        assert!(cc.cwnd() < before, "{name}: {} → {}", before, cc.cwnd());
    }
    let mut bbr = CcKind::Bbr.build(&cfg());
    let before = bbr.cwnd();
    bbr.on_loss(&loss(3, 0, 50_000));
    assert_eq!(bbr.cwnd(), before, "loss is not a signal to BBR");
}

#[test]
fn bbr_paces_at_the_bandwidth_its_delivery_rate_samples_measure() {
    let mut cc = CcKind::Bbr.build(&cfg());
    assert!(cc.wants_packet_events());
    let mut rate = DeliveryRate::new(cfg().max_window, Acks::Selective);
    // 1000-byte packets every 100 µs (10 MB/s), each acknowledged 10 ms after it left.
    for pn in 0..2000u64 {
        let now = 100 * pn;
        rate.on_sent(pn, at(now), pn == 0);
        cc.on_packet_sent(&Sent {
            now: at(now),
            pn,
            bytes: MSS,
            bytes_in_flight: 0,
        });
        if pn >= 100 {
            let acked = pn - 100;
            let sample = rate.on_acked(acked, MSS, at(now));
            cc.on_ack(&ack(acked, 100 * acked, now, sample));
        }
    }
    let AnyCc::Bbr(b) = &cc else {
        panic!("not BBR")
    };
    assert!(
        (9_900_000..=10_100_000).contains(&b.btl_bw()),
        "{}",
        b.btl_bw()
    );
    assert_eq!(
        cc.pacing_rate(),
        (b.pacing_gain() * b.btl_bw() as f64) as u64
    );
    let period = cc.pacing_period_us(MSS).unwrap();
    assert!((70..=140).contains(&period), "{period} µs");
}

#[test]
fn rate_messages_set_the_pacing_period_of_the_rate_controllers() {
    let mut blast = CcKind::Blast.build(&cfg());
    assert_eq!(blast.cwnd(), u64::MAX, "no window");
    assert_eq!(blast.pacing_period_us(MSS), Some(1000), "1 MB/s");
    blast.on_loss(&loss(1, 0, 50_000));
    assert_eq!(
        blast.pacing_period_us(MSS),
        Some(1000),
        "loss changes nothing"
    );
    blast.on_custom(at(0), &RateMessage(4_000_000).encode());
    assert_eq!(blast.pacing_period_us(MSS), Some(250));
    blast.on_custom(at(0), b"not a rate");
    assert_eq!(blast.pacing_period_us(MSS), Some(250), "junk is ignored");

    // A group of two shares a 10 MB/s budget; each member's controller paces at its share.
    let mut budget = GroupBudget::new(10_000_000);
    let (a, b) = (budget.join(), budget.join());
    budget.set_demand(b, 2_000_000);
    let mut ga = CcKind::Group.build(&cfg());
    ga.on_custom(at(0), &budget.message(a));
    assert_eq!(
        ga.pacing_rate(),
        8_000_000,
        "max-min fair: b takes only 2 MB/s"
    );
    assert_eq!(ga.pacing_period_us(MSS), Some(125));
}

#[test]
fn udts_receiver_half_reports_the_link_capacity_in_a_message_for_the_sender_half() {
    let mut rx = CcKind::Udt.build(&cfg());
    assert!(rx.sends_messages() && rx.packet_pairs());
    // Arrivals paced 1 ms apart, every 16th 10 µs behind the one before: a packet pair
    // the bottleneck spaced.
    let mut now = 0;
    let mut out = [0u8; MAX_CC_MSG];
    let mut n = 0;
    for i in 0..256u64 {
        now += if i % 16 == 15 { 10 } else { 1000 };
        rx.on_packet_received(at(now), MSS);
        n = n.max(rx.poll_message(&mut out));
    }
    assert!(n > 0 && n <= MAX_CC_MSG, "{n}");
    // The stack carries it to the sender's instance, which takes the capacity from it.
    assert_eq!(
        CapacityMessage::decode(&out[..n]),
        Some(CapacityMessage(MSS * 100_000)),
        "MSS bytes per 10 µs"
    );
    let mut tx = CcKind::Udt.build(&cfg());
    tx.on_custom(at(now), &out[..n]);
}

#[test]
fn odd_input_is_absorbed_by_every_algorithm() {
    for &kind in CcKind::ALL {
        let mut cc = kind.build(&Config {
            mss: 0,
            initial_window: 0,
            rate: 0,
            max_window: 0,
        });
        let zero = Ack {
            now: Instant::ZERO,
            pn: 0,
            bytes: 0,
            sent_at: Instant::ZERO,
            rtt_us: 0,
            srtt_us: 0,
            min_rtt_us: u64::MAX,
            bytes_in_flight: 0,
            delivery_rate: 0,
        };
        cc.on_ack(&zero);
        // An acknowledgement from the future, of a packet never sent, out of order.
        cc.on_ack(&Ack {
            pn: u64::MAX,
            sent_at: at(5_000_000),
            ..ack(7, 0, 1_000, u64::MAX / 2)
        });
        cc.on_loss(&Loss {
            first_pn: 9,
            last_pn: 3,
            ..loss(9, 0, 0)
        });
        cc.on_timeout(Instant::ZERO, u32::MAX);
        cc.on_packet_received(Instant::ZERO, 0);
        cc.on_custom(Instant::ZERO, &[]);
        cc.on_custom(Instant::ZERO, &[0xff; MAX_CC_MSG]);
        let _ = cc.pacing_period_us(0);
        let _ = cc.pacing_period_us(u64::MAX / 2_000_000);
        let mut out = [0u8; MAX_CC_MSG];
        assert!(cc.poll_message(&mut out) <= MAX_CC_MSG);
        assert!(cc.cwnd() > 0, "{}", kind.name());
    }
}

#[test]
fn the_pacer_spaces_packets_at_the_controllers_rate() {
    let mut cc = CcKind::Blast.build(&Config {
        rate: 125_000_000, // 1 Gb/s
        ..cfg()
    });
    let mut clock = PaceClock::new();
    let (mut now, end) = (at(1_000_000), at(1_100_000));
    let mut sent = 0u64;
    while now < end {
        let rate = cc.pacing_rate();
        if clock.ready(now, rate, MSS, Spacing::Trains) {
            let gap = clock.gap_us(MSS, rate).unwrap();
            clock.delay(gap);
            sent += 1;
        } else {
            now = clock.wake_at(rate, MSS, Spacing::Trains);
        }
    }
    // 100 ms at 125 MB/s is 12 500 packets, plus at most one quantum of starting credit.
    assert!((12_500..=12_500 + 500).contains(&sent), "{sent}");
    // Half the rate, half the packets.
    cc.on_custom(now, &RateMessage(62_500_000).encode());
    let start = sent;
    let end = now + Duration::from_millis(100);
    while now < end {
        let rate = cc.pacing_rate();
        if clock.ready(now, rate, MSS, Spacing::Trains) {
            let gap = clock.gap_us(MSS, rate).unwrap();
            clock.delay(gap);
            sent += 1;
        } else {
            now = clock.wake_at(rate, MSS, Spacing::Trains);
        }
    }
    assert!(
        (6_200..=6_300).contains(&(sent - start)),
        "{}",
        sent - start
    );
}

#[test]
fn the_time_type_is_one_type_at_both_paths_and_saturates() {
    let t: ctp_cc::time::Instant = Instant::from_micros(10);
    assert_eq!(t - at(20), Duration::ZERO);
    assert_eq!((t + Duration::from_millis(1)).as_micros(), 1010);
    assert!(Instant::FAR_FUTURE > at(u64::MAX / 4));
}
