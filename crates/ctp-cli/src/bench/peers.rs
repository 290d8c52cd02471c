//! Running one contender: a receiver and a sender as child processes (in the path's
//! namespaces on a veth path), capped in time, with each side's CPU time taken from
//! `getrusage(RUSAGE_CHILDREN)` as it is reaped.
//!
//! A receiver that serves on after its transfer (the scp and rsync peers' sshd) is stopped
//! once the sender has exited and the server's session processes have ended, so the whole
//! server tree's CPU time is counted as the receiver's.
//!
//! Contenders that write a file (ctp with `--ctp-files`, SRT, scp, rsync, UDT4's file API)
//! have it compared with the source (size and BLAKE3) after each run; a difference fails the
//! run.
//!
//! A run that reaches the cap is stopped and reports what it moved so far: the bytes in the
//! receiver's directory (ctp, SRT), the receiver's own line after SIGTERM (UDT4, quinn), or
//! the iperf3 server's JSON after the client got SIGINT (TCP).

use super::paths::Place;
use super::programs::which;
use anyhow::{anyhow, Context};
use nix::sys::resource::{getrusage, UsageWho};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

/// Known peers, in table order.
pub const PEERS: &[&str] = &[
    "tcp-cubic",
    "tcp-bbr",
    "udt4",
    "srt",
    "quinn",
    "scp",
    "rsync",
    "udt4-file",
    super::http::CURL,
    super::http::CURL_PROXY,
];

/// The peers run when `--peers` is not given.
pub const DEFAULT_PEERS: &[&str] = &["tcp-cubic", "tcp-bbr", "udt4", "srt", "quinn"];

/// File-transfer peers, added to the default set when ctp moves a file (`--ctp-files`).
pub const FILE_PEERS: &[&str] = &["scp", "rsync", "udt4-file"];

/// The peers run when `--peers` is not given.
pub fn default_peers(ctp_files: bool) -> Vec<String> {
    let files = if ctp_files { FILE_PEERS } else { &[] };
    DEFAULT_PEERS
        .iter()
        .chain(files)
        .map(|p| p.to_string())
        .collect()
}

/// Something to measure.
#[derive(Clone, Debug, PartialEq)]
pub enum Contender {
    /// ctp (the `ctp send` / `ctp recv` commands) with a profile and, optionally, a
    /// congestion control replacing the profile's (`ctp send --cc`).
    Ctp {
        /// Profile name or file.
        profile: String,
        /// Congestion control, `None` for the profile's own.
        cc: Option<String>,
        /// Run by the `--baseline` binary instead of this one.
        baseline: bool,
        /// Without encryption (`--insecure`), to measure what encryption costs.
        insecure: bool,
    },
    /// A peer by name (one of [`PEERS`]).
    Peer(String),
}

impl Contender {
    /// Its name in the table: `ctp PROFILE`, `ctp PROFILE:CC` (`ctp@baseline …` for the
    /// baseline binary) or the peer's name.
    pub fn name(&self) -> String {
        match self {
            Contender::Ctp {
                profile,
                cc,
                baseline,
                insecure,
            } => {
                let who = if *baseline { "ctp@baseline" } else { "ctp" };
                let plain = if *insecure { " (insecure)" } else { "" };
                match cc {
                    None => format!("{who} {profile}{plain}"),
                    Some(cc) => format!("{who} {profile}:{cc}{plain}"),
                }
            }
            Contender::Peer(p) => p.clone(),
        }
    }
}

/// What one run measured.
#[derive(Clone, Copy, Debug)]
pub struct Measure {
    /// Goodput, megabits per second.
    pub goodput_mbps: f64,
    /// Bytes delivered to the receiver.
    pub bytes: u64,
    /// Sender CPU seconds.
    pub sender_cpu_s: f64,
    /// Receiver CPU seconds.
    pub receiver_cpu_s: f64,
    /// The run reached the time cap; goodput is what it moved until then.
    pub capped: bool,
    /// The received file was compared with the source (size and BLAKE3) and is the same.
    pub verified: bool,
    /// Packets the sender retransmitted (ctp contenders, which report it).
    pub retransmissions: Option<u64>,
}

