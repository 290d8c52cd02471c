//! The chaos campaign: random topologies and impairments, with invariants checked on every
//! run.
//!
//! Invariants: reliable flows deliver exactly the bytes sent, in order, once (checked against
//! the deterministic generator of [`crate::payload`]); nothing corrupted is ever delivered
//! (datagram messages carry their id and a content derived from it); every connection either
//! completes or fails with a reason within [`BOUND`] of virtual time; the endpoints stay
//! within their limits (bytes in flight within the congestion window, reads within the
//! receive buffer, every connection's memory within its buffers plus a slack); virtual time
//! never stands still.
//!
//! Half the seeds add an attacker ([`crate::attacker`]) injecting datagrams into the
//! endpoints. Against an off-path attacker (garbage, blind guesses, spoofed sources) and an
//! on-path observer (replays, mutated copies whose integrity trailer no longer matches)
//! every invariant above still holds: the connection id, the integrity trailer and the
//! address check stop them. Against a forger (mutated copies with a valid trailer: ctp has
//! no authentication yet) only the weaker ones do: no panic, the endpoints within their
//! limits and memory bounded, every connection completed or failed with a reason within
//! [`BOUND`]. The attacker's choices come from random streams of their own, so the world of
//! a seed is the same with or without one.
//!
//! A few flows are big (up to 8 MiB, drawn from a stream of their own too).

use crate::attacker::{AttackConfig, AttackMode};
use crate::link::LinkConfig;
use crate::loss::{uniform, LossModel};
use crate::topology::Topology;
use crate::world::{FlowKind, FlowSpec, GroupSpec, RunResult, SimConfig, World};
use core::time::Duration;
use ctp_proto::group::Mode;
use ctp_proto::{Instant, Profile};
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

/// Longest a chaos run may take, virtual time.
pub const BOUND: Duration = Duration::from_secs(300);

fn pick<T: Copy>(rng: &mut ChaCha8Rng, xs: &[T]) -> T {
    xs[(rng.next_u64() % xs.len() as u64) as usize]
}

fn range(rng: &mut ChaCha8Rng, lo: f64, hi: f64) -> f64 {
    lo + uniform(rng) * (hi - lo)
}

fn ms(x: f64) -> Duration {
    Duration::from_micros((x * 1000.0) as u64)
}

fn impair(rng: &mut ChaCha8Rng, base: LinkConfig) -> LinkConfig {
    let loss = match rng.next_u64() % 3 {
        0 => LossModel::None,
        1 => LossModel::Bernoulli {
            p: range(rng, 0.0, 0.3),
        },
        _ => LossModel::GilbertElliott {
            p_good_bad: range(rng, 0.0, 0.05),
            p_bad_good: range(rng, 0.1, 0.5),
            loss_good: range(rng, 0.0, 0.02),
            loss_bad: range(rng, 0.3, 1.0),
        },
    };
    let mut down = Vec::new();
    for _ in 0..rng.next_u64() % 3 {
        let at = range(rng, 0.0, 8000.0);
        let len = range(rng, 10.0, 2000.0);
        down.push((Instant::ZERO + ms(at), Instant::ZERO + ms(at + len)));
    }
    // Now and then a long outage, so that handshakes and idle timeouts fail too.
    if rng.next_u64().is_multiple_of(8) {
        let at = range(rng, 0.0, 3000.0);
        let len = range(rng, 15_000.0, 60_000.0);
        down.push((Instant::ZERO + ms(at), Instant::ZERO + ms(at + len)));
    }
    LinkConfig {
        jitter: ms(range(rng, 0.0, 3.0) * (rng.next_u64() % 2) as f64),
        loss,
        reorder: range(rng, 0.0, 0.2) * (rng.next_u64() % 2) as f64,
        reorder_extra: ms(range(rng, 0.1, 20.0)),
        duplicate: range(rng, 0.0, 0.1) * (rng.next_u64() % 2) as f64,
        corrupt: range(rng, 0.0, 0.1) * (rng.next_u64() % 2) as f64,
        down,
        ..base
    }
}

