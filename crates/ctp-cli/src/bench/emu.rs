//! A user-space IP path emulator: long, lossy paths between the bench's two namespaces for
//! every peer (kernel TCP, quinn, UDT4, SRT, ctp), since this kernel has no netem.
//!
//! Each link is a pair of TUN devices (`IFF_TUN | IFF_NO_PI`, MTU 1500), one in each
//! namespace, with addresses on a /30 of its own ([`link_addresses`]): the kernel routes the
//! peer's address into the TUN device, and a forwarder thread per direction reads the IP
//! packets from one device and writes them into the other at the times the relay's
//! impairment model ([`crate::relay::model::Direction`], one per direction) gives:
//! drop-tail queue drained at a rate, random loss, delay, jitter, reordering, duplication.
//!
//! ```text
//!  netns ctpb-PID-N-s                                  netns ctpb-PID-N-r
//!  emu0 10.78.0.1/30 ──► [forward model] ──► emu0 10.78.0.2/30
//!                    ◄── [reverse model] ◄──
//!  emu1 10.78.1.1/30 ──► … (a second link: its own devices, subnet and models)
//! ```
//!
//! A TUN device is opened by a short-lived thread that enters the namespace (`setns`): the
//! device is created there and its descriptor stays valid in this process. The devices are
//! not persistent, so they disappear with their descriptors: when the [`Emulator`] drops, or
//! when the process dies, whatever the way.
//!
//! Without `TUNSETOFFLOAD` a TUN device offers no segmentation or checksum offload to the
//! stack (and without `IFF_VNET_HDR` it could not pass a GSO packet to user space anyway),
//! so TCP's TSO and UDP's `UDP_SEGMENT` sends are cut into wire-size packets before the
//! forwarder sees them: loss hits single segments. Packets longer than [`MTU`] would be a
//! broken premise; they are counted ([`DirectionStats::oversize`]) and dropped.
//!
//! Timing: each forwarder thread waits in `ppoll` (nanosecond timeout, timer slack set to
//! 1 ns) for either a packet or the next departure, so a departure is late by the wake-up
//! latency of the thread. That lateness is measured per packet ([`Lateness`]).

use super::programs::sh;
use crate::relay::model::{Counters, Direction, Impairments, Verdict};
use anyhow::{bail, Context};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags};
use nix::sys::time::TimeSpec;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The TUN devices' MTU: the largest IP packet a link carries.
pub const MTU: usize = 1500;

/// Packets waiting for their departure in one direction at most (beyond, dropped and
/// counted as queue drops): bounds the memory of an unshaped direction.
const MAX_PENDING: usize = 65_536;

/// Packets read in one go before due departures are looked at again.
const READ_BATCH: usize = 64;

/// How often a forwarder publishes its figures, microseconds (they are read between runs).
const PUBLISH_EVERY_US: u64 = 5_000;

/// Longest wait in `ppoll`: how soon a forwarder notices it must stop.
const MAX_WAIT: Duration = Duration::from_millis(20);

/// Name of link `index`'s TUN device (the same in both namespaces).
pub fn device_name(index: usize) -> String {
    format!("emu{index}")
}

/// Addresses of link `index`: (sender, receiver), the two ends of `10.78.INDEX.0/30`.
pub fn link_addresses(index: usize) -> (String, String) {
    (format!("10.78.{index}.1"), format!("10.78.{index}.2"))
}

/// Links a path may have at most (each needs a subnet of its own).
pub const MAX_LINKS: usize = 8;

/// One emulated link between the two namespaces.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkConfig {
    /// Sender → receiver (the data direction).
    pub forward: Impairments,
    /// Receiver → sender (acknowledgements).
    pub reverse: Impairments,
}

/// Bins of 10 µs in the lateness histogram; the last one holds everything beyond.
const LATE_BINS: usize = 1001;
const LATE_BIN_US: u64 = 10;

/// How late packets left their forwarder compared with the departure time the model gave
/// them, in bins of 10 µs up to 10 ms.
#[derive(Clone, Debug, PartialEq)]
pub struct Lateness {
    bins: Vec<u64>,
    max_us: u64,
}

impl Default for Lateness {
    fn default() -> Self {
        Lateness {
            bins: vec![0; LATE_BINS],
            max_us: 0,
        }
    }
}

