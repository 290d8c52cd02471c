//! The handshake under load: the client puzzle a responder asks once half-open connections
//! pile up, and the cap that bounds them whatever an attacker solves. Sans-IO, with
//! direct endpoint calls (the attacker is a real client endpoint whose Noise message 2
//! never arrives) or the in-memory pair; nothing depends on wall-clock speed.

mod common;

use core::time::Duration;
use ctp_proto::handshake::puzzle;
use ctp_proto::packet::long_packet;
use ctp_proto::pair::Pair;
use ctp_proto::protection::crc32c;
use ctp_proto::wire::header::{Header, LongType};
use ctp_proto::wire::Reader;
use ctp_proto::{Endpoint, EndpointConfig, EndpointEvent, Instant, Profile};
use std::net::SocketAddr;

const SERVER: &str = "10.0.0.2:2000";

fn server_addr() -> SocketAddr {
    SERVER.parse().unwrap()
}

/// A responder with the given watermark, difficulty cap and half-open cap; one host may
/// hold every connection (the attackers here share few addresses).
fn server(watermark: usize, cap: u8, max_half_open: usize) -> Endpoint {
    let mut cfg = EndpointConfig::new([3; 32], [4; 32]);
    cfg.accept = true;
    cfg.puzzle_low_watermark = watermark;
    cfg.puzzle_max_difficulty = cap;
    cfg.max_half_open = max_half_open;
    cfg.max_connections_per_address = 100_000;
    cfg.max_connections = 100_000;
    Endpoint::new(cfg)
}

fn client(n: u8) -> Endpoint {
    Endpoint::new(EndpointConfig::new([n; 32], [n.wrapping_add(100); 32]))
}

/// One datagram out of `ep` (panics when there is none).
fn out(ep: &mut Endpoint, now: Instant) -> Vec<u8> {
    let mut buf = Vec::new();
    ep.poll_transmit(now, &mut buf).expect("a datagram");
    buf
}

/// Everything `ep` has to send now, thrown away (the attacker's Noise message 2).
fn drain(ep: &mut Endpoint, now: Instant) -> usize {
    let mut buf = Vec::new();
    let mut n = 0;
    while ep.poll_transmit(now, &mut buf).is_some() {
        n += 1;
    }
    n
}

/// A long packet's type, ids and body (between header and trailer).
fn open(packet: &[u8]) -> (LongType, u32, u32, Vec<u8>) {
    let inner = crc32c::open_long(packet).expect("checksum");
    let mut r = Reader::new(inner);
    match Header::parse(&mut r).expect("header") {
        Header::Long { ty, dcid, scid, .. } => (ty, dcid, scid, r.rest().to_vec()),
        other => panic!("{other:?}"),
    }
}

/// The cookie, the bytes after it (`tail`), and where the cookie starts, in an INIT_ACK
/// or COOKIE_ECHO body (an INIT_ACK's offer is skipped with `offer_len`).
fn split_cookie(body: &[u8], offer_len: usize) -> (Vec<u8>, Vec<u8>, usize) {
    let mut r = Reader::new(&body[offer_len..]);
    let cookie = r.length_prefixed(256, "cookie").unwrap().to_vec();
    let tail = r.rest().to_vec();
    let start = body.len() - tail.len() - cookie.len();
    (cookie, tail, start)
}

/// The offer's length in an INIT_ACK body.
fn offer_len(body: &[u8]) -> usize {
    let mut r = Reader::new(body);
    ctp_proto::profile::decode_offer(&mut r, &Default::default()).unwrap();
    body.len() - r.remaining()
}

/// One attacker step from `from` through a fresh connection of `cl`: INIT, INIT_ACK (the
/// client solves what it asks), and the COOKIE_ECHO, which `edit` may rewrite before the
/// server gets it. Returns the INIT_ACK's difficulty and the echo as sent.
fn echo_via(
    srv: &mut Endpoint,
    cl: &mut Endpoint,
    from: SocketAddr,
    now: Instant,
    edit: impl FnOnce(Vec<u8>) -> Vec<u8>,
) -> (u8, Vec<u8>) {
    echo_with(srv, cl, from, now, &Profile::reliable(), edit)
}

