//! Secure channels in the in-memory pair: the Noise XX handshake over the cookie exchange,
//! each side's proven key judged by its peer policy, every packet sealed by the AEAD, and
//! what an attacker on the path can and cannot do.

mod common;

use common::{connect, data, stream_transfer};
use core::time::Duration;
use ctp_proto::pair::Pair;
use ctp_proto::{
    ConnectionState, EndpointConfig, EndpointEvent, Identity, Instant, MicroId, MicroSet,
    PeerPolicy, Profile,
};
use std::net::SocketAddr;

fn configs(seed: u8) -> (EndpointConfig, EndpointConfig) {
    let mut client = EndpointConfig::new([seed; 32], [seed + 1; 32]);
    client.identity = Some(Identity::generate([seed + 2; 32]));
    let mut server = EndpointConfig::new([seed + 3; 32], [seed + 4; 32]);
    server.accept = true;
    server.identity = Some(Identity::generate([seed + 5; 32]));
    server.required = MicroSet::of(&[MicroId::Secure]);
    (client, server)
}

/// The client's connection ends with this reason (the handshake fails or the peer closes).
fn client_close_reason(p: &mut Pair, profile: &Profile) -> String {
    let now = p.now;
    let addr = p.server_addr;
    let c = p.client.connect(now, addr, profile).expect("valid profile");
    p.run_until(Duration::from_secs(60), |p| {
        p.client
            .connection(c)
            .is_none_or(|x| matches!(x.state(), ConnectionState::Closed(_)))
    });
    match p.client.connection(c).map(|x| x.state().clone()) {
        Some(ConnectionState::Closed(r)) => r.to_string(),
        other => panic!("the client's connection did not end: {other:?}"),
    }
}

#[test]
fn a_transfer_over_a_lossy_secure_channel_arrives_whole_and_each_side_knows_the_others_key() {
    let (client, server) = configs(10);
    let (client_key, server_key) = (
        client.identity.clone().unwrap().public,
        server.identity.clone().unwrap().public,
    );
    let mut p = Pair::with_configs(3, client, server);
    p.to_server.loss = 0.02;
    p.to_client.loss = 0.02;
    p.to_server.delay = Duration::from_millis(10);
    p.to_client.delay = Duration::from_millis(10);
    let (c, s) = connect(&mut p, &Profile::reliable());
    assert_eq!(p.client.connection(c).unwrap().peer_key(), Some(server_key));
    assert_eq!(p.server.connection(s).unwrap().peer_key(), Some(client_key));
    let payload = data(2 << 20, 7);
    let (got, eof) = stream_transfer(&mut p, c, s, &payload, Duration::from_secs(300));
    assert!(
        eof && got == payload,
        "{} of {} bytes",
        got.len(),
        payload.len()
    );
    let st = p.client.connection(c).unwrap().stats();
    assert!(st.retransmissions > 0, "the loss was exercised");
}

#[test]
fn an_insecure_connection_carries_no_key_and_a_secure_one_no_plaintext() {
    // Plaintext profile to a responder that does not require encryption: no key.
    let (client, mut server) = configs(20);
    server.required = MicroSet::default();
    let mut p = Pair::with_configs(4, client, server);
    let (c, _) = connect(&mut p, &Profile::reliable().insecure());
    assert_eq!(p.client.connection(c).unwrap().peer_key(), None);

    // On a secure channel, the payload never appears in clear on the wire.
    let (client, server) = configs(30);
    let mut p = Pair::with_configs(5, client, server);
    let (c, s) = connect(&mut p, &Profile::reliable());
    let marker = b"THIS SENTENCE MUST NOT BE SEEN ON THE WIRE.".repeat(30);
    let now = p.now;
    p.client
        .connection_mut(c)
        .unwrap()
        .stream_write(now, &marker)
        .unwrap();
    let mut seen_clear = false;
    let mut got = Vec::new();
    let mut buf = vec![0; 4096];
    let mut wire = Vec::new();
    p.run_until(Duration::from_secs(10), |p| {
        while let Some(t) = p.client.poll_transmit(p.now, &mut wire) {
            if wire[..t.size]
                .windows(12)
                .any(|w| w == &b"THIS SENTENC"[..])
            {
                seen_clear = true;
            }
            p.inject(ctp_proto::pair::Side::Server, wire[..t.size].to_vec());
        }
        let now = p.now;
        let conn = p.server.connection_mut(s).unwrap();
        common::read_available(conn, now, &mut buf, &mut got);
        got.len() >= marker.len()
    });
    assert_eq!(got, marker);
    assert!(!seen_clear, "plaintext on the wire");
}

