//! Running one contender: a receiver and a sender as child processes (in the path's
//! namespaces on a veth path), capped in time, with each side's CPU time taken from
//! `getrusage(RUSAGE_CHILDREN)` as it is reaped.
//!
//! A run that reaches the cap is stopped and reports what it moved so far: the bytes in the
//! receiver's directory (ctp, SRT), the receiver's own line after SIGTERM (UDT4, quinn), or
//! the iperf3 server's JSON after the client got SIGINT (TCP).

use super::paths::{Netns, RECEIVER_IP};
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
pub const PEERS: &[&str] = &["tcp-cubic", "tcp-bbr", "udt4", "srt", "quinn"];

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
}

/// Where a run happens: loopback, or a veth path's namespaces.
#[derive(Clone, Copy)]
pub enum Place<'a> {
    /// 127.0.0.1 in the bench's own namespace.
    Loopback,
    /// Sender and receiver in their namespaces.
    Veth(&'a Netns),
}

impl Place<'_> {
    fn receiver_ip(&self) -> &'static str {
        match self {
            Place::Loopback => "127.0.0.1",
            Place::Veth(_) => RECEIVER_IP,
        }
    }

    fn command(&self, sender_side: bool, program: &Path) -> Command {
        match self {
            Place::Loopback => Command::new(program),
            Place::Veth(ns) => ns.command(sender_side, program),
        }
    }
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
    /// start to the receiver's exit (SRT).
    Timed,
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
}

/// The bench's scratch files and tools.
pub struct Env {
    dir: PathBuf,
    source: PathBuf,
    bytes: u64,
    timeout: Duration,
    ctp: PathBuf,
    /// The `--baseline` ctp binary.
    baseline: Option<PathBuf>,
    udtperf: Result<PathBuf, String>,
    quinn: Result<PathBuf, String>,
    /// ctp moves a file (`send`/`recv`) instead of running memory to memory (`perf`).
    ctp_files: bool,
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

/// The checkout this binary was built from (for `tools/`).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds the UDT4 peer from `tools/udt4/udtperf.cpp` with Debian's libudt-dev.
async fn build_udtperf(out: &Path) -> Result<PathBuf, String> {
    let src = workspace().join("tools/udt4/udtperf.cpp");
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
struct Output {
    stdout: JoinHandle<String>,
    stderr: JoinHandle<String>,
}

impl Output {
    fn capture(child: &mut Child) -> Output {
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

    async fn collect(self) -> (String, String) {
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

fn last_line(s: &str) -> &str {
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
        let wanted = |p: &str| peers.iter().any(|q| q == p);
        let udtperf = if wanted("udt4") {
            build_udtperf(&dir).await
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
            quinn,
            ctp_files,
        })
    }

    /// Bytes per run.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    fn rx(&self) -> PathBuf {
        self.dir.join("rx")
    }

    /// The command lines for one contender, or why it cannot run.
    fn plan(&self, c: &Contender, place: Place<'_>) -> Result<Plan, String> {
        let port = free_port().to_string();
        let ip = place.receiver_ip();
        let addr = format!("{ip}:{port}");
        let bytes = self.bytes.to_string();
        let plan = |recv, send, report, partial| Plan {
            recv,
            send,
            report,
            partial,
        };
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
                let partial = if self.ctp_files {
                    r.args(["recv", "--listen", &addr, "--once", "--out"])
                        .arg(self.rx());
                    s.arg("send").arg(&self.source).arg(&addr);
                    Partial::RxDir
                } else {
                    r.args(["perf", "--listen", &addr, "--once"]);
                    s.args(["perf", &addr, "--bytes", &bytes]);
                    Partial::StopCtpReceiver
                };
                r.args(["--json", "--profile", profile]);
                s.args(["--json", "--profile", profile]);
                if *insecure {
                    r.arg("--insecure");
                    s.arg("--insecure");
                }
                // The bench's own identities and known peers, not the user's.
                let keys = self.dir.join("keys");
                r.env("CTP_CONFIG_DIR", &keys);
                s.env("CTP_CONFIG_DIR", &keys);
                if let Some(cc) = cc {
                    s.args(["--cc", cc]);
                }
                plan(r, s, Report::CtpJson, partial)
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
                    .arg(format!("file://{}", self.rx().join("bench.bin").display()));
                let mut s = place.command(true, &srt);
                s.args(["-q", &format!("file://{}", self.source.display())])
                    .arg(format!("srt://{addr}?streamid=bench.bin"));
                plan(r, s, Report::Timed, Partial::RxDir)
            }
            Contender::Peer(p) if p == "quinn" => {
                let bin = self.quinn.as_ref().map_err(Clone::clone)?;
                let mut r = place.command(false, bin);
                r.args(["recv", &addr]);
                let mut s = place.command(true, bin);
                s.args(["send", &addr, &bytes]);
                plan(r, s, Report::Line, Partial::StopReceiver)
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
        let c1 = cpu_children();
        if let Some(st) = s_status.filter(|st| !st.success()) {
            // A failed sender leaves its receiver waiting: no point in waiting for the cap.
            let _ = r.start_kill();
            let _ = r.wait().await;
            let (_, s_err) = s_io.collect().await;
            return Err(anyhow!("the sender failed ({st}): {}", last_line(&s_err)));
        }
        let r_status = match s_status {
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
            });
        };
        let (r_out, r_err) = r_io.collect().await;
        let (s_out, _) = s_io.collect().await;
        debug_assert!(s_status.success());
        if !r_status.success() {
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
            Report::Timed => {
                let b = dir_bytes(&self.rx()) as f64;
                (Some(b * 8.0 / elapsed / 1e6), Some(b))
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
        Ok(Measure {
            goodput_mbps,
            bytes: bytes as u64,
            sender_cpu_s: c1 - c0,
            receiver_cpu_s: c2 - c1,
            capped: false,
        })
    }
}

fn write_pseudo_random(path: &Path, bytes: u64) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut buf = vec![0u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        crate::perf::fill_pseudo_random(&mut buf, &mut x);
        let n = left.min(buf.len() as u64) as usize;
        f.write_all(&buf[..n])?;
        left -= n as u64;
    }
    f.flush()
}
