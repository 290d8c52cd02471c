//! The `ctp` command: file transfer, profile listing and the demo.

mod addr;
mod bench;
mod cli;
mod connect;
mod demo;
mod failure;
mod group_send;
mod keygen;
mod keys;
mod mirror;
mod output;
mod perf;
mod profiles;
mod progress;
mod proxy;
mod reference;
mod relay;
mod sim;
mod summary;
mod transfer;
mod units;

use anyhow::{anyhow, Context};
use clap::Parser;
use cli::{Cli, Command, RecvArgs, SendArgs};
use connect::{
    announce_listening, client_endpoint, endpoint_options, interrupted, key_note, native_wire,
    open_connection, reliable_profile, rendezvous, security, with_channel,
};
use ctp::{Connection, Endpoint};
use failure::Failure;
use output::outln;
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;
use summary::{Measured, Summary};

/// The system allocator, counting the heap of each side of `ctp sim scale` while it
/// measures (and nothing otherwise: a thread-local read per call).
#[global_allocator]
static ALLOC: ctp_sim::scale::SideCounting = ctp_sim::scale::SideCounting;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return bad_arguments(e),
    };
    init_logging(cli.verbose);
    ctp::retain_freed_memory();
    let json = cli.command.json();

    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ctp: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = rt.block_on(async {
        match cli.command {
            // The relay stops at Ctrl-C by itself, to print its counters; so does `perf`,
            // to report what arrived before it.
            Command::Relay(a) => relay::run(a).await,
            Command::Perf(a) => perf::run(a).await,
            // A sender or receiver stopped at Ctrl-C tells its peer why before it exits.
            Command::Send(a) => send(a).await,
            Command::Recv(a) => recv(a).await,
            // A chaos campaign stops taking seeds at Ctrl-C and prints its summary.
            Command::Sim(a) if a.scenario == "chaos" => {
                let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
                let flag = stop.clone();
                let mut task = tokio::task::spawn_blocking(move || sim::run_chaos(&a, &flag));
                let joined = tokio::select! {
                    r = &mut task => r,
                    _ = interrupted() => {
                        stop.store(true, std::sync::atomic::Ordering::Relaxed);
                        task.await
                    }
                };
                joined.map_err(|e| Failure::Transfer(anyhow!("chaos campaign failed: {e}")))?
            }
            // Dropping the command's future on Ctrl-C or SIGTERM runs its clean-ups (the
            // bench's namespaces, child processes) before the exit with status 130.
            cmd => tokio::select! {
                r = run(cmd) => r,
                _ = interrupted() => Err(Failure::Interrupted),
            },
        }
    });
    // Do not wait for lingering tasks (a server's accept loop, for instance).
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    let Err(failure) = result else {
        return ExitCode::SUCCESS;
    };
    let (kind, message, status) = match failure {
        Failure::Usage(msg) => ("usage", msg, 2),
        Failure::Transfer(e) => ("failed", format!("{e:#}"), 1),
        Failure::Interrupted => ("interrupted", "interrupted".to_string(), 130),
    };
    eprintln!("ctp: {message}");
    fail_json(json, kind, &message, status)
}

/// With `--json`, the failure on stdout as well, where a script reads results: stable
/// `error`, `kind` ("usage", "failed", "interrupted") and `exit_status` (unless the command
/// already printed its own report there). Returns the exit status.
fn fail_json(json: bool, kind: &str, message: &str, status: u8) -> ExitCode {
    if json && !output::wrote() {
        outln!(
            "{}",
            serde_json::json!({ "error": message, "kind": kind, "exit_status": status })
        );
    }
    ExitCode::from(status)
}

/// Arguments clap refused: its message on stderr as usual and, when `--json` is among
/// them, the failure as JSON too (exit status 2). Help and version requests print as usual.
fn bad_arguments(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let json = std::env::args_os().skip(1).any(|a| a == "--json");
    let asked = matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    if asked || !json {
        e.exit();
    }
    let _ = e.print();
    // clap's message up to its first blank line, plain and on one line: "the following
    // required arguments were not provided: --listen <LISTEN>".
    let text = e.render().to_string();
    let first = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ");
    let first = first.trim_start_matches("error: ");
    fail_json(true, "usage", first, 2)
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

async fn run(cmd: Command) -> Result<(), Failure> {
    match cmd {
        Command::Send(a) => send(a).await,
        Command::Recv(a) => recv(a).await,
        Command::Serve(a) => mirror::serve::serve(a).await,
        Command::Get(a) => mirror::get::get(a).await,
        Command::Keygen(a) => keygen::run(a),
        Command::Profiles(a) => match a.explain {
            Some(p) => profiles::explain_one(&p, a.json),
            None => {
                profiles::run(a.json);
                Ok(())
            }
        },
        Command::Demo(a) => demo::run(a).await,
        Command::Relay(a) => relay::run(a).await,
        Command::Bench(a) => bench::run(a).await,
        Command::Perf(a) => perf::run(a).await,
        Command::Proxy(a) => proxy::run(a).await,
        Command::Completions(a) => {
            reference::completions(a.shell, &mut std::io::stdout());
            Ok(())
        }
        Command::Man => match reference::man(&mut std::io::stdout()) {
            // A reader that stopped early (`ctp man | head`) is not a failure.
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                Err(Failure::Transfer(anyhow!("writing the manual page: {e}")))
            }
            _ => Ok(()),
        },
        // CPU-bound: off the async workers, so Ctrl-C still interrupts.
        Command::Sim(a) => tokio::task::spawn_blocking(move || sim::run(a))
            .await
            .map_err(|e| Failure::Transfer(anyhow!("simulation task failed: {e}")))?,
    }
}

