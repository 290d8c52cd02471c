//! The bodies of ctp's fuzz targets, shared by the libFuzzer binaries in `fuzz_targets/`
//! and by the corpus replay test (`tests/replay.rs`), so that `cargo test` on stable runs
//! every saved input through exactly the code the fuzzer ran.
//!
//! Every target takes raw bytes. The stateful ones (`pair`, `udt_conn`) decode them into a
//! bounded list of operations with `arbitrary`, here rather than in the macro, for the same
//! reason.

use ctp_proto::handshake;
use ctp_proto::packet::open_short;
use ctp_proto::profile::{compose, decode_offer, negotiate, Isn, MicroId, MicroSet, Negotiated};
use ctp_proto::protection::{crc32c, Crc32c};
use ctp_proto::time::Instant;
use ctp_proto::udt::packet::{nak_ranges, ControlBody, Packet};
use ctp_proto::wire::frame::Frame;
use ctp_proto::wire::header::{ConnectionId, Header, LongType, NoState};
use ctp_proto::wire::Reader;
use ctp_proto::{ConnectionHandle, Endpoint, EndpointConfig, Params, Profile};
use std::net::SocketAddr;

pub mod net;
pub mod pair;
pub mod udt;

pub use pair::pair;
pub use udt::udt_conn;

/// The file-transfer framing and manifest of the `ctp` binary (which has no library
/// target): the two modules depend on nothing else of it, so they are compiled here as
/// they are there, side by side.
#[allow(dead_code)]
#[path = "../../crates/ctp-cli/src/transfer"]
pub mod transfer {
    pub mod header;
    pub mod manifest;
}

/// A target's body.
pub type Target = fn(&[u8]);

/// Every target, by the name of its binary and corpus directory.
pub const TARGETS: &[(&str, Target)] = &[
    ("wire", wire),
    ("handshake", handshake),
    ("udt_packet", udt_packet),
    ("profile_toml", profile_toml),
    ("scenario_toml", scenario_toml),
    ("transfer_header", transfer_header),
    ("pair", pair),
    ("udt_conn", udt_conn),
];

/// A native datagram as an endpoint parses it: the seal, the header, every frame, and what
/// each frame's accessors decode lazily (ACK and NAK ranges, data pieces, compressed blocks).
pub fn wire(data: &[u8]) {
    if let Ok(body) = crc32c::open_long(data) {
        packet_body(body);
    }
    let mut copy = data.to_vec();
    let _ = open_short(&mut copy, &mut Crc32c, |t| Some(t.expand(1 << 31)));
    // The same bytes as if the seal had matched (a CRC collision, or a forger).
    packet_body(data);
}

fn packet_body(p: &[u8]) {
    let mut r = Reader::new(p);
    let Ok(h) = Header::parse(&mut r) else {
        return;
    };
    let mut out = Vec::new();
    h.emit(&mut out);
    assert_eq!(out.len(), h.wire_len());
    assert_eq!(out[..], p[..out.len()], "header does not re-emit as parsed");
    if let Header::Long {
        ty: LongType::NoState,
        dcid,
        scid,
        ..
    } = h
    {
        // A NOSTATE carries an echo, not frames; as sent, it re-emits byte for byte.
        if let Ok(n) = NoState::parse(scid, r.rest()) {
            let again = ctp_proto::packet::nostate_packet(&n);
            if dcid == 0 {
                assert_eq!(again[..again.len() - crc32c::TRAILER_LEN], p[..]);
            }
        }
        return;
    }
    let seg_base = match h {
        Header::Short { pn, .. } => pn.expand(1 << 31),
        Header::Long { .. } => 0,
    };
    let mut inflated = Vec::new();
    let mut frames = 0;
    while !r.is_empty() && frames < 64 {
        frames += 1;
        let Ok(f) = Frame::parse(&mut r, seg_base) else {
            return;
        };
        match f {
            Frame::Ack(a) => {
                for rg in a.ranges() {
                    assert!(rg.lo <= rg.hi && rg.hi <= a.largest);
                }
            }
            Frame::Nak(n) => {
                for rg in n.ranges() {
                    assert!(rg.lo <= rg.hi);
                }
            }
            Frame::Data(d) => {
                let total: usize = d.pieces().map(|p| p.data.len() + p.deps.len()).sum();
                assert!(total <= d.payload_len() + p.len());
                for piece in d.pieces() {
                    let _ = piece.deps.iter(piece.msg).count();
                }
            }
            Frame::DataZ(z) => {
                if let Ok(d) = ctp_proto::micro::compression::inflate(&z, 1 << 16, &mut inflated) {
                    for piece in d.pieces() {
                        let _ = piece.deps.iter(piece.msg).count();
                    }
                }
            }
            _ => {}
        }
    }
}

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("literal address")
}

