//! The `udt` profiles end to end through the deterministic in-memory pair: UDT4 packets on
//! the simulated wire, loss, reordering and duplication, every congestion controller.

mod common;

use bytes::Bytes;
use common::{data, stream_transfer};
use core::time::Duration;
use ctp_proto::cc::CcKind;
use ctp_proto::pair::{LinkModel, Pair};
use ctp_proto::udt::packet::Packet;
use ctp_proto::udt::WireFormat;
use ctp_proto::{
    CloseReason, ConnectionHandle, ConnectionState, EndpointConfig, EndpointEvent, MsgOptions,
    Profile, ReadError,
};

fn seed(n: u64, k: u8) -> [u8; 32] {
    let mut s = [k; 32];
    s[..8].copy_from_slice(&n.to_le_bytes());
    s
}

/// A pair whose endpoints speak UDT4; the server accepts unless `rendezvous`.
fn udt_pair(n: u64, rendezvous: bool) -> Pair {
    let mut c = EndpointConfig::new(seed(n, 1), seed(n, 2));
    c.wire = WireFormat::Udt4;
    let mut s = EndpointConfig::new(seed(n, 3), seed(n, 4));
    s.wire = WireFormat::Udt4;
    s.accept = !rendezvous;
    Pair::with_configs(n, c, s)
}

fn connect(p: &mut Pair, profile: &Profile) -> (ConnectionHandle, ConnectionHandle) {
    let c = p
        .client
        .connect(p.now, p.server_addr, profile)
        .expect("udt profile");
    let ok = p.run_until(Duration::from_secs(60), |p| {
        p.client.connection(c).is_some_and(|x| x.is_established())
            && p.server_events
                .iter()
                .any(|e| matches!(e, EndpointEvent::Incoming(_)))
    });
    assert!(ok, "UDT handshake did not complete");
    let s = p
        .server_events
        .iter()
        .find_map(|e| match e {
            EndpointEvent::Incoming(h) => Some(*h),
            _ => None,
        })
        .unwrap();
    (c, s)
}

fn lossy() -> LinkModel {
    LinkModel {
        loss: 0.05,
        duplicate: 0.02,
        reorder: 0.05,
        ..LinkModel::default()
    }
}

#[test]
fn udt_stream_moves_four_megabytes_exactly_on_udt4_packets() {
    let mut p = udt_pair(1, false);
    let (c, s) = connect(&mut p, &Profile::udt());
    let payload = data(4 << 20, 7);
    let (got, eof) = stream_transfer(&mut p, c, s, &payload, Duration::from_secs(60));
    assert!(eof, "end of stream not seen");
    assert!(
        got == payload,
        "bytes differ: {} of {}",
        got.len(),
        payload.len()
    );
    let st = p.client.connection(c).unwrap().stats();
    assert_eq!(st.retransmissions, 0, "clean link: {st:?}");
    // The receiver measures the RTT from ACK/ACK2 (smoothed by 7/8 from UDT's initial
    // 100 ms); the sender smooths the values the ACKs carry once more.
    let rs = p.server.connection(s).unwrap().stats();
    assert!(rs.acks_sent > 10, "{rs:?}");
    assert!(
        (20_000..60_000).contains(&rs.srtt_us),
        "RTT from ACK/ACK2 on a 20 ms path: {}",
        rs.srtt_us
    );
    assert!(
        st.srtt_us < 100_000 && st.srtt_us > rs.srtt_us,
        "{}",
        st.srtt_us
    );
}

#[test]
fn every_datagram_on_the_wire_parses_as_udt4() {
    let mut p = udt_pair(2, false);
    let (c, _) = connect(&mut p, &Profile::udt());
    let now = p.now;
    p.client
        .connection_mut(c)
        .unwrap()
        .stream_write(now, &[1; 5000])
        .unwrap();
    let mut buf = Vec::new();
    let mut n = 0;
    while let Some(t) = p.client.poll_transmit(now, &mut buf) {
        assert!(Packet::parse(&buf[..t.size]).is_ok());
        n += 1;
    }
    assert!(n >= 4, "{n} packets");
    assert_eq!(p.server.stats().bad_header, 0);
}

