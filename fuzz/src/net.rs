//! A two-endpoint network the stateful targets drive by hand: every datagram an endpoint
//! sends waits in a queue until an operation delivers, drops, duplicates or reorders it; a
//! bounded history of what was sent is kept for replays and mutations. Time is virtual and
//! moves only when an operation says so. Nothing sleeps, nothing touches a socket.

use core::time::Duration;
use ctp_proto::time::Instant;
use ctp_proto::{ConnectionHandle, Endpoint, EndpointConfig, EndpointEvent, Profile};
use std::collections::VecDeque;
use std::net::SocketAddr;

/// Index of the client → server direction.
pub const TO_SERVER: usize = 0;
/// Index of the server → client direction.
pub const TO_CLIENT: usize = 1;

/// Datagrams waiting per direction before the oldest is dropped.
const MAX_QUEUE: usize = 256;
/// Datagrams remembered per direction for replays.
pub const HISTORY: usize = 64;

/// Two endpoints, their queues and their clock.
pub struct Net {
    /// The initiator.
    pub client: Endpoint,
    /// The responder.
    pub server: Endpoint,
    /// Client address.
    pub client_addr: SocketAddr,
    /// Server address.
    pub server_addr: SocketAddr,
    /// An address neither endpoint has a connection with.
    pub stranger: SocketAddr,
    /// Virtual now.
    pub now: Instant,
    /// Datagrams in flight, per direction.
    pub queue: [VecDeque<Vec<u8>>; 2],
    /// Recent datagrams the endpoints sent, per direction (a ring).
    pub history: [Vec<Vec<u8>>; 2],
    /// Datagrams sent since the target last looked, per direction.
    pub fresh: Vec<(usize, Vec<u8>)>,
    /// The client's connection.
    pub client_conn: Option<ConnectionHandle>,
    /// The server's connection, once it announced it.
    pub server_conn: Option<ConnectionHandle>,
    sent: [usize; 2],
    buf: Vec<u8>,
}

fn seed(n: u8) -> [u8; 32] {
    [n; 32]
}

impl Net {
    /// Two endpoints of the given wire format; the server accepts.
    pub fn new(wire: ctp_proto::udt::WireFormat) -> Self {
        let mut c = EndpointConfig::new(seed(1), seed(2));
        c.wire = wire;
        let mut s = EndpointConfig::new(seed(3), seed(4));
        s.wire = wire;
        s.accept = true;
        Net {
            client: Endpoint::new(c),
            server: Endpoint::new(s),
            client_addr: "10.0.0.1:1000".parse().expect("literal"),
            server_addr: "10.0.0.2:2000".parse().expect("literal"),
            stranger: "10.0.0.3:3000".parse().expect("literal"),
            now: Instant::from_micros(1_000_000),
            queue: [VecDeque::new(), VecDeque::new()],
            history: [Vec::new(), Vec::new()],
            fresh: Vec::new(),
            client_conn: None,
            server_conn: None,
            sent: [0; 2],
            buf: Vec::with_capacity(2048),
        }
    }

    /// Connects the client with `profile` over a clean network; false if the handshake
    /// does not complete within a few rounds.
    pub fn connect(&mut self, profile: &Profile) -> bool {
        let Ok(c) = self.client.connect(self.now, self.server_addr, profile) else {
            return false;
        };
        self.client_conn = Some(c);
        for _ in 0..16 {
            self.settle(1);
            let up = self
                .client
                .connection(c)
                .is_some_and(|x| x.is_established());
            if up && self.server_conn.is_some() {
                return true;
            }
        }
        false
    }

    /// Takes what both endpoints want to send into the queues.
    pub fn collect(&mut self) {
        for dir in [TO_SERVER, TO_CLIENT] {
            for _ in 0..MAX_QUEUE {
                let ep = if dir == TO_SERVER {
                    &mut self.client
                } else {
                    &mut self.server
                };
                let Some(t) = ep.poll_transmit(self.now, &mut self.buf) else {
                    break;
                };
                let bytes = self.buf[..t.size].to_vec();
                let h = &mut self.history[dir];
                if h.len() < HISTORY {
                    h.push(bytes.clone());
                } else {
                    h[self.sent[dir] % HISTORY] = bytes.clone();
                }
                self.sent[dir] += 1;
                self.fresh.push((dir, bytes.clone()));
                let q = &mut self.queue[dir];
                if q.len() >= MAX_QUEUE {
                    q.pop_front();
                }
                q.push_back(bytes);
            }
        }
        self.events();
    }

    fn events(&mut self) {
        while self.client.poll_event().is_some() {}
        while let Some(e) = self.server.poll_event() {
            if let EndpointEvent::Incoming(h) = e {
                self.server_conn.get_or_insert(h);
            }
        }
    }

    /// Hands `bytes` to the endpoint `dir` leads to, as if sent from its peer (or from a
    /// stranger).
    pub fn deliver(&mut self, dir: usize, bytes: &[u8], from_stranger: bool) {
        let (ep, from) = if dir == TO_SERVER {
            (&mut self.server, self.client_addr)
        } else {
            (&mut self.client, self.server_addr)
        };
        let from = if from_stranger { self.stranger } else { from };
        // The endpoint opens packets in place; the caller may deliver the same bytes again.
        ep.handle_datagram(self.now, from, &mut bytes.to_vec());
        self.collect();
    }

    /// Delivers the queued datagram at `idx` (modulo the queue length; 0 is the oldest).
    pub fn deliver_queued(&mut self, dir: usize, idx: usize) {
        let q = &mut self.queue[dir];
        if q.is_empty() {
            return;
        }
        let i = idx % q.len();
        if let Some(b) = q.remove(i) {
            self.deliver(dir, &b, false);
        }
    }

    /// A remembered datagram (modulo the history length).
    pub fn remembered(&self, dir: usize, idx: usize) -> Option<Vec<u8>> {
        let h = &self.history[dir];
        (!h.is_empty()).then(|| h[idx % h.len()].clone())
    }

    /// Moves time on by `d` and fires due timers.
    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        self.client.handle_timeout(self.now);
        self.server.handle_timeout(self.now);
        self.collect();
    }

    /// `rounds` rounds of a clean network: deliver everything queued, in order; when
    /// nothing is, jump to the next deadline.
    pub fn settle(&mut self, rounds: usize) {
        for _ in 0..rounds {
            self.collect();
            if self.queue.iter().all(VecDeque::is_empty) {
                let next = [self.client.poll_timeout(), self.server.poll_timeout()]
                    .into_iter()
                    .flatten()
                    .min();
                let Some(next) = next else { return };
                // A deadline far away is an idle or keep-alive timer: do not jump past 10 s.
                self.now = self.now.max(next.min(self.now + Duration::from_secs(10)));
                self.client.handle_timeout(self.now);
                self.server.handle_timeout(self.now);
                continue;
            }
            for dir in [TO_SERVER, TO_CLIENT] {
                let n = self.queue[dir].len();
                for _ in 0..n {
                    if let Some(b) = self.queue[dir].pop_front() {
                        self.deliver(dir, &b, false);
                    }
                }
            }
        }
        self.collect();
    }
}
