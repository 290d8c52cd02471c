//! End-to-end tests of the runtime over real UDP sockets on 127.0.0.1.
//!
//! Every test is bounded by `tokio::time::timeout`; none asserts on speed.

mod common;
use bytes::Bytes;
use common::data;
use ctp::{ConnectError, Connection, Endpoint, EndpointOptions, Profile, StreamKind};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::timeout;

const LOCAL: &str = "127.0.0.1:0";

async fn server() -> (Endpoint, SocketAddr) {
    let ep = Endpoint::bind(
        LOCAL.parse().unwrap(),
        EndpointOptions {
            accept: true,
            ..Default::default()
        },
    )
    .await
    .expect("bind server");
    let addr = ep.local_addr().unwrap();
    (ep, addr)
}

async fn client() -> Endpoint {
    Endpoint::bind(LOCAL.parse().unwrap(), EndpointOptions::default())
        .await
        .expect("bind client")
}

/// Connects a fresh client endpoint to `server` and accepts on the server side.
async fn pair(
    server: &Endpoint,
    addr: SocketAddr,
    profile: &Profile,
) -> (Endpoint, Connection, Connection) {
    let c = client().await;
    let (conn, acc) = tokio::join!(c.connect(addr, profile), server.accept());
    (c, conn.expect("connect"), acc.expect("accept"))
}

/// Writes `payload` as a byte stream from `tx`, reads it on `rx`; returns what was read.
async fn stream(tx: Connection, rx: Connection, payload: Vec<u8>) -> Vec<u8> {
    let writer = tokio::spawn(async move {
        let mut tx = tx;
        tx.write_all(&payload).await.expect("write_all");
        tx.shutdown().await.expect("shutdown");
        tx
    });
    let mut rx = rx;
    let mut got = Vec::new();
    rx.read_to_end(&mut got).await.expect("read_to_end");
    let tx = writer.await.unwrap();
    tx.close().await.expect("graceful close");
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reliable_byte_stream_moves_16_mib_intact() {
    timeout(Duration::from_secs(40), async {
        let (srv, addr) = server().await;
        let (_c, tx, rx) = pair(&srv, addr, &Profile::reliable()).await;
        let payload = data(16 << 20, 1);
        let want = blake3::hash(&payload);
        let got = stream(tx.clone(), rx.clone(), payload).await;
        assert_eq!(got.len(), 16 << 20);
        assert_eq!(blake3::hash(&got), want, "bytes differ");
        let s = tx.stats();
        let r = rx.stats();
        assert!(s.packets_sent > 16 << 20 >> 11, "sender packets {s:?}");
        assert_eq!(s.app_bytes_sent, 16 << 20, "{s:?}");
        assert_eq!(r.app_bytes_delivered, 16 << 20, "{r:?}");
        assert!(r.packets_received > 0 && r.acks_sent > 0, "{r:?}");
        assert!(s.srtt_us > 0, "{s:?}");
        assert_eq!(rx.closed().await, ctp::CloseReason::Graceful);
    })
    .await
    .expect("timed out");
}

/// Writes `pieces` on `tx`'s stream with `write_bytes`, then ends the stream, in a task.
fn write_all_then_finish(tx: &Connection, pieces: Vec<Bytes>) -> tokio::task::JoinHandle<()> {
    let mut tx = tx.clone();
    tokio::spawn(async move {
        for p in pieces {
            tx.write_bytes(p).await.expect("write_bytes");
        }
        tx.shutdown().await.expect("shutdown");
    })
}

/// `write_bytes` hands the buffer itself to the connection; slices of one buffer, each
/// larger than the send buffer, arrive whole and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_bytes_moves_slices_of_a_shared_buffer_intact() {
    timeout(Duration::from_secs(40), async {
        let (srv, addr) = server().await;
        let (_c, tx, rx) = pair(&srv, addr, &Profile::reliable()).await;
        let payload = Bytes::from(data(20 << 20, 7));
        let want = blake3::hash(&payload);
        let ranges = [0..(9 << 20), (9 << 20)..(18 << 20), (18 << 20)..(20 << 20)];
        let writer = write_all_then_finish(&tx, ranges.map(|r| payload.slice(r)).to_vec());
        let mut rx = rx;
        let mut got = Vec::new();
        rx.read_to_end(&mut got).await.expect("read_to_end");
        writer.await.unwrap();
        assert_eq!(got.len(), 20 << 20);
        assert_eq!(blake3::hash(&got), want, "bytes differ");
        assert_eq!(tx.stats().app_bytes_sent, 20 << 20);
        tx.close().await.expect("graceful close");
    })
    .await
    .expect("timed out");
}

