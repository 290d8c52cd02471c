//! Golden vectors: packets two UDT4 (libudt 4.11) programs exchanged on loopback, parsed by
//! ctp's UDT4 codec and re-emitted byte for byte. See `tests/data/udt4/README.md`.

use ctp_proto::udt::packet::{ctrl, nak_ranges, req, sock, ControlBody, Packet};
use std::collections::BTreeMap;

fn vectors(name: &str) -> Vec<Vec<u8>> {
    let path = format!("{}/tests/data/udt4/{name}.hex", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let hex = l.split_whitespace().nth(1).expect("direction then hex");
            (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
                .collect()
        })
        .collect()
}

/// Parses and re-emits every packet of a file; returns the count of each control type and
/// of data packets (under `u16::MAX`).
fn check_file(name: &str) -> (Vec<Vec<u8>>, BTreeMap<u16, usize>) {
    let v = vectors(name);
    assert!(!v.is_empty(), "{name} has no packets");
    let mut kinds = BTreeMap::new();
    for (i, b) in v.iter().enumerate() {
        let p = Packet::parse(b).unwrap_or_else(|e| panic!("{name}[{i}]: {e}"));
        let mut out = Vec::new();
        p.emit(&mut out);
        assert_eq!(&out, b, "{name}[{i}] re-emitted differently: {p}");
        let k = match &p {
            Packet::Data(..) => u16::MAX,
            Packet::Control(c) => c.body.type_code(),
        };
        *kinds.entry(k).or_default() += 1;
    }
    (v, kinds)
}

fn handshakes(v: &[Vec<u8>]) -> Vec<(u32, ctp_proto::udt::packet::Handshake)> {
    v.iter()
        .filter_map(|b| match Packet::parse(b) {
            Ok(Packet::Control(c)) => match c.body {
                ControlBody::Handshake(h) => Some((c.dst, h)),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[test]
fn stream_vectors_roundtrip_and_decode() {
    let (v, kinds) = check_file("stream");
    for t in [ctrl::HANDSHAKE, ctrl::ACK, ctrl::ACK2, ctrl::SHUTDOWN] {
        assert!(kinds.contains_key(&t), "no control type {t}: {kinds:?}");
    }
    assert!(kinds[&u16::MAX] > 10);
    // UDT 4.11 client/server: request, cookie challenge, cookie echo, response.
    let hs = handshakes(&v);
    assert_eq!(hs.len(), 4);
    for (_, h) in &hs {
        assert_eq!(h.version, 4);
        assert_eq!(h.sock_type, sock::STREAM);
        assert_eq!(h.mss, 1500);
    }
    assert_eq!(hs[0].1.req_type, req::REQUEST);
    assert_eq!((hs[0].0, hs[0].1.cookie), (0, 0));
    assert_eq!(hs[1].1.req_type, req::REQUEST);
    assert_ne!(hs[1].1.cookie, 0, "the server answers with a cookie");
    assert_eq!(hs[2].1.req_type, req::RESPONSE);
    assert_eq!(
        hs[2].1.cookie, hs[1].1.cookie,
        "the client repeats the cookie"
    );
    // ... and its socket id, to which the cookie is bound (the listener's cookie covers it).
    assert_eq!(hs[2].1.socket_id, hs[0].1.socket_id);
    assert_eq!(
        hs[1].0 as i32, hs[0].1.socket_id,
        "challenge addressed to it"
    );
    assert_eq!(hs[3].1.req_type, req::RESPONSE);
    assert_eq!(hs[3].0 as i32, hs[0].1.socket_id, "addressed to the client");
    // The first data packet carries the client's initial sequence number.
    let first_data = v
        .iter()
        .find_map(|b| match Packet::parse(b) {
            Ok(Packet::Data(h, _)) => Some(h),
            _ => None,
        })
        .unwrap();
    assert_eq!(first_data.seq as i32, hs[0].1.isn);
    assert_eq!(first_data.dst as i32, hs[3].1.socket_id);
}

#[test]
fn loss_vectors_carry_naks_with_compressed_ranges() {
    let (v, kinds) = check_file("stream_loss");
    assert!(kinds.get(&ctrl::NAK).copied().unwrap_or(0) > 0);
    let mut ranges = 0;
    for b in &v {
        if let Ok(Packet::Control(c)) = Packet::parse(b) {
            if let ControlBody::Nak(w) = &c.body {
                for (a, z) in nak_ranges(w) {
                    assert!(a <= z, "range {a}..{z}");
                    ranges += usize::from(a != z);
                }
            }
        }
    }
    assert!(ranges > 0, "no compressed loss range in the capture");
}

#[test]
fn dgram_vectors_are_solo_in_order_messages() {
    let (v, _) = check_file("dgram");
    let hs = handshakes(&v);
    assert!(hs.iter().all(|(_, h)| h.sock_type == sock::DGRAM));
    let mut msgs = Vec::new();
    for b in &v {
        if let Ok(Packet::Data(h, p)) = Packet::parse(b) {
            assert!(h.boundary.is_first() && h.boundary.is_last());
            assert!(h.in_order);
            assert_eq!(p.len(), 700);
            msgs.push(h.msg);
        }
    }
    assert!(msgs.windows(2).all(|w| w[1] == w[0] + 1), "{msgs:?}");
}

#[test]
fn rendezvous_vectors_use_rendezvous_requests() {
    let (v, kinds) = check_file("rendezvous");
    assert!(kinds.contains_key(&ctrl::KEEPALIVE));
    let hs = handshakes(&v);
    assert!(hs
        .iter()
        .any(|(_, h)| h.req_type == req::RENDEZVOUS && h.cookie == 0));
    assert!(hs.iter().any(|(_, h)| h.req_type == req::RESPONSE));
}
