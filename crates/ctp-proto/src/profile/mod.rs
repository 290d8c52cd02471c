//! Profiles: a set of microprotocols with their parameters, checked for missing
//! dependencies and conflicts, composed into an [`Engine`] and negotiated in the handshake.

pub mod file;

use crate::cc::CcKind;
use crate::composed::Engine;
use crate::engine::app::AppIo;
use crate::engine::segment::SegmentStore;
use crate::engine::session::Session;
use crate::engine::{Setup, SetupError, State};
use crate::micro::{self, AnyMicro};
pub use crate::wire::sizes::{CONTROL_RESERVE, MIN_UDP_PAYLOAD, PACKET_OVERHEAD, SEGMENT_OVERHEAD};
use crate::wire::{Reader, WireError};
use core::fmt;
use core::time::Duration;

macro_rules! micro_ids {
    ($($variant:ident = $bit:literal, $name:literal, $doc:literal;)*) => {
        /// Identifies a microprotocol. The numbers are the bit positions used on the wire.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum MicroId {
            $(#[doc = $doc] $variant = $bit,)*
        }

        impl MicroId {
            /// Every microprotocol, in composition order.
            pub const ALL: &'static [MicroId] = &[$(MicroId::$variant,)*];

            /// The name used in profiles and on the command line.
            pub fn name(self) -> &'static str {
                match self { $(MicroId::$variant => $name,)* }
            }

            /// One-line description.
            pub fn describe(self) -> &'static str {
                match self { $(MicroId::$variant => $doc,)* }
            }

            /// Looks a microprotocol up by name.
            pub fn from_name(name: &str) -> Option<MicroId> {
                match name { $($name => Some(MicroId::$variant),)* _ => None }
            }
        }
    };
}

micro_ids! {
    Demux = 0, "demux", "demultiplexing by connection id";
    Integrity = 1, "integrity", "CRC32C over every packet";
    Setup = 2, "setup", "handshake with stateless cookie, random initial sequence numbers, negotiation, close";
    Fragmentation = 3, "fragmentation", "fragmentation of large messages and coalescing of small ones";
    Sequencing = 4, "sequencing", "segment sequence numbers: duplicate suppression, cumulative point";
    AckTracking = 5, "ack-tracking", "SACK/NAK/ACK-floor status tracking: reports acked, lost, timed out";
    Rtt = 6, "rtt", "RTT and RTO estimation (RFC 6298)";
    Arq = 7, "arq", "retransmission of lost segments";
    Fifo = 8, "fifo", "in-order delivery";
    Unordered = 9, "unordered", "delivery as soon as a message is complete";
    FlowWindow = 10, "flow-window", "receiver-window flow control (segments)";
    CongestionWindow = 11, "cwnd", "congestion-window mechanism";
    Pacing = 12, "pacing", "pacing (rate) mechanism";
    NewReno = 13, "newreno", "NewReno congestion policy";
    KeepAlive = 14, "keepalive", "keep-alive pings and idle timeout";
    LossyFifo = 15, "lossy-fifo", "in-order delivery that skips a missing message after a deadline";
    Fec = 16, "fec", "forward error correction: Reed-Solomon over blocks of k segments, m repairs";
    Scp = 17, "scp", "SCP-style congestion policy: rate and window from RTT";
    Tfrc = 18, "tfrc", "TFRC congestion policy: TCP throughput equation drives the rate (RFC 5348)";
    XonXoff = 19, "xon-xoff", "XON/XOFF flow control: the receiver stops and resumes the sender";
    RtsCts = 20, "rts-cts", "RTS/CTS flow control: the sender asks, the receiver clears";
    FixedInterval = 21, "fixed-interval", "jitter control: one message delivered per fixed interval";
    Playout = 22, "playout", "jitter control: sender timestamps and a playout delay preserve the sender's timing";
    Urgent = 23, "urgent", "urgent (out-of-band) messages bypass the ordering in force";
    Cc = 24, "cc", "congestion policy from the cc library: the algorithm named by the `cc` parameter (newreno, cubic, bbr, udt, …)";
    Causal = 25, "causal", "causal ordering: a message waits only for the earlier messages its sender named";
    Compression = 26, "compression", "per-segment LZ4 compression, only when it shrinks the packet; bounded decompression";
    Pmtud = 27, "pmtud", "path MTU discovery (DPLPMTUD): padded probes search up from 1200 bytes, black holes fall back";
}

impl fmt::Display for MicroId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of microprotocols (a bitfield, as sent in the handshake).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MicroSet(pub u64);

impl MicroSet {
    /// Builds a set from a list.
    pub fn of(ids: &[MicroId]) -> Self {
        MicroSet(ids.iter().fold(0, |acc, &m| acc | 1 << m as u64))
    }

    /// True when `m` is in the set.
    pub fn has(self, m: MicroId) -> bool {
        self.0 & (1 << m as u64) != 0
    }

    /// The set without `m`.
    pub fn without(self, m: MicroId) -> Self {
        MicroSet(self.0 & !(1 << m as u64))
    }

    /// The members, in composition order.
    pub fn iter(self) -> impl Iterator<Item = MicroId> {
        MicroId::ALL.iter().copied().filter(move |&m| self.has(m))
    }

    /// Bits that name no known microprotocol.
    pub fn unknown_bits(self) -> u64 {
        self.0 & !MicroSet::of(MicroId::ALL).0
    }
}

/// Microprotocols a responder may drop from a request while narrowing it.
pub const OPTIONAL: &[MicroId] = &[MicroId::KeepAlive, MicroId::Pacing];

/// Microprotocols every profile must contain.
pub const MANDATORY: &[MicroId] = &[
    MicroId::Demux,
    MicroId::Integrity,
    MicroId::Setup,
    MicroId::Fragmentation,
];

/// Why a profile is not a valid composition.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    /// A microprotocol every profile needs is absent.
    #[error("every profile needs `{0}` ({desc}); add it", desc = .0.describe())]
    Mandatory(MicroId),
    /// A microprotocol lacks one it depends on.
    #[error("microprotocol `{micro}` needs `{needs}`: {why}; add `{needs}` or remove `{micro}`")]
    Missing {
        /// The microprotocol with the dependency.
        micro: MicroId,
        /// What it needs.
        needs: MicroId,
        /// Why.
        why: &'static str,
    },
    /// A microprotocol lacks all of the alternatives it can work with.
    #[error("microprotocol `{micro}` needs one of {}: {why}; add one", .options.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", "))]
    MissingOneOf {
        /// The microprotocol with the dependency.
        micro: MicroId,
        /// The alternatives.
        options: &'static [MicroId],
        /// Why.
        why: &'static str,
    },
    /// Two microprotocols cannot be composed together.
    #[error("microprotocols `{a}` and `{b}` conflict: {why}; keep only one")]
    Conflict {
        /// First of the pair.
        a: MicroId,
        /// Second of the pair.
        b: MicroId,
        /// Why.
        why: &'static str,
    },
    /// No delivery (ordering) microprotocol.
    #[error("a profile needs a delivery microprotocol: add `fifo` (in order), `lossy-fifo`, `causal` or `unordered`")]
    NoDelivery,
    /// A parameter is out of range.
    #[error("parameter `{name}` = {value} is out of range: {hint}")]
    Param {
        /// Parameter name.
        name: &'static str,
        /// Given value.
        value: u64,
        /// Allowed range.
        hint: &'static str,
    },
    /// `--cc` / `cc =` on a profile that has no congestion control to replace.
    #[error("profile `{0}` has no congestion control (no `ack-tracking`); choose a profile such as `reliable` or `datagram` to set `cc`")]
    NoCongestionControl(String),
    /// Unknown profile or microprotocol name.
    #[error("unknown {what} `{name}`; known: {known}")]
    Unknown {
        /// "profile" or "microprotocol".
        what: &'static str,
        /// The name given.
        name: String,
        /// The names that exist.
        known: String,
    },
}

