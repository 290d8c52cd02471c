//! The responder's side, stateless: an INIT is answered with INIT_ACK (the negotiated
//! offer and a cookie) or REFUSE, without keeping anything; a COOKIE_ECHO whose cookie
//! opens creates the connection.
//!
//! Under load INIT_ACK also asks a client puzzle ([`super::puzzle`]): after the cookie, one
//! byte, the difficulty (absent when it is 0). The COOKIE_ECHO then carries the solution,
//! the nonce (8 bytes, big-endian), right after the cookie, and the responder checks it
//! (one hash) before it keeps anything or does any Diffie–Hellman.

use super::cookie::{self, CookieContents, MAX_COOKIE};
use super::noise::{self, MAX_NOISE_MESSAGE};
use super::puzzle;
use super::MIN_INIT_SIZE;
use crate::composed::Engine;
use crate::packet::long_packet;
use crate::profile::{
    self, compose, decode_offer, encode_offer, Isn, MicroId, MicroSet, Negotiated, Params,
};
use crate::wire::header::{ConnectionId, LongType};
use crate::wire::{varint, Reader};
use core::time::Duration;
use ctp_cc::time::Instant;
use std::net::SocketAddr;

/// How long a cookie minted with an easier puzzle than the responder now asks stays good:
/// an initiator's echo follows its INIT_ACK within a round trip or a few retransmissions,
/// while cookies gathered before an attack and echoed during it are refused.
pub const PUZZLE_GRACE: Duration = Duration::from_secs(2);

/// What a responder brings to the handshake: its cookie secret, the microprotocols it
/// runs and its local parameters.
#[derive(Clone, Copy, Debug)]
pub struct Responder<'a> {
    /// Secret keying the cookie.
    pub secret: &'a [u8; 32],
    /// Microprotocols this side will run for a peer that asks.
    pub supported: MicroSet,
    /// Local limits and defaults (requests are narrowed to these).
    pub params: &'a Params,
    /// Microprotocols a request must include (`secure`, unless the responder accepts
    /// connections without encryption).
    pub required: MicroSet,
    /// The client puzzle's difficulty asked now (bits; 0: none), from the responder's load
    /// ([`puzzle::difficulty`]).
    pub difficulty: u8,
}

/// Why a COOKIE_ECHO creates no connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EchoError {
    /// Malformed, forged, expired, for another connection id, or a secure channel's echo
    /// without Noise message 1.
    Invalid,
    /// The client puzzle the cookie asks is not solved (no solution, a wrong one), or the
    /// cookie asks an easier puzzle than the responder does now and is older than
    /// [`PUZZLE_GRACE`].
    Puzzle,
}

/// A received INIT: who sent it, and what.
#[derive(Clone, Copy, Debug)]
pub struct Init<'a> {
    /// The initiator's address.
    pub from: SocketAddr,
    /// The initiator's connection id.
    pub peer_cid: ConnectionId,
    /// The offer (after the long header).
    pub body: &'a [u8],
    /// Size of the whole datagram (anti-amplification).
    pub size: usize,
}

/// The answer to an INIT.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitAnswer {
    /// INIT_ACK: the negotiated offer and a cookie.
    Accept(Vec<u8>),
    /// REFUSE, with the reason.
    Refuse(Vec<u8>),
}

impl InitAnswer {
    /// The packet to send.
    pub fn into_packet(self) -> Vec<u8> {
        match self {
            InitAnswer::Accept(p) | InitAnswer::Refuse(p) => p,
        }
    }
}

