//! A UDT4 listener facing a hostile peer: datagrams crafted by hand and fed to the sans-IO
//! endpoint (no network, no clock: every assertion is about state, never about speed).

use core::time::Duration;
use ctp_proto::pair::Pair;
use ctp_proto::udt::packet::{
    nak_ranges, req, sock, Boundary, Control, ControlBody, DataHeader, Handshake, Packet,
};
use ctp_proto::udt::WireFormat;
use ctp_proto::{ConnectionHandle, Endpoint, EndpointConfig, EndpointEvent, Instant, Profile};
use std::net::SocketAddr;

const ISN: u32 = 1_000;
/// Payload bytes of a full packet at UDT4's default MSS: 1500 − 28 (IP, UDP) − 16 (UDT).
const PAYLOAD: usize = 1456;

fn t0() -> Instant {
    Instant::from_micros(5_000_000)
}

fn peer() -> SocketAddr {
    "10.0.0.1:4000".parse().unwrap()
}

fn listener() -> Endpoint {
    let mut c = EndpointConfig::new([1; 32], [2; 32]);
    c.wire = WireFormat::Udt4;
    c.accept = true;
    Endpoint::new(c)
}

fn handshake(req_type: i32, socket_id: u32, cookie: i32) -> Handshake {
    Handshake {
        version: 4,
        sock_type: sock::STREAM,
        isn: ISN as i32,
        mss: 1500,
        flow_window: 8192,
        req_type,
        socket_id: socket_id as i32,
        cookie,
        peer_ip: [0; 4],
    }
}

fn send_ctrl(ep: &mut Endpoint, now: Instant, dst: u32, body: ControlBody) {
    let mut out = Vec::new();
    Control::new(0, 0, dst, body).emit(&mut out);
    ep.handle_datagram(now, peer(), &mut out);
}

fn send_data(ep: &mut Endpoint, now: Instant, dst: u32, seq: u32, payload: &[u8]) {
    let mut out = Vec::new();
    DataHeader {
        seq,
        boundary: Boundary::Solo,
        in_order: true,
        msg: 1,
        timestamp: 0,
        dst,
    }
    .emit(&mut out);
    out.extend_from_slice(payload);
    ep.handle_datagram(now, peer(), &mut out);
}

/// Every control packet the endpoint has to send now.
fn drain(ep: &mut Endpoint, now: Instant) -> Vec<Control> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    while let Some(t) = ep.poll_transmit(now, &mut buf) {
        if let Ok(Packet::Control(c)) = Packet::parse(&buf[..t.size]) {
            out.push(c);
        }
    }
    out
}

/// The cookie the listener hands out for a first request from socket `id`.
fn cookie_for(ep: &mut Endpoint, now: Instant, id: u32) -> i32 {
    send_ctrl(
        ep,
        now,
        0,
        ControlBody::Handshake(handshake(req::REQUEST, id, 0)),
    );
    drain(ep, now)
        .into_iter()
        .find_map(|c| match c.body {
            ControlBody::Handshake(h) if h.cookie != 0 => Some(h.cookie),
            _ => None,
        })
        .expect("a cookie challenge")
}

fn incoming(ep: &mut Endpoint) -> Vec<ConnectionHandle> {
    let mut v = Vec::new();
    while let Some(e) = ep.poll_event() {
        if let EndpointEvent::Incoming(h) = e {
            v.push(h);
        }
    }
    v
}

/// A full client/server set-up from socket `id`: the server's connection and socket id.
fn connect(ep: &mut Endpoint, now: Instant, id: u32) -> (ConnectionHandle, u32) {
    let cookie = cookie_for(ep, now, id);
    send_ctrl(
        ep,
        now,
        0,
        ControlBody::Handshake(handshake(req::RESPONSE, id, cookie)),
    );
    let h = *incoming(ep).first().expect("connection accepted");
    let server_id = drain(ep, now)
        .into_iter()
        .find_map(|c| match c.body {
            ControlBody::Handshake(h) if h.req_type == req::RESPONSE => Some(h.socket_id as u32),
            _ => None,
        })
        .expect("a response");
    (h, server_id)
}

