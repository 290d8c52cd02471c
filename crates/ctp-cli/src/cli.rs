//! Command-line arguments.

use crate::addr::Target;
use crate::keys;
use clap::{Args, Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;

/// `--peer-key` as clap reads it: the error says what a key looks like.
fn parse_key(s: &str) -> Result<[u8; 32], String> {
    keys::parse_key(s).map_err(|e| e.to_string())
}

/// ctp — composable transport protocols over UDP.
#[derive(Debug, Parser)]
#[command(
    name = "ctp",
    version,
    about = "Composable transport protocols over UDP: fast, verified file transfer and path \
             measurement",
    long_about = "ctp — composable transport protocols over UDP.\n\n\
        A transport is composed from microprotocols (reliability, ordering, congestion and \
        flow control, coding, …) chosen by a profile and negotiated with the peer; the `udt` \
        profile speaks the UDT4 wire format. Start with `ctp demo`; move a file with \
        `ctp recv --listen 0.0.0.0:9000 --out DIR` on one host and \
        `ctp send FILE HOST:9000` on the other (verified end to end with BLAKE3); measure a \
        path with `ctp perf`, compare with TCP, UDT4, SRT and QUIC with `ctp bench`."
)]
pub struct Cli {
    /// Log more (repeat for more detail); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Send files and directories to a `ctp recv` (streamed; verified end to end with
    /// BLAKE3; modes and mtimes kept).
    Send(SendArgs),
    /// Receive files; each is written under a temporary name and renamed once verified.
    Recv(RecvArgs),
    /// Create this host's identity (an X25519 key pair in the configuration directory) and
    /// print its public key, which peers pin (`--peer-key`) or allow (`--allow`).
    Keygen(KeygenArgs),
    /// List the built-in profiles and their microprotocols.
    Profiles(ProfilesArgs),
    /// A one-command tour: a verified loopback transfer with progress and a summary.
    Demo(DemoArgs),
    /// A user-space UDP impairment relay: delay, jitter, rate limit, loss, reordering,
    /// duplication, in both directions.
    Relay(RelayArgs),
    /// ctp side by side with kernel TCP, UDT4, SRT and quinn on the same path: goodput, CPU
    /// per GB and ratios.
    Bench(BenchArgs),
    /// Run a simulator scenario (a TOML file, or the name of a shipped one), or `chaos`.
    Sim(SimArgs),
    /// Measure a path memory to memory, as iperf3 does: the sender generates the bytes,
    /// the receiver (`--listen`) reads and discards them; no files, no checksum.
    Perf(PerfArgs),
    /// Carry unmodified TCP applications over ctp: a SOCKS 5 gateway (`proxy client`) and
    /// the far end that connects to their targets (`proxy server`), one stream per TCP
    /// connection on one ctp connection.
    Proxy(ProxyArgs),
    /// Serve the files under a directory to `ctp get`: each file's BLAKE3 segment tree and
    /// its segments, on request.
    Serve(ServeArgs),
    /// Fetch one file from several `ctp serve` mirrors at once, every segment checked
    /// against the file's BLAKE3 tree: a bad mirror is named and its segments fetched from
    /// the others.
    Get(GetArgs),
    /// Print a shell completion script (e.g. `ctp completions bash > ~/.local/share/bash-completion/completions/ctp`).
    Completions(CompletionsArgs),
    /// Print the manual page, in roff (e.g. `ctp man > ctp.1; man ./ctp.1`).
    Man,
}