/// The keyed MAC of a handshake cookie, as `ctp_proto::handshake` computes it: BLAKE3 keyed
/// with the responder's secret over the body, the initiator's IP octets and port. Lets the
/// target reach the cookie decoder behind the MAC check.
fn cookie_mac(secret: &[u8; 32], body: &[u8], peer: SocketAddr) -> [u8; 32] {
    let mut h = blake3::Hasher::new_keyed(secret);
    h.update(body);
    match peer {
        SocketAddr::V4(a) => h.update(&a.ip().octets()),
        SocketAddr::V6(a) => h.update(&a.ip().octets()),
    };
    h.update(&peer.port().to_be_bytes());
    *h.finalize().as_bytes()
}

/// A sealed handshake packet, padded to an INIT's minimum size when `pad`.
fn long_packet(
    ty: LongType,
    dcid: ConnectionId,
    scid: ConnectionId,
    body: &[u8],
    pad: bool,
) -> Vec<u8> {
    let pad_to = if pad { handshake::MIN_INIT_SIZE } else { 0 };
    ctp_proto::packet::long_packet(ty, dcid, scid, body, pad_to)
}

fn drain(ep: &mut Endpoint, now: Instant) -> usize {
    let mut buf = Vec::new();
    let mut n = 0;
    while n < 64 && ep.poll_transmit(now, &mut buf).is_some() {
        n += 1;
    }
    while ep.poll_event().is_some() {}
    n
}

/// The handshake: the first byte picks what the rest is fed to.
///
/// 0. an offer (an INIT body): decoded, negotiated against everything, composed;
/// 1. a cookie body, MACed as the responder would have: decoded;
/// 2. an INIT body, sealed and padded, to an accepting endpoint;
/// 3. an INIT_ACK body to an endpoint that is connecting;
/// 4. a REFUSE body to an endpoint that is connecting;
/// 5. a COOKIE_ECHO body (its MAC will not match) to an accepting endpoint;
/// 6. a Noise message (HANDSHAKE) to both sides of a secure handshake waiting for one,
///    which must still complete.
pub fn handshake(data: &[u8]) {
    let Some((&mode, body)) = data.split_first() else {
        return;
    };
    let local = Params::default();
    let now = Instant::from_micros(5_000_000);
    let client = addr("10.0.0.1:1000");
    let server = addr("10.0.0.2:2000");
    if mode % 7 == 6 {
        return noise(body, now, client, server);
    }
    match mode % 7 {
        0 => {
            let mut r = Reader::new(body);
            if let Ok((micros, asked, isn)) = decode_offer(&mut r, &local) {
                if let Negotiated::Accept(set, params) = negotiate(
                    micros,
                    &asked,
                    MicroSet::of(MicroId::ALL),
                    MicroSet::default(),
                    &local,
                ) {
                    let _ = compose(set, &params, Isn::default(), isn);
                }
            }
        }
        1 => {
            let secret = [9u8; 32];
            let mut cookie = body.to_vec();
            cookie.extend_from_slice(&cookie_mac(&secret, body, client));
            let _ = handshake::open(&secret, &cookie, client, now, &local);
        }
        2 | 5 => {
            let mut cfg = EndpointConfig::new([1; 32], [2; 32]);
            cfg.accept = true;
            let mut ep = Endpoint::new(cfg);
            let (ty, scid, dcid) = if mode % 7 == 2 {
                (LongType::Init, 0x1234_5678, 0)
            } else {
                (LongType::CookieEcho, 0x1234_5678, 0x0bad_cafe)
            };
            ep.handle_datagram(now, client, &mut long_packet(ty, dcid, scid, body, true));
            drain(&mut ep, now);
        }
        _ => {
            let mut ep = Endpoint::new(EndpointConfig::new([3; 32], [4; 32]));
            let Ok(h) = ep.connect(now, server, &Profile::reliable()) else {
                return;
            };
            let mut buf = Vec::new();
            let Some(t) = ep.poll_transmit(now, &mut buf) else {
                return;
            };
            let Ok(Header::Long { scid: cid, .. }) =
                Header::parse(&mut Reader::new(&buf[..t.size]))
            else {
                return;
            };
            let ty = if mode % 7 == 3 {
                LongType::InitAck
            } else {
                LongType::Refuse
            };
            ep.handle_datagram(
                now,
                server,
                &mut long_packet(ty, cid, 0x0bad_cafe, body, false),
            );
            drain(&mut ep, now);
            ep.handle_timeout(now + core::time::Duration::from_millis(300));
            drain(&mut ep, now);
            let _ = ep.connection(h).map(|c| c.state().clone());
        }
    }
}

