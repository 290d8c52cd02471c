//! `ctp bench --flood`: what an attacker with many idle connections and a handshake flood
//! takes from a legitimate transfer, on loopback.
//!
//! The receiver is a child process (this binary with the hidden `--flood-server`), so that
//! its memory is its own: its RSS is read before, during and after the load. The bench
//! times one transfer unloaded, then opens `--flood-idle` idle connections from 16 loopback
//! addresses (each within the per-address limit), tries 300 more from one address (the
//! limit refuses what is beyond it), floods the receiver with handshake requests at
//! `--flood-pps` from another address, and times the same transfer again.

use crate::failure::Failure;
use crate::output::outln;
use anyhow::{anyhow, Context};
use bytes::Bytes;
use ctp::{Connection, Endpoint, EndpointOptions, Profile};
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};

/// Loopback addresses the idle connections come from.
const IDLE_SOURCES: usize = 16;
/// Connections tried from one address, beyond the default per-address limit.
const ONE_ADDRESS_TRIES: usize = 300;
/// The flood's source address.
const FLOOD_SOURCE: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 200);
/// Size of the blocks the legitimate sender writes.
const BLOCK: usize = 1 << 20;

/// What the flood bench measured.
#[derive(Debug, Serialize)]
pub struct FloodReport {
    /// Bytes each legitimate transfer moved.
    pub bytes: u64,
    /// Goodput of the transfer with the receiver unloaded, Mb/s.
    pub unloaded_mbps: f64,
    /// Goodput of the same transfer under the load, Mb/s.
    pub loaded_mbps: f64,
    /// Loaded over unloaded goodput.
    pub ratio: f64,
    /// Idle connections established, from 16 addresses.
    pub idle_connections: usize,
    /// Connections the receiver accepted out of the 300 tried from one address.
    pub one_address_accepted: usize,
    /// Handshake requests sent per second while the loaded transfer ran.
    pub flood_pps: f64,
    /// Receiver's resident memory before the load, KiB.
    pub rss_before_kib: u64,
    /// Receiver's resident memory holding the idle connections, before the loaded
    /// transfer, KiB.
    pub rss_idle_kib: u64,
    /// Receiver's resident memory right after the loaded transfer, the load still on, KiB.
    pub rss_during_kib: u64,
    /// Receiver's resident memory once the load was gone, KiB.
    pub rss_after_kib: u64,
    /// (idle − before) / connections held, bytes.
    pub rss_per_connection_bytes: u64,
}

/// Runs the flood bench.
pub async fn run(
    bytes: u64,
    idle: usize,
    pps: u32,
    timeout: Duration,
    json: bool,
) -> Result<(), Failure> {
    let exe = std::env::current_exe().context("locating the ctp binary")?;
    let mut child = tokio::process::Command::new(exe)
        .args(["bench", "--flood-server", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting the receiver")?;
    let pid = child
        .id()
        .ok_or_else(|| anyhow!("the receiver exited at once"))?;
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let server: SocketAddr = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .context("the receiver did not start")?
        .context("reading the receiver's address")?
        .ok_or_else(|| anyhow!("the receiver exited before listening"))?
        .parse()
        .context("the receiver's address")?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss_before = rss_kib(pid)?;
    let block = crate::perf::generated_block();

    let unloaded = timed_transfer(server, bytes, &block, timeout).await?;
    if !json {
        eprintln!("ctp: unloaded: {unloaded:.0} Mb/s; opening {idle} idle connections");
    }
    let (idle_eps, idle_conns) = open_idle(server, idle).await?;
    let (one_ep, one_conns) = open_from(
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 100)), 0),
        server,
        ONE_ADDRESS_TRIES,
    )
    .await?;
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let flood = {
        let (stop, sent) = (stop.clone(), sent.clone());
        std::thread::spawn(move || flood_inits(server, pps, &stop, &sent))
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_idle = rss_kib(pid)?;
    let sent_before = sent.load(Ordering::Relaxed);
    let flood_start = Instant::now();
    let loaded = timed_transfer(server, bytes, &block, timeout).await;
    let rss_during = rss_kib(pid)?;
    let flood_pps =
        (sent.load(Ordering::Relaxed) - sent_before) as f64 / flood_start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let _ = flood.join();
    let loaded = loaded?;
    let held = idle_conns.len() + one_conns.len();
    let report = FloodReport {
        bytes,
        unloaded_mbps: unloaded,
        loaded_mbps: loaded,
        ratio: loaded / unloaded,
        idle_connections: idle_conns.len(),
        one_address_accepted: one_conns.len(),
        flood_pps,
        rss_before_kib: rss_before,
        rss_idle_kib: rss_idle,
        rss_during_kib: rss_during,
        rss_after_kib: 0,
        rss_per_connection_bytes: (rss_idle.saturating_sub(rss_before) * 1024) / held.max(1) as u64,
    };
    for c in idle_conns.iter().chain(&one_conns) {
        c.abort("bench over");
    }
    drop((idle_conns, one_conns));
    tokio::time::sleep(Duration::from_millis(300)).await;
    idle_eps.iter().chain([&one_ep]).for_each(Endpoint::close);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let report = FloodReport {
        rss_after_kib: rss_kib(pid)?,
        ..report
    };
    let _ = child.kill().await;
    print(&report, json);
    Ok(())
}

