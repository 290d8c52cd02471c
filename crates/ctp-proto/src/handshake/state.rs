//! A connection's side of the handshake. The initiator sends INIT with the profile it
//! requests, checks that INIT_ACK only narrows it, echoes the cookie, and retransmits
//! either on a doubling timer until it hears from the responder or gives up. The responder
//! owes one short packet that tells the initiator the connection exists (again whenever a
//! repeated COOKIE_ECHO shows that it was lost).
//!
//! When INIT_ACK asks a client puzzle ([`super::puzzle`]), the initiator solves it before
//! its COOKIE_ECHO (bounded work, at most [`super::puzzle::MAX_DIFFICULTY`] bits) and the
//! echo carries the solution after the cookie.
//!
//! On a secure channel the Noise messages ride along ([`super::noise`]): message 1 in
//! COOKIE_ECHO, message 2 in the responder's HANDSHAKE (sent again for a repeated echo),
//! message 3 in the initiator's HANDSHAKE, repeated on the timer until a short packet from
//! the responder shows that it arrived.

use super::noise::{self, Identity, Noise, NoiseError, MAX_NOISE_MESSAGE};
use super::puzzle;
use super::{MAX_COOKIE, MIN_INIT_SIZE};
use crate::conn_state::ConnectionState;
use crate::packet::long_packet;
use crate::profile::{self, decode_offer, encode_offer, Isn, MicroId, MicroSet, Params};
use crate::wire::frame::MAX_REASON;
use crate::wire::header::{ConnectionId, LongType};
use crate::wire::{varint, Reader};
use core::time::Duration;
use ctp_cc::time::Instant;

/// Handshake retransmission: first timeout, doubled on each retry up to [`HANDSHAKE_MAX_RTO`].
pub const HANDSHAKE_RTO: Duration = Duration::from_millis(250);
/// Longest wait between two handshake retransmissions.
pub const HANDSHAKE_MAX_RTO: Duration = Duration::from_secs(1);

/// What the responder's INIT_ACK offered, once checked against the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offer<'b> {
    /// The negotiated microprotocols.
    pub micros: MicroSet,
    /// The negotiated parameters (the keep-alive interval stays the initiator's own).
    pub params: Params,
    /// The responder's initial sequence numbers.
    pub peer_isn: Isn,
    /// The cookie to echo.
    pub cookie: &'b [u8],
    /// The answer's offer as received (what the Noise prologue binds).
    pub answer: &'b [u8],
    /// The client puzzle's difficulty the responder asks (bits; 0: none).
    pub difficulty: u8,
}

/// Why an INIT_ACK was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitAckError {
    /// It does not parse: dropped, the handshake goes on.
    Malformed,
    /// It offers more than was requested: the handshake fails.
    Wider,
    /// It answers a request for encryption without it (only a rewritten answer can): the
    /// handshake fails.
    Unencrypted,
}

/// What a secure channel's responder starts its side of the key agreement from, at
/// COOKIE_ECHO.
#[derive(Clone, Copy, Debug)]
pub struct NoiseStart<'a> {
    /// The responder's identity.
    pub me: &'a Identity,
    /// The hash of the INIT offer, as the cookie kept it.
    pub offer_hash: &'a [u8; 32],
    /// The negotiated offer as INIT_ACK carried it.
    pub answer: &'a [u8],
    /// Noise message 1, from COOKIE_ECHO.
    pub msg1: &'a [u8],
    /// Randomness for the ephemeral key.
    pub seed: [u8; 32],
    /// When the responder stops waiting for message 3.
    pub give_up: Instant,
}

