//! `ctp demo`: what ctp is for, in under a minute, without root or peers.
//!
//! 1. A verified file transfer over clean loopback, through the same code paths as
//!    `ctp send` / `ctp recv`.
//! 2. The same kind of transfer over an emulated long, lossy path (an in-process `ctp relay`:
//!    200 Mb/s, 60 ms round trip, 1% loss) with each reliable profile, side by side.

use crate::cli::DemoArgs;
use crate::failure::Failure;
use crate::output::outln;
use crate::progress;
use crate::relay::model::{Impairments, Loss};
use crate::relay::Relay;
use crate::summary::{human_bytes, Measured, Summary};
use crate::transfer::{recv, send, CHUNK};
use anyhow::{anyhow, Context};
use ctp::{Endpoint, EndpointOptions, Profile};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tokio::io::AsyncWriteExt;

/// Removes the demo's scratch directory however the demo ends.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes `bytes` of pseudo-random (incompressible) data to `path`.
async fn make_source(path: &Path, bytes: u64) -> anyhow::Result<()> {
    let mut f = tokio::fs::File::create(path).await?;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut buf = vec![0u8; CHUNK];
    let mut left = bytes;
    while left > 0 {
        for w in buf.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w.copy_from_slice(&x.to_le_bytes());
        }
        let n = left.min(CHUNK as u64) as usize;
        f.write_all(&buf[..n]).await?;
        left -= n as u64;
    }
    f.flush().await?;
    Ok(())
}

/// Sends `source` with `profile` to a fresh receiver, optionally through an impairment relay;
/// returns both sides' summaries.
async fn transfer(
    profile: &Profile,
    label: &str,
    source: &Path,
    out_dir: PathBuf,
    path: Option<Impairments>,
    json: bool,
) -> anyhow::Result<(Summary, Summary)> {
    let local: SocketAddr = "127.0.0.1:0".parse().expect("literal");
    let opts = EndpointOptions {
        accept: true,
        params: profile.params,
        wire: profile.wire(),
        ..Default::default()
    };
    let server = Endpoint::bind(local, opts)
        .await
        .context("binding the receiver")?;
    let server_addr = server.local_addr().context("receiver address")?;
    let client = Endpoint::bind(
        local,
        EndpointOptions {
            params: profile.params,
            wire: profile.wire(),
            ..Default::default()
        },
    )
    .await
    .context("binding the sender")?;
    let (target, relay) = match path {
        Some(imp) => {
            let relay = Relay::bind(local, server_addr, imp, 7).await?;
            let front = relay.local_addr()?;
            let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
            let task = tokio::spawn(relay.run(async move {
                let _ = stop_rx.await;
            }));
            (front, Some((stop_tx, task)))
        }
        None => (server_addr, None),
    };
    let name = label.to_string();
    let receiver = tokio::spawn(async move {
        let mut conn = server
            .accept()
            .await
            .ok_or_else(|| anyhow!("no sender connected"))?;
        let start = Instant::now();
        let r =
            recv::recv_files(&mut conn, &out_dir, true, &progress::bar(0, "recv", true)).await?;
        let secs = start.elapsed().as_secs_f64();
        let stats = conn.stats();
        let _ = conn.close().await;
        let m = Measured {
            bytes: r.bytes,
            seconds: secs,
            stats: &stats,
            checksum: &r.digest,
        };
        anyhow::Ok(Summary::new(
            "recv",
            &r.path,
            conn.remote_addr().to_string(),
            &name,
            m,
        ))
    });
    let bytes = std::fs::metadata(source)?.len();
    let start = Instant::now();
    let conn = client
        .connect(target, profile)
        .await
        .map_err(|e| anyhow!("connecting: {e}"))?;
    let pb = progress::Sending::new(progress::bar(bytes, label, json));
    let watched = conn.clone();
    let digest = pb
        .follow(&watched, send::send_file(&conn, source, "demo.bin", &pb))
        .await
        .context("sending")?;
    drop(watched);
    pb.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();
    let stats = conn.stats();
    let _ = conn.close().await;
    let m = Measured {
        bytes,
        seconds: secs,
        stats: &stats,
        checksum: &digest,
    };
    let sent = Summary::new("send", source, target.to_string(), label, m);
    let got = receiver
        .await
        .map_err(|e| anyhow!("receiver task: {e}"))??;
    if let Some((stop, task)) = relay {
        let _ = stop.send(());
        let _ = task.await;
    }
    Ok((sent, got))
}

/// The emulated long, lossy path.
fn long_lossy_path() -> Impairments {
    Impairments {
        delay_us: 30_000,
        rate_bps: Some(200_000_000),
        queue_limit: 2_000,
        loss: Loss::Bernoulli(0.01),
        ..Impairments::default()
    }
}