#[test]
fn udt_stream_survives_loss_reordering_and_duplication() {
    let mut p = udt_pair(3, false);
    p.to_server = LinkModel {
        loss: 0.15,
        ..lossy()
    };
    p.to_client = lossy();
    let (c, s) = connect(&mut p, &Profile::udt());
    let payload = data(400_000, 9);
    let (got, eof) = stream_transfer(&mut p, c, s, &payload, Duration::from_secs(600));
    assert!(eof);
    assert!(
        got == payload,
        "bytes differ: {} of {}",
        got.len(),
        payload.len()
    );
    let st = p.client.connection(c).unwrap().stats();
    assert!(st.retransmissions > 0 && st.naks_received > 0, "{st:?}");
    assert!(p.server.connection(s).unwrap().stats().naks_sent > 0);
}

#[test]
fn udt_stream_is_exact_under_every_congestion_controller() {
    for (i, &kind) in CcKind::ALL.iter().enumerate() {
        let mut p = udt_pair(100 + i as u64, false);
        p.to_server = lossy();
        p.to_client = lossy();
        let mut profile = Profile::udt();
        profile.params.cc = kind;
        let (c, s) = connect(&mut p, &profile);
        let payload = data(200_000, i as u64);
        let (got, eof) = stream_transfer(&mut p, c, s, &payload, Duration::from_secs(600));
        assert!(
            eof && got == payload,
            "{}: {} of {}",
            kind.name(),
            got.len(),
            payload.len()
        );
    }
}

fn numbered(i: u32) -> Bytes {
    let mut m = i.to_be_bytes().to_vec();
    m.extend(std::iter::repeat_n(i as u8, 100 + (i as usize * 37) % 3000));
    Bytes::from(m)
}

/// Sends `count` messages (with `ttl`) and collects what the server receives.
fn message_transfer(p: &mut Pair, count: u32, ttl: Option<Duration>, in_order: bool) -> Vec<Bytes> {
    let (c, s) = connect(p, &Profile::udt_dgram());
    let mut next = 0;
    let mut got = Vec::new();
    let mut closed = false;
    p.run_until(Duration::from_secs(300), |p| {
        let now = p.now;
        if let Some(u) = p.client.connection_mut(c).and_then(|c| c.udt_mut()) {
            while next < count && u.send_msg(now, numbered(next), ttl, in_order).is_ok() {
                next += 1;
            }
        }
        if next == count && !closed {
            if let Some(conn) = p.client.connection_mut(c) {
                conn.close(now);
                closed = true;
            }
        }
        let conn = p.server.connection_mut(s).unwrap();
        loop {
            match conn.recv_msg(now) {
                Ok(m) => got.push(m),
                Err(ReadError::Blocked) => return false,
                Err(ReadError::Closed(_)) => return true,
                Err(e @ ReadError::Reset(_)) => panic!("{e}"),
            }
        }
    });
    got
}

#[test]
fn udt_dgram_delivers_every_message_whole_and_in_order_under_loss() {
    let mut p = udt_pair(4, false);
    p.to_server = lossy();
    p.to_client = lossy();
    let got = message_transfer(&mut p, 500, None, true);
    assert_eq!(got.len(), 500);
    for (i, m) in got.iter().enumerate() {
        assert_eq!(m, &numbered(i as u32), "message {i}");
    }
}

#[test]
fn expired_messages_are_dropped_by_request_and_the_rest_arrive_in_order() {
    let mut p = udt_pair(5, false);
    p.to_server = LinkModel {
        loss: 0.2,
        ..LinkModel::default()
    };
    let got = message_transfer(&mut p, 300, Some(Duration::from_millis(1)), true);
    assert!(
        got.len() < 300,
        "a 1 ms TTL on a lossy 20 ms path must lose some"
    );
    assert!(got.len() > 100, "only {} delivered", got.len());
    let ids: Vec<u32> = got
        .iter()
        .map(|m| u32::from_be_bytes([m[0], m[1], m[2], m[3]]))
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "out of order: {ids:?}");
    for (m, &i) in got.iter().zip(&ids) {
        assert_eq!(m, &numbered(i), "message {i} corrupted");
    }
}

