//! `ctp demo`: a verified file transfer over loopback, through the same code paths as
//! `ctp send` / `ctp recv`, with progress and a summary. Needs no root and no peers.

use crate::cli::DemoArgs;
use crate::output::outln;
use crate::summary::{human_bytes, Measured, Summary};
use crate::transfer::{recv, send, CHUNK};
use crate::{progress, Failure};
use anyhow::{anyhow, Context};
use ctp::{Endpoint, EndpointOptions, Profile};
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

/// Runs the demo.
pub async fn run(a: DemoArgs) -> Result<(), Failure> {
    if a.mib == 0 || a.mib > 65_536 {
        return Err(Failure::Usage(format!(
            "--mib {} is out of range: use 1 to 65536",
            a.mib
        )));
    }
    let scratch = Scratch(std::env::temp_dir().join(format!("ctp-demo-{}", std::process::id())));
    std::fs::create_dir_all(scratch.0.join("received")).context("creating a scratch directory")?;
    let source = scratch.0.join("demo.bin");
    let bytes = a.mib << 20;
    if !a.json {
        outln!(
            "ctp demo: moving {} over loopback with the `reliable` profile",
            human_bytes(bytes)
        );
        outln!("  (ordered byte stream, ARQ, SACK/NAK, flow window, NewReno window + pacing)\n");
    }
    make_source(&source, bytes)
        .await
        .context("writing the demo file")?;
    let profile = Profile::reliable();
    let server = Endpoint::bind(
        "127.0.0.1:0".parse().expect("literal"),
        EndpointOptions {
            accept: true,
            ..Default::default()
        },
    )
    .await
    .context("binding the receiver")?;
    let addr = server.local_addr().context("receiver address")?;
    let client = Endpoint::bind(
        "127.0.0.1:0".parse().expect("literal"),
        EndpointOptions::default(),
    )
    .await
    .context("binding the sender")?;
    let out_dir = scratch.0.join("received");
    let json = a.json;
    let receiver = tokio::spawn(async move {
        let mut conn = server
            .accept()
            .await
            .ok_or_else(|| anyhow!("no sender connected"))?;
        let start = Instant::now();
        let pb = progress::bar(0, "recv", true);
        let r = recv::recv_file(&mut conn, &out_dir, &pb).await?;
        let secs = start.elapsed().as_secs_f64();
        let stats = conn.stats();
        let _ = conn.close().await;
        anyhow::Ok(Summary::new(
            "recv",
            &r.path,
            conn.remote_addr().to_string(),
            "reliable",
            Measured {
                bytes: r.bytes,
                seconds: secs,
                stats: &stats,
                checksum: &r.digest,
            },
        ))
    });
    let start = Instant::now();
    let mut conn = client
        .connect(addr, &profile)
        .await
        .map_err(|e| anyhow!("connecting over loopback: {e}"))?;
    let pb = progress::bar(bytes, "send", json);
    let digest = send::send_file(&mut conn, &source, "demo.bin", &pb)
        .await
        .context("sending")?;
    pb.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();
    let stats = conn.stats();
    let _ = conn.close().await;
    let sent = Summary::new(
        "send",
        &source,
        addr.to_string(),
        "reliable",
        Measured {
            bytes,
            seconds: secs,
            stats: &stats,
            checksum: &digest,
        },
    );
    let got = receiver
        .await
        .map_err(|e| anyhow!("receiver task: {e}"))??;
    if json {
        outln!("{}", serde_json::json!({ "send": sent, "recv": got }));
        return Ok(());
    }
    sent.print(false);
    got.print(false);
    outln!("\nchecksums match: {}", sent.checksum == got.checksum);
    outln!("\nNext:");
    outln!("  ctp recv --listen 0.0.0.0:9000 --out ./incoming/ --once   # on the receiving host");
    outln!("  ctp send FILE HOST:9000                                  # on the sending host");
    outln!("  ctp profiles                                             # what the profiles are made of");
    Ok(())
}