/// How a finished run's goodput is read.
enum Report {
    /// `ctp send --json`: `goodput_mbps`.
    CtpJson,
    /// `iperf3 -c -J`: `end.sum_received`.
    Iperf,
    /// The receiver's `bytes=N seconds=S mbps=M` line (udtperf, quinn-bench).
    Line,
    /// Timed by the bench: the receiver's directory size over the time from the sender's
    /// start to the receiver's exit (SRT, UDT4's file API).
    Timed,
    /// Timed by the bench to the sender's exit: the receiver's directory size over the time
    /// from the sender's start to its exit (scp and rsync, whose client exits once the
    /// server has written the file).
    TimedToSender,
}

/// How a capped run's progress is read.
enum Partial {
    /// Bytes in the receiver's directory.
    RxDir,
    /// SIGTERM to the receiver, which prints its `bytes=` line.
    StopReceiver,
    /// SIGINT to the iperf3 client; the server prints its JSON.
    StopSender,
    /// SIGINT to the `ctp perf` receiver, which prints its summary as JSON.
    StopCtpReceiver,
}

struct Plan {
    recv: Command,
    send: Command,
    report: Report,
    partial: Partial,
    /// The receiver serves on after the transfer (sshd): it is stopped once the sender has
    /// exited and it has no child processes left.
    serves: bool,
    /// The receiver writes the source's name in its directory: compare it with the source.
    verify: bool,
    /// The receiver serves on after the transfer, with helpers of its own: it is stopped
    /// as soon as the sender has exited.
    lingers: bool,
}

impl Plan {
    fn new(recv: Command, send: Command, report: Report, partial: Partial) -> Plan {
        Plan {
            recv,
            send,
            report,
            partial,
            serves: false,
            verify: false,
            lingers: false,
        }
    }
}

/// The bench's scratch files and tools.
pub struct Env {
    dir: Scratch,
    source: PathBuf,
    bytes: u64,
    timeout: Duration,
    ctp: PathBuf,
    /// The `--baseline` ctp binary.
    baseline: Option<PathBuf>,
    udtperf: Result<PathBuf, String>,
    /// The UDT4 file-API peer (`tools/udt4/udtfile.cpp`).
    udtfile: Result<PathBuf, String>,
    quinn: Result<PathBuf, String>,
    /// The scp and rsync peers' ssh set-up.
    ssh: Result<super::ssh::Ssh, String>,
    /// The source file's BLAKE3 hash.
    source_hash: blake3::Hash,
    /// ctp moves a file (`send`/`recv`) instead of running memory to memory (`perf`).
    ctp_files: bool,
}

/// A directory for a bench's scratch files (on tmpfs when there is one, so that the disk
/// never limits a run), removed with everything in it when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    /// Creates `NAME-PID` under `/dev/shm`, or else under the temporary directory.
    pub fn create(name: &str) -> std::io::Result<Scratch> {
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch(dir))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A UDP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .unwrap_or(47_000)
}

/// CPU seconds (user and system) of this process's children reaped so far: a child's
/// enter when it is reaped, so the difference across a child's reaping is its own.
pub fn cpu_children() -> f64 {
    getrusage(UsageWho::RUSAGE_CHILDREN)
        .map(|u| {
            let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
            t(u.user_time()) + t(u.system_time())
        })
        .unwrap_or(0.0)
}