#[test]
fn rendezvous_connects_both_sides_and_carries_data() {
    let mut p = udt_pair(6, true);
    let profile = Profile::udt();
    let (now, sa, ca) = (p.now, p.server_addr, p.client_addr);
    let c = p.client.connect_rendezvous(now, sa, &profile).unwrap();
    let s = p.server.connect_rendezvous(now, ca, &profile).unwrap();
    let ok = p.run_until(Duration::from_secs(10), |p| {
        p.client.connection(c).is_some_and(|x| x.is_established())
            && p.server.connection(s).is_some_and(|x| x.is_established())
    });
    assert!(ok, "rendezvous did not complete");
    let payload = data(100_000, 3);
    let (got, eof) = stream_transfer(&mut p, c, s, &payload, Duration::from_secs(60));
    assert!(eof && got == payload);
}

/// A `udt` profile whose MSS allows jumbo frames (9000-byte IP datagrams).
fn jumbo() -> Profile {
    let mut p = Profile::udt();
    p.params.max_udp_payload = 8972;
    p
}

#[test]
fn sides_with_different_mss_send_what_the_other_accepts() {
    // Client/server: the client adopts the smaller MSS of the server's response.
    let mut p = udt_pair(7, false);
    let (c, s) = connect(&mut p, &jumbo());
    let payload = data(300_000, 4);
    let (got, eof) = stream_transfer(&mut p, c, s, &payload, Duration::from_secs(60));
    assert!(eof && got == payload);
    let rs = p.server.connection(s).unwrap().stats();
    assert_eq!(rs.oversize_dropped, 0, "{rs:?}");
    assert_eq!(p.client.connection(c).unwrap().stats().path_mtu, 1500);
    // Rendezvous: each side sends no more than the other's MSS.
    for (n, (pc, ps)) in [(jumbo(), Profile::udt()), (Profile::udt(), jumbo())]
        .into_iter()
        .enumerate()
    {
        let mut p = udt_pair(8 + n as u64, true);
        let (now, sa, ca) = (p.now, p.server_addr, p.client_addr);
        let c = p.client.connect_rendezvous(now, sa, &pc).unwrap();
        let s = p.server.connect_rendezvous(now, ca, &ps).unwrap();
        let ok = p.run_until(Duration::from_secs(10), |p| {
            p.client.connection(c).is_some_and(|x| x.is_established())
                && p.server.connection(s).is_some_and(|x| x.is_established())
        });
        assert!(ok, "rendezvous did not complete");
        let (got, eof) = stream_transfer(&mut p, c, s, &payload, Duration::from_secs(60));
        assert!(eof && got == payload, "rendezvous {n}");
        let rs = p.server.connection(s).unwrap().stats();
        assert_eq!(rs.oversize_dropped, 0, "{rs:?}");
    }
}

#[test]
fn close_delivers_everything_then_shuts_down_both_sides() {
    let mut p = udt_pair(7, false);
    p.to_server = lossy();
    let (c, s) = connect(&mut p, &Profile::udt());
    let payload = data(300_000, 1);
    let now = p.now;
    let mut written = 0;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    let mut closed = false;
    let done = p.run_until(Duration::from_secs(120), |p| {
        let now = p.now;
        let conn = p.client.connection_mut(c).unwrap();
        while written < payload.len() {
            match conn.stream_write(now, &payload[written..]) {
                Ok(n) => written += n,
                Err(_) => break,
            }
        }
        if written == payload.len() && !closed {
            conn.close(now);
            closed = true;
        }
        let conn = p.server.connection_mut(s).unwrap();
        loop {
            match conn.stream_read(now, &mut buf) {
                Ok(0) => return true,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(_) => return false,
            }
        }
    });
    let _ = now;
    assert!(done, "no end of stream");
    assert!(got == payload);
    assert!(p.run_until(Duration::from_secs(5), |p| matches!(
        p.client.connection(c).unwrap().state(),
        ConnectionState::Closed(CloseReason::Graceful)
    )));
    assert_eq!(
        p.server.connection(s).unwrap().state(),
        &ConnectionState::Closed(CloseReason::Graceful)
    );
}

