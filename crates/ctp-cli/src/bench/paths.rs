//! The paths a bench runs on: loopback; two network namespaces joined by a veth pair with
//! a `tbf` bottleneck and optional random loss from `iptables -m statistic`; or two
//! namespaces joined by emulated links ([`super::emu`]: TUN devices and a user-space
//! forwarder with rate, queue, delay and loss), for long paths (`wan-…`, `mp-…`).
//!
//! Layout of a veth path (created per path, deleted when the [`Netns`] guard drops):
//!
//! ```text
//!  netns ctpb-PID-N-s                       netns ctpb-PID-N-r
//!  10.77.0.1/30  ctpbPIDsN ── veth ── ctpbPIDrN  10.77.0.2/30
//!  root qdisc: tbf rate R                   iptables INPUT -i ctpbPIDrN -s 10.77.0.1
//!  TSO/GSO/UDP GSO off                         -m statistic --probability P -j DROP
//!                                           GRO off
//! ```
//!
//! The sender's side shapes and the receiver's side drops, so only the data direction is
//! limited and lossy; acknowledgements travel back unshaped and unharmed. Offloads are off so
//! that the bottleneck and the loss act on single wire packets, never on 64 KB super-packets.

use super::emu::Emulator;
use super::programs::sh;
use anyhow::{anyhow, bail};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use tokio::process::Command;

/// Prefix of every namespace the bench creates: `ctpb-PID-N-s` and `ctpb-PID-N-r`.
pub const NETNS_PREFIX: &str = "ctpb-";
/// The sender's address on a veth path.
pub const SENDER_IP: &str = "10.77.0.1";
/// The receiver's address on a veth path.
pub const RECEIVER_IP: &str = "10.77.0.2";

/// The standard set, in table order (`--paths all`).
pub const ALL: &[&str] = &[
    "loopback",
    "veth-1g",
    "veth-100m",
    "veth-1g-loss0.1",
    "veth-1g-loss1",
    "veth-1g-loss5",
];

/// RTT of an `mp-…` path that names none.
pub const MP_DEFAULT_RTT_US: u64 = 60_000;

/// Longest RTT an emulated path may have.
const MAX_RTT_US: u64 = 5_000_000;

/// TCP buffer limits in an emulated path's namespaces: up to 16 MiB each way, three
/// bandwidth-delay products of the longest standard path (200 Mbit/s × 200 ms = 5 MB).
pub const TCP_BUFFERS: [&str; 2] = [
    "net.ipv4.tcp_rmem=4096 131072 16777216",
    "net.ipv4.tcp_wmem=4096 16384 16777216",
];

/// One emulated link of a `wan-…` or `mp-…` path.
#[derive(Clone, Debug, PartialEq)]
pub struct EmuLink {
    /// Rate of the data direction, bits per second.
    pub rate_bps: u64,
    /// Round-trip time the link adds, microseconds (half each way).
    pub rtt_us: u64,
    /// Random loss on the data direction, in percent (0 = none).
    pub loss_percent: f64,
}

impl EmuLink {
    /// Packets of [`super::emu::MTU`] bytes in one bandwidth-delay product: the data
    /// direction's queue (at least 16).
    pub fn queue_packets(&self) -> usize {
        let bdp_bytes = self.rate_bps as u128 * self.rtt_us as u128 / 8 / 1_000_000;
        (bdp_bytes / super::emu::MTU as u128).clamp(16, 1 << 20) as usize
    }

    /// The emulator's configuration: the data direction shaped to the rate behind a
    /// one-BDP drop-tail queue, lossy, and delayed by half the RTT; the reverse direction
    /// delayed by the other half only (like the veth paths, where only the data direction
    /// is shaped and lossy).
    pub fn config(&self) -> super::emu::LinkConfig {
        use crate::relay::model::{Impairments, Loss};
        let one_way = self.rtt_us / 2;
        super::emu::LinkConfig {
            forward: Impairments {
                delay_us: one_way,
                rate_bps: Some(self.rate_bps),
                queue_limit: self.queue_packets(),
                loss: if self.loss_percent > 0.0 {
                    Loss::Bernoulli(self.loss_percent / 100.0)
                } else {
                    Loss::None
                },
                ..Impairments::default()
            },
            reverse: Impairments {
                delay_us: self.rtt_us - one_way,
                rate_bps: None,
                ..Impairments::default()
            },
        }
    }
}

