//! A handshake flood on loopback: attackers at several loopback addresses run INIT →
//! INIT_ACK → COOKIE_ECHO with valid cookies (half of them solving the client puzzle the
//! responder asks, half not) and never finish, while a legitimate client connects and
//! moves 4 MiB. The transfer must complete byte-exact, the responder's half-open
//! connections stay within its cap, and the process's memory stays bounded.
//!
//! Bounded in time (the flood lasts at most 5 s, the test 60 s); nothing asserts speed.

mod common;
use common::data;
use ctp::{Endpoint, EndpointOptions, Profile};
use ctp_proto::handshake::puzzle;
use ctp_proto::packet::long_packet;
use ctp_proto::protection::crc32c;
use ctp_proto::wire::header::{Header, LongType};
use ctp_proto::wire::{varint, Reader};
use ctp_proto::{EndpointConfig, Instant};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::timeout;

/// Attacker threads, one loopback address each (127.0.0.2, …).
const ATTACKERS: u8 = 4;
/// How long the flood lasts at most.
const FLOOD: Duration = Duration::from_secs(5);
/// INITs an attacker sends before reading the answers.
const BURST: usize = 32;
/// Half-open connections the responder allows (below the 4 × 256 the per-address limit
/// would let these attackers hold).
const MAX_HALF_OPEN: usize = 512;

/// The resident set of this process, KiB.
fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A genuine INIT for a secure `reliable` connection, from a sans-IO client endpoint.
fn init_packet(seed: u8, server: SocketAddr) -> (Vec<u8>, u32) {
    let mut ep = ctp_proto::Endpoint::new(EndpointConfig::new([seed; 32], [seed; 32]));
    let now = Instant::from_micros(1);
    ep.connect(now, server, &Profile::reliable()).unwrap();
    let mut init = Vec::new();
    ep.poll_transmit(now, &mut init).unwrap();
    let inner = crc32c::open_long(&init).unwrap();
    let Ok(Header::Long { scid, .. }) = Header::parse(&mut Reader::new(inner)) else {
        panic!("INIT has a long header");
    };
    (init, scid)
}

/// What an attacker learned from an INIT_ACK: the responder's connection id, the cookie and
/// the difficulty asked.
fn read_init_ack(packet: &[u8]) -> Option<(u32, Vec<u8>, u8)> {
    let inner = crc32c::open_long(packet).ok()?;
    let mut r = Reader::new(inner);
    let Ok(Header::Long {
        ty: LongType::InitAck,
        scid,
        ..
    }) = Header::parse(&mut r)
    else {
        return None;
    };
    ctp_proto::profile::decode_offer(&mut r, &Default::default()).ok()?;
    let cookie = r.length_prefixed(256, "cookie").ok()?.to_vec();
    let d = if r.is_empty() { 0 } else { r.u8().ok()? };
    Some((scid, cookie, d))
}

#[derive(Default)]
struct Counts {
    sent: AtomicU64,
    echoes: AtomicU64,
    solved: AtomicU64,
    hardest: AtomicU64,
}

