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

use std::time::Duration;

/// Bytes read from disk or from the connection at a time.
pub const CHUNK: usize = 1 << 20;

/// Ends `conn` because this side failed: the peer is told `reason` at once (an abort's
/// CLOSE carries it, so a peer still sending learns why instead of timing out), and the
/// call waits, at most 2 s, for that to reach the wire before the process may exit.
pub async fn abort_with(conn: &ctp::Connection, reason: &str) {
    conn.abort(reason);
    let _ = tokio::time::timeout(Duration::from_secs(2), conn.closed()).await;
}