/// [`echo_via`] with another profile.
fn echo_with(
    srv: &mut Endpoint,
    cl: &mut Endpoint,
    from: SocketAddr,
    now: Instant,
    profile: &Profile,
    edit: impl FnOnce(Vec<u8>) -> Vec<u8>,
) -> (u8, Vec<u8>) {
    cl.connect(now, server_addr(), profile).unwrap();
    let mut init = out(cl, now);
    srv.handle_datagram(now, from, &mut init);
    let mut ack = out(srv, now);
    let (ty, _, _, body) = open(&ack);
    assert_eq!(ty, LongType::InitAck);
    let (_, tail, _) = split_cookie(&body, offer_len(&body));
    let d = tail.first().copied().unwrap_or(0);
    cl.handle_datagram(now, server_addr(), &mut ack);
    let echo = out(cl, now);
    let mut echo = edit(echo);
    srv.handle_datagram(now, from, &mut echo);
    drain(srv, now);
    (d, echo)
}

/// A half-open connection made by an attacker at `from` that solves the puzzle honestly.
fn half_open(srv: &mut Endpoint, cl: &mut Endpoint, from: SocketAddr, now: Instant) -> u8 {
    echo_via(srv, cl, from, now, |e| e).0
}

fn attacker_addr(i: u32) -> SocketAddr {
    SocketAddr::from(([192, 0, 2, (i % 200) as u8 + 1], 1000 + (i / 200) as u16))
}

fn now0() -> Instant {
    Instant::from_micros(1_000_000)
}

/// Under light load nothing changes: INIT_ACK names no difficulty (its body ends with the
/// cookie), COOKIE_ECHO carries the cookie and Noise message 1 only, nobody hashes, and
/// the handshake completes in the same packets.
#[test]
fn no_puzzle_under_light_load() {
    let mut p = Pair::new(5);
    let now = p.now;
    let c = p
        .client
        .connect(now, p.server_addr, &Profile::reliable())
        .unwrap();
    let mut init = out(&mut p.client, now);
    let from = p.client_addr;
    p.server.handle_datagram(now, from, &mut init);
    let mut ack = out(&mut p.server, now);
    let (_, _, _, body) = open(&ack);
    let (cookie, tail, _) = split_cookie(&body, offer_len(&body));
    assert!(
        tail.is_empty(),
        "INIT_ACK carries {tail:?} after the cookie"
    );
    let server_addr = p.server_addr;
    p.client.handle_datagram(now, server_addr, &mut ack);
    let mut echo = out(&mut p.client, now);
    let (ty, _, _, body) = open(&echo);
    assert_eq!(ty, LongType::CookieEcho);
    let (echoed, tail, _) = split_cookie(&body, 0);
    assert_eq!(echoed, cookie);
    let mut r = Reader::new(&tail);
    r.length_prefixed(1024, "noise")
        .expect("Noise message 1 right after the cookie");
    assert!(r.is_empty(), "nothing else in the echo");
    p.server.handle_datagram(now, from, &mut echo);
    assert!(p.run_until(Duration::from_secs(5), |p| {
        p.client.connection(c).is_some_and(|x| x.is_established()) && p.server.stats().accepted == 1
    }));
    let (s, k) = (p.server.stats(), p.client.stats());
    assert_eq!(
        (s.puzzles_asked, s.puzzles_verified, s.puzzle_difficulty),
        (0, 0, 0)
    );
    assert_eq!(k.puzzle_hashes, 0);
    assert_eq!(s.accepted, 1);
    assert_eq!(s.half_open, 0, "authenticated: no longer half-open");
}

