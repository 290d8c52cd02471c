//! # ctp — the tokio runtime of the ctp transport toolkit
//!
//! Drives the sans-IO core [`ctp_proto`] over a real UDP socket: one background task per
//! [`Endpoint`] owns the socket, receives and sends in batches (recvmmsg, GRO, GSO through
//! `quinn-udp`), fires the core's timers and wakes the tasks waiting on [`Connection`]s.
//!
//! ## Semantics worth knowing
//!
//! - **Handles.** [`Endpoint`] and [`Connection`] are cheap clones of shared state. The
//!   endpoint's driver task stops when [`Endpoint::close`] is called or when every
//!   `Endpoint` and `Connection` handle is gone; on stopping it aborts the connections
//!   that are left (the peers are told) and every pending operation fails.
//! - **Closing.** Dropping the last handle of a connection while its endpoint lives on
//!   closes it gracefully (written data is still delivered). [`Connection::close`] does the
//!   same and resolves once the connection has ended, so await it before dropping the
//!   endpoint when delivery matters. [`Connection::abort`] ends at once with a reason the
//!   peer sees.
//! - **Byte stream.** `poll_write` hands bytes to the protocol (it waits only when the send
//!   buffer is full), `poll_flush` has nothing to do, `poll_shutdown` finishes the stream.
//!   A read returns end-of-stream after the peer finished the stream or closed gracefully;
//!   any other ending is an `io::Error` whose message is the [`CloseReason`].
//! - **Time.** The core counts microseconds from the moment the endpoint was bound
//!   (`tokio::time::Instant`, so paused test clocks work). Deadlines under a millisecond
//!   away (pacing at high rates) are met by yielding instead of sleeping, since tokio's
//!   timer has millisecond granularity; an idle endpoint sleeps.
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
mod file;
mod group;
mod icmp;
mod mapped;
mod memory;
mod precise_timer;
mod route_mtu;
mod shared;
mod stream;

pub use connection::Connection;
pub use ctp_proto::group::{
    GroupConfig, GroupError, GroupEvent, LoadMetric, MemberLoad, MemberReport, MemberState, Mode,
};
pub use endpoint::{set_socket_buffers, Endpoint, EndpointOptions, DEFAULT_SOCKET_BUFFER};
pub use error::{ConnectError, ConnectionError, FileError};
pub use file::FILE_BLOCK;
pub use group::{Group, GroupConnectError, GroupStream, MAX_GROUP_STREAMS};
pub use memory::retain_freed_memory;
pub use stream::Stream;

pub use ctp_proto;
pub use ctp_proto::{
    CloseReason, ConnectionStats, EndpointStats, Identity, MicroId, MicroSet, MsgOptions, Params,
    PeerKey, PeerPolicy, PerfCounters, PerfInstant, PerfMon, Profile, ProfileError, StreamId,
    StreamKind,
};
