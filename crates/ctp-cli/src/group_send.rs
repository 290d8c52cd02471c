//! `ctp send PATH... --to A,B,C --mode MODE`: the same files to several receivers at once.
//!
//! Each receiver gets ordinary transfers — its own endpoint, keys, connection, congestion
//! and flow control — so a receiver is an ordinary `ctp recv`. The protocol's group policy
//! ([`ctp_proto::group::Group`]) decides, with a transfer as its unit, which receivers get
//! what and when the whole is done: under `all`, `any` and `at-least=P` one transfer of
//! every path to every receiver; under `spread=kKpP` and `balanced=kKpP` one transfer per
//! path, to K receivers (in turn, or the least loaded by the group's metric: the time a
//! receiver's transfers took, times the transfers ahead of it), handed out as receivers
//! finish so that a faster receiver takes more. A receiver whose transfer fails is failed
//! with the reason (printed); its paths go to others where the mode allows, and the send
//! fails, naming every receiver's state, when the mode can no longer hold. Once it holds
//! for every path, transfers still running are stopped with a reason their receivers see
//! (they keep nothing of them, or the partial file with `--resume`).

use crate::addr::Target;
use crate::cli::SendArgs;
use crate::connect::{client_endpoint, open_connection, security};
use crate::failure::Failure;
use crate::outln;
use crate::progress::{self, Sending};
use crate::summary::human_bytes;
use crate::transfer::{self, send::SendOptions, source::Sources};
use anyhow::anyhow;
use bytes::Bytes;
use ctp::{Endpoint, Mode};
use ctp_proto::group::{Group, GroupConfig, GroupEvent, MemberProgress, MemberState};
use indicatif::{MultiProgress, ProgressDrawTarget};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// One receiver of the group.
struct Receiver {
    target: Target,
    ep: Endpoint,
    profile: ctp::Profile,
    /// Transfers given to it so far (the group's ids for its copies).
    placed: u64,
    /// Transfers it confirmed.
    done: u64,
    bytes: u64,
    running: bool,
    /// Its transfer was stopped because the group no longer needed it.
    stopped: bool,
}

/// What a finished transfer task reports: the receiver, and the content bytes sent or why
/// it failed.
type Finished = (usize, Result<u64, String>);