/// Each half-open connection is load: the difficulty asked never falls as they pile up,
/// rises 2 bits per doubling past the watermark, and each INIT_ACK names what the
/// endpoint reports.
#[test]
fn difficulty_rises_with_half_open_connections() {
    let mut srv = server(4, 14, 10_000);
    let mut cl = client(1);
    let now = now0();
    let mut seen = Vec::new();
    for i in 0..40 {
        let before = srv.puzzle_difficulty();
        let d = half_open(&mut srv, &mut cl, attacker_addr(i), now);
        assert_eq!(d, before, "INIT_ACK {i} names what the endpoint asks");
        assert_eq!(srv.half_open(), i as usize + 1);
        seen.push(d);
    }
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    assert_eq!(&seen[..4], &[0, 0, 0, 0], "below the watermark: none");
    assert_eq!(seen[4], 8);
    assert_eq!(seen[8], 10);
    assert_eq!(seen[16], 12);
    assert_eq!(seen[32], 14);
    assert_eq!(srv.stats().puzzle_difficulty, 14, "capped");
    assert_eq!(srv.stats().puzzles_asked, 36);
    assert_eq!(srv.stats().puzzles_verified, 36);
    assert_eq!(srv.stats().half_open, 40);
    assert!(cl.stats().puzzle_hashes > 1 << 14, "{:?}", cl.stats());
}

/// A COOKIE_ECHO without the solution, or with a wrong one, creates nothing and is
/// counted; the same echo with the right solution is accepted.
#[test]
fn an_unsolved_puzzle_creates_no_connection() {
    let mut srv = server(0, 10, 100);
    let now = now0();
    for (i, how) in ["none", "wrong", "right"].into_iter().enumerate() {
        let mut cl = client(10 + i as u8);
        let before = srv.stats();
        let (d, echo) = echo_via(&mut srv, &mut cl, attacker_addr(i as u32), now, |echo| {
            let (ty, dcid, scid, body) = open(&echo);
            let (cookie, tail, start) = split_cookie(&body, 0);
            let d = srv_difficulty_of(&cookie);
            let nonce = u64::from_be_bytes(tail[..8].try_into().unwrap());
            assert!(puzzle::verify(puzzle::challenge(&cookie), d, nonce));
            let mut b = body[..start + cookie.len()].to_vec();
            match how {
                "none" => {}
                "wrong" => {
                    let bad = (0..)
                        .find(|&n| !puzzle::verify(puzzle::challenge(&cookie), d, n))
                        .unwrap();
                    b.extend_from_slice(&u64::to_be_bytes(bad));
                }
                _ => b.extend_from_slice(&tail[..8]),
            }
            b.extend_from_slice(&tail[8..]);
            long_packet(ty, dcid, scid, &b, 0)
        });
        assert!(d >= 8, "a puzzle was asked");
        assert!(!echo.is_empty());
        let s = srv.stats();
        if how == "right" {
            assert_eq!(srv.connection_count(), 1, "{how}");
            assert_eq!(s.half_open, 1);
            assert_eq!(s.puzzle_failed, before.puzzle_failed);
        } else {
            assert_eq!(srv.connection_count(), 0, "{how}: no state");
            assert_eq!(s.puzzle_failed, before.puzzle_failed + 1, "{how}");
            assert_eq!(s.handshake_dropped, before.handshake_dropped + 1, "{how}");
        }
        assert_eq!(s.puzzles_verified, before.puzzles_verified + 1, "{how}");
    }
}

/// The difficulty a secure cookie carries: the byte before its offer hash and MAC.
fn srv_difficulty_of(cookie: &[u8]) -> u8 {
    cookie[cookie.len() - 65]
}

