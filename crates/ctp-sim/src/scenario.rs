//! Scenario files (TOML): topology, flows, impairments, duration, seed, sampling interval,
//! the profiles and congestion controls to compare, an optional sweep over one parameter and
//! the metrics to report.
//!
//! Unknown keys and impossible values are errors naming the key and the line.

use crate::aqm::Aqm;
use crate::link::LinkConfig;
use crate::loss::LossModel;
use crate::metrics::Metric;
use crate::streams::StreamSpec;
use crate::topology::{FlowPlacement, Rebind, SourceChoice, Topology, DEFAULT_NIC_BPS};
use crate::units::{Bandwidth, Dur};
use crate::world::{FlowKind, FlowSpec, GroupSpec, SimConfig};
use core::time::Duration;
use ctp_proto::cc::CcKind;
use ctp_proto::group::{GroupConfig, Mode, ModeError};
use ctp_proto::profile::every_builtin;
use ctp_proto::{Instant, Profile, ProfileError};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::Path;
use toml::Spanned;

/// The congestion-control name that keeps a profile's own policy (NewReno, SCP, TFRC).
pub const PROFILE_CC: &str = "profile";

/// Every congestion-control name a scenario may use: [`PROFILE_CC`], then the library's.
pub fn known_cc() -> Vec<&'static str> {
    std::iter::once(PROFILE_CC)
        .chain(CcKind::ALL.iter().map(|k| k.name()))
        .collect()
}

fn check_cc(name: &str) -> Result<(), String> {
    if known_cc().contains(&name) {
        Ok(())
    } else {
        Err(format!(
            "unknown congestion control `{name}`; known: {}",
            known_cc().join(", ")
        ))
    }
}

/// The name of a profile's own congestion policy ("none" without one).
pub fn own_policy(p: &Profile) -> &'static str {
    use ctp_proto::MicroId;
    if p.micros.has(MicroId::Coded) {
        return "ctcp";
    }
    [MicroId::NewReno, MicroId::Scp, MicroId::Tfrc, MicroId::Cc]
        .into_iter()
        .find(|&m| p.micros.has(m))
        .map_or("none", |m| m.name())
}

/// `p` driven by congestion control `cc` (or unchanged for [`PROFILE_CC`]).
pub fn with_cc(p: Profile, cc: &str) -> Result<Profile, String> {
    if cc == PROFILE_CC {
        return Ok(p);
    }
    let kind = CcKind::from_name(cc).ok_or_else(|| check_cc(cc).unwrap_err())?;
    p.with_cc(kind).map_err(|e| e.to_string())
}
/// Parameters a sweep can vary.
pub const SWEEP_KEYS: &[&str] = &["loss", "flow_window", "bandwidth", "delay"];

/// A scenario file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// Short name.
    pub name: String,
    /// What the scenario shows.
    #[serde(default)]
    pub description: String,
    /// Virtual time of each run.
    pub duration: Spanned<Dur>,
    /// Metrics sampling interval.
    #[serde(default = "default_interval")]
    pub interval: Spanned<Dur>,
    /// Seed (overridable on the command line).
    #[serde(default)]
    pub seed: u64,
    /// Profiles to compare (default: every built-in profile).
    #[serde(default)]
    pub profiles: Vec<Spanned<String>>,
    /// Congestion controls to compare (default: every known one).
    #[serde(default)]
    pub cc: Vec<Spanned<String>>,
    /// Size of each message for unreliable profiles, bytes.
    #[serde(default = "default_message_size")]
    pub message_size: Spanned<u32>,
    /// End a run early once every flow finished.
    #[serde(default)]
    pub stop_when_done: bool,
    /// Handshake timeout.
    #[serde(default)]
    pub handshake_timeout: Option<Spanned<Dur>>,
    /// Run the profiles' secure channels as they ship (Noise handshake, an AEAD on every
    /// packet). Off by default: a scenario studies the network, where encryption changes
    /// only each packet's size (12 bytes of payload) — its CPU cost is the bench's to
    /// measure — and it would halve the simulator's speed.
    #[serde(default)]
    pub encrypt: bool,
    /// The shared bottleneck: path 0.
    pub bottleneck: PathFile,
    /// Further paths, disjoint from the bottleneck and each other: paths 1, 2, …
    #[serde(default, rename = "path")]
    pub paths: Vec<PathFile>,
    /// Rate of every node's network interface (default: ten times the fastest path, at
    /// most 10 Gb/s).
    #[serde(default)]
    pub nic: Option<Spanned<Bandwidth>>,
    /// Profile parameter overrides for every flow.
    #[serde(default)]
    pub params: ParamsFile,
    /// The flows.
    #[serde(rename = "flow")]
    pub flows: Vec<FlowFile>,
    /// An optional sweep over one parameter.
    pub sweep: Option<SweepFile>,
    /// A group: the flows of `kind = "group"` are its members.
    pub group: Option<GroupFile>,
    /// Metrics the table reports (default: every one; see [`crate::metrics::Metric`]).
    #[serde(default)]
    pub metrics: Vec<Spanned<String>>,
}

fn default_interval() -> Spanned<Dur> {
    Spanned::new(0..0, Dur(Duration::from_millis(500)))
}
fn zero_dur() -> Spanned<Dur> {
    Spanned::new(0..0, Dur(Duration::ZERO))
}
fn default_message_size() -> Spanned<u32> {
    Spanned::new(0..0, 1200)
}

