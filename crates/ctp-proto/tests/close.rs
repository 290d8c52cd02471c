//! Closing without TIME_WAIT: CUSP's NOSTATE with the MAC echo. A short packet for a
//! connection id an endpoint does not know is answered with NOSTATE, echoing the packet's
//! trailing bytes; the sender honours it only when the echo is the end of the last packet
//! it sent. A sender whose peer forgot the connection learns it within a round trip or
//! two instead of at the idle timeout; a closer's drain ends at once; a forged NOSTATE
//! changes nothing; NOSTATE never amplifies, never answers itself, and is rate limited.
//! And an endpoint keeps nothing of a connection once it closed and was removed.

mod common;

use common::{connect, data, read_available};
use core::time::Duration;
use ctp_proto::packet::{nostate_packet, NOSTATE_LEN};
use ctp_proto::pair::{Pair, Side};
use ctp_proto::protection::crc32c;
use ctp_proto::wire::header::{short_dcid, Header, LongType, NoState, ECHO_LEN};
use ctp_proto::wire::Reader;
use ctp_proto::{
    CloseReason, ConnectionHandle, ConnectionState, Endpoint, EndpointConfig, EndpointEvent,
    Instant, Params, Profile,
};
use std::net::SocketAddr;

/// The two channels every behaviour is checked on: plain (CRC32C) and secure (AEAD).
fn profiles() -> [(&'static str, Profile); 2] {
    [
        ("plain", Profile::reliable().insecure()),
        ("secure", Profile::reliable()),
    ]
}

/// A pair with a 20 ms round trip.
fn pair(seed: u64) -> Pair {
    let mut p = Pair::new(seed);
    p.to_server.delay = Duration::from_millis(10);
    p.to_client.delay = Duration::from_millis(10);
    p
}

/// The server's endpoint is replaced by a fresh one on the same address, as after a
/// restart: it knows no connection.
fn restart_server(p: &mut Pair, salt: u8) {
    let mut cfg = EndpointConfig::new([salt; 32], [salt ^ 0x55; 32]);
    cfg.accept = true;
    p.server = Endpoint::new(cfg);
}

fn state(p: &Pair, c: ConnectionHandle) -> ConnectionState {
    p.client
        .connection(c)
        .expect("client connection")
        .state()
        .clone()
}

fn closed(p: &Pair, c: ConnectionHandle) -> bool {
    matches!(state(p, c), ConnectionState::Closed(_))
}

/// Writes as much of `payload` as the connection takes from `*written` on.
fn feed(p: &mut Pair, c: ConnectionHandle, payload: &[u8], written: &mut usize) {
    let now = p.now;
    if let Some(conn) = p.client.connection_mut(c) {
        while *written < payload.len() {
            match conn.stream_write(now, &payload[*written..]) {
                Ok(n) => *written += n,
                Err(_) => break,
            }
        }
    }
}

/// A sender whose receiver restarts mid-transfer (its endpoint forgets every connection)
/// is told "peer forgot" within a few retransmission timeouts — not at the idle timeout.
#[test]
fn a_sender_whose_receiver_restarts_is_told_the_peer_forgot_within_a_few_rtos() {
    for (name, profile) in profiles() {
        let mut p = pair(1);
        let (c, s) = connect(&mut p, &profile);
        let payload = data(8 << 20, 3);
        let (mut written, mut got, mut buf) = (0, Vec::new(), vec![0u8; 65536]);
        // Until the receiver has a megabyte: the transfer is in full flight.
        assert!(p.run_until(Duration::from_secs(60), |p| {
            feed(p, c, &payload, &mut written);
            let now = p.now;
            read_available(p.server.connection_mut(s).unwrap(), now, &mut buf, &mut got);
            got.len() >= 1 << 20
        }));
        let rto = Duration::from_micros(p.client.connection(c).unwrap().stats().rto_us);
        restart_server(&mut p, 0x70);
        let restarted = p.now;
        assert!(
            p.run_until(Duration::from_secs(60), |p| {
                feed(p, c, &payload, &mut written);
                closed(p, c)
            }),
            "{name}: the sender never closed"
        );
        let took = p.now.saturating_since(restarted);
        assert_eq!(
            state(&p, c),
            ConnectionState::Closed(CloseReason::PeerForgot),
            "{name}"
        );
        let idle = Duration::from_millis(Params::default().idle_timeout_ms.into());
        assert!(
            took < idle / 100 && took < 10 * rto,
            "{name}: told after {took:?} (rto {rto:?}, idle timeout {idle:?})"
        );
        assert!(p.server.stats().nostate_sent >= 1, "{name}");
        assert_eq!(p.client.stats().nostate_honoured, 1, "{name}");
        assert!(
            p.client_events
                .contains(&EndpointEvent::Closed(c, CloseReason::PeerForgot)),
            "{name}: the application is told"
        );
        assert_eq!(
            CloseReason::PeerForgot.to_string(),
            "the peer has no state for this connection (it closed or restarted)"
        );
    }
}

/// A closer whose CLOSE reaches a peer that already forgot the connection ends its drain
/// as soon as the NOSTATE comes back (one round trip), as a graceful close — not after
/// the drain period of three retransmission timeouts.
#[test]
fn a_draining_closer_ends_its_drain_at_once_on_a_matching_nostate() {
    for (name, profile) in profiles() {
        let mut p = pair(2);
        let (c, _) = connect(&mut p, &profile);
        let quiet = p.now + Duration::from_millis(300);
        p.run_until(Duration::from_secs(1), |p| p.now >= quiet);
        let rto = Duration::from_micros(p.client.connection(c).unwrap().stats().rto_us);
        restart_server(&mut p, 0x71);
        let now = p.now;
        p.client.connection_mut(c).unwrap().close(now);
        assert!(p.run_until(Duration::from_secs(10), |p| closed(p, c)));
        let took = p.now.saturating_since(now);
        assert_eq!(
            state(&p, c),
            ConnectionState::Closed(CloseReason::Graceful),
            "{name}"
        );
        // The CLOSE's way there and the NOSTATE's way back, against a drain of 3 RTO.
        assert!(
            took <= Duration::from_millis(25) && took < 3 * rto,
            "{name}: drained for {took:?} (rto {rto:?})"
        );
        assert_eq!(p.client.stats().nostate_honoured, 1, "{name}");
        assert_eq!(p.server.stats().nostate_sent, 1, "{name}");
    }
}

/// A transfer runs while forged NOSTATEs arrive for its connection from the peer's
/// address: one with a made-up echo, one echoing a packet the sender sent earlier (an
/// eavesdropper's replay, stale by the time it arrives). Both are ignored and counted; the
/// transfer completes byte-exact.
#[test]
fn a_forged_or_stale_nostate_is_ignored_and_the_transfer_completes() {
    for (name, profile) in profiles() {
        let mut p = pair(3);
        let (c, s) = connect(&mut p, &profile);
        let payload = data(4 << 20, 5);
        let (mut written, mut got, mut buf) = (0, Vec::new(), vec![0u8; 65536]);
        let mut finished = false;
        // A packet of the client's, taken off the wire on its way (and passed on).
        let mut sniffed: Option<(u32, [u8; ECHO_LEN], u64)> = None;
        let mut forged = 0;
        let done = p.run_until(Duration::from_secs(120), |p| {
            feed(p, c, &payload, &mut written);
            let now = p.now;
            if written == payload.len() && !finished {
                finished = p
                    .client
                    .connection_mut(c)
                    .unwrap()
                    .stream_finish(now)
                    .is_ok();
            }
            if sniffed.is_none() && got.len() > 1 << 20 {
                p.tap_client = true;
                if let Some(packet) = p.tapped.first() {
                    let cid = short_dcid(packet).expect("a short packet");
                    let count = p.client.connection(c).unwrap().stats().packets_sent;
                    sniffed = Some((cid, NoState::echo_of(packet), count));
                    p.tap_client = false;
                }
            }
            if let Some((cid, echo, count)) = sniffed {
                // Once the sender has sent more packets since (and goes on: the forgeries
                // arrive 10 ms later, mid-transfer).
                let since = p.client.connection(c).unwrap().stats().packets_sent - count;
                if forged == 0 && since >= 20 {
                    let wrong = NoState {
                        cid,
                        echo: [0xa5; ECHO_LEN],
                    };
                    p.inject(Side::Client, nostate_packet(&wrong));
                    p.inject(Side::Client, nostate_packet(&NoState { cid, echo }));
                    forged = 2;
                }
            }
            read_available(p.server.connection_mut(s).unwrap(), now, &mut buf, &mut got)
        });
        assert!(
            done && got == payload,
            "{name}: {} of {} bytes",
            got.len(),
            payload.len()
        );
        assert_eq!(forged, 2, "{name}: the forgeries were sent mid-transfer");
        let st = p.client.stats();
        assert_eq!((st.nostate_ignored, st.nostate_honoured), (2, 0), "{name}");
        assert!(!closed(&p, c), "{name}");
    }
}

fn responder(per_second: u32) -> Endpoint {
    let mut cfg = EndpointConfig::new([9; 32], [10; 32]);
    cfg.accept = true;
    cfg.nostate_per_second = per_second;
    Endpoint::new(cfg)
}

fn peer() -> SocketAddr {
    "10.0.0.9:4000".parse().unwrap()
}

/// A short packet of `len` bytes for connection id `cid`, with bytes that vary.
fn short_packet(cid: u32, len: usize) -> Vec<u8> {
    let mut p = vec![0x40];
    p.extend_from_slice(&cid.to_be_bytes());
    p.extend((0..len.saturating_sub(5)).map(|i| (i * 7 + len) as u8));
    p.truncate(len);
    p
}

fn sent(ep: &mut Endpoint, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while let Some(t) = ep.poll_transmit(now, &mut buf) {
        assert_eq!(t.destination, peer());
        out.push(buf[..t.size].to_vec());
    }
    out
}

/// A short packet for an unknown connection id is answered with one NOSTATE, which names
/// the id and echoes the packet's last 16 bytes, and is smaller than the packet: one too
/// small to be answered without amplifying is not answered at all.
#[test]
fn nostate_answers_an_unknown_short_packet_and_never_amplifies() {
    let mut ep = responder(1_000_000);
    let now = Instant::from_micros(1_000_000);
    for len in 5..=200 {
        let mut trigger = short_packet(0x1234_0000 + len as u32, len);
        let copy = trigger.clone();
        ep.handle_datagram(now, peer(), &mut trigger);
        let out = sent(&mut ep, now);
        if len <= NOSTATE_LEN {
            assert!(out.is_empty(), "a {len}-byte packet was answered");
            continue;
        }
        assert_eq!(out.len(), 1, "{len}");
        let reply = &out[0];
        assert!(
            reply.len() < len,
            "a {len}-byte packet drew {} bytes",
            reply.len()
        );
        assert_eq!(reply.len(), NOSTATE_LEN);
        let body = crc32c::open_long(reply).expect("the CRC32C checks out");
        let mut r = Reader::new(body);
        let Header::Long { ty, scid, .. } = Header::parse(&mut r).unwrap() else {
            panic!("a long header");
        };
        assert_eq!(ty, LongType::NoState);
        let n = NoState::parse(scid, r.rest()).unwrap();
        assert_eq!(n.cid, 0x1234_0000 + len as u32);
        assert_eq!(n.echo[..], copy[len - ECHO_LEN..]);
    }
    let st = ep.stats();
    assert_eq!(st.nostate_sent, (200 - NOSTATE_LEN) as u64);
    assert_eq!(st.nostate_unanswered, (NOSTATE_LEN - 4) as u64);
}

/// A NOSTATE is never answered — not one for an unknown connection, not one with a bad
/// echo, not a corrupted one — so two endpoints that both forgot cannot bounce them
/// back and forth; nor is any other long packet answered with NOSTATE.
#[test]
fn nostate_never_answers_a_nostate_or_a_long_packet() {
    let (mut a, mut b) = (responder(1_000_000), responder(1_000_000));
    let now = Instant::from_micros(1_000_000);
    let mut trigger = short_packet(77, 100);
    a.handle_datagram(now, peer(), &mut trigger);
    let ping = sent(&mut a, now);
    assert_eq!(ping.len(), 1);
    // Bounced to the other endpoint, which has no connection either: as it is, and
    // corrupted in its echo or its CRC.
    for flip in [None, Some(20), Some(NOSTATE_LEN - 1)] {
        let mut n = ping[0].clone();
        if let Some(i) = flip {
            n[i] ^= 1;
        }
        b.handle_datagram(now, peer(), &mut n);
        assert!(sent(&mut b, now).is_empty());
    }
    assert_eq!(b.stats().nostate_sent, 0);
    assert_eq!(b.stats().nostate_ignored, 1);
    assert_eq!(b.stats().bad_checksum, 2);
    // A long packet of another kind, for an unknown connection: no NOSTATE.
    let mut hs = ctp_proto::packet::long_packet(LongType::Handshake, 5, 6, &[0; 80], 0);
    b.handle_datagram(now, peer(), &mut hs);
    assert!(sent(&mut b, now).is_empty());
    assert_eq!(b.stats().nostate_sent, 0);
}

/// NOSTATE is rate limited per endpoint: a flood of unknown short packets draws at most a
/// burst at once and the configured rate over time; 0 turns it off.
#[test]
fn nostate_is_rate_limited() {
    let mut ep = responder(256);
    let t0 = Instant::from_micros(1_000_000);
    let flood = |ep: &mut Endpoint, now: Instant, n: u32| {
        for i in 0..n {
            let mut d = short_packet(i + 1, 64);
            ep.handle_datagram(now, peer(), &mut d);
        }
        sent(ep, now).len()
    };
    // All at one instant: the burst (an eighth of a second's worth), no more.
    assert_eq!(flood(&mut ep, t0, 1000), 32);
    assert_eq!(flood(&mut ep, t0, 1000), 0);
    // Ten seconds idle refill the bucket to its burst, not beyond.
    assert_eq!(flood(&mut ep, t0 + Duration::from_secs(10), 1000), 32);
    // One a millisecond for two seconds: the rate.
    let start = t0 + Duration::from_secs(20);
    let mut answered = 0;
    for ms in 0..2000 {
        answered += flood(&mut ep, start + Duration::from_millis(ms), 1);
    }
    assert!(
        (2 * 256..=2 * 256 + 32).contains(&answered),
        "{answered} answers in 2 s"
    );
    let st = ep.stats();
    assert_eq!(st.nostate_sent, 32 + 32 + answered as u64);
    assert_eq!(st.nostate_sent + st.nostate_unanswered, 5000);
    let mut off = responder(0);
    assert_eq!(flood(&mut off, t0, 10), 0);
}

/// An endpoint keeps no state per closed connection: a responder serving a thousand
/// connections one after another, each closed gracefully, holds none afterwards, and its
/// per-connection tables (connection ids, peers' connection ids, peer addresses, timers)
/// do not grow with the number served. After each graceful close the replier holds
/// nothing once the application removed the connection, and the closer at most the
/// connection it drains.
#[test]
fn a_thousand_connections_opened_and_closed_leave_nothing_behind() {
    let mut p = pair(4);
    let profile = Profile::reliable().insecure();
    let mut most = ctp_proto::Footprint::default();
    for round in 0..1000 {
        p.client_events.clear();
        p.server_events.clear();
        let (c, s) = if round % 100 == 99 {
            // Now and then a secure one.
            connect(&mut p, &Profile::reliable())
        } else {
            connect(&mut p, &profile)
        };
        let now = p.now;
        p.client.connection_mut(c).unwrap().close(now);
        assert!(p.run_until(Duration::from_secs(10), |p| {
            p.server_events
                .iter()
                .any(|e| matches!(e, EndpointEvent::Closed(h, _) if *h == s))
        }));
        p.server.remove(s);
        assert_eq!(p.server.connection_count(), 0, "round {round}");
        assert!(p.client.connection_count() <= 1, "round {round}");
        assert!(p.run_until(Duration::from_secs(10), |p| closed(p, c)));
        assert_eq!(state(&p, c), ConnectionState::Closed(CloseReason::Graceful));
        p.client.remove(c);
        let f = p.server.footprint();
        most.slots = most.slots.max(f.slots);
        most.timers = most.timers.max(f.timers);
        most.by_cid = most.by_cid.max(f.by_cid);
        most.by_remote_cid = most.by_remote_cid.max(f.by_remote_cid);
        most.per_address = most.per_address.max(f.per_address);
    }
    // Let the last farewells and stale timers pass.
    let until = p.now + Duration::from_secs(60);
    p.run_until(Duration::from_secs(61), |p| p.now >= until);
    for (side, ep) in [("server", &mut p.server), ("client", &mut p.client)] {
        let f = ep.footprint();
        assert_eq!(
            (
                f.connections,
                f.by_cid,
                f.by_remote_cid,
                f.per_address,
                f.stateless_queued
            ),
            (0, 0, 0, 0, 0),
            "{side}: {f:?}"
        );
        assert!(f.slots <= 1 && f.timers <= 66, "{side}: {f:?}");
    }
    assert!(
        most.slots <= 1
            && most.by_cid == 0
            && most.by_remote_cid == 0
            && most.per_address == 0
            && most.timers <= 66,
        "the server's tables grew: {most:?}"
    );
    assert_eq!(p.server.stats().accepted, 1000);
}
