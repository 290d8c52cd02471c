//! Shared by the simulator's integration tests.

use ctp_sim::report::{run_scenario, ScenarioReport};
use ctp_sim::scenario::Scenario;
use ctp_sim::FlowResult;

/// Parses scenario text (panicking with the error, which names the key and line) and runs
/// every run of it.
#[allow(dead_code)] // the model tests drive links and worlds directly
pub fn run(src: &str) -> ScenarioReport {
    let sc = Scenario::parse(src, "t.toml").unwrap_or_else(|e| panic!("{e}"));
    run_scenario(&sc, None, &mut |_, _, _| {}).expect("runs")
}

/// Asserts that flow `f` (of the run named `what`) completed and delivered exactly `bytes`,
/// each checked by its application against what was sent (no violations).
#[allow(dead_code)] // not every test file that includes this module delivers bulk data
pub fn assert_delivered_exactly(f: &FlowResult, bytes: u64, what: &str) {
    assert!(f.completed, "{what}: not completed: {f:?}");
    assert_eq!(f.bytes_delivered, bytes, "{what}: bytes delivered");
    assert!(f.violations.is_empty(), "{what}: {:?}", f.violations);
    assert!(
        f.limit_violations.is_empty(),
        "{what}: {:?}",
        f.limit_violations
    );
}