/// Dependencies: (microprotocol, needs, why).
const DEPENDENCIES: &[(MicroId, MicroId, &str)] = &[
    (
        MicroId::Arq,
        MicroId::AckTracking,
        "it retransmits what ack-tracking reports lost",
    ),
    (
        MicroId::Arq,
        MicroId::Sequencing,
        "retransmitted segments are recognised by their sequence numbers",
    ),
    (
        MicroId::AckTracking,
        MicroId::Rtt,
        "loss detection and the retransmission timer need RTT estimates",
    ),
    (
        MicroId::Fifo,
        MicroId::Arq,
        "in-order delivery waits for every message, so a lost one would stall it forever",
    ),
    (
        MicroId::Fifo,
        MicroId::Sequencing,
        "ordering needs duplicate-free segments",
    ),
    (
        MicroId::LossyFifo,
        MicroId::Sequencing,
        "ordering needs duplicate-free segments",
    ),
    (
        MicroId::Pmtud,
        MicroId::AckTracking,
        "a probe size is confirmed when its probe is acknowledged and given up when reported lost",
    ),
    (
        MicroId::Causal,
        MicroId::Sequencing,
        "a duplicated message would be taken for a late one and its turn confused",
    ),
    (
        MicroId::Fec,
        MicroId::Sequencing,
        "a recovered segment may also arrive late and must not be delivered twice",
    ),
    (
        MicroId::FlowWindow,
        MicroId::Sequencing,
        "credit is counted in segment sequence numbers",
    ),
    (
        MicroId::CongestionWindow,
        MicroId::AckTracking,
        "the window shrinks as packets are acked or lost",
    ),
    (
        MicroId::NewReno,
        MicroId::CongestionWindow,
        "a congestion policy needs the window mechanism it drives",
    ),
    (
        MicroId::NewReno,
        MicroId::AckTracking,
        "the policy reacts to acked and lost packets",
    ),
    (
        MicroId::Scp,
        MicroId::CongestionWindow,
        "the policy drives the window mechanism",
    ),
    (
        MicroId::Scp,
        MicroId::Pacing,
        "the policy drives the pacing (rate) mechanism",
    ),
    (
        MicroId::Scp,
        MicroId::AckTracking,
        "the policy reacts to acked and lost packets",
    ),
    (
        MicroId::Cc,
        MicroId::CongestionWindow,
        "the algorithm's window is enforced by the window mechanism (rate-only algorithms leave it open)",
    ),
    (
        MicroId::Cc,
        MicroId::AckTracking,
        "the algorithm reacts to acked and lost packets",
    ),
    (
        MicroId::RtsCts,
        MicroId::Sequencing,
        "clearance is counted in segment sequence numbers",
    ),
    (
        MicroId::Tfrc,
        MicroId::Pacing,
        "the policy sets the rate the pacing mechanism enforces",
    ),
    (
        MicroId::Tfrc,
        MicroId::AckTracking,
        "the loss event rate comes from acked and lost packets",
    ),
];

/// Congestion policies: a mechanism needs one of them.
const POLICIES: &[MicroId] = &[MicroId::NewReno, MicroId::Scp, MicroId::Tfrc, MicroId::Cc];

/// Dependencies on one of several alternatives: (microprotocol, alternatives, why).
const NEEDS_ONE_OF: &[(MicroId, &[MicroId], &str)] = &[
    (
        MicroId::CongestionWindow,
        POLICIES,
        "a congestion mechanism needs a policy to set its window",
    ),
    (
        MicroId::Pacing,
        POLICIES,
        "the pacing mechanism needs a policy to set its rate",
    ),
];

/// Conflicts: (a, b, why).
const CONFLICTS: &[(MicroId, MicroId, &str)] = &[
    (
        MicroId::Fifo,
        MicroId::Unordered,
        "a message cannot be delivered both in order and as it completes",
    ),
    (
        MicroId::Fifo,
        MicroId::LossyFifo,
        "two ordering microprotocols would both deliver every message",
    ),
    (
        MicroId::LossyFifo,
        MicroId::Unordered,
        "a message cannot be delivered both in order and as it completes",
    ),
    (
        MicroId::NewReno,
        MicroId::Scp,
        "two congestion policies would fight over one window",
    ),
    (
        MicroId::Compression,
        MicroId::Fec,
        "FEC encodes segments as sent and rebuilds them as uncompressed DATA, so a recovered compressed segment would be garbage",
    ),
    (
        MicroId::Causal,
        MicroId::Fifo,
        "`fifo` already delivers every earlier message first; `causal` is a delivery order of its own",
    ),
    (
        MicroId::Causal,
        MicroId::LossyFifo,
        "`lossy-fifo` already delivers every earlier message first; `causal` is a delivery order of its own",
    ),
    (
        MicroId::Causal,
        MicroId::Unordered,
        "`causal` already delivers a message without named predecessors as soon as it is complete",
    ),
    (
        MicroId::FlowWindow,
        MicroId::XonXoff,
        "two flow-control microprotocols would both gate every segment",
    ),
    (
        MicroId::FlowWindow,
        MicroId::RtsCts,
        "two flow-control microprotocols would both gate every segment",
    ),
    (
        MicroId::XonXoff,
        MicroId::RtsCts,
        "two flow-control microprotocols would both gate every segment",
    ),
    (
        MicroId::FixedInterval,
        MicroId::Playout,
        "two jitter-control microprotocols would each impose their own schedule",
    ),
    (
        MicroId::NewReno,
        MicroId::Tfrc,
        "two congestion policies would fight over one sender",
    ),
    (
        MicroId::Scp,
        MicroId::Tfrc,
        "two congestion policies would fight over one rate",
    ),
    (
        MicroId::NewReno,
        MicroId::Cc,
        "two congestion policies would fight over one window; use `cc = \"newreno\"`",
    ),
    (
        MicroId::Scp,
        MicroId::Cc,
        "two congestion policies would fight over one window",
    ),
    (
        MicroId::Tfrc,
        MicroId::Cc,
        "two congestion policies would fight over one rate",
    ),
];

/// Compositions that are allowed but whose semantics are probably not what was meant:
/// (present, also present or absent, warning).
const SEMANTIC_WARNINGS: &[(MicroId, MicroId, bool, &str)] = &[
    (
        MicroId::LossyFifo,
        MicroId::Arq,
        true,
        "`lossy-fifo` skips late messages that `arq` keeps retransmitting: the semantics conflict",
    ),
    (
        MicroId::Unordered,
        MicroId::Sequencing,
        false,
        "`unordered` without `sequencing` may deliver a duplicated datagram twice",
    ),
];

/// Warnings about a valid but semantically doubtful composition (empty when none).
pub fn warnings(set: MicroSet) -> Vec<&'static str> {
    SEMANTIC_WARNINGS
        .iter()
        .filter(|&&(a, b, with, _)| set.has(a) && set.has(b) == with)
        .map(|w| w.3)
        .collect()
}

/// Tunable parameters of a profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Largest UDP payload sent on an IPv4 path (1472 fills a 1500-byte MTU). IPv6's
    /// header is 20 bytes longer, so IPv6 paths use 20 bytes less ([`Params::for_peer`]).
    pub max_udp_payload: u16,
    /// Flow window, segments.
    pub flow_window: u32,
    /// Largest message, bytes.
    pub max_message: u32,
    /// Idle timeout, milliseconds.
    pub idle_timeout_ms: u32,
    /// Keep-alive interval, milliseconds.
    pub keepalive_ms: u32,
    /// Minimum retransmission timeout, microseconds.
    pub min_rto_us: u32,
    /// Longest the receiver delays an acknowledgement, microseconds.
    pub max_ack_delay_us: u32,
    /// Initial congestion window, packets.
    pub initial_window: u32,
    /// Send queue limit, bytes.
    pub send_buffer: u32,
    /// Receive buffer limit, bytes.
    pub recv_buffer: u32,
    /// How long `lossy-fifo` waits for a missing message before skipping it, milliseconds.
    pub fifo_deadline_ms: u32,
    /// Data segments per FEC block.
    pub fec_k: u8,
    /// Repair shards per FEC block.
    pub fec_m: u8,
    /// A partial FEC block is encoded after this long, milliseconds.
    pub fec_flush_ms: u32,
    /// `fixed-interval` delivers one message per this many microseconds.
    pub jitter_interval_us: u32,
    /// `playout` delays every message by this many milliseconds after its sender timing.
    pub playout_delay_ms: u32,
    /// The algorithm the `cc` microprotocol runs (carried in the handshake).
    pub cc: CcKind,
    /// Rate of rate-configured algorithms (`blast`, `group`'s initial share), kbit/s.
    pub cc_rate_kbps: u32,
    /// Without `arq`, how long `causal` lets a message wait for missing predecessors before
    /// declaring them lost, milliseconds.
    pub causal_deadline_ms: u32,
}