/// `read_chunk` hands over received pieces of the stream without copying, none longer than
/// asked, in order, and `None` at the end of the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_chunk_takes_the_stream_in_pieces_of_at_most_the_size_asked() {
    timeout(Duration::from_secs(40), async {
        let (srv, addr) = server().await;
        let (_c, tx, rx) = pair(&srv, addr, &Profile::reliable()).await;
        let payload = Bytes::from(data(5 << 20, 11));
        let writer = write_all_then_finish(&tx, vec![payload.clone()]);
        let (mut got, mut longest) = (Vec::new(), 0);
        while let Some(chunk) = rx.read_chunk(3000).await.expect("read_chunk") {
            assert!(!chunk.is_empty());
            longest = longest.max(chunk.len());
            got.extend_from_slice(&chunk);
        }
        writer.await.unwrap();
        assert!(
            got == payload,
            "{} of {} bytes, or they differ",
            got.len(),
            payload.len()
        );
        assert_eq!(longest, 3000, "pieces are cut to the size asked");
        assert_eq!(rx.read_chunk(3000).await.expect("after the end"), None);
        tx.close().await.expect("graceful close");
    })
    .await
    .expect("timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_keep_boundaries_and_order() {
    timeout(Duration::from_secs(40), async {
        let (srv, addr) = server().await;
        let (_c, tx, rx) = pair(&srv, addr, &Profile::reliable()).await;
        let sizes: Vec<usize> = (0..500u64)
            .map(|i| match i % 10 {
                0 => 0,
                1 => 200_000,
                2 => 1,
                3 => 1452,
                _ => ((i * 7919) % 60_000) as usize,
            })
            .collect();
        let msgs: Vec<Bytes> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| Bytes::from(data(n, i as u64 + 10)))
            .collect();
        let to_send = msgs.clone();
        let sender = tokio::spawn(async move {
            for m in to_send {
                tx.send_msg(m).await.expect("send_msg");
            }
            tx.close().await.expect("close");
        });
        for (i, want) in msgs.iter().enumerate() {
            let got = rx
                .recv_msg()
                .await
                .unwrap_or_else(|e| panic!("message {i}: {e}"));
            assert_eq!(got.len(), want.len(), "message {i} length");
            assert!(got == want, "message {i} differs");
        }
        sender.await.unwrap();
        let end = rx.recv_msg().await.unwrap_err();
        assert_eq!(
            end.close_reason(),
            Some(&ctp::CloseReason::Graceful),
            "{end}"
        );
    })
    .await
    .expect("timed out");
}

