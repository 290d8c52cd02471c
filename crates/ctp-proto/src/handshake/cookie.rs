//! The stateless cookie: everything the responder needs to create the connection, MACed
//! with a keyed BLAKE3 over the contents and the initiator's address, so only an initiator
//! that received the INIT_ACK at its claimed address can produce it. The MAC ends the
//! cookie: it is the challenge of the client puzzle ([`super::puzzle::challenge`]), and the
//! puzzle's difficulty is among the contents it covers, so an initiator cannot lower it.

use crate::profile::{decode_offer, encode_offer, Isn, MicroId, MicroSet, Params};
use crate::wire::header::ConnectionId;
use crate::wire::{varint, Reader, WireError};
use core::time::Duration;
use ctp_cc::time::Instant;
use std::net::SocketAddr;

/// How long a cookie stays valid.
pub const COOKIE_LIFETIME: Duration = Duration::from_secs(30);
/// Longest cookie accepted.
pub const MAX_COOKIE: usize = 256;
const MAC_LEN: usize = 32;

/// What a cookie remembers for the responder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CookieContents {
    /// Connection id the responder chose for itself.
    pub local_cid: ConnectionId,
    /// Connection id of the initiator.
    pub peer_cid: ConnectionId,
    /// Negotiated microprotocols.
    pub micros: MicroSet,
    /// Negotiated parameters (the responder's own for the rest).
    pub params: Params,
    /// Responder's initial sequence numbers.
    pub local_isn: Isn,
    /// Initiator's initial sequence numbers.
    pub peer_isn: Isn,
    /// When the cookie was minted.
    pub minted: Instant,
    /// On a secure channel, the hash of the INIT offer as received (the Noise prologue
    /// binds it, so a rewritten INIT fails the key agreement).
    pub offer_hash: Option<[u8; 32]>,
    /// The client puzzle's difficulty (bits) the responder asked with this cookie (0: none);
    /// see [`super::puzzle`].
    pub difficulty: u8,
}

/// Why a cookie was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CookieError {
    /// Did not parse.
    #[error("malformed cookie: {0}")]
    Malformed(#[from] WireError),
    /// MAC mismatch: forged, corrupted, or echoed from another address.
    #[error("cookie MAC mismatch")]
    BadMac,
    /// Older than [`COOKIE_LIFETIME`] (or from the future).
    #[error("cookie expired")]
    Expired,
}

fn mac(secret: &[u8; 32], body: &[u8], addr: SocketAddr) -> blake3::Hash {
    let mut h = blake3::Hasher::new_keyed(secret);
    h.update(body);
    match addr {
        SocketAddr::V4(a) => {
            h.update(&a.ip().octets());
        }
        SocketAddr::V6(a) => {
            h.update(&a.ip().octets());
        }
    }
    h.update(&addr.port().to_be_bytes());
    h.finalize()
}

/// Encodes and MACs a cookie.
pub fn mint(secret: &[u8; 32], c: &CookieContents, addr: SocketAddr) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(&c.local_cid.to_be_bytes());
    out.extend_from_slice(&c.peer_cid.to_be_bytes());
    encode_offer(&mut out, c.micros, &c.params, &c.peer_isn);
    varint::put(&mut out, c.params.keepalive_ms.into());
    varint::put(&mut out, c.local_isn.seg);
    varint::put(&mut out, c.local_isn.msg);
    varint::put(&mut out, c.local_isn.pn);
    varint::put(&mut out, c.minted.as_micros());
    out.push(c.difficulty);
    if let Some(h) = &c.offer_hash {
        out.extend_from_slice(h);
    }
    let tag = mac(secret, &out, addr);
    out.extend_from_slice(tag.as_bytes());
    out
}

/// Checks a cookie's MAC and age and decodes it.
pub fn open(
    secret: &[u8; 32],
    cookie: &[u8],
    addr: SocketAddr,
    now: Instant,
    local: &Params,
) -> Result<CookieContents, CookieError> {
    if cookie.len() < MAC_LEN + 16 {
        return Err(CookieError::Malformed(WireError::Truncated));
    }
    let (body, tag) = cookie.split_at(cookie.len() - MAC_LEN);
    let mut t = [0u8; MAC_LEN];
    t.copy_from_slice(tag);
    // blake3::Hash compares in constant time.
    if mac(secret, body, addr) != blake3::Hash::from(t) {
        return Err(CookieError::BadMac);
    }
    let mut r = Reader::new(body);
    let local_cid = r.u32()?;
    let peer_cid = r.u32()?;
    let (micros, mut params, peer_isn) = decode_offer(&mut r, local)?;
    params.keepalive_ms =
        u32::try_from(r.varint()?).map_err(|_| WireError::Invalid("keepalive"))?;
    let local_isn = Isn {
        seg: r.varint()?,
        msg: r.varint()?,
        pn: r.varint()?,
    };
    let minted = Instant::from_micros(r.varint()?);
    let difficulty = r.u8()?;
    if minted > now || now.saturating_since(minted) > COOKIE_LIFETIME {
        return Err(CookieError::Expired);
    }
    let offer_hash = if micros.has(MicroId::Secure) {
        Some(r.bytes(32)?.try_into().expect("32 bytes"))
    } else {
        None
    };
    Ok(CookieContents {
        local_cid,
        peer_cid,
        micros,
        params,
        local_isn,
        peer_isn,
        minted,
        offer_hash,
        difficulty,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Profile;

    fn sample() -> CookieContents {
        CookieContents {
            local_cid: 11,
            peer_cid: 22,
            micros: Profile::reliable().micros,
            params: Params::default(),
            local_isn: Isn {
                seg: 5,
                msg: 6,
                pn: 7,
            },
            peer_isn: Isn {
                seg: 8,
                msg: 9,
                pn: 10,
            },
            minted: Instant::from_micros(1_000_000),
            offer_hash: Some([3; 32]),
            difficulty: 12,
        }
    }

    #[test]
    fn cookie_round_trips_and_binds_address_secret_and_age() {
        let secret = [7u8; 32];
        let addr: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        let c = sample();
        let k = mint(&secret, &c, addr);
        let now = Instant::from_micros(2_000_000);
        assert_eq!(open(&secret, &k, addr, now, &Params::default()).unwrap(), c);
        let other: SocketAddr = "10.0.0.2:4000".parse().unwrap();
        assert_eq!(
            open(&secret, &k, other, now, &Params::default()),
            Err(CookieError::BadMac)
        );
        assert_eq!(
            open(&[8u8; 32], &k, addr, now, &Params::default()),
            Err(CookieError::BadMac)
        );
        let mut bent = k.clone();
        bent[3] ^= 1;
        assert_eq!(
            open(&secret, &bent, addr, now, &Params::default()),
            Err(CookieError::BadMac)
        );
        let late = Instant::from_micros(1_000_000) + COOKIE_LIFETIME + Duration::from_secs(1);
        assert_eq!(
            open(&secret, &k, addr, late, &Params::default()),
            Err(CookieError::Expired)
        );
        assert!(matches!(
            open(&secret, &k[..10], addr, now, &Params::default()),
            Err(CookieError::Malformed(_))
        ));
    }
}