/// A path to measure on, as parsed from `--paths`.
#[derive(Clone, Debug, PartialEq)]
pub enum PathSpec {
    /// 127.0.0.1, unshaped: the CPU-bound ceiling.
    Loopback,
    /// A veth pair between two namespaces.
    Veth {
        /// The `tbf` bottleneck, bits per second.
        rate_bps: u64,
        /// Random loss on the data direction, in percent (0 = none).
        loss_percent: f64,
    },
    /// Emulated links between two namespaces (`coded` uses all, other contenders the first).
    Emulated {
        /// The links, in order.
        links: Vec<EmuLink>,
    },
}

const PATH_HINT: &str = "a path is `loopback`, `veth-RATE[-lossPERCENT]`, \
                         `wan-RATE-RTT[-lossPERCENT]` or `mp-NxRATE[-RTT][-lossPERCENT]` \
                         (e.g. veth-1g, veth-1g-loss0.1, wan-200m-60ms-loss1, mp-2x100m-loss5), \
                         or `all`";

/// A rate like `1g` or `100m` (bits per second) in path `name`.
fn parse_rate(name: &str, rate: &str) -> Result<u64, String> {
    match crate::units::rate_bps(&format!("{rate}bit")) {
        Ok(r) if r > 0 => Ok(r),
        _ => Err(format!(
            "path `{name}`: `{rate}` is not a rate like 1g, 100m or 10m; {PATH_HINT}"
        )),
    }
}

/// A loss percentage like `0.1` or `5` (after `-loss`) in path `name`.
fn parse_loss(name: &str, loss: &str) -> Result<f64, String> {
    match loss.parse::<f64>() {
        Ok(p) if p > 0.0 && p < 100.0 => Ok(p),
        _ => Err(format!(
            "path `{name}`: loss `{loss}` must be a percentage above 0 and below 100 \
             (e.g. loss0.1, loss5)"
        )),
    }
}

/// An RTT like `60ms` in path `name`.
fn parse_rtt(name: &str, rtt: &str) -> Result<u64, String> {
    match crate::units::duration_us(rtt) {
        Ok(us) if us > 0 && us <= MAX_RTT_US => Ok(us),
        Ok(_) => Err(format!(
            "path `{name}`: RTT `{rtt}` must be above 0 and at most {} s",
            MAX_RTT_US / 1_000_000
        )),
        Err(e) => Err(format!(
            "path `{name}`: RTT `{rtt}` is not a duration like 60ms ({e}); {PATH_HINT}"
        )),
    }
}

/// Splits `-lossP` off the end of `rest`: (what comes before, P if present).
fn split_loss(rest: &str) -> (&str, Option<&str>) {
    match rest.split_once("-loss") {
        Some((r, l)) => (r, Some(l)),
        None => (rest, None),
    }
}

