//! Malformed input never panics, is counted, and leaves a running connection unharmed.

mod common;

use common::{connect, data, stream_transfer};
use core::time::Duration;
use ctp_proto::pair::{Pair, Side};
use ctp_proto::wire::frame::{ty, Frame};
use ctp_proto::wire::header::{Header, LongType, VERSION};
use ctp_proto::wire::truncated::Truncated;
use ctp_proto::wire::{integrity, varint};
use ctp_proto::{Endpoint, EndpointConfig, Instant, Profile};
use proptest::prelude::*;

fn sealed(mut p: Vec<u8>) -> Vec<u8> {
    integrity::seal(&mut p);
    p
}

/// Packets for connection `cid` that pass the integrity check but carry bad contents.
fn hostile_packets(cid: u32) -> Vec<Vec<u8>> {
    let short = |frames: &[u8]| {
        let mut p = Vec::new();
        Header::Short {
            dcid: cid,
            pn: Truncated::whole(1 << 40),
        }
        .emit(&mut p);
        p.extend_from_slice(frames);
        sealed(p)
    };
    let mut v = Vec::new();
    // Unknown frame type.
    v.push(short(&[0x3f, 1, 2, 3]));
    // DATA piece whose length runs past the packet.
    let mut f = Vec::new();
    Frame::emit_data_header(&mut f, Truncated::whole(5));
    f.extend_from_slice(&[0x02, 0, 0]);
    varint::put(&mut f, 1 << 30);
    f.extend_from_slice(b"short");
    v.push(short(&f));
    // ACK with an absurd range count.
    let mut f = Vec::new();
    for x in [ty::ACK, 100, 0, 1 << 20, 0] {
        varint::put(&mut f, x);
    }
    v.push(short(&f));
    // ACK of packets that were never sent (parses; must be ignored).
    let mut f = Vec::new();
    for x in [ty::ACK, 1 << 50, 0, 0, 10] {
        varint::put(&mut f, x);
    }
    v.push(short(&f));
    // CLOSE whose reason length is oversized.
    let mut f = Vec::new();
    for x in [ty::CLOSE, 1, 1 << 20] {
        varint::put(&mut f, x);
    }
    v.push(short(&f));
    // Empty packet, and padding followed by garbage.
    v.push(short(&[]));
    v.push(short(&[0, 0, 0, 7]));
    // Truncated headers.
    v.push(sealed(vec![0x40, 1, 2]));
    v.push(vec![0x40]);
    // Unknown version.
    let mut p = Vec::new();
    Header::Long {
        ty: LongType::Init,
        version: VERSION ^ 0xff,
        dcid: 0,
        scid: 9,
    }
    .emit(&mut p);
    p.resize(1300, 0);
    v.push(sealed(p));
    // Wrong connection id.
    let mut p = Vec::new();
    Header::Short {
        dcid: cid ^ 0x5555,
        pn: Truncated::whole(3),
    }
    .emit(&mut p);
    Frame::emit_simple(&mut p, ty::PING, None);
    v.push(sealed(p));
    // A cookie echo with a forged cookie.
    let mut p = Vec::new();
    Header::Long {
        ty: LongType::CookieEcho,
        version: VERSION,
        dcid: 77,
        scid: 9,
    }
    .emit(&mut p);
    varint::put(&mut p, 60);
    p.extend_from_slice(&[0xab; 60]);
    v.push(sealed(p));
    // A tiny INIT (not padded: would allow amplification).
    let mut p = Vec::new();
    Header::Long {
        ty: LongType::Init,
        version: VERSION,
        dcid: 0,
        scid: 9,
    }
    .emit(&mut p);
    v.push(sealed(p));
    // Bad checksum.
    let mut p = short(&[ty::PING as u8]);
    let n = p.len();
    p[n - 1] ^= 1;
    v.push(p);
    v
}

#[test]
fn hostile_packets_are_counted_and_the_transfer_carries_on() {
    let mut p = Pair::new(11);
    let (c, s) = connect(&mut p, &Profile::reliable());
    let server_cid = p.server.connection(s).unwrap().local_cid();
    let before = p.server.stats().malformed_dropped()
        + p.server.connection(s).unwrap().stats().malformed_dropped;
    let hostile = hostile_packets(server_cid);
    let count = hostile.len() as u64;
    for pkt in hostile {
        p.inject(Side::Server, pkt);
    }
    let payload = data(500_000, 2);
    let (got, eof) = stream_transfer(&mut p, c, s, &payload, Duration::from_secs(60));
    assert!(eof && got == payload, "transfer must complete intact");
    let after = p.server.stats().malformed_dropped()
        + p.server.connection(s).unwrap().stats().malformed_dropped;
    assert_eq!(
        after - before,
        count,
        "every hostile packet is counted once: {:?}",
        p.server.stats()
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Arbitrary bytes, with or without a valid trailer, never panic and are always counted.
    #[test]
    fn random_datagrams_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..1600), seal in any::<bool>(), first in any::<u8>()) {
        let mut cfg = EndpointConfig::new([1; 32], [2; 32]);
        cfg.accept = true;
        let mut ep = Endpoint::new(cfg);
        let mut b = bytes;
        if !b.is_empty() {
            b[0] = first;
        }
        let b = if seal { sealed(b) } else { b };
        ep.handle_datagram(Instant::from_micros(5), "1.2.3.4:5".parse().unwrap(), &b);
        let st = ep.stats();
        prop_assert_eq!(st.datagrams_received, 1);
        let mut out = Vec::new();
        // Whatever it was, at most a handshake answer goes out, never more than 3× its size.
        if let Some(t) = ep.poll_transmit(Instant::from_micros(6), &mut out) {
            prop_assert!(t.size <= 3 * b.len());
        }
    }
}
