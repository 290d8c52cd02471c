//! Connection set-up: stateless responder, anti-amplification, negotiation outcomes.

mod common;

use common::connect;
use core::time::Duration;
use ctp_proto::pair::Pair;
use ctp_proto::{EndpointConfig, Instant, MicroId, MicroSet, Profile};
use std::net::SocketAddr;

fn server_cfg(supported: MicroSet) -> (EndpointConfig, EndpointConfig) {
    let client = EndpointConfig::new([1; 32], [2; 32]);
    let mut server = EndpointConfig::new([3; 32], [4; 32]);
    server.accept = true;
    server.supported = supported;
    (client, server)
}

#[test]
fn responder_keeps_no_state_before_the_cookie_and_never_amplifies() {
    // Capture a real INIT from a client endpoint.
    let mut client = ctp_proto::Endpoint::new(EndpointConfig::new([1; 32], [2; 32]));
    let now = Instant::from_micros(1_000);
    let server_addr: SocketAddr = "10.0.0.2:2000".parse().unwrap();
    client
        .connect(now, server_addr, &Profile::reliable())
        .unwrap();
    let mut init = Vec::new();
    let t = client.poll_transmit(now, &mut init).unwrap();
    assert!(
        t.size >= 1200,
        "INIT is padded so that replies cannot amplify"
    );
    let (_, scfg) = server_cfg(MicroSet::of(MicroId::ALL));
    let mut server = ctp_proto::Endpoint::new(scfg);
    // A thousand INITs from a thousand (spoofed) addresses.
    let mut out = Vec::new();
    for i in 0..1000u32 {
        let from = SocketAddr::from(([192, 0, 2, (i % 250) as u8], 1000 + (i / 250) as u16));
        server.handle_datagram(now, from, &mut init);
        let reply = server.poll_transmit(now, &mut out).expect("an INIT_ACK");
        assert_eq!(reply.destination, from);
        assert!(
            reply.size <= 3 * t.size,
            "reply {} > 3 × {}",
            reply.size,
            t.size
        );
    }
    assert_eq!(
        server.connection_count(),
        0,
        "no state before the address is proved"
    );
    // A truncated (unpadded) INIT gets no answer at all.
    server.handle_datagram(now, "192.0.2.9:9".parse().unwrap(), &mut init[..600]);
    assert!(server.poll_transmit(now, &mut out).is_none());
}

#[test]
fn a_cookie_echoed_from_another_address_is_refused() {
    let (ccfg, scfg) = server_cfg(MicroSet::of(MicroId::ALL));
    let mut client = ctp_proto::Endpoint::new(ccfg);
    let mut server = ctp_proto::Endpoint::new(scfg);
    let now = Instant::from_micros(1_000);
    let (caddr, saddr): (SocketAddr, SocketAddr) = (
        "10.0.0.1:1000".parse().unwrap(),
        "10.0.0.2:2000".parse().unwrap(),
    );
    // Without encryption the echo alone creates (and announces) the connection; a secure
    // channel's is announced after Noise message 3 (tests/secure.rs).
    client
        .connect(now, saddr, &Profile::reliable().insecure())
        .unwrap();
    let mut buf = Vec::new();
    let t = client.poll_transmit(now, &mut buf).unwrap();
    server.handle_datagram(now, caddr, &mut buf[..t.size]);
    let t = server.poll_transmit(now, &mut buf).unwrap();
    client.handle_datagram(now, saddr, &mut buf[..t.size]);
    let t = client.poll_transmit(now, &mut buf).unwrap();
    let mut echo = buf[..t.size].to_vec();
    // The MAC binds the initiator's address: an echo from elsewhere creates nothing.
    server.handle_datagram(now, "10.9.9.9:1000".parse().unwrap(), &mut echo);
    assert_eq!(server.stats().handshake_dropped, 1);
    assert_eq!(server.connection_count(), 0);
    // From the right address it creates the connection, exactly once even if repeated.
    server.handle_datagram(now, caddr, &mut echo);
    server.handle_datagram(now, caddr, &mut echo);
    assert_eq!(server.connection_count(), 1);
    assert_eq!(server.stats().accepted, 1);
    // An expired cookie is refused.
    let late = now + Duration::from_secs(31);
    let mut fresh = ctp_proto::Endpoint::new(server_cfg(MicroSet::of(MicroId::ALL)).1);
    fresh.handle_datagram(late, caddr, &mut echo);
    assert_eq!(fresh.connection_count(), 0);
}

#[test]
fn responder_narrows_an_optional_microprotocol_it_lacks() {
    let (c, s) = server_cfg(MicroSet::of(MicroId::ALL).without(MicroId::KeepAlive));
    let mut p = Pair::with_configs(22, c, s);
    let (ch, sh) = connect(&mut p, &Profile::reliable());
    let expected = Profile::reliable().micros.without(MicroId::KeepAlive);
    assert_eq!(p.client.connection(ch).unwrap().micros(), expected);
    assert_eq!(p.server.connection(sh).unwrap().micros(), expected);
}