/// The checkout this binary was built from (for `tools/`).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds a UDT4 peer, `tools/udt4/NAME.cpp` (`udtperf`, `udtfile`), with Debian's
/// libudt-dev.
async fn build_udt_tool(out: &Path, name: &str) -> Result<PathBuf, String> {
    let src = workspace().join(format!("tools/udt4/{name}.cpp"));
    if !src.is_file() {
        return Err(format!(
            "missing: tools/udt4/{name}.cpp not found (run from a ctp checkout)"
        ));
    }
    if which("g++").is_none() || !Path::new("/usr/include/udt/udt.h").is_file() {
        return Err(
            "missing: UDT4 needs g++ and libudt-dev (apt-get install g++ libudt-dev)".into(),
        );
    }
    let bin = out.join(name);
    let status = Command::new("g++")
        .args(["-O2", "-o"])
        .arg(&bin)
        .arg(&src)
        .args(["-ludt", "-lpthread"])
        .status()
        .await
        .map_err(|e| format!("failed: g++: {e}"))?;
    if !status.success() {
        return Err(format!("failed: building {name} with g++"));
    }
    Ok(bin)
}

/// Finds the quinn peer (`tools/quinn-bench`): `$CTP_QUINN_BENCH`, beside this binary (a
/// workspace build puts it there), on `PATH`, or else builds it with cargo.
async fn locate_quinn_bench() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("CTP_QUINN_BENCH") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!(
                "missing: CTP_QUINN_BENCH={} is not a file",
                p.display()
            ))
        };
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| Some(e.parent()?.join("quinn-bench")));
    if let Some(p) = beside.as_ref().filter(|p| p.is_file()) {
        return Ok(p.clone());
    }
    if let Some(p) = which("quinn-bench") {
        return Ok(p);
    }
    let manifest = workspace().join("Cargo.toml");
    if !workspace().join("tools/quinn-bench/Cargo.toml").is_file() || which("cargo").is_none() {
        return Err(
            "missing: quinn-bench is not built and cannot be (needs cargo and a ctp \
                    checkout): `cargo build --release -p quinn-bench`, or set CTP_QUINN_BENCH"
                .into(),
        );
    }
    eprintln!("ctp bench: building the quinn peer (cargo build --release -p quinn-bench) …");
    let out = Command::new("cargo")
        .args([
            "build",
            "--release",
            "--quiet",
            "-p",
            "quinn-bench",
            "--message-format=json",
            "--manifest-path",
        ])
        .arg(&manifest)
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(900), out)
        .await
        .map_err(|_| "missing: building quinn-bench took over 15 minutes".to_string())?
        .map_err(|e| format!("missing: cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err("missing: `cargo build --release -p quinn-bench` failed".into());
    }
    // Cargo names the built executable in its JSON messages.
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| Some(PathBuf::from(v.get("executable")?.as_str()?)))
        .filter(|p| p.ends_with("quinn-bench"))
        .ok_or_else(|| "missing: cargo built quinn-bench but did not say where".into())
}

