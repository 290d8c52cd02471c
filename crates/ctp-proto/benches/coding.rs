//! The coding kernels and codecs, with other crates beside ours as baselines:
//!
//! - `gf256/…`: the slice kernels on 1200 bytes, on every kernel this CPU runs;
//! - `rlnc_encode_k…`, `rlnc_decode_k…`, `rlnc_decode_repairs_only_k…`: blocks of k = 16, 32,
//!   64 symbols of 1200 bytes, with ctp's RLNC (`coding::rlnc`, SIMD and forced scalar
//!   kernels) beside `reed-solomon-simd` (Leopard RS, k-of-n) and the `rlnc` crate
//!   (full-vector RLNC). Throughput is application data: k × 1200 bytes per block. Encode
//!   makes k/4 repair symbols; decode gets the block with k/4 source symbols lost and as many
//!   repair symbols in their place; "repairs only" decodes from k repair symbols. Docs:
//!   docs/decisions.md, "The coded profile's codec".
//! - `reed_solomon_10_4/…`: the `fec` microprotocol's Reed–Solomon against
//!   `reed-solomon-erasure`.
//!
//! Time is the bench thread's CPU time (`common/thread_cpu.rs`), so a shared machine's other
//! work does not count in the figures.
//!
//! `cargo bench -p ctp-proto --bench coding -- --measurement-time 2 --warm-up-time 1`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ctp_proto::coding::gf256::Kernel;
use ctp_proto::coding::rlnc::{CodedSymbol, Decoder, Encoder};
use ctp_proto::coding::rs::ReedSolomon;
use rand09::SeedableRng;
use reed_solomon_simd::{ReedSolomonDecoder, ReedSolomonEncoder};
use std::hint::black_box;

#[path = "common/thread_cpu.rs"]
mod thread_cpu;
use thread_cpu::ThreadCpu;

type Bench = Criterion<ThreadCpu>;

const SYMBOL: usize = 1200;
const BLOCKS: [usize; 3] = [16, 32, 64];
/// The byte the `rlnc` crate appends to the data before padding (0.8.7, `full/consts.rs`;
/// not exported).
const RLNC_CRATE_BOUNDARY_MARKER: u8 = 0x81;

