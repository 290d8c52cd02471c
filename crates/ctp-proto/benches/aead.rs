//! AEAD backends side by side: seal and open a packet-sized payload in place, as
//! `protection::Aead` does, with every candidate the choice in `docs/decisions.md` ("The
//! AEAD and its backend, chosen by measurement") was made from.
//!
//! ```text
//! cargo bench -p ctp-proto --bench aead --features bench-aead-backends -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Without the feature, only *ring* (what `protection::Aead` uses) is measured: the other
//! backends are optional dependencies of `ctp-proto`, off by default, so that no build but
//! this comparison compiles aws-lc's C.
//!
//! Each group is one backend, suite and operation; each input one payload size (1200 bytes:
//! QUIC's minimum; 1452: the largest ctp payload on IPv6 with the default MTU). The nonce
//! changes every packet as the packet number does; the AAD is a short header (9 bytes).
//! Opening is timed on fresh copies of one sealed packet (the copies are made outside the
//! timed loop), since opening in place destroys its input.
//!
//! Time is the bench thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), not the wall clock: the
//! figures are bytes per CPU-second of one core, and a machine shared with other work (a
//! build, another bench) does not count the time this thread waits preempted.
//!
//! Then the header-protection masks (`hp/…`, per packet: *ring*'s QUIC masks, five bytes,
//! against the RustCrypto blocks `protection::Aead` uses, since ctp's packet number may
//! take eight bytes), and the whole packet path of `protection::Aead` and of `Crc32c`
//! (`path/…`: `ShortPacket::seal` with header protection after the payload is copied in;
//! `open_short` on a fresh sealed packet of a new number, made outside the timed loop).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::hint::black_box;

#[path = "common/thread_cpu.rs"]
mod thread_cpu;
use thread_cpu::ThreadCpu;

type Bench = Criterion<ThreadCpu>;

const SIZES: [usize; 2] = [1200, 1452];
const AAD: [u8; 9] = [0x40, 1, 2, 3, 4, 0x80, 0, 0x12, 0x34];
const KEY: [u8; 32] = [7; 32];
const TAG: usize = 16;

/// One backend and suite: seals `buf[..len - TAG]` in place, writing the tag after it, and
/// opens such a packet in place.
trait Backend {
    fn seal(&self, n: u64, buf: &mut [u8]);
    fn open(&self, n: u64, buf: &mut [u8]) -> bool;
}

fn nonce(n: u64) -> [u8; 12] {
    let mut out = [0x5a; 12];
    for (o, b) in out[4..].iter_mut().zip(n.to_be_bytes()) {
        *o ^= b;
    }
    out
}

#[cfg(feature = "bench-aead-backends")]
mod rustcrypto {
    use aes_gcm::aead::{AeadInOut, KeyInit};

    pub struct RustCrypto<A>(pub A);

    impl<A: AeadInOut + KeyInit> RustCrypto<A> {
        pub fn new(key: &[u8]) -> Self {
            RustCrypto(A::new_from_slice(key).unwrap())
        }
    }

    impl<
            A: AeadInOut<NonceSize = aes_gcm::aead::consts::U12, TagSize = aes_gcm::aead::consts::U16>,
        > super::Backend for RustCrypto<A>
    {
        fn seal(&self, n: u64, buf: &mut [u8]) {
            let nonce = super::nonce(n).into();
            let (body, tag) = buf.split_at_mut(buf.len() - super::TAG);
            let t = self
                .0
                .encrypt_inout_detached(&nonce, &super::AAD, body.into())
                .unwrap();
            tag.copy_from_slice(&t);
        }

        fn open(&self, n: u64, buf: &mut [u8]) -> bool {
            let nonce = super::nonce(n).into();
            let (body, tag) = buf.split_at_mut(buf.len() - super::TAG);
            let tag = <[u8; 16]>::try_from(&*tag).unwrap().into();
            self.0
                .decrypt_inout_detached(&nonce, &super::AAD, body.into(), &tag)
                .is_ok()
        }
    }
}

/// A backend over `ring`'s AEAD API, which `aws-lc-rs` offers unchanged under its own name.
macro_rules! ring_like_backend {
    ($module:ident, $krate:ident, $name:ident) => {
        mod $module {
            use $krate::aead::{Aad, LessSafeKey, Nonce, UnboundKey};

            pub struct $name(pub LessSafeKey);

            impl $name {
                pub fn new(alg: &'static $krate::aead::Algorithm, key: &[u8]) -> Self {
                    $name(LessSafeKey::new(
                        UnboundKey::new(alg, &key[..alg.key_len()]).unwrap(),
                    ))
                }
            }

            impl super::Backend for $name {
                fn seal(&self, n: u64, buf: &mut [u8]) {
                    let nonce = Nonce::assume_unique_for_key(super::nonce(n));
                    let (body, tag) = buf.split_at_mut(buf.len() - super::TAG);
                    let t = self
                        .0
                        .seal_in_place_separate_tag(nonce, Aad::from(super::AAD), body)
                        .unwrap();
                    tag.copy_from_slice(t.as_ref());
                }

                fn open(&self, n: u64, buf: &mut [u8]) -> bool {
                    let nonce = Nonce::assume_unique_for_key(super::nonce(n));
                    self.0
                        .open_in_place(nonce, Aad::from(super::AAD), buf)
                        .is_ok()
                }
            }
        }
    };
}