/// Bytes in the files under a directory (not recursive): a receiver's progress.
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|it| {
            it.filter_map(|e| e.ok()?.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// A child's output, read as it is written so that a full pipe never blocks it.
pub struct Output {
    stdout: JoinHandle<String>,
    stderr: JoinHandle<String>,
}

impl Output {
    /// Starts reading the child's piped stdout and stderr (either may be absent).
    pub fn capture(child: &mut Child) -> Output {
        fn read<R: tokio::io::AsyncRead + Unpin + Send + 'static>(
            r: Option<R>,
        ) -> JoinHandle<String> {
            tokio::spawn(async move {
                let mut s = String::new();
                if let Some(mut r) = r {
                    let _ = tokio::io::AsyncReadExt::read_to_string(&mut r, &mut s).await;
                }
                s
            })
        }
        Output {
            stdout: read(child.stdout.take()),
            stderr: read(child.stderr.take()),
        }
    }

    /// What the child wrote, (stdout, stderr), once it has exited (what a child still
    /// running has written within a short grace).
    pub async fn collect(self) -> (String, String) {
        let grace = Duration::from_secs(2);
        let get = |h: JoinHandle<String>| async move {
            tokio::time::timeout(grace, h)
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default()
        };
        (get(self.stdout).await, get(self.stderr).await)
    }
}

/// Whether process `pid` has child processes (zombies included: not yet reaped).
fn has_children(pid: u32) -> bool {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    procs.filter_map(Result::ok).any(|e| {
        std::fs::read_to_string(e.path().join("stat")).is_ok_and(|stat| {
            // `PID (COMM) STATE PPID …`; COMM may hold spaces and parentheses.
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                == Some(pid)
        })
    })
}

/// Stops a serving receiver: waits until `deadline` for its child processes (sessions) to
/// end, so their CPU time is in its own, then sends SIGTERM and reaps it (killed if it
/// has not exited after a grace period).
async fn stop_server(child: &mut Child, deadline: tokio::time::Instant) -> Option<ExitStatus> {
    if let Some(pid) = child.id() {
        while has_children(pid) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    signal(child, Signal::SIGTERM);
    finish(child, Duration::from_secs(3)).await;
    child.try_wait().ok().flatten()
}

/// The BLAKE3 hash of a file.
fn hash_file(path: &Path) -> std::io::Result<blake3::Hash> {
    let mut h = blake3::Hasher::new();
    std::io::copy(&mut std::fs::File::open(path)?, &mut h)?;
    Ok(h.finalize())
}

/// Checks that `path` has `bytes` bytes and the hash `want`.
pub fn same_file(path: &Path, bytes: u64, want: blake3::Hash) -> anyhow::Result<()> {
    let len = std::fs::metadata(path)
        .with_context(|| format!("the received file {}", path.display()))?
        .len();
    if len != bytes {
        return Err(anyhow!(
            "the received file has {len} bytes, the source {bytes}"
        ));
    }
    if hash_file(path)? != want {
        return Err(anyhow!(
            "the received file differs from the source (BLAKE3)"
        ));
    }
    Ok(())
}

fn signal(child: &Child, sig: Signal) {
    if let Some(pid) = child.id() {
        let _ = kill(Pid::from_raw(pid as i32), sig);
    }
}

/// Waits for a child until `deadline`; `None` if it is still running then.
async fn wait_until(child: &mut Child, deadline: tokio::time::Instant) -> Option<ExitStatus> {
    tokio::time::timeout_at(deadline, child.wait())
        .await
        .ok()
        .and_then(Result::ok)
}

/// Waits a little for a child to exit after a stop request, then kills it; always reaps it
/// (its CPU time is only counted once it is reaped).
async fn finish(child: &mut Child, grace: Duration) {
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
}

fn line_field(text: &str, key: &str) -> Option<f64> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix(key))
        .and_then(|v| v.parse().ok())
}

fn json_field(text: &str, path: &[&str]) -> Option<f64> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    path.iter().try_fold(&v, |v, k| v.get(k))?.as_f64()
}

/// The last line of a child's output, trimmed (its error message, for instance).
pub fn last_line(s: &str) -> &str {
    s.trim().lines().last().unwrap_or("").trim()
}

impl Env {
    /// Writes the source file (on tmpfs when there is one) and builds or finds the peers
    /// among `peers` that need it.
    pub async fn prepare(
        bytes: u64,
        timeout_s: u64,
        peers: &[String],
        ctp_files: bool,
        baseline: Option<PathBuf>,
    ) -> anyhow::Result<Env> {
        let dir = Scratch::create("ctp-bench").context("creating the bench directory")?;
        std::fs::create_dir_all(dir.path().join("rx")).context("creating the bench directory")?;
        let source = dir.path().join("bench.bin");
        let source_hash = write_pseudo_random(&source, bytes).context("writing the bench file")?;
        let ctp = std::env::current_exe().context("locating the ctp binary")?;
        let wanted = |p: &str| peers.iter().any(|q| q == p);
        let udtperf = if wanted("udt4") {
            build_udt_tool(dir.path(), "udtperf").await
        } else {
            Err("not requested".into())
        };
        let udtfile = if wanted("udt4-file") {
            build_udt_tool(dir.path(), "udtfile").await
        } else {
            Err("not requested".into())
        };
        let ssh = if wanted("scp") || wanted("rsync") {
            super::ssh::Ssh::prepare(&dir.path().join("ssh")).await
        } else {
            Err("not requested".into())
        };
        let quinn = if wanted("quinn") {
            locate_quinn_bench().await
        } else {
            Err("not requested".into())
        };
        Ok(Env {
            dir,
            source,
            bytes,
            timeout: Duration::from_secs(timeout_s.max(1)),
            ctp,
            baseline,
            udtperf,
            udtfile,
            quinn,
            ssh,
            source_hash,
            ctp_files,
        })
    }

