//! # ctp — the tokio runtime of the ctp transport toolkit
//!
//! Drives the sans-IO core [`ctp_proto`] over a real UDP socket: one background task per
//! [`Endpoint`] owns the socket, receives and sends in batches (recvmmsg, GRO, GSO through
//! `quinn-udp`), fires the core's timers and wakes the tasks waiting on [`Connection`]s.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use ctp::{Endpoint, EndpointOptions, Profile};
//! use tokio::io::AsyncWriteExt;
//!
//! let ep = Endpoint::bind("0.0.0.0:0".parse()?, EndpointOptions::default()).await?;
//! let mut conn = ep.connect("127.0.0.1:4433".parse()?, &Profile::reliable()).await?;
//! conn.write_all(b"hello").await?;
//! conn.shutdown().await?;
//! conn.close().await?; // resolves once everything was delivered
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod connection;
mod driver;
mod endpoint;
mod error;
mod shared;

pub use connection::Connection;
pub use endpoint::{Endpoint, EndpointOptions, DEFAULT_SOCKET_BUFFER};
pub use error::{ConnectError, ConnectionError};

pub use ctp_proto;
pub use ctp_proto::{
    CloseReason, ConnectionStats, EndpointStats, MicroId, MicroSet, Params, Profile, ProfileError,
};