ring_like_backend!(ring_backend, ring, Ring);
#[cfg(feature = "bench-aead-backends")]
ring_like_backend!(aws_lc_backend, aws_lc_rs, AwsLc);

fn bench_one(c: &mut Bench, name: &str, backend: &dyn Backend) {
    for (op, sealing) in [("seal", true), ("open", false)] {
        let mut g = c.benchmark_group(format!("{name}/{op}"));
        for size in SIZES {
            g.throughput(Throughput::Bytes(size as u64));
            if sealing {
                let mut buf = vec![0xab; size + TAG];
                let mut n = 0u64;
                g.bench_function(size.to_string(), |b| {
                    b.iter(|| {
                        n += 1;
                        backend.seal(n, black_box(&mut buf));
                    })
                });
            } else {
                let mut sealed = vec![0xab; size + TAG];
                backend.seal(1, &mut sealed);
                assert!(backend.open(1, &mut sealed.clone()), "{name} opens");
                g.bench_function(size.to_string(), |b| {
                    b.iter_batched_ref(
                        || sealed.clone(),
                        |buf| assert!(backend.open(1, black_box(buf))),
                        BatchSize::SmallInput,
                    )
                });
            }
        }
        g.finish();
    }
}

fn backends(c: &mut Bench) {
    use ring_backend::Ring;
    let mut all: Vec<(&str, Box<dyn Backend>)> = Vec::new();
    #[cfg(feature = "bench-aead-backends")]
    {
        use rustcrypto::RustCrypto;
        all.push((
            "rustcrypto-aes128gcm",
            Box::new(RustCrypto::<aes_gcm::Aes128Gcm>::new(&KEY[..16])),
        ));
        all.push((
            "rustcrypto-aes256gcm",
            Box::new(RustCrypto::<aes_gcm::Aes256Gcm>::new(&KEY)),
        ));
        all.push((
            "rustcrypto-chacha20poly1305",
            Box::new(RustCrypto::<chacha20poly1305::ChaCha20Poly1305>::new(&KEY)),
        ));
    }
    for (name, alg) in [
        ("ring-aes128gcm", &ring::aead::AES_128_GCM),
        ("ring-aes256gcm", &ring::aead::AES_256_GCM),
        ("ring-chacha20poly1305", &ring::aead::CHACHA20_POLY1305),
    ] {
        all.push((name, Box::new(Ring::new(alg, &KEY))));
    }
    #[cfg(feature = "bench-aead-backends")]
    {
        use aws_lc_backend::AwsLc;
        all.push((
            "awslc-aes128gcm",
            Box::new(AwsLc::new(&aws_lc_rs::aead::AES_128_GCM, &KEY)),
        ));
        all.push((
            "awslc-chacha20poly1305",
            Box::new(AwsLc::new(&aws_lc_rs::aead::CHACHA20_POLY1305, &KEY)),
        ));
    }
    for (name, backend) in &all {
        bench_one(c, name, backend.as_ref());
    }
}