    /// Bytes per run.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    fn rx(&self) -> PathBuf {
        self.dir.path().join("rx")
    }

    /// Where a file-writing receiver puts the file: the source's name in [`Self::rx`].
    fn received(&self) -> PathBuf {
        self.rx().join("bench.bin")
    }

    /// The command lines for one contender, or why it cannot run.
    fn plan(&self, c: &Contender, place: Place<'_>) -> Result<Plan, String> {
        let port = free_port().to_string();
        let ip = place.receiver_ip();
        let addr = format!("{ip}:{port}");
        let bytes = self.bytes.to_string();
        let plan = Plan::new;
        Ok(match c {
            Contender::Ctp {
                profile,
                cc,
                baseline,
                insecure,
            } => {
                let exe = if *baseline {
                    self.baseline
                        .as_ref()
                        .ok_or("missing: no --baseline binary")?
                } else {
                    &self.ctp
                };
                let mut r = place.command(false, exe);
                let mut s = place.command(true, exe);
                // On a path of several links `coded` runs over all of them at once (the
                // other contenders over the first): a path per link, and a receiver that
                // listens on every address.
                let links = if profile == "coded" {
                    place.links()
                } else {
                    Vec::new()
                };
                let listen = if links.is_empty() {
                    addr.clone()
                } else {
                    format!("0.0.0.0:{port}")
                };
                let partial = if self.ctp_files {
                    r.args(["recv", "--listen", &listen, "--once", "--out"])
                        .arg(self.rx());
                    s.arg("send").arg(&self.source).arg(&addr);
                    Partial::RxDir
                } else {
                    r.args(["perf", "--listen", &listen, "--once"]);
                    s.args(["perf", &addr, "--bytes", &bytes]);
                    Partial::StopCtpReceiver
                };
                for (local, remote) in &links {
                    s.args(["--path", &format!("{local}={remote}:{port}")]);
                }
                r.args(["--json", "--profile", profile]);
                s.args(["--json", "--profile", profile]);
                if *insecure {
                    r.arg("--insecure");
                    s.arg("--insecure");
                }
                // The bench's own identities and known peers, not the user's.
                let keys = self.dir.path().join("keys");
                r.env("CTP_CONFIG_DIR", &keys);
                s.env("CTP_CONFIG_DIR", &keys);
                if let Some(cc) = cc {
                    s.args(["--cc", cc]);
                }
                Plan {
                    verify: self.ctp_files,
                    ..plan(r, s, Report::CtpJson, partial)
                }
            }
            Contender::Peer(p) if p.starts_with("tcp-") => {
                let iperf = which("iperf3")
                    .ok_or("missing: iperf3 not installed (apt-get install iperf3)")?;
                let mut r = place.command(false, &iperf);
                r.args(["-s", "-1", "-J", "-p", &port]);
                let mut s = place.command(true, &iperf);
                s.args(["-c", ip, "-p", &port, "-n", &bytes, "-C", &p[4..], "-J"]);
                plan(r, s, Report::Iperf, Partial::StopSender)
            }
            Contender::Peer(p) if p == "udt4" => {
                let bin = self.udtperf.as_ref().map_err(Clone::clone)?;
                let mut r = place.command(false, bin);
                r.args(["recv", &port]);
                let mut s = place.command(true, bin);
                s.args(["send", ip, &port, &bytes]);
                plan(r, s, Report::Line, Partial::StopReceiver)
            }
            Contender::Peer(p) if p == "srt" => {
                let srt = which("srt-file-transmit")
                    .ok_or("missing: srt-tools not installed (apt-get install srt-tools)")?;
                // File mode (`transtype=file`, srt-file-transmit's default). The listener
                // writes under the caller's stream id, which the caller sometimes fails to
                // derive from the file name: it is given explicitly, and matches the file.
                let mut r = place.command(false, &srt);
                r.args(["-q", &format!("srt://:{port}")])
                    .arg(format!("file://{}", self.received().display()));
                let mut s = place.command(true, &srt);
                s.args(["-q", &format!("file://{}", self.source.display())])
                    .arg(format!("srt://{addr}?streamid=bench.bin"));
                Plan {
                    verify: true,
                    ..plan(r, s, Report::Timed, Partial::RxDir)
                }
            }
            Contender::Peer(p) if p == "quinn" => {
                let bin = self.quinn.as_ref().map_err(Clone::clone)?;
                let mut r = place.command(false, bin);
                r.args(["recv", &addr]);
                let mut s = place.command(true, bin);
                s.args(["send", &addr, &bytes]);
                plan(r, s, Report::Line, Partial::StopReceiver)
            }
            Contender::Peer(p) if p == "udt4-file" => {
                let bin = self.udtfile.as_ref().map_err(Clone::clone)?;
                let mut r = place.command(false, bin);
                r.args(["recv", &port]).arg(self.received());
                let mut s = place.command(true, bin);
                s.args(["send", ip, &port]).arg(&self.source);
                Plan {
                    verify: true,
                    ..plan(r, s, Report::Timed, Partial::RxDir)
                }
            }
            Contender::Peer(p) if p == "scp" || p == "rsync" => {
                let ssh = self.ssh.as_ref().map_err(Clone::clone)?;
                let s = if p == "scp" {
                    ssh.scp(place, &self.source, ip, &port, &self.rx())
                } else {
                    ssh.rsync(place, &self.source, ip, &port, &self.rx())?
                };
                let r = ssh.server(place, ip, &port)?;
                Plan {
                    serves: true,
                    verify: true,
                    ..plan(r, s, Report::TimedToSender, Partial::RxDir)
                }
            }
            Contender::Peer(p) if p == super::http::CURL || p == super::http::CURL_PROXY => {
                let ports = super::http::Ports {
                    http: free_port(),
                    proxy: free_port(),
                    socks: free_port(),
                };
                let keys = self.dir.path().join("keys");
                let proxied = p == super::http::CURL_PROXY;
                let received = self.received();
                let c = super::http::commands(
                    place,
                    &self.ctp,
                    &keys,
                    &self.source,
                    &received,
                    &ports,
                    proxied,
                )?;
                Plan {
                    verify: true,
                    lingers: true,
                    ..plan(c.server, c.client, Report::TimedToSender, Partial::RxDir)
                }
            }
            Contender::Peer(p) => return Err(format!("missing: unknown peer {p}")),
        })
    }

    /// Runs one contender once on `place`.
    pub async fn run(&self, c: &Contender, place: Place<'_>) -> Result<Measure, String> {
        let plan = self.plan(c, place)?;
        let _ = std::fs::remove_dir_all(self.rx());
        let _ = std::fs::create_dir_all(self.rx());
        self.pair(plan).await.map_err(|e| format!("failed: {e:#}"))
    }

    async fn pair(&self, plan: Plan) -> anyhow::Result<Measure> {
        let Plan {
            mut recv,
            mut send,
            report,
            partial,
            serves,
            verify,
            lingers,
        } = plan;
        let spawn = |c: &mut Command| -> std::io::Result<Child> {
            c.stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
        };
        let mut r = spawn(&mut recv).context("starting the receiver")?;
        let r_io = Output::capture(&mut r);
        tokio::time::sleep(Duration::from_millis(300)).await;
        if let Ok(Some(status)) = r.try_wait() {
            let (_, err) = r_io.collect().await;
            return Err(anyhow!(
                "the receiver exited at once ({status}): {}",
                last_line(&err)
            ));
        }
        let c0 = cpu_children();
        let t0 = Instant::now();
        let deadline = tokio::time::Instant::now() + self.timeout;
        let mut s = spawn(&mut send).context("starting the sender")?;
        let s_io = Output::capture(&mut s);

        // Reap the sender first, then the receiver, so that the CPU deltas are per side (a
        // child's CPU time enters RUSAGE_CHILDREN when it is reaped).
        let s_status = wait_until(&mut s, deadline).await;
        let sender_elapsed = t0.elapsed().as_secs_f64();
        let c1 = cpu_children();
        if let Some(st) = s_status.filter(|st| !st.success()) {
            // A failed sender leaves its receiver waiting: no point in waiting for the cap.
            let _ = r.start_kill();
            let _ = r.wait().await;
            let (_, s_err) = s_io.collect().await;
            return Err(anyhow!("the sender failed ({st}): {}", last_line(&s_err)));
        }
        let r_status = match s_status {
            Some(_) if lingers => {
                signal(&r, Signal::SIGTERM);
                finish(&mut r, Duration::from_secs(3)).await;
                r.try_wait().ok().flatten()
            }
            Some(_) if serves => stop_server(&mut r, deadline).await,
            Some(_) => wait_until(&mut r, deadline).await,
            None => None,
        };
        let c2 = cpu_children();
        let elapsed = t0.elapsed().as_secs_f64();
        let (Some(s_status), Some(r_status)) = (s_status, r_status) else {
            // Capped: stop it and read how far it got.
            let grace = Duration::from_secs(3);
            let rx_bytes = dir_bytes(&self.rx());
            match partial {
                Partial::RxDir => {}
                Partial::StopReceiver => signal(&r, Signal::SIGTERM),
                Partial::StopSender => signal(&s, Signal::SIGINT),
                Partial::StopCtpReceiver => {
                    // The receiver first, so that it reports before the sender's end
                    // could break its stream.
                    signal(&r, Signal::SIGINT);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    signal(&s, Signal::SIGINT);
                }
            }
            finish(&mut s, grace).await;
            let c1 = cpu_children();
            finish(&mut r, grace).await;
            let c2 = cpu_children();
            let (r_out, _) = r_io.collect().await;
            let moved = match partial {
                Partial::RxDir => Some(rx_bytes),
                Partial::StopReceiver => line_field(&r_out, "bytes=").map(|b| b as u64),
                Partial::StopSender => {
                    json_field(&r_out, &["end", "sum_received", "bytes"]).map(|b| b as u64)
                }
                Partial::StopCtpReceiver => json_field(&r_out, &["bytes"]).map(|b| b as u64),
            }
            .ok_or_else(|| {
                anyhow!(
                    "capped at {} s and the receiver did not say how much it received",
                    self.timeout.as_secs()
                )
            })?;
            return Ok(Measure {
                goodput_mbps: moved as f64 * 8.0 / elapsed / 1e6,
                bytes: moved,
                sender_cpu_s: c1 - c0,
                receiver_cpu_s: c2 - c1,
                capped: true,
                verified: false,
                retransmissions: None,
            });
        };
        let (r_out, r_err) = r_io.collect().await;
        let (s_out, _) = s_io.collect().await;
        debug_assert!(s_status.success());
        // A serving receiver was stopped by the bench: its exit status says nothing.
        if !serves && !lingers && !r_status.success() {
            return Err(anyhow!(
                "the receiver failed ({r_status}): {}",
                last_line(&r_err)
            ));
        }
        let (goodput, bytes) = match report {
            Report::CtpJson => (
                json_field(&s_out, &["goodput_mbps"]),
                Some(self.bytes as f64),
            ),
            Report::Iperf => (
                json_field(&s_out, &["end", "sum_received", "bits_per_second"]).map(|b| b / 1e6),
                json_field(&s_out, &["end", "sum_received", "bytes"]),
            ),
            Report::Line => (line_field(&r_out, "mbps="), line_field(&r_out, "bytes=")),
            Report::Timed | Report::TimedToSender => {
                let b = dir_bytes(&self.rx()) as f64;
                let secs = match report {
                    Report::TimedToSender => sender_elapsed,
                    _ => elapsed,
                };
                (Some(b * 8.0 / secs / 1e6), Some(b))
            }
        };
        let (Some(goodput_mbps), Some(bytes)) = (goodput, bytes) else {
            return Err(anyhow!(
                "no goodput in the output: {}",
                last_line(if s_out.trim().is_empty() {
                    &r_out
                } else {
                    &s_out
                })
            ));
        };
        // iperf3 ends its test when the client has written everything and stops counting
        // at the server then: its received bytes fall short by what was still in flight,
        // and its goodput is the rate of what it counted. Everything else must be complete.
        let bytes = match report {
            Report::Iperf => self.bytes as f64,
            _ if (bytes as u64) < self.bytes => {
                return Err(anyhow!(
                    "only {} of {} bytes arrived",
                    bytes as u64,
                    self.bytes
                ))
            }
            _ => bytes,
        };
        if verify {
            let (path, len, want) = (self.received(), self.bytes, self.source_hash);
            tokio::task::spawn_blocking(move || same_file(&path, len, want))
                .await
                .context("comparing the received file")??;
        }
        Ok(Measure {
            goodput_mbps,
            bytes: bytes as u64,
            sender_cpu_s: c1 - c0,
            receiver_cpu_s: c2 - c1,
            capped: false,
            verified: verify,
            retransmissions: match report {
                Report::CtpJson => json_field(&s_out, &["retransmissions"]).map(|n| n as u64),
                _ => None,
            },
        })
    }
}

