//! AEAD backends side by side: seal and open a packet-sized payload in place, as
//! `protection::Aead` does, with every candidate the choice in `docs/decisions.md` ("The
//! AEAD and its backend, chosen by measurement") was made from.
//!
//! ```text
//! cargo bench -p ctp-proto --bench aead -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Each group is one backend, suite and operation; each input one payload size (1200 bytes:
//! QUIC's minimum; 1452: the largest ctp payload on IPv6 with the default MTU). The nonce
//! changes every packet as the packet number does; the AAD is a short header (9 bytes).
//! Opening is timed on fresh copies of one sealed packet (the copies are made outside the
//! timed loop), since opening in place destroys its input.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::hint::black_box;

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

mod ring_backend {
    use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey};

    pub struct Ring(pub LessSafeKey);

    impl Ring {
        pub fn new(alg: &'static ring::aead::Algorithm, key: &[u8]) -> Self {
            Ring(LessSafeKey::new(
                UnboundKey::new(alg, &key[..alg.key_len()]).unwrap(),
            ))
        }
    }

    impl super::Backend for Ring {
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

mod aws_lc_backend {
    use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey};

    pub struct AwsLc(pub LessSafeKey);

    impl AwsLc {
        pub fn new(alg: &'static aws_lc_rs::aead::Algorithm, key: &[u8]) -> Self {
            AwsLc(LessSafeKey::new(
                UnboundKey::new(alg, &key[..alg.key_len()]).unwrap(),
            ))
        }
    }

    impl super::Backend for AwsLc {
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

fn bench_one(c: &mut Criterion, name: &str, backend: &dyn Backend) {
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

fn backends(c: &mut Criterion) {
    use aws_lc_backend::AwsLc;
    use ring_backend::Ring;
    use rustcrypto::RustCrypto;
    let all: Vec<(&str, Box<dyn Backend>)> = vec![
        (
            "rustcrypto-aes128gcm",
            Box::new(RustCrypto::<aes_gcm::Aes128Gcm>::new(&KEY[..16])),
        ),
        (
            "rustcrypto-aes256gcm",
            Box::new(RustCrypto::<aes_gcm::Aes256Gcm>::new(&KEY)),
        ),
        (
            "rustcrypto-chacha20poly1305",
            Box::new(RustCrypto::<chacha20poly1305::ChaCha20Poly1305>::new(&KEY)),
        ),
        (
            "ring-aes128gcm",
            Box::new(Ring::new(&ring::aead::AES_128_GCM, &KEY)),
        ),
        (
            "ring-aes256gcm",
            Box::new(Ring::new(&ring::aead::AES_256_GCM, &KEY)),
        ),
        (
            "ring-chacha20poly1305",
            Box::new(Ring::new(&ring::aead::CHACHA20_POLY1305, &KEY)),
        ),
        (
            "awslc-aes128gcm",
            Box::new(AwsLc::new(&aws_lc_rs::aead::AES_128_GCM, &KEY)),
        ),
        (
            "awslc-chacha20poly1305",
            Box::new(AwsLc::new(&aws_lc_rs::aead::CHACHA20_POLY1305, &KEY)),
        ),
    ];
    for (name, backend) in &all {
        bench_one(c, name, backend.as_ref());
    }
}

criterion_group!(benches, backends);
criterion_main!(benches);