impl Command {
    /// Whether the command was asked for JSON output (`--json`): its failures are then
    /// reported as JSON on stdout too.
    pub fn json(&self) -> bool {
        match self {
            Command::Send(a) => a.transport.json,
            Command::Recv(a) => a.transport.json,
            Command::Keygen(a) => a.json,
            Command::Perf(a) => a.transport.json,
            Command::Profiles(a) => a.json,
            Command::Demo(a) => a.json,
            Command::Relay(a) => a.json,
            Command::Bench(a) => a.json,
            Command::Sim(a) => a.json,
            Command::Proxy(a) => match &a.side {
                ProxySide::Client(c) => c.transport.json,
                ProxySide::Server(s) => s.transport.json,
            },
            Command::Serve(a) => a.transport.json,
            Command::Get(a) => a.transport.json,
            Command::Completions(_) | Command::Man => false,
        }
    }
}

/// `ctp proxy`.
#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// Which end.
    #[command(subcommand)]
    pub side: ProxySide,
}

/// The two ends of `ctp proxy`.
#[derive(Debug, Subcommand)]
pub enum ProxySide {
    /// The gateway beside the applications: a SOCKS 5 server (no authentication, CONNECT;
    /// e.g. `curl --socks5-hostname 127.0.0.1:1080 URL`) whose every connection becomes a
    /// stream to `ctp proxy server`.
    Client(ProxyClientArgs),
    /// The far end: takes the gateway's streams and connects to their targets over TCP
    /// (host names resolved here).
    Server(ProxyServerArgs),
}

/// `ctp proxy client`.
#[derive(Debug, Args)]
pub struct ProxyClientArgs {
    /// Address to take SOCKS 5 connections on (e.g. 127.0.0.1:1080; anyone who can reach
    /// it can use the proxy, so keep it local).
    #[arg(value_parser = crate::addr::parse, short, long)]
    pub listen: SocketAddr,
    /// The `ctp proxy server` to carry the connections to (HOST:PORT).
    #[arg(value_parser = crate::addr::parse_target, short, long)]
    pub server: Target,
    /// Congestion control of what this side sends (see `ctp send --cc`; the same default).
    #[arg(long, value_name = "NAME")]
    pub cc: Option<String>,
    /// Paths to the server.
    #[command(flatten)]
    pub routes: RouteArgs,
    /// Encryption and keys (the server's key is pinned or trusted on first use, as
    /// `ctp send` does).
    #[command(flatten)]
    pub security: SendSecurityArgs,
    /// Transport options.
    #[command(flatten)]
    pub transport: TransportArgs,
}

/// `ctp proxy server`.
#[derive(Debug, Args)]
pub struct ProxyServerArgs {
    /// Address to listen on for `ctp proxy client`s, e.g. 0.0.0.0:9080.
    #[arg(value_parser = crate::addr::parse, short, long)]
    pub listen: SocketAddr,
    /// Serve any client. The server opens TCP connections wherever its clients ask, so
    /// without this only clients whose key is in `--allow` are served.
    #[arg(long)]
    pub open: bool,
    /// Congestion control of what this side sends (see `ctp send --cc`; the same default).
    #[arg(long, value_name = "NAME")]
    pub cc: Option<String>,
    /// Encryption and keys (`--allow FILE` names the clients served).
    #[command(flatten)]
    pub security: RecvSecurityArgs,
    /// Transport options.
    #[command(flatten)]
    pub transport: TransportArgs,
}

/// `ctp completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

