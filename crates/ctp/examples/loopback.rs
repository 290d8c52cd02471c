//! Loopback goodput: one reliable byte stream over 127.0.0.1, timed.
//!
//! `cargo run --release -p ctp --example loopback -- [MiB] [connections] [flow_window]`
//! (default 256 MiB on one connection with the `reliable` profile's defaults). A
//! measurement, not a test.

use ctp::{Endpoint, EndpointOptions, Profile};
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mib: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(256);
    let conns: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(1);
    let mut profile = Profile::reliable();
    if let Some(w) = args.next() {
        profile.params.flow_window = w.parse()?;
    }
    let server = Endpoint::bind(
        "127.0.0.1:0".parse()?,
        EndpointOptions {
            accept: true,
            ..Default::default()
        },
    )
    .await?;
    let addr = server.local_addr()?;
    let client = Endpoint::bind("127.0.0.1:0".parse()?, EndpointOptions::default()).await?;

    let receivers = {
        let server = server.clone();
        tokio::spawn(async move {
            let mut tasks = Vec::new();
            for _ in 0..conns {
                let mut c = server.accept().await.expect("accept");
                tasks.push(tokio::spawn(async move {
                    let mut buf = vec![0u8; 1 << 20];
                    let mut n = 0usize;
                    loop {
                        match c.read(&mut buf).await.expect("read") {
                            0 => break,
                            k => n += k,
                        }
                    }
                    (n, c.stats())
                }));
            }
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.expect("receiver"));
            }
            out
        })
    };

    let chunk = vec![0x5au8; 1 << 20];
    let start = Instant::now();
    let mut senders = Vec::new();
    for _ in 0..conns {
        let mut c = client.connect(addr, &profile).await?;
        let chunk = chunk.clone();
        senders.push(tokio::spawn(async move {
            for _ in 0..mib / conns {
                c.write_all(&chunk).await.expect("write");
            }
            c.shutdown().await.expect("shutdown");
            c
        }));
    }
    let mut sent = Vec::new();
    for s in senders {
        sent.push(s.await?);
    }
    let got = receivers.await?;
    let secs = start.elapsed().as_secs_f64();
    let bytes: usize = got.iter().map(|g| g.0).sum();
    println!(
        "{} MiB over {} connection(s) in {:.2} s: {:.1} MiB/s ({:.2} Gbit/s goodput)",
        bytes >> 20,
        conns,
        secs,
        bytes as f64 / secs / (1 << 20) as f64,
        bytes as f64 * 8.0 / secs / 1e9
    );
    for c in &sent {
        let s = c.stats();
        println!(
            "sender: packets {} retransmissions {} lost {} srtt {} us cwnd {} pacing {} B/s",
            s.packets_sent, s.retransmissions, s.packets_lost, s.srtt_us, s.cwnd, s.pacing_rate
        );
    }
    for c in sent {
        c.close().await?;
    }
    println!("client endpoint: {:?}", client.stats());
    println!("server endpoint: {:?}", server.stats());
    Ok(())
}