/// An initiator cannot lower the difficulty: rewriting the cookie's breaks its MAC, and
/// an INIT_ACK rewritten to ask none leaves the echo without the solution the cookie asks.
#[test]
fn a_client_cannot_lower_the_difficulty() {
    let mut srv = server(0, 12, 100);
    let now = now0();
    // The cookie's difficulty set to 0 and the solution left out.
    let mut cl = client(20);
    echo_via(&mut srv, &mut cl, attacker_addr(1), now, |echo| {
        let (ty, dcid, scid, body) = open(&echo);
        let (cookie, tail, start) = split_cookie(&body, 0);
        assert_eq!(srv_difficulty_of(&cookie), 8);
        let mut bent = cookie.clone();
        let at = bent.len() - 65;
        bent[at] = 0;
        let mut b = body[..start].to_vec();
        b.extend_from_slice(&bent);
        b.extend_from_slice(&tail[8..]);
        long_packet(ty, dcid, scid, &b, 0)
    });
    assert_eq!(srv.connection_count(), 0);
    assert_eq!(
        srv.stats().puzzle_failed,
        0,
        "it failed the MAC, before the puzzle"
    );
    assert_eq!(srv.stats().handshake_dropped, 1);
    // The INIT_ACK rewritten on its way to ask nothing: the client solves nothing.
    let mut cl = client(21);
    cl.connect(now, server_addr(), &Profile::reliable())
        .unwrap();
    let from = attacker_addr(2);
    let mut init = out(&mut cl, now);
    srv.handle_datagram(now, from, &mut init);
    let ack = out(&mut srv, now);
    let (ty, dcid, scid, body) = open(&ack);
    assert_eq!(body.last(), Some(&8), "the difficulty ends INIT_ACK");
    let mut lowered = long_packet(ty, dcid, scid, &body[..body.len() - 1], 0);
    cl.handle_datagram(now, server_addr(), &mut lowered);
    let mut echo = out(&mut cl, now);
    assert_eq!(cl.stats().puzzle_hashes, 0);
    srv.handle_datagram(now, from, &mut echo);
    assert_eq!(srv.connection_count(), 0);
    assert_eq!(srv.stats().puzzle_failed, 1);
}

/// However many echoes arrive with valid cookies and solutions, half-open connections
/// stop at the cap: each one beyond evicts the oldest (never a newer one), and nothing
/// else grows.
#[test]
fn the_half_open_cap_holds() {
    let mut srv = server(usize::MAX, 0, 10);
    let mut cl = client(30);
    let now = now0();
    for i in 0..25 {
        half_open(&mut srv, &mut cl, attacker_addr(i), now);
        assert!(srv.half_open() <= 10);
    }
    let s = srv.stats();
    assert_eq!(srv.half_open(), 10);
    assert_eq!(srv.connection_count(), 10);
    assert_eq!(s.half_open_evicted, 15);
    assert_eq!(s.puzzles_asked, 0, "no puzzle with watermark usize::MAX");
    // The ten left are the ten newest.
    for i in 0..25 {
        let from = attacker_addr(i);
        let kept = (0..64).any(|h| {
            srv.connection(ctp_proto::ConnectionHandle(h))
                .is_some_and(|c| c.remote() == from)
        });
        assert_eq!(kept, i >= 15, "connection {i}");
    }
    // A connection without encryption is never half-open: the cap does not apply to it.
    let mut plain = Profile::reliable();
    plain.micros = plain.micros.without(ctp_proto::MicroId::Secure);
    echo_with(&mut srv, &mut cl, attacker_addr(99), now, &plain, |e| e);
    assert_eq!(srv.connection_count(), 11);
    assert_eq!(srv.half_open(), 10);
    assert_eq!(srv.stats().half_open_evicted, 15);
}

/// Half-open connections expire after the handshake timeout: the load, the difficulty and
/// the memory go away with them.
#[test]
fn half_open_connections_expire() {
    let mut srv = server(4, 12, 100);
    let mut cl = client(40);
    let now = now0();
    for i in 0..20 {
        half_open(&mut srv, &mut cl, attacker_addr(i), now);
    }
    assert_eq!(srv.half_open(), 20);
    assert!(srv.puzzle_difficulty() > 0);
    let later = now + Duration::from_secs(11);
    srv.handle_timeout(later);
    while srv.poll_event().is_some() {}
    assert_eq!(srv.half_open(), 0);
    assert_eq!(srv.connection_count(), 0);
    assert_eq!(srv.puzzle_difficulty(), 0);
    assert_eq!(srv.stats().handshake_failed, 20);
}