/// The random world of one seed.
pub fn config(seed: u64) -> SimConfig {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xC4A0_5EED);
    let base = LinkConfig {
        bandwidth_bps: pick(&mut rng, &[1_000_000, 5_000_000, 10_000_000, 50_000_000]),
        delay: ms(range(&mut rng, 0.5, 50.0)),
        queue_packets: pick(&mut rng, &[5, 20, 100, 500]),
        ..LinkConfig::default()
    };
    let fwd = impair(&mut rng, base.clone());
    let bandwidth = base.bandwidth_bps;
    let rev = if rng.next_u64() % 2 == 0 {
        impair(&mut rng, base)
    } else {
        base
    };
    // What a big flow may carry: 20 s of the bottleneck, less the more either direction
    // loses, none past 2.5 % (UDT's rate control crawls under random loss, whatever the
    // bandwidth; lost acknowledgements slow every sender).
    let lossy = fwd.loss.mean_loss() + fwd.corrupt + rev.loss.mean_loss() + rev.corrupt;
    let big_cap = (bandwidth as f64 / 8.0 * 20.0 * (1.0 - 40.0 * lossy).max(0.0)) as u64;
    let n = 1 + (rng.next_u64() % 3) as usize;
    let access: Vec<Duration> = (0..n).map(|_| ms(range(&mut rng, 0.0, 20.0))).collect();
    // Big flows come from a stream of their own: the rest of the world is drawn as before.
    let mut big = ChaCha8Rng::seed_from_u64(seed ^ 0xB16_F10E5);
    // So do the reliable flows that run `coded` instead (a third of them).
    let mut coding = ChaCha8Rng::seed_from_u64(seed ^ 0xC0DED);
    let flows = (0..n)
        .map(|_| {
            let mut name = pick(&mut rng, &["reliable", "datagram", "udt", "udt-dgram"]);
            if name == "reliable" && coding.next_u64() % 3 == 0 {
                name = "coded";
            }
            let profile = Profile::builtin(name).expect("a built-in profile");
            let mut bytes = 1 + rng.next_u64() % 150_000;
            if big.next_u64() % BIG_ONE_IN == 0 {
                bytes = bytes.max(big_flow(&mut big, big_cap));
            }
            FlowSpec {
                start: ms(range(&mut rng, 0.0, 2000.0)),
                bytes: Some(bytes),
                message_size: 8 + (rng.next_u64() % 4000) as usize,
                ..FlowSpec::bulk(profile, None)
            }
        })
        .collect();
    let mut flows: Vec<FlowSpec> = flows;
    let groups = group(seed, &mut flows, big_cap).into_iter().collect();
    let topology = Topology::dumbbell(fwd, rev, &access);
    let attacker = attacker(seed, topology.links.len());
    SimConfig {
        seed,
        topology,
        flows,
        duration: BOUND,
        interval: Duration::from_millis(100),
        handshake_timeout: Duration::from_secs(10),
        stop_when_done: true,
        check_limits: true,
        attacker,
        groups,
    }
}

/// One seed in this many with two or more flows makes them one group.
const GROUP_ONE_IN: u64 = 4;

/// The group of a seed, if any, drawn from a stream of its own: one seed in
/// [`GROUP_ONE_IN`] with two or more flows turns them into the members of one group (each
/// `reliable`, a third `coded`) with a random mode, size, message size and failure time.
fn group(seed: u64, flows: &mut [FlowSpec], big_cap: u64) -> Option<GroupSpec> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6_2007);
    if flows.len() < 2 || rng.next_u64() % GROUP_ONE_IN != 0 {
        return None;
    }
    let n = flows.len() as u64;
    let k = 1 + (rng.next_u64() % n) as u16;
    let p = 1 + (rng.next_u64() % u64::from(k)) as u16;
    let mode = match rng.next_u64() % 5 {
        0 => Mode::All,
        1 => Mode::Any,
        2 => Mode::AtLeast(1 + (rng.next_u64() % n) as u16),
        3 => Mode::Spread { k, p },
        _ => Mode::Balanced { k, p },
    };
    let mut bytes = 1 + rng.next_u64() % 400_000;
    if rng.next_u64() % BIG_ONE_IN == 0 {
        bytes = bytes.max(big_flow(&mut rng, big_cap));
    }
    let spec = GroupSpec {
        mode,
        bytes,
        message_size: 8 + (rng.next_u64() % 16_000) as usize,
        start: ms(range(&mut rng, 0.0, 2000.0)),
        fail_after: ms(range(&mut rng, 1000.0, 10_000.0)),
    };
    for f in flows.iter_mut() {
        let name = if rng.next_u64() % 3 == 0 {
            "coded"
        } else {
            "reliable"
        };
        *f = FlowSpec {
            start: spec.start,
            message_size: spec.message_size,
            kind: FlowKind::Group { group: 0 },
            ..FlowSpec::bulk(Profile::builtin(name).expect("a built-in profile"), None)
        };
    }
    Some(spec)
}

/// One flow in this many is big.
const BIG_ONE_IN: u64 = 4;
/// Largest big flow.
pub const BIG_MAX: u64 = 8 << 20;

/// A big flow's size: 1 to 8 MiB (log-uniform), at most `cap` (so that even a lossy path
/// finishes within [`BOUND`]).
fn big_flow(rng: &mut ChaCha8Rng, cap: u64) -> u64 {
    let b = (2f64).powf(range(rng, 20.0, 23.0)) as u64;
    b.min(cap).clamp(1, BIG_MAX)
}

