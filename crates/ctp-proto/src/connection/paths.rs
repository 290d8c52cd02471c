//! The paths of a composed connection: which peer address packets go to, whether that
//! address was validated, and the move to a new address the peer shows up from (a NAT
//! rebinding, or the groundwork of mobility).
//!
//! The rules are QUIC's (RFC 9000 §8.2, §9): a packet that opens under the connection's
//! protection, is the newest the peer sent and carries more than path validation, coming
//! from a new address, moves the connection there at once. Until the peer answers a
//! `PATH_CHALLENGE` from the new address, at most three times the bytes received from it
//! are sent to it (an attacker who replays or forges a packet from a victim's address
//! cannot turn the connection into an amplifier against the victim). If no answer comes
//! in time, the connection returns to the last validated address.
//!
//! One path carries the connection at a time here; a connection over several paths at
//! once (the `coded` profile's multipath) keeps its routes in [`super::multipath`].

use crate::engine::path::{PathId, PathVars};
use core::time::Duration;
use ctp_cc::time::Instant;
use std::net::SocketAddr;

/// Bytes an unvalidated address may receive per byte received from it.
pub const AMPLIFICATION_FACTOR: u64 = 3;

/// The most bytes that may be sent to an address not validated yet, which sent us
/// `received` and was sent `sent`.
pub(crate) fn unvalidated_budget(received: u64, sent: u64) -> usize {
    let allowed = AMPLIFICATION_FACTOR.saturating_mul(received);
    usize::try_from(allowed.saturating_sub(sent)).unwrap_or(usize::MAX)
}

/// Challenges sent before the path is given up.
const CHALLENGE_TRIES: u32 = 3;

/// The path packets go to.
#[derive(Clone, Debug)]
pub struct Current {
    /// The peer's address on this path.
    pub remote: SocketAddr,
    /// The local address packets leave from (`None`: the socket's own).
    pub local: Option<SocketAddr>,
    /// The peer proved it receives at this address (the handshake did, for the first
    /// path; a `PATH_RESPONSE` does for a new one).
    pub validated: bool,
    /// Bytes sent to the address while it was not validated.
    pub sent: u64,
    /// Bytes received from the address while it was not validated.
    pub received: u64,
}

/// A challenge waiting for its response.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Challenge {
    pub(crate) token: [u8; 8],
    /// When the challenge is sent again.
    resend_at: Instant,
    /// Time between tries.
    interval: Duration,
    tries: u32,
}

/// What a challenge asks for at a given time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChallengeStep {
    /// Nothing yet.
    Wait,
    /// Send the challenge (again).
    Send([u8; 8]),
    /// Every try went unanswered.
    GiveUp,
}

impl Challenge {
    /// A challenge with `token`, `sent` times so far, next sent at `at`, then every
    /// `interval`.
    pub(crate) fn new(token: [u8; 8], at: Instant, interval: Duration, sent: u32) -> Self {
        Challenge {
            token,
            resend_at: at,
            interval,
            tries: sent,
        }
    }

    /// When [`Challenge::step`] has something to say.
    pub(crate) fn deadline(&self) -> Instant {
        self.resend_at
    }

    /// Whether to send the challenge now, or give up (after [`CHALLENGE_TRIES`] tries).
    pub(crate) fn step(&mut self, now: Instant) -> ChallengeStep {
        if now < self.resend_at {
            ChallengeStep::Wait
        } else if self.tries < CHALLENGE_TRIES {
            self.tries += 1;
            self.resend_at = now + self.interval;
            ChallengeStep::Send(self.token)
        } else {
            ChallengeStep::GiveUp
        }
    }
}

/// What a timeout asks the connection to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathAction {
    /// Send the challenge again with this token.
    Rechallenge([u8; 8]),
    /// The new path failed validation: the connection went back to the last validated
    /// one (`true`) or has none to go back to (`false`).
    Failed {
        /// A validated path was restored.
        restored: bool,
    },
}