/// What the puzzle costs each side, counted in hashes: the responder checks each
/// solution with one, the initiator finds it with 2^d on average.
#[test]
fn verifying_costs_one_hash_solving_two_to_the_d() {
    // Watermark 0 and a cap of 8: every INIT_ACK asks exactly 8 bits.
    let mut srv = server(0, 8, 1000);
    let mut cl = client(50);
    let now = now0();
    let n = 64u64;
    for i in 0..n {
        assert_eq!(
            half_open(&mut srv, &mut cl, attacker_addr(i as u32), now),
            8
        );
    }
    let s = srv.stats();
    assert_eq!(s.puzzles_verified, n, "one check per echo");
    assert_eq!(s.half_open, n);
    let mean = cl.stats().puzzle_hashes / n;
    assert!(
        (128..512).contains(&mean),
        "{mean} hashes per puzzle of 8 bits"
    );
    // One check is one hash: a puzzle's verification is the hash its solver computed last.
    let c = [9u8; 32];
    let sol = puzzle::solve(&c, 10, 0).unwrap();
    assert!(puzzle::verify(&c, 10, sol.nonce));
    assert!(
        sol.hashes > 1,
        "solving took more than the one hash checking takes"
    );
}

/// A legitimate client connects and moves data while the responder asks a puzzle.
#[test]
fn a_legitimate_client_connects_under_a_puzzle() {
    let client = EndpointConfig::new([1; 32], [2; 32]);
    let mut server = EndpointConfig::new([3; 32], [4; 32]);
    server.accept = true;
    server.puzzle_low_watermark = 0;
    server.puzzle_max_difficulty = 12;
    let mut p = Pair::with_configs(7, client, server);
    let (c, s) = common::connect(&mut p, &Profile::reliable());
    assert_eq!(p.server.stats().puzzles_asked, 1);
    assert_eq!(p.server.stats().puzzles_verified, 1);
    assert!(p.client.stats().puzzle_hashes > 0);
    let payload = common::data(200_000, 3);
    let (got, eof) = common::stream_transfer(&mut p, c, s, &payload, Duration::from_secs(60));
    assert!(eof);
    assert_eq!(got, payload);
    assert!(p
        .server_events
        .iter()
        .any(|e| matches!(e, EndpointEvent::Incoming(_))));
}

/// Cookies gathered before the load rose, asking no puzzle, are refused once they are
/// older than the grace period; a fresh one is taken.
#[test]
fn easy_cookies_gathered_before_an_attack_grow_stale() {
    let mut srv = server(4, 12, 100);
    let now = now0();
    // Gather two echoes while the server is idle (difficulty 0).
    let mut stock = Vec::new();
    for i in 0..2 {
        let mut cl = client(60 + i);
        let mut kept = None;
        let from = attacker_addr(100 + i as u32);
        let (d, _) = echo_via(&mut srv, &mut cl, from, now, |e| {
            kept = Some(e);
            Vec::new()
        });
        assert_eq!(d, 0);
        stock.push((from, kept.unwrap()));
    }
    assert_eq!(srv.connection_count(), 0);
    // Load rises.
    let mut cl = client(70);
    for i in 0..8 {
        half_open(&mut srv, &mut cl, attacker_addr(i), now);
    }
    assert!(srv.puzzle_difficulty() > 0);
    // Within the grace period an easy cookie is still taken (an echo in flight when the
    // load rose); later it is not.
    let (from, mut echo) = stock.pop().unwrap();
    srv.handle_datagram(now + Duration::from_secs(1), from, &mut echo);
    assert_eq!(srv.half_open(), 9);
    let (from, mut echo) = stock.pop().unwrap();
    let failed = srv.stats().puzzle_failed;
    srv.handle_datagram(now + Duration::from_secs(3), from, &mut echo);
    assert_eq!(srv.half_open(), 9);
    assert_eq!(srv.stats().puzzle_failed, failed + 1);
}