/// Smallest flow window, segments.
pub const MIN_FLOW_WINDOW: u32 = 16;
/// Largest message size a profile may set.
pub const MAX_MESSAGE_LIMIT: u32 = 1 << 30;

impl Default for Params {
    fn default() -> Self {
        Params {
            max_udp_payload: 1472,
            flow_window: 16_384,
            max_message: 16 << 20,
            idle_timeout_ms: 30_000,
            keepalive_ms: 5_000,
            min_rto_us: 10_000,
            max_ack_delay_us: 5_000,
            initial_window: 10,
            send_buffer: 8 << 20,
            recv_buffer: 32 << 20,
            fifo_deadline_ms: 100,
            fec_k: 4,
            fec_m: 1,
            fec_flush_ms: 20,
            jitter_interval_us: 20_000,
            playout_delay_ms: 100,
            cc: CcKind::NewReno,
            cc_rate_kbps: 100_000,
            causal_deadline_ms: 100,
        }
    }
}

/// How many bytes longer an IPv6 header is than an IPv4 one (40 against 20).
pub const IPV6_EXTRA_HEADER: u16 = 20;

impl Params {
    /// These parameters for a path to `peer`: over IPv6 (not IPv4-mapped), the UDP payload
    /// shrinks by [`IPV6_EXTRA_HEADER`] so that a datagram fills the same MTU, never below
    /// [`MIN_UDP_PAYLOAD`].
    pub fn for_peer(mut self, peer: std::net::SocketAddr) -> Self {
        let v6 = match peer.ip() {
            std::net::IpAddr::V4(_) => false,
            std::net::IpAddr::V6(a) => a.to_ipv4_mapped().is_none(),
        };
        if v6 {
            self.max_udp_payload = self
                .max_udp_payload
                .saturating_sub(IPV6_EXTRA_HEADER)
                .max(MIN_UDP_PAYLOAD);
        }
        self
    }

    /// These parameters with a flow window and a largest message the receive buffer can
    /// honour: credit for the whole window (each segment a full UDP payload) fits in the
    /// credited three quarters of `recv_buffer`, and a message in reassembly in half of it
    /// (`engine::admission`). Both sides apply it to what they offer, so the window they
    /// agree on (the smaller offer) fits both buffers.
    pub fn fit_recv_buffer(mut self) -> Self {
        let credited = u64::from(self.recv_buffer) / 4 * 3;
        let fit = (credited / u64::from(self.max_udp_payload)).max(MIN_FLOW_WINDOW.into());
        self.flow_window = self.flow_window.min(fit as u32);
        self.max_message = self.max_message.min(self.recv_buffer / 2);
        self
    }

    /// Checks every parameter's range.
    pub fn check(&self) -> Result<(), ProfileError> {
        let bad = |name, value: u64, hint| Err(ProfileError::Param { name, value, hint });
        if !(MIN_UDP_PAYLOAD..=65_000).contains(&self.max_udp_payload) {
            return bad(
                "max_udp_payload",
                self.max_udp_payload.into(),
                "1200..=65000 bytes",
            );
        }
        if !(MIN_FLOW_WINDOW..=1 << 20).contains(&self.flow_window) {
            return bad(
                "flow_window",
                self.flow_window.into(),
                "16..=1048576 segments",
            );
        }
        if !(1..=MAX_MESSAGE_LIMIT).contains(&self.max_message) {
            return bad(
                "max_message",
                self.max_message.into(),
                "1..=1073741824 bytes",
            );
        }
        if !(100..=3_600_000).contains(&self.idle_timeout_ms) {
            return bad(
                "idle_timeout_ms",
                self.idle_timeout_ms.into(),
                "100..=3600000 ms",
            );
        }
        if self.fifo_deadline_ms == 0 || self.fifo_deadline_ms > 60_000 {
            return bad(
                "fifo_deadline_ms",
                self.fifo_deadline_ms.into(),
                "1..=60000 ms",
            );
        }
        if self.causal_deadline_ms == 0 || self.causal_deadline_ms > 60_000 {
            return bad(
                "causal_deadline_ms",
                self.causal_deadline_ms.into(),
                "1..=60000 ms",
            );
        }
        if self.fec_k == 0 || self.fec_m == 0 || self.fec_k as usize + self.fec_m as usize > 256 {
            return bad(
                "fec_k/fec_m",
                self.fec_k as u64 * 1000 + self.fec_m as u64,
                "k ≥ 1, m ≥ 1, k + m ≤ 256",
            );
        }
        if self.fec_flush_ms == 0 || self.fec_flush_ms > 10_000 {
            return bad("fec_flush_ms", self.fec_flush_ms.into(), "1..=10000 ms");
        }
        if self.jitter_interval_us == 0 {
            return bad("jitter_interval_us", 0, "at least 1 µs");
        }
        if self.playout_delay_ms > 600_000 {
            return bad(
                "playout_delay_ms",
                self.playout_delay_ms.into(),
                "0..=600000 ms",
            );
        }
        if self.cc_rate_kbps < 8 {
            return bad(
                "cc_rate_kbps",
                self.cc_rate_kbps.into(),
                "at least 8 kbit/s",
            );
        }
        if self.keepalive_ms == 0 {
            return bad("keepalive_ms", 0, "at least 1 ms");
        }
        if self.initial_window == 0 {
            return bad("initial_window", 0, "at least 1 packet");
        }
        if self.send_buffer < 65_536 || self.recv_buffer < 65_536 {
            return bad(
                "send_buffer/recv_buffer",
                self.send_buffer.min(self.recv_buffer).into(),
                "at least 65536 bytes",
            );
        }
        let least = u64::from(MIN_FLOW_WINDOW) * u64::from(self.max_udp_payload) / 3 * 4;
        if u64::from(self.recv_buffer) < least {
            return bad(
                "recv_buffer",
                self.recv_buffer.into(),
                "room for 16 full segments in its credited three quarters: at least 4/3 × 16 × max_udp_payload bytes",
            );
        }
        Ok(())
    }
}

/// A named composition: microprotocols plus parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    /// Profile name.
    pub name: String,
    /// The microprotocols.
    pub micros: MicroSet,
    /// Their parameters.
    pub params: Params,
}

/// Every built-in profile, name and description: the ctp-wire ones ([`BUILTIN`]), then
/// the UDT4-wire ones ([`crate::udt::PROFILES`]).
pub fn every_builtin() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    BUILTIN.iter().chain(crate::udt::PROFILES)
}

/// Names and one-line descriptions of the built-in profiles.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "reliable",
        "ordered, reliable byte stream and messages; NewReno congestion control",
    ),
    (
        "datagram",
        "unordered, unreliable messages; still congestion-controlled",
    ),
    (
        "ctp-minimal",
        "CTP-Minimal: segmentation only; datagrams as they arrive, no guarantees",
    ),
    (
        "ctp-lossy-fifo",
        "CTP-LossyFIFO: sequencing and in-order delivery that skips late messages",
    ),
    (
        "ctp-bulk",
        "CTP-Bulk: reliable, in order, retransmission, TCP-style (ack-clocked) congestion control",
    ),
    (
        "ctp-video",
        "CTP-Video: SCP-style congestion control, positive and negative ACKs, RTT, unreliable in-order delivery",
    ),
    (
        "ctp-audio",
        "CTP-Audio: CTP-Video plus block FEC (recovers 1 loss in 5 by default)",
    ),
];