/// Sends `all` (every path of `a`) to the receivers of `a.to` under `a.mode`.
pub async fn send(
    a: &SendArgs,
    profile: ctp::Profile,
    all: Sources,
    opts: &SendOptions,
) -> Result<(), Failure> {
    let t = &a.transport;
    let mode = a.mode.unwrap_or(Mode::All);
    refuse_single_receiver_flags(a)?;
    mode.check(a.to.len())
        .map_err(|e| Failure::Usage(format!("--mode {mode}: {e}")))?;
    let units = Arc::new(units(a, mode, all)?);
    let mut receivers = Vec::with_capacity(a.to.len());
    for target in &a.to {
        let mut p = profile.clone();
        let channel = security(a.security.for_peer(target), &mut p)?.channel();
        let ep = client_endpoint(target.resolved, None, t, &p, channel).await?;
        receivers.push(Receiver {
            target: target.clone(),
            ep,
            profile: p,
            placed: 0,
            done: 0,
            bytes: 0,
            running: false,
            stopped: false,
        });
    }
    let started = Instant::now();
    let now = || ctp_proto::Instant::from_micros(started.elapsed().as_micros() as u64);
    let mut group = Group::new(
        mode,
        GroupConfig {
            // A transfer has its own timeouts; the group fails a receiver when one fails.
            fail_after: Duration::from_secs(u64::from(u32::MAX)),
            buffer: usize::MAX,
            member_backlog: usize::MAX,
        },
    );
    for r in &receivers {
        group
            .add_member(now(), r.target.resolved)
            .map_err(|_| Failure::Usage(format!("--to names {} twice", r.target.typed)))?;
    }
    let bars = MultiProgress::new();
    if t.json {
        bars.set_draw_target(ProgressDrawTarget::hidden());
    }
    let whole = bars.add(progress::count_bar(
        units.len() as u64,
        &mode.to_string(),
        t.json,
    ));
    let mut tasks: JoinSet<Finished> = JoinSet::new();
    let mut next_unit = 0;
    let outcome = loop {
        // Hand out paths while fewer are under way than receivers can take (`balanced`
        // then ranks receivers by what they have done so far).
        let active = receivers
            .iter()
            .filter(|r| group.member_state(r.target.resolved) == Some(&MemberState::Active))
            .count() as u64;
        while next_unit < units.len() && group.next_id() - group.done_below() < active.max(1) {
            let id = Bytes::copy_from_slice(&(next_unit as u64).to_le_bytes());
            if group.submit(now(), id).is_err() {
                break;
            }
            next_unit += 1;
        }
        for (i, r) in receivers.iter_mut().enumerate() {
            let key = r.target.resolved;
            if r.running || group.member_state(key) != Some(&MemberState::Active) {
                continue;
            }
            let Some(copy) = group.next_copy(key) else {
                continue;
            };
            let unit = u64::from_le_bytes(copy.data[..8].try_into().unwrap_or_default()) as usize;
            group.placed(now(), key, r.placed);
            r.placed += 1;
            r.running = true;
            let label = r.target.typed.clone();
            let pb = Sending::new(bars.add(progress::bar(0, &label, t.json)));
            let (ep, to, p, units, opts) = (
                r.ep.clone(),
                r.target.resolved,
                r.profile.clone(),
                units.clone(),
                *opts,
            );
            tasks.spawn(async move {
                let sent = transfer_to(&ep, to, &p, &units[unit].1, &opts, &pb).await;
                pb.finish_and_clear();
                (i, sent)
            });
        }
        for e in std::iter::from_fn(|| group.poll_event()) {
            match e {
                GroupEvent::MemberFailed { member, reason } => {
                    eprintln!("ctp: {member}: {reason}")
                }
                GroupEvent::Failed { .. } => {}
            }
        }
        if let Some(why) = group.failure() {
            break Err(anyhow!("{why}"));
        }
        if next_unit == units.len() && group.done_below() == group.next_id() {
            break Ok(());
        }
        let Some(joined) = tasks.join_next().await else {
            break Err(anyhow!("no receiver can take what is left ({mode})"));
        };
        let (i, result) = joined.map_err(|e| anyhow!("a transfer task failed: {e}"))?;
        let r = &mut receivers[i];
        r.running = false;
        match result {
            Ok(bytes) => {
                r.done += 1;
                r.bytes += bytes;
                let p = MemberProgress {
                    done_below: r.done,
                    ..MemberProgress::default()
                };
                group.progress(now(), r.target.resolved, p);
                whole.set_position(group.done_below());
            }
            Err(why) => {
                let _ = group.fail_member(now(), r.target.resolved, &why);
            }
        }
    };
    whole.finish_and_clear();
    // What is still running is not needed (or cannot help any more): its receivers are
    // told why.
    let why = match &outcome {
        Ok(()) => format!("the group is done ({mode}) without this receiver's transfer"),
        Err(_) => "the group send failed".to_string(),
    };
    for r in receivers.iter_mut().filter(|r| r.running) {
        r.ep.close_with(&why);
        r.stopped = true;
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    report(a, mode, &group, &receivers, started.elapsed(), t.json);
    outcome.map_err(|e| {
        Failure::Transfer(e.context(format!("sending to {} receivers", receivers.len())))
    })
}

/// What one receiver is given at a time: every path (`all`, `any`, `at-least`), or one
/// path each (`spread`, `balanced`).
fn units(a: &SendArgs, mode: Mode, all: Sources) -> Result<Vec<(String, Sources)>, Failure> {
    if matches!(mode, Mode::Spread { .. } | Mode::Balanced { .. }) {
        return a
            .paths
            .iter()
            .map(|p| {
                let s =
                    transfer::source::collect(std::slice::from_ref(p)).map_err(Failure::Usage)?;
                Ok((p.display().to_string(), s))
            })
            .collect();
    }
    let what = match &a.paths[..] {
        [one] => one.display().to_string(),
        many => format!("{} paths", many.len()),
    };
    Ok(vec![(what, all)])
}

/// The options that name one receiver's connection do not apply to a group.
fn refuse_single_receiver_flags(a: &SendArgs) -> Result<(), Failure> {
    let t = &a.transport;
    let given = [
        (t.raw, "--raw"),
        (a.rendezvous, "--rendezvous"),
        (!a.routes.routes.is_empty(), "--path"),
        (a.bind.is_some(), "--bind"),
    ];
    match given.iter().find(|(on, _)| *on) {
        Some((_, flag)) => Err(Failure::Usage(format!(
            "{flag} applies to one receiver, not to --to (each receiver gets its own socket and connection)"
        ))),
        None => Ok(()),
    }
}

/// One transfer of `sources` to `to` from `ep`: the content bytes sent, or why it failed.
async fn transfer_to(
    ep: &Endpoint,
    to: std::net::SocketAddr,
    profile: &ctp::Profile,
    sources: &Sources,
    opts: &SendOptions,
    pb: &Sending,
) -> Result<u64, String> {
    let conn = open_connection(ep, to, false, profile, &[])
        .await
        .map_err(|e| e.to_string())?;
    let sent = pb
        .follow(&conn, transfer::send::send_files(&conn, sources, opts, pb))
        .await
        .map_err(|e| format!("{e:#}"))?;
    let _ = conn.close().await;
    Ok(sent.sent)
}

/// Prints each receiver's outcome and the group's.
fn report(
    a: &SendArgs,
    mode: Mode,
    group: &Group<std::net::SocketAddr>,
    receivers: &[Receiver],
    took: Duration,
    json: bool,
) {
    let states = group.members();
    let state = |i: usize| match (&states[i].state, receivers[i].stopped) {
        (MemberState::Failed(why), _) => format!("failed: {why}"),
        (_, true) => "stopped: not needed".to_string(),
        _ => "done".to_string(),
    };
    if json {
        let rows: Vec<_> = (0..receivers.len())
            .map(|i| {
                serde_json::json!({
                    "receiver": receivers[i].target.resolved.to_string(),
                    "state": state(i),
                    "transfers": receivers[i].done,
                    "bytes": receivers[i].bytes,
                })
            })
            .collect();
        let v = serde_json::json!({
            "group": {
                "mode": mode.to_string(),
                "paths": a.paths.len(),
                "seconds": took.as_secs_f64(),
                "done": group.failure().is_none(),
                "receivers": rows,
            }
        });
        outln!("{v}");
        return;
    }
    let count = |n: u64, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    for (i, r) in receivers.iter().enumerate() {
        outln!(
            "{}: {} ({}, {})",
            r.target.typed,
            state(i),
            count(r.done, "transfer"),
            human_bytes(r.bytes)
        );
    }
    match group.failure() {
        None => outln!(
            "group {mode}: done in {:.1} s ({})",
            took.as_secs_f64(),
            count(a.paths.len() as u64, "path")
        ),
        Some(why) => outln!("group {mode}: failed: {why}"),
    }
}
