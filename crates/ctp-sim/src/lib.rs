//! `ctp-sim`: a deterministic network simulator that runs real [`ctp_proto::Endpoint`]s on a
//! virtual clock.
//!
//! A seed and a scenario give the same event trace, byte for byte, every time: all
//! randomness comes from one ChaCha stream per run, split per link in topology order, and
//! simultaneous events run in the order they were scheduled.

pub mod app;
pub mod aqm;
pub mod attacker;
pub mod chaos;
pub mod clock;
pub mod cpu_time;
pub mod group;
pub mod link;
pub mod loss;
pub mod metrics;
pub mod net;
pub mod payload;
pub mod prefetch;
pub mod report;
pub mod scale;
pub mod scenario;
pub mod streams;
pub mod svg;
pub mod topology;
pub mod units;
pub mod world;

pub use link::{Link, LinkConfig, LinkStats};
pub use loss::LossModel;
pub use topology::Topology;
pub use world::{FlowResult, FlowSpec, RunResult, SimConfig, World};
