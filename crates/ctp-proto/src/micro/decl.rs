//! What a microprotocol declares about itself, beside its code: its identity ([`MicroId`]),
//! what it needs, which exclusive groups it belongs to, which parameters it reads and which
//! compositions with it are doubtful ([`MicroDecl`]).
//!
//! This module sits below both the microprotocols and [`crate::profile`]: every
//! microprotocol's file imports it to write its declaration, and the profile catalogue
//! collects the declarations and checks compositions against them.

use core::fmt;

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
    Integrity = 1, "integrity", "every packet checked before it is parsed: CRC32C, or the AEAD's tag with `secure`";
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
    Secure = 28, "secure", "secure channel: Noise XX handshake (X25519, mutual authentication, forward secrecy), every packet encrypted and authenticated by an AEAD";
    Coded = 29, "coded", "network-coded reliability (CTCP): systematic random linear coding over blocks of segments, degree-of-freedom acknowledgements, redundancy from the measured loss, token congestion control";
}

impl fmt::Display for MicroId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

macro_rules! groups {
    ($($variant:ident, $name:literal, $doc:literal, $why:literal;)*) => {
        /// An exclusive group: microprotocols that each do the same job their own way, so a
        /// composition holds at most one of them. A microprotocol joins a group by naming it
        /// in its declaration ([`MicroDecl::groups`]).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Group {
            $(#[doc = $doc] $variant,)*
        }

        impl Group {
            /// Every exclusive group, in the order compositions are checked against them.
            pub const ALL: &'static [Group] = &[$(Group::$variant,)*];

            /// The group's name, as error messages give it.
            pub fn name(self) -> &'static str {
                match self { $(Group::$variant => $name,)* }
            }

            /// Why two members cannot be composed together.
            pub fn why(self) -> &'static str {
                match self { $(Group::$variant => $why,)* }
            }
        }
    };
}

groups! {
    Delivery, "delivery",
        "Delivery orders: each decides when a complete message reaches the application.",
        "two ordering microprotocols would both deliver every message";
    CongestionPolicy, "congestion-policy",
        "Congestion policies: each sets the window or rate the congestion mechanisms enforce.",
        "two congestion policies would fight over one sender";
    SegmentCoding, "segment-coding",
        "Segment codings: each rewrites what a segment carries on the wire.",
        "FEC encodes segments as sent and rebuilds them as uncompressed DATA, so a recovered compressed segment would be garbage";
    FlowControl, "flow-control",
        "Flow control: each gates segments on the receiver's room.",
        "two flow-control microprotocols would both gate every segment";
    Reliability, "reliability",
        "Reliability: each makes sure every segment reaches the receiver, its own way.",
        "`arq` retransmits what `coded` repairs with coded symbols: each would send for every loss";
    JitterControl, "jitter-control",
        "Jitter control: each schedules delivery by the passage of time.",
        "two jitter-control microprotocols would each impose their own schedule";
}

impl fmt::Display for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A microprotocol another one cannot work without.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Need {
    /// The microprotocol needed.
    pub micro: MicroId,
    /// Why, as the error for a composition without it says.
    pub why: &'static str,
}

/// A need satisfied by any member of an exclusive group (a mechanism needs one policy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeedOneOf {
    /// The group whose members are the alternatives.
    pub group: Group,
    /// Why, as the error for a composition without any of them says.
    pub why: &'static str,
}

/// A composition that is allowed but whose semantics are probably not what was meant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Doubt {
    /// Doubtful together with this microprotocol; the warning.
    With(MicroId, &'static str),
    /// Doubtful without this microprotocol; the warning.
    Without(MicroId, &'static str),
}

/// Everything a composition needs to know about one microprotocol, declared in its own file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MicroDecl {
    /// The microprotocol declared.
    pub id: MicroId,
    /// Microprotocols it needs, each with the reason.
    pub needs: &'static [Need],
    /// Exclusive groups of which it needs at least one member.
    pub needs_one_of: &'static [NeedOneOf],
    /// Exclusive groups it belongs to: it excludes every other member of each.
    pub groups: &'static [Group],
    /// The profile parameters ([`crate::profile::Params`] fields) it reads.
    pub params: &'static [&'static str],
    /// Compositions with it that are valid but doubtful.
    pub doubts: &'static [Doubt],
}

impl MicroDecl {
    /// A declaration of `id` that needs, excludes and reads nothing; the microprotocols'
    /// declarations start from it (`..MicroDecl::new(id)`).
    pub const fn new(id: MicroId) -> Self {
        MicroDecl {
            id,
            needs: &[],
            needs_one_of: &[],
            groups: &[],
            params: &[],
            doubts: &[],
        }
    }
}
