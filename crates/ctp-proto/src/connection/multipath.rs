//! The routes of a connection over several paths at once (the `coded` profile's
//! multipath, CTCP's Algorithm 4): which (local, peer) address pairs its packets take, which
//! of them are validated, and the route each packet leaves on.
//!
//! Route 0 is the path the handshake used. The initiator adds the routes it was given (its
//! further local addresses, or explicit pairs): they are validated by being the user's
//! choice. Either side adds a route when an authenticated packet arrives from an address
//! no route has (the peer's further addresses, seen for the first time): such a route is
//! not validated, so until the peer answers a `PATH_CHALLENGE` sent to it, at most three
//! times the bytes received from it are sent to it and it carries no data — only the
//! challenge and what rides with it (RFC 9000 §8's rules, as for a migration). A route
//! whose challenge goes unanswered three times is given up; an address that returns later
//! is challenged again.
//!
//! Nothing migrates on a connection over several paths: a new address is a new route, and
//! a route that stops answering is left by the packet scheduler (it probes it, and uses it
//! again when it answers). Packets that carry no data go back on the route the latest
//! packet came in on, so acknowledgements follow the routes that work.

use super::paths::{unvalidated_budget, Challenge, ChallengeStep};
use crate::engine::route::{Routes, MAX_ROUTES};
use core::time::Duration;
use ctp_cc::time::Instant;
use std::net::SocketAddr;

/// One route.
#[derive(Clone, Debug)]
pub struct Route {
    /// The peer's address.
    pub remote: SocketAddr,
    /// The local address packets leave from (`None`: the socket's own).
    pub local: Option<SocketAddr>,
    /// The peer proved it receives at `remote` (or the user named the route).
    pub validated: bool,
    /// Given up: its challenge went unanswered.
    pub failed: bool,
    /// Bytes sent to `remote` while it was not validated.
    sent: u64,
    /// Bytes received from `remote` while it was not validated.
    received: u64,
    challenge: Option<Challenge>,
}

/// The routes of one connection over several paths.
#[derive(Clone, Debug)]
pub struct Multipath {
    routes: Vec<Route>,
    /// The route the latest packet came in on.
    last_rx: usize,
    /// Routes added from a new address of the peer.
    pub added: u64,
    /// Routes given up because their challenge went unanswered.
    pub given_up: u64,
}

impl Multipath {
    /// Route 0 from `local` to `remote` (the handshake's, validated), then `further`
    /// routes the user named (validated too; at most [`MAX_ROUTES`] in all, a route
    /// named twice counts once).
    pub fn new(
        remote: SocketAddr,
        local: Option<SocketAddr>,
        further: &[(Option<SocketAddr>, SocketAddr)],
    ) -> Self {
        let mut m = Multipath {
            routes: Vec::new(),
            last_rx: 0,
            added: 0,
            given_up: 0,
        };
        for &(local, remote) in core::iter::once(&(local, remote)).chain(further) {
            let known = m
                .routes
                .iter()
                .any(|r| r.remote == remote && r.local == local);
            if !known && m.routes.len() < MAX_ROUTES {
                m.routes.push(Route {
                    remote,
                    local,
                    validated: true,
                    failed: false,
                    sent: 0,
                    received: 0,
                    challenge: None,
                });
            }
        }
        m
    }

    /// The routes, route 0 first.
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    /// The route whose peer address is `from` (the first such, when local addresses
    /// differ), if any.
    pub fn route_of(&self, from: SocketAddr) -> Option<usize> {
        self.routes.iter().position(|r| r.remote == from)
    }

    /// An authenticated packet came from `from`, which no route has: a new route to it,
    /// challenged with `token` at once and every `rto` after. Takes the place of a
    /// given-up route when all [`MAX_ROUTES`] are taken; `None` when none is free.
    pub fn add(
        &mut self,
        now: Instant,
        from: SocketAddr,
        token: [u8; 8],
        rto: Duration,
    ) -> Option<usize> {
        let route = Route {
            remote: from,
            local: None,
            validated: false,
            failed: false,
            sent: 0,
            received: 0,
            challenge: Some(Challenge::new(token, now, rto, 0)),
        };
        let i = if self.routes.len() < MAX_ROUTES {
            self.routes.push(route);
            self.routes.len() - 1
        } else {
            let i = self.routes.iter().position(|r| r.failed)?;
            self.routes[i] = route;
            i
        };
        self.added += 1;
        Some(i)
    }

    /// Counts a datagram of `bytes` received on route `i`: the route answers, and while it
    /// is not validated what may be sent to it grows.
    pub fn on_received(&mut self, i: usize, bytes: usize) {
        if let Some(r) = self.routes.get_mut(i) {
            self.last_rx = i;
            if !r.validated {
                r.received += bytes as u64;
            }
        }
    }

    /// A `PATH_RESPONSE` with `token` arrived: the route challenged with it is validated.
    /// Returns its index.
    pub fn on_response(&mut self, token: [u8; 8]) -> Option<usize> {
        let i = self
            .routes
            .iter()
            .position(|r| r.challenge.is_some_and(|c| c.token == token))?;
        let r = &mut self.routes[i];
        r.challenge = None;
        r.validated = true;
        r.failed = false;
        Some(i)
    }