/// Validated paths remembered besides the current one (a peer that flips between two
/// addresses, as a NAT whose mapping flaps does, is not challenged at every flip).
const REMEMBERED: usize = 4;

/// The paths of one connection.
#[derive(Clone, Debug)]
pub struct Paths {
    current: Current,
    /// Validated paths the connection left and their variables, the most recent last: the
    /// last is where it returns if the current one fails validation.
    validated: Vec<(SocketAddr, PathVars)>,
    challenge: Option<Challenge>,
    next_id: u8,
    /// Local addresses to send from, the socket's own first (empty: only the socket's).
    locals: Vec<SocketAddr>,
    /// Routes (local, peer address) a connection over several paths at once uses besides
    /// the current one; `None`: one from each further local address to the peer's.
    further: Option<Vec<(Option<SocketAddr>, SocketAddr)>>,
    /// Moves to another address.
    pub migrations: u64,
    /// Moves undone because the new address did not answer its challenge.
    pub failed_validations: u64,
}

impl Paths {
    /// The paths of a connection whose handshake validated `remote`.
    pub fn new(remote: SocketAddr) -> Self {
        Paths {
            current: Current {
                remote,
                local: None,
                validated: true,
                sent: 0,
                received: 0,
            },
            validated: Vec::new(),
            challenge: None,
            next_id: 1,
            locals: Vec::new(),
            further: None,
            migrations: 0,
            failed_validations: 0,
        }
    }

    /// The path packets go to.
    pub fn current(&self) -> &Current {
        &self.current
    }

    /// Counts a datagram received from `from`: one from the current address while it is
    /// not validated widens what may be sent to it.
    pub fn on_received(&mut self, from: SocketAddr, bytes: usize) {
        if from == self.current.remote && !self.current.validated {
            self.current.received += bytes as u64;
        }
    }

    /// Whether a datagram of up to `bytes` may be sent to the current address now.
    pub fn may_send(&self, bytes: usize) -> bool {
        bytes <= self.send_budget()
    }

    /// The most bytes that may be sent to the current address now (unbounded once it is
    /// validated).
    pub fn send_budget(&self) -> usize {
        let c = &self.current;
        if c.validated {
            return usize::MAX;
        }
        unvalidated_budget(c.received, c.sent)
    }

    /// Counts a datagram sent to the current address.
    pub fn on_sent(&mut self, bytes: usize) {
        if !self.current.validated {
            self.current.sent += bytes as u64;
        }
    }

    fn fresh_id(&mut self) -> PathId {
        let id = PathId(self.next_id);
        self.next_id = self.next_id.wrapping_add(1);
        id
    }

    /// Variables of a path taken into use (new, or remembered and returned to): a fresh
    /// id, so that what is still reported about packets sent with the old one counts on no
    /// path, nothing in flight, no back-off, no pause.
    fn revived(&mut self, mut vars: PathVars) -> PathVars {
        vars.id = self.fresh_id();
        vars.bytes_in_flight = 0;
        vars.rto_backoff = 0;
        vars.paused_until = None;
        vars
    }

    /// The local addresses this connection may send from; it starts from the first.
    pub fn set_locals(&mut self, locals: Vec<SocketAddr>) {
        self.current.local = locals.first().copied();
        self.locals = locals;
    }

    /// Sets the routes (local address, peer address) a connection over several paths at
    /// once takes besides the current one.
    pub fn set_further_routes(&mut self, routes: Vec<(Option<SocketAddr>, SocketAddr)>) {
        self.further = Some(routes);
    }

    /// The routes a connection over several paths at once takes besides the current one:
    /// those set, else one from each local address after the first to the peer's address.
    pub fn further_routes(&self) -> Vec<(Option<SocketAddr>, SocketAddr)> {
        match &self.further {
            Some(r) => r.clone(),
            None => self
                .locals
                .iter()
                .skip(1)
                .map(|&l| (Some(l), self.current.remote))
                .collect(),
        }
    }