impl PathSpec {
    /// Parses one name: `loopback`, `veth-RATE[-lossPERCENT]`, `wan-RATE-RTT[-lossPERCENT]`
    /// or `mp-NxRATE[-RTT][-lossPERCENT]`, with RATE like `1g` or `100m` (bits per
    /// second), RTT like `60ms` and PERCENT like `0.1` or `5`. An `mp-` path has N links of
    /// the rate (RTT 60 ms unless given); its loss applies to every link but the first.
    pub fn parse(name: &str) -> Result<PathSpec, String> {
        if name == "loopback" {
            return Ok(PathSpec::Loopback);
        }
        if let Some(rest) = name.strip_prefix("veth-") {
            let (rate, loss) = split_loss(rest);
            return Ok(PathSpec::Veth {
                rate_bps: parse_rate(name, rate)?,
                loss_percent: loss.map_or(Ok(0.0), |l| parse_loss(name, l))?,
            });
        }
        if let Some(rest) = name.strip_prefix("wan-") {
            let (rest, loss) = split_loss(rest);
            let Some((rate, rtt)) = rest.split_once('-') else {
                return Err(format!(
                    "path `{name}`: a wan path needs a rate and an RTT, \
                     e.g. wan-200m-60ms or wan-200m-60ms-loss1"
                ));
            };
            return Ok(PathSpec::Emulated {
                links: vec![EmuLink {
                    rate_bps: parse_rate(name, rate)?,
                    rtt_us: parse_rtt(name, rtt)?,
                    loss_percent: loss.map_or(Ok(0.0), |l| parse_loss(name, l))?,
                }],
            });
        }
        if let Some(rest) = name.strip_prefix("mp-") {
            let (rest, loss) = split_loss(rest);
            let (links, rtt) = match rest.split_once('-') {
                Some((l, rtt)) => (l, Some(rtt)),
                None => (rest, None),
            };
            let bad_count = || {
                format!(
                    "path `{name}`: an mp path is `mp-NxRATE` with 2 to {} links \
                     (e.g. mp-2x100m, mp-2x100m-60ms-loss5)",
                    super::emu::MAX_LINKS
                )
            };
            let (n, rate) = links.split_once('x').ok_or_else(bad_count)?;
            let n: usize = n.parse().map_err(|_| bad_count())?;
            if !(2..=super::emu::MAX_LINKS).contains(&n) {
                return Err(bad_count());
            }
            let rate_bps = parse_rate(name, rate)?;
            let rtt_us = rtt.map_or(Ok(MP_DEFAULT_RTT_US), |r| parse_rtt(name, r))?;
            let loss = loss.map_or(Ok(0.0), |l| parse_loss(name, l))?;
            return Ok(PathSpec::Emulated {
                links: (0..n)
                    .map(|i| EmuLink {
                        rate_bps,
                        rtt_us,
                        loss_percent: if i == 0 { 0.0 } else { loss },
                    })
                    .collect(),
            });
        }
        Err(format!("unknown path `{name}`: {PATH_HINT}"))
    }

    /// Parses a comma-separated list; `all` stands for [`ALL`]. Duplicates are dropped.
    pub fn parse_list(list: &str) -> Result<Vec<(String, PathSpec)>, String> {
        let mut out: Vec<(String, PathSpec)> = Vec::new();
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let names: Vec<&str> = if name == "all" {
                ALL.to_vec()
            } else {
                vec![name]
            };
            for n in names {
                let spec = PathSpec::parse(n)?;
                if !out.iter().any(|(_, s)| *s == spec) {
                    out.push((n.to_string(), spec));
                }
            }
        }
        if out.is_empty() {
            return Err(format!(
                "--paths is empty: give one or more of {}, or `all`",
                ALL.join(", ")
            ));
        }
        Ok(out)
    }

    /// Whether it needs root (namespaces, qdiscs, iptables, TUN devices).
    pub fn needs_root(&self) -> bool {
        !matches!(self, PathSpec::Loopback)
    }

    /// A one-line description for the table's section header.
    pub fn describe(&self) -> String {
        match self {
            PathSpec::Loopback => "127.0.0.1, unshaped (CPU-bound ceiling)".into(),
            PathSpec::Veth {
                rate_bps,
                loss_percent,
            } => {
                let (_, burst, limit) = tbf_params(*rate_bps);
                let mut s = format!(
                    "veth between two namespaces, tbf {} (burst {burst} B, queue {limit} B), offloads off",
                    human_rate(*rate_bps)
                );
                if *loss_percent > 0.0 {
                    s += &format!(", {loss_percent}% random loss on the data direction");
                }
                s
            }
            PathSpec::Emulated { links } => {
                let each: Vec<String> = links
                    .iter()
                    .map(|l| {
                        let mut s = format!(
                            "{}, RTT {} ms, queue {} packets (1 BDP)",
                            human_rate(l.rate_bps),
                            l.rtt_us as f64 / 1000.0,
                            l.queue_packets()
                        );
                        if l.loss_percent > 0.0 {
                            s += &format!(", {}% random loss", l.loss_percent);
                        }
                        s
                    })
                    .collect();
                let what = if links.len() == 1 {
                    "emulated link (TUN + user-space forwarder)".to_string()
                } else {
                    format!(
                        "{} emulated links (TUN + user-space forwarder; ctp coded uses all, the other contenders the first)",
                        links.len()
                    )
                };
                format!(
                    "{what}: {}; data direction shaped{}, reverse only delayed",
                    each.join(" | "),
                    if links.iter().any(|l| l.loss_percent > 0.0) {
                        " and lossy"
                    } else {
                        ""
                    }
                )
            }
        }
    }
}

