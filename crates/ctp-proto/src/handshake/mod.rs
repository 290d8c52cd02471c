//! Connection set-up on ctp's wire, in one place (SCTP-style four-way handshake):
//!
//! ```text
//! initiator                                   responder
//!   INIT (requested profile, ISNs; padded ≥ 1200 B) ─▶  negotiates, keeps no state
//!   ◀─ INIT_ACK (negotiated profile, ISNs, cookie[, puzzle d])   or REFUSE (reason)
//!   COOKIE_ECHO (cookie[, solution]) ─▶                checks MAC + age + address + solution,
//!                                                      creates state
//!   ◀─ first short packet (a PING at least): the connection exists
//! ```
//! INIT must be padded to [`MIN_INIT_SIZE`] and INIT_ACK is far smaller than 3 × that, so
//! an unvalidated address never receives more than three times what it sent.
//!
//! Under load (half-open secure channels past a watermark) INIT_ACK also asks a client
//! puzzle whose solution COOKIE_ECHO carries ([`puzzle`]).
//!
//! One concern per module: [`cookie`] (mint and open the stateless cookie), [`puzzle`] (the
//! client puzzle: difficulty from load, solve, verify), [`responder`]
//! (the stateless answers to INIT and COOKIE_ECHO, with the offer negotiation) and
//! [`state`] (a connection's side of the handshake: the initiator's requested offer,
//! cookie and retransmission timer, the responder's first packet owed). The endpoint
//! routes handshake packets here; the composed connection keeps a [`state::Handshake`].
//! (The UDT4 wire has its own handshake: [`crate::udt::handshake`].)

pub mod cookie;
pub mod noise;
pub mod puzzle;
pub mod responder;
pub mod state;

pub use cookie::{mint, open, CookieContents, CookieError, COOKIE_LIFETIME, MAX_COOKIE};
pub use state::{Handshake, HANDSHAKE_MAX_RTO, HANDSHAKE_RTO};

/// Smallest INIT datagram a responder answers.
pub const MIN_INIT_SIZE: usize = 1200;
