//! A few hundred chaos seeds must pass every invariant (groups among them).

use ctp_sim::attacker::AttackMode;
use ctp_sim::chaos;

#[test]
fn chaos_seeds_pass() {
    let n: u64 = std::env::var("CTP_CHAOS_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500);
    let mut failed = Vec::new();
    let (mut overshoot, mut excess, mut biggest) = (0, 0, 0);
    let (mut completed, mut failed_with_reason, mut flows) = (0, 0, 0);
    let mut coded_completed = 0;
    let mut attacked = [0u64; 3];
    let (mut injected, mut forged, mut replayed) = (0, 0, 0);
    let (mut groups, mut groups_completed, mut group_modes) = (0, 0, Vec::new());
    for seed in 0..n {
        let v = chaos::run_seed(seed);
        for g in &v.run.groups {
            groups += 1;
            groups_completed += u64::from(g.completed);
            let kind = g.mode.split('=').next().unwrap_or_default().to_string();
            if !group_modes.contains(&kind) {
                group_modes.push(kind);
            }
        }
        for f in &v.run.flows {
            overshoot = overshoot.max(f.max_cwnd_overshoot);
            excess = excess.max(f.max_buffer_excess);
            flows += 1;
            if f.completed {
                completed += 1;
                coded_completed += u64::from(f.profile == "coded");
                biggest = biggest.max(f.bytes_delivered);
            } else {
                failed_with_reason += 1;
            }
        }
        if let (Some(m), Some(a)) = (v.attack, v.run.attack) {
            attacked[match m {
                AttackMode::OffPath => 0,
                AttackMode::Observer => 1,
                AttackMode::Forger => 2,
            }] += 1;
            injected += a.injected;
            forged += a.forged;
            replayed += a.replayed;
        }
        if !v.failures.is_empty() {
            eprintln!(
                "seed {seed}: {:?}\n  replay: {}",
                v.failures,
                chaos::replay_command(seed)
            );
            failed.push(seed);
        }
    }
    eprintln!("{flows} flows: {completed} completed, {failed_with_reason} failed with a reason");
    eprintln!(
        "attackers: {} off-path, {} observers, {} forgers; {injected} datagrams injected \
         ({replayed} replays, {forged} forgeries)",
        attacked[0], attacked[1], attacked[2]
    );
    eprintln!("largest flow completed: {biggest} bytes");
    // The campaign must exercise both outcomes and every attacker, or it checks less than it
    // claims.
    assert!(completed > flows / 2 && failed_with_reason > 0);
    eprintln!("{coded_completed} `coded` flows completed");
    eprintln!("{groups} groups ({group_modes:?}): {groups_completed} completed");
    if n >= 100 {
        // Groups of every mode, most of them completing, each receiver checked (the
        // violations, above).
        assert!(group_modes.len() == 5, "modes seen: {group_modes:?}");
        assert!(
            groups_completed * 2 > groups,
            "{groups_completed} of {groups}"
        );
    }
    assert!(coded_completed > 0, "the campaign runs the coded profile");
    if n >= 100 {
        assert!(attacked.iter().all(|&a| a > 0) && injected > 0);
    }
    eprintln!("largest bytes-in-flight excess over the window bound: {overshoot} bytes");
    eprintln!("largest excess of a connection's memory over its buffers: {excess} bytes");
    assert!(failed.is_empty(), "failing seeds: {failed:?}");
}

/// Seed 56143 once failed the window check: a `datagram` flow's window grew and was cut
/// within one datagram, twice the cut window was below what had been released, and the
/// checker (which only looks between steps) took the flight for an overshoot. The window
/// now reports the largest window it released under.
#[test]
fn a_window_grown_and_cut_within_one_step_is_no_overshoot() {
    let v = chaos::run_seed(56143);
    assert!(v.failures.is_empty(), "{:?}", v.failures);
}

/// Seeds the long campaign found failing, kept as regressions: an on-path observer
/// replaying old UDT4 ACK2s made the receiver take RTT samples of seconds, which stretched
/// the sender's EXP timer past the end of the run (the flow hung short of its last packet).
#[test]
fn seeds_the_long_campaign_found_failing_pass() {
    for seed in [4913, 5619, 10049, 89406, 145463, 153607] {
        let v = chaos::run_seed(seed);
        assert!(
            v.failures.is_empty(),
            "seed {seed}: {:?}\n  replay: {}",
            v.failures,
            chaos::replay_command(seed)
        );
    }
}