/// A secure handshake run to the point where each side waits for a Noise message (the
/// initiator for message 2, the responder for message 3); `body` is given to both as a
/// HANDSHAKE packet, and the real exchange then completes: a bad message changes nothing.
fn noise(body: &[u8], now: Instant, client: SocketAddr, server: SocketAddr) {
    let mut scfg = EndpointConfig::new([5; 32], [6; 32]);
    scfg.accept = true;
    let mut responder = Endpoint::new(scfg);
    let mut initiator = Endpoint::new(EndpointConfig::new([7; 32], [8; 32]));
    let Ok(h) = initiator.connect(now, server, &Profile::reliable()) else {
        return;
    };
    let mut buf = Vec::new();
    let mut exchange = |from_initiator: bool, i: &mut Endpoint, r: &mut Endpoint| {
        let (src, dst, at) = if from_initiator {
            (i, r, client)
        } else {
            (r, i, server)
        };
        let mut moved = Vec::new();
        while let Some(t) = src.poll_transmit(now, &mut buf) {
            moved.push(buf[..t.size].to_vec());
        }
        for mut d in moved {
            dst.handle_datagram(now, at, &mut d);
        }
    };
    // INIT, INIT_ACK, COOKIE_ECHO: the responder now waits for message 3 and has message 2
    // ready; the initiator waits for message 2.
    exchange(true, &mut initiator, &mut responder);
    exchange(false, &mut initiator, &mut responder);
    exchange(true, &mut initiator, &mut responder);
    let ids = |ep: &Endpoint| {
        ep.connection(ConnectionHandle(0))
            .map(|c| c.local_cid())
            .unwrap_or(0)
    };
    let (icid, rcid) = (ids(&initiator), ids(&responder));
    let mut framed = Vec::new();
    ctp_proto::wire::varint::put(&mut framed, body.len() as u64);
    framed.extend_from_slice(body);
    for payload in [body, &framed[..]] {
        let mut d = long_packet(LongType::Handshake, icid, rcid, payload, false);
        initiator.handle_datagram(now, server, &mut d);
        let mut d = long_packet(LongType::Handshake, rcid, icid, payload, false);
        responder.handle_datagram(now, client, &mut d);
    }
    for _ in 0..3 {
        exchange(false, &mut initiator, &mut responder);
        exchange(true, &mut initiator, &mut responder);
    }
    assert!(
        initiator.connection(h).is_some_and(|c| c.is_established()),
        "a forged Noise message broke a genuine handshake"
    );
    while initiator.poll_event().is_some() || responder.poll_event().is_some() {}
}

/// A UDT4 datagram: parsed, and when it parses, re-emitted byte for byte.
pub fn udt_packet(data: &[u8]) {
    let Ok(p) = Packet::parse(data) else {
        return;
    };
    let mut out = Vec::new();
    p.emit(&mut out);
    assert_eq!(out, data, "UDT packet does not re-emit as parsed: {p:?}");
    assert_eq!(p.buffer_len(), data.len());
    if let Packet::Control(c) = &p {
        if let ControlBody::Nak(w) = &c.body {
            let _ = nak_ranges(w).count();
        }
    }
}

/// A profile file: parsed; a profile that parses is checked and explained.
pub fn profile_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(p) = ctp_proto::profile::file::parse(text, "fuzz.toml") {
        let _ = p.check();
        let _ = ctp_proto::profile::explain(&p);
    }
}

/// A scenario file: parsed and checked; one that parses is planned when its plan is small.
pub fn scenario_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(s) = ctp_sim::scenario::Scenario::parse(text, "fuzz.toml") {
        let _ = s.reported_metrics();
        if text.len() <= 2048 {
            let _ = s.plan(Some(1));
        }
    }
}

/// The file-transfer framing: an opening (manifest) that decodes re-encodes to the bytes
/// it used and holds only safe relative paths; the receiver's answer and reply decode
/// without a panic, and an answer that decodes offers no more blocks than a file has.
pub fn transfer_header(data: &[u8]) {
    use transfer::header::{Hello, Plan, Reply, BLOCK};
    use transfer::manifest::check_path;
    if let Ok(Some((h, used))) = Hello::decode(data) {
        assert!(used <= data.len());
        assert_eq!(
            h.encode(),
            data[..used],
            "opening does not re-encode as decoded"
        );
        for e in &h.manifest.entries {
            assert!(check_path(&e.path).is_ok(), "unsafe path {:?}", e.path);
            assert!(!e.path.split('/').any(|c| c == ".." || c.is_empty()));
        }
    }
    let sizes = [5 * BLOCK + 1, 0, BLOCK];
    if let Ok(Some((Plan::Go(offers), used))) = Plan::decode(data, &sizes) {
        assert!(used <= data.len());
        for (o, s) in offers.iter().zip(sizes) {
            assert!(o.len() as u64 <= s.div_ceil(BLOCK));
        }
    }
    if let Ok(r) = Reply::decode(data) {
        let _ = r.encode();
    }
}