/// `ctp perf`.
#[derive(Debug, Args)]
pub struct PerfArgs {
    /// Send to this `ctp perf --listen` address (e.g. 127.0.0.1:9000).
    #[arg(value_parser = crate::addr::parse_target, required_unless_present = "listen", conflicts_with = "listen")]
    pub addr: Option<Target>,
    /// Receive instead: listen on this address, report each stream as it ends.
    #[arg(value_parser = crate::addr::parse, short, long)]
    pub listen: Option<SocketAddr>,
    /// Bytes to send (e.g. 1GiB, 64MiB).
    #[arg(long, default_value = "1GiB", conflicts_with = "listen")]
    pub bytes: String,
    /// With `--listen`: exit after one stream (status 0 if it ended in an orderly close).
    #[arg(long)]
    pub once: bool,
    /// Congestion control for the sender (see `ctp send --cc`; the same default).
    #[arg(long, value_name = "NAME")]
    pub cc: Option<String>,
    /// The sender's pin: the receiver's public key (see `ctp send --peer-key`).
    #[arg(long, value_name = "KEY", value_parser = parse_key, conflicts_with = "listen")]
    pub peer_key: Option<[u8; 32]>,
    /// With `--listen`: accept only senders whose public key is in FILE (see `ctp recv
    /// --allow`).
    #[arg(long, value_name = "FILE")]
    pub allow: Option<PathBuf>,
    /// Prove the identity in FILE instead of the configuration directory's (see `ctp send
    /// --key`).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// No encryption and no keys (see `ctp send --insecure`); both sides must say it.
    #[arg(long, conflicts_with_all = ["peer_key", "allow", "key"])]
    pub insecure: bool,
    /// Paths to the peer (with an address; not with --listen).
    #[command(flatten)]
    pub routes: RouteArgs,
    /// Transport options.
    #[command(flatten)]
    pub transport: TransportArgs,
}

impl PerfArgs {
    /// What was asked about encryption and keys.
    pub fn security(&self) -> keys::SecurityArgs {
        keys::SecurityArgs {
            insecure: self.insecure,
            key: self.key.clone(),
            peer_key: self.peer_key,
            allow: self.allow.clone(),
            peer: self.addr.as_ref().map(|t| t.typed.clone()),
        }
    }
}