/// A connection's side of the handshake.
#[derive(Debug)]
pub struct Handshake {
    /// Initiator: the requested profile; responder: the negotiated one.
    requested: (MicroSet, Params),
    /// Initiator: the responder's cookie, once INIT_ACK came.
    cookie: Vec<u8>,
    /// Initiator: the client puzzle's solution the echo carries, when one was asked.
    solution: Option<u64>,
    /// When the handshake packet goes out again.
    deadline: Option<Instant>,
    /// When the initiator gives up.
    give_up: Instant,
    rto: Duration,
    /// A handshake packet is due now.
    due: bool,
    /// Responder: the first short packet (it tells the initiator that the connection
    /// exists) is still owed.
    owe_first: bool,
    /// The secure channel's key agreement while it runs (boxed: most of a connection's
    /// life it is `None`).
    noise: Option<Box<Noise>>,
    /// The Noise message this side sends (again) in its next handshake packet: message 1
    /// (in COOKIE_ECHO), 2 or 3.
    noise_msg: Vec<u8>,
    /// Initiator: message 3 is repeated until a short packet from the responder opens.
    confirming: bool,
}

impl Handshake {
    /// The initiator's side, requesting `micros` and `params`: INIT is due at once.
    pub fn initiator(now: Instant, micros: MicroSet, params: Params, timeout: Duration) -> Self {
        Handshake {
            requested: (micros, params),
            cookie: Vec::new(),
            solution: None,
            deadline: Some(now + HANDSHAKE_RTO),
            give_up: now + timeout,
            rto: HANDSHAKE_RTO,
            due: true,
            owe_first: false,
            noise: None,
            noise_msg: Vec::new(),
            confirming: false,
        }
    }

    /// The responder's side of a connection created from a cookie minted at `minted`
    /// for `micros` and `params`: only its first short packet is owed.
    pub fn responder(minted: Instant, micros: MicroSet, params: Params) -> Self {
        Handshake {
            requested: (micros, params),
            cookie: Vec::new(),
            solution: None,
            deadline: None,
            give_up: minted,
            rto: HANDSHAKE_RTO,
            due: false,
            owe_first: true,
            noise: None,
            noise_msg: Vec::new(),
            confirming: false,
        }
    }