#[test]
fn a_first_write_after_idle_is_not_timed_out_before_its_ack_is_due() {
    // 100 ms round trip; UDT's ACK comes on the receiver's 10-ms timer. The EXP timer
    // counts from the last packet heard, so without a restart at the write that ends an
    // idle spell (UDT4's `CUDT::send`), a write late in an idle spell timed out its first
    // window and fell back to a two-packet window.
    let mut spurious = Vec::new();
    for idle_ms in (0..1500).step_by(50) {
        let mut p = udt_pair(20 + idle_ms, false);
        p.to_client.delay = Duration::from_millis(50);
        p.to_server.delay = Duration::from_millis(50);
        let (c, s) = connect(&mut p, &Profile::udt());
        p.run_until(Duration::from_millis(idle_ms), |_| false);
        let now = p.now;
        let payload = data(64 << 10, idle_ms);
        let written = p
            .client
            .connection_mut(c)
            .unwrap()
            .stream_write(now, &payload)
            .expect("room for 64 KiB");
        assert_eq!(written, payload.len());
        let (mut got, mut buf) = (Vec::new(), vec![0u8; 65536]);
        let ok = p.run_until(Duration::from_secs(10), |p| {
            let now = p.now;
            common::read_available(p.server.connection_mut(s).unwrap(), now, &mut buf, &mut got);
            got.len() == payload.len()
        });
        assert!(
            ok && got == payload,
            "idle {idle_ms} ms: {} bytes",
            got.len()
        );
        let st = p.client.connection(c).unwrap().stats();
        if st.rto_expiries > 0 {
            spurious.push(idle_ms);
        }
    }
    assert!(
        spurious.is_empty(),
        "timed out after idle spells of {spurious:?} ms"
    );
}

#[test]
fn a_vanished_peer_breaks_the_connection_after_expiry() {
    let mut p = udt_pair(8, false);
    let (c, _) = connect(&mut p, &Profile::udt());
    p.to_client.loss = 1.0;
    p.to_server.loss = 1.0;
    let ok = p.run_until(Duration::from_secs(120), |p| {
        matches!(
            p.client.connection(c).unwrap().state(),
            ConnectionState::Closed(CloseReason::IdleTimeout(_))
        )
    });
    assert!(ok, "{:?}", p.client.connection(c).unwrap().state());
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Garbage addressed to a live connection (right socket id, any type and body) is
        /// dropped or absorbed, never a panic, and the transfer still completes exactly.
        #[test]
        fn garbage_for_a_live_connection_never_panics(
            junk in proptest::collection::vec(
                (any::<u16>(), any::<u32>(), proptest::collection::vec(any::<u8>(), 0..80)),
                1..40,
            )
        ) {
            let mut p = udt_pair(9, false);
            let (c, s) = connect(&mut p, &Profile::udt());
            let sid = p.server.connection(s).unwrap().local_cid();
            let (now, from) = (p.now, p.client_addr);
            for (head, info, body) in &junk {
                let mut d = head.to_be_bytes().to_vec();
                d.extend_from_slice(&[0, 0]);
                d.extend_from_slice(&info.to_be_bytes());
                d.extend_from_slice(&[0; 4]);
                d.extend_from_slice(&sid.to_be_bytes());
                d.extend_from_slice(body);
                p.server.handle_datagram(now, from, &mut d);
                let cut = d.len().min(15);
                p.server.handle_datagram(now, from, &mut d[..cut]);
            }
            let payload = data(20_000, 4);
            let (got, eof) = stream_transfer(&mut p, c, s, &payload, Duration::from_secs(60));
            prop_assert!(eof);
            // Junk data packets may have landed in the stream (and a forged SHUTDOWN ends
            // it), but never a panic; with neither the bytes are exact.
            if junk.iter().all(|(h, _, _)| h & 0x8000 != 0 && h & 0x7FFF != 5) {
                prop_assert!(got == payload);
            }
        }
    }
}

#[test]
fn unordered_messages_all_arrive_whole_some_ahead_of_earlier_ones() {
    let mut p = udt_pair(10, false);
    p.to_server = lossy();
    p.to_client = lossy();
    let got = message_transfer(&mut p, 500, None, false);
    let mut ids: Vec<u32> = got
        .iter()
        .map(|m| u32::from_be_bytes([m[0], m[1], m[2], m[3]]))
        .collect();
    for (m, &i) in got.iter().zip(&ids) {
        assert_eq!(m, &numbered(i), "message {i} corrupted");
    }
    let overtook = ids.windows(2).any(|w| w[0] > w[1]);
    ids.sort_unstable();
    assert_eq!(
        ids,
        (0..500).collect::<Vec<_>>(),
        "each message exactly once"
    );
    assert!(
        overtook,
        "with 5% loss some message must overtake an incomplete one"
    );
}

