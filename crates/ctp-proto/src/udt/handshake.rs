//! UDT4 connection set-up (UDT 4.11 `CUDT::connect`, `CUDT::listen`; draft-gg-udt-03 §5).
//!
//! Client/server, as the golden vectors show it:
//!
//! 1. client → server: request (`req_type` 1, cookie 0, destination socket 0);
//! 2. server → client: the same handshake with a SYN cookie (no state kept on the server);
//! 3. client → server: the handshake again with `req_type` −1 and the cookie;
//! 4. server → client: response (`req_type` −1) with the server's socket id, the client's
//!    initial sequence number (both directions start there), the smaller MSS and window.
//!
//! Rendezvous: both sides send `req_type` 0 until they hear the peer; a side that hears a
//! rendezvous request answers with `req_type` −1, and a side that hears −1 is connected.
//!
//! The cookie is UDT4's idea (a hash of the client's address and the current minute,
//! accepted for the current and the previous minute), keyed here with the endpoint's
//! secret through BLAKE3 instead of UDT4's MD5 of a string: only the server checks it.
//! It also covers the socket id of the request it answers, so one cookie admits one
//! connection: an echo naming another socket id is refused (UDT4's, bound to the address
//! alone, can be echoed with new ids for as many connections as the peer likes). A UDT4
//! client repeats its socket id in the echo (`m_ConnReq` is sent twice), as ctp's does.

use super::packet::{sock, Handshake};
use ctp_cc::time::Instant;
use std::net::SocketAddr;

/// UDT version spoken.
pub const VERSION: i32 = 4;
/// Cookie time bucket, microseconds (one minute, as UDT4).
pub const COOKIE_BUCKET_US: u64 = 60_000_000;

/// The SYN cookie for socket `socket_id` at `peer` in the time bucket `bucket`.
fn cookie_in(secret: &[u8; 32], peer: SocketAddr, socket_id: u32, bucket: u64) -> i32 {
    let mut h = blake3::Hasher::new_keyed(secret);
    h.update(b"ctp udt4 cookie");
    h.update(peer.to_string().as_bytes());
    h.update(&[0]);
    h.update(&socket_id.to_le_bytes());
    h.update(&bucket.to_le_bytes());
    let d = h.finalize();
    let b = d.as_bytes();
    i32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// The cookie a server hands now to the request of socket `socket_id` at `peer`.
pub fn mint_cookie(secret: &[u8; 32], peer: SocketAddr, socket_id: u32, now: Instant) -> i32 {
    cookie_in(secret, peer, socket_id, now.as_micros() / COOKIE_BUCKET_US)
}

/// True when `cookie` is one this server handed to socket `socket_id` at `peer` in this or
/// the previous minute.
pub fn check_cookie(
    secret: &[u8; 32],
    peer: SocketAddr,
    socket_id: u32,
    now: Instant,
    cookie: i32,
) -> bool {
    let bucket = now.as_micros() / COOKIE_BUCKET_US;
    cookie == cookie_in(secret, peer, socket_id, bucket)
        || bucket
            .checked_sub(1)
            .is_some_and(|b| cookie == cookie_in(secret, peer, socket_id, b))
}

/// The peer address words as UDT4 writes them: the IPv4 `s_addr` bytes read as a
/// little-endian word (UDT4 copies the in-memory address and byte-swaps it on the wire);
/// IPv6 as four such words.
pub fn peer_ip_words(addr: SocketAddr) -> [u32; 4] {
    let mut w = [0u32; 4];
    match addr {
        SocketAddr::V4(a) => w[0] = u32::from_le_bytes(a.ip().octets()),
        SocketAddr::V6(a) => {
            for (i, c) in a.ip().octets().chunks_exact(4).enumerate() {
                w[i] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
    }
    w
}

/// What a side proposes in its handshakes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proposal {
    /// Message (datagram) socket rather than a stream.
    pub dgram: bool,
    /// Initial sequence number.
    pub isn: u32,
    /// Maximum packet size (IP datagram), bytes.
    pub mss: u32,
    /// Flow window, packets.
    pub flow_window: u32,
    /// Local socket id.
    pub socket_id: u32,
}

impl Proposal {
    /// A handshake carrying this proposal.
    pub fn handshake(&self, req_type: i32, cookie: i32, peer: SocketAddr) -> Handshake {
        Handshake {
            version: VERSION,
            sock_type: if self.dgram {
                sock::DGRAM
            } else {
                sock::STREAM
            },
            isn: self.isn as i32,
            mss: self.mss as i32,
            flow_window: self.flow_window as i32,
            req_type,
            socket_id: self.socket_id as i32,
            cookie,
            peer_ip: peer_ip_words(peer),
        }
    }
}

/// Why a handshake is refused.
pub fn check_compatible(h: &Handshake, dgram: bool) -> Result<(), &'static str> {
    if h.version != VERSION {
        return Err("UDT version is not 4");
    }
    let want = if dgram { sock::DGRAM } else { sock::STREAM };
    if h.sock_type != want {
        return Err("socket type (stream/datagram) differs");
    }
    if h.mss < 76 || h.flow_window < 2 {
        return Err("MSS or flow window too small");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookie_is_per_peer_and_socket_and_expires_after_two_minutes() {
        let s = [7u8; 32];
        let a: SocketAddr = "127.0.0.1:9000".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:9001".parse().unwrap();
        let t = Instant::from_micros(10 * COOKIE_BUCKET_US + 5);
        let c = mint_cookie(&s, a, 42, t);
        assert!(check_cookie(&s, a, 42, t, c));
        let later = |secs| t + core::time::Duration::from_secs(secs);
        assert!(check_cookie(&s, a, 42, later(60), c));
        assert!(!check_cookie(&s, a, 42, later(120), c));
        assert!(!check_cookie(&s, b, 42, t, c));
        assert!(!check_cookie(&s, a, 43, t, c));
    }

    #[test]
    fn loopback_words_match_udt4() {
        // The golden vectors carry 0x0100007f for 127.0.0.1.
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(peer_ip_words(a), [0x0100_007f, 0, 0, 0]);
    }
}
