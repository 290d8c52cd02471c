//! Errors of the runtime API.

use ctp_proto::{CloseReason, ProfileError};
use std::io;

/// Why an operation on a [`crate::Connection`] failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionError {
    /// The connection ended; the reason (displayed as the human text, e.g.
    /// "peer unreachable: nothing received for 2.0 s (idle timeout)").
    #[error("{0}")]
    Closed(CloseReason),
    /// The application already asked for a close, so nothing more can be sent.
    #[error("connection is closing: nothing more can be sent")]
    Closing,
    /// The byte stream was already finished, so nothing more can be written to it.
    #[error("byte stream already finished: nothing more can be written")]
    Finished,
    /// The message is larger than the negotiated maximum.
    #[error("message of {len} bytes exceeds the negotiated maximum of {max} bytes")]
    MessageTooLarge {
        /// Message length.
        len: usize,
        /// Negotiated maximum.
        max: usize,
    },
    /// A named predecessor is not an earlier message of this connection, or too many are named.
    #[error("bad predecessor list: {0}")]
    BadDependency(String),
    /// The stream cannot be used (never opened, too many open, or the profile carries only
    /// the connection's own byte stream); why.
    #[error("{0}")]
    NoStream(String),
    /// The peer abandoned the stream being read, with this code.
    #[error("the peer reset the stream (code {0})")]
    StreamReset(u64),
}

impl ConnectionError {
    /// The close reason, when the connection ended.
    pub fn close_reason(&self) -> Option<&CloseReason> {
        match self {
            ConnectionError::Closed(r) => Some(r),
            _ => None,
        }
    }
}

impl From<ConnectionError> for io::Error {
    fn from(e: ConnectionError) -> io::Error {
        let kind = match &e {
            ConnectionError::Closed(CloseReason::Graceful) => io::ErrorKind::NotConnected,
            ConnectionError::Closed(CloseReason::LocalAbort(_)) => io::ErrorKind::ConnectionAborted,
            ConnectionError::Closed(CloseReason::Peer { .. } | CloseReason::PeerForgot) => {
                io::ErrorKind::ConnectionReset
            }
            ConnectionError::Closed(CloseReason::IdleTimeout(_)) => io::ErrorKind::TimedOut,
            ConnectionError::Closed(CloseReason::PathFailed(_)) => {
                io::ErrorKind::NetworkUnreachable
            }
            ConnectionError::Closed(CloseReason::Handshake(_)) => io::ErrorKind::ConnectionRefused,
            ConnectionError::Closed(
                CloseReason::ProtocolViolation(_) | CloseReason::IntegrityLimit,
            ) => io::ErrorKind::InvalidData,
            ConnectionError::Closing | ConnectionError::Finished => io::ErrorKind::BrokenPipe,
            ConnectionError::StreamReset(_) => io::ErrorKind::ConnectionReset,
            ConnectionError::MessageTooLarge { .. }
            | ConnectionError::BadDependency(_)
            | ConnectionError::NoStream(_) => io::ErrorKind::InvalidInput,
        };
        io::Error::new(kind, e)
    }
}

/// Why [`crate::Connection::send_file`] or [`crate::Connection::recv_file`] stopped short.
///
/// Whatever the error, the caller's offset was advanced by exactly the bytes transferred
/// before it (none for the range errors, which are checked before anything moves).
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The offset lies past the end of the file being sent.
    #[error("offset {offset} is past the end of the file ({len} bytes)")]
    OffsetPastEnd {
        /// The offset asked for.
        offset: u64,
        /// The file's length.
        len: u64,
    },
    /// The file does not hold `size` bytes from `offset`.
    #[error("the file ({len} bytes) does not hold {size} bytes from offset {offset}")]
    RangePastEnd {
        /// The offset asked for.
        offset: u64,
        /// The byte count asked for.
        size: u64,
        /// The file's length.
        len: u64,
    },
    /// The peer ended the byte stream (finished it or closed gracefully) before `size`
    /// bytes arrived; `got` of them were written to the file.
    #[error("the stream ended after {got} of {size} bytes")]
    StreamEnded {
        /// Bytes received and written.
        got: u64,
        /// Bytes asked for.
        size: u64,
    },
    /// The connection failed (closed, aborted, closing, stream finished).
    #[error(transparent)]
    Connection(#[from] ConnectionError),
    /// Reading, writing or seeking the file failed (or the file shrank while being sent).
    #[error("file: {0}")]
    Io(#[from] io::Error),
}

impl From<FileError> for io::Error {
    fn from(e: FileError) -> io::Error {
        match e {
            FileError::Io(e) => e,
            FileError::Connection(e) => e.into(),
            e @ (FileError::OffsetPastEnd { .. } | FileError::RangePastEnd { .. }) => {
                io::Error::new(io::ErrorKind::InvalidInput, e)
            }
            e @ FileError::StreamEnded { .. } => io::Error::new(io::ErrorKind::UnexpectedEof, e),
        }
    }
}

/// Why [`crate::Endpoint::connect`] failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConnectError {
    /// The profile is not a valid composition; the message says how to fix it.
    #[error("invalid profile: {0}")]
    Profile(#[from] ProfileError),
    /// The handshake failed (no answer, refused, or an invalid answer); the proto reason,
    /// e.g. "connection set-up failed: no answer from 127.0.0.1:9 (handshake timed out)".
    #[error("{0}")]
    Handshake(CloseReason),
    /// The endpoint was closed before the connection was established.
    #[error("the endpoint is closed")]
    EndpointClosed,
    /// A route names a local address the endpoint's socket cannot send from.
    #[error("{0}")]
    Route(String),
}

impl From<ConnectError> for io::Error {
    fn from(e: ConnectError) -> io::Error {
        let kind = match &e {
            ConnectError::Profile(_) => io::ErrorKind::InvalidInput,
            ConnectError::Handshake(_) => io::ErrorKind::ConnectionRefused,
            ConnectError::EndpointClosed => io::ErrorKind::NotConnected,
            ConnectError::Route(_) => io::ErrorKind::InvalidInput,
        };
        io::Error::new(kind, e)
    }
}
