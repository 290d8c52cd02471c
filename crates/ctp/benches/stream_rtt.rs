//! A request and its answer on streams of their own, on loopback: the client opens a
//! stream, writes one small message and finishes it (one packet), the server accepts it,
//! reads it and answers the same way on a stream of its own — against a raw UDP
//! ping-pong of the same message between two sockets, the floor any transport over UDP
//! stands on. Both run on one current-thread runtime, so the figure is latency, not
//! parallelism. The difference is what ctp's streams cost per request and answer (CUSP's
//! stream per action; goal: within 20 µs of the UDP ping-pong).
//!
//! `cargo bench -p ctp --bench stream_rtt`
//!
//! Measured on a 2-vCPU AMD EPYC VM, Debian 12 (docs/bench.md, "Request and answer on
//! streams"): UDP ping-pong 6.9 µs; ctp 24.4 µs before the driver's changes of 2026-11-26,
//! 20.5 µs after (17.5 → 13.6 µs above UDP), one packet each way.

use criterion::{criterion_group, criterion_main, Criterion};
use ctp::{Connection, Endpoint, EndpointOptions, Profile, StreamKind};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::net::UdpSocket;
use tokio::runtime::Runtime;

const MESSAGE: usize = 64;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A UDP echo socket and a client socket connected to it.
async fn udp_pair() -> (UdpSocket, UdpSocket) {
    let echo = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
    let client = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
    client
        .connect(echo.local_addr().expect("addr"))
        .await
        .expect("connect");
    echo.connect(client.local_addr().expect("addr"))
        .await
        .expect("connect");
    (echo, client)
}

async fn udp_ping_pong(echo: &UdpSocket, client: &UdpSocket, n: u64) -> Duration {
    let msg = [7u8; MESSAGE];
    let mut buf = [0u8; 2048];
    let start = Instant::now();
    for _ in 0..n {
        client.send(&msg).await.expect("send");
        let got = echo.recv(&mut buf).await.expect("recv");
        echo.send(&buf[..got]).await.expect("echo");
        client.recv(&mut buf).await.expect("recv");
    }
    start.elapsed()
}

/// Two endpoints and an established secure `reliable` connection between them.
async fn ctp_pair() -> (Endpoint, Endpoint, Connection, Connection) {
    let local = "127.0.0.1:0".parse().expect("addr");
    let server = Endpoint::bind(
        local,
        EndpointOptions {
            accept: true,
            ..Default::default()
        },
    )
    .await
    .expect("bind");
    let client = Endpoint::bind(local, EndpointOptions::default())
        .await
        .expect("bind");
    let addr = server.local_addr().expect("addr");
    let (conn, acc) = tokio::join!(client.connect(addr, &Profile::reliable()), server.accept());
    (server, client, conn.expect("connect"), acc.expect("accept"))
}

/// One request on a fresh stream and its answer on another, `n` times.
async fn stream_request_reply(conn: &Connection, acc: &Connection, n: u64) -> Duration {
    let msg = [7u8; MESSAGE];
    let mut buf = Vec::with_capacity(MESSAGE);
    let start = Instant::now();
    for _ in 0..n {
        let req = conn
            .open_stream_for(StreamKind::Unidirectional, 0, 1)
            .expect("opens");
        req.write_last(&msg).await.expect("sends");
        let mut got = acc.accept_stream().await.expect("accepts");
        buf.clear();
        got.read_to_end(&mut buf).await.expect("reads");
        let answer = acc
            .open_stream_for(StreamKind::Unidirectional, 0, 2)
            .expect("opens");
        answer.write_last(&buf).await.expect("answers");
        let mut back = conn.accept_stream().await.expect("accepts");
        buf.clear();
        back.read_to_end(&mut buf).await.expect("reads");
    }
    start.elapsed()
}

fn bench(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("request and answer, 64 bytes, loopback");
    let (echo, client) = rt.block_on(udp_pair());
    g.bench_function("raw UDP ping-pong", |b| {
        b.iter_custom(|n| rt.block_on(udp_ping_pong(&echo, &client, n)))
    });
    let (_server, _client, conn, acc) = rt.block_on(ctp_pair());
    g.bench_function("ctp: a stream each way (secure)", |b| {
        b.iter_custom(|n| rt.block_on(stream_request_reply(&conn, &acc, n)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