#[test]
fn each_side_refuses_what_its_policy_refuses_and_the_initiator_learns_why() {
    // The responder's allow list does not have the client's key: the client is told.
    let (client, mut server) = configs(40);
    server.peer_policy = PeerPolicy::new(|k| {
        assert!(k.peer_initiated);
        Err("not on the allow list".into())
    });
    let mut p = Pair::with_configs(6, client, server);
    let why = client_close_reason(&mut p, &Profile::reliable());
    assert!(
        why.contains("your key was refused: not on the allow list"),
        "{why}"
    );
    assert!(
        !p.server_events
            .iter()
            .any(|e| matches!(e, EndpointEvent::Incoming(_))),
        "a refused peer was shown to the application"
    );
    p.run_until(Duration::from_secs(5), |p| p.server.connection_count() == 0);
    assert_eq!(
        p.server.connection_count(),
        0,
        "the refused connection stays"
    );
    assert_eq!(p.server.stats().handshake_failed, 1);

    // The client pinned another key: the handshake fails at the client.
    let (mut client, server) = configs(50);
    let pinned = [7u8; 32];
    client.peer_policy = PeerPolicy::new(move |k| {
        if k.key == pinned {
            Ok(())
        } else {
            Err("not the pinned key".into())
        }
    });
    let mut p = Pair::with_configs(7, client, server);
    let why = client_close_reason(&mut p, &Profile::reliable());
    assert!(
        why.contains("the peer's key was refused: not the pinned key"),
        "{why}"
    );
}

#[test]
fn encryption_is_never_silently_dropped() {
    // A responder that requires encryption refuses a plaintext request, with the reason.
    let (client, server) = configs(60);
    let mut p = Pair::with_configs(8, client, server);
    let why = client_close_reason(&mut p, &Profile::reliable().insecure());
    assert!(why.contains("accepts only encrypted connections"), "{why}");

    // A responder without encryption refuses a secure request instead of narrowing it.
    let (client, mut server) = configs(70);
    server.supported = MicroSet::of(MicroId::ALL).without(MicroId::Secure);
    server.required = MicroSet::default();
    let mut p = Pair::with_configs(9, client, server);
    let why = client_close_reason(&mut p, &Profile::reliable());
    assert!(why.contains("runs without encryption"), "{why}");
}

/// Drives a handshake by hand, letting `tamper` rewrite each datagram on its way.
fn handshake_through(
    mut tamper: impl FnMut(bool, &mut Vec<u8>),
) -> (
    ctp_proto::Endpoint,
    ctp_proto::Endpoint,
    ctp_proto::ConnectionHandle,
) {
    let (client, server) = configs(80);
    let mut a = ctp_proto::Endpoint::new(client);
    let mut b = ctp_proto::Endpoint::new(server);
    let (ca, sa): (SocketAddr, SocketAddr) = (
        "10.0.0.1:1000".parse().unwrap(),
        "10.0.0.2:2000".parse().unwrap(),
    );
    let mut now = Instant::from_micros(1_000_000);
    let c = a.connect(now, sa, &Profile::reliable()).unwrap();
    let mut buf = Vec::new();
    for _ in 0..40 {
        while let Some(t) = a.poll_transmit(now, &mut buf) {
            let mut d = buf[..t.size].to_vec();
            tamper(true, &mut d);
            b.handle_datagram(now, ca, &mut d);
        }
        while let Some(t) = b.poll_transmit(now, &mut buf) {
            let mut d = buf[..t.size].to_vec();
            tamper(false, &mut d);
            a.handle_datagram(now, sa, &mut d);
        }
        now += Duration::from_millis(100);
        a.handle_timeout(now);
        b.handle_timeout(now);
    }
    (a, b, c)
}

