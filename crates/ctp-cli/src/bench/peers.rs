//! Running one contender: a receiver and a sender as child processes on loopback, bounded in
//! time, with each side's CPU time taken from `getrusage(RUSAGE_CHILDREN)` as it is reaped.

use anyhow::{anyhow, Context};
use nix::sys::resource::{getrusage, UsageWho};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};

/// Something to measure.
#[derive(Clone, Debug)]
pub enum Contender {
    /// ctp with a profile (the `ctp send` / `ctp recv` commands).
    Ctp(String),
    /// A peer by name.
    Peer(String),
}

impl Contender {
    /// Its name in the table.
    pub fn name(&self) -> String {
        match self {
            Contender::Ctp(p) => format!("ctp {p}"),
            Contender::Peer(p) => p.clone(),
        }
    }
}

/// What one run measured.
#[derive(Clone, Copy, Debug)]
pub struct Measure {
    /// Goodput, megabits per second.
    pub goodput_mbps: f64,
    /// Sender CPU seconds.
    pub sender_cpu_s: f64,
    /// Receiver CPU seconds.
    pub receiver_cpu_s: f64,
}

/// The bench's scratch files and tools.
pub struct Env {
    dir: PathBuf,
    source: PathBuf,
    bytes: u64,
    timeout: Duration,
    ctp: PathBuf,
    udtperf: Result<PathBuf, String>,
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .unwrap_or(47_000)
}

fn cpu_children() -> f64 {
    getrusage(UsageWho::RUSAGE_CHILDREN)
        .map(|u| {
            let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
            t(u.user_time()) + t(u.system_time())
        })
        .unwrap_or(0.0)
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// Builds the UDT4 peer from `tools/udt4/udtperf.cpp` with Debian's libudt-dev.
async fn build_udtperf(out: &Path) -> Result<PathBuf, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/udt4/udtperf.cpp");
    if !src.is_file() {
        return Err("missing: tools/udt4/udtperf.cpp not found (run from a ctp checkout)".into());
    }
    if which("g++").is_none() || !Path::new("/usr/include/udt/udt.h").is_file() {
        return Err(
            "missing: UDT4 needs g++ and libudt-dev (apt-get install g++ libudt-dev)".into(),
        );
    }
    let bin = out.join("udtperf");
    let status = Command::new("g++")
        .args(["-O2", "-o"])
        .arg(&bin)
        .arg(&src)
        .args(["-ludt", "-lpthread"])
        .status()
        .await
        .map_err(|e| format!("failed: g++: {e}"))?;
    if !status.success() {
        return Err("failed: building udtperf with g++".into());
    }
    Ok(bin)
}