#[test]
fn data_packets_larger_than_the_negotiated_mss_are_not_buffered() {
    let mut ep = listener();
    let now = t0();
    let (h, sid) = connect(&mut ep, now, 77);
    // A full-size packet is taken.
    send_data(&mut ep, now, sid, ISN, &[1; PAYLOAD]);
    let st = ep.connection(h).unwrap().stats();
    assert_eq!(st.buffered_bytes, PAYLOAD as u64);
    // One byte more than the MSS allows, then 64 KB packets: none is kept.
    send_data(&mut ep, now, sid, ISN + 1, &[2; PAYLOAD + 1]);
    for i in 0..64 {
        send_data(&mut ep, now, sid, ISN + 2 + i, &[3; 60_000]);
    }
    let st = ep.connection(h).unwrap().stats();
    assert_eq!(
        st.buffered_bytes, PAYLOAD as u64,
        "oversize packets were buffered"
    );
    assert_eq!(st.oversize_dropped, 65);
    assert_eq!(st.segments_received, 1);
    let mut buf = vec![0u8; 1 << 20];
    let n = ep
        .connection_mut(h)
        .unwrap()
        .stream_read(now, &mut buf)
        .unwrap();
    assert_eq!(n, PAYLOAD);
    // The next full-size packet in sequence is still welcome.
    send_data(&mut ep, now, sid, ISN + 1, &[4; PAYLOAD]);
    assert_eq!(
        ep.connection(h).unwrap().stats().buffered_bytes,
        PAYLOAD as u64
    );
}

/// The wire sequence numbers of every NAK the endpoint sends until `until`.
fn naks_until(ep: &mut Endpoint, from: Instant, until: Instant) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut now = from;
    while now <= until {
        ep.handle_timeout(now);
        for c in drain(ep, now) {
            if let ControlBody::Nak(w) = c.body {
                out.extend(nak_ranges(&w));
            }
        }
        now += Duration::from_millis(5);
    }
    out
}

#[test]
fn a_removed_connection_is_forgotten_by_the_first_handshake_index() {
    let mut ep = listener();
    let now = t0();
    let cookie = cookie_for(&mut ep, now, 79);
    let echo = ControlBody::Handshake(handshake(req::RESPONSE, 79, cookie));
    send_ctrl(&mut ep, now, 0, echo.clone());
    let h = incoming(&mut ep)[0];
    // A repeated echo, or request, reaches the connection, not the listener.
    send_ctrl(&mut ep, now, 0, echo);
    send_ctrl(
        &mut ep,
        now,
        0,
        ControlBody::Handshake(handshake(req::REQUEST, 79, 0)),
    );
    assert!(incoming(&mut ep).is_empty());
    assert_eq!(ep.connection_count(), 1);
    assert_eq!(ep.stats().handshake_dropped, 0);
    ep.connection_mut(h).unwrap().abort(now, "test");
    ep.remove(h);
    drain(&mut ep, now);
    assert_eq!(ep.connection_count(), 0);
    // Once removed, the same socket sets up a new connection (in the freed slot).
    let (h2, _) = connect(&mut ep, now, 79);
    assert_eq!(h2, h);
    assert_eq!(ep.connection_count(), 1);
}