    /// Checks an INIT_ACK's `body` against the request: the responder may only narrow it.
    pub fn check_init_ack<'b>(&self, body: &'b [u8]) -> Result<Offer<'b>, InitAckError> {
        let (asked_set, asked) = self.requested;
        let mut r = Reader::new(body);
        let (set, params, peer_isn) =
            decode_offer(&mut r, &asked).map_err(|_| InitAckError::Malformed)?;
        let answer = &body[..body.len() - r.remaining()];
        let cookie = r
            .length_prefixed(MAX_COOKIE, "cookie")
            .map_err(|_| InitAckError::Malformed)?;
        // The puzzle's difficulty, absent when none is asked; more than an initiator solves
        // is no answer a responder gives.
        let difficulty = if r.is_empty() {
            0
        } else {
            r.u8().map_err(|_| InitAckError::Malformed)?
        };
        if difficulty > puzzle::MAX_DIFFICULTY || !r.is_empty() {
            return Err(InitAckError::Malformed);
        }
        let narrowed = set.0 & !asked_set.0 == 0
            && params.max_udp_payload <= asked.max_udp_payload
            && params.flow_window <= asked.flow_window
            && params.max_message <= asked.max_message
            && (!set.has(MicroId::Cc)
                || (params.cc == asked.cc && params.cc_rate_kbps == asked.cc_rate_kbps));
        if !narrowed || profile::check_micros(set).is_err() || params.check().is_err() {
            return Err(InitAckError::Wider);
        }
        if asked_set.has(MicroId::Secure) && !set.has(MicroId::Secure) {
            return Err(InitAckError::Unencrypted);
        }
        if set.has(MicroId::Secure) && params.suites & !asked.suites != 0 {
            return Err(InitAckError::Wider);
        }
        Ok(Offer {
            micros: set,
            params: Params {
                keepalive_ms: asked.keepalive_ms,
                ..params
            },
            peer_isn,
            cookie,
            answer,
            difficulty,
        })
    }

    /// The offer INIT carries (the hash the responder's cookie keeps is of these bytes).
    fn init_offer(&self, local_isn: &Isn) -> Vec<u8> {
        let mut b = Vec::new();
        encode_offer(&mut b, self.requested.0, &self.requested.1, local_isn);
        b
    }

    /// Initiator, on a secure channel: starts the key agreement with the offer just
    /// taken (`answer`, from INIT_ACK) bound in the prologue; message 1 goes with the
    /// cookie echo.
    pub fn start_initiator(
        &mut self,
        me: &Identity,
        local_isn: &Isn,
        answer: &[u8],
        seed: [u8; 32],
    ) {
        let hash = noise::offer_hash(&self.init_offer(local_isn));
        let mut n = Noise::initiator(me, &noise::prologue(&hash, answer), seed);
        self.noise_msg.clear();
        n.write(&mut self.noise_msg)
            .expect("message 1 is the initiator's to write");
        self.noise = Some(Box::new(n));
    }

    /// Responder, on a secure channel: reads message 1 (from COOKIE_ECHO) with the
    /// offer hash the cookie kept and the negotiated answer in the prologue, and writes
    /// message 2, due at once (and again for a repeated echo, never on a timer: the
    /// responder only answers). Gives up at `start.give_up`. Fails when message 1 does not
    /// parse.
    pub fn start_responder(&mut self, start: NoiseStart<'_>) -> Result<(), NoiseError> {
        let NoiseStart {
            me,
            offer_hash,
            answer,
            msg1,
            seed,
            give_up,
        } = start;
        let mut n = Noise::responder(me, &noise::prologue(offer_hash, answer), seed);
        n.read(msg1)?;
        self.noise_msg.clear();
        n.write(&mut self.noise_msg)?;
        self.noise = Some(Box::new(n));
        self.owe_first = false;
        self.due = true;
        self.give_up = give_up;
        self.deadline = Some(give_up);
        Ok(())
    }

    /// Reads the peer's Noise message (2 at the initiator, 3 at the responder); returns the
    /// peer's static key. A message that fails changes nothing.
    pub fn read_noise(&mut self, msg: &[u8]) -> Result<[u8; 32], NoiseError> {
        let n = self.noise.as_mut().ok_or(NoiseError::OutOfTurn)?;
        n.read(msg)?;
        n.remote_static().ok_or(NoiseError::OutOfTurn)
    }

    /// Initiator, after message 2 and the peer's key was accepted: writes message 3, due
    /// now and again on the timer until the responder confirms; returns the secrets.
    pub fn finish_initiator(&mut self, now: Instant) -> Result<noise::Secrets, NoiseError> {
        let n = self.noise.as_mut().ok_or(NoiseError::OutOfTurn)?;
        self.noise_msg.clear();
        n.write(&mut self.noise_msg)?;
        let secrets = n.secrets().ok_or(NoiseError::OutOfTurn)?;
        self.noise = None;
        self.confirming = true;
        self.due = true;
        self.rto = HANDSHAKE_RTO;
        self.deadline = Some(now + HANDSHAKE_RTO);
        Ok(secrets)
    }

    /// Responder, after message 3 and the peer's key was accepted: the secrets; the first
    /// short packet is owed.
    pub fn finish_responder(&mut self) -> Result<noise::Secrets, NoiseError> {
        let n = self.noise.as_mut().ok_or(NoiseError::OutOfTurn)?;
        let secrets = n.secrets().ok_or(NoiseError::OutOfTurn)?;
        self.noise = None;
        self.noise_msg = Vec::new();
        self.deadline = None;
        self.owe_first = true;
        Ok(secrets)
    }

    /// Initiator: a short packet from the responder opened, so message 3 arrived.
    pub fn confirmed(&mut self) {
        if core::mem::take(&mut self.confirming) {
            self.noise_msg = Vec::new();
            self.deadline = None;
            self.due = false;
        }
    }

    /// Responder: a repeated echo shows message 2 was lost; send it again.
    pub fn repeat_noise(&mut self) {
        if !self.noise_msg.is_empty() {
            self.due = true;
        }
    }

    /// The initiator took INIT_ACK: COOKIE_ECHO with `cookie` (and the puzzle's
    /// `solution`, when one was asked) is due now, on a fresh timer.
    pub fn echo(&mut self, now: Instant, cookie: &[u8], solution: Option<u64>) {
        self.cookie = cookie.to_vec();
        self.solution = solution;
        self.due = true;
        self.rto = HANDSHAKE_RTO;
        self.deadline = Some(now + HANDSHAKE_RTO);
    }

    /// Takes the due flag: true when a handshake packet should go out now.
    pub fn take_due(&mut self) -> bool {
        core::mem::take(&mut self.due)
    }

    /// Appends the handshake packet of `state` (INIT, or COOKIE_ECHO) to `out`; false in
    /// any other state.
    pub fn packet(
        &self,
        state: &ConnectionState,
        local_cid: ConnectionId,
        peer_cid: ConnectionId,
        local_isn: &Isn,
        out: &mut Vec<u8>,
    ) -> bool {
        let with_noise = |b: &mut Vec<u8>| {
            if !self.noise_msg.is_empty() {
                varint::put(b, self.noise_msg.len() as u64);
                b.extend_from_slice(&self.noise_msg);
            }
        };
        let packet = match state {
            ConnectionState::Initiating => {
                let b = self.init_offer(local_isn);
                long_packet(LongType::Init, 0, local_cid, &b, MIN_INIT_SIZE)
            }
            ConnectionState::Echoing => {
                let mut b = Vec::new();
                varint::put(&mut b, self.cookie.len() as u64);
                b.extend_from_slice(&self.cookie);
                if let Some(nonce) = self.solution {
                    b.extend_from_slice(&nonce.to_be_bytes());
                }
                with_noise(&mut b);
                long_packet(LongType::CookieEcho, peer_cid, local_cid, &b, 0)
            }
            // Noise message 2 (the responder's), or message 3 until it is confirmed.
            ConnectionState::Authenticating
            | ConnectionState::Established
            | ConnectionState::Closing
                if *state == ConnectionState::Authenticating || self.confirming =>
            {
                let mut b = Vec::new();
                with_noise(&mut b);
                long_packet(LongType::Handshake, peer_cid, local_cid, &b, 0)
            }
            _ => return false,
        };
        out.extend_from_slice(&packet);
        true
    }

    /// The retransmission deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }

    /// Fires the retransmission timer if due: the packet is due again after a doubled wait.
    /// Returns false when the handshake timed out (the timer is then stopped).
    pub fn handle_timeout(&mut self, now: Instant) -> bool {
        let Some(d) = self.deadline else {
            return true;
        };
        if d > now {
            return true;
        }
        if now >= self.give_up {
            self.deadline = None;
            return false;
        }
        self.due = true;
        self.rto = (self.rto * 2).min(HANDSHAKE_MAX_RTO);
        self.deadline = Some(now + self.rto);
        true
    }

    /// The initiator heard from the responder: nothing more to retransmit.
    pub fn complete(&mut self) {
        self.deadline = None;
    }

    /// The connection ended: nothing more to send.
    pub fn stop(&mut self) {
        self.deadline = None;
        self.due = false;
    }

    /// Responder: a repeated COOKIE_ECHO shows the first packet was lost; owe another.
    pub fn owe_first_packet(&mut self) {
        self.owe_first = true;
    }

    /// Responder: true (once) when the first short packet is owed.
    pub fn take_first_packet(&mut self) -> bool {
        core::mem::take(&mut self.owe_first)
    }
}

/// The Noise message a HANDSHAKE packet's `body` carries; `None` when it does not parse.
pub fn noise_message(body: &[u8]) -> Option<&[u8]> {
    let mut r = Reader::new(body);
    let msg = r.length_prefixed(MAX_NOISE_MESSAGE, "noise message").ok()?;
    r.is_empty().then_some(msg)
}

/// The reason a REFUSE's `body` gives, made printable; `None` when it does not parse.
pub fn refusal(body: &[u8]) -> Option<String> {
    let mut r = Reader::new(body);
    let reason = r.length_prefixed(MAX_REASON, "reason").ok()?;
    Some(crate::text::peer_text(reason))
}