    /// Gives up the current path for the next local address, when there is another: the
    /// peer address stays (validated), the path's round trip is measured again. Returns
    /// the new path's variables; the peer sees packets from the new address and follows.
    pub fn fail_over(&mut self, old: &PathVars, rto: Duration) -> Option<PathVars> {
        if self.locals.len() < 2 {
            return None;
        }
        let at = self
            .current
            .local
            .and_then(|l| self.locals.iter().position(|&a| a == l))
            .unwrap_or(0);
        let next = self.locals[(at + 1) % self.locals.len()];
        self.current.local = Some(next);
        self.migrations += 1;
        let vars = old.with_fresh_rtt(rto.as_micros() as u64);
        Some(self.revived(vars))
    }

    /// Moves to `remote`, which the peer showed up from; `old` are the variables of the
    /// path left. Returns the new path's variables and whether `remote` must be challenged
    /// with `token` (not when it is a validated path the connection returns to). `rto` is
    /// the time between challenges (three are made).
    pub fn migrate(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        old: PathVars,
        token: [u8; 8],
        rto: Duration,
    ) -> (PathVars, bool) {
        self.migrations += 1;
        let local = self.current.local;
        let from = core::mem::replace(
            &mut self.current,
            Current {
                remote,
                local,
                validated: false,
                sent: 0,
                received: 0,
            },
        );
        // Only the port changed: the same host behind a NAT that rebound, so the round
        // trip is as it was. A new host starts its estimate afresh.
        let same_host = remote.ip() == from.remote.ip();
        let fresh = if same_host {
            old.clone()
        } else {
            old.with_fresh_rtt(rto.as_micros() as u64)
        };
        if from.validated {
            self.validated.retain(|(a, _)| *a != from.remote);
            if self.validated.len() == REMEMBERED {
                self.validated.remove(0);
            }
            self.validated.push((from.remote, old));
        }
        if let Some(i) = self.validated.iter().position(|(a, _)| *a == remote) {
            let (_, vars) = self.validated.remove(i);
            self.current.validated = true;
            self.challenge = None;
            return (self.revived(vars), false);
        }
        self.challenge = Some(Challenge::new(token, now + rto, rto, 1));
        (self.revived(fresh), true)
    }

    /// A `PATH_RESPONSE` arrived: true when it answers the challenge of the current
    /// path, which is then validated.
    pub fn on_response(&mut self, token: [u8; 8]) -> bool {
        match self.challenge {
            Some(c) if c.token == token => {
                self.challenge = None;
                self.current.validated = true;
                true
            }
            _ => false,
        }
    }

    /// When [`Paths::on_timeout`] has something to do.
    pub fn deadline(&self) -> Option<Instant> {
        self.challenge.as_ref().map(Challenge::deadline)
    }