#[test]
fn a_message_whose_ttl_ran_out_is_dropped_through_the_connection_api() {
    let mut p = udt_pair(11, false);
    let (c, s) = connect(&mut p, &Profile::udt_dgram());
    let ttl = MsgOptions {
        ttl: Some(Duration::from_millis(50)),
        in_order: true,
    };
    // The first message vanishes on the wire and outlives its TTL before the path heals.
    p.to_server.loss = 1.0;
    let now = p.now;
    let conn = p.client.connection_mut(c).unwrap();
    conn.send_msg_with(now, numbered(1), ttl).unwrap();
    p.run_until(Duration::from_secs(1), |_| false);
    p.to_server.loss = 0.0;
    let now = p.now;
    let conn = p.client.connection_mut(c).unwrap();
    conn.send_msg_with(now, numbered(2), MsgOptions::default())
        .unwrap();
    let mut got = Vec::new();
    let ok = p.run_until(Duration::from_secs(30), |p| {
        let now = p.now;
        while let Ok(m) = p.server.connection_mut(s).unwrap().recv_msg(now) {
            got.push(m);
        }
        !got.is_empty()
    });
    assert!(ok, "the message after the expired one never arrived");
    assert_eq!(
        got,
        vec![numbered(2)],
        "the expired message must not arrive"
    );
    assert!(p.client.connection(c).unwrap().stats().messages_abandoned >= 1);
    assert!(p.server.connection(s).unwrap().stats().messages_abandoned >= 1);
}

#[test]
fn perfmon_counts_match_the_wire_and_intervals_restart_on_clear() {
    let mut p = udt_pair(12, false);
    p.to_server.loss = 0.03;
    let (c, s) = connect(&mut p, &Profile::udt());
    let payload = data(1 << 20, 5);
    let (got, eof) = stream_transfer(&mut p, c, s, &payload, Duration::from_secs(120));
    assert!(eof && got == payload);
    // Let the last ACKs reach the sender.
    p.run_until(Duration::from_millis(500), |_| false);
    let now = p.now;
    let tx = p.client.connection_mut(c).unwrap().perfmon(now, true);
    let rx = p.server.connection_mut(s).unwrap().perfmon(now, true);
    let st = p.client.connection(c).unwrap().stats();
    assert_eq!(tx.total.pkt_sent, st.segments_sent);
    assert_eq!(tx.total.pkt_retrans, st.retransmissions);
    assert_eq!(
        tx.interval, tx.total,
        "first query: the interval is the whole life"
    );
    // Only data toward the server is lost: what the sender sent and the receiver did not
    // get was lost on the link, and the receiver noticed the gaps.
    let lost_on_link = tx.total.pkt_sent - rx.total.pkt_recv;
    assert!(
        lost_on_link > 0 && rx.total.pkt_rcv_loss > 0,
        "{tx:?} {rx:?}"
    );
    assert!(tx.total.pkt_recv_ack > 0 && rx.total.pkt_sent_ack > 0);
    assert!(tx.total.pkt_recv_nak > 0 && rx.total.pkt_sent_nak > 0);
    assert!(tx.total.us_snd_duration > 0);
    assert!(tx.ms_timestamp > 0 && tx.mbps_send_rate > 0.0 && rx.mbps_recv_rate > 0.0);
    assert_eq!(tx.instant.pkt_flight_size, 0, "everything was acknowledged");
    assert!(tx.instant.pkt_flow_window > 0 && rx.instant.byte_avail_rcv_buf > 0);
    assert!(tx.instant.ms_rtt > 0.0);
    // Nothing was sent since the clearing query: the new interval is empty.
    p.run_until(Duration::from_millis(100), |_| false);
    let now = p.now;
    let again = p.client.connection_mut(c).unwrap().perfmon(now, false);
    assert_eq!(again.interval.pkt_sent, 0);
    assert_eq!(again.total.pkt_sent, tx.total.pkt_sent);
    assert!(again.interval_us >= 100_000);
}

