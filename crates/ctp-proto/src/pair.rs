//! A deterministic in-memory network joining two endpoints, for tests and examples.
//!
//! Time is virtual: the pair jumps straight to the next deadline or delivery, so a transfer
//! that would take minutes on a 100 ms path runs in milliseconds and identically every time
//! for the same seed. Each direction has a propagation delay, random loss, duplication,
//! reordering (extra random delay) and corruption. The client can own several addresses,
//! change its address (a NAT rebinding) and lose one (an interface going down).

use crate::endpoint::{Endpoint, EndpointConfig, EndpointEvent};
use core::time::Duration;
use ctp_cc::time::Instant;
use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::net::SocketAddr;

/// Impairments of one direction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkModel {
    /// One-way propagation delay.
    pub delay: Duration,
    /// Probability a datagram is dropped.
    pub loss: f64,
    /// Probability a datagram is delivered twice.
    pub duplicate: f64,
    /// Probability a datagram gets extra delay (up to `reorder_extra`), overtaking others.
    pub reorder: f64,
    /// Largest extra delay for reordered datagrams.
    pub reorder_extra: Duration,
    /// Probability one byte of a datagram is flipped.
    pub corrupt: f64,
    /// Path MTU: datagrams longer than this many bytes are dropped (`None`: no limit).
    pub max_datagram: Option<usize>,
}

impl Default for LinkModel {
    fn default() -> Self {
        LinkModel {
            delay: Duration::from_millis(10),
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_extra: Duration::from_millis(5),
            corrupt: 0.0,
            max_datagram: None,
        }
    }
}

/// A datagram on the wire: delivery time, tie-breaking sequence, toward the server?, the
/// client's address it left from or goes to, bytes.
type InFlight = (Instant, u64, bool, SocketAddr, Vec<u8>);

/// Which endpoint of the pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The initiator.
    Client,
    /// The responder.
    Server,
}

/// Two endpoints joined by a simulated link.
pub struct Pair {
    /// The initiating endpoint.
    pub client: Endpoint,
    /// The accepting endpoint.
    pub server: Endpoint,
    /// Client address: where its datagrams come from unless it names another of its
    /// addresses (change it for a NAT rebinding: the old one then receives nothing).
    pub client_addr: SocketAddr,
    /// Further addresses the client owns (the client endpoint's `local_addrs`).
    pub client_aliases: Vec<SocketAddr>,
    /// Client addresses whose datagrams are lost both ways (an interface gone down).
    pub down: Vec<SocketAddr>,
    /// Bytes the server sent, by destination.
    pub server_sent_to: HashMap<SocketAddr, u64>,
    /// Bytes delivered to the server, by source.
    pub server_received_from: HashMap<SocketAddr, u64>,
    /// Datagrams to a client address it does not own (any more) or that is down.
    pub misaddressed: u64,
    /// Server address.
    pub server_addr: SocketAddr,
    /// Client → server impairments.
    pub to_server: LinkModel,
    /// Server → client impairments.
    pub to_client: LinkModel,
    /// Virtual now.
    pub now: Instant,
    rng: ChaCha8Rng,
    in_flight: BinaryHeap<Reverse<InFlight>>,
    seq: u64,
    buf: Vec<u8>,
    /// Events seen from the client endpoint.
    pub client_events: Vec<EndpointEvent>,
    /// Events seen from the server endpoint.
    pub server_events: Vec<EndpointEvent>,
    /// Datagrams carried (including duplicates, excluding drops).
    pub delivered: u64,
    /// Datagrams dropped for exceeding a link's `max_datagram`.
    pub dropped_too_big: u64,
    /// While set, a copy of every datagram the client sends goes to `tapped` (what an
    /// eavesdropper on the path sees).
    pub tap_client: bool,
    /// The client's datagrams copied while `tap_client` was set, oldest first.
    pub tapped: Vec<Vec<u8>>,
}

fn seed(n: u64, salt: u8) -> [u8; 32] {
    let mut s = [salt; 32];
    s[..8].copy_from_slice(&n.to_le_bytes());
    s
}

impl Pair {
    /// A pair with default configurations; the server accepts.
    pub fn new(seed_value: u64) -> Self {
        Self::with_handshake_timeout(seed_value, Duration::from_secs(10))
    }

    /// A pair whose client gives up a handshake after `timeout`.
    pub fn with_handshake_timeout(seed_value: u64, timeout: Duration) -> Self {
        let mut client = EndpointConfig::new(seed(seed_value, 1), seed(seed_value, 2));
        client.handshake_timeout = timeout;
        let mut server = EndpointConfig::new(seed(seed_value, 3), seed(seed_value, 4));
        server.accept = true;
        Self::with_configs(seed_value, client, server)
    }

