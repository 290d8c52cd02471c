//! A peer that tries to exhaust the receiver's memory. The heap is measured for real: this
//! test binary counts every live allocation, so a bound that holds only in the receiver's
//! own accounting would fail here.

mod common;

use common::heap::{live, Counting, SERIAL};
use ctp_proto::composed::Engine;
use ctp_proto::engine::app::HELD_SLACK;
use ctp_proto::profile::{compose, Isn};
use ctp_proto::wire::frame::{Deps, Frame, Piece, PieceFlags};
use ctp_proto::{CloseReason, Instant, Params, Profile};

#[global_allocator]
static ALLOC: Counting = Counting;

const PEER: Isn = Isn {
    pn: 1000,
    seg: 50_000,
    msg: 7_000,
};

fn receiver(recv_buffer: u32) -> Engine {
    let params = Params {
        recv_buffer,
        ..Params::default()
    }
    .fit_recv_buffer();
    compose(Profile::reliable().micros, &params, Isn::default(), PEER).expect("composes")
}

fn now() -> Instant {
    Instant::from_micros(1_000_000)
}

/// A DATA frame from `PEER` for segment `seg` (absolute; the frame carries its offset from
/// `PEER.seg`) carrying `pieces` (flags, message, offset, bytes).
fn data_frame(seg: u64, pieces: &[(u8, u64, u64, &[u8])]) -> Vec<u8> {
    let pieces: Vec<Piece<'_>> = pieces
        .iter()
        .map(|&(flags, msg, offset, data)| Piece {
            flags: PieceFlags(flags),
            stream: 0,
            msg,
            offset,
            data,
            ts: None,
            deps: Deps::NONE,
            service: None,
            reset: None,
        })
        .collect();
    let mut f = Vec::new();
    Frame::emit_data(&mut f, seg - PEER.seg, &pieces);
    f
}

/// One 1-byte piece at an offset near the largest message claimed buffers of that size:
/// 16 packets of 4 such pieces reserved 1 GiB. Memory must follow the bytes received.
#[test]
fn pieces_at_far_offsets_cost_the_bytes_they_carry() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut rx = receiver(32 << 20);
    let max = Params::default().max_message as u64;
    let before = live();
    for i in 0..16u64 {
        let pieces: Vec<(u8, u64, u64, &[u8])> = (0..4)
            .map(|j| (0, PEER.msg + 4 * i + j, max - 2 - j, &b"x"[..]))
            .collect();
        let f = data_frame(PEER.seg + 1 + i, &pieces);
        rx.receive(now(), PEER.pn + i, &f, f.len() + 20).unwrap();
    }
    let grown = live().saturating_sub(before);
    eprintln!("64 far pieces: heap +{grown} bytes");
    assert!(
        grown < 256 * 1024,
        "64 one-byte pieces grew the heap by {grown} bytes"
    );
    assert_eq!(rx.state().app.partial_messages, 64);
    assert!(
        rx.state().session.close.is_none(),
        "nothing unlawful was sent"
    );
}

/// Complete one-byte messages parked behind one that never comes cost ~160 bytes of state
/// each: a peer sending them in order made the receiver hold ~20 times its traffic, without
/// bound. It is now stopped at the receive buffer: the connection closes as a protocol
/// violation, and the heap never grew by much more than the buffer.
#[test]
fn messages_parked_behind_a_missing_one_are_bounded_by_the_receive_buffer() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let recv_buffer = 1 << 20;
    let mut rx = receiver(recv_buffer);
    let before = live();
    let mut peak = 0;
    // As many as a segment of the negotiated size holds (a larger one is refused at once).
    let per_segment = 180u64;
    let mut packets = 0;
    // Message PEER.msg is never sent; everything after it is, one byte each, in order.
    for i in 0..rx.state().session.recv_credit - PEER.seg {
        let pieces: Vec<(u8, u64, u64, &[u8])> = (0..per_segment)
            .map(|j| {
                let msg = PEER.msg + 1 + i * per_segment + j;
                (PieceFlags::LAST, msg, 0, &b"y"[..])
            })
            .collect();
        let f = data_frame(PEER.seg + i, &pieces);
        assert!(f.len() <= 1472, "{} bytes", f.len());
        rx.receive(now(), PEER.pn + i, &f, f.len() + 20).unwrap();
        packets += 1;
        peak = peak.max(live().saturating_sub(before));
        if rx.state().session.close.is_some() {
            break;
        }
    }
    assert!(
        matches!(&rx.state().session.close, Some(CloseReason::ProtocolViolation(w)) if w.contains("receive buffer")),
        "after {packets} packets: {:?}",
        rx.state().session.close
    );
    eprintln!("{packets} hostile packets: heap peak +{peak} bytes for a {recv_buffer}-byte buffer");
    let bound = recv_buffer as usize + HELD_SLACK + 256 * 1024;
    assert!(
        peak <= bound,
        "the heap grew by {peak} bytes for a {recv_buffer}-byte receive buffer (bound {bound})"
    );
    assert!(rx.state().app.held() <= rx.state().app.hard_limit() + 64 * 1024);
}