async fn send(mut a: SendArgs) -> Result<(), Failure> {
    a.resolve_operands().map_err(Failure::Usage)?;
    let t = &a.transport;
    let mut profile = profiles::sender_cc(reliable_profile(t)?, &t.profile, a.cc.as_deref())?;
    let raw_refusal = || {
        Failure::Usage(
            "--raw carries exactly one regular file (no name, no manifest): name one".into(),
        )
    };
    // Refused before the sources are walked: a directory named by mistake may be large.
    if t.raw && (a.paths.len() != 1 || a.paths[0].is_dir()) {
        return Err(raw_refusal());
    }
    let sources = transfer::source::collect(&a.paths).map_err(Failure::Usage)?;
    if t.raw && !sources.manifest.is_single_file() {
        return Err(raw_refusal());
    }
    for w in &sources.warnings {
        eprintln!("ctp: warning: {w}");
    }
    let opts = transfer::send::SendOptions {
        resume: a.resume,
        limit_bps: a
            .limit_rate
            .as_deref()
            .map(units::rate_bps)
            .transpose()
            .map_err(|e| Failure::Usage(format!("--limit-rate: {e}")))?,
    };
    let Some(target) = a.addr.clone() else {
        return group_send::send(&a, profile, sources, &opts).await;
    };
    let channel = security(a.security.for_peer(&target), &mut profile)?.channel();
    let ep = client_endpoint(target.resolved, a.bind, t, &profile, channel).await?;
    let work = send_over(&ep, &a, target.resolved, &profile, &sources, &opts);
    until_interrupted(&ep, "the sender", work).await
}

/// Runs `work` on `ep` unless Ctrl-C or SIGTERM comes first: then every peer of `ep` is
/// told that `who` was interrupted (an abort with that reason, sent before `work` and its
/// connections are dropped, so that no peer takes it for a graceful end).
async fn until_interrupted(
    ep: &Endpoint,
    who: &str,
    work: impl std::future::Future<Output = Result<(), Failure>>,
) -> Result<(), Failure> {
    tokio::pin!(work);
    tokio::select! {
        r = &mut work => r,
        signal = interrupted() => Err(interrupt(ep, who, signal).await),
    }
}

/// Tells every peer of `ep` that `who` was interrupted by `signal` (an abort with that
/// reason) and waits, briefly, until the aborts were sent.
async fn interrupt(ep: &Endpoint, who: &str, signal: &str) -> Failure {
    ep.close_with(&format!("{who} was interrupted ({signal})"));
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), ep.closed()).await;
    Failure::Interrupted
}

/// Sends `sources` (the files and directories of `a.paths`) from `ep` as `opts` say.
async fn send_over(
    ep: &Endpoint,
    a: &SendArgs,
    to: SocketAddr,
    profile: &ctp::Profile,
    sources: &transfer::source::Sources,
    opts: &transfer::send::SendOptions,
) -> Result<(), Failure> {
    let t = &a.transport;
    let start = Instant::now();
    let routes = &a.routes.routes;
    let mut conn = open_connection(ep, to, a.rendezvous, profile, routes).await?;
    let manifest = &sources.manifest;
    let total = manifest.total_bytes();
    let pb = progress::Sending::new(progress::bar(total, "send", t.json));
    let what = match &a.paths[..] {
        [one] => one.display().to_string(),
        _ => format!("{} paths", a.paths.len()),
    };
    let watched = conn.clone();
    let sending = pb
        .follow(&watched, async {
            if t.raw {
                let path = &sources.paths[0];
                let native = native_wire(profile);
                transfer::send::send_raw(&mut conn, path, opts.limit_bps, &pb, native)
                    .await
                    .map(|(digest, verified)| (digest, total, verified))
            } else {
                transfer::send::send_files(&conn, sources, opts, &pb)
                    .await
                    .map(|s| (s.digest, s.sent, true))
            }
        })
        .await;
    drop(watched);
    let (digest, sent, verified) =
        sending.with_context(|| format!("sending {what} to {to} failed"))?;
    pb.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();
    let stats = conn.stats();
    let perf = t.stats.then(|| conn.perfmon(false));
    if !t.raw {
        let _ = conn.close().await;
    }
    let (files, dirs) = manifest.counts();
    Summary::new(
        "send",
        Path::new(&what),
        to.to_string(),
        &t.profile,
        Measured {
            bytes: total,
            seconds: secs,
            stats: &stats,
            checksum: &digest,
        },
    )
    .with_counts(files, dirs, sent)
    .with_perf(perf.as_ref())
    .verified(verified)
    .print(t.json);
    if !verified {
        warn_unverified("the receiver");
    }
    Ok(())
}