    /// A pair with the given configurations.
    pub fn with_configs(seed_value: u64, client: EndpointConfig, server: EndpointConfig) -> Self {
        Pair {
            client: Endpoint::new(client),
            server: Endpoint::new(server),
            client_addr: "10.0.0.1:1000".parse().expect("literal"),
            client_aliases: Vec::new(),
            down: Vec::new(),
            server_sent_to: HashMap::new(),
            server_received_from: HashMap::new(),
            misaddressed: 0,
            server_addr: "10.0.0.2:2000".parse().expect("literal"),
            to_server: LinkModel::default(),
            to_client: LinkModel::default(),
            now: Instant::from_micros(1_000_000),
            rng: ChaCha8Rng::from_seed(seed(seed_value, 5)),
            in_flight: BinaryHeap::new(),
            seq: 0,
            buf: Vec::with_capacity(2048),
            client_events: Vec::new(),
            server_events: Vec::new(),
            delivered: 0,
            dropped_too_big: 0,
            tap_client: false,
            tapped: Vec::new(),
        }
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.rng.next_u64() as f64 / u64::MAX as f64) < p
    }

    /// Injects a raw datagram toward `to`, delivered after that direction's delay.
    pub fn inject(&mut self, to: Side, bytes: Vec<u8>) {
        let (delay, to_server) = match to {
            Side::Server => (self.to_server.delay, true),
            Side::Client => (self.to_client.delay, false),
        };
        self.seq += 1;
        self.in_flight.push(Reverse((
            self.now + delay,
            self.seq,
            to_server,
            self.client_addr,
            bytes,
        )));
    }

    fn collect(&mut self) {
        for from_client in [true, false] {
            loop {
                let ep = if from_client {
                    &mut self.client
                } else {
                    &mut self.server
                };
                let Some(t) = ep.poll_transmit(self.now, &mut self.buf) else {
                    break;
                };
                let mut bytes = self.buf[..t.size].to_vec();
                if from_client && self.tap_client {
                    self.tapped.push(bytes.clone());
                }
                let client_side = if from_client {
                    t.src.unwrap_or(self.client_addr)
                } else {
                    *self.server_sent_to.entry(t.destination).or_default() += t.size as u64;
                    t.destination
                };
                let link = if from_client {
                    self.to_server
                } else {
                    self.to_client
                };
                if link.max_datagram.is_some_and(|m| bytes.len() > m) {
                    self.dropped_too_big += 1;
                    continue;
                }
                if self.chance(link.loss) {
                    continue;
                }
                if self.chance(link.corrupt) && !bytes.is_empty() {
                    let i = (self.rng.next_u64() % bytes.len() as u64) as usize;
                    bytes[i] ^= 1 << (self.rng.next_u64() % 8);
                }
                let copies = if self.chance(link.duplicate) { 2 } else { 1 };
                for _ in 0..copies {
                    let mut at = self.now + link.delay;
                    if self.chance(link.reorder) {
                        let extra =
                            self.rng.next_u64() % (link.reorder_extra.as_micros() as u64 + 1);
                        at += Duration::from_micros(extra);
                    }
                    self.seq += 1;
                    self.in_flight.push(Reverse((
                        at,
                        self.seq,
                        from_client,
                        client_side,
                        bytes.clone(),
                    )));
                }
            }
        }
    }

    fn drain_events(&mut self) {
        while let Some(e) = self.client.poll_event() {
            self.client_events.push(e);
        }
        while let Some(e) = self.server.poll_event() {
            self.server_events.push(e);
        }
    }

    /// Advances to the next delivery or deadline (at most to `limit`) and processes it.
    /// Returns false when nothing at all is scheduled.
    pub fn step(&mut self, limit: Instant) -> bool {
        self.collect();
        self.drain_events();
        let next_packet = self.in_flight.peek().map(|Reverse((t, ..))| *t);
        let next = [
            next_packet,
            self.client.poll_timeout(),
            self.server.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else { return false };
        self.now = self.now.max(next.min(limit));
        while let Some(Reverse((t, ..))) = self.in_flight.peek() {
            if *t > self.now {
                break;
            }
            let Some(Reverse((_, _, to_server, client_side, mut bytes))) = self.in_flight.pop()
            else {
                break;
            };
            let owned =
                client_side == self.client_addr || self.client_aliases.contains(&client_side);
            if self.down.contains(&client_side) || (!to_server && !owned) {
                self.misaddressed += 1;
                continue;
            }
            self.delivered += 1;
            if to_server {
                *self.server_received_from.entry(client_side).or_default() += bytes.len() as u64;
                self.server
                    .handle_datagram(self.now, client_side, &mut bytes);
            } else {
                self.client
                    .handle_datagram(self.now, self.server_addr, &mut bytes);
            }
        }
        self.client.handle_timeout(self.now);
        self.server.handle_timeout(self.now);
        self.collect();
        self.drain_events();
        true
    }

    /// Steps until `done` returns true or `max` of virtual time passes; returns whether
    /// `done` became true.
    pub fn run_until(&mut self, max: Duration, mut done: impl FnMut(&mut Pair) -> bool) -> bool {
        let limit = self.now + max;
        loop {
            if done(self) {
                return true;
            }
            if self.now >= limit || !self.step(limit) {
                return done(self);
            }
        }
    }
}