    /// Resends the challenge when due, or gives the path up after the last try: the most
    /// recent validated path's variables are handed back through `restore`.
    pub fn on_timeout(
        &mut self,
        now: Instant,
        restore: impl FnOnce(PathVars),
    ) -> Option<PathAction> {
        match self.challenge.as_mut()?.step(now) {
            ChallengeStep::Wait => return None,
            ChallengeStep::Send(token) => return Some(PathAction::Rechallenge(token)),
            ChallengeStep::GiveUp => {}
        }
        self.challenge = None;
        self.failed_validations += 1;
        let Some((remote, vars)) = self.validated.pop() else {
            return Some(PathAction::Failed { restored: false });
        };
        let vars = self.revived(vars);
        restore(vars);
        self.current = Current {
            remote,
            local: self.current.local,
            validated: true,
            sent: 0,
            received: 0,
        };
        Some(PathAction::Failed { restored: true })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{addr, at};
    use super::*;

    #[test]
    fn an_unvalidated_address_gets_at_most_three_times_what_it_sent() {
        let mut p = Paths::new(addr("10.0.0.1:1000"));
        assert!(
            p.may_send(1_000_000),
            "the handshake validated the first path"
        );
        let old = PathVars::default();
        let (_, challenge) = p.migrate(
            at(0),
            addr("10.0.0.1:2000"),
            old,
            [7; 8],
            Duration::from_millis(100),
        );
        assert!(challenge);
        assert!(!p.may_send(1), "nothing received from it yet");
        p.on_received(addr("10.0.0.1:2000"), 100);
        p.on_received(addr("10.0.0.1:1000"), 10_000); // the old address widens nothing
        assert!(p.may_send(300));
        p.on_sent(250);
        assert!(!p.may_send(51), "250 + 51 > 3 × 100");
        assert!(!p.on_response([8; 8]), "a wrong token validates nothing");
        assert!(p.on_response([7; 8]));
        assert!(p.may_send(1_000_000));
    }

    #[test]
    fn an_address_that_never_answers_is_given_up_for_the_validated_one() {
        let mut p = Paths::new(addr("10.0.0.1:1000"));
        let old = PathVars {
            srtt_us: 5_000,
            bytes_in_flight: 9_000,
            ..PathVars::default()
        };
        let rto = Duration::from_millis(100);
        let (new, _) = p.migrate(at(0), addr("10.9.9.9:1000"), old, [1; 8], rto);
        assert_eq!(
            new.srtt_us, 0,
            "a new host: the round trip is measured again"
        );
        assert_eq!(new.bytes_in_flight, 0);
        assert_eq!(p.current().remote, addr("10.9.9.9:1000"));
        assert_eq!(p.on_timeout(at(50), |_| unreachable!()), None);
        assert_eq!(
            p.on_timeout(at(100), |_| unreachable!()),
            Some(PathAction::Rechallenge([1; 8]))
        );
        assert_eq!(
            p.on_timeout(at(200), |_| unreachable!()),
            Some(PathAction::Rechallenge([1; 8]))
        );
        let mut restored = None;
        assert_eq!(
            p.on_timeout(at(300), |v| restored = Some(v)),
            Some(PathAction::Failed { restored: true })
        );
        let v = restored.expect("the old path's variables come back");
        assert_eq!((v.srtt_us, v.bytes_in_flight), (5_000, 0));
        assert_ne!(v.id, new.id);
        assert_eq!(p.current().remote, addr("10.0.0.1:1000"));
        assert!(p.current().validated);
        assert_eq!((p.migrations, p.failed_validations), (1, 1));
    }

    #[test]
    fn a_rebinding_keeps_the_round_trip_estimate() {
        let mut p = Paths::new(addr("10.0.0.1:1000"));
        let old = PathVars {
            srtt_us: 5_000,
            ..PathVars::default()
        };
        let rto = Duration::from_millis(100);
        let (new, _) = p.migrate(at(0), addr("10.0.0.1:1001"), old, [1; 8], rto);
        assert_eq!(new.srtt_us, 5_000);
        assert_ne!(new.id, PathId(0));
    }

    #[test]
    fn returning_to_a_validated_address_needs_no_new_challenge() {
        let (a, b) = (addr("10.0.0.1:1000"), addr("10.0.0.1:1001"));
        let mut p = Paths::new(a);
        let rto = Duration::from_millis(100);
        let (vb, challenge) = p.migrate(at(0), b, PathVars::default(), [1; 8], rto);
        assert!(challenge);
        assert!(p.on_response([1; 8]));
        let (va, challenge) = p.migrate(at(10), a, vb.clone(), [2; 8], rto);
        assert!(!challenge, "a was validated by the handshake");
        assert!(p.current().validated && p.may_send(1 << 20));
        assert!(
            va.id != vb.id && va.id != PathId(0),
            "a fresh id: old reports count nowhere"
        );
        let (_, challenge) = p.migrate(at(20), b, va, [3; 8], rto);
        assert!(!challenge, "b was validated by its response");
        assert_eq!(p.deadline(), None);
    }
}
