//! Command-line arguments.

use clap::{Args, Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;

/// ctp — composable transport protocols over UDP.
#[derive(Debug, Parser)]
#[command(name = "ctp", version, about, long_about = None)]
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
    /// Send a file to a `ctp recv` (streamed; verified end to end with BLAKE3).
    Send(SendArgs),
    /// Receive files; each is written under a temporary name and renamed once verified.
    Recv(RecvArgs),
    /// List the built-in profiles and their microprotocols.
    Profiles(ProfilesArgs),
    /// A one-command tour: a verified loopback transfer with progress and a summary.
    Demo(DemoArgs),
}

/// Options shared by the transfer commands.
#[derive(Debug, Clone, Args)]
pub struct TransportArgs {
    /// Profile to use: a built-in name (see `ctp profiles`) or a profile file (NAME.toml).
    #[arg(long, default_value = "reliable")]
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
}

/// `ctp send`.
#[derive(Debug, Args)]
pub struct SendArgs {
    /// File to send.
    pub file: PathBuf,
    /// Receiver address, e.g. 127.0.0.1:9000.
    pub addr: SocketAddr,
    /// Transport options.
    #[command(flatten)]
    pub transport: TransportArgs,
}

/// `ctp recv`.
#[derive(Debug, Args)]
pub struct RecvArgs {
    /// Address to listen on, e.g. 0.0.0.0:9000.
    #[arg(long)]
    pub listen: SocketAddr,
    /// Output file, or an existing directory to keep the sender's file name in.
    #[arg(long)]
    pub out: PathBuf,
    /// Exit after one file: status 0 if it was received and verified, non-zero otherwise.
    #[arg(long)]
    pub once: bool,
    /// Transport options.
    #[command(flatten)]
    pub transport: TransportArgs,
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
    /// MiB to move.
    #[arg(long, default_value_t = 256)]
    pub mib: u64,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}