impl Lateness {
    /// Counts a packet that left `late_us` after its time.
    pub fn record(&mut self, late_us: u64) {
        let bin = ((late_us / LATE_BIN_US) as usize).min(LATE_BINS - 1);
        self.bins[bin] += 1;
        self.max_us = self.max_us.max(late_us);
    }

    /// Packets counted.
    pub fn count(&self) -> u64 {
        self.bins.iter().sum()
    }

    /// The lateness that a share `q` (0..=1) of the packets did not exceed, in microseconds
    /// (the upper edge of its 10 µs bin; `None` before the first packet).
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.bins.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(if i == LATE_BINS - 1 {
                    self.max_us
                } else {
                    (i as u64 + 1) * LATE_BIN_US
                });
            }
        }
        Some(self.max_us)
    }

    /// The largest lateness seen, microseconds.
    pub fn max_us(&self) -> u64 {
        self.max_us
    }
}

/// Figures of one direction of one link.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DirectionStats {
    /// The impairment model's counters (in, out, lost, queue drops, …).
    pub model: Counters,
    /// Packets written into the far TUN device.
    pub written: u64,
    /// Writes the far device refused (like a loss on the wire).
    pub write_errors: u64,
    /// Packets longer than [`MTU`] read from the near device (dropped).
    pub oversize: u64,
    /// Departure lateness.
    pub lateness: Lateness,
    /// The forwarder runs at a real-time priority ([`FORWARDER_PRIORITY`]).
    pub realtime: bool,
    /// CPU seconds the forwarder thread has used.
    pub cpu_s: f64,
}

/// A summary of a direction's figures, for reports.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct DirectionSummary {
    /// The model's counters.
    pub model: Counters,
    /// Packets written into the far device.
    pub written: u64,
    /// Packets longer than the MTU (dropped).
    pub oversize: u64,
    /// Median departure lateness, microseconds.
    pub late_p50_us: Option<u64>,
    /// 99th percentile of the departure lateness, microseconds.
    pub late_p99_us: Option<u64>,
    /// Largest departure lateness, microseconds.
    pub late_max_us: u64,
    /// The forwarder ran at a real-time priority.
    pub realtime: bool,
    /// CPU seconds the forwarder thread used.
    pub cpu_s: f64,
}

impl DirectionStats {
    /// The figures a report shows.
    pub fn summary(&self) -> DirectionSummary {
        DirectionSummary {
            model: self.model,
            written: self.written,
            oversize: self.oversize,
            late_p50_us: self.lateness.quantile_us(0.5),
            late_p99_us: self.lateness.quantile_us(0.99),
            late_max_us: self.lateness.max_us(),
            realtime: self.realtime,
            cpu_s: self.cpu_s,
        }
    }
}

/// The `ifreq` of `TUNSETIFF`: a name and flags, padded to the kernel's 40 bytes.
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

nix::ioctl_write_ptr_bad!(tun_set_iff, libc::TUNSETIFF, IfReq);

/// Runs `f` on a short-lived thread of its own that has entered the network namespace
/// `netns` (a name under /run/netns), so this process's threads stay where they are.
/// Sockets and devices `f` creates belong to that namespace for as long as they live.
pub fn in_namespace<T: Send + 'static>(
    netns: &str,
    f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    let name = netns.to_string();
    std::thread::spawn(move || -> anyhow::Result<T> {
        let ns = std::fs::File::open(format!("/run/netns/{name}"))
            .with_context(|| format!("opening namespace {name}"))?;
        nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET)
            .with_context(|| format!("entering namespace {name}"))?;
        f()
    })
    .join()
    .map_err(|_| anyhow::anyhow!("a thread working in namespace {netns} panicked"))?
}

/// Opens a new TUN device `name` (`IFF_TUN | IFF_NO_PI`, non-blocking) inside the
/// namespace `netns`.
fn open_tun_in(netns: &str, name: &str) -> anyhow::Result<OwnedFd> {
    if name.len() >= libc::IFNAMSIZ {
        bail!("TUN device name {name} is too long");
    }
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short,
        _pad: [0; 22],
    };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    let what = format!("creating TUN device {name} in {netns}");
    in_namespace(netns, move || {
        use nix::fcntl::OFlag;
        let fd = nix::fcntl::open(
            "/dev/net/tun",
            OFlag::O_RDWR | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .context("opening /dev/net/tun (is the tun module loaded?)")?;
        use std::os::fd::AsRawFd;
        // SAFETY: `fd` is an open /dev/net/tun descriptor and `req` a live, initialised
        // `struct ifreq` (name NUL-terminated: shorter than IFNAMSIZ) for the whole call.
        unsafe { tun_set_iff(fd.as_raw_fd(), &req) }.context(what)?;
        Ok(fd)
    })
}