fn header_protection(c: &mut Bench) {
    use chacha20::cipher::{KeyIvInit, StreamCipherCore};
    use ring::aead::quic;
    let mut g = c.benchmark_group("hp");
    g.throughput(Throughput::Elements(1));
    let mut sample = [0x3cu8; 16];
    let ring_aes = quic::HeaderProtectionKey::new(&quic::AES_128, &KEY[..16]).unwrap();
    let ring_chacha = quic::HeaderProtectionKey::new(&quic::CHACHA20, &KEY).unwrap();
    g.bench_function("ring-aes128", |b| {
        b.iter(|| {
            sample[0] = sample[0].wrapping_add(1);
            ring_aes.new_mask(black_box(&sample)).unwrap()
        })
    });
    g.bench_function("ring-chacha20", |b| {
        b.iter(|| {
            sample[0] = sample[0].wrapping_add(1);
            ring_chacha.new_mask(black_box(&sample)).unwrap()
        })
    });
    let key16 = <[u8; 16]>::try_from(&KEY[..16]).unwrap();
    {
        // aes 0.8, as `protection::Aead` uses.
        use aes::cipher::{BlockEncrypt, KeyInit};
        let aes = aes::Aes128::new(&key16.into());
        g.bench_function("rustcrypto-aes128-0.8", |b| {
            b.iter(|| {
                sample[0] = sample[0].wrapping_add(1);
                let mut block = aes::Block::from(*black_box(&sample));
                aes.encrypt_block(&mut block);
                <[u8; 16]>::from(block)
            })
        });
    }
    #[cfg(feature = "bench-aead-backends")]
    {
        // aes 0.9 (aes-gcm 0.11's): one block through its VAES-512 dispatch.
        use aes_gcm::aes;
        use aes_gcm::aes::cipher::{BlockCipherEncrypt, KeyInit};
        let aes = aes::Aes128::new(&key16.into());
        g.bench_function("rustcrypto-aes128-0.9", |b| {
            b.iter(|| {
                sample[0] = sample[0].wrapping_add(1);
                let mut block = aes::Block::from(*black_box(&sample));
                aes.encrypt_block(&mut block);
                <[u8; 16]>::from(block)
            })
        });
    }
    type ChaCha20Core = chacha20::ChaChaCore<chacha20::R20, chacha20::variants::Ietf>;
    g.bench_function("rustcrypto-chacha20", |b| {
        b.iter(|| {
            sample[0] = sample[0].wrapping_add(1);
            let s = black_box(&sample);
            let counter = u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
            let nonce: [u8; 12] = s[4..].try_into().unwrap();
            let mut chacha = ChaCha20Core::new(&KEY.into(), &nonce.into());
            chacha.set_block_pos(counter);
            let mut block = Default::default();
            chacha.write_keystream_block(&mut block);
            <[u8; 16]>::try_from(&block[..16]).unwrap()
        })
    });
    g.finish();
}

fn packet_path(c: &mut Bench) {
    use ctp_proto::packet::{open_short, ShortPacket};
    use ctp_proto::protection::{Aead, Crc32c, PacketProtection, Suite};
    use ctp_proto::wire::truncated::Truncated;

    fn seal(out: &mut Vec<u8>, p: &mut dyn PacketProtection, pn: u64, payload: &[u8]) {
        out.clear();
        let packet = ShortPacket::begin(out, 0x1234_5678, pn, Truncated::encode(pn, Some(40)));
        out.extend_from_slice(payload);
        packet.seal(out, p);
    }

    type Make = fn() -> (Box<dyn PacketProtection>, Box<dyn PacketProtection>);
    let contenders: [(&str, Make); 3] = [
        ("aes-128-gcm", || {
            let (x, y) = ([1; 32], [2; 32]);
            let a = Aead::new(Suite::Aes128Gcm, x, y);
            (Box::new(a), Box::new(Aead::new(Suite::Aes128Gcm, y, x)))
        }),
        ("chacha20-poly1305", || {
            let (x, y) = ([1; 32], [2; 32]);
            let a = Aead::new(Suite::ChaCha20Poly1305, x, y);
            (
                Box::new(a),
                Box::new(Aead::new(Suite::ChaCha20Poly1305, y, x)),
            )
        }),
        ("crc32c", || (Box::new(Crc32c), Box::new(Crc32c))),
    ];
    for (name, make) in contenders {
        for (op, sealing) in [("seal", true), ("open", false)] {
            // A new pair for each: the seal bench alone seals millions of packets, past
            // AES-128-GCM's key updates, which a receiver that never saw them cannot follow.
            // One sequence of numbers per sender: the receiver's replay window sees each
            // once.
            let (mut tx, mut rx) = make();
            let mut pn = 1u64 << 20;
            let mut g = c.benchmark_group(format!("path/{name}/{op}"));
            for size in SIZES {
                g.throughput(Throughput::Bytes(size as u64));
                let payload = vec![0xa5u8; size];
                let mut out = Vec::with_capacity(1500);
                if sealing {
                    g.bench_function(size.to_string(), |b| {
                        b.iter(|| {
                            pn += 1;
                            seal(&mut out, tx.as_mut(), pn, black_box(&payload));
                        })
                    });
                } else {
                    g.bench_function(size.to_string(), |b| {
                        b.iter_batched_ref(
                            || {
                                pn += 1;
                                seal(&mut out, tx.as_mut(), pn, &payload);
                                (pn, out.clone())
                            },
                            |(pn, packet)| {
                                let pn = *pn;
                                let o = open_short(black_box(packet), rx.as_mut(), |t| {
                                    Some(t.expand(pn))
                                });
                                assert_eq!(o.expect("opens").frames.len(), size);
                            },
                            BatchSize::SmallInput,
                        )
                    });
                }
            }
            g.finish();
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpu);
    targets = backends, header_protection, packet_path
}
criterion_main!(benches);
