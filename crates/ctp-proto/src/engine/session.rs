//! Shared session variables: the state microprotocols publish for each other.
//!
//! Mechanisms own their variables (the window mechanism owns `cwnd` and `bytes_in_flight`,
//! the RTT estimator owns `srtt`/`rto`), policies only change them. Keeping them in one
//! plain struct makes the coupling visible and cheap.

use core::time::Duration;
use ctp_cc::time::Instant;

/// Why a connection ended, as seen by this side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// Both sides finished in order.
    Graceful,
    /// The local application aborted: the reason it gave.
    LocalAbort(String),
    /// The peer closed or aborted: its code and reason.
    Peer {
        /// Close code from the peer.
        code: u64,
        /// Reason text from the peer.
        reason: String,
    },
    /// Nothing was heard from the peer for the idle timeout.
    IdleTimeout(Duration),
    /// The handshake failed.
    Handshake(String),
    /// The peer broke the protocol (sent beyond its flow credit, made the receiver hold
    /// more than its buffer): what it did. The peer is told with a `CLOSE` of code
    /// `PROTOCOL`.
    ProtocolViolation(String),
    /// The connection moved to a new peer address that never answered path validation,
    /// and no validated path was left to return to.
    PathFailed(String),
    /// The peer answered with NOSTATE, echoing the last packet sent: it has no state for
    /// this connection (it closed and forgot it, or its endpoint restarted). Told at once
    /// instead of after the idle timeout.
    PeerForgot,
    /// So many packets for this connection failed to open (forged, or corrupted on the way)
    /// that its keys can no longer be trusted to keep a forgery out: the AEAD's integrity
    /// limit (RFC 9001 §6.6). The peer is told with a `CLOSE` of code `INTEGRITY_LIMIT`.
    IntegrityLimit,
}

impl core::fmt::Display for CloseReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CloseReason::Graceful => write!(f, "closed gracefully"),
            CloseReason::LocalAbort(r) => write!(f, "aborted locally: {r}"),
            CloseReason::Peer { code: 0, reason } if reason.is_empty() => {
                write!(f, "closed by peer")
            }
            CloseReason::Peer { code, reason } => {
                write!(f, "closed by peer (code {code}): {reason}")
            }
            CloseReason::IdleTimeout(d) => {
                write!(
                    f,
                    "peer unreachable: nothing received for {:.1} s (idle timeout)",
                    d.as_secs_f64()
                )
            }
            CloseReason::Handshake(r) => write!(f, "connection set-up failed: {r}"),
            CloseReason::ProtocolViolation(r) => write!(f, "the peer broke the protocol: {r}"),
            CloseReason::IntegrityLimit => write!(
                f,
                "too many forged or corrupted packets: the keys reached their integrity limit"
            ),
            CloseReason::PathFailed(r) => write!(f, "path lost: {r}"),
            CloseReason::PeerForgot => write!(
                f,
                "the peer has no state for this connection (it closed or restarted)"
            ),
        }
    }
}

/// Variables shared between microprotocols of one connection.
#[derive(Clone, Debug)]
pub struct Session {
    /// Largest segment payload (encoded pieces) that fits one packet.
    pub max_segment_payload: usize,
    /// Bytes a packet spends around its segment, control reserve and seal included
    /// (`SEGMENT_OVERHEAD`, more when an AEAD's tag seals the packet).
    pub segment_overhead: usize,
    /// Next segment sequence number to assign.
    pub next_seg_seq: u64,
    /// Next message sequence number to assign.
    pub next_msg_seq: u64,
    /// Our first segment sequence number: segment numbers travel as offsets from it.
    pub local_seg_isn: u64,
    /// The peer's first segment sequence number.
    pub peer_seg_isn: u64,
    /// The peer's first message sequence number.
    pub peer_msg_isn: u64,
    /// Every peer segment below this was received or is no longer needed.
    pub recv_seg_cum: u64,
    /// The largest of our packet numbers the peer acknowledged: the peer expects at least
    /// the one after it, which bounds how short our packet numbers may be on the wire.
    pub peer_acked_pn: Option<u64>,
    /// Flow-control credit from the peer: segments below this may be sent.
    pub peer_max_seg: u64,
    /// Flow-control credit given to the peer: a segment at or beyond it breaks the
    /// protocol (`u64::MAX` without a flow window).
    pub recv_credit: u64,
    /// Largest segment body the peer may send (the negotiated UDP payload); a larger one
    /// breaks the protocol.
    pub peer_segment_max: usize,
    /// The peer must be probed (a PING is owed).
    pub ping_owed: bool,
    /// A microprotocol ended the connection.
    pub close: Option<CloseReason>,
    /// When the last packet from the peer arrived.
    pub last_heard: Instant,
    /// Messages carry the sender's timestamp (a playout microprotocol needs it).
    pub stamp_messages: bool,
    /// Largest segment body a received compressed segment may inflate to; 0 when
    /// compression was not negotiated (a compressed segment is then malformed).
    pub inflate_limit: usize,
}

impl Default for Session {
    fn default() -> Self {
        Session {
            max_segment_payload: 1200,
            segment_overhead: crate::wire::sizes::SEGMENT_OVERHEAD,
            next_seg_seq: 0,
            next_msg_seq: 0,
            local_seg_isn: 0,
            peer_seg_isn: 0,
            peer_msg_isn: 0,
            recv_seg_cum: 0,
            peer_acked_pn: None,
            peer_max_seg: u64::MAX,
            recv_credit: u64::MAX,
            peer_segment_max: 1472,
            ping_owed: false,
            close: None,
            last_heard: Instant::ZERO,
            stamp_messages: false,
            inflate_limit: 0,
        }
    }
}
