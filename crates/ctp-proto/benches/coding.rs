//! GF(2^8) kernels and Reed–Solomon encode/decode, with `reed-solomon-erasure` (SIMD C or
//! pure Rust, as built) measured beside ours as the baseline.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ctp_proto::coding::{gf256, rs::ReedSolomon};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let src = vec![0x5au8; 1400];
    let mut dst = vec![0u8; 1400];
    let mut g = c.benchmark_group("gf256");
    g.throughput(Throughput::Bytes(src.len() as u64));
    g.bench_function("mul_add_slice_1400B", |b| {
        b.iter(|| gf256::mul_add_slice(&mut dst, &src, black_box(0x53)))
    });
    g.finish();

    let (k, m, len) = (10usize, 4usize, 1400usize);
    let data: Vec<Vec<u8>> = (0..k).map(|i| vec![i as u8; len]).collect();
    let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
    let ours = ReedSolomon::new(k, m).expect("valid");
    let theirs = reed_solomon_erasure::galois_8::ReedSolomon::new(k, m).expect("valid");
    let mut parity = vec![Vec::new(); m];
    let mut g = c.benchmark_group("reed_solomon_10_4");
    g.throughput(Throughput::Bytes((k * len) as u64));
    g.bench_function("encode_ctp", |b| {
        b.iter(|| ours.encode(black_box(&refs), &mut parity).expect("encodes"))
    });
    g.bench_function("encode_reed_solomon_erasure", |b| {
        let mut shards: Vec<Vec<u8>> = data
            .iter()
            .cloned()
            .chain(std::iter::repeat_n(vec![0u8; len], m))
            .collect();
        b.iter(|| theirs.encode(black_box(&mut shards)).expect("encodes"))
    });
    ours.encode(&refs, &mut parity).expect("encodes");
    g.bench_function("reconstruct_2_lost_ctp", |b| {
        b.iter(|| {
            let mut shards: Vec<Option<Vec<u8>>> = data
                .iter()
                .cloned()
                .chain(parity.iter().cloned())
                .map(Some)
                .collect();
            shards[0] = None;
            shards[5] = None;
            ours.reconstruct_data(black_box(&mut shards))
                .expect("decodes");
            shards
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