impl Profile {
    /// The `reliable` profile.
    pub fn reliable() -> Self {
        use MicroId::*;
        Profile {
            name: "reliable".into(),
            micros: MicroSet::of(&[
                Demux,
                Integrity,
                Setup,
                Fragmentation,
                Sequencing,
                AckTracking,
                Rtt,
                Arq,
                Fifo,
                FlowWindow,
                CongestionWindow,
                Pacing,
                NewReno,
                KeepAlive,
            ]),
            params: Params::default(),
        }
    }

    /// The `datagram` profile.
    pub fn datagram() -> Self {
        use MicroId::*;
        Profile {
            name: "datagram".into(),
            micros: MicroSet::of(&[
                Demux,
                Integrity,
                Setup,
                Fragmentation,
                Sequencing,
                AckTracking,
                Rtt,
                Unordered,
                CongestionWindow,
                Pacing,
                NewReno,
                KeepAlive,
            ]),
            params: Params::default(),
        }
    }

    /// CTP-Minimal: segmentation only.
    pub fn ctp_minimal() -> Self {
        use MicroId::*;
        let micros = MicroSet::of(&[Demux, Integrity, Setup, Fragmentation, Unordered]);
        Profile {
            name: "ctp-minimal".into(),
            micros,
            params: Params::default(),
        }
    }

    /// CTP-LossyFIFO: sequencing plus lossy in-order delivery.
    pub fn ctp_lossy_fifo() -> Self {
        use MicroId::*;
        let micros = MicroSet::of(&[
            Demux,
            Integrity,
            Setup,
            Fragmentation,
            Sequencing,
            LossyFifo,
        ]);
        Profile {
            name: "ctp-lossy-fifo".into(),
            micros,
            params: Params::default(),
        }
    }

    /// CTP-Bulk: `reliable` without pacing, so the window is clocked by acknowledgements as
    /// in TCP.
    pub fn ctp_bulk() -> Self {
        Profile {
            name: "ctp-bulk".into(),
            micros: Self::reliable().micros.without(MicroId::Pacing),
            params: Params::default(),
        }
    }

    /// CTP-Video: SCP-style congestion control, positive and negative ACKs, RTT estimation,
    /// unreliable in-order delivery.
    pub fn ctp_video() -> Self {
        use MicroId::*;
        let micros = MicroSet::of(&[
            Demux,
            Integrity,
            Setup,
            Fragmentation,
            Sequencing,
            AckTracking,
            Rtt,
            LossyFifo,
            CongestionWindow,
            Pacing,
            Scp,
            KeepAlive,
        ]);
        Profile {
            name: "ctp-video".into(),
            micros,
            params: Params::default(),
        }
    }

    /// CTP-Audio: CTP-Video plus forward error correction.
    pub fn ctp_audio() -> Self {
        let video = Self::ctp_video();
        Profile {
            name: "ctp-audio".into(),
            micros: MicroSet(video.micros.0 | MicroSet::of(&[MicroId::Fec]).0),
            params: video.params,
        }
    }

    /// A built-in profile by name.
    pub fn builtin(name: &str) -> Result<Self, ProfileError> {
        match name {
            "reliable" => Ok(Self::reliable()),
            "datagram" => Ok(Self::datagram()),
            "ctp-minimal" => Ok(Self::ctp_minimal()),
            "ctp-lossy-fifo" => Ok(Self::ctp_lossy_fifo()),
            "ctp-bulk" => Ok(Self::ctp_bulk()),
            "ctp-video" => Ok(Self::ctp_video()),
            "ctp-audio" => Ok(Self::ctp_audio()),
            "udt" => Ok(Self::udt()),
            "udt-dgram" => Ok(Self::udt_dgram()),
            _ => Err(ProfileError::Unknown {
                what: "profile",
                name: name.into(),
                known: every_builtin().map(|b| b.0).collect::<Vec<_>>().join(", "),
            }),
        }
    }

    /// The same profile with its congestion policy replaced by the `cc` microprotocol
    /// running `kind`: `newreno`, `scp` or `tfrc` is removed, the window mechanism added,
    /// and pacing added for the rate-based algorithms (UDT, BBR, blast, group). A profile
    /// without congestion control (no `ack-tracking`) is refused.
    pub fn with_cc(mut self, kind: CcKind) -> Result<Self, ProfileError> {
        use MicroId::*;
        if !self.micros.has(AckTracking) {
            return Err(ProfileError::NoCongestionControl(self.name));
        }
        let mut set = self.micros.without(NewReno).without(Scp).without(Tfrc);
        set = MicroSet(set.0 | MicroSet::of(&[Cc, CongestionWindow]).0);
        if matches!(
            kind,
            CcKind::Udt | CcKind::UdtNoisy | CcKind::Bbr | CcKind::Blast | CcKind::Group
        ) {
            set = MicroSet(set.0 | MicroSet::of(&[Pacing]).0);
        }
        self.micros = set;
        self.params.cc = kind;
        self.check()?;
        Ok(self)
    }

    /// The congestion-control algorithm in force: the `cc` parameter when the profile
    /// composes `cc`, else the name of its congestion policy microprotocol, if any.
    pub fn congestion_control(&self) -> Option<&'static str> {
        if self.micros.has(MicroId::Cc) {
            return Some(self.params.cc.name());
        }
        [MicroId::NewReno, MicroId::Scp, MicroId::Tfrc]
            .into_iter()
            .find(|&m| self.micros.has(m))
            .map(MicroId::name)
    }

    /// True when every segment is eventually delivered.
    pub fn is_reliable(&self) -> bool {
        self.micros.has(MicroId::Arq)
    }

    /// Checks dependencies, conflicts and parameters.
    pub fn check(&self) -> Result<(), ProfileError> {
        check_micros(self.micros)?;
        self.params.check()
    }
}

/// Checks a microprotocol set for mandatory members, dependencies and conflicts: the first
/// problem [`problems`] finds.
pub fn check_micros(set: MicroSet) -> Result<(), ProfileError> {
    match problems(set).into_iter().next() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Every rule a microprotocol set breaks, in the order they are checked: mandatory members,
/// conflicts, dependencies, dependencies on one of several alternatives, a delivery order.
pub fn problems(set: MicroSet) -> Vec<ProfileError> {
    let mut found: Vec<ProfileError> = MANDATORY
        .iter()
        .filter(|&&m| !set.has(m))
        .map(|&m| ProfileError::Mandatory(m))
        .collect();
    found.extend(
        CONFLICTS
            .iter()
            .filter(|&&(a, b, _)| set.has(a) && set.has(b))
            .map(|&(a, b, why)| ProfileError::Conflict { a, b, why }),
    );
    found.extend(
        DEPENDENCIES
            .iter()
            .filter(|&&(micro, needs, _)| set.has(micro) && !set.has(needs))
            .map(|&(micro, needs, why)| ProfileError::Missing { micro, needs, why }),
    );
    found.extend(
        NEEDS_ONE_OF
            .iter()
            .filter(|&&(micro, options, _)| set.has(micro) && !options.iter().any(|&m| set.has(m)))
            .map(|&(micro, options, why)| ProfileError::MissingOneOf {
                micro,
                options,
                why,
            }),
    );
    let delivery = [
        MicroId::Fifo,
        MicroId::Unordered,
        MicroId::LossyFifo,
        MicroId::Causal,
    ];
    if !delivery.iter().any(|&m| set.has(m)) {
        found.push(ProfileError::NoDelivery);
    }
    found
}

/// Initial sequence numbers one side chose in the handshake.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Isn {
    /// First segment sequence number.
    pub seg: u64,
    /// First message sequence number.
    pub msg: u64,
    /// First packet number.
    pub pn: u64,
}