/// Writes `bytes` pseudo-random bytes to `path`; returns their BLAKE3 hash.
pub fn write_pseudo_random(path: &Path, bytes: u64) -> std::io::Result<blake3::Hash> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut hash = blake3::Hasher::new();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut buf = vec![0u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        crate::perf::fill_pseudo_random(&mut buf, &mut x);
        let n = left.min(buf.len() as u64) as usize;
        f.write_all(&buf[..n])?;
        hash.update(&buf[..n]);
        left -= n as u64;
    }
    f.flush()?;
    Ok(hash.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_received_file_must_match_the_source_in_size_and_content() {
        let dir = tempfile::tempdir().unwrap();
        let (src, copy) = (dir.path().join("src"), dir.path().join("copy"));
        let want = write_pseudo_random(&src, 100_000).unwrap();
        assert_eq!(hash_file(&src).unwrap(), want);
        std::fs::copy(&src, &copy).unwrap();
        same_file(&copy, 100_000, want).unwrap();
        let mut bytes = std::fs::read(&copy).unwrap();
        bytes[54_321] ^= 1;
        std::fs::write(&copy, &bytes).unwrap();
        let e = same_file(&copy, 100_000, want).unwrap_err().to_string();
        assert!(e.contains("differs"), "{e}");
        bytes.pop();
        std::fs::write(&copy, &bytes).unwrap();
        let e = same_file(&copy, 100_000, want).unwrap_err().to_string();
        assert!(e.contains("99999 bytes"), "{e}");
        assert!(same_file(&dir.path().join("none"), 1, want).is_err());
    }

    #[test]
    fn file_peers_join_the_default_set_only_for_file_runs() {
        assert_eq!(default_peers(false), DEFAULT_PEERS);
        let files = default_peers(true);
        assert!(files.starts_with(&default_peers(false)));
        assert!(files.ends_with(&FILE_PEERS.iter().map(|p| p.to_string()).collect::<Vec<_>>()));
        for p in &files {
            assert!(PEERS.contains(&p.as_str()), "{p}");
        }
    }

    #[test]
    fn a_process_with_a_child_has_children() {
        let mut c = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        assert!(has_children(std::process::id()));
        assert!(!has_children(c.id()));
        c.kill().unwrap();
        c.wait().unwrap();
    }
}
