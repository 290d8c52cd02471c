//! What every kind of connection (the composed engine, the UDT4 wire) reports to the
//! application: its state, why a read or a write did not go through, and how the byte
//! stream is cut into messages. Kept apart from both so that neither depends on the other.

use crate::engine::session::CloseReason;

/// Where a connection is in its life.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnectionState {
    /// Initiator: INIT sent, waiting for INIT_ACK.
    Initiating,
    /// Initiator: COOKIE_ECHO sent, waiting for the responder's first packet (or, on a
    /// secure channel, its Noise message 2).
    Echoing,
    /// Responder on a secure channel: Noise message 2 sent, waiting for the initiator's
    /// message 3 (nothing is shown to the application before it authenticated).
    Authenticating,
    /// Data flows.
    Established,
    /// Graceful close requested: waiting for outstanding data to be acknowledged.
    Closing,
    /// CLOSE sent; lingering to repeat it if the peer keeps talking.
    Draining,
    /// Finished, with the reason.
    Closed(CloseReason),
}

/// Why a write did not go through.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// The send buffer is full; retry when the connection reports activity.
    #[error("send buffer full")]
    Blocked,
    /// The message is larger than the negotiated maximum.
    #[error("message of {len} bytes exceeds the negotiated maximum of {max} bytes")]
    TooLarge {
        /// Message length.
        len: usize,
        /// Negotiated maximum.
        max: usize,
    },
    /// The byte stream was already finished.
    #[error("stream already finished")]
    Finished,
    /// The connection is not (or no longer) established.
    #[error("connection not open: {0}")]
    NotOpen(String),
    /// A named predecessor is not an earlier message of this connection, or too many are named.
    #[error("bad predecessor list: {0}")]
    BadDependency(String),
    /// The stream cannot be used: never opened, too many open, or the profile carries
    /// only stream 0; why.
    #[error("{0}")]
    NoStream(String),
}

/// Why a read returned nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// Nothing to read yet.
    #[error("nothing to read yet")]
    Blocked,
    /// The connection ended before the peer finished; the reason.
    #[error("{0}")]
    Closed(CloseReason),
    /// The peer abandoned the stream (see `Connection::reset_on`), with this code.
    #[error("the peer reset the stream (code {0})")]
    Reset(u64),
}

/// Largest piece of the byte stream sent as one message.
pub const STREAM_CHUNK: usize = 64 * 1024;

/// Per-message options of [`crate::connection::Connection::send_msg_with`] (UDT's
/// `sendmsg` arguments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsgOptions {
    /// After this long the message is no longer worth sending: if it is still not
    /// acknowledged it is dropped instead of retransmitted (`None`: never expires).
    pub ttl: Option<core::time::Duration>,
    /// The receiver delivers the message only after every earlier one.
    pub in_order: bool,
}

impl Default for MsgOptions {
    /// No time-to-live, in order (what [`crate::connection::Connection::send_msg`] does).
    fn default() -> Self {
        MsgOptions {
            ttl: None,
            in_order: true,
        }
    }
}