#[test]
fn a_rewritten_offer_fails_the_key_agreement() {
    // An attacker on the path rewrites INIT (a smaller flow window: a narrower request
    // the responder would honour) and fixes its CRC: the Noise prologue binds the offer
    // as sent, so message 2 fails at the initiator and nothing is established.
    let (a, b, c) = handshake_through(|to_server, d| {
        if to_server && d[0] & 0x0f == 0 {
            // INIT: long header (13 bytes), then the offer: micros varint, then the
            // max_udp_payload varint (2 bytes), then the flow window.
            let mut body = d[..d.len() - 4].to_vec();
            let at = 13 + ctp_varint_len(body[13]) + 2;
            assert_eq!(
                ctp_varint_len(body[at]),
                4,
                "flow window as a 4-byte varint"
            );
            body[at + 3] ^= 0x01;
            let crc = crc32c::crc32c(&body);
            body.extend_from_slice(&crc.to_be_bytes());
            *d = body;
        }
    });
    assert!(!a.connection(c).unwrap().is_established());
    assert_eq!(b.stats().accepted, 0);

    // The same exchange untouched is established.
    let (a, b, c) = handshake_through(|_, _| {});
    assert!(a.connection(c).unwrap().is_established());
    assert_eq!(b.stats().accepted, 1);
}

fn ctp_varint_len(first: u8) -> usize {
    1 << (first >> 6)
}

#[test]
fn forged_and_flipped_handshake_messages_change_nothing() {
    // The first handshake datagram of every kind, each way, has one bit flipped; the
    // handshake still completes (each copy is dropped and counted, the retransmission
    // gets through) and the peers agree.
    let mut seen = std::collections::HashSet::new();
    let mut flipped = 0;
    let (a, b, c) = handshake_through(|to_server, d| {
        if d[0] & 0x80 != 0 && seen.insert((to_server, d[0])) {
            let bit = (d.len() * 8 / 2 + flipped * 13) % (d.len() * 8);
            d[bit / 8] ^= 1 << (bit % 8);
            flipped += 1;
        }
    });
    assert_eq!(
        flipped, 5,
        "INIT, INIT_ACK, COOKIE_ECHO and both HANDSHAKEs"
    );
    assert!(a.connection(c).unwrap().is_established());
    assert_eq!(b.stats().accepted, 1);
}

/// A packet of the client's, taken off the wire before it reached the server, arrives again
/// and again with one byte of its ciphertext flipped (its number was never opened, so the
/// replay window lets every copy through to the AEAD). Below the integrity limit each copy
/// is dropped and counted and the transfer completes; the copy that reaches the limit
/// closes the channel, and the client learns why.
#[test]
fn forgeries_below_the_integrity_limit_are_dropped_and_the_one_that_reaches_it_closes() {
    const LIMIT: u64 = 20;
    let (client, mut server) = configs(40);
    server.key_limits.failed_opens = Some(LIMIT);
    let mut p = Pair::with_configs(6, client, server);
    let (c, s) = connect(&mut p, &Profile::reliable());
    let payload = data(1 << 20, 11);
    let mut forged: Option<Vec<u8>> = None;
    let (got, eof) = common::stream_transfer_watched(
        &mut p,
        c,
        s,
        &payload,
        Duration::from_secs(120),
        |p, read| {
            if forged.is_some() || read < 256 << 10 {
                return;
            }
            // Take the client's next packet off the path.
            p.to_server.loss = 1.0;
            p.tap_client = true;
            if let Some(mut packet) = p.tapped.pop() {
                p.to_server.loss = 0.0;
                p.tap_client = false;
                let i = packet.len() - 20; // ciphertext, not the tag
                packet[i] ^= 0x40;
                for _ in 1..LIMIT {
                    p.inject(ctp_proto::pair::Side::Server, packet.clone());
                }
                forged = Some(packet);
            }
        },
    );
    assert!(
        eof && got == payload,
        "{} of {} bytes",
        got.len(),
        payload.len()
    );
    let forged = forged.expect("a packet was taken and forged mid-transfer");
    assert!(p.server.stats().bad_checksum >= LIMIT - 1);
    assert!(p.server.connection(s).unwrap().is_established());

    p.inject(ctp_proto::pair::Side::Server, forged);
    let ended = |p: &Pair, h, server: bool| {
        let ep = if server { &p.server } else { &p.client };
        match ep.connection(h).map(|x| x.state().clone()) {
            Some(ConnectionState::Closed(r)) => Some(r),
            _ => None,
        }
    };
    p.run_until(Duration::from_secs(30), |p| {
        ended(p, c, false).is_some() && ended(p, s, true).is_some()
    });
    assert_eq!(
        ended(&p, s, true),
        Some(ctp_proto::CloseReason::IntegrityLimit)
    );
    match ended(&p, c, false) {
        Some(ctp_proto::CloseReason::Peer { code, reason }) => {
            assert_eq!(code, ctp_proto::wire::frame::close_code::INTEGRITY_LIMIT);
            assert!(reason.contains("integrity limit"), "{reason}");
        }
        other => panic!("the client was not told: {other:?}"),
    }
}