/// A path: the bottleneck, one of the further `[[path]]`s, or one of a flow's own
/// `[[flow.paths]]` (both directions share bandwidth, delay and queue; impairments apply to
/// the forward direction, and to the reverse one too if `impair_reverse`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathFile {
    /// A flow's path only: the client address it starts from (default: the client's
    /// first address; a new one becomes another address of the client).
    #[serde(default)]
    pub client: Option<Spanned<String>>,
    /// A flow's path only: the server address it ends at (default: the server's first).
    #[serde(default)]
    pub server: Option<Spanned<String>>,
    /// Bandwidth.
    pub bandwidth: Spanned<Bandwidth>,
    /// One-way propagation delay.
    #[serde(default = "zero_dur")]
    pub delay: Spanned<Dur>,
    /// Jitter.
    #[serde(default = "zero_dur")]
    pub jitter: Spanned<Dur>,
    /// Queue limit, packets (0 = unlimited).
    #[serde(default)]
    pub queue_packets: usize,
    /// Queue limit, bytes (0 = unlimited).
    #[serde(default)]
    pub queue_bytes: usize,
    /// Active queue management: `{ kind = "red", min_th, max_th }` or `{ kind = "codel" }`.
    #[serde(default)]
    pub aqm: Option<Spanned<Aqm>>,
    /// Loss model.
    #[serde(default)]
    pub loss: Option<Spanned<LossModel>>,
    /// Reordering probability.
    #[serde(default)]
    pub reorder: Option<Spanned<f64>>,
    /// Largest extra delay of a reordered packet.
    #[serde(default)]
    pub reorder_extra: Option<Spanned<Dur>>,
    /// Duplication probability.
    #[serde(default)]
    pub duplicate: Option<Spanned<f64>>,
    /// Corruption probability.
    #[serde(default)]
    pub corrupt: Option<Spanned<f64>>,
    /// Apply the impairments to the reverse direction too.
    #[serde(default)]
    pub impair_reverse: bool,
    /// Outages.
    #[serde(default)]
    pub outages: Vec<OutageFile>,
}

/// The link is down from `at` for `for`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutageFile {
    /// Start.
    pub at: Dur,
    /// Length.
    #[serde(rename = "for")]
    pub length: Dur,
}

/// Overrides of profile parameters (see `ctp_proto::Params`).
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ParamsFile {
    /// Flow window, segments.
    pub flow_window: Option<Spanned<u32>>,
    /// Initial congestion window, packets.
    pub initial_window: Option<Spanned<u32>>,
    /// Send buffer, bytes.
    pub send_buffer: Option<Spanned<u32>>,
    /// Receive buffer, bytes.
    pub recv_buffer: Option<Spanned<u32>>,
    /// Minimum RTO, µs.
    pub min_rto_us: Option<Spanned<u32>>,
    /// Idle timeout, ms.
    pub idle_timeout_ms: Option<Spanned<u32>>,
}

/// One flow.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowFile {
    /// Start time.
    #[serde(default = "zero_dur")]
    pub start: Spanned<Dur>,
    /// Stop time (abort if still running).
    pub stop: Option<Spanned<Dur>>,
    /// Bytes to send, then close.
    pub bytes: Option<u64>,
    /// Round-trip propagation time of this flow (default: twice the bottleneck delay).
    pub rtt: Option<Spanned<Dur>>,
    /// Profile of this flow, overriding the run's (mixes profiles within one run).
    pub profile: Option<Spanned<String>>,
    /// Congestion control of this flow, overriding the run's.
    pub cc: Option<Spanned<String>>,
    /// Index of the path the flow uses: 0 is the bottleneck, 1… the `[[path]]`s.
    pub path: Option<Spanned<usize>>,
    /// `bulk` (default), `cbr` (messages at `rate`) or `ping-pong` (`rounds` echoed
    /// messages, one at a time).
    pub kind: Option<Spanned<String>>,
    /// Payload bit rate of a `cbr` flow.
    pub rate: Option<Spanned<Bandwidth>>,
    /// Messages later than this are not on time; a ping-pong round unanswered for this long
    /// is given up.
    pub deadline: Option<Spanned<Dur>>,
    /// Rounds of a `ping-pong` flow.
    pub rounds: Option<Spanned<u64>>,
    /// Message size of this flow, overriding the scenario's.
    pub message_size: Option<Spanned<u32>>,
    /// Parameter overrides for this flow, on top of the scenario's `[params]`.
    pub params: Option<ParamsFile>,
    /// The client's first (primary) address (default `10.0.F.F:1000` for flow `F`).
    pub client: Option<Spanned<String>>,
    /// The server's first (primary) address (default `10.1.F.F:2000`).
    pub server: Option<Spanned<String>>,
    /// Which address the client's datagrams leave from: `primary` (default), `alternate`
    /// (each of its addresses in turn, one datagram each) or one of its addresses.
    pub source: Option<Spanned<String>>,
    /// Further paths of this flow between its two nodes, each with links of its own: the
    /// flow's paths 1, 2, … (path 0 is the one `path` names).
    #[serde(default)]
    pub paths: Vec<PathFile>,
    /// Address changes and paths going down or up, at given times.
    #[serde(default)]
    pub events: Vec<EventFile>,
    /// The streams of a `kind = "streams"` flow, each table `count` streams alike.
    #[serde(default)]
    pub streams: Vec<StreamFile>,
    /// A `streams` flow: every stream's data multiplexed on stream 0 instead (what an
    /// application without streams does), to compare with.
    #[serde(default)]
    pub single_stream: bool,
}

/// Streams of a `kind = "streams"` flow: `count` of them alike, each either messages at
/// `rate` or (without `rate`) a bulk byte stream.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamFile {
    /// How many streams like this (default 1).
    #[serde(default)]
    pub count: Option<Spanned<u32>>,
    /// Priority (0..=255, higher first; default 0).
    #[serde(default)]
    pub priority: Option<u8>,
    /// Payload bit rate of each stream's messages; absent: a bulk stream.
    pub rate: Option<Spanned<Bandwidth>>,
    /// Bytes per message (default: the flow's, else the scenario's `message_size`).
    pub message_size: Option<Spanned<u32>>,
    /// Bytes each stream carries, then ends (absent: until the run ends).
    pub bytes: Option<Spanned<u64>>,
}

/// Something that happens to a flow's network at a given time: either a NAT rebinding
/// (`node` and `rebind`) or a path going down or up (`path` and `state`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventFile {
    /// When.
    pub at: Spanned<Dur>,
    /// `client` or `server`: the node whose address is rebound.
    pub node: Option<Spanned<String>>,
    /// The address the node's datagrams are seen with from then on.
    pub rebind: Option<Spanned<String>>,
    /// Which of the node's addresses is rebound (default: its first).
    pub address: Option<Spanned<String>>,
    /// How long the NAT keeps the old mapping: datagrams to the old address still reach the
    /// node meanwhile (default 0: dropped at once).
    pub keep: Option<Spanned<Dur>>,
    /// The flow's path that goes down or up (0: the one `path` names, shared with every
    /// flow on it; 1, 2, …: the flow's `[[flow.paths]]`).
    pub path: Option<Spanned<usize>>,
    /// `down` (drops everything from `at`) or `up` (carries again).
    pub state: Option<Spanned<String>>,
}