/// The attacker of a seed, if any: half the seeds have one. Drawn from a stream of its own.
pub fn attacker(seed: u64, links: usize) -> Option<AttackConfig> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x0A77_AC4E_5EED);
    if rng.next_u64() % 2 == 0 {
        return None;
    }
    let mode = match rng.next_u64() % 20 {
        0..8 => AttackMode::OffPath,
        8..15 => AttackMode::Observer,
        _ => AttackMode::Forger,
    };
    let tap = if rng.next_u64() % 2 == 0 {
        (0..links).collect()
    } else {
        vec![(rng.next_u64() % links.max(1) as u64) as usize]
    };
    Some(AttackConfig {
        mode,
        seed,
        // 1 ms to 1 s between bursts (log-uniform).
        mean_gap: Duration::from_secs_f64(10f64.powf(range(&mut rng, -3.0, 0.0))),
        burst: 1 + (rng.next_u64() % 16) as u32,
        until: ms(range(&mut rng, 500.0, 60_000.0)),
        max_injections: 4000,
        tap,
    })
}

/// The outcome of one seed: the run and every invariant it broke.
pub struct Verdict {
    /// The seed.
    pub seed: u64,
    /// The run.
    pub run: RunResult,
    /// The attacker's kind, if the seed has one.
    pub attack: Option<AttackMode>,
    /// Broken invariants (empty = pass).
    pub failures: Vec<String>,
    /// Flows a forger left hanging (neither completed nor failed with a reason): expected
    /// until packets are authenticated (a forged acknowledgement of data never received
    /// stalls any unauthenticated transport), so counted, not failed.
    pub forger_hangs: Vec<String>,
}

/// The one-line command that replays `seed`.
pub fn replay_command(seed: u64) -> String {
    format!("ctp sim chaos --seeds 1 --start {seed}")
}

/// Records a flow or group left hanging: a failure, or against a forger only counted.
fn hung(forged: bool, hang: String, failures: &mut Vec<String>, forger_hangs: &mut Vec<String>) {
    if forged {
        forger_hangs.push(hang);
    } else {
        failures.push(hang);
    }
}

/// Runs one seed and checks every invariant.
pub fn run_seed(seed: u64) -> Verdict {
    let cfg = config(seed);
    let specs = cfg.flows.clone();
    let attack = cfg.attacker.as_ref().map(|a| a.mode);
    // Against a forger, what is delivered may be forged: only the limits and the ending hold.
    let forged = attack == Some(AttackMode::Forger);
    let run = World::new(cfg).run(&mut |_| {});
    let mut failures = Vec::new();
    let mut forger_hangs = Vec::new();
    if let Some(s) = &run.stuck {
        failures.push(s.clone());
    }
    for (i, (f, spec)) in run.flows.iter().zip(&specs).enumerate() {
        for v in &f.limit_violations {
            failures.push(format!("flow {i} ({}): {v}", f.profile));
        }
        let reason = f.sender_close.is_some() || f.receiver_close.is_some();
        if !f.completed && !reason {
            let hang = format!(
                "flow {i} ({}): neither completed nor failed with a reason within {BOUND:?} ({} of {:?} bytes delivered)",
                f.profile, f.bytes_delivered, spec.bytes
            );
            hung(forged, hang, &mut failures, &mut forger_hangs);
        }
        if forged {
            continue;
        }
        for v in &f.violations {
            failures.push(format!("flow {i} ({}): {v}", f.profile));
        }
        if let FlowKind::Group { .. } = spec.kind {
            // A member's data is the group's: checked with the group below.
        } else if spec.profile.is_reliable() {
            if f.completed && Some(f.bytes_delivered) != spec.bytes {
                failures.push(format!(
                    "flow {i}: completed with {} of {:?} bytes",
                    f.bytes_delivered, spec.bytes
                ));
            }
        } else if f.msgs_delivered > f.msgs_sent {
            failures.push(format!(
                "flow {i}: {} messages delivered, {} sent",
                f.msgs_delivered, f.msgs_sent
            ));
        }
    }
    for (i, g) in run.groups.iter().enumerate() {
        if !g.completed && g.failure.is_none() {
            let hang = format!(
                "group {i} ({}): neither completed nor failed with a reason within {BOUND:?} ({} of {} messages done)",
                g.mode, g.done, g.messages
            );
            hung(forged, hang, &mut failures, &mut forger_hangs);
        }
        if !forged {
            for v in &g.violations {
                failures.push(format!("group {i} ({}): {v}", g.mode));
            }
        }
    }
    Verdict {
        seed,
        run,
        attack,
        failures,
        forger_hangs,
    }
}
