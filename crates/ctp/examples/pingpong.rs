//! Round-trip latency on loopback: 64-byte ping-pong over raw UDP, TCP and each ctp profile,
//! measured in one run (a benchmark for the CTP experiments, not a test).
//!
//! `cargo run --release -p ctp --example pingpong -- [rounds]` (default 20000 rounds).
//! Reports the median and 99th percentile round trip and ctp's overhead over raw UDP.

use bytes::Bytes;
use ctp::{Endpoint, EndpointOptions, Profile};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

const SIZE: usize = 64;

fn summarize(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (us(v[v.len() / 2]), us(v[v.len() * 99 / 100]))
}

async fn udp(rounds: usize) -> Vec<Duration> {
    let a = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
    let b = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
    let (aa, ba) = (a.local_addr().expect("addr"), b.local_addr().expect("addr"));
    tokio::spawn(async move {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = b.recv_from(&mut buf).await {
            let _ = b.send_to(&buf[..n], from).await;
        }
    });
    let _ = aa;
    let mut buf = [0u8; 2048];
    let msg = [7u8; SIZE];
    let mut out = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        a.send_to(&msg, ba).await.expect("send");
        a.recv_from(&mut buf).await.expect("recv");
        out.push(t.elapsed());
    }
    out
}

async fn tcp(rounds: usize) -> Vec<Duration> {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.expect("accept");
        s.set_nodelay(true).expect("nodelay");
        let mut buf = [0u8; SIZE];
        while s.read_exact(&mut buf).await.is_ok() {
            if s.write_all(&buf).await.is_err() {
                break;
            }
        }
    });
    let mut c = TcpStream::connect(addr).await.expect("connect");
    c.set_nodelay(true).expect("nodelay");
    let mut buf = [0u8; SIZE];
    let mut out = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        c.write_all(&[7u8; SIZE]).await.expect("write");
        c.read_exact(&mut buf).await.expect("read");
        out.push(t.elapsed());
    }
    out
}

async fn ctp_profile(profile: Profile, rounds: usize) -> Vec<Duration> {
    let server = Endpoint::bind(
        "127.0.0.1:0".parse().expect("literal"),
        EndpointOptions {
            accept: true,
            ..Default::default()
        },
    )
    .await
    .expect("bind");
    let addr = server.local_addr().expect("addr");
    let client = Endpoint::bind(
        "127.0.0.1:0".parse().expect("literal"),
        EndpointOptions::default(),
    )
    .await
    .expect("bind");
    tokio::spawn(async move {
        let c = server.accept().await.expect("accept");
        while let Ok(m) = c.recv_msg().await {
            if c.send_msg(m).await.is_err() {
                break;
            }
        }
    });
    let c = client.connect(addr, &profile).await.expect("connect");
    let msg = Bytes::from(vec![7u8; SIZE]);
    let mut out = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        c.send_msg(msg.clone()).await.expect("send");
        c.recv_msg().await.expect("recv");
        out.push(t.elapsed());
    }
    out
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);
    let (udp_med, udp_p99) = summarize(udp(rounds).await);
    println!(
        "{:<16} {:>10} {:>10} {:>14}",
        "transport", "median µs", "p99 µs", "over raw UDP"
    );
    println!(
        "{:<16} {:>10.1} {:>10.1} {:>14}",
        "raw UDP", udp_med, udp_p99, "—"
    );
    let (m, p) = summarize(tcp(rounds).await);
    println!(
        "{:<16} {:>10.1} {:>10.1} {:>+13.1}µs",
        "TCP (nodelay)",
        m,
        p,
        m - udp_med
    );
    for name in [
        "ctp-minimal",
        "ctp-lossy-fifo",
        "ctp-video",
        "ctp-audio",
        "datagram",
        "ctp-bulk",
        "reliable",
    ] {
        let prof = Profile::builtin(name).expect("builtin");
        let (m, p) = summarize(ctp_profile(prof, rounds).await);
        println!(
            "{:<16} {:>10.1} {:>10.1} {:>+13.1}µs",
            name,
            m,
            p,
            m - udp_med
        );
    }
}