impl Responder<'_> {
    /// Answers `init`. `admitted` is whether the endpoint has room for the connection (else why
    /// not); `fresh` draws the connection id and initial numbers of an accepted one. `None`
    /// when the INIT is to be dropped: too small, malformed, or an answer larger than three
    /// times it (anti-amplification).
    pub fn answer_init(
        &self,
        now: Instant,
        init: Init<'_>,
        admitted: Result<(), &str>,
        fresh: impl FnOnce() -> (ConnectionId, Isn),
    ) -> Option<InitAnswer> {
        let Init {
            from,
            peer_cid,
            body,
            size,
        } = init;
        if size < MIN_INIT_SIZE || peer_cid == 0 {
            return None;
        }
        let mut r = Reader::new(body);
        let (micros, asked, peer_isn) = decode_offer(&mut r, self.params).ok()?;
        let offer = &body[..body.len() - r.remaining()];
        if r.rest().iter().any(|&b| b != 0) {
            return None;
        }
        let local = self.params.for_peer(from).fit_recv_buffer();
        let negotiated = match admitted {
            Err(full) => Negotiated::Refuse(full.to_string()),
            Ok(()) => profile::negotiate(micros, &asked, self.supported, self.required, &local),
        };
        let answer = match negotiated {
            Negotiated::Refuse(reason) => {
                let mut b = Vec::new();
                varint::put(&mut b, reason.len() as u64);
                b.extend_from_slice(reason.as_bytes());
                InitAnswer::Refuse(long_packet(LongType::Refuse, peer_cid, 0, &b, 0))
            }
            Negotiated::Accept(set, params) => {
                let (local_cid, local_isn) = fresh();
                let contents = CookieContents {
                    local_cid,
                    peer_cid,
                    micros: set,
                    params,
                    local_isn,
                    peer_isn,
                    minted: now,
                    offer_hash: set.has(MicroId::Secure).then(|| noise::offer_hash(offer)),
                    difficulty: self.difficulty,
                };
                let cookie = cookie::mint(self.secret, &contents, from);
                let mut b = Vec::new();
                encode_offer(&mut b, set, &params, &local_isn);
                varint::put(&mut b, cookie.len() as u64);
                b.extend_from_slice(&cookie);
                if self.difficulty > 0 {
                    b.push(self.difficulty);
                }
                InitAnswer::Accept(long_packet(LongType::InitAck, peer_cid, local_cid, &b, 0))
            }
        };
        // Anti-amplification: never more than 3× what the unvalidated address sent.
        let len = match &answer {
            InitAnswer::Accept(p) | InitAnswer::Refuse(p) => p.len(),
        };
        (len <= 3 * size).then_some(answer)
    }

    /// Opens the cookie a COOKIE_ECHO (to connection id `dcid`, `body`) carries, checks the
    /// client puzzle it asks, and composes the connection's engine. The cookie's MAC (one
    /// hash), then the puzzle (one hash): nothing is kept and no Diffie–Hellman done before
    /// both passed.
    pub fn accept_echo<'b>(
        &self,
        now: Instant,
        from: SocketAddr,
        dcid: ConnectionId,
        body: &'b [u8],
    ) -> Result<Echo<'b>, EchoError> {
        use EchoError::Invalid;
        let mut r = Reader::new(body);
        let cookie = r
            .length_prefixed(MAX_COOKIE, "cookie")
            .map_err(|_| Invalid)?;
        let k = cookie::open(self.secret, cookie, from, now, self.params).map_err(|_| Invalid)?;
        if k.local_cid != dcid {
            return Err(Invalid);
        }
        let secure = k.micros.has(MicroId::Secure);
        if k.difficulty > 0 {
            let nonce = r.u64().map_err(|_| EchoError::Puzzle)?;
            if !puzzle::verify(puzzle::challenge(cookie), k.difficulty, nonce) {
                return Err(EchoError::Puzzle);
            }
        }
        if k.difficulty < self.difficulty && now.saturating_since(k.minted) > PUZZLE_GRACE {
            return Err(EchoError::Puzzle);
        }
        let noise_msg = if secure {
            Some(
                r.length_prefixed(MAX_NOISE_MESSAGE, "noise message")
                    .map_err(|_| Invalid)?,
            )
        } else {
            None
        };
        if !r.is_empty() {
            return Err(Invalid);
        }
        let engine = compose(k.micros, &k.params, k.local_isn, k.peer_isn).map_err(|_| Invalid)?;
        Ok(Echo {
            contents: k,
            engine,
            noise_msg,
        })
    }
}

/// A COOKIE_ECHO whose cookie opened: what the connection is created from.
pub struct Echo<'b> {
    /// What the cookie remembered.
    pub contents: CookieContents,
    /// The engine composed for it.
    pub engine: Engine,
    /// On a secure channel, Noise message 1.
    pub noise_msg: Option<&'b [u8]>,
}

impl Echo<'_> {
    /// The negotiated offer as INIT_ACK carried it (what the Noise prologue binds).
    pub fn answer(&self) -> Vec<u8> {
        let k = &self.contents;
        let mut b = Vec::new();
        encode_offer(&mut b, k.micros, &k.params, &k.local_isn);
        b
    }
}