/// `ctp bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Paths to measure on, comma-separated: `loopback`, `veth-RATE` and
    /// `veth-RATE-lossPERCENT` (e.g. veth-1g, veth-100m, veth-1g-loss0.1, veth-1g-loss5), or
    /// `all` (loopback, veth-1g, veth-100m, veth-1g-loss0.1, veth-1g-loss1, veth-1g-loss5).
    /// veth paths are two network namespaces with a tbf bottleneck and need root.
    /// Long paths go through the bench's IP path emulator (TUN devices in the two
    /// namespaces, root too): `wan-RATE-RTT` and `wan-RATE-RTT-lossPERCENT` (e.g.
    /// wan-200m-60ms, wan-200m-60ms-loss1, wan-50m-200ms-loss2): the data direction shaped
    /// to RATE behind a one-BDP queue and lossy, both directions delayed by half the RTT;
    /// `mp-NxRATE[-RTT][-lossPERCENT]` (e.g. mp-2x100m, mp-2x100m-loss5): N such links
    /// (RTT 60 ms unless given), the loss on all but the first; peers use the first link,
    /// the `coded` profile every link at once.
    #[arg(long, alias = "path", default_value = BenchArgs::PATHS)]
    pub paths: String,
    /// Bytes per run (e.g. 1GiB, 64MiB) [default: 1GiB; 100MiB with --group].
    #[arg(long)]
    pub bytes: Option<String>,
    /// ctp profiles to run, comma-separated; `PROFILE:CC` pins a congestion control (e.g.
    /// `reliable,ctp-bulk:bbr`). The first ctp contender is the reference of the ratios.
    #[arg(long, default_value = BenchArgs::PROFILES)]
    pub profiles: String,
    /// Congestion controls for each profile given without one, comma-separated: `profile`
    /// (the profile's own) or any `ctp send --cc` name (e.g. `profile,bbr`).
    #[arg(long, default_value = BenchArgs::CC)]
    pub cc: String,
    /// Another ctp binary (e.g. a build of an earlier commit) to run beside this one: every
    /// ctp contender runs twice, the second time as `ctp@baseline …` with that binary, so a
    /// change is measured against what it replaces in one run.
    #[arg(long, value_name = "BINARY")]
    pub baseline: Option<std::path::PathBuf>,
    /// Every ctp contender runs twice, the second time with `--insecure` (no encryption):
    /// what encryption costs, measured in one run.
    #[arg(long)]
    pub insecure_twins: bool,
    /// Peers to run, comma-separated: tcp-cubic, tcp-bbr, udt4, srt, quinn, the
    /// file-transfer tools scp, rsync (both over an sshd the bench starts itself) and
    /// udt4-file (UDT4's sendfile/recvfile), and curl (an HTTP fetch of the file from the
    /// sender's side over kernel TCP) and curl-proxy (the same fetch through `ctp proxy`
    /// with the `coded` profile). Default: tcp-cubic, tcp-bbr, udt4, srt, quinn; with
    /// `--ctp-files` also scp, rsync and udt4-file.
    #[arg(long)]
    pub peers: Option<String>,
    /// Runs per contender (the median is reported).
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Time cap of one run in seconds: a run still going then is stopped and reported as
    /// capped, with the goodput it reached (with `--group`: each `ctp send` and `ctp get`,
    /// and a capped one is a failed row).
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    pub timeout: u64,
    /// Also write a bar chart of goodput (one group per path) to this SVG file.
    #[arg(long)]
    pub svg: Option<std::path::PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Only delete the network namespaces left by benches that are no longer running.
    #[arg(long)]
    pub cleanup: bool,
    /// Run ctp as a file transfer (`ctp send`/`recv`: the file read, verified with BLAKE3
    /// and written on tmpfs) instead of memory to memory (`ctp perf`) as every peer runs.
    #[arg(long)]
    pub ctp_files: bool,
    /// Instead of the table: a legitimate transfer (`--bytes`, profile `reliable`) timed
    /// unloaded and again while the receiver holds `--flood-idle` idle connections and
    /// takes a handshake flood of `--flood-pps`; the receiver's RSS before, during, after.
    #[arg(long)]
    pub flood: bool,
    /// Idle connections of `--flood` (from 16 loopback addresses).
    #[arg(long, value_name = "N", default_value_t = 4000)]
    pub flood_idle: usize,
    /// Handshake requests per second of `--flood`.
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    pub flood_pps: u32,
    /// The `--flood` receiver (started by the bench itself).
    #[arg(value_parser = crate::addr::parse, long, value_name = "ADDR", hide = true)]
    pub flood_server: Option<SocketAddr>,
    /// Instead of the table: the group connections on loopback, each receiver and mirror
    /// behind a `ctp relay` of its own (`--group-rate`, `--group-delay`): `ctp send --to`
    /// three receivers against three `ctp send` in sequence and in parallel; `ctp get` from
    /// three mirrors against one; and from three with one mirror's relay killed on the way.
    /// Every received file is compared with the source.
    #[arg(long)]
    pub group: bool,
    /// Rate of each relay of `--group`, each direction (as `ctp relay --rate`).
    #[arg(
        long,
        value_name = "RATE",
        default_value = "100mbit",
        requires = "group"
    )]
    pub group_rate: String,
    /// One-way delay of each relay of `--group` (as `ctp relay --delay`).
    #[arg(long, value_name = "DELAY", default_value = "5ms", requires = "group")]
    pub group_delay: String,
}

impl BenchArgs {
    /// The default of `--paths`.
    pub const PATHS: &'static str = "loopback";
    /// The default of `--profiles`.
    pub const PROFILES: &'static str = "reliable";
    /// The default of `--cc`.
    pub const CC: &'static str = "profile";
    /// The default of `--bytes`.
    pub const BYTES: &'static str = "1GiB";
    /// The default of `--bytes` with `--group`.
    pub const GROUP_BYTES: &'static str = "100MiB";
}