fn dgram(id: u32) -> Bytes {
    let mut v = id.to_be_bytes().to_vec();
    v.extend(data(20 + (id as usize * 37) % 3000, id as u64));
    Bytes::from(v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datagram_profile_delivers_intact_at_most_once() {
    timeout(Duration::from_secs(30), async {
        let (srv, addr) = server().await;
        let (_c, tx, rx) = pair(&srv, addr, &Profile::datagram()).await;
        let n = 1000u32;
        let sender = tokio::spawn(async move {
            for id in 0..n {
                tx.send_msg(dgram(id)).await.expect("send_msg");
            }
            tx
        });
        let mut seen = std::collections::HashSet::new();
        // Unreliable: read until nothing has arrived for a while.
        while let Ok(m) = timeout(Duration::from_millis(1500), rx.recv_msg()).await {
            let m = m.expect("recv_msg");
            let id = u32::from_be_bytes(m[..4].try_into().unwrap());
            assert!(id < n, "unknown id {id}");
            assert!(m == dgram(id), "message {id} corrupted");
            assert!(seen.insert(id), "message {id} delivered twice");
        }
        let tx = sender.await.unwrap();
        assert!(!seen.is_empty() && seen.len() <= n as usize);
        assert!(tx.profile_micros() == Profile::datagram().micros);
    })
    .await
    .expect("timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_reason_reaches_the_peer_reader() {
    timeout(Duration::from_secs(20), async {
        let (srv, addr) = server().await;
        let (_c, mut tx, rx) = pair(&srv, addr, &Profile::reliable()).await;
        tx.write_all(&data(100_000, 3)).await.unwrap();
        let reader = tokio::spawn(async move {
            let mut rx = rx;
            let mut sink = Vec::new();
            rx.read_to_end(&mut sink).await
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        tx.abort("disk full");
        let err = reader
            .await
            .unwrap()
            .expect_err("read must fail after the peer aborted");
        assert!(err.to_string().contains("disk full"), "{err}");
        // The aborting side fails too, with its own reason.
        let werr = tx.write_all(b"more").await.unwrap_err();
        assert!(werr.to_string().contains("disk full"), "{werr}");
    })
    .await
    .expect("timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_datagrams_are_dropped_and_counted() {
    timeout(Duration::from_secs(40), async {
        let (srv, addr) = server().await;
        let (_c, tx, rx) = pair(&srv, addr, &Profile::reliable()).await;
        let payload = data(4 << 20, 5);
        let want = blake3::hash(&payload);
        let transfer = tokio::spawn(stream(tx, rx, payload));

        let junk = tokio::net::UdpSocket::bind(LOCAL).await.unwrap();
        let sealed_short = |dcid: u32, i: u64| {
            use ctp_proto::protection::Crc32c;
            let mut p = Vec::new();
            let pn = ctp_proto::wire::truncated::Truncated::whole(i);
            let packet = ctp_proto::packet::ShortPacket::begin(&mut p, dcid, i, pn);
            p.extend_from_slice(&data(40, i));
            packet.seal(&mut p, &mut Crc32c);
            p
        };
        let mut sent = 0u64;
        for i in 0..300u64 {
            let pkt = match i % 3 {
                // Random bytes of random length.
                0 => data(1 + (i as usize * 131) % 1400, i),
                // A valid header for an unknown connection id, sealed correctly.
                1 => sealed_short(0xdead_0000 + i as u32, i),
                // The same, truncated.
                _ => {
                    let mut p = sealed_short(0x1234_5678 + i as u32, i);
                    p.truncate(p.len() / 2);
                    p
                }
            };
            junk.send_to(&pkt, addr).await.unwrap();
            sent += 1;
            if i % 20 == 0 {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        let got = transfer.await.unwrap();
        assert_eq!(blake3::hash(&got), want, "transfer corrupted");
        let st = srv.stats();
        assert!(st.malformed_dropped() > 0, "{st:?}");
        assert!(st.unknown_connection > 0 && st.bad_checksum > 0, "{st:?}");
        assert!(st.malformed_dropped() <= sent, "{st:?}");
    })
    .await
    .expect("timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_to_a_silent_port_times_out_with_a_reason() {
    timeout(Duration::from_secs(20), async {
        // A port bound by a socket that never answers (nothing bound would draw an ICMP
        // port unreachable, which ends the attempt at once: see the next test).
        let silent = std::net::UdpSocket::bind(LOCAL).unwrap();
        let dead = silent.local_addr().unwrap();
        let opts = EndpointOptions {
            handshake_timeout: Duration::from_millis(600),
            ..Default::default()
        };
        let c = Endpoint::bind(LOCAL.parse().unwrap(), opts).await.unwrap();
        let err = c.connect(dead, &Profile::reliable()).await.unwrap_err();
        assert!(matches!(err, ConnectError::Handshake(_)), "{err:?}");
        assert!(err.to_string().contains("handshake timed out"), "{err}");
        // A bad profile is refused before anything is sent.
        let mut bad = Profile::reliable();
        bad.params.max_udp_payload = 100;
        let err = c.connect(dead, &bad).await.unwrap_err();
        assert!(err.to_string().contains("max_udp_payload"), "{err}");
    })
    .await
    .expect("timed out");
}

/// A connection attempt to a loopback port with nothing bound ends as soon as the ICMP
/// port unreachable arrives, with that reason, well before the handshake timeout (IPv4,
/// and IPv6 where the host has it); an established connection of the same endpoint is
/// not disturbed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_to_a_closed_port_fails_at_once_with_the_icmp_reason() {
    const HANDSHAKE: Duration = Duration::from_secs(10);
    timeout(Duration::from_secs(60), async {
        let (srv, addr) = server().await;
        for local in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(probe) = std::net::UdpSocket::bind(local) else {
                eprintln!("skipping {local}: cannot bind it (no IPv6 loopback?)");
                continue;
            };
            // Bound, noted and let go: nothing listens there.
            let closed = probe.local_addr().unwrap();
            drop(probe);
            let opts = EndpointOptions {
                handshake_timeout: HANDSHAKE,
                ..Default::default()
            };
            let c = Endpoint::bind(local.parse().unwrap(), opts).await.unwrap();
            let established = if closed.is_ipv4() {
                let (conn, acc) = tokio::join!(c.connect(addr, &Profile::reliable()), srv.accept());
                Some((conn.expect("connect"), acc.expect("accept")))
            } else {
                None
            };
            let start = std::time::Instant::now();
            let err = c.connect(closed, &Profile::reliable()).await.unwrap_err();
            let took = start.elapsed();
            assert!(matches!(err, ConnectError::Handshake(_)), "{err:?}");
            assert!(
                err.to_string()
                    .contains("port is closed (ICMP port unreachable)"),
                "{local}: {err}"
            );
            assert!(
                took < HANDSHAKE / 2,
                "{local}: took {took:?}, as if the ICMP message went unheard"
            );
            assert!(c.stats().unreachable_ended >= 1, "{:?}", c.stats());
            if let Some((tx, rx)) = established {
                let payload = data(1 << 20, 3);
                let got = stream(tx, rx, payload.clone()).await;
                assert!(got == payload, "the established connection was disturbed");
            }
        }
    })
    .await
    .expect("timed out");
}

/// `unacked_bytes` counts what the peer has not acknowledged, not what was handed over:
/// with a receiver that does not read, what the sender wrote beyond the receiver's buffer
/// stays unacknowledged; once everything was read, nothing is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unacked_bytes_count_what_the_peer_has_not_acknowledged() {
    timeout(Duration::from_secs(60), async {
        let (srv, addr) = server().await;
        let (_c, tx, mut rx) = pair(&srv, addr, &Profile::reliable()).await;
        let total = 64usize << 20;
        let written = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (w, count) = (tx.clone(), written.clone());
        let writer = tokio::spawn(async move {
            let block = Bytes::from(data(1 << 20, 4));
            for _ in 0..total >> 20 {
                w.write_bytes(block.clone()).await.expect("write");
                count.fetch_add(1 << 20, std::sync::atomic::Ordering::Relaxed);
            }
        });
        // The writer fills the send buffer and the receiver's buffer, then waits.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let handed = written.load(std::sync::atomic::Ordering::Relaxed);
        let acked = handed.saturating_sub(tx.unacked_bytes());
        let window = u64::from(rx.params().recv_buffer);
        assert!(handed < total as u64, "the writer was not held back");
        assert!(tx.unacked_bytes() > 0);
        assert!(
            acked <= window + (4 << 20),
            "{acked} bytes counted as acknowledged, the receiver holds at most {window}"
        );
        let mut got = vec![0u8; total];
        rx.read_exact(&mut got).await.expect("read");
        writer.await.unwrap();
        let mut left = tx.unacked_bytes();
        for _ in 0..100 {
            if left == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            left = tx.unacked_bytes();
        }
        assert_eq!(
            left, 0,
            "everything was read, so everything was acknowledged"
        );
    })
    .await
    .expect("timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_clients_share_one_server_endpoint() {
    timeout(Duration::from_secs(50), async {
        let (srv, addr) = server().await;
        let server_task = {
            let srv = srv.clone();
            tokio::spawn(async move {
                let mut echoes = Vec::new();
                for _ in 0..8 {
                    let conn = srv.accept().await.expect("accept");
                    echoes.push(tokio::spawn(async move {
                        let mut conn = conn;
                        let mut got = Vec::new();
                        conn.read_to_end(&mut got).await.expect("server read");
                        // Answer with the digest so the client can check.
                        conn.write_all(blake3::hash(&got).as_bytes()).await.unwrap();
                        conn.shutdown().await.unwrap();
                        got.len()
                    }));
                }
                let mut total = 0;
                for e in echoes {
                    total += e.await.unwrap();
                }
                total
            })
        };
        let mut clients = Vec::new();
        for k in 0..8u64 {
            clients.push(tokio::spawn(async move {
                let c = client().await;
                let mut conn = c
                    .connect(addr, &Profile::reliable())
                    .await
                    .expect("connect");
                let payload = data(1 << 20, 100 + k);
                conn.write_all(&payload).await.unwrap();
                conn.shutdown().await.unwrap();
                let mut digest = Vec::new();
                conn.read_to_end(&mut digest).await.unwrap();
                assert_eq!(&digest[..], blake3::hash(&payload).as_bytes(), "client {k}");
                conn.close().await.expect("close");
            }));
        }
        for c in clients {
            c.await.unwrap();
        }
        assert_eq!(server_task.await.unwrap(), 8 << 20);
        assert_eq!(srv.stats().accepted, 8);
    })
    .await
    .expect("timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_endpoint_fails_pending_operations() {
    timeout(Duration::from_secs(20), async {
        let (srv, addr) = server().await;
        let (c, tx, rx) = pair(&srv, addr, &Profile::reliable()).await;
        let pending = tokio::spawn(async move { rx.recv_msg().await });
        let acceptor = {
            let srv = srv.clone();
            tokio::spawn(async move { srv.accept().await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        srv.close();
        assert!(pending.await.unwrap().is_err());
        assert!(acceptor.await.unwrap().is_none());
        assert!(srv.accept().await.is_none());
        // The client learns that the server went away.
        let t0 = std::time::Instant::now();
        let reason = tx.closed().await;
        eprintln!("closed after {:?}", t0.elapsed());
        assert!(reason.to_string().contains("endpoint closed"), "{reason}");
        drop(c);
    })
    .await
    .expect("timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_every_handle_stops_the_driver_and_frees_the_socket() {
    timeout(Duration::from_secs(20), async {
        let (srv, addr) = server().await;
        let (c, tx, rx) = pair(&srv, addr, &Profile::reliable()).await;
        drop((c, tx, rx, srv));
        // The driver releases the socket once it has stopped; the port can be bound again.
        loop {
            if std::net::UdpSocket::bind(addr).is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the driver did not stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dual_stack_server_talks_to_an_ipv4_client() {
    timeout(Duration::from_secs(20), async {
        // Skip quietly where IPv6 is unavailable.
        let Ok(srv) = Endpoint::bind(
            "[::]:0".parse().unwrap(),
            EndpointOptions {
                accept: true,
                ..Default::default()
            },
        )
        .await
        else {
            return;
        };
        let port = srv.local_addr().unwrap().port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let c = client().await;
        let (conn, acc) = tokio::join!(c.connect(addr, &Profile::reliable()), srv.accept());
        let (conn, acc) = (conn.expect("connect"), acc.expect("accept"));
        assert_eq!(
            acc.remote_addr(),
            c.local_addr().unwrap(),
            "the peer is seen as plain IPv4"
        );
        let payload = data(300_000, 9);
        let got = stream(acc, conn, payload.clone()).await;
        assert!(got == payload);
    })
    .await
    .expect("timed out");
}

#[tokio::test(flavor = "current_thread")]
async fn works_on_a_current_thread_runtime() {
    timeout(Duration::from_secs(30), async {
        let (srv, addr) = server().await;
        let (_c, tx, rx) = pair(&srv, addr, &Profile::reliable()).await;
        let payload = data(2 << 20, 11);
        let got = stream(tx, rx, payload.clone()).await;
        assert!(got == payload);
    })
    .await
    .expect("timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_reports_the_responders_reason() {
    timeout(Duration::from_secs(20), async {
        let (_srv, addr) = server().await;
        let c = client().await;
        let mut odd = Profile::reliable();
        odd.micros = ctp::MicroSet(odd.micros.0 | 1 << 60);
        let err = c.connect(addr, &odd).await.unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("refused by") && text.contains("unknown microprotocol"),
            "{text}"
        );
        // A client that does not accept has no incoming connections.
        assert!(c.accept().await.is_none());
    })
    .await
    .expect("timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udt_messages_with_options_arrive_whole() {
    let opts = |p: &Profile| EndpointOptions {
        accept: true,
        wire: p.wire(),
        ..Default::default()
    };
    let profile = Profile::udt_dgram();
    let srv = Endpoint::bind(LOCAL.parse().unwrap(), opts(&profile))
        .await
        .unwrap();
    let addr = srv.local_addr().unwrap();
    let cli = Endpoint::bind(
        LOCAL.parse().unwrap(),
        EndpointOptions {
            accept: false,
            ..opts(&profile)
        },
    )
    .await
    .unwrap();
    let (tx, rx) = tokio::join!(cli.connect(addr, &profile), srv.accept());
    let (tx, rx) = (tx.unwrap(), rx.unwrap());
    // A generous TTL never expires on loopback; unordered and ordered messages both arrive.
    for i in 0..20u32 {
        let o = ctp::MsgOptions {
            ttl: Some(Duration::from_secs(60)),
            in_order: i % 2 == 0,
        };
        tx.send_msg_with(dgram(i), o).await.unwrap();
    }
    let mut got = Vec::new();
    for _ in 0..20 {
        let m = timeout(Duration::from_secs(30), rx.recv_msg())
            .await
            .expect("timed out")
            .unwrap();
        got.push(m);
    }
    got.sort();
    let mut want: Vec<Bytes> = (0..20).map(dgram).collect();
    want.sort();
    assert_eq!(got, want);
    assert_eq!(tx.stats().messages_abandoned, 0);
}

/// A scratch directory under the system's temporary directory, removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!("ctp-runtime-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("scratch dir");
        Scratch(p)
    }

    fn file(&self, name: &str) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A server and a connected pair speaking `profile` (UDT4 wire for the `udt` profiles).
async fn wired_pair(profile: &Profile) -> (Endpoint, Endpoint, Connection, Connection) {
    let opts = |accept| EndpointOptions {
        accept,
        wire: profile.wire(),
        ..Default::default()
    };
    let srv = Endpoint::bind(LOCAL.parse().unwrap(), opts(true))
        .await
        .unwrap();
    let addr = srv.local_addr().unwrap();
    let cli = Endpoint::bind(LOCAL.parse().unwrap(), opts(false))
        .await
        .unwrap();
    let (tx, rx) = tokio::join!(cli.connect(addr, profile), srv.accept());
    (srv, cli, tx.expect("connect"), rx.expect("accept"))
}

/// Two ranges of one file, sent by two `send_file` calls with offsets (the second range
/// first), land byte-exact in the right places of a pre-sized output file; the bytes
/// outside them stay as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_file_ranges_fill_the_right_places_of_one_file() {
    for profile in [Profile::reliable(), Profile::udt()] {
        timeout(Duration::from_secs(60), async {
            let dir = Scratch::new(&format!("ranges-{}", profile.name));
            let len = (3 << 20) + 12_345;
            let src = data(len, 21);
            std::fs::write(dir.file("src"), &src).unwrap();
            let out = dir.file("out");
            std::fs::write(&out, vec![0xAAu8; len]).unwrap();
            // Range 2 spans several blocks; range 1 is short; a gap stays untouched.
            let r1 = (1000u64, 70_000u64);
            let r2 = (200_000u64, (len as u64) - 200_000);
            let (_srv, _cli, tx, rx) = wired_pair(&profile).await;
            let sender = tokio::spawn(async move {
                let mut f = tokio::fs::File::open(dir.file("src")).await.unwrap();
                let mut off = r2.0;
                let n = tx.send_file(&mut f, &mut off, r2.1).await.expect("range 2");
                assert_eq!((n, off), (r2.1, r2.0 + r2.1));
                let mut off = r1.0;
                let n = tx.send_file(&mut f, &mut off, r1.1).await.expect("range 1");
                assert_eq!((n, off), (r1.1, r1.0 + r1.1));
                tx.close().await.expect("graceful close");
                dir
            });
            let mut f = tokio::fs::OpenOptions::new()
                .write(true)
                .open(&out)
                .await
                .unwrap();
            for (start, size) in [r2, r1] {
                let mut off = start;
                let n = rx.recv_file(&mut f, &mut off, size).await.expect("recv");
                assert_eq!((n, off), (size, start + size), "{}", profile.name);
            }
            f.sync_all().await.unwrap();
            drop(f);
            let _dir = sender.await.unwrap();
            let got = std::fs::read(&out).unwrap();
            let mut want = vec![0xAAu8; len];
            for (start, size) in [r1, r2] {
                let (a, b) = (start as usize, (start + size) as usize);
                want[a..b].copy_from_slice(&src[a..b]);
            }
            assert_eq!(got.len(), len, "the output file was not resized");
            assert_eq!(
                blake3::hash(&got),
                blake3::hash(&want),
                "{}: bytes differ",
                profile.name
            );
        })
        .await
        .expect("timed out");
    }
}

/// A peer that closes before `size` bytes arrived: `recv_file` fails with `StreamEnded`,
/// and the offset stands exactly where the bytes that did arrive end (written in place).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recv_file_that_ends_early_reports_what_was_written() {
    for profile in [Profile::reliable(), Profile::udt()] {
        timeout(Duration::from_secs(30), async {
            let dir = Scratch::new(&format!("early-{}", profile.name));
            let (_srv, _cli, tx, rx) = wired_pair(&profile).await;
            let sent = data(1_500_000, 22);
            let payload = sent.clone();
            let sender = tokio::spawn(async move {
                let mut tx = tx;
                tx.write_all(&payload).await.unwrap();
                tx.close().await.expect("graceful close");
            });
            let out = dir.file("out");
            let mut f = tokio::fs::File::create(&out).await.unwrap();
            let start = 4096u64;
            let mut off = start;
            let err = rx.recv_file(&mut f, &mut off, 4_000_000).await.unwrap_err();
            match err {
                ctp::FileError::StreamEnded { got, size } => {
                    assert_eq!((got, size), (1_500_000, 4_000_000), "{}", profile.name)
                }
                e => panic!("{}: unexpected {e}", profile.name),
            }
            assert_eq!(off, start + 1_500_000, "{}", profile.name);
            sender.await.unwrap();
            drop(f);
            let got = std::fs::read(&out).unwrap();
            assert_eq!(got.len() as u64, off);
            assert!(got[..start as usize].iter().all(|&b| b == 0));
            assert!(got[start as usize..] == sent[..], "{}", profile.name);
        })
        .await
        .expect("timed out");
    }
}

/// A range the file does not hold is refused before anything moves: the offset, the file
/// position and the connection are untouched, and the connection still works afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_file_refuses_a_range_outside_the_file() {
    timeout(Duration::from_secs(30), async {
        let (_srv, _cli, tx, rx) = wired_pair(&Profile::reliable()).await;
        let body = data(10_000, 23);
        let mut f = std::io::Cursor::new(body.clone());
        f.set_position(77);
        let mut off = 10_001;
        let e = tx.send_file(&mut f, &mut off, 0).await.unwrap_err();
        assert!(
            matches!(
                e,
                ctp::FileError::OffsetPastEnd {
                    offset: 10_001,
                    len: 10_000
                }
            ),
            "{e}"
        );
        assert_eq!((off, f.position()), (10_001, 77));
        let mut off = 9_000;
        let e = tx.send_file(&mut f, &mut off, 1_001).await.unwrap_err();
        assert!(
            matches!(
                e,
                ctp::FileError::RangePastEnd {
                    offset: 9_000,
                    size: 1_001,
                    len: 10_000
                }
            ),
            "{e}"
        );
        assert_eq!((off, f.position()), (9_000, 77));
        assert_eq!(tx.stats().app_bytes_sent, 0, "nothing was sent");
        // The whole tail from the same offset is fine, and is all the peer receives.
        assert_eq!(tx.send_file(&mut f, &mut off, 1_000).await.unwrap(), 1_000);
        assert_eq!(off, 10_000);
        let got = stream(tx, rx, Vec::new()).await;
        assert!(got == body[9_000..]);
    })
    .await
    .expect("timed out");
}

/// `accept` on a client endpoint answers at once instead of waiting forever; a server bound
/// with `EndpointOptions::server()` accepts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_needs_a_server_endpoint_and_says_so_at_once() {
    let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointOptions::default())
        .await
        .unwrap();
    let answered = timeout(Duration::from_secs(5), client.accept()).await;
    assert!(
        matches!(answered, Ok(None)),
        "a client endpoint accepts nothing"
    );
    let server = Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointOptions::server())
        .await
        .unwrap();
    let addr = server.local_addr().unwrap();
    let dialing = client.connect(addr, &Profile::reliable());
    let (conn, accepted) = tokio::join!(dialing, timeout(Duration::from_secs(10), server.accept()));
    assert!(conn.is_ok(), "the client connects");
    assert!(matches!(accepted, Ok(Some(_))), "the server accepts it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_sends_from_the_local_address_it_was_given() {
    // A socket on the unspecified address, told it may send from 127.0.0.2: the server
    // sees the connection come from there (the source chosen per datagram), and data flows.
    let (server, addr) = server().await;
    let opts = EndpointOptions {
        local_ips: vec!["127.0.0.2".parse().unwrap()],
        ..Default::default()
    };
    let c = Endpoint::bind("0.0.0.0:0".parse().unwrap(), opts)
        .await
        .expect("bind on the unspecified address");
    let (conn, acc) = timeout(Duration::from_secs(20), async {
        tokio::join!(c.connect(addr, &Profile::reliable()), server.accept())
    })
    .await
    .expect("connects in time");
    let (conn, acc) = (conn.expect("connect"), acc.expect("accept"));
    assert_eq!(acc.remote_addr().ip().to_string(), "127.0.0.2");
    let payload = data(1 << 20, 7);
    let got = timeout(Duration::from_secs(60), stream(conn, acc, payload.clone()))
        .await
        .expect("in time");
    assert!(got == payload);

    // Bound to one address, the socket cannot send from others: refused with the reason.
    let opts = EndpointOptions {
        local_ips: vec!["127.0.0.2".parse().unwrap()],
        ..Default::default()
    };
    let Err(err) = Endpoint::bind(LOCAL.parse().unwrap(), opts).await else {
        panic!("a socket bound to 127.0.0.1 was given other addresses to send from");
    };
    assert!(err.to_string().contains("unspecified address"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_names_its_service_and_its_answer_comes_back_on_a_reply_service() {
    let (server, addr) = server().await;
    let (_c, conn, acc) = pair(&server, addr, &Profile::reliable()).await;
    // A responder that answers each request on a stream of its own, for the reply
    // service the request named; a request it dislikes is reset.
    let responder = tokio::spawn(async move {
        for _ in 0..3 {
            let mut req = acc.accept_stream().await.expect("accepts");
            assert_eq!(
                req.service(),
                Some(80),
                "the service the request was opened for"
            );
            let mut body = Vec::new();
            req.read_to_end(&mut body).await.expect("reads");
            let reply_to = u64::from_le_bytes(body[..8].try_into().expect("8 bytes"));
            let answer = acc
                .open_stream_for(StreamKind::Unidirectional, 0, reply_to)
                .expect("opens");
            if body[8..] == *b"bad" {
                answer.reset(7).expect("resets");
            } else {
                let mut text = b"re: ".to_vec();
                text.extend_from_slice(&body[8..]);
                answer.write_last(&text).await.expect("answers");
            }
        }
    });
    let mut answers = std::collections::BTreeMap::new();
    for (reply_to, what) in [(1001u64, &b"one"[..]), (1002, b"bad"), (1003, b"three")] {
        let req = conn
            .open_stream_for(StreamKind::Unidirectional, 0, 80)
            .expect("opens");
        let mut body = reply_to.to_le_bytes().to_vec();
        body.extend_from_slice(what);
        req.write_last(&body).await.expect("sends");
        let mut back = timeout(Duration::from_secs(20), conn.accept_stream())
            .await
            .expect("in time")
            .expect("an answer");
        let mut text = Vec::new();
        let read = back.read_to_end(&mut text).await;
        answers.insert(
            back.service().expect("names its service"),
            (read.map_err(|e| e.kind()), text),
        );
    }
    responder.await.expect("responder");
    assert_eq!(answers[&1001], (Ok(3 + 4), b"re: one".to_vec()));
    assert_eq!(answers[&1002].0, Err(std::io::ErrorKind::ConnectionReset));
    assert_eq!(answers[&1003], (Ok(5 + 4), b"re: three".to_vec()));
}

/// A request on a stream of its own and its answer on another (the `stream_rtt` bench's
/// exchange) cost one packet each way: opening, data and end travel together, and the
/// acknowledgement of each rides on the next packet the other way instead of an ACK-only
/// packet of its own. Timer-driven packets (a delayed acknowledgement when the runtime is
/// descheduled for long) are allowed a margin; an ACK-only packet per data packet is not.
#[tokio::test(flavor = "current_thread")]
async fn a_request_and_its_answer_cost_one_packet_each_way() {
    const EXCHANGES: u64 = 200;
    let (server, addr) = server().await;
    let (_c, conn, acc) = pair(&server, addr, &Profile::reliable()).await;
    let exchange = |conn: Connection, acc: Connection| async move {
        let req = conn
            .open_stream_for(StreamKind::Unidirectional, 0, 1)
            .expect("opens");
        req.write_last(&[7u8; 64]).await.expect("sends");
        let mut got = acc.accept_stream().await.expect("accepts");
        let mut buf = Vec::new();
        got.read_to_end(&mut buf).await.expect("reads");
        let answer = acc
            .open_stream_for(StreamKind::Unidirectional, 0, 2)
            .expect("opens");
        answer.write_last(&buf).await.expect("answers");
        let mut back = conn.accept_stream().await.expect("accepts");
        buf.clear();
        back.read_to_end(&mut buf).await.expect("reads");
        assert_eq!(buf, [7u8; 64]);
    };
    // The first exchanges settle the connection (handshake leftovers, first RTT samples).
    for _ in 0..10 {
        exchange(conn.clone(), acc.clone()).await;
    }
    let (c0, a0) = (conn.stats(), acc.stats());
    timeout(Duration::from_secs(60), async {
        for _ in 0..EXCHANGES {
            exchange(conn.clone(), acc.clone()).await;
        }
    })
    .await
    .expect("in time");
    let (c1, a1) = (conn.stats(), acc.stats());
    for (who, sent) in [
        ("client", c1.packets_sent - c0.packets_sent),
        ("server", a1.packets_sent - a0.packets_sent),
    ] {
        assert!(
            (EXCHANGES..EXCHANGES + EXCHANGES / 4).contains(&sent),
            "{who} sent {sent} packets for {EXCHANGES} exchanges"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_carry_their_own_bytes_beside_the_connection_stream() {
    let (server, addr) = server().await;
    let (_c, conn, acc) = pair(&server, addr, &Profile::reliable()).await;
    let payloads: Vec<Vec<u8>> = (0..3)
        .map(|i| data(300_000 + i * 1000, 40 + i as u64))
        .collect();
    let writer = {
        let conn = conn.clone();
        let payloads = payloads.clone();
        tokio::spawn(async move {
            for (i, p) in payloads.iter().enumerate() {
                let kind = if i == 2 {
                    StreamKind::Unidirectional
                } else {
                    StreamKind::Bidirectional
                };
                let mut s = conn.open_stream(kind, i as u8).expect("opens");
                assert_eq!(s.id(), [4, 8, 2][i]);
                s.write_all(p).await.expect("writes");
                s.shutdown().await.expect("finishes");
            }
            let mut c = conn.clone();
            c.write_all(b"and the connection's own stream")
                .await
                .expect("writes");
            c.shutdown().await.expect("finishes");
        })
    };
    let reader = tokio::spawn(async move {
        let mut got = std::collections::BTreeMap::new();
        for _ in 0..3 {
            let mut s = acc.accept_stream().await.expect("accepts");
            let mut buf = Vec::new();
            s.read_to_end(&mut buf).await.expect("reads");
            got.insert(s.id(), buf);
        }
        let mut own = Vec::new();
        let mut c = acc.clone();
        c.read_to_end(&mut own).await.expect("reads");
        (got, own)
    });
    let (got, own) = timeout(Duration::from_secs(60), reader)
        .await
        .expect("in time")
        .expect("reader");
    writer.await.expect("writer");
    assert_eq!(own, b"and the connection's own stream");
    for (i, p) in payloads.iter().enumerate() {
        let id = [4, 8, 2][i];
        assert!(got[&id] == *p, "stream {id} changed");
    }
    // A profile without ordered, reliable delivery has no streams; the error says why.
    let (_c2, dconn, _dacc) = pair(&server, addr, &Profile::datagram()).await;
    let err = dconn
        .open_stream(StreamKind::Bidirectional, 0)
        .expect_err("refused");
    assert!(err.to_string().contains("ordered, reliable"), "{err}");
}

/// A sender whose receiver restarts mid-transfer — a fresh endpoint behind the same
/// address, knowing no connection — is told that the peer forgot the connection (its
/// packets draw NOSTATE, echoing their MAC), long before the 30 s idle timeout. The
/// "address" is a relay the test controls, switched from the old receiver to the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_is_told_the_peer_forgot_when_its_receiver_restarts() {
    use std::sync::{Arc, Mutex};
    timeout(Duration::from_secs(20), async {
        let (old, old_addr) = server().await;
        let (new, new_addr) = server().await;
        let front = Arc::new(tokio::net::UdpSocket::bind(LOCAL).await.unwrap());
        let back = Arc::new(tokio::net::UdpSocket::bind(LOCAL).await.unwrap());
        let relay_addr = front.local_addr().unwrap();
        let target = Arc::new(Mutex::new(old_addr));
        let sender = Arc::new(Mutex::new(None::<SocketAddr>));
        let forward = {
            let (front, back, target, sender) =
                (front.clone(), back.clone(), target.clone(), sender.clone());
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                while let Ok((n, from)) = front.recv_from(&mut buf).await {
                    *sender.lock().unwrap() = Some(from);
                    let to = *target.lock().unwrap();
                    let _ = back.send_to(&buf[..n], to).await;
                }
            })
        };
        let backward = {
            let (front, back, target, sender) =
                (front.clone(), back.clone(), target.clone(), sender.clone());
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                while let Ok((n, from)) = back.recv_from(&mut buf).await {
                    let to = *sender.lock().unwrap();
                    // Only the current receiver is heard (the old one is gone).
                    let current = from == *target.lock().unwrap();
                    if let (true, Some(to)) = (current, to) {
                        let _ = front.send_to(&buf[..n], to).await;
                    }
                }
            })
        };
        let c = client().await;
        let (tx, rx) = tokio::join!(c.connect(relay_addr, &Profile::reliable()), old.accept());
        let (mut tx, mut rx) = (tx.expect("connect"), rx.expect("accept"));
        let writer = tokio::spawn(async move {
            let chunk = data(1 << 16, 9);
            while tx.write_all(&chunk).await.is_ok() {}
            tx
        });
        let mut got = vec![0u8; 1 << 20];
        rx.read_exact(&mut got).await.expect("the first megabyte");
        // The receiver restarts: everything now reaches an endpoint that never heard of
        // the connection.
        *target.lock().unwrap() = new_addr;
        let tx = writer.await.unwrap();
        assert_eq!(tx.closed().await, ctp::CloseReason::PeerForgot);
        assert!(new.stats().nostate_sent >= 1);
        assert!(c.stats().nostate_honoured >= 1);
        forward.abort();
        backward.abort();
        drop((old, rx));
    })
    .await
    .expect("the sender was not told (an idle timeout takes 30 s)");
}
