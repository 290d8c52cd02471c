//! Helpers shared by the integration tests: drive a pair through a whole transfer.
#![allow(dead_code)]

pub mod heap;

use core::time::Duration;
use ctp_proto::pair::Pair;
use ctp_proto::{ConnectionHandle, EndpointEvent, Profile, ReadError};

/// Connects the pair's client to its server; returns (client handle, server handle).
pub fn connect(p: &mut Pair, profile: &Profile) -> (ConnectionHandle, ConnectionHandle) {
    let now = p.now;
    let addr = p.server_addr;
    let c = p.client.connect(now, addr, profile).expect("valid profile");
    let ok = p.run_until(Duration::from_secs(900), |p| {
        p.client.connection(c).is_some_and(|x| x.is_established())
            && p.server_events
                .iter()
                .any(|e| matches!(e, EndpointEvent::Incoming(_)))
    });
    assert!(
        ok,
        "handshake did not complete: {:?}",
        p.client.connection(c).map(|x| x.state().clone())
    );
    let s = p
        .server_events
        .iter()
        .find_map(|e| {
            if let EndpointEvent::Incoming(h) = e {
                Some(*h)
            } else {
                None
            }
        })
        .expect("incoming");
    (c, s)
}

/// Deterministic test data.
pub fn data(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as u8
        })
        .collect()
}

/// Streams `payload` from client to server and reads it back; returns what was read and
/// whether the end of stream was seen.
pub fn stream_transfer(
    p: &mut Pair,
    c: ConnectionHandle,
    s: ConnectionHandle,
    payload: &[u8],
    max: Duration,
) -> (Vec<u8>, bool) {
    stream_transfer_watched(p, c, s, payload, max, |_, _| {})
}

/// [`stream_transfer`], calling `watch` with the pair and the bytes read so far after
/// every step (to change the network mid-transfer, or check an invariant throughout).
pub fn stream_transfer_watched(
    p: &mut Pair,
    c: ConnectionHandle,
    s: ConnectionHandle,
    payload: &[u8],
    max: Duration,
    mut watch: impl FnMut(&mut Pair, usize),
) -> (Vec<u8>, bool) {
    let mut written = 0;
    let mut finished = false;
    let mut got = Vec::new();
    let mut eof = false;
    let mut buf = vec![0u8; 65536];
    p.run_until(max, |p| {
        let now = p.now;
        if let Some(conn) = p.client.connection_mut(c) {
            while written < payload.len() {
                match conn
                    .stream_write(now, &payload[written..(written + 65536).min(payload.len())])
                {
                    Ok(n) => written += n,
                    Err(_) => break,
                }
            }
            if written == payload.len() && !finished && conn.stream_finish(now).is_ok() {
                finished = true;
            }
        }
        if let Some(conn) = p.server.connection_mut(s) {
            eof = read_available(conn, now, &mut buf, &mut got);
        }
        watch(p, got.len());
        eof
    });
    (got, eof)
}

/// Appends what `conn`'s stream has for the application to `got`; true at the end of the
/// stream (or once the connection closed). Reads alternate between copying into `buf` and
/// taking chunks of at most 3000 bytes without copying, so that both read paths carry
/// every stream the tests move.
pub fn read_available(
    conn: &mut ctp_proto::connection::Connection,
    now: ctp_proto::Instant,
    buf: &mut [u8],
    got: &mut Vec<u8>,
) -> bool {
    let mut chunked = false;
    loop {
        chunked = !chunked;
        let read = if !chunked {
            conn.stream_read(now, buf)
                .inspect(|&n| got.extend_from_slice(&buf[..n]))
        } else {
            conn.stream_read_chunk(now, 3000).map(|c| {
                got.extend_from_slice(&c);
                c.len()
            })
        };
        match read {
            Ok(0) => return true,
            Ok(_) => {}
            Err(ReadError::Blocked) => return false,
            Err(ReadError::Closed(_)) => return true,
            Err(e @ ReadError::Reset(_)) => panic!("{e}"),
        }
    }
}