/// Runs the demo.
pub async fn run(a: DemoArgs) -> Result<(), Failure> {
    if a.mib == 0 || a.mib > 65_536 || a.lossy_mib > 1024 {
        return Err(Failure::Usage(format!(
            "--mib {} / --lossy-mib {} out of range: use 1..=65536 and 0..=1024",
            a.mib, a.lossy_mib
        )));
    }
    let scratch = Scratch(std::env::temp_dir().join(format!("ctp-demo-{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0).context("creating a scratch directory")?;
    let json = a.json;
    let source = scratch.0.join("demo.bin");
    if !json {
        outln!(
            "ctp demo 1/2: {} over loopback with the `reliable` profile",
            human_bytes(a.mib << 20)
        );
        outln!(
            "  (ordered byte stream, ARQ, SACK/NAK, flow window, {} congestion control + pacing)\n",
            crate::profiles::SENDER_CC
        );
    }
    make_source(&source, a.mib << 20)
        .await
        .context("writing the demo file")?;
    let received = scratch.0.join("received");
    std::fs::create_dir_all(&received).context("creating a scratch directory")?;
    let (sent, got) = transfer(
        &crate::profiles::sender_cc(Profile::reliable(), "reliable", None)?,
        "reliable",
        &source,
        received.clone(),
        None,
        json,
    )
    .await?;
    let mut lossy = Vec::new();
    if a.lossy_mib > 0 {
        if !json {
            sent.print(false);
            outln!("checksums match: {}\n", sent.checksum == got.checksum);
            outln!(
                "ctp demo 2/2: {} per profile over an emulated long lossy path (200 Mb/s, 60 ms RTT, 1% loss)\n",
                human_bytes(a.lossy_mib << 20)
            );
        }
        let small = scratch.0.join("lossy.bin");
        make_source(&small, a.lossy_mib << 20)
            .await
            .context("writing the demo file")?;
        // What `ctp send` runs by default, the TCP-like profiles, then UDT (native and
        // noisy-link) and plain BBR, which do not read every loss as congestion.
        let udt = Profile::builtin("udt").expect("built in");
        let runs = [
            (
                format!("reliable (default: {})", crate::profiles::SENDER_CC),
                crate::profiles::sender_cc(Profile::reliable(), "reliable", None)?,
            ),
            (
                "reliable --cc newreno".to_string(),
                crate::profiles::with_cc(Profile::reliable(), "newreno")?,
            ),
            ("ctp-bulk".to_string(), Profile::ctp_bulk()),
            ("udt".to_string(), udt.clone()),
            (
                "udt --cc udt-noisy".to_string(),
                crate::profiles::with_cc(udt, "udt-noisy")?,
            ),
            (
                "reliable --cc bbr".to_string(),
                crate::profiles::with_cc(Profile::reliable(), "bbr")?,
            ),
        ];
        for (i, (label, profile)) in runs.into_iter().enumerate() {
            let dir = scratch.0.join(format!("received-{i}"));
            std::fs::create_dir_all(&dir).context("creating a scratch directory")?;
            let (s, r) =
                transfer(&profile, &label, &small, dir, Some(long_lossy_path()), json).await?;
            if s.checksum != r.checksum {
                return Err(Failure::Transfer(anyhow!("{label}: checksums differ")));
            }
            lossy.push(s);
        }
    }
    if json {
        outln!(
            "{}",
            serde_json::json!({ "send": sent, "recv": got, "lossy_path": lossy })
        );
        return Ok(());
    }
    if lossy.is_empty() {
        sent.print(false);
        got.print(false);
        outln!("\nchecksums match: {}", sent.checksum == got.checksum);
    } else {
        outln!(
            "{:<20} {:>10} {:>12} {:>16} {:>9}",
            "profile (cc)",
            "seconds",
            "goodput",
            "retransmissions",
            "RTT"
        );
        for s in &lossy {
            outln!(
                "{:<20} {:>10.2} {:>7.1} Mb/s {:>16} {:>6.1} ms",
                s.profile,
                s.seconds,
                s.goodput_mbps,
                s.retransmissions,
                s.rtt_ms
            );
        }
        outln!("\nEvery transfer above was verified end to end (BLAKE3). TCP-like loss response");
        outln!(
            "keeps goodput low on long lossy paths; UDT's rate control and BBR are built for them."
        );
    }
    outln!("\nNext:");
    outln!("  ctp recv --listen 0.0.0.0:9000 --out ./incoming/ --once   # on the receiving host");
    outln!("  ctp send FILE HOST:9000                                  # on the sending host");
    outln!("  ctp relay --listen 127.0.0.1:9001 --to HOST:9000 --delay 30ms --loss 1%  # emulate a path");
    outln!(
        "  ctp profiles --explain reliable                          # what a profile is made of"
    );
    Ok(())
}