/// The warning a `--raw` transfer on the UDT4 wire ends with: nothing proves the content
/// `who` has is whole and the sender's.
fn warn_unverified(who: &str) {
    eprintln!(
        "ctp: warning: complete: unverified — the UDT4 wire has no end-of-stream mark and --raw no checksum exchange, so {who} may hold a truncated or altered file"
    );
}

async fn recv(a: RecvArgs) -> Result<(), Failure> {
    let t = a.transport.clone();
    let mut profile = reliable_profile(&t)?;
    check_output(&a.out)?;
    let security = security(a.security.for_listener(), &mut profile)?;
    let note = key_note(&security);
    let opts = endpoint_options(&t, &profile, a.rendezvous.is_none())?;
    let ep = Endpoint::bind(a.listen, with_channel(opts, security.channel()))
        .await
        .with_context(|| format!("cannot listen on {}", a.listen))?;
    let work = receive_on(&ep, &a, &t, &profile, &note);
    until_interrupted(&ep, "the receiver", work).await
}

/// Receives files on `ep`: one (`--once`, `--rendezvous`) or until the endpoint closes.
async fn receive_on(
    ep: &Endpoint,
    a: &RecvArgs,
    t: &cli::TransportArgs,
    profile: &ctp::Profile,
    key_note: &str,
) -> Result<(), Failure> {
    let native = native_wire(profile);
    if let Some(peer) = a.rendezvous {
        let conn = rendezvous(ep, peer, profile)
            .await
            .map_err(|e| anyhow!("rendezvous with {peer} failed: {e}"))?;
        let summary = receive_one(conn, &a.out, a.overwrite, t, native).await?;
        summary.print(t.json);
        return Ok(());
    }
    announce_listening(ep, "", t, key_note);
    if a.once {
        let conn = ep
            .accept()
            .await
            .ok_or_else(|| anyhow!("the endpoint closed before a sender connected"))?;
        let summary = receive_one(conn, &a.out, a.overwrite, t, native).await?;
        summary.print(t.json);
        return Ok(());
    }
    while let Some(conn) = ep.accept().await {
        let (out, t, overwrite) = (a.out.clone(), t.clone(), a.overwrite);
        tokio::spawn(async move {
            let peer = conn.remote_addr();
            match receive_one(conn, &out, overwrite, &t, native).await {
                Ok(s) => s.print(t.json),
                Err(e) => eprintln!("ctp: transfer from {peer} failed: {e:#}"),
            }
        });
    }
    Ok(())
}

/// `--out` must be an existing, writable directory or a path in one: checked at the start
/// (and again for every file, when its header arrives).
fn check_output(out: &Path) -> Result<(), Failure> {
    transfer::precheck::output_dir(out)
        .map(|_| ())
        .map_err(|e| Failure::Usage(format!("--out {}: {e:#}", out.display())))
}

/// Receives one file over `conn`; `native`: the connection runs on the ctp wire.
async fn receive_one(
    mut conn: Connection,
    out: &Path,
    overwrite: bool,
    t: &cli::TransportArgs,
    native: bool,
) -> anyhow::Result<Summary> {
    let (profile, json, raw) = (t.profile.as_str(), t.json, t.raw);
    let start = Instant::now();
    let peer = conn.remote_addr();
    let pb = progress::bar(0, "recv", json);
    let r = if raw {
        transfer::recv::recv_raw(&mut conn, out, overwrite, &pb, native).await
    } else {
        transfer::recv::recv_files(&mut conn, out, overwrite, &pb).await
    }
    .with_context(|| format!("receiving from {peer}"))?;
    pb.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();
    let stats = conn.stats();
    let perf = t.stats.then(|| conn.perfmon(false));
    let _ = conn.close().await;
    if !r.verified {
        warn_unverified("this receiver");
    }
    Ok(Summary::new(
        "recv",
        &r.path,
        peer.to_string(),
        profile,
        Measured {
            bytes: r.bytes,
            seconds: secs,
            stats: &stats,
            checksum: &r.digest,
        },
    )
    .with_counts(r.files, r.dirs, r.received)
    .with_perf(perf.as_ref())
    .verified(r.verified))
}