fn human_rate(bps: u64) -> String {
    if bps.is_multiple_of(1_000_000_000) {
        format!("{} Gbit/s", bps / 1_000_000_000)
    } else {
        format!("{} Mbit/s", bps as f64 / 1e6)
    }
}

/// `tbf` parameters for a rate: (rate in bytes/s, burst in bytes, queue limit in bytes).
///
/// Burst is 1 ms of the rate (125 000 B at 1 Gbit/s, 12 500 B at 100 Mbit/s) and at least
/// 16 full-size frames: large enough that the qdisc's timer can keep the link busy between
/// wake-ups (a burst below rate × timer slack caps the rate under the setting), small enough
/// that nothing passes the bottleneck much faster than its rate. The queue holds 5 ms of the
/// rate (625 000 B at 1 Gbit/s, 62 500 B at 100 Mbit/s): on this sub-millisecond path that is
/// many BDPs, so a loss-based controller can fill the link, yet it is bounded so overshoot
/// turns into drops within milliseconds instead of hiding in a deep queue.
pub fn tbf_params(rate_bps: u64) -> (u64, u64, u64) {
    let bytes_per_s = rate_bps / 8;
    let burst = (bytes_per_s / 1000).max(16 * 1514);
    let limit = (bytes_per_s / 200).max(burst + 16 * 1514);
    (bytes_per_s, burst, limit)
}