#[test]
fn a_sequence_jump_beyond_the_flow_window_does_not_grow_the_loss_list() {
    let mut ep = listener();
    let now = t0();
    let (h, sid) = connect(&mut ep, now, 78);
    send_data(&mut ep, now, sid, ISN, &[1; 100]);
    // A data packet claiming to be 2^29 packets ahead: dropped, no loss recorded.
    send_data(&mut ep, now, sid, ISN + (1 << 29), &[2; 100]);
    // A drop request for a message 2^29 packets ahead.
    let far = ISN + (1 << 29);
    let mut c = Control::new(5, 0, sid, ControlBody::DropRequest(Some((far, far + 1))));
    c.timestamp = 0;
    let mut out = Vec::new();
    c.emit(&mut out);
    ep.handle_datagram(now, peer(), &mut out);
    let naks = naks_until(&mut ep, now, now + Duration::from_millis(200));
    for &(a, b) in &naks {
        assert!(
            a >= ISN && b < ISN + 8192,
            "NAK of {a}..={b}: beyond the flow window ({} packets)",
            b.wrapping_sub(a) + 1
        );
    }
    // Both counted: the data packet and the drop request.
    let st = ep.connection(h).unwrap().stats();
    assert_eq!(st.out_of_window_segments, 2, "{st:?}");
    // Legitimate traffic continues: the next packet is taken and acknowledged.
    send_data(&mut ep, now, sid, ISN + 1, &[3; 100]);
    assert_eq!(ep.connection(h).unwrap().stats().buffered_bytes, 200);
}

#[test]
fn a_cookie_is_good_only_for_the_socket_id_it_was_issued_to() {
    let mut ep = listener();
    let now = t0();
    let cookie = cookie_for(&mut ep, now, 1001);
    send_ctrl(
        &mut ep,
        now,
        0,
        ControlBody::Handshake(handshake(req::RESPONSE, 1001, cookie)),
    );
    assert_eq!(incoming(&mut ep).len(), 1, "the rightful echo is accepted");
    drain(&mut ep, now);
    let dropped = ep.stats().handshake_dropped;
    // The same cookie echoed with other socket ids: no new connection.
    for id in 2000..2050 {
        send_ctrl(
            &mut ep,
            now,
            0,
            ControlBody::Handshake(handshake(req::RESPONSE, id, cookie)),
        );
    }
    assert!(
        incoming(&mut ep).is_empty(),
        "a replayed cookie was accepted"
    );
    assert_eq!(ep.connection_count(), 1);
    assert_eq!(ep.stats().handshake_dropped, dropped + 50);
    // A repeated echo of the rightful one still reaches its connection (response again).
    send_ctrl(
        &mut ep,
        now,
        0,
        ControlBody::Handshake(handshake(req::RESPONSE, 1001, cookie)),
    );
    assert!(drain(&mut ep, now).iter().any(|c| matches!(
        c.body,
        ControlBody::Handshake(h) if h.req_type == req::RESPONSE && c.dst == 1001
    )));
}

#[test]
fn two_listeners_dialling_each_other_at_once_both_connect() {
    // Each endpoint listens and connects to the other: a first handshake (destination
    // socket 0) must reach the listener, not the endpoint's own connection in set-up.
    let mut a = EndpointConfig::new([3; 32], [4; 32]);
    a.wire = WireFormat::Udt4;
    a.accept = true;
    let mut b = EndpointConfig::new([5; 32], [6; 32]);
    b.wire = WireFormat::Udt4;
    b.accept = true;
    let mut p = Pair::with_configs(9, a, b);
    let now = p.now;
    let ca = p
        .client
        .connect(now, p.server_addr, &Profile::udt())
        .unwrap();
    let cb = p
        .server
        .connect(now, p.client_addr, &Profile::udt())
        .unwrap();
    let ok = p.run_until(Duration::from_secs(5), |p| {
        p.client.connection(ca).is_some_and(|c| c.is_established())
            && p.server.connection(cb).is_some_and(|c| c.is_established())
    });
    assert!(ok, "the two set-ups did not complete");
    let accepted = |ev: &[EndpointEvent]| {
        ev.iter()
            .filter(|e| matches!(e, EndpointEvent::Incoming(_)))
            .count()
    };
    assert_eq!(accepted(&p.client_events), 1);
    assert_eq!(accepted(&p.server_events), 1);
}
