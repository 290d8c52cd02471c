//! Packet encode/decode cost: a full-size data packet with an ACK riding along.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ctp_proto::packet::{open_short, ShortPacket};
use ctp_proto::protection::Crc32c;
use ctp_proto::wire::frame::{AckFrame, Frame, Piece, PieceFlags, PnRange};
use ctp_proto::wire::truncated::Truncated;
use ctp_proto::wire::Reader;
use std::hint::black_box;

fn build(out: &mut Vec<u8>, payload: &[u8], pn: u64) {
    out.clear();
    let packet = ShortPacket::begin(out, 0x1234_5678, pn, Truncated::encode(pn, Some(40)));
    let ranges = [
        PnRange {
            lo: pn - 40,
            hi: pn - 10,
        },
        PnRange {
            lo: pn - 100,
            hi: pn - 50,
        },
    ];
    AckFrame::emit(out, 250, ranges.iter().copied());
    Frame::emit_data_header(out, pn * 2);
    Piece {
        flags: PieceFlags(PieceFlags::STREAM),
        stream: 0,
        msg: 77,
        offset: 4096,
        data: payload,
        ts: None,
        deps: ctp_proto::wire::frame::Deps::NONE,
        service: None,
        reset: None,
    }
    .emit(out);
    packet.seal(out, &mut Crc32c);
}

fn bench(c: &mut Criterion) {
    let payload = vec![0xa5u8; 1350];
    let mut out = Vec::with_capacity(1500);
    let mut g = c.benchmark_group("packet");
    g.throughput(Throughput::Elements(1));
    g.bench_function("encode_data_packet", |b| {
        let mut pn = 1 << 20;
        b.iter(|| {
            pn += 1;
            build(&mut out, black_box(&payload), pn);
            black_box(out.len())
        })
    });
    let pn = 1 << 20;
    build(&mut out, &payload, pn);
    g.bench_function("decode_data_packet", |b| {
        b.iter(|| {
            let opened = open_short(black_box(&mut out), &mut Crc32c, |t| Some(t.expand(pn)))
                .expect("valid");
            let h = opened.pn;
            let mut r = Reader::new(opened.frames);
            let mut n = 0usize;
            while !r.is_empty() {
                match Frame::parse(&mut r, 0).expect("valid") {
                    Frame::Ack(a) => n += a.ranges().count(),
                    Frame::Data(d) => n += d.pieces().map(|p| p.data.len()).sum::<usize>(),
                    _ => {}
                }
            }
            black_box((h, n))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
