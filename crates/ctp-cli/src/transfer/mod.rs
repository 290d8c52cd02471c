//! File transfer over a reliable ctp connection: the manifest of files and directories,
//! the framing, resuming, and the sending and the receiving side.

pub mod header;
pub mod incoming;
pub mod manifest;
pub mod pipeline;
pub mod precheck;
pub mod ratelimit;
pub mod recv;
pub mod resume;
pub mod send;
pub mod source;
pub mod tempname;

use crate::cli::TransportArgs;
use crate::Failure;
use ctp::{EndpointOptions, Profile};
use std::time::Duration;

/// Bytes read from disk or from the connection at a time.
pub const CHUNK: usize = 1 << 20;

/// The profile the transfer options ask for, checked for file transfer.
pub fn profile_for_files(t: &TransportArgs) -> Result<Profile, Failure> {
    let mut p = crate::profiles::resolve(&t.profile)?;
    if !p.is_reliable() {
        return Err(Failure::Usage(format!(
            "profile `{}` is not reliable, so a file could arrive with holes; use --profile reliable",
            t.profile
        )));
    }
    if !(t.idle_timeout.is_finite() && (0.1..=3600.0).contains(&t.idle_timeout)) {
        return Err(Failure::Usage(format!(
            "--idle-timeout {} is out of range: use 0.1 to 3600 seconds",
            t.idle_timeout
        )));
    }
    p.params.idle_timeout_ms = (t.idle_timeout * 1000.0) as u32;
    p.params.keepalive_ms = (p.params.idle_timeout_ms / 3).clamp(1, 5_000);
    p.check().map_err(|e| Failure::Usage(e.to_string()))?;
    Ok(p)
}

/// Endpoint options matching the transfer options.
pub fn endpoint_options(
    t: &TransportArgs,
    profile: &Profile,
    accept: bool,
) -> Result<EndpointOptions, Failure> {
    if !(t.handshake_timeout.is_finite() && (0.1..=600.0).contains(&t.handshake_timeout)) {
        return Err(Failure::Usage(format!(
            "--handshake-timeout {} is out of range: use 0.1 to 600 seconds",
            t.handshake_timeout
        )));
    }
    if t.max_per_address == 0 {
        return Err(Failure::Usage(
            "--max-per-address 0 would refuse every peer: use 1 or more".into(),
        ));
    }
    Ok(EndpointOptions {
        accept,
        params: profile.params,
        handshake_timeout: Duration::from_secs_f64(t.handshake_timeout),
        wire: profile.wire(),
        max_connections_per_address: t.max_per_address,
        ..EndpointOptions::default()
    })
}

/// Ends `conn` because this side failed: the peer is told `reason` at once (an abort's
/// CLOSE carries it, so a peer still sending learns why instead of timing out), and the
/// call waits, at most 2 s, for that to reach the wire before the process may exit.
pub async fn abort_with(conn: &ctp::Connection, reason: &str) {
    conn.abort(reason);
    let _ = tokio::time::timeout(Duration::from_secs(2), conn.closed()).await;
}