/// Encodes a profile request (initiator) or answer (responder) for the handshake.
pub fn encode_offer(out: &mut Vec<u8>, micros: MicroSet, p: &Params, isn: &Isn) {
    use crate::wire::varint::put;
    put(out, micros.0);
    for v in [
        p.max_udp_payload as u64,
        p.flow_window as u64,
        p.max_message as u64,
        p.idle_timeout_ms as u64,
    ] {
        put(out, v);
    }
    put(out, isn.seg);
    put(out, isn.msg);
    put(out, isn.pn);
    // Only with the `cc` bit: offers without it stay byte-identical to earlier versions.
    if micros.has(MicroId::Cc) {
        put(out, p.cc.id());
        put(out, p.cc_rate_kbps as u64);
    }
}

/// Decodes what [`encode_offer`] wrote; the remaining parameters are taken from `local`.
pub fn decode_offer(
    r: &mut Reader<'_>,
    local: &Params,
) -> Result<(MicroSet, Params, Isn), WireError> {
    let micros = MicroSet(r.varint()?);
    let mut p = *local;
    let clamp32 = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    p.max_udp_payload =
        u16::try_from(r.varint()?).map_err(|_| WireError::Invalid("max_udp_payload"))?;
    p.flow_window = clamp32(r.varint()?);
    p.max_message = clamp32(r.varint()?);
    p.idle_timeout_ms = clamp32(r.varint()?);
    let isn = Isn {
        seg: r.varint()?,
        msg: r.varint()?,
        pn: r.varint()?,
    };
    if micros.has(MicroId::Cc) {
        p.cc = CcKind::from_id(r.varint()?)
            .ok_or(WireError::Invalid("unknown congestion-control algorithm"))?;
        p.cc_rate_kbps = clamp32(r.varint()?);
    }
    Ok((micros, p, isn))
}

/// The responder's decision on a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Negotiated {
    /// Accepted as asked, or narrowed to this set and parameters.
    Accept(MicroSet, Params),
    /// Refused, with a reason for the initiator.
    Refuse(String),
}

/// Narrows a request against what the responder supports.
///
/// Optional microprotocols the responder lacks are dropped; a missing required one, an
/// unknown bit or an invalid result refuses with a reason naming it. Numeric parameters
/// become the smaller of the two sides' values.
pub fn negotiate(
    requested: MicroSet,
    asked: &Params,
    supported: MicroSet,
    local: &Params,
) -> Negotiated {
    if requested.unknown_bits() != 0 {
        return Negotiated::Refuse(format!(
            "unknown microprotocol bits {:#x}",
            requested.unknown_bits()
        ));
    }
    let mut set = requested;
    for m in requested.iter() {
        if !supported.has(m) {
            if OPTIONAL.contains(&m) {
                set = set.without(m);
            } else {
                return Negotiated::Refuse(format!(
                    "responder does not support microprotocol `{m}`"
                ));
            }
        }
    }
    if let Err(e) = check_micros(set) {
        return Negotiated::Refuse(format!("requested profile is invalid: {e}"));
    }
    let mut p = *local;
    p.max_udp_payload = asked.max_udp_payload.min(local.max_udp_payload);
    p.flow_window = asked.flow_window.min(local.flow_window);
    p.max_message = asked.max_message.min(local.max_message);
    p.idle_timeout_ms = asked.idle_timeout_ms.min(local.idle_timeout_ms);
    // The initiator chooses the algorithm; both sides run it for what they send.
    p.cc = asked.cc;
    p.cc_rate_kbps = asked.cc_rate_kbps;
    if let Err(e) = p.check() {
        return Negotiated::Refuse(format!("requested parameters are invalid: {e}"));
    }
    Negotiated::Accept(set, p)
}

/// The congestion-control library's configuration from a profile's parameters.
fn cc_config(p: &Params) -> crate::cc::Config {
    crate::cc::Config {
        mss: p.max_udp_payload as u64,
        initial_window: p.initial_window as u64,
        rate: p.cc_rate_kbps as u64 * 125,
        max_window: p.flow_window as u64,
    }
}

/// Composes the microprotocols of `set` into an engine.
pub fn compose(set: MicroSet, p: &Params, local: Isn, peer: Isn) -> Result<Engine, SetupError> {
    let mut session = Session {
        max_segment_payload: p.max_udp_payload as usize - SEGMENT_OVERHEAD,
        next_seg_seq: local.seg,
        next_msg_seq: local.msg,
        peer_seg_isn: peer.seg,
        peer_msg_isn: peer.msg,
        recv_seg_cum: peer.seg,
        local_seg_isn: local.seg,
        rto_us: 200_000.max(p.min_rto_us as u64),
        plpmtu: p.max_udp_payload as usize,
        ..Session::default()
    };
    if set.has(MicroId::FlowWindow) {
        session.peer_max_seg = local.seg + p.flow_window as u64;
        session.recv_credit = peer.seg + p.flow_window as u64;
    }
    session.peer_segment_max = p.max_udp_payload as usize;
    let mut st = State {
        segs: SegmentStore::new(p.flow_window as usize),
        app: AppIo::with_limits(p.send_buffer as usize, p.recv_buffer as usize),
        next_pn: local.pn,
        ..State::default()
    };
    let mut micros = Vec::new();
    let reliable = set.has(MicroId::Arq);
    for m in set.iter() {
        let mut setup = Setup {
            holds: &mut st.holds,
            timers: &mut st.timers,
            index: micros.len() as u8,
        };
        let built = match m {
            MicroId::Demux | MicroId::Integrity | MicroId::Setup => continue,
            MicroId::Fragmentation => {
                AnyMicro::Fragmentation(micro::fragmentation::Fragmentation::new(
                    p.max_message as usize,
                    reliable,
                    set.has(MicroId::Sequencing),
                ))
            }
            MicroId::Sequencing => {
                let (mode, width) = if reliable {
                    (micro::sequencing::WindowMode::Strict, p.flow_window as u64)
                } else {
                    (micro::sequencing::WindowMode::Sliding, 4096)
                };
                AnyMicro::Sequencing(micro::sequencing::Sequencing::new(mode, width))
            }
            MicroId::AckTracking => {
                AnyMicro::AckTracking(Box::new(micro::ack_tracking::AckTracking::new(
                    &mut setup,
                    Duration::from_micros(p.max_ack_delay_us as u64),
                )?))
            }
            MicroId::Rtt => AnyMicro::Rtt(micro::rtt::RttEstimator::new(
                p.min_rto_us as u64,
                60_000_000,
                p.max_ack_delay_us as u64,
            )),
            MicroId::Arq => AnyMicro::Arq(micro::arq::Arq::new(&mut setup)?),
            MicroId::Fifo => AnyMicro::Fifo(micro::ordering::Fifo::new(&mut setup)?),
            MicroId::Unordered => AnyMicro::Unordered(micro::ordering::Unordered::new(&mut setup)?),
            MicroId::Fec => AnyMicro::Fec(Box::new(micro::fec::Fec::new(
                &mut setup,
                p.fec_k,
                p.fec_m,
                Duration::from_millis(p.fec_flush_ms as u64),
            )?)),
            MicroId::LossyFifo => AnyMicro::LossyFifo(micro::ordering::LossyFifo::new(
                &mut setup,
                Duration::from_millis(p.fifo_deadline_ms as u64),
            )?),
            MicroId::FlowWindow => AnyMicro::FlowWindow(micro::flow_window::FlowWindow::new(
                &mut setup,
                p.flow_window as u64,
                peer.seg,
            )?),
            MicroId::CongestionWindow => {
                AnyMicro::CongestionWindow(micro::window::CongestionWindow::new(&mut setup)?)
            }
            MicroId::Pacing => AnyMicro::Pacing(micro::pacing::Pacing::new(&mut setup)?),
            MicroId::NewReno => AnyMicro::NewReno(micro::newreno::NewReno::new(
                p.max_udp_payload as u64,
                p.initial_window as u64,
                &mut session,
            )),
            MicroId::Scp => AnyMicro::Scp(micro::scp::Scp::new(
                p.max_udp_payload as u64,
                p.initial_window as u64,
                &mut session,
            )),
            MicroId::Tfrc => AnyMicro::Tfrc(micro::tfrc::Tfrc::new(
                p.max_udp_payload as u64,
                p.initial_window as u64,
                &mut session,
            )),
            MicroId::XonXoff => AnyMicro::XonXoff(micro::xon_xoff::XonXoff::new(&mut setup)?),
            MicroId::RtsCts => AnyMicro::RtsCts(micro::rts_cts::RtsCts::new(
                &mut setup, local.seg, peer.seg,
            )?),
            MicroId::FixedInterval => AnyMicro::FixedInterval(micro::jitter::FixedInterval::new(
                &mut setup,
                Duration::from_micros(p.jitter_interval_us as u64),
            )?),
            MicroId::Playout => AnyMicro::Playout(micro::jitter::Playout::new(
                &mut setup,
                Duration::from_millis(p.playout_delay_ms as u64),
            )?),
            MicroId::Urgent => AnyMicro::Urgent(micro::ordering::Urgent),
            MicroId::Cc => AnyMicro::Cc(Box::new(micro::cc::CcPolicy::new(
                p.cc,
                &cc_config(p),
                &mut session,
            ))),
            MicroId::Pmtud => AnyMicro::Pmtud(micro::pmtud::Pmtud::new(
                &mut setup,
                p.max_udp_payload as usize,
                &mut session,
            )?),
            MicroId::Compression => {
                AnyMicro::Compression(micro::compression::Compression::new(&mut setup)?)
            }
            MicroId::Causal => AnyMicro::Causal(micro::causal::Causal::new(
                &mut setup,
                (!reliable).then(|| Duration::from_millis(p.causal_deadline_ms as u64)),
            )?),
            MicroId::KeepAlive => AnyMicro::KeepAlive(micro::keepalive::KeepAlive::new(
                &mut setup,
                Duration::from_millis(p.keepalive_ms as u64),
                Duration::from_millis(p.idle_timeout_ms as u64),
            )?),
        };
        micros.push(built);
    }
    session.stamp_messages = set.has(MicroId::Playout);
    if set.has(MicroId::Compression) {
        session.inflate_limit = p.max_udp_payload as usize;
    }
    st.session = session;
    Engine::new(micros, st)
}