    /// The route whose challenge is due now, with its token, when what may be sent to it
    /// allows a packet of `min_packet` bytes (its next try is scheduled). Routes that went
    /// unanswered too long are given up on the way.
    pub fn due_challenge(&mut self, now: Instant, min_packet: usize) -> Option<(usize, [u8; 8])> {
        for i in 0..self.routes.len() {
            let budget = self.budget(i);
            let r = &mut self.routes[i];
            let Some(c) = r.challenge.as_mut() else {
                continue;
            };
            if now < c.deadline() || budget < min_packet {
                continue;
            }
            match c.step(now) {
                ChallengeStep::Wait => {}
                ChallengeStep::Send(token) => return Some((i, token)),
                ChallengeStep::GiveUp => {
                    r.challenge = None;
                    r.failed = true;
                    self.given_up += 1;
                    if self.last_rx == i {
                        self.last_rx = 0;
                    }
                }
            }
        }
        None
    }

    /// When [`Multipath::due_challenge`] has something to do.
    pub fn deadline(&self) -> Option<Instant> {
        self.routes
            .iter()
            .filter_map(|r| r.challenge.as_ref().map(Challenge::deadline))
            .min()
    }

    /// The most bytes that may be sent on route `i` now (unbounded once validated).
    pub fn budget(&self, i: usize) -> usize {
        match self.routes.get(i) {
            Some(r) if r.validated => usize::MAX,
            Some(r) => unvalidated_budget(r.received, r.sent),
            None => 0,
        }
    }

    /// Counts a datagram of `bytes` sent on route `i`.
    pub fn on_sent(&mut self, i: usize, bytes: usize) {
        if let Some(r) = self.routes.get_mut(i).filter(|r| !r.validated) {
            r.sent += bytes as u64;
        }
    }

    /// The routes as the microprotocols see them: those that may carry data.
    pub fn usable(&self) -> Routes {
        let usable = self
            .routes
            .iter()
            .enumerate()
            .filter(|(_, r)| r.validated && !r.failed)
            .fold(0u8, |m, (i, _)| m | (1 << i));
        Routes {
            usable,
            ..Routes::default()
        }
    }

    /// The route of a packet no microprotocol chose one for: the one the latest packet
    /// came in on when it is validated, else route 0.
    pub fn default_route(&self) -> usize {
        match self.routes.get(self.last_rx) {
            Some(r) if r.validated && !r.failed => self.last_rx,
            _ => 0,
        }
    }

    /// The addresses of route `i`: (peer, local).
    pub fn addresses(&self, i: usize) -> Option<(SocketAddr, Option<SocketAddr>)> {
        self.routes.get(i).map(|r| (r.remote, r.local))
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{addr, at};
    use super::*;

    #[test]
    fn named_routes_are_validated_and_counted_once() {
        let server = addr("10.0.0.9:9000");
        let (a, b) = (addr("10.0.0.1:1000"), addr("10.0.1.1:1000"));
        let m = Multipath::new(server, Some(a), &[(Some(b), server), (Some(a), server)]);
        assert_eq!(m.routes().len(), 2);
        assert_eq!(m.usable().usable, 0b11);
        assert_eq!(m.addresses(1), Some((server, Some(b))));
        assert_eq!(m.budget(1), usize::MAX);
    }

    #[test]
    fn a_new_address_carries_no_data_and_three_times_its_bytes_until_it_answers() {
        let rto = Duration::from_millis(100);
        let mut m = Multipath::new(addr("10.0.0.1:1000"), None, &[]);
        let new = addr("10.0.1.1:1000");
        let i = m.add(at(0), new, [5; 8], rto).unwrap();
        assert_eq!(m.route_of(new), Some(i));
        assert_eq!(m.usable().usable, 0b1, "not validated: no data on it");
        assert_eq!(
            m.due_challenge(at(0), 40),
            None,
            "nothing received: no budget"
        );
        m.on_received(i, 100);
        assert_eq!(m.default_route(), 0, "acknowledgements avoid it too");
        assert_eq!(m.due_challenge(at(0), 40), Some((i, [5; 8])));
        m.on_sent(i, 250);
        assert_eq!(m.budget(i), 50);
        assert_eq!(m.due_challenge(at(50), 40), None, "not due again yet");
        assert_eq!(
            m.on_response([6; 8]),
            None,
            "a wrong token validates nothing"
        );
        assert_eq!(m.on_response([5; 8]), Some(i));
        assert_eq!(m.usable().usable, 0b11);
        assert_eq!(m.budget(i), usize::MAX);
        m.on_received(i, 10);
        assert_eq!(m.default_route(), i, "the latest packet came in on it");
    }

    #[test]
    fn an_unanswered_route_is_given_up_and_its_place_reused() {
        let rto = Duration::from_millis(100);
        let mut m = Multipath::new(addr("10.0.0.1:1000"), None, &[]);
        let mut routes = Vec::new();
        for n in 1..MAX_ROUTES {
            let a = SocketAddr::new([10, 0, 9, n as u8].into(), 1000);
            routes.push(m.add(at(0), a, [n as u8; 8], rto).unwrap());
        }
        assert_eq!(m.add(at(0), addr("10.0.8.8:1"), [9; 8], rto), None, "full");
        let first = routes[0];
        m.on_received(first, 1000);
        for t in [0, 100, 200] {
            assert_eq!(m.due_challenge(at(t), 40), Some((first, [1; 8])));
        }
        assert_eq!(m.due_challenge(at(300), 40), None);
        assert!(m.routes()[first].failed);
        assert_eq!(m.given_up, 1);
        assert_eq!(m.add(at(300), addr("10.0.8.8:1"), [9; 8], rto), Some(first));
        assert_eq!(m.on_response([1; 8]), None, "the old route's token is gone");
    }
}
