//! Malformed input never panics, is counted, and leaves a running connection unharmed.

mod common;

use common::{connect, data, stream_transfer};
use core::time::Duration;
use ctp_proto::packet::ShortPacket;
use ctp_proto::pair::{Pair, Side};
use ctp_proto::protection::{crc32c, Crc32c};
use ctp_proto::wire::frame::{ty, Frame};
use ctp_proto::wire::header::{Header, LongType, VERSION};
use ctp_proto::wire::truncated::Truncated;
use ctp_proto::wire::varint;
use ctp_proto::{Endpoint, EndpointConfig, Instant, Profile};
use proptest::prelude::*;

fn sealed(mut p: Vec<u8>) -> Vec<u8> {
    crc32c::seal_long(&mut p);
    p
}

/// Packets for connection `cid` with bad contents, bad headers or bad seals. (The short
/// ones are sealed with a packet number the connection cannot expect, so they fail to open:
/// malformed frames inside packets that open are the engine's tests' and fuzzers' work.)
fn hostile_packets(cid: u32) -> Vec<Vec<u8>> {
    let short = |frames: &[u8]| {
        let mut p = Vec::new();
        let pn = 1 << 40;
        let packet = ShortPacket::begin(&mut p, cid, pn, Truncated::whole(pn));
        p.extend_from_slice(frames);
        packet.seal(&mut p, &mut Crc32c);
        p
    };
    let mut v = Vec::new();
    // Unknown frame type.
    v.push(short(&[0x3f, 1, 2, 3]));
    // DATA piece whose length runs past the packet.
    let mut f = Vec::new();
    Frame::emit_data_header(&mut f, 5);
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
        key_phase: false,
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
        let mut b = if seal { sealed(b) } else { b };
        ep.handle_datagram(Instant::from_micros(5), "1.2.3.4:5".parse().unwrap(), &mut b);
        let st = ep.stats();
        prop_assert_eq!(st.datagrams_received, 1);
        let mut out = Vec::new();
        // Whatever it was, at most a handshake answer goes out, never more than 3× its size.
        if let Some(t) = ep.poll_transmit(Instant::from_micros(6), &mut out) {
            prop_assert!(t.size <= 3 * b.len());
        }
    }
}

/// Every single-bit corruption of a data packet is dropped by the packet protection (or,
/// for a bit of the header, by routing) before any frame is parsed: the connection neither
/// dispatches an event nor counts a malformed frame, and the endpoint counts each drop once.
/// The intact packet is then taken.
#[test]
fn any_single_flipped_bit_is_dropped_before_a_frame_is_parsed() {
    let mut p = Pair::new(23);
    let (c, s) = connect(&mut p, &Profile::reliable());
    let now = p.now;
    p.client
        .connection_mut(c)
        .unwrap()
        .stream_write(now, b"one packet of stream data")
        .unwrap();
    let mut packet = Vec::new();
    let t = p
        .client
        .poll_transmit(now, &mut packet)
        .expect("a data packet");
    packet.truncate(t.size);
    let conn = |p: &Pair| {
        let st = p.server.connection(s).unwrap().stats();
        (
            st.events_dispatched,
            st.packets_received,
            st.malformed_dropped,
        )
    };
    let dropped = |p: &Pair| {
        let st = p.server.stats();
        st.bad_checksum + st.unknown_connection + st.bad_header + st.handshake_dropped
    };
    let (before, drops) = (conn(&p), dropped(&p));
    for bit in 0..packet.len() * 8 {
        let mut flipped = packet.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        p.server.handle_datagram(now, p.client_addr, &mut flipped);
        assert_eq!(
            conn(&p),
            before,
            "bit {bit} reached the connection's frames"
        );
        assert_eq!(
            dropped(&p),
            drops + 1 + bit as u64,
            "bit {bit} not counted once"
        );
    }
    assert!(
        p.server.stats().bad_checksum >= (packet.len() as u64 - 5) * 8,
        "the payload's flips fail protection: {:?}",
        p.server.stats()
    );
    p.server.handle_datagram(now, p.client_addr, &mut packet);
    let (events, received, malformed) = conn(&p);
    assert_eq!((received, malformed), (before.1 + 1, before.2));
    assert!(events > before.0, "the intact packet is processed");
}