fn print(r: &FloodReport, json: bool) {
    if json {
        outln!("{}", serde_json::to_string_pretty(r).expect("serialisable"));
        return;
    }
    outln!(
        "transfer of {}: unloaded {:.0} Mb/s, under load {:.0} Mb/s ({:.0} %)",
        crate::summary::human_bytes(r.bytes),
        r.unloaded_mbps,
        r.loaded_mbps,
        100.0 * r.ratio
    );
    outln!(
        "load: {} idle connections from {IDLE_SOURCES} addresses, {} of {ONE_ADDRESS_TRIES} accepted from one address, {:.0} handshake requests/s",
        r.idle_connections,
        r.one_address_accepted,
        r.flood_pps
    );
    outln!(
        "receiver RSS: before {} KiB, with the idle connections {} KiB, after the loaded transfer {} KiB, load gone {} KiB; {} bytes per connection held",
        r.rss_before_kib,
        r.rss_idle_kib,
        r.rss_during_kib,
        r.rss_after_kib,
        r.rss_per_connection_bytes
    );
}

/// Sends `bytes` generated bytes to `server` from a fresh endpoint; Mb/s to the close.
async fn timed_transfer(
    server: SocketAddr,
    bytes: u64,
    block: &Bytes,
    timeout: Duration,
) -> Result<f64, Failure> {
    let ep = Endpoint::bind("127.0.0.1:0".parse().expect("literal"), options())
        .await
        .context("cannot open a UDP socket")?;
    let start = Instant::now();
    let run = async {
        let conn = ep
            .connect(server, &Profile::reliable())
            .await
            .map_err(|e| anyhow!("cannot connect to the receiver: {e}"))?;
        let mut sent = 0u64;
        while sent < bytes {
            let n = (bytes - sent).min(BLOCK as u64) as usize;
            conn.write_bytes(block.slice(..n))
                .await
                .with_context(|| format!("sending failed after {sent} bytes"))?;
            sent += n as u64;
        }
        conn.finish().await.context("finishing the stream")?;
        conn.close().await.context("closing")?;
        anyhow::Ok(())
    };
    tokio::time::timeout(timeout, run)
        .await
        .map_err(|_| anyhow!("the transfer did not finish within {timeout:?}"))??;
    ep.close();
    Ok(bytes as f64 * 8.0 / start.elapsed().as_secs_f64() / 1e6)
}

fn options() -> EndpointOptions {
    EndpointOptions {
        max_connections: 8192,
        ..EndpointOptions::default()
    }
}

/// `n` idle connections from [`IDLE_SOURCES`] loopback addresses.
async fn open_idle(
    server: SocketAddr,
    n: usize,
) -> Result<(Vec<Endpoint>, Vec<Connection>), Failure> {
    let mut eps = Vec::new();
    let mut conns = Vec::new();
    for k in 0..IDLE_SOURCES {
        let share = n / IDLE_SOURCES + usize::from(k < n % IDLE_SOURCES);
        let from = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2 + k as u8)), 0);
        let (ep, c) = open_from(from, server, share).await?;
        eps.push(ep);
        conns.extend(c);
    }
    Ok((eps, conns))
}

/// Tries `n` connections to `server` from one endpoint bound to `from`; the established
/// ones (the receiver may refuse some).
async fn open_from(
    from: SocketAddr,
    server: SocketAddr,
    n: usize,
) -> Result<(Endpoint, Vec<Connection>), Failure> {
    let ep = Endpoint::bind(from, options())
        .await
        .with_context(|| format!("cannot bind {from}"))?;
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..n {
        set.spawn(ep.connect(server, &Profile::reliable()));
    }
    let mut conns = Vec::new();
    while let Some(r) = set.join_next().await {
        if let Ok(Ok(c)) = r {
            conns.push(c);
        }
    }
    Ok((ep, conns))
}

/// Sends handshake requests (INIT, as a real initiator builds it) to `server` at `pps` until
/// `stop`, from 8 source ports of [`FLOOD_SOURCE`].
fn flood_inits(server: SocketAddr, pps: u32, stop: &AtomicBool, sent: &AtomicU64) {
    let mut ep = ctp_proto::Endpoint::new(ctp_proto::EndpointConfig::new([7; 32], [8; 32]));
    let now = ctp_proto::Instant::from_micros(1);
    if ep.connect(now, server, &Profile::reliable()).is_err() {
        return;
    }
    let mut init = Vec::new();
    if ep.poll_transmit(now, &mut init).is_none() {
        return;
    }
    let sockets: Vec<UdpSocket> = (0..8)
        .filter_map(|_| UdpSocket::bind(SocketAddr::new(IpAddr::V4(FLOOD_SOURCE), 0)).ok())
        .collect();
    if sockets.is_empty() {
        return;
    }
    let start = Instant::now();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let due = (start.elapsed().as_secs_f64() * f64::from(pps)) as u64;
        while n < due {
            let _ = sockets[n as usize % sockets.len()].send_to(&init, server);
            n += 1;
        }
        sent.store(n, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Resident memory of process `pid`, KiB.
fn rss_kib(pid: u32) -> Result<u64, Failure> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .context("reading the receiver's memory (/proc)")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| Failure::Transfer(anyhow!("no VmRSS in /proc/{pid}/status")))
}

/// The receiver of the flood bench: accepts every connection and drains each in a task of
/// its own; prints its address on the first line of stdout; runs until killed.
pub async fn serve(listen: SocketAddr) -> Result<(), Failure> {
    let ep = Endpoint::bind(
        listen,
        EndpointOptions {
            accept: true,
            ..options()
        },
    )
    .await
    .with_context(|| format!("cannot listen on {listen}"))?;
    println!("{}", ep.local_addr().context("local address")?);
    while let Some(conn) = ep.accept().await {
        tokio::spawn(async move {
            let _ = crate::perf::drain(conn, &AtomicU64::new(0), true).await;
        });
    }
    Ok(())
}
