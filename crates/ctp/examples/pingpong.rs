//! The CTP paper's per-configuration experiment on loopback, measured in one run next to raw
//! UDP and TCP (a benchmark, not a test):
//!
//! - latency: 64-byte ping-pong, median and 99th percentile round trip, and the overhead
//!   over raw UDP;
//! - bandwidth: one direction, 1200-byte messages sent as fast as each transport takes them;
//!   goodput is the bytes delivered over the time from the first send to the last delivery,
//!   and `delivered` says how much of what was sent arrived (an unreliable configuration
//!   without congestion control loses what the receiver cannot keep up with).
//!
//! `cargo run --release -p ctp --example pingpong -- [rounds] [messages]` (defaults: 20000
//! rounds, 100000 messages).

use bytes::Bytes;
use ctp::{Endpoint, EndpointOptions, Profile};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

const SIZE: usize = 64;
/// Message size of the bandwidth runs.
const BULK: usize = 1200;
/// A receiver that hears nothing for this long takes the sender to be done.
const IDLE: Duration = Duration::from_millis(500);

/// What one bandwidth run delivered.
struct Bandwidth {
    delivered: u64,
    elapsed: Duration,
}

impl Bandwidth {
    fn mbps(&self) -> f64 {
        self.delivered as f64 * 8.0 / self.elapsed.as_secs_f64() / 1e6
    }
}

/// Counts what `recv` delivers until `total` bytes arrived or nothing came for [`IDLE`];
/// returns the bytes and the instant of the last delivery.
async fn count_until_idle<F, Fut>(total: u64, mut recv: F) -> (u64, Instant)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<usize>>,
{
    let mut got = 0u64;
    let mut last = Instant::now();
    while got < total {
        match tokio::time::timeout(IDLE, recv()).await {
            Ok(Some(n)) => {
                got += n as u64;
                last = Instant::now();
            }
            _ => break,
        }
    }
    (got, last)
}

/// Raw UDP with one blocking socket per OS thread, so sender and receiver each have a core
/// (as `iperf3 -u` does), and socket buffers as large as ctp's runtime asks for; no flow
/// control, so what the receiver cannot keep up with is lost.
fn udp_bandwidth(messages: usize) -> Bandwidth {
    let bind = || {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let s2 = socket2::SockRef::from(&s);
        let _ = s2.set_recv_buffer_size(8 << 20);
        let _ = s2.set_send_buffer_size(8 << 20);
        s
    };
    let (a, b) = (bind(), bind());
    let to = b.local_addr().expect("addr");
    b.set_read_timeout(Some(IDLE)).expect("timeout");
    let total = (messages * BULK) as u64;
    let rx = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let (mut got, mut last) = (0u64, Instant::now());
        while got < total {
            match b.recv_from(&mut buf) {
                Ok((n, _)) => {
                    got += n as u64;
                    last = Instant::now();
                }
                Err(_) => break,
            }
        }
        (got, last)
    });
    let msg = [7u8; BULK];
    let start = Instant::now();
    for _ in 0..messages {
        a.send_to(&msg, to).expect("send");
    }
    let (delivered, last) = rx.join().expect("receiver");
    Bandwidth {
        delivered,
        elapsed: last.saturating_duration_since(start),
    }
}

async fn tcp_bandwidth(messages: usize) -> Bandwidth {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("addr");
    let total = (messages * BULK) as u64;
    let rx = tokio::spawn(async move {
        let (mut s, _) = l.accept().await.expect("accept");
        let mut buf = vec![0u8; 1 << 16];
        let mut got = 0u64;
        while let Ok(n) = s.read(&mut buf).await {
            if n == 0 {
                break;
            }
            got += n as u64;
        }
        (got, Instant::now())
    });
    let mut c = TcpStream::connect(addr).await.expect("connect");
    let chunk = vec![7u8; BULK * 50];
    let start = Instant::now();
    let mut left = total as usize;
    while left > 0 {
        let n = left.min(chunk.len());
        c.write_all(&chunk[..n]).await.expect("write");
        left -= n;
    }
    drop(c);
    let (delivered, last) = rx.await.expect("receiver");
    Bandwidth {
        delivered,
        elapsed: last.saturating_duration_since(start),
    }
}

async fn ctp_pair(profile: &Profile) -> (ctp::Connection, ctp::Connection) {
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
    let accepted = tokio::spawn(async move { server.accept().await.expect("accept") });
    let c = client.connect(addr, profile).await.expect("connect");
    (c, accepted.await.expect("accept task"))
}

async fn ctp_bandwidth(profile: Profile, messages: usize) -> Bandwidth {
    let (c, s) = ctp_pair(&profile).await;
    let total = (messages * BULK) as u64;
    let rx = tokio::spawn(async move {
        let s = &s;
        count_until_idle(total, || async { s.recv_msg().await.ok().map(|m| m.len()) }).await
    });
    let msg = Bytes::from(vec![7u8; BULK]);
    let start = Instant::now();
    for _ in 0..messages {
        if c.send_msg(msg.clone()).await.is_err() {
            break;
        }
    }
    let (delivered, last) = rx.await.expect("receiver");
    c.abort("done");
    Bandwidth {
        delivered,
        elapsed: last.saturating_duration_since(start),
    }
}

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
    let (c, s) = ctp_pair(&profile).await;
    tokio::spawn(async move {
        while let Ok(m) = s.recv_msg().await {
            if s.send_msg(m).await.is_err() {
                break;
            }
        }
    });
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

const CONFIGURATIONS: [&str; 7] = [
    "ctp-minimal",
    "ctp-lossy-fifo",
    "ctp-video",
    "ctp-audio",
    "datagram",
    "ctp-bulk",
    "reliable",
];

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let messages: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    println!("latency: {rounds} round trips of {SIZE} bytes");
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
    for name in CONFIGURATIONS {
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
    let total = (messages * BULK) as u64;
    println!("\nbandwidth: {messages} messages of {BULK} bytes, one direction");
    println!(
        "{:<16} {:>10} {:>10} {:>12}",
        "transport", "Mb/s", "delivered", "vs raw UDP"
    );
    let raw = udp_bandwidth(messages);
    let row = |name: &str, b: &Bandwidth, vs: Option<f64>| {
        println!(
            "{:<16} {:>10.0} {:>9.1}% {:>12}",
            name,
            b.mbps(),
            b.delivered as f64 * 100.0 / total as f64,
            vs.map_or("—".to_string(), |r| format!("{r:.2}×"))
        );
    };
    row("raw UDP", &raw, None);
    let t = tcp_bandwidth(messages).await;
    row("TCP", &t, Some(t.mbps() / raw.mbps()));
    for name in CONFIGURATIONS {
        let prof = Profile::builtin(name).expect("builtin");
        let b = ctp_bandwidth(prof, messages).await;
        row(name, &b, Some(b.mbps() / raw.mbps()));
    }
}