/// `ctp relay`.
#[derive(Debug, Args)]
pub struct RelayArgs {
    /// Address clients send to.
    #[arg(value_parser = crate::addr::parse, short, long)]
    pub listen: SocketAddr,
    /// Address datagrams are relayed to (the server).
    #[arg(value_parser = crate::addr::parse, long)]
    pub to: SocketAddr,
    /// One-way propagation delay (e.g. 30ms).
    #[arg(long, default_value = "0")]
    pub delay: String,
    /// Uniform jitter added to the delay, ± (e.g. 2ms).
    #[arg(long, default_value = "0")]
    pub jitter: String,
    /// Rate limit per direction (e.g. 200mbit); unlimited when absent.
    #[arg(long)]
    pub rate: Option<String>,
    /// Queue limit in datagrams (drop-tail) in front of the rate limit.
    #[arg(long, default_value_t = 1000)]
    pub queue: usize,
    /// Random (Bernoulli) loss (e.g. 1% or 0.01).
    #[arg(long)]
    pub loss: Option<String>,
    /// Gilbert–Elliott loss `p,r,h,k` (transition good→bad, bad→good; delivery
    /// probability in the bad and good states), e.g. 1%,10%,0,100%.
    #[arg(long, value_name = "P,R,H,K")]
    pub ge_loss: Option<String>,
    /// Share of datagrams held back (reordered) by up to --reorder-extra.
    #[arg(long, default_value = "0")]
    pub reorder: String,
    /// Largest extra delay of a reordered datagram.
    #[arg(long, default_value = "10ms")]
    pub reorder_extra: String,
    /// Share of datagrams delivered twice.
    #[arg(long, default_value = "0")]
    pub duplicate: String,
    /// Seed of the impairments' randomness.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Stop after this many seconds (otherwise at Ctrl-C).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Print the counters as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Options shared by the transfer commands.
#[derive(Debug, Clone, Args)]
pub struct TransportArgs {
    /// Profile to use: a built-in name (see `ctp profiles`) or a profile file (NAME.toml).
    #[arg(short, long, default_value = "reliable")]
    pub profile: String,
    /// Give up when nothing is heard from the peer for this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    pub idle_timeout: f64,
    /// Give up connecting after this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub handshake_timeout: f64,
    /// Print the summary as JSON (and no progress bar).
    #[arg(long)]
    pub json: bool,
    /// Carry the file as a plain stream: no ctp file header or checksum; the end of the
    /// connection is the end of the file (so any UDT4 application can be the other side).
    #[arg(long)]
    pub raw: bool,
    /// Add the performance monitor (UDT's counters: totals and values at the end) to the
    /// summary.
    #[arg(long)]
    pub stats: bool,
    /// A listener accepts at most this many connections at once from one address (any
    /// port), so that one host cannot take every slot.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_per_address: usize,
}

/// The paths of a connecting command.
#[derive(Debug, Args, Default)]
pub struct RouteArgs {
    /// A path to the peer: from LOCAL, an IP address of this machine, to HOST:PORT (another
    /// address of the peer; default: the peer address given). Repeat it for several paths;
    /// the first is the one the connection starts on. With `--profile coded` the
    /// connection runs over all of them at once (per-path round trip, loss and tokens; a
    /// path that stops answering is left until it answers again); other profiles use the
    /// first and move to the next one's local address when it stops answering.
    #[arg(long = "path", value_name = "LOCAL[=HOST:PORT]", value_parser = crate::addr::parse_route)]
    pub routes: Vec<crate::addr::Route>,
}

/// `ctp send`.
#[derive(Debug, Args)]
pub struct SendArgs {
    /// Files and directories to send, on one connection, then the receiver's address,
    /// HOST:PORT (e.g. localhost:9000, 192.0.2.7:9000, [::1]:9000), unless `--to` names
    /// the receivers. A directory is sent with everything under it (empty directories
    /// too); symbolic links inside it are skipped with a warning, one named here is
    /// followed. Each keeps its own name on the receiver.
    #[arg(required = true, value_name = "PATH... HOST:PORT")]
    pub operands: Vec<String>,
    /// The files and directories of `operands`.
    #[arg(skip)]
    pub paths: Vec<PathBuf>,
    /// The receiver of `operands` (`None` with `--to`).
    #[arg(skip)]
    pub addr: Option<Target>,
    /// Send to several receivers at once, comma-separated HOST:PORT (each its own
    /// connection, keys, congestion and flow control); `--mode` says when the transfer is
    /// done.
    #[arg(long, value_delimiter = ',', value_parser = crate::addr::parse_target, value_name = "HOST:PORT,...")]
    pub to: Vec<Target>,
    /// With `--to`: `all` (every receiver gets everything; the default), `any` (done once
    /// one receiver has it), `at-least=P` (once P have it), `spread=kKpP` (each PATH to K
    /// receivers in turn, done once P have it) or `balanced=kKpP` (each PATH to the K
    /// least loaded receivers). Transfers still running when the mode holds are stopped,
    /// and their receivers keep nothing of them.
    #[arg(long, requires = "to", value_name = "MODE", value_parser = parse_mode)]
    pub mode: Option<ctp::Mode>,
    /// Congestion control: bbr-fair (the default with the `reliable` profile), newreno,
    /// cubic, bbr, udt, udt-noisy, scalable, highspeed, bic, westwood, vegas, fast, blast,
    /// group, ctcp (replaces the profile's; the receiver adopts it).
    #[arg(long, value_name = "NAME")]
    pub cc: Option<String>,
    /// Local address to bind (default: any port); with `--rendezvous` the peer connects to it.
    #[arg(value_parser = crate::addr::parse, long, value_name = "ADDR")]
    pub bind: Option<SocketAddr>,
    /// Rendezvous set-up (`udt` profiles): both sides connect to each other, nobody listens.
    #[arg(long)]
    pub rendezvous: bool,
    /// Send file content at most this fast, in bits per second as `ctp relay --rate`
    /// takes them: e.g. 10mbit (10 Mbit/s = 1.25 MB/s), 500kbit, 1gbit. The connection's
    /// headers and retransmissions come on top (a few percent). Unlimited when absent.
    #[arg(long, value_name = "RATE")]
    pub limit_rate: Option<String>,
    /// Resume: the receiver keeps what arrives of a file if the transfer breaks (a hidden
    /// `.NAME.ctp-partial` beside the destination), and a later `--resume` transfer of the
    /// same files sends only what it lacks, after checking the part it kept block by block
    /// (BLAKE3 of 1 MiB blocks); the whole file is verified as always.
    #[arg(long, conflicts_with = "raw")]
    pub resume: bool,
    /// Paths to the receiver.
    #[command(flatten)]
    pub routes: RouteArgs,
    /// Encryption and keys.
    #[command(flatten)]
    pub security: SendSecurityArgs,
    /// Transport options.
    #[command(flatten)]
    pub transport: TransportArgs,
}

impl SendArgs {
    /// Splits `operands` into the paths and the receiver (the last operand, unless `--to`
    /// names the receivers); says what is wrong otherwise.
    pub fn resolve_operands(&mut self) -> Result<(), String> {
        let mut operands = self.operands.clone();
        if self.to.is_empty() {
            if operands.len() < 2 {
                return Err(
                    "name what to send and the receiver: ctp send PATH... HOST:PORT (or --to HOST:PORT,...)"
                        .into(),
                );
            }
            let last = operands.pop().unwrap_or_default();
            self.addr = Some(crate::addr::parse_target(&last)?);
        } else if let Some(last) = operands.last() {
            if crate::addr::parse(last).is_ok() && !std::path::Path::new(last).exists() {
                return Err(format!(
                    "{last} looks like a receiver: give the receivers either after the paths or with --to, not both"
                ));
            }
        }
        self.paths = operands.into_iter().map(PathBuf::from).collect();
        Ok(())
    }
}

fn parse_mode(s: &str) -> Result<ctp::Mode, String> {
    s.parse::<ctp::Mode>().map_err(|e| e.to_string())
}

/// `ctp serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The directory whose files are served (nothing outside it is).
    #[arg(long, value_name = "DIR")]
    pub root: PathBuf,
    /// Address to listen on, e.g. 0.0.0.0:9000.
    #[arg(value_parser = crate::addr::parse, short, long)]
    pub listen: SocketAddr,
    /// Encryption and keys.
    #[command(flatten)]
    pub security: RecvSecurityArgs,
    /// Transport options.
    #[command(flatten)]
    pub transport: TransportArgs,
}