/// Out-of-order segments beyond the credited share of the buffer are refused, not
/// acknowledged: a legitimate sender retransmits them later, nothing is lost and the
/// connection stays up.
#[test]
fn out_of_order_segments_beyond_the_buffer_are_refused_not_acknowledged() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let recv_buffer = 1 << 20;
    let mut rx = receiver(recv_buffer);
    let body = vec![7u8; 1400];
    // Segment PEER.seg (message PEER.msg) is missing; later whole messages arrive.
    let credit = rx.state().session.recv_credit - PEER.seg;
    for i in 1..credit {
        let f = data_frame(PEER.seg + i, &[(PieceFlags::LAST, PEER.msg + i, 0, &body)]);
        rx.receive(now(), PEER.pn + i, &f, f.len() + 20).unwrap();
    }
    let refused = rx.state().stats.segments_refused;
    assert!(refused > 0, "the credit spans more than the buffer's share");
    assert!(
        rx.state().session.close.is_none(),
        "{:?}",
        rx.state().session.close
    );
    assert!(rx.state().app.held() <= rx.state().app.credit_limit() + 2 * 1600);
    assert_eq!(
        rx.state().stats.packets_received,
        credit - 1 - refused,
        "refused packets are not taken (so not acknowledged)"
    );
    // The missing segment in order is taken, and everything parked goes to the reader.
    let f = data_frame(PEER.seg, &[(PieceFlags::LAST, PEER.msg, 0, &body)]);
    rx.receive(now(), PEER.pn + credit, &f, f.len() + 20)
        .unwrap();
    assert_eq!(rx.state().app.parked_messages(), 0);
    assert_eq!(rx.state().app.rx_msgs.len() as u64, credit - refused);
}

/// What an idle connection costs the endpoint that accepted it, in heap bytes.
fn idle_cost(profile: &Profile) -> usize {
    use ctp_proto::pair::Pair;
    use std::time::Duration;
    let client = ctp_proto::EndpointConfig::new([1; 32], [2; 32]);
    let mut server = ctp_proto::EndpointConfig::new([3; 32], [4; 32]);
    server.accept = true;
    server.wire = profile.wire();
    let mut p = Pair::with_configs(3, client, server);
    let n = 100;
    // Server heap is measured as the whole process's, around connections whose client
    // side is dropped at once: the clients' share is removed with them.
    let before = live();
    let mut clients = Vec::new();
    for _ in 0..n {
        clients.push(p.client.connect(p.now, p.server_addr, profile).unwrap());
    }
    assert!(p.run_until(Duration::from_secs(5), |p| {
        p.server.connection_count() == n
            && clients
                .iter()
                .all(|&c| p.client.connection(c).is_some_and(|x| x.is_established()))
    }));
    let quiet = p.now + Duration::from_millis(200);
    p.run_until(Duration::from_secs(1), |p| p.now >= quiet);
    let both = live().saturating_sub(before);
    both / (2 * n)
}

/// An idle connection is cheap: its buffers are allocated when data comes, not up front.
#[test]
fn an_idle_connection_costs_a_few_kilobytes() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let native = idle_cost(&Profile::reliable());
    let udt = idle_cost(&Profile::udt());
    eprintln!("heap per idle connection: native {native} B, UDT4 {udt} B");
    assert!(native < 16 * 1024, "native: {native} B");
    assert!(udt < 16 * 1024, "UDT4: {udt} B");
}

/// A segment larger than any packet of the negotiated size could carry breaks the protocol
/// (the credit's byte bound assumes it cannot happen).
#[test]
fn a_segment_larger_than_the_negotiated_payload_breaks_the_protocol() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut rx = receiver(32 << 20);
    let fits = vec![1u8; 1400];
    let f = data_frame(PEER.seg, &[(PieceFlags::LAST, PEER.msg, 0, &fits)]);
    rx.receive(now(), PEER.pn, &f, f.len() + 20).unwrap();
    assert!(rx.state().session.close.is_none());
    let big = vec![2u8; 9000];
    let f = data_frame(PEER.seg + 1, &[(PieceFlags::LAST, PEER.msg + 1, 0, &big)]);
    rx.receive(now(), PEER.pn + 1, &f, f.len() + 20).unwrap();
    assert!(
        matches!(&rx.state().session.close, Some(CloseReason::ProtocolViolation(w)) if w.contains("negotiated")),
        "{:?}",
        rx.state().session.close
    );
    assert_eq!(
        rx.state().app.rx_msgs.len(),
        1,
        "the oversized segment delivered nothing"
    );
}
