//! Shared by the simulator's integration tests.

use ctp_sim::report::{run_scenario, ScenarioReport};
use ctp_sim::scenario::Scenario;

/// Parses scenario text (panicking with the error, which names the key and line) and runs
/// every run of it.
pub fn run(src: &str) -> ScenarioReport {
    let sc = Scenario::parse(src, "t.toml").unwrap_or_else(|e| panic!("{e}"));
    run_scenario(&sc, None, &mut |_, _, _| {}).expect("runs")
}