/// One attacker: bursts of INITs from `ip`, a COOKIE_ECHO for every INIT_ACK (with Noise
/// message 1 of random bytes: the responder must do its Diffie–Hellman to answer it), the
/// puzzle solved only when `solve` is set (else a guessed nonce); Noise message 2 is ignored, so every connection
/// it makes stays half-open.
fn attack(ip: Ipv4Addr, server: SocketAddr, solve: bool, stop: &AtomicBool, n: &Counts) {
    let sock = UdpSocket::bind((ip, 0)).expect("bind a loopback address");
    sock.set_read_timeout(Some(Duration::from_millis(5)))
        .unwrap();
    let (init, my_cid) = init_packet(ip.octets()[3], server);
    let mut buf = vec![0u8; 2048];
    let mut x = u64::from(ip.octets()[3]) * 0x9E37_79B9;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..BURST {
            if sock.send_to(&init, server).is_ok() {
                n.sent.fetch_add(1, Ordering::Relaxed);
            }
        }
        while let Ok((len, _)) = sock.recv_from(&mut buf) {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let Some((server_cid, cookie, d)) = read_init_ack(&buf[..len]) else {
                continue;
            };
            n.hardest.fetch_max(d.into(), Ordering::Relaxed);
            let mut body = Vec::new();
            varint::put(&mut body, cookie.len() as u64);
            body.extend_from_slice(&cookie);
            if d > 0 && solve {
                let s = puzzle::solve(puzzle::challenge(&cookie), d, 0).expect("solvable");
                body.extend_from_slice(&s.nonce.to_be_bytes());
                n.solved.fetch_add(1, Ordering::Relaxed);
            } else if d > 0 {
                // A guess: right once in 2^d.
                body.extend_from_slice(&x.to_be_bytes());
            }
            varint::put(&mut body, 32);
            for _ in 0..4 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                body.extend_from_slice(&x.to_le_bytes());
            }
            let echo = long_packet(LongType::CookieEcho, server_cid, my_cid, &body, 0);
            if sock.send_to(&echo, server).is_ok() {
                n.sent.fetch_add(1, Ordering::Relaxed);
                n.echoes.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_flood_neither_stops_a_transfer_nor_exhausts_memory() {
    timeout(Duration::from_secs(60), async {
        let srv = Endpoint::bind(
            "127.0.0.1:0".parse().unwrap(),
            EndpointOptions {
                max_half_open: MAX_HALF_OPEN,
                ..EndpointOptions::server()
            },
        )
        .await
        .unwrap();
        let addr = srv.local_addr().unwrap();
        let rss_before = rss_kib();
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(Counts::default());
        let started = std::time::Instant::now();
        let attackers: Vec<_> = (0..ATTACKERS)
            .map(|i| {
                let (stop, counts) = (stop.clone(), counts.clone());
                std::thread::spawn(move || {
                    let ip = Ipv4Addr::new(127, 0, 0, 2 + i);
                    attack(ip, addr, i % 2 == 0, &stop, &counts)
                })
            })
            .collect();
        // A watchdog: the flood ends after FLOOD whatever happens; it samples the gauges.
        let watch = {
            let (srv, stop) = (srv.clone(), stop.clone());
            tokio::spawn(async move {
                let mut most = 0;
                let mut peak_rss = 0;
                while started.elapsed() < FLOOD && !stop.load(Ordering::Relaxed) {
                    most = most.max(srv.stats().half_open);
                    peak_rss = peak_rss.max(rss_kib());
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                stop.store(true, Ordering::Relaxed);
                (most.max(srv.stats().half_open), peak_rss.max(rss_kib()))
            })
        };
        // Let the flood build up before the legitimate client comes.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointOptions::default())
            .await
            .unwrap();
        let payload = data(4 << 20, 9);
        let want = blake3::hash(&payload);
        let (conn, acc) = tokio::join!(client.connect(addr, &Profile::reliable()), async {
            // Accept until the legitimate connection (the attackers never authenticate,
            // so none of theirs is ever accepted).
            srv.accept().await
        });
        let mut tx = conn.expect("the legitimate client connects under the flood");
        let mut rx = acc.expect("accepted");
        let during = srv.stats();
        let writer = tokio::spawn(async move {
            tx.write_all(&payload).await.expect("write_all");
            tx.shutdown().await.expect("shutdown");
            tx
        });
        let mut got = Vec::new();
        rx.read_to_end(&mut got).await.expect("read_to_end");
        let tx = writer.await.unwrap();
        tx.close().await.expect("graceful close");
        let transfer_done = started.elapsed();
        assert_eq!(got.len(), 4 << 20);
        assert_eq!(blake3::hash(&got), want, "bytes differ");

        let (most_half_open, peak_rss) = watch.await.unwrap();
        for a in attackers {
            a.join().unwrap();
        }
        let flood_time = started.elapsed().min(FLOOD).as_secs_f64();
        let s = srv.stats();
        let rss_after = rss_kib();
        let sent = counts.sent.load(Ordering::Relaxed);
        println!(
            "flood: {sent} datagrams in {flood_time:.1} s = {:.0}/s ({} echoes, {} puzzles \
             solved, hardest {} bits); transfer done after {:.1} s",
            sent as f64 / flood_time,
            counts.echoes.load(Ordering::Relaxed),
            counts.solved.load(Ordering::Relaxed),
            counts.hardest.load(Ordering::Relaxed),
            transfer_done.as_secs_f64(),
        );
        println!(
            "responder: half-open at most {most_half_open} (cap {MAX_HALF_OPEN}), puzzles \
             asked {}, verified {}, failed {}, evicted at the cap {}, handshake drops {}; \
             when the client connected: {during:?}",
            s.puzzles_asked,
            s.puzzles_verified,
            s.puzzle_failed,
            s.half_open_evicted,
            s.handshake_dropped
        );
        println!(
            "RSS: {} MiB before, {} MiB at the peak, {} MiB after",
            rss_before >> 10,
            peak_rss >> 10,
            rss_after >> 10
        );
        assert!(sent > 1000, "the flood hardly ran: {sent} datagrams");
        assert!(
            counts.echoes.load(Ordering::Relaxed) > 0,
            "no COOKIE_ECHO went out"
        );
        assert!(
            s.puzzles_asked > 0,
            "the flood never raised a puzzle: {s:?}"
        );
        assert!(
            s.puzzle_failed > 0,
            "the non-solvers' echoes were counted: {s:?}"
        );
        assert!(most_half_open as usize <= MAX_HALF_OPEN);
        assert!(s.half_open as usize <= MAX_HALF_OPEN);
        let growth = peak_rss.saturating_sub(rss_before);
        assert!(
            growth < 64 << 10,
            "memory grew {} MiB under the flood",
            growth >> 10
        );
    })
    .await
    .expect("timed out");
}
