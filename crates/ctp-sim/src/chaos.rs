//! The chaos campaign: random topologies and impairments, with invariants checked on every
//! run.
//!
//! Invariants: reliable flows deliver exactly the bytes sent, in order, once (checked against
//! the deterministic generator of [`crate::payload`]); nothing corrupted is ever delivered
//! (datagram messages carry their id and a content derived from it); every connection either
//! completes or fails with a reason within [`BOUND`] of virtual time; the endpoints stay
//! within their limits (bytes in flight within the congestion window, reads within the
//! receive buffer); virtual time never stands still.

use crate::link::LinkConfig;
use crate::loss::{uniform, LossModel};
use crate::topology::Topology;
use crate::world::{FlowSpec, RunResult, SimConfig, World};
use core::time::Duration;
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
    let rev = if rng.next_u64() % 2 == 0 {
        impair(&mut rng, base)
    } else {
        base
    };
    let n = 1 + (rng.next_u64() % 3) as usize;
    let access: Vec<Duration> = (0..n).map(|_| ms(range(&mut rng, 0.0, 20.0))).collect();
    let flows = (0..n)
        .map(|_| {
            let profile = Profile::builtin(pick(
                &mut rng,
                &["reliable", "datagram", "udt", "udt-dgram"],
            ))
            .expect("a built-in profile");
            FlowSpec {
                start: ms(range(&mut rng, 0.0, 2000.0)),
                bytes: Some(1 + rng.next_u64() % 150_000),
                message_size: 8 + (rng.next_u64() % 4000) as usize,
                ..FlowSpec::bulk(profile, None)
            }
        })
        .collect();
    SimConfig {
        seed,
        topology: Topology::dumbbell(fwd, rev, &access),
        flows,
        duration: BOUND,
        interval: Duration::from_millis(100),
        handshake_timeout: Duration::from_secs(10),
        stop_when_done: true,
        check_limits: true,
    }
}

/// The outcome of one seed: the run and every invariant it broke.
pub struct Verdict {
    /// The seed.
    pub seed: u64,
    /// The run.
    pub run: RunResult,
    /// Broken invariants (empty = pass).
    pub failures: Vec<String>,
}

/// The one-line command that replays `seed`.
pub fn replay_command(seed: u64) -> String {
    format!("ctp sim chaos --seeds 1 --start {seed}")
}

/// Runs one seed and checks every invariant.
pub fn run_seed(seed: u64) -> Verdict {
    let cfg = config(seed);
    let specs = cfg.flows.clone();
    let run = World::new(cfg).run(&mut |_| {});
    let mut failures = Vec::new();
    if let Some(s) = &run.stuck {
        failures.push(s.clone());
    }
    for (i, (f, spec)) in run.flows.iter().zip(&specs).enumerate() {
        for v in &f.violations {
            failures.push(format!("flow {i} ({}): {v}", f.profile));
        }
        let reason = f.sender_close.is_some() || f.receiver_close.is_some();
        if spec.profile.is_reliable() {
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
        if !f.completed && !reason {
            failures.push(format!(
                "flow {i} ({}): neither completed nor failed with a reason within {BOUND:?} ({} of {:?} bytes delivered)",
                f.profile, f.bytes_delivered, spec.bytes
            ));
        }
    }
    Verdict {
        seed,
        run,
        failures,
    }
}