/// `ctp get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// The file's name under the mirrors' `--root` (e.g. images/disk.iso).
    pub name: String,
    /// The mirrors, comma-separated HOST:PORT (each a `ctp serve`).
    #[arg(long, required = true, value_delimiter = ',', value_parser = crate::addr::parse_target, value_name = "HOST:PORT,...")]
    pub from: Vec<Target>,
    /// Where to put the file: a path, or an existing directory to keep its name in.
    #[arg(short, long)]
    pub out: PathBuf,
    /// The file's BLAKE3 hash (64 hexadecimal digits, as `b3sum` prints): only a file with
    /// it is accepted, whatever the mirrors say. Without it, the hash most mirrors agree on
    /// is trusted.
    #[arg(long, value_name = "HEX")]
    pub hash: Option<String>,
    /// Replace a file that exists at `--out`.
    #[arg(long)]
    pub overwrite: bool,
    /// Encryption and keys.
    #[command(flatten)]
    pub security: SendSecurityArgs,
    /// Transport options.
    #[command(flatten)]
    pub transport: TransportArgs,
}

/// The keys and encryption options of `ctp send`.
#[derive(Debug, Clone, Args)]
pub struct SendSecurityArgs {
    /// Pin the receiver's public key: 44 characters of base64, as `ctp keygen --show` or
    /// `ctp recv` prints it on the receiver's host. The connection is refused unless the
    /// receiver proves this key. Without it the receiver's key is trusted the first time
    /// and remembered under the address as typed (`known_peers` in the configuration
    /// directory); a different key later is refused.
    #[arg(long, value_name = "KEY", value_parser = parse_key)]
    pub peer_key: Option<[u8; 32]>,
    /// Prove the identity in FILE (a private key, mode 0600, as `ctp keygen --dir DIR`
    /// writes it) instead of the configuration directory's: $CTP_CONFIG_DIR,
    /// $XDG_CONFIG_HOME/ctp or ~/.config/ctp, where one is created on first use.
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// No encryption and no keys: the peer is not authenticated and anyone on the path can
    /// read and alter what is sent. The receiver must be `--insecure` too.
    #[arg(long, conflicts_with_all = ["peer_key", "key"])]
    pub insecure: bool,
}

