//! Group flows in the simulator (paper 002): which receivers a mode waits for, a slow and a
//! dead receiver under each mode, balanced shares, and the scenario checks.

use ctp_sim::report::{run_scenario, RunReport};
use ctp_sim::scenario::Scenario;
use std::path::Path;

fn shipped(name: &str) -> Vec<RunReport> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(format!("{name}.toml"));
    let sc = Scenario::load(&p).unwrap_or_else(|e| panic!("{e}"));
    run_scenario(&sc, None, &mut |_, _, _| {})
        .expect("runs")
        .runs
}

fn by_mode<'a>(runs: &'a [RunReport], mode: &str) -> &'a RunReport {
    runs.iter()
        .find(|r| r.group_mode.as_deref() == Some(mode))
        .unwrap_or_else(|| panic!("no run of {mode}"))
}

/// Every receiver delivered each message intact and at most once, and every message done
/// for the group was delivered by as many receivers as the mode needs.
fn assert_clean(r: &RunReport) {
    let g = &r.result.groups[0];
    assert!(g.violations.is_empty(), "{}: {:?}", g.mode, g.violations);
    for f in &r.result.flows {
        assert!(f.violations.is_empty(), "{}: {:?}", g.mode, f.violations);
    }
}

#[test]
fn a_slow_receiver_holds_all_back_but_not_any_two_of_three_or_balanced() {
    let runs = shipped("group-slow-receiver");
    let secs = |m: &str| {
        let r = by_mode(&runs, m);
        assert_clean(r);
        let g = &r.result.groups[0];
        assert!(g.completed && g.failure.is_none(), "{m}: {g:?}");
        assert_eq!(g.done, g.messages, "{m}");
        g.completion_us.expect("completed") as f64 / 1e6
    };
    let (all, any, two, bal) = (
        secs("all"),
        secs("any"),
        secs("at-least=2"),
        secs("balanced=k1p1"),
    );
    // The slow link carries 2 Mb/s, the fast ones 20: `all` waits for the slow one.
    for (m, t) in [("any", any), ("at-least=2", two), ("balanced=k1p1", bal)] {
        assert!(all > 5.0 * t, "all {all:.2} s, {m} {t:.2} s");
    }
    // Under `all` every receiver has every message (in order: checked per delivery).
    let g = &by_mode(&runs, "all").result.groups[0];
    assert!(g.members.iter().all(|m| m.delivered == g.messages), "{g:?}");
    // Under `at-least=2` the two fast receivers have every message.
    let g = &by_mode(&runs, "at-least=2").result.groups[0];
    let full = g
        .members
        .iter()
        .filter(|m| m.delivered == g.messages)
        .count();
    assert!(full >= 2, "{g:?}");
    // Balanced: each message once, the slow receiver a small share.
    let g = &by_mode(&runs, "balanced=k1p1").result.groups[0];
    let shares: Vec<u64> = g.members.iter().map(|m| m.delivered).collect();
    assert_eq!(
        shares.iter().sum::<u64>(),
        g.messages,
        "one copy each: {shares:?}"
    );
    assert!(
        shares[2] * 5 < shares[0] && shares[2] * 5 < shares[1],
        "shares {shares:?}"
    );
}

#[test]
fn a_dead_receiver_fails_all_with_a_reason_and_leaves_the_others_running() {
    let runs = shipped("group-dead-receiver");
    let all = by_mode(&runs, "all");
    assert_clean(all);
    let g = &all.result.groups[0];
    let why = g.failure.as_deref().expect("all fails");
    assert!(
        why.contains("no acknowledgement") && why.contains('2'),
        "the reason names the dead member and why: {why}"
    );
    assert!(!g.completed && g.done < g.messages, "{g:?}");
    // The two live receivers are stopped with the group's reason, not failed themselves.
    for f in &all.result.flows[..2] {
        let close = f.sender_close.as_deref().unwrap_or_default();
        assert!(close.contains("the group failed"), "{close}");
    }
    for m in ["at-least=2", "any", "balanced=k2p1"] {
        let r = by_mode(&runs, m);
        assert_clean(r);
        let g = &r.result.groups[0];
        assert!(g.completed && g.failure.is_none(), "{m}: {g:?}");
        assert!(g.members[2].state.starts_with("failed"), "{m}: {g:?}");
        assert!(
            g.members[..2].iter().all(|s| s.state == "active"),
            "{m}: {g:?}"
        );
    }
}

#[test]
fn group_scenario_errors_say_what_to_fix() {
    let base = r#"name = "t"
duration = "1s"
[bottleneck]
bandwidth = "10Mbps"
"#;
    let err = |extra: &str| match Scenario::parse(&format!("{base}{extra}"), "t.toml") {
        Ok(_) => panic!("accepted: {extra}"),
        Err(e) => e.to_string(),
    };
    let e = err("[[flow]]\nkind = \"group\"\n");
    assert!(e.contains("need a [group] table"), "{e}");
    let e = err("[group]\nmodes = [\"all\"]\nbytes = 10\n[[flow]]\n");
    assert!(e.contains("needs member flows"), "{e}");
    let e = err("[group]\nmodes = [\"at-least=3\"]\nbytes = 10\n[[flow]]\nkind = \"group\"\n[[flow]]\nkind = \"group\"\n");
    assert!(e.contains("group.modes") && e.contains("between"), "{e}");
    let e = err("[group]\nmodes = [\"most\"]\nbytes = 10\n[[flow]]\nkind = \"group\"\n");
    assert!(e.contains("group.modes"), "{e}");
    let e = err("[group]\nmodes = [\"all\"]\nbytes = 10\n[[flow]]\nkind = \"group\"\nbytes = 5\n");
    assert!(
        e.contains("flow[0].bytes") && e.contains("belongs in [group]"),
        "{e}"
    );
    // A profile without acknowledgements cannot be a group's: skipped with why.
    let text = base.replacen(
        "duration = \"1s\"\n",
        "duration = \"1s\"\nprofiles = [\"datagram\", \"reliable\"]\ncc = [\"profile\"]\n",
        1,
    ) + "[group]\nmodes = [\"all\"]\nbytes = 10\n[[flow]]\nkind = \"group\"\n";
    let sc = Scenario::parse(&text, "t.toml").expect("valid");
    let (runs, skipped) = sc.plan(None).expect("plan");
    assert_eq!(runs.len(), 1, "only reliable runs");
    assert!(
        skipped
            .iter()
            .any(|s| s.starts_with("datagram/") && s.contains("reliable")),
        "{skipped:?}"
    );
}