/// The seed of one direction's model: link `index`, `reverse` or not, of an emulator
/// started with `seed`.
pub fn direction_seed(seed: u64, index: usize, reverse: bool) -> u64 {
    seed ^ ((2 * index + usize::from(reverse)) as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// `SCHED_FIFO` priority of the forwarder threads (1 is the lowest real-time priority).
///
/// A netem qdisc runs in the kernel's softirq, ahead of every process; a forwarder at the
/// default priority instead waits for the CPU behind the very senders and receivers it
/// carries (on a loaded two-core machine, milliseconds at the 99th percentile). A low
/// real-time priority puts it ahead of them. The threads sleep in `ppoll` between packets
/// and use a few per cent of a core at 17 000 packets/s, and the kernel's real-time
/// throttling (`sched_rt_runtime_us`) bounds them anyway.
pub const FORWARDER_PRIORITY: i32 = 10;

/// Moves the calling thread to `SCHED_FIFO` at [`FORWARDER_PRIORITY`]; false when not
/// allowed (not root, or a container without `CAP_SYS_NICE`): it then runs as before.
fn realtime_priority() -> bool {
    let param = libc::sched_param {
        sched_priority: FORWARDER_PRIORITY,
    };
    // SAFETY: `param` is a valid sched_param for the duration of the call; pid 0 is the
    // calling thread; the call has no other memory effects.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0 }
}

/// CPU seconds the calling thread has used.
fn thread_cpu_s() -> f64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(|t| t.tv_sec() as f64 + t.tv_nsec() as f64 / 1e9)
        .unwrap_or(0.0)
}

fn now_us(epoch: Instant) -> u64 {
    epoch.elapsed().as_micros() as u64
}

/// A packet waiting for its departure: time (µs since the epoch), tie-break sequence, bytes.
type Pending = Reverse<(u64, u64, Vec<u8>)>;

/// One direction's forwarder: reads packets from `from`, writes them into `to` at the
/// times `model` gives, until `stop` is set; publishes its figures into `shared`.
struct Forwarder {
    from: Arc<OwnedFd>,
    to: Arc<OwnedFd>,
    model: Direction,
    stop: Arc<AtomicBool>,
    shared: Arc<Mutex<DirectionStats>>,
    epoch: Instant,
}

impl Forwarder {
    fn run(mut self) {
        // The default slack (50 µs) would add itself to every wake-up.
        let _ = nix::sys::prctl::set_timerslack(1);
        let mut pending: BinaryHeap<Pending> = BinaryHeap::new();
        let mut stats = DirectionStats {
            realtime: realtime_priority(),
            ..DirectionStats::default()
        };
        let mut seq = 0u64;
        let mut published = 0u64;
        let mut buf = vec![0u8; 65_536];
        while !self.stop.load(Ordering::Relaxed) {
            let now = now_us(self.epoch);
            while let Some(Reverse((at, ..))) = pending.peek() {
                if *at > now {
                    break;
                }
                let Some(Reverse((at, _, packet))) = pending.pop() else {
                    break;
                };
                stats.lateness.record(now - at);
                match nix::unistd::write(self.to.as_fd(), &packet) {
                    Ok(_) => stats.written += 1,
                    Err(_) => stats.write_errors += 1,
                }
            }
            let wait = pending
                .peek()
                .map_or(MAX_WAIT, |Reverse((at, ..))| {
                    Duration::from_micros(at.saturating_sub(now))
                })
                .min(MAX_WAIT);
            let mut fds = [PollFd::new(self.from.as_fd(), PollFlags::POLLIN)];
            match nix::poll::ppoll(&mut fds, Some(TimeSpec::from_duration(wait)), None) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(_) => {
                    // The device is gone: nothing more to forward.
                    break;
                }
            }
            for _ in 0..READ_BATCH {
                let n = match nix::unistd::read(self.from.as_fd(), &mut buf) {
                    Ok(n) => n,
                    Err(Errno::EINTR) => continue,
                    Err(_) => break,
                };
                if n > MTU {
                    stats.oversize += 1;
                    continue;
                }
                if let Verdict::Forward(times) = self.model.admit(now_us(self.epoch), n) {
                    for at in times {
                        if pending.len() >= MAX_PENDING {
                            self.model.counters.dropped_queue += 1;
                            continue;
                        }
                        seq += 1;
                        pending.push(Reverse((at, seq, buf[..n].to_vec())));
                    }
                }
            }
            let now = now_us(self.epoch);
            if now >= published + PUBLISH_EVERY_US {
                published = now;
                stats.model = self.model.counters;
                stats.cpu_s = thread_cpu_s();
                if let Ok(mut s) = self.shared.lock() {
                    s.clone_from(&stats);
                }
            }
        }
    }
}