/// One composed microprotocol as `ctp profiles --explain` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explained {
    /// The microprotocol.
    pub id: MicroId,
    /// Events it binds.
    pub events: Vec<crate::engine::event::EventKind>,
    /// True when it writes frames (message attributes) into packets.
    pub writes_frames: bool,
}

/// Microprotocols implemented by the endpoint and the packet path rather than composed into
/// the engine (they bind no events).
pub const BUILT_INTO_ENDPOINT: &[MicroId] = &[MicroId::Demux, MicroId::Integrity, MicroId::Setup];

/// Composes `profile` and reports, for each microprotocol, the events it binds.
pub fn explain(profile: &Profile) -> Result<Vec<Explained>, SetupError> {
    use crate::engine::Microprotocol;
    let engine = compose(
        profile.micros,
        &profile.params,
        Isn::default(),
        Isn::default(),
    )?;
    let composed = profile
        .micros
        .iter()
        .filter(|m| !BUILT_INTO_ENDPOINT.contains(m));
    let mut out: Vec<Explained> = BUILT_INTO_ENDPOINT
        .iter()
        .filter(|m| profile.micros.has(**m))
        .map(|&id| Explained {
            id,
            events: Vec::new(),
            writes_frames: false,
        })
        .collect();
    for (id, m) in composed.zip(engine.micros()) {
        out.push(Explained {
            id,
            events: m.bindings().to_vec(),
            writes_frames: m.writes_frames(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use MicroId::*;

    #[test]
    fn builtins_are_valid() {
        for (name, _) in BUILTIN {
            Profile::builtin(name).unwrap().check().unwrap();
        }
        for (name, _) in every_builtin() {
            assert_eq!(Profile::builtin(name).unwrap().name, *name);
        }
        // An unknown name lists every built-in, the UDT4-wire ones included.
        let Err(ProfileError::Unknown { known, .. }) = Profile::builtin("nope") else {
            panic!("an unknown name must be refused");
        };
        let listed: Vec<&str> = known.split(", ").collect();
        let all: Vec<&str> = every_builtin().map(|b| b.0).collect();
        assert_eq!(listed, all);
    }

    /// Each dependency rule, provoked by removing what it needs.
    /// Each dependency, alternative and conflict rule, provoked by the smallest set that
    /// breaks it (the mandatory microprotocols, the rule's members, a delivery order), and
    /// gone once the set is fixed as its message says. The rules are written out here, not
    /// read from the checker's tables, so a rule dropped from the checker fails this test.
    #[test]
    fn each_rule_is_provoked_by_the_set_that_breaks_it() {
        use MicroId::*;
        let set = |members: &[MicroId]| {
            let delivery = [Fifo, LossyFifo, Causal, Unordered];
            let mut v = MANDATORY.to_vec();
            v.extend_from_slice(members);
            if !members.iter().any(|m| delivery.contains(m)) {
                v.push(Unordered);
            }
            MicroSet::of(&v)
        };
        let with = |s: MicroSet, m: MicroId| MicroSet(s.0 | MicroSet::of(&[m]).0);
        let dependencies = [
            (Arq, AckTracking),
            (Arq, Sequencing),
            (AckTracking, Rtt),
            (Fifo, Arq),
            (Fifo, Sequencing),
            (LossyFifo, Sequencing),
            (Pmtud, AckTracking),
            (Causal, Sequencing),
            (Fec, Sequencing),
            (FlowWindow, Sequencing),
            (CongestionWindow, AckTracking),
            (NewReno, CongestionWindow),
            (NewReno, AckTracking),
            (Scp, CongestionWindow),
            (Scp, Pacing),
            (Scp, AckTracking),
            (Cc, CongestionWindow),
            (Cc, AckTracking),
            (RtsCts, Sequencing),
            (Tfrc, Pacing),
            (Tfrc, AckTracking),
        ];
        for (micro, needs) in dependencies {
            let is_rule = |e: &ProfileError| matches!(e, ProfileError::Missing { micro: m, needs: n, .. } if *m == micro && *n == needs);
            let broken = set(&[micro]);
            let found = problems(broken);
            let e = found
                .iter()
                .find(|e| is_rule(e))
                .unwrap_or_else(|| panic!("{micro} without {needs}: {found:?}"));
            let text = e.to_string();
            assert!(
                text.contains(&format!("add `{needs}` or remove `{micro}`")),
                "{text}"
            );
            assert!(!problems(with(broken, needs)).iter().any(is_rule));
        }
        let conflicts = [
            (Fifo, Unordered),
            (Fifo, LossyFifo),
            (LossyFifo, Unordered),
            (NewReno, Scp),
            (Compression, Fec),
            (Causal, Fifo),
            (Causal, LossyFifo),
            (Causal, Unordered),
            (FlowWindow, XonXoff),
            (FlowWindow, RtsCts),
            (XonXoff, RtsCts),
            (FixedInterval, Playout),
            (NewReno, Tfrc),
            (Scp, Tfrc),
            (NewReno, Cc),
            (Scp, Cc),
            (Tfrc, Cc),
        ];
        for (a, b) in conflicts {
            let is_rule = |e: &ProfileError| matches!(e, ProfileError::Conflict { a: x, b: y, .. } if *x == a && *y == b);
            let found = problems(set(&[a, b]));
            let e = found
                .iter()
                .find(|e| is_rule(e))
                .unwrap_or_else(|| panic!("{a} with {b}: {found:?}"));
            let text = e.to_string();
            assert!(
                text.contains(&format!("`{a}` and `{b}` conflict")),
                "{text}"
            );
            assert!(text.contains("keep only one"), "{text}");
            assert!(!problems(set(&[a]).without(b)).iter().any(is_rule));
        }
        for micro in [CongestionWindow, Pacing] {
            let is_rule = |e: &ProfileError| matches!(e, ProfileError::MissingOneOf { micro: m, .. } if *m == micro);
            let broken = set(&[micro]);
            let found = problems(broken);
            let e = found
                .iter()
                .find(|e| is_rule(e))
                .unwrap_or_else(|| panic!("{micro} without a policy: {found:?}"));
            assert!(
                e.to_string().contains("`newreno`, `scp`, `tfrc`, `cc`"),
                "{e}"
            );
            for policy in [NewReno, Scp, Tfrc, Cc] {
                assert!(!problems(with(broken, policy)).iter().any(is_rule));
            }
        }
        // The first problem is what `check_micros` reports.
        let broken = set(&[Fifo, NewReno]);
        assert_eq!(check_micros(broken).unwrap_err(), problems(broken)[0]);
    }

    #[test]
    fn every_dependency_is_enforced() {
        for &(micro, needs, _) in DEPENDENCIES {
            // A valid builtin holding the microprotocol (adding it when no builtin has it),
            // minus what it needs.
            let base = BUILTIN
                .iter()
                .map(|b| Profile::builtin(b.0).unwrap())
                .map(|p| {
                    // Add the microprotocol and drop whatever conflicts with it.
                    let mut set = MicroSet(p.micros.0 | MicroSet::of(&[micro]).0);
                    for &(a, b, _) in CONFLICTS {
                        if a == micro {
                            set = set.without(b);
                        } else if b == micro {
                            set = set.without(a);
                        }
                    }
                    set
                })
                .find(|&set| set.has(needs) && check_micros(set).is_ok())
                .unwrap_or_else(|| panic!("no valid composition holds {micro} with {needs}"));
            let set = base.without(needs);
            let err = check_micros(set).unwrap_err();
            // The first failing rule may be another one caused by the same removal, but it
            // must name the removed microprotocol.
            let text = err.to_string();
            assert!(
                text.contains(&format!("`{needs}`")),
                "removing {needs} gave: {text}"
            );
        }
    }

    #[test]
    fn conflicts_and_mandatory_and_delivery_are_enforced() {
        let both = MicroSet(Profile::reliable().micros.0 | MicroSet::of(&[Unordered]).0);
        assert_eq!(
            check_micros(both),
            Err(ProfileError::Conflict {
                a: Fifo,
                b: Unordered,
                why: CONFLICTS[0].2
            })
        );
        let msg = check_micros(both).unwrap_err().to_string();
        assert!(
            msg.contains("`fifo`") && msg.contains("`unordered`"),
            "{msg}"
        );
        assert_eq!(
            check_micros(Profile::datagram().micros.without(Integrity)),
            Err(ProfileError::Mandatory(Integrity))
        );
        assert_eq!(
            check_micros(Profile::datagram().micros.without(Unordered)),
            Err(ProfileError::NoDelivery)
        );
    }

    #[test]
    fn params_out_of_range_name_the_parameter() {
        // One value out of range per parameter (each just past a bound), and the name the
        // error must give with the range it must state.
        type Set = fn(&mut Params);
        let cases: &[(&str, &str, Set)] = &[
            ("max_udp_payload", "1200..=65000", |p| {
                p.max_udp_payload = 1199
            }),
            ("max_udp_payload", "1200..=65000", |p| {
                p.max_udp_payload = 65_001
            }),
            ("flow_window", "16..=1048576", |p| p.flow_window = 15),
            ("max_message", "1..=1073741824", |p| p.max_message = 0),
            ("idle_timeout_ms", "100..=3600000", |p| {
                p.idle_timeout_ms = 99
            }),
            ("fifo_deadline_ms", "1..=60000", |p| {
                p.fifo_deadline_ms = 60_001
            }),
            ("causal_deadline_ms", "1..=60000", |p| {
                p.causal_deadline_ms = 0
            }),
            ("fec_k/fec_m", "k + m ≤ 256", |p| {
                (p.fec_k, p.fec_m) = (200, 57)
            }),
            ("fec_k/fec_m", "m ≥ 1", |p| p.fec_m = 0),
            ("fec_flush_ms", "1..=10000", |p| p.fec_flush_ms = 10_001),
            ("jitter_interval_us", "at least 1", |p| {
                p.jitter_interval_us = 0
            }),
            ("playout_delay_ms", "0..=600000", |p| {
                p.playout_delay_ms = 600_001
            }),
            ("cc_rate_kbps", "at least 8", |p| p.cc_rate_kbps = 7),
            ("keepalive_ms", "at least 1", |p| p.keepalive_ms = 0),
            ("initial_window", "at least 1", |p| p.initial_window = 0),
            ("send_buffer/recv_buffer", "65536", |p| {
                p.send_buffer = 65_535
            }),
            ("send_buffer/recv_buffer", "65536", |p| {
                p.recv_buffer = 65_535
            }),
        ];
        assert!(Params::default().check().is_ok());
        for (name, range, set) in cases {
            let mut p = Params::default();
            set(&mut p);
            let e = p.check().unwrap_err().to_string();
            assert!(
                e.contains(&format!("`{name}`")) && e.contains(range),
                "{name}: {e}"
            );
        }
    }

    #[test]
    fn negotiation_accepts_narrows_or_refuses() {
        let local = Params::default();
        let all = MicroSet::of(MicroId::ALL);
        let r = Profile::reliable();
        assert_eq!(
            negotiate(r.micros, &r.params, all, &local),
            Negotiated::Accept(r.micros, local)
        );
        // Narrowing: the responder lacks keepalive (optional) and has a smaller window.
        let small = Params {
            flow_window: 64,
            ..local
        };
        match negotiate(r.micros, &r.params, all.without(KeepAlive), &small) {
            Negotiated::Accept(set, p) => {
                assert_eq!(set, r.micros.without(KeepAlive));
                assert_eq!(p.flow_window, 64);
            }
            other => panic!("{other:?}"),
        }
        // Refusal: ARQ is not optional.
        match negotiate(r.micros, &r.params, all.without(Arq), &local) {
            Negotiated::Refuse(why) => assert!(why.contains("`arq`"), "{why}"),
            other => panic!("{other:?}"),
        }
        // Unknown bits.
        assert!(matches!(
            negotiate(MicroSet(1 << 60), &local, all, &local),
            Negotiated::Refuse(_)
        ));
    }

    #[test]
    fn offers_round_trip() {
        let p = Params {
            flow_window: 99,
            ..Params::default()
        };
        let isn = Isn {
            seg: 1 << 40,
            msg: 7,
            pn: 99,
        };
        let mut out = Vec::new();
        encode_offer(&mut out, Profile::datagram().micros, &p, &isn);
        let (m, q, i) = decode_offer(&mut Reader::new(&out), &Params::default()).unwrap();
        assert_eq!((m, q, i), (Profile::datagram().micros, p, isn));
    }

    #[test]
    fn the_cc_choice_travels_in_the_offer_only_with_the_cc_bit() {
        let isn = Isn::default();
        // Without `cc`: byte-identical to an offer that never heard of it.
        let plain = Params {
            cc: CcKind::Bbr,
            ..Params::default()
        };
        let (mut a, mut b) = (Vec::new(), Vec::new());
        encode_offer(&mut a, Profile::reliable().micros, &plain, &isn);
        encode_offer(&mut b, Profile::reliable().micros, &Params::default(), &isn);
        assert_eq!(a, b);
        // With it: the algorithm and its rate round-trip.
        let p = Profile::reliable().with_cc(CcKind::Udt).unwrap();
        let q = Params {
            cc_rate_kbps: 5_000,
            ..p.params
        };
        let mut out = Vec::new();
        encode_offer(&mut out, p.micros, &q, &isn);
        let (m, got, _) = decode_offer(&mut Reader::new(&out), &Params::default()).unwrap();
        assert_eq!(
            (m, got.cc, got.cc_rate_kbps),
            (p.micros, CcKind::Udt, 5_000)
        );
        // An unknown algorithm number is rejected, not guessed.
        let mut bad = Vec::new();
        let isn_bytes = {
            let mut v = Vec::new();
            encode_offer(&mut v, p.micros, &q, &isn);
            v
        };
        bad.extend_from_slice(&isn_bytes[..isn_bytes.len() - 3]);
        crate::wire::varint::put(&mut bad, 77);
        crate::wire::varint::put(&mut bad, 5_000);
        assert!(decode_offer(&mut Reader::new(&bad), &Params::default()).is_err());
        // The responder adopts the initiator's choice.
        let all = MicroSet::of(MicroId::ALL);
        match negotiate(p.micros, &q, all, &Params::default()) {
            Negotiated::Accept(set, n) => {
                assert!(set.has(Cc));
                assert_eq!((n.cc, n.cc_rate_kbps), (CcKind::Udt, 5_000));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn with_cc_replaces_the_policy_and_keeps_the_rest() {
        let r = Profile::reliable().with_cc(CcKind::Cubic).unwrap();
        assert_eq!(
            r.micros,
            MicroSet(Profile::reliable().micros.without(NewReno).0 | MicroSet::of(&[Cc]).0)
        );
        let v = Profile::ctp_video().with_cc(CcKind::Vegas).unwrap();
        assert!(v.micros.has(Cc) && !v.micros.has(Scp));
        let b = Profile::ctp_bulk().with_cc(CcKind::Bbr).unwrap();
        assert!(b.micros.has(Pacing));
        assert!(!Profile::ctp_bulk()
            .with_cc(CcKind::Cubic)
            .unwrap()
            .micros
            .has(Pacing));
        assert!(matches!(
            Profile::ctp_minimal().with_cc(CcKind::Cubic),
            Err(ProfileError::NoCongestionControl(_))
        ));
        assert!(matches!(
            check_micros(MicroSet(r.micros.0 | MicroSet::of(&[NewReno]).0)),
            Err(ProfileError::Conflict { .. })
        ));
        assert_eq!(Profile::reliable().congestion_control(), Some("newreno"));
        assert_eq!(Profile::ctp_video().congestion_control(), Some("scp"));
        assert_eq!(Profile::ctp_minimal().congestion_control(), None);
        for &k in CcKind::ALL {
            let p = Profile::reliable().with_cc(k).unwrap();
            compose(p.micros, &p.params, Isn::default(), Isn::default()).unwrap();
        }
    }

    #[test]
    fn explain_lists_each_microprotocol_with_its_events() {
        use crate::engine::event::EventKind;
        let e = explain(&Profile::reliable()).unwrap();
        assert_eq!(e.len(), Profile::reliable().micros.iter().count());
        let find = |id| e.iter().find(|x| x.id == id).unwrap();
        assert!(find(Arq).events.contains(&EventKind::PacketLost));
        assert!(find(Pacing).events.contains(&EventKind::HoldLast));
        assert!(find(AckTracking).writes_frames && !find(Arq).writes_frames);
        assert!(find(Demux).events.is_empty());
    }

    #[test]
    fn mechanisms_need_one_of_the_policies_and_policies_conflict() {
        for &(micro, options, _) in NEEDS_ONE_OF {
            let base = Profile::datagram().micros.without(NewReno);
            let e = check_micros(base).unwrap_err();
            assert!(matches!(e, ProfileError::MissingOneOf { .. }), "{e}");
            let text = e.to_string();
            assert!(
                options.iter().all(|o| text.contains(&format!("`{o}`"))),
                "{text}"
            );
            let _ = micro;
        }
        let both = MicroSet(Profile::ctp_video().micros.0 | MicroSet::of(&[NewReno]).0);
        assert!(matches!(
            check_micros(both),
            Err(ProfileError::Conflict {
                a: NewReno,
                b: Scp,
                ..
            })
        ));
    }

    #[test]
    fn semantic_conflicts_are_warnings_not_errors() {
        let both = MicroSet(
            Profile::ctp_lossy_fifo().micros.0 | Profile::reliable().micros.without(Fifo).0,
        );
        check_micros(both).unwrap();
        assert!(warnings(both)
            .iter()
            .any(|w| w.contains("`lossy-fifo`") && w.contains("`arq`")));
        assert!(warnings(Profile::ctp_minimal().micros)
            .iter()
            .any(|w| w.contains("duplicated")));
        assert!(warnings(Profile::reliable().micros).is_empty());
        let e = check_micros(MicroSet(
            Profile::reliable().micros.0 | MicroSet::of(&[LossyFifo]).0,
        ))
        .unwrap_err();
        assert!(
            matches!(
                e,
                ProfileError::Conflict {
                    a: Fifo,
                    b: LossyFifo,
                    ..
                }
            ),
            "{e}"
        );
    }

    fn causal_set() -> MicroSet {
        MicroSet(Profile::reliable().micros.without(Fifo).0 | MicroSet::of(&[Causal]).0)
    }

    #[test]
    fn causal_is_a_delivery_order_of_its_own() {
        check_micros(causal_set()).unwrap();
        for other in [Fifo, LossyFifo, Unordered] {
            let e = check_micros(MicroSet(causal_set().0 | MicroSet::of(&[other]).0)).unwrap_err();
            assert!(
                matches!(e, ProfileError::Conflict { a: Causal, b, .. } if b == other),
                "{e}"
            );
            let text = e.to_string();
            assert!(
                text.contains("`causal`") && text.contains(&format!("`{other}`")),
                "{text}"
            );
        }
    }

    #[test]
    fn causal_needs_sequencing() {
        let set = MicroSet(
            Profile::ctp_minimal().micros.without(Unordered).0 | MicroSet::of(&[Causal]).0,
        );
        assert!(matches!(
            check_micros(set),
            Err(ProfileError::Missing {
                micro: Causal,
                needs: Sequencing,
                ..
            })
        ));
        check_micros(MicroSet(set.0 | MicroSet::of(&[Sequencing]).0)).unwrap();
    }

    #[test]
    fn compression_conflicts_with_fec() {
        let audio = Profile::ctp_audio().micros;
        let e = check_micros(MicroSet(audio.0 | MicroSet::of(&[Compression]).0)).unwrap_err();
        assert!(
            matches!(
                e,
                ProfileError::Conflict {
                    a: Compression,
                    b: Fec,
                    ..
                }
            ),
            "{e}"
        );
        check_micros(MicroSet(
            Profile::ctp_video().micros.0 | MicroSet::of(&[Compression]).0,
        ))
        .unwrap();
    }

    #[test]
    fn pmtud_needs_ack_tracking() {
        let set = MicroSet(Profile::ctp_lossy_fifo().micros.0 | MicroSet::of(&[Pmtud]).0);
        assert!(matches!(
            check_micros(set),
            Err(ProfileError::Missing {
                micro: Pmtud,
                needs: AckTracking,
                ..
            })
        ));
        check_micros(MicroSet(
            Profile::datagram().micros.0 | MicroSet::of(&[Pmtud]).0,
        ))
        .unwrap();
    }

    #[test]
    fn builtins_compose() {
        for (name, _) in BUILTIN {
            let p = Profile::builtin(name).unwrap();
            let e = compose(p.micros, &p.params, Isn::default(), Isn::default()).unwrap();
            assert!(!e.micros().is_empty());
        }
    }

    /// IPv6's header is 20 bytes longer: an IPv6 peer gets 20 bytes less UDP payload, an
    /// IPv4 (or IPv4-mapped) one the profile's figure, and nobody less than the floor.
    #[test]
    fn ipv6_peers_get_twenty_bytes_less_payload() {
        let p = Params::default();
        let at = |a: &str| p.for_peer(a.parse().unwrap()).max_udp_payload;
        assert_eq!(at("192.0.2.1:9"), 1472);
        assert_eq!(at("[::ffff:192.0.2.1]:9"), 1472);
        assert_eq!(at("[2001:db8::1]:9"), 1452);
        let small = Params {
            max_udp_payload: MIN_UDP_PAYLOAD + 5,
            ..p
        };
        let v6 = small.for_peer("[2001:db8::1]:9".parse().unwrap());
        assert_eq!(v6.max_udp_payload, MIN_UDP_PAYLOAD);
    }
}