/// Our kernels: the detected (SIMD) one and the scalar one forced.
fn our_kernels() -> [(&'static str, Kernel); 2] {
    [
        (Kernel::detected().name(), Kernel::detected()),
        ("scalar", Kernel::scalar()),
    ]
}

fn block(k: usize) -> Vec<Vec<u8>> {
    (0..k)
        .map(|i| {
            (0..SYMBOL)
                .map(|j| (i * 131 + j * 7 + j / 251) as u8)
                .collect()
        })
        .collect()
}

/// The `rlnc` crate's full coded piece for source symbol `i` (its systematic piece, which its
/// encoder never makes but its decoder takes): the unit vector, then piece `i` of the
/// crate's layout of the block (the data, its boundary marker, zeros).
fn rlnc_crate_source_piece(layout: &[u8], k: usize, piece_len: usize, i: usize) -> Vec<u8> {
    let mut piece = vec![0u8; k];
    piece[i] = 1;
    piece.extend_from_slice(&layout[i * piece_len..(i + 1) * piece_len]);
    piece
}

fn kernels(c: &mut Bench) {
    let src = vec![0x5au8; SYMBOL];
    let mut dst = vec![0u8; SYMBOL];
    let mut g = c.benchmark_group("gf256");
    g.throughput(Throughput::BytesDecimal(SYMBOL as u64));
    for kernel in Kernel::available() {
        g.bench_function(
            BenchmarkId::new("mul_add_slice_1200B", kernel.name()),
            |b| b.iter(|| kernel.mul_add_slice(&mut dst, &src, black_box(0x53))),
        );
        g.bench_function(BenchmarkId::new("mul_slice_1200B", kernel.name()), |b| {
            b.iter(|| kernel.mul_slice(&mut dst, black_box(0x53)))
        });
    }
    g.finish();
}

fn rlnc_encode(c: &mut Bench) {
    for k in BLOCKS {
        let m = k / 4;
        let data = block(k);
        let mut g = c.benchmark_group(format!("rlnc_encode_k{k}"));
        g.throughput(Throughput::BytesDecimal((k * SYMBOL) as u64));
        let mut out = vec![vec![0u8; SYMBOL]; m];
        for (name, kernel) in our_kernels() {
            let encoder = Encoder::new(data.iter().map(Vec::as_slice).collect(), SYMBOL)
                .expect("valid block")
                .with_kernel(kernel);
            g.bench_function(BenchmarkId::new("ctp", name), |b| {
                b.iter(|| {
                    for (seed, o) in out.iter_mut().enumerate() {
                        encoder.repair(seed as u32, o).expect("sized");
                    }
                })
            });
        }
        let mut rs = ReedSolomonEncoder::new(k, m, SYMBOL).expect("valid");
        g.bench_function("reed_solomon_simd", |b| {
            b.iter(|| {
                rs.reset(k, m, SYMBOL).expect("valid");
                for d in &data {
                    rs.add_original_shard(d).expect("sized");
                }
                black_box(rs.encode().expect("encodes").recovery(0).map(<[u8]>::len))
            })
        });
        let theirs = rlnc::full::Encoder::new(data.concat(), k).expect("valid");
        let mut piece = vec![0u8; theirs.get_full_coded_piece_byte_len()];
        let mut rng = rand09::rngs::StdRng::seed_from_u64(1);
        g.bench_function("rlnc_crate", |b| {
            b.iter(|| {
                for _ in 0..m {
                    theirs.code_with_buf(&mut rng, &mut piece).expect("sized");
                }
            })
        });
        g.finish();
    }
}

/// Decoding a block: `lost` source symbols (the first of every k/lost) replaced by repairs,
/// or all of them when `lost == k`.
fn rlnc_decode(c: &mut Bench, lost: fn(usize) -> usize, name: &str) {
    for k in BLOCKS {
        let m = lost(k);
        let data = block(k);
        let lost_set: Vec<usize> = (0..m).map(|j| j * k / m).collect();
        let arrived: Vec<usize> = (0..k).filter(|i| !lost_set.contains(i)).collect();
        let mut g = c.benchmark_group(format!("{name}_k{k}"));
        g.throughput(Throughput::BytesDecimal((k * SYMBOL) as u64));
        g.sample_size(20);

        let encoder =
            Encoder::new(data.iter().map(Vec::as_slice).collect(), SYMBOL).expect("valid");
        let repairs: Vec<Vec<u8>> = (0..m as u32)
            .map(|seed| {
                let mut out = vec![0u8; SYMBOL];
                encoder.repair(seed, &mut out).expect("sized");
                out
            })
            .collect();
        for (kernel_name, kernel) in our_kernels() {
            g.bench_function(BenchmarkId::new("ctp", kernel_name), |b| {
                b.iter(|| {
                    let mut decoder = Decoder::new(k, SYMBOL).expect("valid").with_kernel(kernel);
                    for &i in &arrived {
                        decoder
                            .receive(CodedSymbol::Source(i), &data[i])
                            .expect("valid");
                    }
                    for (seed, r) in repairs.iter().enumerate() {
                        decoder
                            .receive(CodedSymbol::Repair(seed as u32), r)
                            .expect("valid");
                    }
                    let block = decoder.take_block().expect("complete");
                    assert_eq!(block[..SYMBOL], data[0][..]);
                    block
                })
            });
        }

        let mut rs_encoder = ReedSolomonEncoder::new(k, m, SYMBOL).expect("valid");
        for d in &data {
            rs_encoder.add_original_shard(d).expect("sized");
        }
        let recovery: Vec<Vec<u8>> = rs_encoder
            .encode()
            .expect("encodes")
            .recovery_iter()
            .map(<[u8]>::to_vec)
            .collect();
        let mut rs = ReedSolomonDecoder::new(k, m, SYMBOL).expect("valid");
        g.bench_function("reed_solomon_simd", |b| {
            b.iter(|| {
                rs.reset(k, m, SYMBOL).expect("valid");
                for &i in &arrived {
                    rs.add_original_shard(i, &data[i]).expect("valid");
                }
                for (j, r) in recovery.iter().enumerate() {
                    rs.add_recovery_shard(j, r).expect("valid");
                }
                let result = rs.decode().expect("decodes");
                assert_eq!(
                    result.restored_original(lost_set[0]),
                    Some(&data[lost_set[0]][..])
                );
            })
        });

        let theirs = rlnc::full::Encoder::new(data.concat(), k).expect("valid");
        let piece_len = theirs.get_piece_byte_len();
        let mut rng = rand09::rngs::StdRng::seed_from_u64(2);
        let mut layout = data.concat();
        layout.push(RLNC_CRATE_BOUNDARY_MARKER);
        layout.resize(k * piece_len, 0);
        let mut pieces: Vec<Vec<u8>> = arrived
            .iter()
            .map(|&i| rlnc_crate_source_piece(&layout, k, piece_len, i))
            .collect();
        // Random pieces until k are useful (a dependent one is rare).
        let mut check = rlnc::full::Decoder::new(piece_len, k).expect("valid");
        for p in &pieces {
            check.decode(p).expect("useful");
        }
        while !check.is_already_decoded() {
            let p = theirs.code(&mut rng);
            if check.decode(&p).is_ok() {
                pieces.push(p);
            }
        }
        g.bench_function("rlnc_crate", |b| {
            b.iter(|| {
                let mut decoder = rlnc::full::Decoder::new(piece_len, k).expect("valid");
                for p in &pieces {
                    decoder.decode(p).expect("useful");
                }
                let decoded = decoder.get_decoded_data().expect("decoded");
                assert_eq!(decoded[..SYMBOL], data[0][..]);
                decoded
            })
        });
        g.finish();
    }
}

fn rlnc_decode_systematic(c: &mut Bench) {
    rlnc_decode(c, |k| k / 4, "rlnc_decode");
}

fn rlnc_decode_repairs_only(c: &mut Bench) {
    rlnc_decode(c, |k| k, "rlnc_decode_repairs_only");
}

fn reed_solomon(c: &mut Bench) {
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

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpu);
    targets = kernels, rlnc_encode, rlnc_decode_systematic, rlnc_decode_repairs_only, reed_solomon
}
criterion_main!(benches);
