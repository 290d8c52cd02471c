//! Paths in the in-memory pair: a connection follows its peer to a new address (NAT
//! rebinding), sends at most three times what it received to an address it has not
//! validated, moves to another local address when its path dies, and carries one
//! transfer over two addresses in turn.

mod common;

use common::{connect, data, read_available, stream_transfer_watched};
use core::time::Duration;
use ctp_proto::pair::Pair;
use ctp_proto::{ConnectionHandle, EndpointConfig, Profile};
use std::net::SocketAddr;

const LEN: usize = 4 << 20;

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("address")
}

/// Runs a 4 MiB stream from client to server, calling `watch` after every step; asserts
/// it arrived whole and returns the server's connection handle.
fn transfer(p: &mut Pair, watch: impl FnMut(&mut Pair, usize)) -> ConnectionHandle {
    let (c, s) = connect(p, &Profile::reliable());
    let payload = data(LEN, 26);
    let (got, eof) = stream_transfer_watched(p, c, s, &payload, Duration::from_secs(120), watch);
    assert!(eof, "the stream did not end: {} of {LEN} bytes", got.len());
    assert!(got == payload, "the stream arrived changed");
    s
}

#[test]
fn a_transfer_continues_after_a_nat_rebinding_and_the_new_address_gets_at_most_three_times() {
    let mut p = Pair::new(1);
    let new = addr("10.0.0.9:4000");
    let mut rebound = false;
    let mut checked_unvalidated = 0;
    let s = transfer(&mut p, |p, got| {
        if !rebound && got >= LEN / 4 {
            // The NAT forgets the old mapping: the client's datagrams come from a new
            // address, and what is sent to the old one is lost.
            p.client_addr = new;
            rebound = true;
        }
        let Some(st) = p.server.connection(ConnectionHandle(0)).map(|c| c.stats()) else {
            return;
        };
        if rebound && st.path_unvalidated_received > 0 {
            checked_unvalidated += 1;
            let sent = p.server_sent_to.get(&new).copied().unwrap_or(0);
            let received = p.server_received_from.get(&new).copied().unwrap_or(0);
            assert!(
                sent <= 3 * received,
                "{sent} bytes sent to the unvalidated address, {received} received from it"
            );
            assert!(st.path_unvalidated_sent <= 3 * st.path_unvalidated_received);
        }
    });
    assert!(
        checked_unvalidated > 0,
        "the new address was never seen unvalidated"
    );
    let c = p.server.connection(s).expect("server connection");
    assert_eq!(c.remote(), new, "the server follows the client");
    let st = c.stats();
    assert_eq!((st.path_migrations, st.path_validation_failures), (1, 0));
    assert_eq!(st.path_unvalidated_sent, 0, "validated");
    assert!(
        p.misaddressed > 0,
        "some datagrams went to the forgotten address"
    );
    assert_eq!(p.server.stats().unknown_connection, 0);
}

#[test]
fn a_transfer_moves_to_another_local_address_when_its_path_dies() {
    let (a, b) = (addr("10.0.0.1:1000"), addr("10.0.1.1:1000"));
    let mut client = EndpointConfig::new([1; 32], [2; 32]);
    client.local_addrs = vec![a, b];
    let mut server = EndpointConfig::new([3; 32], [4; 32]);
    server.accept = true;
    let mut p = Pair::with_configs(2, client, server);
    p.client_addr = a;
    p.client_aliases = vec![b];
    let mut died = false;
    let s = transfer(&mut p, |p, got| {
        if !died && got >= LEN / 4 {
            p.down = vec![a];
            died = true;
        }
    });
    assert!(died);
    let c = p.server.connection(s).expect("server connection");
    assert_eq!(
        c.remote(),
        b,
        "the server follows the client to its other address"
    );
    assert!(p.server_received_from[&b] > (LEN / 2) as u64);
}

#[test]
fn one_transfer_is_carried_from_two_addresses_in_turn() {
    // A NAT whose mapping flaps between two ports: every 10 ms the client's datagrams come
    // from the other one; both keep receiving. Each address is challenged once; after
    // that a move back needs no validation.
    let (a, b) = (addr("10.0.0.1:1000"), addr("10.0.0.1:1001"));
    let mut p = Pair::new(3);
    p.client_aliases = vec![a, b];
    let mut next_flip = p.now;
    let s = transfer(&mut p, |p, _| {
        if p.now >= next_flip {
            p.client_addr = if p.client_addr == a { b } else { a };
            next_flip = p.now + Duration::from_millis(10);
        }
    });
    let (from_a, from_b) = (p.server_received_from[&a], p.server_received_from[&b]);
    assert!(
        from_a > (LEN / 4) as u64 && from_b > (LEN / 4) as u64,
        "{from_a} / {from_b}"
    );
    let (to_a, to_b) = (p.server_sent_to[&a], p.server_sent_to[&b]);
    let st = p.server.connection(s).expect("server connection").stats();
    assert!(to_a > 1000 && to_b > 1000, "{to_a} / {to_b}: {st:?}");
    assert!(st.path_migrations >= 10, "{}", st.path_migrations);
    assert_eq!(st.path_validation_failures, 0);
    assert_eq!(p.misaddressed, 0);
}

