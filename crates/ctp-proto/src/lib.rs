//! # ctp-proto — the sans-IO core of ctp
//!
//! Everything protocol, nothing I/O: no sockets, no threads, no clock reads. An [`Endpoint`]
//! is fed datagrams and the current time, and polled for datagrams to send and for its next
//! deadline. Connections are *composed* from microprotocols ([`micro`]) chosen by a
//! [`Profile`]; the composition engine ([`engine`]) binds them to typed events and
//! coordinates them with per-segment hold bits, as CTP on Cactus did.
// `deny`, not `forbid`: the SIMD kernels of `coding::gf256` (module `x86`) allow it for
// their intrinsics, and nothing else may.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod chunk_queue;
pub mod coding;
pub mod composed;
pub mod conn_core;
pub mod conn_state;
pub mod connection;
pub mod endpoint;
pub mod engine;
pub mod group;
pub mod handshake;
pub mod micro;
pub mod packet;
pub mod pair;
pub mod perfmon;
pub mod profile;
pub mod protection;
mod schedule;
pub mod stats;
pub mod text;
pub mod udt;
pub mod unreachable;
pub mod wire;

/// The congestion-control library: the [`ctp_cc`] crate, which cannot depend on this one.
pub use ctp_cc as cc;
/// Pacing arithmetic: [`ctp_cc::pace`], next to the controllers that set the rate.
pub use ctp_cc::pace;
/// ctp's notion of time, in microseconds: [`ctp_cc::time`].
pub use ctp_cc::time;

pub use conn_core::ConnectionCore;
pub use connection::{
    Connection, ConnectionState, MsgOptions, ReadError, StreamId, StreamKind, WriteError,
    MAX_STREAMS, MIN_BARRIER,
};
pub use endpoint::{
    ConnectionHandle, Endpoint, EndpointConfig, EndpointEvent, Footprint, Transmit,
};
pub use engine::session::CloseReason;
pub use handshake::noise::{Identity, PeerKey, PeerPolicy};
pub use perfmon::{PerfCounters, PerfInstant, PerfMon};
pub use profile::{MicroId, MicroSet, Params, Profile, ProfileError};
pub use stats::{ConnectionStats, EndpointStats};
pub use time::Instant;
pub use unreachable::Unreachable;