#[test]
fn responder_narrows_parameters_to_its_limits() {
    let (c, mut s) = server_cfg(MicroSet::of(MicroId::ALL));
    s.params.flow_window = 64;
    s.params.max_message = 1 << 20;
    let mut p = Pair::with_configs(23, c, s);
    let (ch, _) = connect(&mut p, &Profile::reliable());
    let params = *p.client.connection(ch).unwrap().params();
    assert_eq!((params.flow_window, params.max_message), (64, 1 << 20));
}

#[test]
fn refusal_reaches_the_initiator_with_the_reason() {
    let (c, s) = server_cfg(MicroSet::of(MicroId::ALL).without(MicroId::Arq));
    let mut p = Pair::with_configs(24, c, s);
    let now = p.now;
    let addr = p.server_addr;
    let ch = p.client.connect(now, addr, &Profile::reliable()).unwrap();
    let ok = p.run_until(Duration::from_secs(5), |p| {
        p.client.connection(ch).unwrap().close_reason().is_some()
    });
    assert!(ok);
    let why = p
        .client
        .connection(ch)
        .unwrap()
        .close_reason()
        .unwrap()
        .to_string();
    assert!(why.contains("refused") && why.contains("`arq`"), "{why}");
    assert_eq!(p.server.stats().refused, 1);
    // The datagram profile, which needs no ARQ, is accepted by the same responder.
    let ch2 = p.client.connect(p.now, addr, &Profile::datagram()).unwrap();
    let ok = p.run_until(Duration::from_secs(5), |p| {
        p.client.connection(ch2).unwrap().is_established()
    });
    assert!(ok);
}

#[test]
fn an_invalid_profile_is_rejected_locally_with_both_names() {
    let mut p = Pair::new(25);
    let mut prof = Profile::reliable();
    prof.micros = prof.micros.without(MicroId::AckTracking);
    let err = p
        .client
        .connect(p.now, p.server_addr, &prof)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`arq`") && err.contains("`ack-tracking`"),
        "{err}"
    );
}

/// Sources no datagram can really come from: port 0, the unspecified address, broadcast and
/// multicast (and their IPv4-mapped forms).
fn impossible_sources() -> Vec<SocketAddr> {
    [
        "192.0.2.1:0",
        "0.0.0.0:4000",
        "255.255.255.255:4000",
        "224.0.0.1:4000",
        "[::]:4000",
        "[ff02::1]:4000",
        "[::ffff:0.0.0.0]:4000",
        "[::ffff:224.0.0.1]:4000",
        "[2001:db8::1]:0",
    ]
    .iter()
    .map(|s| s.parse().unwrap())
    .collect()
}

/// A first handshake packet of `profile` from a fresh client endpoint.
fn first_handshake(profile: &Profile, wire: ctp_proto::udt::WireFormat) -> Vec<u8> {
    let mut cfg = EndpointConfig::new([1; 32], [2; 32]);
    cfg.wire = wire;
    let mut client = ctp_proto::Endpoint::new(cfg);
    let now = Instant::from_micros(1_000);
    client
        .connect(now, "10.0.0.2:2000".parse().unwrap(), profile)
        .unwrap();
    // A UDT client sends its first request when its timer fires.
    client.handle_timeout(now);
    let mut buf = Vec::new();
    let t = client.poll_transmit(now, &mut buf).unwrap();
    buf.truncate(t.size);
    buf
}

#[test]
fn handshakes_from_impossible_sources_get_no_reply_and_are_counted() {
    // A reply to port 0 or to a broadcast/multicast address is an invalid `sendmsg` (EINVAL
    // disables segmentation offload on the whole socket) or an amplifier: drop them first.
    for (profile, wire) in [
        (Profile::reliable(), ctp_proto::udt::WireFormat::Ctp),
        (Profile::udt(), ctp_proto::udt::WireFormat::Udt4),
    ] {
        let mut hs = first_handshake(&profile, wire);
        let (_, mut scfg) = server_cfg(MicroSet::of(MicroId::ALL));
        scfg.wire = wire;
        let mut server = ctp_proto::Endpoint::new(scfg);
        let now = Instant::from_micros(2_000);
        let mut out = Vec::new();
        let bad = impossible_sources();
        for from in &bad {
            server.handle_datagram(now, *from, &mut hs);
            assert!(
                server.poll_transmit(now, &mut out).is_none(),
                "{}: reply sent to {from}",
                profile.name
            );
        }
        let st = server.stats();
        assert_eq!(st.bad_source, bad.len() as u64, "{}: {st:?}", profile.name);
        assert_eq!(st.malformed_dropped(), bad.len() as u64);
        assert_eq!(server.connection_count(), 0);
        // A real source is still answered.
        server.handle_datagram(now, "192.0.2.1:4000".parse().unwrap(), &mut hs);
        assert!(
            server.poll_transmit(now, &mut out).is_some(),
            "{}",
            profile.name
        );
    }
}