/// Transfers `mib` MiB over a pair with `loss` both ways and `delay_ms` each way; returns
/// the sender's retransmissions and the data packets lost on the link (sent − received).
fn retransmissions_for(seed: u64, loss: f64, delay_ms: u64, mib: usize) -> (u64, u64) {
    let mut p = udt_pair(seed, false);
    let link = LinkModel {
        delay: Duration::from_millis(delay_ms),
        loss,
        ..LinkModel::default()
    };
    p.to_server = link;
    p.to_client = link;
    let (c, s) = connect(&mut p, &Profile::udt());
    let payload = data(mib << 20, seed);
    let (got, eof) = stream_transfer(&mut p, c, s, &payload, Duration::from_secs(300));
    assert!(eof && got == payload, "seed {seed}: transfer incomplete");
    let now = p.now;
    let tx = p.client.connection_mut(c).unwrap().perfmon(now, false);
    let rx = p.server.connection_mut(s).unwrap().perfmon(now, false);
    (tx.total.pkt_retrans, tx.total.pkt_sent - rx.total.pkt_recv)
}

/// The retransmission storm seen through `ctp demo`'s relay (7,311 retransmissions for
/// 2 MiB) was not the sender: the relay's socket buffer dropped bursts unseen. Guard the
/// sender anyway: on a lossy long path every retransmission answers a real loss, not a
/// repeated report of one already being repaired.
#[test]
fn retransmissions_stay_near_the_packets_lost_on_the_link() {
    for seed in [13, 15] {
        let (retrans, lost) = retransmissions_for(seed, 0.01, 30, 2);
        assert!(
            retrans <= 2 * lost + 16,
            "seed {seed}: {retrans} retransmissions for {lost} packets lost"
        );
    }
}

/// At 5 % loss both ways a loss is reported again only when its retransmission had time
/// to arrive (draft-gg-udt-03's k·RTT) and before the sender's EXP timer resends its whole
/// flight. Before, the periodic NAK re-reported ranges just reported (up to 366
/// retransmissions for 94 losses on a 2 ms RTT) and, on a 200 ms RTT, its doubling
/// interval let EXP fire (5,957 for 590); now each retransmission answers one loss.
#[test]
fn at_5_percent_loss_each_retransmission_answers_a_loss() {
    let runs = [
        (15, 1, 2),
        (17, 1, 2),
        (17, 5, 2),
        (15, 10, 2),
        (13, 30, 2),
        (17, 100, 2),
        (13, 100, 8),
        (17, 100, 8),
    ];
    for (seed, delay_ms, mib) in runs {
        let (retrans, lost) = retransmissions_for(seed, 0.05, delay_ms, mib);
        assert!(lost > 50, "seed {seed}: the link lost only {lost}");
        assert!(
            retrans * 10 <= lost * 13 + 80,
            "seed {seed}, {delay_ms} ms, {mib} MiB: {retrans} retransmissions for {lost} \
             packets lost (bound 1.3 × lost + 8)"
        );
    }
}

/// The UDT4 wire has no packet protection (UDT4 has none; the UDP checksum is its only
/// guard), and ctp handles a tampered packet exactly as UDT4 does: a flipped payload bit is
/// delivered as it arrived, a flipped destination socket id reaches no connection.
#[test]
fn a_tampered_udt4_packet_is_handled_as_udt4_handles_it() {
    let mut p = udt_pair(9, false);
    let (c, s) = connect(&mut p, &Profile::udt());
    let now = p.now;
    let sent = b"plain udt4 data".to_vec();
    p.client
        .connection_mut(c)
        .unwrap()
        .stream_write(now, &sent)
        .unwrap();
    let mut buf = Vec::new();
    let t = p
        .client
        .poll_transmit(now, &mut buf)
        .expect("a data packet");
    buf.truncate(t.size);
    assert!(matches!(Packet::parse(&buf), Ok(Packet::Data { .. })));
    // The destination socket id is the header's fourth word.
    let mut elsewhere = buf.clone();
    elsewhere[12] ^= 0x10;
    let unknown = p.server.stats().unknown_connection;
    p.server.handle_datagram(now, p.client_addr, &mut elsewhere);
    assert_eq!(p.server.stats().unknown_connection, unknown + 1);
    let mut tampered = buf.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 0x01;
    p.server.handle_datagram(now, p.client_addr, &mut tampered);
    let mut got = vec![0; 64];
    let n = p
        .server
        .connection_mut(s)
        .unwrap()
        .stream_read(now, &mut got)
        .unwrap();
    let mut expected = sent;
    *expected.last_mut().unwrap() ^= 0x01;
    assert_eq!(&got[..n], &expected[..], "delivered as it arrived");
}