impl SendSecurityArgs {
    /// What was asked about encryption and keys, by a side that connects to `peer` (the
    /// address as typed, under which a first-use key is remembered).
    pub fn for_peer(&self, peer: &Target) -> keys::SecurityArgs {
        keys::SecurityArgs {
            insecure: self.insecure,
            key: self.key.clone(),
            peer_key: self.peer_key,
            allow: None,
            peer: Some(peer.typed.clone()),
        }
    }
}

/// `ctp recv`.
#[derive(Debug, Args)]
pub struct RecvArgs {
    /// Address to listen on, e.g. 0.0.0.0:9000.
    #[arg(value_parser = crate::addr::parse, short, long)]
    pub listen: SocketAddr,
    /// Output file, or an existing directory to keep the sender's file name in.
    #[arg(short, long)]
    pub out: PathBuf,
    /// Exit after one file: status 0 if it was received and verified, non-zero otherwise.
    #[arg(long)]
    pub once: bool,
    /// Replace a file that already exists under the received name (otherwise the transfer
    /// is refused, and the sender told why).
    #[arg(long)]
    pub overwrite: bool,
    /// Rendezvous with the sender at this address instead of listening (`udt` profiles;
    /// implies `--once`).
    #[arg(value_parser = crate::addr::parse, long, value_name = "PEER")]
    pub rendezvous: Option<SocketAddr>,
    /// Encryption and keys.
    #[command(flatten)]
    pub security: RecvSecurityArgs,
    /// Transport options.
    #[command(flatten)]
    pub transport: TransportArgs,
}