/// The emulated links between two namespaces; stopped (threads joined, TUN devices closed
/// and so removed) when dropped.
pub struct Emulator {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// Per link: (forward, reverse) figures, as the forwarders last published them.
    stats: Vec<[Arc<Mutex<DirectionStats>>; 2]>,
    /// The devices (sender's, receiver's) of each link, open as long as the emulator runs.
    _devices: Vec<[Arc<OwnedFd>; 2]>,
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Emulator {
    /// Creates `links` between the namespaces `sender` and `receiver` (which must exist)
    /// and starts forwarding. Link `i` is [`device_name`]`(i)` on both sides with
    /// [`link_addresses`]`(i)`; `seed` seeds the models (each direction its own stream).
    pub fn start(
        sender: &str,
        receiver: &str,
        links: &[LinkConfig],
        seed: u64,
    ) -> anyhow::Result<Emulator> {
        if links.is_empty() || links.len() > MAX_LINKS {
            bail!(
                "an emulated path has 1 to {MAX_LINKS} links, not {}",
                links.len()
            );
        }
        let mut emu = Emulator {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            stats: Vec::new(),
            _devices: Vec::new(),
        };
        // No IPv6 on the links: router solicitations and MLD reports would cross them
        // beside the measured traffic. (A kernel without IPv6 has nothing to switch off.)
        let ipv6 = std::path::Path::new("/proc/sys/net/ipv6").exists();
        for ns in [sender, receiver].into_iter().filter(|_| ipv6) {
            sh(&[
                "ip",
                "netns",
                "exec",
                ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ])?;
        }
        let epoch = Instant::now();
        for (i, link) in links.iter().enumerate() {
            let dev = device_name(i);
            let (s_ip, r_ip) = link_addresses(i);
            let s_fd = Arc::new(open_tun_in(sender, &dev)?);
            let r_fd = Arc::new(open_tun_in(receiver, &dev)?);
            emu._devices.push([s_fd.clone(), r_fd.clone()]);
            for (ns, ip) in [(sender, &s_ip), (receiver, &r_ip)] {
                sh(&[
                    "ip",
                    "-n",
                    ns,
                    "addr",
                    "add",
                    &format!("{ip}/30"),
                    "dev",
                    &dev,
                ])?;
                sh(&[
                    "ip",
                    "-n",
                    ns,
                    "link",
                    "set",
                    &dev,
                    "mtu",
                    &MTU.to_string(),
                    "txqueuelen",
                    "10000",
                    "up",
                ])?;
                sh(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
            }
            let shared = [
                Arc::new(Mutex::new(DirectionStats::default())),
                Arc::new(Mutex::new(DirectionStats::default())),
            ];
            let directions = [
                (s_fd.clone(), r_fd.clone(), link.forward, "fwd"),
                (r_fd, s_fd, link.reverse, "rev"),
            ];
            for (d, (from, to, imp, tag)) in directions.into_iter().enumerate() {
                let forwarder = Forwarder {
                    from,
                    to,
                    model: Direction::new(imp, direction_seed(seed, i, d == 1)),
                    stop: emu.stop.clone(),
                    shared: shared[d].clone(),
                    epoch,
                };
                let t = std::thread::Builder::new()
                    .name(format!("emu{i}-{tag}"))
                    .spawn(move || forwarder.run())
                    .context("starting a forwarder thread")?;
                emu.threads.push(t);
            }
            emu.stats.push(shared);
        }
        Ok(emu)
    }

    /// Links running.
    pub fn links(&self) -> usize {
        self.stats.len()
    }

    /// Link `index`'s (forward, reverse) figures so far.
    pub fn stats(&self, index: usize) -> Option<(DirectionStats, DirectionStats)> {
        let [f, r] = self.stats.get(index)?;
        let read = |m: &Mutex<DirectionStats>| m.lock().map(|s| s.clone()).unwrap_or_default();
        Some((read(f), read(r)))
    }

    /// Packets random loss dropped on the data direction of every link so far.
    pub fn loss_drops(&self) -> u64 {
        (0..self.links())
            .filter_map(|i| self.stats(i))
            .map(|(f, _)| f.model.dropped_loss)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::super::paths::{self, EmuLink, Netns};
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream, UdpSocket};

    #[test]
    fn lateness_quantiles_come_from_the_bins() {
        let mut l = Lateness::default();
        assert_eq!(l.quantile_us(0.5), None);
        for us in [3, 5, 12, 18, 25, 40, 95, 150, 900, 20_000] {
            l.record(us);
        }
        assert_eq!(l.count(), 10);
        assert_eq!(l.quantile_us(0.0), Some(10));
        assert_eq!(l.quantile_us(0.5), Some(30));
        assert_eq!(l.quantile_us(0.9), Some(910));
        // Beyond the last bin: the largest value seen.
        assert_eq!(l.quantile_us(1.0), Some(20_000));
        assert_eq!(l.max_us(), 20_000);
    }

    #[test]
    fn directions_of_links_get_different_seeds() {
        let mut seeds: Vec<u64> = (0..MAX_LINKS)
            .flat_map(|i| [direction_seed(7, i, false), direction_seed(7, i, true)])
            .collect();
        seeds.sort_unstable();
        seeds.dedup();
        assert_eq!(seeds.len(), 2 * MAX_LINKS);
        assert_ne!(direction_seed(7, 0, false), 7);
    }

    /// Skips (with a visible note) unless root with `ip` and `sysctl` installed.
    fn can_emulate(test: &str) -> bool {
        let ok = paths::is_root()
            && super::super::programs::on_path("ip")
            && super::super::programs::on_path("sysctl")
            && std::path::Path::new("/dev/net/tun").exists();
        if !ok {
            eprintln!(
                "\n*** SKIPPED {test}: needs root, iproute2, procps and /dev/net/tun \
                 (emulated paths live in network namespaces) ***\n"
            );
        }
        ok
    }

    fn gone(ns: &[String]) -> bool {
        let present = paths::ours();
        ns.iter().all(|n| !present.contains(n))
    }

    /// Root only: a UDP ping across an emulated link takes its RTT (not less, and not much
    /// more: the tolerance is for a loaded machine, this checks the delay, not speed); a
    /// second, lossy link loses exactly the datagrams its seeded model says; TCP crosses in
    /// wire-size segments; everything is gone after the drop, and after a failed set-up.
    /// (One test: namespaces of this process are counted, so no other may run beside it.)
    #[test]
    fn emulated_links_delay_lose_as_seeded_and_carry_tcp_in_segments() {
        if !can_emulate("emulated_links_delay_lose_as_seeded_and_carry_tcp_in_segments") {
            return;
        }
        const RTT_US: u64 = 40_000;
        const SEED: u64 = 99;
        let links = [
            EmuLink {
                rate_bps: 100_000_000,
                rtt_us: RTT_US,
                loss_percent: 0.0,
            },
            EmuLink {
                rate_bps: 100_000_000,
                rtt_us: RTT_US,
                loss_percent: 10.0,
            },
        ];
        let ns = Netns::emulated(&links, SEED).unwrap();
        let names = [ns.sender.clone(), ns.receiver.clone()];
        let (s0, r0) = link_addresses(0);
        let (s1, r1) = link_addresses(1);
        let udp = |side: &str, ip: String| {
            in_namespace(side, move || Ok(UdpSocket::bind((ip.as_str(), 0))?)).unwrap()
        };

        // RTT: an echo on link 0.
        let echo = udp(&ns.receiver, r0.clone());
        let echo_addr = echo.local_addr().unwrap();
        echo.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let echoer = std::thread::spawn(move || {
            let mut b = [0u8; 64];
            while let Ok((n, from)) = echo.recv_from(&mut b) {
                if echo.send_to(&b[..n], from).is_err() || b[0] == 0xff {
                    break;
                }
            }
        });
        let pinger = udp(&ns.sender, s0);
        pinger
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut rtts = Vec::new();
        for i in 0..20u8 {
            let t = Instant::now();
            pinger.send_to(&[i; 32], echo_addr).unwrap();
            let mut b = [0u8; 64];
            let (n, _) = pinger.recv_from(&mut b).expect("no echo within 2 s");
            assert_eq!((n, b[0]), (32, i));
            rtts.push(t.elapsed().as_micros() as u64);
        }
        let _ = pinger.send_to(&[0xff; 32], echo_addr);
        echoer.join().unwrap();
        rtts.sort_unstable();
        let (min, median) = (rtts[0], rtts[rtts.len() / 2]);
        eprintln!(
            "emulated RTT {RTT_US} µs: min {min} µs, median {median} µs, max {} µs",
            rtts[rtts.len() - 1]
        );
        assert!(
            min >= RTT_US,
            "an echo came back in {min} µs, under the RTT"
        );
        assert!(
            median <= RTT_US + 10_000,
            "median RTT {median} µs, configured {RTT_US} µs"
        );

        // Loss: numbered datagrams over link 1, paced below its rate (no queue drops).
        let sink = udp(&ns.receiver, r1);
        let sink_addr = sink.local_addr().unwrap();
        sink.set_read_timeout(Some(Duration::from_millis(1500)))
            .unwrap();
        let counter = std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut b = [0u8; 2048];
            while let Ok(n) = sink.recv(&mut b) {
                if n >= 4 {
                    got.push(u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                }
            }
            got
        });
        let source = udp(&ns.sender, s1);
        const N: u32 = 2000;
        for i in 0..N {
            let mut d = [0u8; 1000];
            d[..4].copy_from_slice(&i.to_be_bytes());
            source.send_to(&d, sink_addr).unwrap();
            if i % 50 == 49 {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let got = counter.join().unwrap();
        let (fwd, _) = ns.emulator().unwrap().stats(1).unwrap();
        assert_eq!(fwd.model.in_datagrams, N as u64, "{fwd:?}");
        assert_eq!(fwd.model.dropped_queue, 0, "{fwd:?}");
        // The same model with the same seed, fed the same datagrams, loses the same ones.
        let mut model = Direction::new(links[1].config().forward, direction_seed(SEED, 1, false));
        let expected: Vec<u32> = (0..N)
            .filter(|&i| matches!(model.admit(i as u64 * 100, 1028), Verdict::Forward(_)))
            .collect();
        assert_eq!(
            got, expected,
            "delivered datagrams differ from the seeded model's"
        );
        let lost = (N as usize - got.len()) as f64 / N as f64;
        assert!((0.07..0.13).contains(&lost), "loss {lost}, configured 0.10");
        assert_eq!(fwd.model.dropped_loss, N as u64 - got.len() as u64);

        // TCP over link 0: every byte arrives, in segments no larger than the MTU.
        let (before, _) = ns.emulator().unwrap().stats(0).unwrap();
        let r0c = r0.clone();
        let listener = in_namespace(&ns.receiver, move || {
            Ok(TcpListener::bind((r0c.as_str(), 0))?)
        })
        .unwrap();
        let to = listener.local_addr().unwrap();
        let reader = std::thread::spawn(move || {
            let (mut c, _) = listener.accept().unwrap();
            let mut total = 0usize;
            let mut b = vec![0u8; 1 << 16];
            loop {
                match c.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => total += n,
                }
            }
            total
        });
        const BYTES: usize = 2 << 20;
        let mut conn = in_namespace(&ns.sender, move || {
            Ok(TcpStream::connect_timeout(&to, Duration::from_secs(5))?)
        })
        .unwrap();
        conn.write_all(&vec![7u8; BYTES]).unwrap();
        drop(conn);
        assert_eq!(reader.join().unwrap(), BYTES);
        let (after, rev) = ns.emulator().unwrap().stats(0).unwrap();
        assert_eq!(after.oversize, 0);
        let segments = after.model.in_datagrams - before.model.in_datagrams;
        assert!(
            segments as usize >= BYTES / MTU,
            "{segments} packets carried {BYTES} bytes: larger than the MTU"
        );
        eprintln!("link 0 data direction: {:?}", after.summary());
        eprintln!("link 0 reverse direction: {:?}", rev.summary());

        drop(ns);
        assert!(gone(&names), "namespaces left: {:?}", paths::ours());

        // A set-up that fails half-way (after the namespaces exist) leaves nothing either.
        let too_many = vec![links[0].clone(); MAX_LINKS + 1];
        let e = Netns::emulated(&too_many, 1).err().expect("too many links");
        assert!(e.to_string().contains("1 to 8 links"), "{e:#}");
        let mine = format!("{}{}-", paths::NETNS_PREFIX, std::process::id());
        let left: Vec<String> = paths::ours()
            .into_iter()
            .filter(|n| n.starts_with(&mine))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}