impl Env {
    /// Writes the source file (on tmpfs when there is one) and builds the peers that need it.
    pub async fn prepare(bytes: u64, timeout_s: u64) -> anyhow::Result<Env> {
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!("ctp-bench-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("rx")).context("creating the bench directory")?;
        let source = dir.join("bench.bin");
        write_pseudo_random(&source, bytes).context("writing the bench file")?;
        let ctp = std::env::current_exe().context("locating the ctp binary")?;
        let udtperf = build_udtperf(&dir).await;
        Ok(Env {
            dir,
            source,
            bytes,
            timeout: Duration::from_secs(timeout_s.max(1)),
            ctp,
            udtperf,
        })
    }

    /// Runs one contender once.
    pub async fn run(&self, c: &Contender) -> Result<Measure, String> {
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let (recv, send): (Command, Command) = match c {
            Contender::Ctp(profile) => {
                let _ = std::fs::remove_dir_all(self.dir.join("rx"));
                let _ = std::fs::create_dir_all(self.dir.join("rx"));
                let mut r = Command::new(&self.ctp);
                r.args([
                    "recv",
                    "--listen",
                    &addr,
                    "--once",
                    "--json",
                    "--profile",
                    profile,
                    "--out",
                ])
                .arg(self.dir.join("rx"));
                let mut s = Command::new(&self.ctp);
                s.arg("send")
                    .arg(&self.source)
                    .args([&addr, "--json", "--profile", profile]);
                (r, s)
            }
            Contender::Peer(p) if p.starts_with("tcp-") => {
                let cc = &p[4..];
                if which("iperf3").is_none() {
                    return Err("missing: iperf3 not installed (apt-get install iperf3)".into());
                }
                let mut r = Command::new("iperf3");
                r.args(["-s", "-1", "-p", &port.to_string()]);
                let mut s = Command::new("iperf3");
                s.args([
                    "-c",
                    "127.0.0.1",
                    "-p",
                    &port.to_string(),
                    "-n",
                    &self.bytes.to_string(),
                    "-C",
                    cc,
                    "-J",
                ]);
                (r, s)
            }
            Contender::Peer(p) if p == "udt4" => {
                let bin = self.udtperf.as_ref().map_err(Clone::clone)?;
                let mut r = Command::new(bin);
                r.args(["recv", &port.to_string()]);
                let mut s = Command::new(bin);
                s.args([
                    "send",
                    "127.0.0.1",
                    &port.to_string(),
                    &self.bytes.to_string(),
                ]);
                (r, s)
            }
            Contender::Peer(p) if p == "srt" => {
                return Err(if which("srt-file-transmit").is_none() {
                    "missing: srt-tools not installed (apt-get install srt-tools)".into()
                } else {
                    "missing: the SRT file-mode runner is not built yet".into()
                });
            }
            Contender::Peer(p) if p == "quinn" => {
                return Err("missing: the quinn benchmark binary is not built yet".into())
            }
            Contender::Peer(p) => return Err(format!("missing: unknown peer {p}")),
        };
        let (r_out, s_out, r_cpu, s_cpu) = self
            .pair(recv, send)
            .await
            .map_err(|e| format!("failed: {e:#}"))?;
        let goodput = match c {
            Contender::Ctp(_) => json_field(&s_out, &["goodput_mbps"]),
            Contender::Peer(p) if p.starts_with("tcp-") => {
                json_field(&s_out, &["end", "sum_received", "bits_per_second"]).map(|b| b / 1e6)
            }
            _ => r_out
                .split_whitespace()
                .find_map(|w| w.strip_prefix("mbps="))
                .and_then(|v| v.parse().ok()),
        };
        let goodput_mbps = goodput
            .ok_or_else(|| format!("failed: no goodput in the output ({} bytes)", s_out.len()))?;
        Ok(Measure {
            goodput_mbps,
            sender_cpu_s: s_cpu,
            receiver_cpu_s: r_cpu,
        })
    }

    async fn pair(
        &self,
        mut recv: Command,
        mut send: Command,
    ) -> anyhow::Result<(String, String, f64, f64)> {
        let spawn = |c: &mut Command| -> anyhow::Result<Child> {
            Ok(c.stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()?)
        };
        let mut r = spawn(&mut recv).context("starting the receiver")?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let c0 = cpu_children();
        let s = spawn(&mut send).context("starting the sender")?;
        let s_out = tokio::time::timeout(self.timeout, s.wait_with_output())
            .await
            .map_err(|_| anyhow!("the sender did not finish within {:?}", self.timeout))??;
        let c1 = cpu_children();
        let mut r_stdout = r
            .stdout
            .take()
            .ok_or_else(|| anyhow!("no receiver output"))?;
        let waited = tokio::time::timeout(Duration::from_secs(15), r.wait()).await;
        if waited.is_err() {
            let _ = r.kill().await;
            return Err(anyhow!("the receiver did not exit after the transfer"));
        }
        let c2 = cpu_children();
        let mut r_out = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut r_stdout, &mut r_out).await?;
        if !s_out.status.success() {
            return Err(anyhow!(
                "the sender failed: {}",
                String::from_utf8_lossy(&s_out.stderr).trim()
            ));
        }
        Ok((
            r_out,
            String::from_utf8_lossy(&s_out.stdout).into_owned(),
            c2 - c1,
            c1 - c0,
        ))
    }
}

fn json_field(text: &str, path: &[&str]) -> Option<f64> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    path.iter().try_fold(&v, |v, k| v.get(k))?.as_f64()
}

fn write_pseudo_random(path: &Path, bytes: u64) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut buf = vec![0u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        for w in buf.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w.copy_from_slice(&x.to_le_bytes());
        }
        let n = left.min(buf.len() as u64) as usize;
        f.write_all(&buf[..n])?;
        left -= n as u64;
    }
    f.flush()
}