#[test]
fn a_move_to_an_address_that_never_answers_is_undone_by_the_next_genuine_packet() {
    // One datagram of the connection arrives from another address (an attacker raced a
    // copy there first) with a newer packet number than any the server saw: the server
    // moves there and challenges it, within the 3× budget. Nobody answers from there; the
    // client's next datagram from its validated address moves the server back at once,
    // without a new challenge, and the transfer completes.
    let mut p = Pair::new(4);
    let spoofed = addr("10.6.6.6:666");
    let mut done = false;
    let s = transfer(&mut p, |p, got| {
        if !done && got >= LEN / 4 {
            p.client_addr = spoofed;
            done = true;
        } else if p.client_addr == spoofed && p.server_received_from.contains_key(&spoofed) {
            p.client_addr = addr("10.0.0.1:1000");
        }
    });
    let c = p.server.connection(s).expect("server connection");
    assert_eq!(c.remote(), addr("10.0.0.1:1000"));
    let sent = p.server_sent_to.get(&spoofed).copied().unwrap_or(0);
    let received = p.server_received_from.get(&spoofed).copied().unwrap_or(0);
    assert!(received > 0 && sent <= 3 * received, "{sent} / {received}");
}

#[test]
fn a_coded_transfer_uses_two_addresses_at_once_and_survives_one_dying_and_returning() {
    // The client owns two addresses; with `coded` both carry the transfer at once (the
    // server adds the second as a route once it answers a challenge, it does not move
    // there). The application writes 4 MiB over 2 s; the first address's path is dead
    // from 0.5 s to 1 s: the transfer goes on over the second meanwhile, and the first
    // carries data again once it is back.
    let (a, b) = (addr("10.0.0.1:1000"), addr("10.0.1.1:1000"));
    let mut client = EndpointConfig::new([1; 32], [2; 32]);
    client.local_addrs = vec![a, b];
    let mut server = EndpointConfig::new([3; 32], [4; 32]);
    server.accept = true;
    let mut p = Pair::with_configs(5, client, server);
    p.client_addr = a;
    p.client_aliases = vec![b];
    let (c, s) = connect(&mut p, &Profile::coded());
    let payload = data(LEN, 27);
    let start = p.now;
    let since = |p: &Pair| (p.now - start).as_secs_f64();
    let (mut written, mut finished, mut eof) = (0, false, false);
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    let (mut during, mut from_a_at_return, mut from_b_at_death) = (0, 0, 0);
    let done = p.run_until(Duration::from_secs(60), |p| {
        let t = since(p);
        let now = p.now;
        let allowed = ((t / 2.0).min(1.0) * LEN as f64) as usize;
        let conn = p.client.connection_mut(c).expect("client connection");
        while written < allowed {
            match conn.stream_write(now, &payload[written..allowed.min(written + 65536)]) {
                Ok(n) => written += n,
                Err(_) => break,
            }
        }
        if written == LEN && !finished {
            finished = conn.stream_finish(now).is_ok();
        }
        let before = got.len();
        eof = read_available(p.server.connection_mut(s).unwrap(), now, &mut buf, &mut got);
        let from = |x| p.server_received_from.get(&x).copied().unwrap_or(0);
        if (0.5..1.0).contains(&t) {
            if p.down.is_empty() {
                p.down = vec![a];
                from_b_at_death = from(b);
            }
            during += got.len() - before;
        } else if t >= 1.0 && !p.down.is_empty() {
            p.down.clear();
            from_a_at_return = from(a);
        }
        eof
    });
    assert!(done && eof, "{} of {LEN} bytes in time", got.len());
    assert!(got == payload, "the stream arrived changed");
    let from = |x| p.server_received_from.get(&x).copied().unwrap_or(0);
    assert!(
        from_b_at_death > (LEN / 16) as u64 && from_a_at_return > (LEN / 16) as u64,
        "both addresses carried data before the outage: {from_a_at_return} / {from_b_at_death}"
    );
    assert!(
        during > LEN / 8,
        "the transfer went on during the outage: {during} bytes"
    );
    assert!(
        from(a) > from_a_at_return + (LEN / 16) as u64,
        "the first address carries data again once it is back: {from_a_at_return} → {}",
        from(a)
    );
    let server = p.server.connection(s).expect("server connection");
    assert_eq!(server.remote(), a, "the server did not move");
    let st = server.stats();
    assert_eq!(st.path_migrations, 0);
    let client_st = p.client.connection(c).expect("client connection").stats();
    assert_eq!(client_st.retransmissions, 0, "coded: nothing retransmitted");
}