/// Flow kinds a scenario can name.
pub const FLOW_KINDS: &[&str] = &["bulk", "cbr", "ping-pong", "streams", "group"];

/// A group (paper 002): one sender's messages to the flows of `kind = "group"`, each
/// receiver behind its own path, under a delivery mode; the scenario runs once per mode.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupFile {
    /// Delivery modes, one run each: `all`, `any`, `at-least=P`, `spread=kKpP`,
    /// `balanced=kKpP`.
    pub modes: Vec<Spanned<String>>,
    /// Bytes of messages the group sends.
    pub bytes: Spanned<u64>,
    /// Bytes per message (default: the scenario's `message_size`).
    pub message_size: Option<Spanned<u32>>,
    /// When the group starts (its members connect then).
    #[serde(default = "zero_dur")]
    pub start: Spanned<Dur>,
    /// A member whose copies make no progress for this long is failed (default 10s).
    pub fail_after: Option<Spanned<Dur>>,
}

/// A sweep over one parameter.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepFile {
    /// One of [`SWEEP_KEYS`].
    pub key: Spanned<String>,
    /// Values, in the key's unit (loss: probability; flow_window: segments; bandwidth: bits
    /// per second; delay: microseconds).
    pub values: Vec<Spanned<f64>>,
    /// Apply the value to every path (the shared ones and the flows' own), not only to
    /// the bottleneck (path 0).
    #[serde(default)]
    pub every_path: bool,
}

/// A checked scenario.
#[derive(Debug)]
pub struct Scenario {
    /// The parsed file.
    pub file: ScenarioFile,
    /// Where it came from (for messages).
    pub origin: String,
    src: String,
}

/// One run of a scenario: a profile, a congestion control and maybe a sweep value.
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// Profile name.
    pub profile: String,
    /// Congestion control name.
    pub cc: String,
    /// Sweep key and value.
    pub sweep: Option<(String, f64)>,
    /// The group's delivery mode, if the scenario has a group.
    pub group_mode: Option<String>,
    /// Bottleneck bandwidth, for efficiency.
    pub bottleneck_bps: u64,
    /// The simulation.
    pub config: SimConfig,
}

/// A scenario error, naming the file, line and key.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ScenarioError(pub String);

fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let before = &src[..offset.min(src.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

impl Scenario {
    /// The metrics the table reports: those the file names, in the table's order, or every
    /// one.
    pub fn reported_metrics(&self) -> Vec<Metric> {
        let named: Vec<Metric> = self
            .file
            .metrics
            .iter()
            .filter_map(|m| Metric::from_name(m.get_ref()).ok())
            .collect();
        Metric::ALL
            .into_iter()
            .filter(|m| named.is_empty() || named.contains(m))
            .collect()
    }

    /// Reads and checks a scenario file.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let src = std::fs::read_to_string(path)
            .map_err(|e| ScenarioError(format!("{}: {e}", path.display())))?;
        Self::parse(&src, &path.display().to_string())
    }

    /// Parses and checks scenario text; `origin` names it in messages.
    pub fn parse(src: &str, origin: &str) -> Result<Self, ScenarioError> {
        let file: ScenarioFile = toml::from_str(src).map_err(|e| {
            let at = e
                .span()
                .map(|s| {
                    let (l, c) = line_col(src, s.start);
                    format!(":{l}:{c}")
                })
                .unwrap_or_default();
            ScenarioError(format!("{origin}{at}: {}", e.message()))
        })?;
        let s = Scenario {
            file,
            origin: origin.to_string(),
            src: src.to_string(),
        };
        s.check()?;
        Ok(s)
    }

    fn err<T>(
        &self,
        span: std::ops::Range<usize>,
        key: &str,
        msg: &str,
    ) -> Result<T, ScenarioError> {
        let (l, c) = line_col(&self.src, span.start);
        Err(ScenarioError(format!(
            "{}:{l}:{c}: `{key}`: {msg}",
            self.origin
        )))
    }

    fn check(&self) -> Result<(), ScenarioError> {
        let f = &self.file;
        if f.duration.get_ref().0.is_zero() {
            return self.err(f.duration.span(), "duration", "must be positive");
        }
        if f.interval.get_ref().0 < Duration::from_millis(1) {
            return self.err(f.interval.span(), "interval", "must be at least 1ms");
        }
        if !(8..=1 << 20).contains(f.message_size.get_ref()) {
            return self.err(f.message_size.span(), "message_size", "must be 8..=1048576");
        }
        if f.flows.is_empty() {
            return Err(ScenarioError(format!(
                "{}: `flow`: at least one [[flow]] is needed",
                self.origin
            )));
        }
        for p in &f.profiles {
            if let Err(e) = Profile::builtin(p.get_ref()) {
                return self.err(p.span(), "profiles", &e.to_string());
            }
        }
        for c in &f.cc {
            if let Err(msg) = check_cc(c.get_ref()) {
                return self.err(c.span(), "cc", &msg);
            }
        }
        for m in &f.metrics {
            if let Err(msg) = Metric::from_name(m.get_ref()) {
                return self.err(m.span(), "metrics", &msg);
            }
        }
        if let Some(n) = &f.nic {
            if n.get_ref().0 == 0 {
                return self.err(n.span(), "nic", "must be positive");
            }
        }
        self.check_path("bottleneck", &f.bottleneck)?;
        for (i, p) in f.paths.iter().enumerate() {
            self.check_path(&format!("path[{i}]"), p)?;
        }
        for (i, fl) in f.flows.iter().enumerate() {
            let path = match &fl.path {
                None => &f.bottleneck,
                Some(p) if *p.get_ref() == 0 => &f.bottleneck,
                Some(p) => match f.paths.get(p.get_ref() - 1) {
                    Some(path) => path,
                    None => {
                        let msg = format!(
                            "path {} does not exist: 0 is the bottleneck and there are {} [[path]] table(s)",
                            p.get_ref(),
                            f.paths.len()
                        );
                        return self.err(p.span(), &format!("flow[{i}].path"), &msg);
                    }
                },
            };
            let d2 = path.delay.get_ref().0 * 2;
            for (k, p) in fl.paths.iter().enumerate() {
                self.check_path(&format!("flow[{i}].paths[{k}]"), p)?;
            }
            self.check_flow_kind(i, fl)?;
            self.check_streams(i, fl)?;
            self.check_member(i, fl)?;
            if let Some(stop) = &fl.stop {
                if stop.get_ref() <= fl.start.get_ref() {
                    return self.err(
                        stop.span(),
                        &format!("flow[{i}].stop"),
                        "the flow stops before it starts",
                    );
                }
            }
            if let Some(rtt) = &fl.rtt {
                if rtt.get_ref().0 < d2 {
                    return self.err(
                        rtt.span(),
                        &format!("flow[{i}].rtt"),
                        &format!("shorter than twice its path's delay ({d2:?})"),
                    );
                }
            }
            if let Some(p) = &fl.profile {
                if let Err(e) = Profile::builtin(p.get_ref()) {
                    return self.err(p.span(), &format!("flow[{i}].profile"), &e.to_string());
                }
            }
            if let Some(c) = &fl.cc {
                if let Err(msg) = check_cc(c.get_ref()) {
                    return self.err(c.span(), &format!("flow[{i}].cc"), &msg);
                }
            }
            if fl.bytes == Some(0) {
                return Err(ScenarioError(format!(
                    "{}: `flow[{i}].bytes`: must be positive",
                    self.origin
                )));
            }
        }
        if let Some(sw) = &f.sweep {
            if !SWEEP_KEYS.contains(&sw.key.get_ref().as_str()) {
                let msg = format!(
                    "unknown sweep key `{}`; known: {}",
                    sw.key.get_ref(),
                    SWEEP_KEYS.join(", ")
                );
                return self.err(sw.key.span(), "sweep.key", &msg);
            }
            if sw.values.is_empty() {
                return self.err(
                    sw.key.span(),
                    "sweep.values",
                    "at least one value is needed",
                );
            }
        }
        self.check_group()?;
        // Build every run once so parameter errors surface now, with their line.
        self.runs(None)?;
        Ok(())
    }

    fn check_path(&self, key: &str, b: &PathFile) -> Result<(), ScenarioError> {
        if !key.starts_with("flow[") {
            if let Some(a) = b.client.as_ref().or(b.server.as_ref()) {
                return self.err(
                    a.span(),
                    key,
                    "only a flow's own [[flow.paths]] names client and server addresses",
                );
            }
        }
        if b.bandwidth.get_ref().0 == 0 {
            return self.err(
                b.bandwidth.span(),
                &format!("{key}.bandwidth"),
                "must be positive",
            );
        }
        for (k, v) in [
            ("reorder", &b.reorder),
            ("duplicate", &b.duplicate),
            ("corrupt", &b.corrupt),
        ] {
            if let Some(v) = v {
                if !(0.0..=1.0).contains(v.get_ref()) {
                    return self.err(
                        v.span(),
                        &format!("{key}.{k}"),
                        &format!("{} is not a probability (0..=1)", v.get_ref()),
                    );
                }
            }
        }
        if let Some(l) = &b.loss {
            if let Err(m) = l.get_ref().check() {
                return self.err(l.span(), &format!("{key}.loss"), &m);
            }
        }
        if let Some(q) = &b.aqm {
            if let Err(m) = q.get_ref().check() {
                return self.err(q.span(), &format!("{key}.aqm"), &m);
            }
        }
        Ok(())
    }

    fn check_flow_kind(&self, i: usize, fl: &FlowFile) -> Result<(), ScenarioError> {
        let kind = fl.kind.as_ref().map_or("bulk", |k| k.get_ref().as_str());
        let key = |k: &str| format!("flow[{i}].{k}");
        if let Some(k) = &fl.kind {
            if !FLOW_KINDS.contains(&kind) {
                let msg = format!("unknown kind `{kind}`; known: {}", FLOW_KINDS.join(", "));
                return self.err(k.span(), &key("kind"), &msg);
            }
        }
        let kind_span = fl.kind.as_ref().map_or(0..0, |k| k.span());
        match (kind, &fl.rate) {
            ("cbr", None) => return self.err(kind_span, &key("rate"), "a cbr flow needs a `rate`"),
            ("cbr", Some(r)) if r.get_ref().0 == 0 => {
                return self.err(r.span(), &key("rate"), "must be positive")
            }
            (k, Some(r)) if k != "cbr" => {
                return self.err(
                    r.span(),
                    &key("rate"),
                    "only a `kind = \"cbr\"` flow has a rate",
                )
            }
            _ => {}
        }
        match (kind, &fl.rounds) {
            ("ping-pong", None) => {
                self.err(kind_span, &key("rounds"), "a ping-pong flow needs `rounds`")
            }
            ("ping-pong", Some(r)) if *r.get_ref() == 0 => {
                self.err(r.span(), &key("rounds"), "must be positive")
            }
            (k, Some(r)) if k != "ping-pong" => self.err(
                r.span(),
                &key("rounds"),
                "only a `kind = \"ping-pong\"` flow has rounds",
            ),
            _ => {
                if let Some(m) = &fl.message_size {
                    if !(8..=1 << 20).contains(m.get_ref()) {
                        return self.err(m.span(), &key("message_size"), "must be 8..=1048576");
                    }
                }
                Ok(())
            }
        }
    }

    /// `base` with the scenario's `[params]`, then the flow's own, then the sweep value.
    fn params(
        &self,
        base: &Profile,
        flow: Option<&ParamsFile>,
        sweep: Option<(&str, &Spanned<f64>)>,
    ) -> Result<Profile, ScenarioError> {
        let mut p = base.clone();
        let mut spans = Vec::new();
        for o in std::iter::once(&self.file.params).chain(flow) {
            Self::override_params(&mut p, o, &mut spans);
        }
        if let Some(("flow_window", v)) = sweep {
            p.params.flow_window = v.get_ref().clamp(0.0, u32::MAX as f64) as u32;
            spans.push(("flow_window", v.span()));
        }
        if let Err(e) = p.check() {
            let (key, span) = match &e {
                ProfileError::Param { name, .. } => spans
                    .iter()
                    .rev()
                    .find(|(n, _)| name.contains(n))
                    .map(|(n, s)| (format!("params.{n}"), s.clone()))
                    .unwrap_or(("params".into(), 0..0)),
                _ => ("params".into(), 0..0),
            };
            return self.err(span, &key, &e.to_string());
        }
        Ok(p)
    }

    fn override_params(
        p: &mut Profile,
        o: &ParamsFile,
        spans: &mut Vec<(&'static str, std::ops::Range<usize>)>,
    ) {
        let fields: [(&str, &Option<Spanned<u32>>, &mut u32); 6] = [
            ("flow_window", &o.flow_window, &mut p.params.flow_window),
            (
                "initial_window",
                &o.initial_window,
                &mut p.params.initial_window,
            ),
            ("send_buffer", &o.send_buffer, &mut p.params.send_buffer),
            ("recv_buffer", &o.recv_buffer, &mut p.params.recv_buffer),
            ("min_rto_us", &o.min_rto_us, &mut p.params.min_rto_us),
            (
                "idle_timeout_ms",
                &o.idle_timeout_ms,
                &mut p.params.idle_timeout_ms,
            ),
        ];
        for (name, v, slot) in fields {
            if let Some(v) = v {
                *slot = *v.get_ref();
                spans.push((name, v.span()));
            }
        }
    }

    /// Every run: profiles × congestion controls × sweep values. `seed` overrides the file's.
    pub fn runs(&self, seed: Option<u64>) -> Result<Vec<RunSpec>, ScenarioError> {
        Ok(self.plan(seed)?.0)
    }

    /// The runs, and the profile × congestion-control pairs that cannot be composed (a
    /// profile without acknowledgements has no loss signal for a controller), with why.
    pub fn plan(&self, seed: Option<u64>) -> Result<(Vec<RunSpec>, Vec<String>), ScenarioError> {
        let f = &self.file;
        let profiles: Vec<String> = if f.profiles.is_empty() {
            every_builtin().map(|b| b.0.to_string()).collect()
        } else {
            f.profiles.iter().map(|p| p.get_ref().clone()).collect()
        };
        let ccs: Vec<String> = if f.cc.is_empty() {
            known_cc().iter().map(|s| s.to_string()).collect()
        } else {
            f.cc.iter().map(|c| c.get_ref().clone()).collect()
        };
        let sweep: Vec<Option<&Spanned<f64>>> = match &f.sweep {
            Some(s) => s.values.iter().map(Some).collect(),
            None => vec![None],
        };
        let key = f.sweep.as_ref().map(|s| s.key.get_ref().as_str());
        let modes: Vec<Option<&Spanned<String>>> = match &f.group {
            Some(g) => g.modes.iter().map(Some).collect(),
            None => vec![None],
        };
        let mut out = Vec::new();
        let mut skipped = Vec::new();
        for (v, mode) in sweep
            .iter()
            .flat_map(|v| modes.iter().map(move |m| (v, *m)))
        {
            for pname in &profiles {
                'run: for cc in &ccs {
                    let base = Profile::builtin(pname).map_err(|e| ScenarioError(e.to_string()))?;
                    let base = if f.encrypt { base } else { base.insecure() };
                    let base = match with_cc(base, cc) {
                        Ok(b) => b,
                        Err(why) => {
                            let pair = format!("{pname}/{cc}: {why}");
                            if !skipped.contains(&pair) {
                                skipped.push(pair);
                            }
                            continue;
                        }
                    };
                    let mut config = self.build(&base, key.zip(*v), seed)?;
                    if let Some(m) = mode {
                        let spec = self.group_spec(m)?;
                        for fs in &mut config.flows {
                            if let FlowKind::Group { .. } = fs.kind {
                                if !fs.profile.is_reliable()
                                    || fs.profile.wire() != ctp_proto::udt::WireFormat::Ctp
                                {
                                    let why = "a group counts a message done by its members' acknowledgements: it needs a reliable ctp profile (not a datagram or UDT4-wire one)";
                                    let pair = format!("{pname}/{cc}: {why}");
                                    if !skipped.contains(&pair) {
                                        skipped.push(pair);
                                    }
                                    continue 'run;
                                }
                                fs.start = spec.start;
                                fs.message_size = spec.message_size;
                            }
                        }
                        config.groups = vec![spec];
                    }
                    out.push(RunSpec {
                        profile: pname.clone(),
                        cc: if cc == PROFILE_CC {
                            format!("{} (own)", own_policy(&base))
                        } else {
                            cc.clone()
                        },
                        sweep: key.zip(*v).map(|(k, v)| (k.to_string(), *v.get_ref())),
                        group_mode: mode.map(|m| m.get_ref().clone()),
                        bottleneck_bps: config.topology.links[0].bandwidth_bps,
                        config,
                    });
                }
            }
        }
        Ok((out, skipped))
    }

    /// The two link directions of a path.
    fn path_links(b: &PathFile) -> (LinkConfig, LinkConfig) {
        let prob = |x: &Option<Spanned<f64>>| x.as_ref().map_or(0.0, |v| *v.get_ref());
        let fwd = LinkConfig {
            bandwidth_bps: b.bandwidth.get_ref().0,
            delay: b.delay.get_ref().0,
            jitter: b.jitter.get_ref().0,
            queue_packets: b.queue_packets,
            queue_bytes: b.queue_bytes,
            aqm: b.aqm.as_ref().map_or(Aqm::DropTail, |q| *q.get_ref()),
            loss: b.loss.as_ref().map_or(LossModel::None, |l| *l.get_ref()),
            reorder: prob(&b.reorder),
            reorder_extra: b
                .reorder_extra
                .as_ref()
                .map_or(Duration::from_millis(1), |d| d.get_ref().0),
            duplicate: prob(&b.duplicate),
            corrupt: prob(&b.corrupt),
            down: b
                .outages
                .iter()
                .map(|o| (Instant::ZERO + o.at.0, Instant::ZERO + o.at.0 + o.length.0))
                .collect(),
        };
        let rev = if b.impair_reverse {
            fwd.clone()
        } else {
            LinkConfig {
                bandwidth_bps: fwd.bandwidth_bps,
                delay: fwd.delay,
                queue_packets: fwd.queue_packets,
                queue_bytes: fwd.queue_bytes,
                aqm: fwd.aqm,
                ..LinkConfig::default()
            }
        };
        (fwd, rev)
    }

    /// Applies a sweep value to a path's forward direction.
    fn apply_sweep(
        &self,
        fwd: &mut LinkConfig,
        (k, v): (&str, &Spanned<f64>),
    ) -> Result<(), ScenarioError> {
        let x = *v.get_ref();
        match k {
            "loss" => {
                if !(0.0..=1.0).contains(&x) {
                    return self.err(v.span(), "sweep.values", "a loss rate must be in 0..=1");
                }
                fwd.loss = LossModel::Bernoulli { p: x };
            }
            "bandwidth" => {
                if !(1.0..=1e13).contains(&x) {
                    return self.err(
                        v.span(),
                        "sweep.values",
                        "bandwidth must be 1..=1e13 bits/s",
                    );
                }
                fwd.bandwidth_bps = x as u64;
            }
            "delay" => {
                if !(0.0..=1e9).contains(&x) {
                    return self.err(v.span(), "sweep.values", "delay must be 0..=1e9 µs");
                }
                fwd.delay = Duration::from_micros(x as u64);
            }
            _ => {}
        }
        Ok(())
    }

    fn flow_kind(fl: &FlowFile) -> FlowKind {
        match fl.kind.as_ref().map(|k| k.get_ref().as_str()) {
            Some("cbr") => FlowKind::Cbr {
                rate_bps: fl.rate.as_ref().map_or(0, |r| r.get_ref().0),
            },
            Some("ping-pong") => FlowKind::PingPong {
                rounds: fl.rounds.as_ref().map_or(1, |r| *r.get_ref()),
            },
            Some("streams") => FlowKind::Streams {
                single: fl.single_stream,
            },
            Some("group") => FlowKind::Group { group: 0 },
            _ => FlowKind::Bulk,
        }
    }

    fn build(
        &self,
        run_base: &Profile,
        sweep: Option<(&str, &Spanned<f64>)>,
        seed: Option<u64>,
    ) -> Result<SimConfig, ScenarioError> {
        let f = &self.file;
        let mut paths: Vec<(LinkConfig, LinkConfig)> = std::iter::once(&f.bottleneck)
            .chain(&f.paths)
            .map(Self::path_links)
            .collect();
        let every_path = f.sweep.as_ref().is_some_and(|s| s.every_path);
        let mut own_paths: Vec<Vec<(LinkConfig, LinkConfig)>> = f
            .flows
            .iter()
            .map(|fl| fl.paths.iter().map(Self::path_links).collect())
            .collect();
        if let Some(sw) = sweep {
            let swept: Vec<&mut (LinkConfig, LinkConfig)> = if every_path {
                paths
                    .iter_mut()
                    .chain(own_paths.iter_mut().flatten())
                    .collect()
            } else {
                paths.iter_mut().take(1).collect()
            };
            for (fwd, rev) in swept {
                self.apply_sweep(fwd, sw)?;
                rev.bandwidth_bps = fwd.bandwidth_bps;
                rev.delay = fwd.delay;
            }
        }
        let mut place = Vec::new();
        let mut flows = Vec::new();
        for (i, fl) in f.flows.iter().enumerate() {
            let path = fl.path.as_ref().map_or(0, |p| *p.get_ref());
            let d2 = paths[path].0.delay * 2;
            place.push(FlowPlacement {
                path,
                access_delay: fl
                    .rtt
                    .as_ref()
                    .map_or(Duration::ZERO, |r| r.get_ref().0.saturating_sub(d2) / 2),
            });
            let base = match &fl.profile {
                Some(p) => {
                    let b =
                        Profile::builtin(p.get_ref()).map_err(|e| ScenarioError(e.to_string()))?;
                    if self.file.encrypt {
                        b
                    } else {
                        b.insecure()
                    }
                }
                None => run_base.clone(),
            };
            let base = match &fl.cc {
                Some(c) => with_cc(base, c.get_ref())
                    .or_else(|m| self.err(c.span(), &format!("flow[{i}].cc"), &m))?,
                None => base,
            };
            let profile = self.params(&base, fl.params.as_ref(), sweep)?;
            flows.push(FlowSpec {
                profile,
                start: fl.start.get_ref().0,
                stop: fl.stop.as_ref().map(|s| s.get_ref().0),
                bytes: fl.bytes,
                message_size: *fl
                    .message_size
                    .as_ref()
                    .unwrap_or(&f.message_size)
                    .get_ref() as usize,
                kind: Self::flow_kind(fl),
                deadline: fl.deadline.as_ref().map(|d| d.get_ref().0),
                streams: self.stream_specs(fl),
            });
        }
        // Default interface: ten times the fastest path, at most 10 Gb/s — fast enough
        // never to be the bottleneck of a controlled flow, slow enough that a profile
        // without congestion control does not flood the simulation.
        let fastest = paths
            .iter()
            .chain(own_paths.iter().flatten())
            .map(|p| p.0.bandwidth_bps)
            .max()
            .unwrap_or(0);
        let nic = f.nic.as_ref().map_or(
            DEFAULT_NIC_BPS.min(fastest.saturating_mul(10)).max(1),
            |n| n.get_ref().0,
        );
        let mut topology = Topology::multipath(paths, &place, nic);
        for (i, own) in own_paths.into_iter().enumerate() {
            self.addressing(&mut topology, i, own)?;
        }
        if let Err(m) = topology.check_addressing() {
            return Err(ScenarioError(format!("{}: `flow`: {m}", self.origin)));
        }
        Ok(SimConfig {
            seed: seed.unwrap_or(f.seed),
            topology,
            flows,
            duration: f.duration.get_ref().0,
            interval: f.interval.get_ref().0,
            handshake_timeout: f
                .handshake_timeout
                .as_ref()
                .map_or(Duration::from_secs(10), |d| d.get_ref().0),
            stop_when_done: f.stop_when_done,
            check_limits: false,
            attacker: None,
            groups: Vec::new(),
        })
    }

    /// The group of one run, in mode `mode` (checked by [`Scenario::check_group`]).
    fn group_spec(&self, mode: &Spanned<String>) -> Result<GroupSpec, ScenarioError> {
        let Some(g) = &self.file.group else {
            return Err(ScenarioError(format!("{}: `group`: missing", self.origin)));
        };
        let parsed = mode
            .get_ref()
            .parse::<Mode>()
            .or_else(|e: ModeError| self.err(mode.span(), "group.modes", &e.to_string()))?;
        let size = g.message_size.as_ref().unwrap_or(&self.file.message_size);
        Ok(GroupSpec {
            mode: parsed,
            bytes: *g.bytes.get_ref(),
            message_size: *size.get_ref() as usize,
            start: g.start.get_ref().0,
            fail_after: g
                .fail_after
                .as_ref()
                .map_or(GroupConfig::default().fail_after, |d| d.get_ref().0),
        })
    }

    /// Checks the `[group]` table against its members: at least one, every mode fits them,
    /// a positive size.
    fn check_group(&self) -> Result<(), ScenarioError> {
        let f = &self.file;
        let members = f
            .flows
            .iter()
            .filter(|fl| fl.kind.as_ref().is_some_and(|k| k.get_ref() == "group"))
            .count();
        let Some(g) = &f.group else {
            if members > 0 {
                let msg = "flows of `kind = \"group\"` need a [group] table (modes, bytes)";
                return Err(ScenarioError(format!("{}: `group`: {msg}", self.origin)));
            }
            return Ok(());
        };
        if members == 0 {
            let msg = "a [group] needs member flows: give one or more [[flow]]s `kind = \"group\"`";
            return self.err(g.bytes.span(), "group", msg);
        }
        if g.modes.is_empty() {
            return self.err(g.bytes.span(), "group.modes", "name at least one mode");
        }
        if *g.bytes.get_ref() == 0 {
            return self.err(g.bytes.span(), "group.bytes", "must be positive");
        }
        if let Some(m) = &g.message_size {
            if !(8..=1 << 20).contains(m.get_ref()) {
                return self.err(m.span(), "group.message_size", "must be 8..=1048576");
            }
        }
        if g.fail_after
            .as_ref()
            .is_some_and(|d| d.get_ref().0.is_zero())
        {
            let span = g.fail_after.as_ref().map_or(0..0, |d| d.span());
            return self.err(span, "group.fail_after", "must be positive");
        }
        for m in &g.modes {
            let mode = self.group_spec(m)?.mode;
            if let Err(e) = mode.check(members) {
                return self.err(m.span(), "group.modes", &e.to_string());
            }
        }
        Ok(())
    }

    /// Checks a group member: its data is the group's, so it names no size, rate, rounds
    /// or stop of its own.
    fn check_member(&self, i: usize, fl: &FlowFile) -> Result<(), ScenarioError> {
        if fl.kind.as_ref().is_none_or(|k| k.get_ref() != "group") {
            return Ok(());
        }
        let span = fl.kind.as_ref().map_or(0..0, |k| k.span());
        let own = [
            ("bytes", fl.bytes.is_some()),
            ("stop", fl.stop.is_some()),
            ("deadline", fl.deadline.is_some()),
            ("message_size", fl.message_size.is_some()),
            ("start", !fl.start.get_ref().0.is_zero()),
        ];
        if let Some((k, _)) = own.iter().find(|(_, set)| *set) {
            let msg = format!(
                "a group member sends the group's messages: `{k}` belongs in [group] (a receiver that dies is a path outage)"
            );
            return self.err(span, &format!("flow[{i}].{k}"), &msg);
        }
        Ok(())
    }

    /// The streams of flow `fl`, each `[[flow.streams]]` table expanded `count` times.
    fn stream_specs(&self, fl: &FlowFile) -> Vec<StreamSpec> {
        let size = fl.message_size.as_ref().unwrap_or(&self.file.message_size);
        fl.streams
            .iter()
            .flat_map(|st| {
                let spec = StreamSpec {
                    priority: st.priority.unwrap_or(0),
                    message_size: *st.message_size.as_ref().unwrap_or(size).get_ref() as usize,
                    rate_bps: st.rate.as_ref().map(|r| r.get_ref().0),
                    bytes: st.bytes.as_ref().map(|b| *b.get_ref()),
                };
                let n = st.count.as_ref().map_or(1, |c| *c.get_ref());
                std::iter::repeat_n(spec, n as usize)
            })
            .collect()
    }

    /// Checks flow `i`'s streams: a `streams` flow has some, no other flow any.
    fn check_streams(&self, i: usize, fl: &FlowFile) -> Result<(), ScenarioError> {
        let key = |k: &str| format!("flow[{i}].{k}");
        let is_streams = fl.kind.as_ref().is_some_and(|k| k.get_ref() == "streams");
        let kind_span = fl.kind.as_ref().map_or(0..0, |k| k.span());
        if !is_streams {
            if !fl.streams.is_empty() || fl.single_stream {
                let msg = "only a `kind = \"streams\"` flow has streams";
                return self.err(kind_span, &key("streams"), msg);
            }
            return Ok(());
        }
        if fl.streams.is_empty() {
            let msg = "a streams flow needs at least one [[flow.streams]]";
            return self.err(kind_span, &key("streams"), msg);
        }
        if fl.bytes.is_some() || fl.rate.is_some() {
            let msg = "a streams flow's `bytes` and `rate` are each stream's, in [[flow.streams]]";
            return self.err(kind_span, &key("streams"), msg);
        }
        let mut total = 0u32;
        for (k, st) in fl.streams.iter().enumerate() {
            let key = |x: &str| format!("flow[{i}].streams[{k}].{x}");
            if let Some(c) = &st.count {
                if !(1..=1000).contains(c.get_ref()) {
                    return self.err(c.span(), &key("count"), "must be 1..=1000");
                }
                total += c.get_ref();
            } else {
                total += 1;
            }
            if let Some(r) = st.rate.as_ref().filter(|r| r.get_ref().0 == 0) {
                return self.err(r.span(), &key("rate"), "must be positive");
            }
            if let Some(m) = st.message_size.as_ref() {
                if !(1..=1 << 20).contains(m.get_ref()) {
                    return self.err(m.span(), &key("message_size"), "must be 1..=1048576");
                }
            }
            if let Some(b) = st.bytes.as_ref().filter(|b| *b.get_ref() == 0) {
                return self.err(b.span(), &key("bytes"), "must be positive");
            }
        }
        if total > 1000 {
            return self.err(kind_span, &key("streams"), "at most 1000 streams");
        }
        Ok(())
    }

    /// Parses an address key.
    fn address(&self, v: &Spanned<String>, key: &str) -> Result<SocketAddr, ScenarioError> {
        v.get_ref().parse().or_else(|e| {
            let msg = format!("`{}` is not an IP:port address ({e})", v.get_ref());
            self.err(v.span(), key, &msg)
        })
    }

    /// Index of the address `v` among node `node`'s (the flow's `who`: client or server).
    fn own_address(
        &self,
        t: &Topology,
        node: usize,
        v: &Spanned<String>,
        key: &str,
        who: &str,
    ) -> Result<usize, ScenarioError> {
        let a = self.address(v, key)?;
        let addrs = &t.nodes[node].addrs;
        match addrs.iter().position(|&x| x == a) {
            Some(i) => Ok(i),
            None => self.err(
                v.span(),
                key,
                &format!("{a} is not one of the {who}'s addresses {addrs:?}"),
            ),
        }
    }

    /// Flow `i`'s addresses, its own paths (`own`: their links), source choice and events.
    fn addressing(
        &self,
        t: &mut Topology,
        i: usize,
        own: Vec<(LinkConfig, LinkConfig)>,
    ) -> Result<(), ScenarioError> {
        let fl = &self.file.flows[i];
        let key = |k: &str| format!("flow[{i}].{k}");
        for (node, v, k) in [
            (2 * i, &fl.client, "client"),
            (2 * i + 1, &fl.server, "server"),
        ] {
            if let Some(v) = v {
                t.nodes[node].addrs[0] = self.address(v, &key(k))?;
            }
        }
        // Path 0 of the flow is its first route; the others follow in order.
        let mut routes = vec![i];
        for (k, (links, p)) in own.into_iter().zip(&fl.paths).enumerate() {
            routes.push(self.own_path(t, i, k, p, links)?);
        }
        if let Some(v) = &fl.source {
            t.nodes[2 * i].source = match v.get_ref().as_str() {
                "primary" => SourceChoice::Primary,
                "alternate" => SourceChoice::Alternate,
                _ => SourceChoice::Address(self.own_address(
                    t,
                    2 * i,
                    v,
                    &key("source"),
                    "client",
                )?),
            };
        }
        // Per path of the flow, when it goes down (true) or up.
        let mut toggles: Vec<Vec<(Duration, bool)>> = vec![Vec::new(); routes.len()];
        for k in 0..fl.events.len() {
            self.event(t, i, k, &mut toggles)?;
        }
        for (route, mut list) in routes.into_iter().zip(toggles) {
            list.sort_by_key(|&(at, _)| at);
            let mut since = None;
            // A path still down at the end stays down for good.
            let forever = Duration::from_micros(u64::MAX / 2);
            for (at, down) in list.into_iter().chain([(forever, false)]) {
                match (since, down) {
                    (None, true) => since = Some(at),
                    (Some(from), false) => {
                        t.path_down(route, Instant::ZERO + from, Instant::ZERO + at);
                        since = None;
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// Adds flow `i`'s `k`th own path (`p`, its links `(fwd, rev)`); returns its route.
    fn own_path(
        &self,
        t: &mut Topology,
        i: usize,
        k: usize,
        p: &PathFile,
        (fwd, rev): (LinkConfig, LinkConfig),
    ) -> Result<usize, ScenarioError> {
        let key = |x: &str| format!("flow[{i}].paths[{k}]{x}");
        let end = |side: usize, v: &Option<Spanned<String>>, name: &str| {
            let addrs = &t.nodes[2 * i + side].addrs;
            let a = match v {
                Some(v) => self.address(v, &key(name))?,
                None => addrs[0],
            };
            Ok::<_, ScenarioError>((a, addrs.iter().position(|&x| x == a)))
        };
        let (client, ci) = end(0, &p.client, ".client")?;
        let (server, si) = end(1, &p.server, ".server")?;
        let taken = ci
            .zip(si)
            .is_some_and(|ends| t.flow_paths[i].iter().any(|e| (e.client, e.server) == ends));
        if taken {
            let span = p
                .client
                .as_ref()
                .or(p.server.as_ref())
                .map_or(0..0, |v| v.span());
            let msg = format!("the flow has a path from {client} to {server} already");
            return self.err(span, &key(""), &msg);
        }
        Ok(t.add_path(i, client, server, fwd, rev))
    }

    /// Flow `i`'s `k`th event: a rebind goes into the topology, a path state into
    /// `toggles` (per path of the flow).
    fn event(
        &self,
        t: &mut Topology,
        i: usize,
        k: usize,
        toggles: &mut [Vec<(Duration, bool)>],
    ) -> Result<(), ScenarioError> {
        let e = &self.file.flows[i].events[k];
        let key = |x: &str| format!("flow[{i}].events[{k}]{x}");
        let at = e.at.get_ref().0;
        if e.rebind.is_none() && (e.keep.is_some() || e.address.is_some()) {
            let msg = "`address` and `keep` belong to a rebind";
            return self.err(e.at.span(), &key(""), msg);
        }
        match (&e.node, &e.rebind, &e.path, &e.state) {
            (Some(n), Some(to), None, None) => {
                let who = n.get_ref().as_str();
                let node = match who {
                    "client" => 2 * i,
                    "server" => 2 * i + 1,
                    _ => {
                        let msg = format!("`{who}`: a flow's nodes are `client` and `server`");
                        return self.err(n.span(), &key(".node"), &msg);
                    }
                };
                let addr = match &e.address {
                    None => 0,
                    Some(v) => self.own_address(t, node, v, &key(".address"), who)?,
                };
                t.rebinds.push(Rebind {
                    at: Instant::ZERO + at,
                    node,
                    addr,
                    to: self.address(to, &key(".rebind"))?,
                    keep: e.keep.as_ref().map_or(Duration::ZERO, |d| d.get_ref().0),
                });
            }
            (None, None, Some(p), Some(st)) => {
                let n = toggles.len();
                let Some(list) = toggles.get_mut(*p.get_ref()) else {
                    let msg = format!("the flow has paths 0..={}", n - 1);
                    return self.err(p.span(), &key(".path"), &msg);
                };
                let down = match st.get_ref().as_str() {
                    "down" => true,
                    "up" => false,
                    other => {
                        let msg = format!("`{other}`: `down` or `up`");
                        return self.err(st.span(), &key(".state"), &msg);
                    }
                };
                list.push((at, down));
            }
            _ => {
                let msg = "an event is either `node` and `rebind` (with `address`, `keep`) \
                           or `path` and `state`";
                return self.err(e.at.span(), &key(""), msg);
            }
        }
        Ok(())
    }
}