/// The keys and encryption options of `ctp recv`.
#[derive(Debug, Clone, Args)]
pub struct RecvSecurityArgs {
    /// Accept only senders whose public key is in FILE: one `KEY [comment]` a line (KEY as
    /// `ctp keygen --show` prints it on the sender's host), `#` comment lines, blank lines.
    /// Without it any sender is accepted.
    #[arg(long, value_name = "FILE")]
    pub allow: Option<PathBuf>,
    /// Prove the identity in FILE (a private key, mode 0600, as `ctp keygen --dir DIR`
    /// writes it) instead of the configuration directory's: $CTP_CONFIG_DIR,
    /// $XDG_CONFIG_HOME/ctp or ~/.config/ctp, where one is created on first use.
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// No encryption and no keys: senders are not authenticated and anyone on the path can
    /// read and alter what arrives. The sender must be `--insecure` too.
    #[arg(long, conflicts_with_all = ["allow", "key"])]
    pub insecure: bool,
}

impl RecvSecurityArgs {
    /// What was asked about encryption and keys, by a side that listens.
    pub fn for_listener(&self) -> keys::SecurityArgs {
        keys::SecurityArgs {
            insecure: self.insecure,
            key: self.key.clone(),
            peer_key: None,
            allow: self.allow.clone(),
            peer: None,
        }
    }
}

/// `ctp keygen`.
#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Replace an existing identity. Peers that pinned or remembered its public key refuse
    /// this host afterwards, until they are given the new one.
    #[arg(long, conflicts_with = "show")]
    pub force: bool,
    /// Only print the existing public key (create none).
    #[arg(long)]
    pub show: bool,
    /// Keep the identity in DIR instead of the configuration directory ($CTP_CONFIG_DIR,
    /// $XDG_CONFIG_HOME/ctp or ~/.config/ctp); `--key DIR/id_x25519` then uses it.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Print JSON: `{"public_key": …, "path": …, "created": …}`.
    #[arg(long)]
    pub json: bool,
}

/// `ctp profiles`.
#[derive(Debug, Args)]
pub struct ProfilesArgs {
    /// Show one profile's composition (a built-in name or a profile file) and the events
    /// each microprotocol binds.
    #[arg(long, value_name = "PROFILE")]
    pub explain: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `ctp demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// MiB to move over clean loopback.
    #[arg(long, default_value_t = 256)]
    pub mib: u64,
    /// MiB to move, per profile, over the emulated long lossy path (0 skips that part).
    #[arg(long, default_value_t = 2)]
    pub lossy_mib: u64,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `ctp sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Scenario file or name (e.g. `udt-fairness`), `chaos` for a chaos campaign, or
    /// `scale`: the heap per idle secure channel and per idle stream, each side, counted
    /// by this binary's allocator over 10 000 `reliable` connections between two in-memory
    /// endpoints (`--connections`), 100 of them with 100 idle streams each.
    pub scenario: String,
    /// Seed, overriding the scenario's.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write throughput.svg and throughput.csv into this directory.
    #[arg(short, long)]
    pub out: Option<PathBuf>,
    /// Chaos: number of seeds to run (default 100).
    #[arg(long)]
    pub seeds: Option<u64>,
    /// Chaos: first seed (default 0).
    #[arg(long)]
    pub start: Option<u64>,
    /// Chaos: threads running seeds (default: one per core).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Scale: connections to open (default 10 000).
    #[arg(long)]
    pub connections: Option<usize>,
}