/// Whether this process may create namespaces.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Names of the namespaces present on the machine that a bench created.
pub fn ours() -> Vec<String> {
    sh(&["ip", "netns", "list"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(NETNS_PREFIX))
        .map(str::to_string)
        .collect()
}

/// The pid in a bench namespace's name (`ctpb-PID-N-s`).
fn owner(name: &str) -> Option<i32> {
    name.strip_prefix(NETNS_PREFIX)?
        .split('-')
        .next()?
        .parse()
        .ok()
}

/// Namespaces left by a bench that is no longer running (crashed or killed with SIGKILL).
/// One named after this very process is stale too: it was left by an earlier process that
/// had the same pid, since this one deletes its own before it returns.
pub fn stale() -> Vec<String> {
    ours()
        .into_iter()
        .filter(|n| {
            owner(n).is_none_or(|pid| {
                !std::path::Path::new(&format!("/proc/{pid}")).exists()
                    || pid == std::process::id() as i32
            })
        })
        .collect()
}

/// Kills the processes still running inside namespaces (the peers of a bench that was
/// killed itself: they would wait for a path that is gone, and keep the namespace alive).
pub fn kill_inside(names: &[String]) {
    for name in names {
        let pids = sh(&["ip", "netns", "pids", name]).unwrap_or_default();
        for pid in pids.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Deletes namespaces (their veth ends go with them); returns the ones that could not be.
pub fn delete(names: &[String]) -> Vec<String> {
    names
        .iter()
        .filter(|n| sh(&["ip", "netns", "del", n]).is_err())
        .cloned()
        .collect()
}

/// Where the loss counts of [`Netns::drops`] come from.
enum LossCounter {
    /// No random loss on the path.
    None,
    /// The `iptables` rule on this input interface of the receiver's namespace.
    Iptables {
        /// The receiver's veth interface.
        receiver_if: String,
    },
    /// The emulator's models; the count at the last reset.
    Emulator {
        /// [`Emulator::loss_drops`] when the count was last reset.
        base: AtomicU64,
    },
}

/// A path's two namespaces (and the emulator that joins them on an emulated path),
/// deleted on drop (normal end, error, or an interrupted run: `main` drops the running
/// future on Ctrl-C and SIGTERM before exiting with 130).
pub struct Netns {
    /// The sender's namespace.
    pub sender: String,
    /// The receiver's namespace.
    pub receiver: String,
    /// The receiver's address the peers connect to.
    receiver_ip: String,
    /// The sender's address on the same link.
    sender_ip: String,
    losses: LossCounter,
    /// The emulated links (stopped before the namespaces are deleted).
    emulator: Option<Emulator>,
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Forwarders stopped and TUN devices closed first: nothing left inside.
        drop(self.emulator.take());
        let left = delete(&[self.sender.clone(), self.receiver.clone()]);
        if !left.is_empty() {
            eprintln!(
                "ctp bench: could not delete namespaces {}; remove them with `ctp bench --cleanup`",
                left.join(", ")
            );
        }
    }
}

impl Netns {
    /// Creates the two (empty) namespaces, after checking that `tools` are installed.
    fn pair(
        tools: &[&str],
        (sender_ip, receiver_ip): (&str, &str),
    ) -> anyhow::Result<(Netns, u32, u32)> {
        // Checked before anything exists: a missing tool leaves nothing to delete.
        for tool in tools {
            if !super::programs::on_path(tool) {
                bail!(
                    "`{tool}` is not installed: apt-get install iproute2 ethtool iptables procps"
                );
            }
        }
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let pid = std::process::id();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let ns = Netns {
            sender: format!("{NETNS_PREFIX}{pid}-{n}-s"),
            receiver: format!("{NETNS_PREFIX}{pid}-{n}-r"),
            receiver_ip: receiver_ip.to_string(),
            sender_ip: sender_ip.to_string(),
            losses: LossCounter::None,
            emulator: None,
        };
        // From here on, dropping `ns` deletes whatever was created.
        sh(&["ip", "netns", "add", &ns.sender])?;
        sh(&["ip", "netns", "add", &ns.receiver])?;
        Ok((ns, pid, n))
    }

    /// Creates the namespaces joined by emulated links ([`super::emu`]); peers use the
    /// first link.
    pub fn emulated(links: &[EmuLink], seed: u64) -> anyhow::Result<Netns> {
        let ((sender_ip, receiver_ip), lossy) = (
            super::emu::link_addresses(0),
            links.iter().any(|l| l.loss_percent > 0.0),
        );
        let (mut ns, _, _) = Netns::pair(&["ip", "sysctl"], (&sender_ip, &receiver_ip))?;
        // A new namespace's TCP may buffer 4 MiB for sending: less than the 5 MB a
        // 200 Mbit/s × 200 ms path holds in flight. These limits are the namespace's own
        // (the machine's stay as they are); UDP buffers are bounded by the machine-wide
        // net.core.rmem_max / wmem_max, which a namespace cannot raise.
        for side in [&ns.sender, &ns.receiver] {
            sh(&[
                "ip",
                "netns",
                "exec",
                side,
                "sysctl",
                "-qw",
                TCP_BUFFERS[0],
                TCP_BUFFERS[1],
            ])?;
        }
        let configs: Vec<_> = links.iter().map(EmuLink::config).collect();
        ns.emulator = Some(Emulator::start(&ns.sender, &ns.receiver, &configs, seed)?);
        if lossy {
            ns.losses = LossCounter::Emulator {
                base: AtomicU64::new(0),
            };
        }
        Ok(ns)
    }

    /// The emulator of an emulated path.
    pub fn emulator(&self) -> Option<&Emulator> {
        self.emulator.as_ref()
    }

    /// The receiver's address the peers connect to.
    pub fn receiver_ip(&self) -> &str {
        &self.receiver_ip
    }

    /// The sender's address on the link the peers use.
    pub fn sender_ip(&self) -> &str {
        &self.sender_ip
    }

    /// Creates the namespaces, the veth pair, the bottleneck and the loss rule.
    pub fn veth(rate_bps: u64, loss_percent: f64) -> anyhow::Result<Netns> {
        let tools = ["ip", "tc", "ethtool", "iptables"];
        let (mut ns, pid, n) = Netns::pair(&tools, (SENDER_IP, RECEIVER_IP))?;
        // Interface names have at most 15 bytes: "ctpb" + pid (≤ 7 digits) + side + n.
        let (s_if, r_if) = (format!("ctpb{pid}s{n}"), format!("ctpb{pid}r{n}"));
        if r_if.len() > 15 {
            bail!("interface name {r_if} is too long");
        }
        if loss_percent > 0.0 {
            ns.losses = LossCounter::Iptables {
                receiver_if: r_if.clone(),
            };
        }
        let (s, r) = (ns.sender.as_str(), ns.receiver.as_str());
        sh(&[
            "ip", "link", "add", &s_if, "netns", s, "type", "veth", "peer", "name", &r_if, "netns",
            r,
        ])?;
        let (_, burst, limit) = tbf_params(rate_bps);
        for (side, iface, ip) in [(s, &s_if, SENDER_IP), (r, &r_if, RECEIVER_IP)] {
            sh(&[
                "ip",
                "-n",
                side,
                "addr",
                "add",
                &format!("{ip}/30"),
                "dev",
                iface,
            ])?;
            sh(&["ip", "-n", side, "link", "set", iface, "up"])?;
            sh(&["ip", "-n", side, "link", "set", "lo", "up"])?;
        }
        // `gso off` alone leaves `tx-udp-segmentation` on: UDP_SEGMENT sends (ctp, quinn)
        // would cross the veth as 64 KB super-packets and lose them whole.
        sh(&[
            "ip",
            "netns",
            "exec",
            s,
            "ethtool",
            "-K",
            &s_if,
            "tso",
            "off",
            "gso",
            "off",
            "tx-udp-segmentation",
            "off",
            "tx-gso-list",
            "off",
        ])?;
        sh(&[
            "ip", "netns", "exec", r, "ethtool", "-K", &r_if, "gro", "off",
        ])?;
        sh(&[
            "tc",
            "-n",
            s,
            "qdisc",
            "add",
            "dev",
            &s_if,
            "root",
            "tbf",
            "rate",
            &format!("{rate_bps}bit"),
            "burst",
            &burst.to_string(),
            "limit",
            &limit.to_string(),
        ])?;
        if loss_percent > 0.0 {
            sh(&[
                "ip",
                "netns",
                "exec",
                r,
                "iptables",
                "-A",
                "INPUT",
                "-i",
                &r_if,
                "-s",
                SENDER_IP,
                "-m",
                "statistic",
                "--mode",
                "random",
                "--probability",
                &format!("{}", loss_percent / 100.0),
                "-j",
                "DROP",
            ])?;
        }
        Ok(ns)
    }

    /// Packets the path's random loss has dropped since it was created or last reset;
    /// `None` when the path has no random loss.
    pub fn drops(&self, reset: bool) -> anyhow::Result<Option<u64>> {
        let receiver_if = match &self.losses {
            LossCounter::None => return Ok(None),
            LossCounter::Emulator { base } => {
                let now = self.emulator.as_ref().map_or(0, Emulator::loss_drops);
                let since = now.saturating_sub(base.load(Ordering::Relaxed));
                if reset {
                    base.store(now, Ordering::Relaxed);
                }
                return Ok(Some(since));
            }
            LossCounter::Iptables { receiver_if } => receiver_if,
        };
        let mut args = vec![
            "ip",
            "netns",
            "exec",
            &self.receiver,
            "iptables",
            "-L",
            "INPUT",
            "-v",
            "-x",
            "-n",
        ];
        if reset {
            args.push("-Z");
        }
        let table = sh(&args)?;
        table
            .lines()
            .find(|l| l.contains("DROP") && l.contains(receiver_if.as_str()))
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
            .map(Some)
            .ok_or_else(|| anyhow!("no loss rule in the receiver's INPUT chain:\n{table}"))
    }

    /// A command run in one side's namespace.
    pub fn command(&self, sender_side: bool, program: &std::path::Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec"])
            .arg(if sender_side {
                &self.sender
            } else {
                &self.receiver
            })
            .arg(program);
        c
    }
}

/// Where a run happens: loopback, or a path's namespaces (veth or emulated).
#[derive(Clone, Copy)]
pub enum Place<'a> {
    /// 127.0.0.1 in the bench's own namespace.
    Loopback,
    /// Sender and receiver in their namespaces.
    Namespaces(&'a Netns),
}

impl Place<'_> {
    /// The address the receiver listens on and the sender connects to.
    pub fn receiver_ip(&self) -> &str {
        match self {
            Place::Loopback => "127.0.0.1",
            Place::Namespaces(ns) => ns.receiver_ip(),
        }
    }

    /// The sender's address, where a server on the sender's side listens (the data
    /// direction of the path runs from it).
    pub fn sender_ip(&self) -> &str {
        match self {
            Place::Loopback => "127.0.0.1",
            Place::Namespaces(ns) => ns.sender_ip(),
        }
    }

    /// The (sender, receiver) addresses of every link of an emulated path with several
    /// (`mp-…`); empty on other paths.
    pub fn links(&self) -> Vec<(String, String)> {
        let n = match self {
            Place::Namespaces(ns) => ns.emulator().map_or(0, Emulator::links),
            Place::Loopback => 0,
        };
        if n < 2 {
            return Vec::new();
        }
        (0..n).map(super::emu::link_addresses).collect()
    }

    /// `program` run on one side (in that side's namespace on a veth or emulated path).
    pub fn command(&self, sender_side: bool, program: &std::path::Path) -> Command {
        match self {
            Place::Loopback => Command::new(program),
            Place::Namespaces(ns) => ns.command(sender_side, program),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_names_parse() {
        assert_eq!(PathSpec::parse("loopback"), Ok(PathSpec::Loopback));
        assert_eq!(
            PathSpec::parse("veth-1g"),
            Ok(PathSpec::Veth {
                rate_bps: 1_000_000_000,
                loss_percent: 0.0
            })
        );
        assert_eq!(
            PathSpec::parse("veth-100m-loss0.1"),
            Ok(PathSpec::Veth {
                rate_bps: 100_000_000,
                loss_percent: 0.1
            })
        );
        let all = PathSpec::parse_list("all,loopback").unwrap();
        assert_eq!(all.len(), ALL.len());
        for (bad, needle) in [
            ("veth", "unknown path `veth`"),
            ("veth-fast", "`fast` is not a rate"),
            ("veth-1g-loss", "loss ``"),
            ("veth-1g-loss100", "loss `100`"),
            ("veth-1g-lossx", "loss `x`"),
            ("wan", "unknown path `wan`"),
            ("veth-0m", "`0m` is not a rate"),
        ] {
            let e = PathSpec::parse(bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
        assert!(PathSpec::parse_list(" , ").unwrap_err().contains("empty"));
    }

    #[test]
    fn wan_and_mp_names_parse_into_emulated_links() {
        let link = |rate_bps, rtt_us, loss_percent| EmuLink {
            rate_bps,
            rtt_us,
            loss_percent,
        };
        for (name, links) in [
            ("wan-200m-60ms", vec![link(200_000_000, 60_000, 0.0)]),
            ("wan-200m-60ms-loss1", vec![link(200_000_000, 60_000, 1.0)]),
            ("wan-50m-200ms-loss2", vec![link(50_000_000, 200_000, 2.0)]),
            ("wan-1g-0.5ms-loss0.1", vec![link(1_000_000_000, 500, 0.1)]),
            (
                "mp-2x100m",
                vec![
                    link(100_000_000, 60_000, 0.0),
                    link(100_000_000, 60_000, 0.0),
                ],
            ),
            (
                "mp-2x100m-loss5",
                vec![
                    link(100_000_000, 60_000, 0.0),
                    link(100_000_000, 60_000, 5.0),
                ],
            ),
            (
                "mp-3x10m-20ms-loss1",
                vec![
                    link(10_000_000, 20_000, 0.0),
                    link(10_000_000, 20_000, 1.0),
                    link(10_000_000, 20_000, 1.0),
                ],
            ),
        ] {
            assert_eq!(
                PathSpec::parse(name),
                Ok(PathSpec::Emulated { links }),
                "{name}"
            );
        }
        for (bad, needle) in [
            ("wan-", "needs a rate and an RTT"),
            ("wan-200m", "needs a rate and an RTT"),
            ("wan-200m-loss1", "needs a rate and an RTT"),
            ("wan-fast-60ms", "`fast` is not a rate"),
            ("wan-200m-60", "RTT `60` is not a duration"),
            ("wan-200m-0ms", "RTT `0ms` must be above 0"),
            ("wan-200m-10s", "at most 5 s"),
            ("wan-200m-60ms-loss0", "loss `0`"),
            ("wan-200m-60ms-loss", "loss ``"),
            ("wan-200m-60ms-lossy", "loss `y`"),
            ("wan-200m-60ms-x", "RTT `60ms-x`"),
            ("mp-100m", "2 to 8 links"),
            ("mp-1x100m", "2 to 8 links"),
            ("mp-9x100m", "2 to 8 links"),
            ("mp-twox100m", "2 to 8 links"),
            ("mp-2x", "`` is not a rate"),
            ("mp-2x100m-forever", "RTT `forever`"),
            ("mp", "unknown path `mp`"),
        ] {
            let e = PathSpec::parse(bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
        let list = PathSpec::parse_list("wan-200m-60ms,loopback,wan-200m-60ms").unwrap();
        assert_eq!(list.len(), 2);
        assert!(list[0].1.needs_root() && !list[1].1.needs_root());
    }

    #[test]
    fn an_emulated_link_queues_one_bdp_and_splits_its_rtt() {
        let l = EmuLink {
            rate_bps: 200_000_000,
            rtt_us: 60_000,
            loss_percent: 1.0,
        };
        // 200 Mb/s × 60 ms = 1.5 MB = 1000 packets of 1500 B.
        assert_eq!(l.queue_packets(), 1000);
        let c = l.config();
        assert_eq!(c.forward.delay_us + c.reverse.delay_us, 60_000);
        assert_eq!(c.forward.rate_bps, Some(200_000_000));
        assert_eq!(c.forward.queue_limit, 1000);
        assert_eq!(c.forward.loss, crate::relay::model::Loss::Bernoulli(0.01));
        assert_eq!(c.reverse.rate_bps, None);
        assert_eq!(c.reverse.loss, crate::relay::model::Loss::None);
        // An odd RTT is split without losing a microsecond; a tiny BDP still queues 16.
        let tiny = EmuLink {
            rate_bps: 1_000_000,
            rtt_us: 1001,
            loss_percent: 0.0,
        };
        let c = tiny.config();
        assert_eq!(c.forward.delay_us + c.reverse.delay_us, 1001);
        assert_eq!(tiny.queue_packets(), 16);
        assert!(PathSpec::Emulated { links: vec![l] }
            .describe()
            .contains("200 Mbit/s, RTT 60 ms, queue 1000 packets (1 BDP), 1% random loss"));
    }

    #[test]
    fn tbf_burst_and_queue_scale_with_the_rate() {
        assert_eq!(tbf_params(1_000_000_000), (125_000_000, 125_000, 625_000));
        assert_eq!(tbf_params(100_000_000), (12_500_000, 24_224, 62_500));
        let (_, burst, limit) = tbf_params(10_000_000);
        assert!(burst >= 16 * 1514 && limit > burst);
    }

    #[test]
    fn stale_namespaces_are_recognised_by_their_pid() {
        assert_eq!(owner("ctpb-123-0-s"), Some(123));
        assert_eq!(owner("ctpb-x-0-s"), None);
        assert_eq!(owner("other"), None);
    }
}
