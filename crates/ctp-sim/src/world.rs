//! The simulation proper: endpoints on nodes, packets moving hop by hop over links, the
//! application side of each flow, all on one virtual clock.

use crate::clock::EventQueue;
use crate::link::{DropKind, Link};
use crate::payload;
use crate::topology::Topology;
use bytes::Bytes;
use core::time::Duration;
use ctp_proto::{
    CloseReason, ConnectionHandle, ConnectionState, Endpoint, EndpointConfig, EndpointEvent,
    Instant, Profile,
};
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};
use std::net::SocketAddr;

/// What the application side of one flow does.
#[derive(Clone, Debug)]
pub struct FlowSpec {
    /// Profile the sender asks for.
    pub profile: Profile,
    /// When the sender connects.
    pub start: Duration,
    /// When the sender aborts the flow, if it has not finished by then.
    pub stop: Option<Duration>,
    /// Bytes to send, then close; `None` = bulk until `stop` or the end of the run.
    pub bytes: Option<u64>,
    /// Message size for unreliable profiles (reliable ones use the byte stream).
    pub message_size: usize,
}

/// Everything a run needs.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Seed of every random choice in the run.
    pub seed: u64,
    /// Links and routes.
    pub topology: Topology,
    /// One flow per route.
    pub flows: Vec<FlowSpec>,
    /// Virtual time the run lasts (at most).
    pub duration: Duration,
    /// Metrics sampling interval.
    pub interval: Duration,
    /// Handshake timeout of the initiators.
    pub handshake_timeout: Duration,
    /// End the run early once every flow has finished.
    pub stop_when_done: bool,
    /// Check the senders' limits after every step (slower; for the chaos campaign).
    pub check_limits: bool,
}

/// One sample of one flow at the end of an interval.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Sample {
    /// Application bytes delivered during the interval.
    pub bytes: u64,
    /// The flow was running for the whole interval.
    pub active: bool,
    /// Sender's smoothed RTT at the end of the interval, µs (0 if unknown).
    pub srtt_us: u64,
}

/// The outcome of one flow.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct FlowResult {
    /// Profile name.
    pub profile: String,
    /// Propagation RTT, µs.
    pub prop_rtt_us: u64,
    /// Application bytes (or message bytes) accepted by the sender.
    pub bytes_sent: u64,
    /// Application bytes delivered and verified at the receiver.
    pub bytes_delivered: u64,
    /// Messages sent / delivered (unreliable profiles).
    pub msgs_sent: u64,
    /// Messages delivered intact.
    pub msgs_delivered: u64,
    /// The receiver saw the end of the stream (reliable) or the sender closed gracefully.
    pub completed: bool,
    /// Virtual time from start to completion, µs.
    pub completion_us: Option<u64>,
    /// Connection established at, µs of virtual time.
    pub connected_us: Option<u64>,
    /// Close reason on the sender side, if closed.
    pub sender_close: Option<String>,
    /// Close reason on the receiver side, if closed.
    pub receiver_close: Option<String>,
    /// The sender's final counters.
    pub packets_sent: u64,
    /// Packets declared lost by the sender.
    pub packets_lost: u64,
    /// Segments sent, including retransmissions.
    pub segments_sent: u64,
    /// Retransmitted segments.
    pub retransmissions: u64,
    /// Largest excess of bytes in flight over the window bound (the largest congestion
    /// window seen, or twice the current one); only measured with `check_limits`.
    pub max_cwnd_overshoot: u64,
    /// Violations of the invariants (empty when all is well).
    pub violations: Vec<String>,
    /// Per-interval samples.
    pub samples: Vec<Sample>,
}

/// The outcome of a run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RunResult {
    /// Per flow.
    pub flows: Vec<FlowResult>,
    /// Link counters, in topology order.
    pub links: Vec<crate::link::LinkStats>,
    /// Datagrams endpoints dropped for a failed integrity check (corruption caught).
    pub bad_checksum: u64,
    /// BLAKE3 over every packet event (carried or dropped, with time, link and bytes).
    pub trace_hash: String,
    /// Datagrams emitted by endpoints.
    pub packets: u64,
    /// Virtual time simulated, µs.
    pub virtual_us: u64,
    /// Wall-clock seconds the run took (for the speed figure only; never asserted on).
    pub wall_secs: f64,
    /// Sampling interval, µs.
    pub interval_us: u64,
    /// The run ended because time stood still (an endpoint deadline that never moves).
    pub stuck: Option<String>,
}

enum Ev {
    /// A packet of `flow` arriving at hop `hop` of its route in direction `dir`.
    Hop {
        flow: usize,
        dir: usize,
        hop: usize,
        bytes: Vec<u8>,
    },
}

struct FlowState {
    spec: FlowSpec,
    key: u64,
    client: Option<ConnectionHandle>,
    server: Option<ConnectionHandle>,
    started: bool,
    stopped: bool,
    written: u64,
    finished: bool,
    closing: bool,
    received: u64,
    interval_bytes: u64,
    msgs_sent: u64,
    seen: Vec<u64>,
    res: FlowResult,
    done_at: Option<Instant>,
    max_cwnd: u64,
    max_overshoot: u64,
    overshoot_reported: bool,
}

fn addr(flow: usize, receiver: bool) -> SocketAddr {
    let (net, port) = if receiver { (1, 2000) } else { (0, 1000) };
    SocketAddr::from(([10, net, (flow >> 8) as u8, flow as u8], port))
}

fn seed32(rng: &mut ChaCha8Rng) -> [u8; 32] {
    let mut s = [0u8; 32];
    rng.fill_bytes(&mut s);
    s
}

/// A running simulation.
pub struct World {
    cfg: SimConfig,
    now: Instant,
    links: Vec<Link>,
    nodes: Vec<Endpoint>,
    flows: Vec<FlowState>,
    queue: EventQueue<Ev>,
    trace: blake3::Hasher,
    buf: Vec<u8>,
    out: Vec<(Instant, Vec<u8>)>,
    rbuf: Vec<u8>,
    chunk: Vec<u8>,
    packets: u64,
    next_sample: Instant,
}

impl World {
    /// Builds the world: one endpoint per sender and per receiver, links seeded from the
    /// run's seed in topology order.
    pub fn new(cfg: SimConfig) -> Self {
        let mut master = ChaCha8Rng::seed_from_u64(cfg.seed);
        let links = cfg
            .topology
            .links
            .iter()
            .map(|l| Link::new(l.clone(), ChaCha8Rng::from_seed(seed32(&mut master))))
            .collect();
        let mut nodes = Vec::new();
        let mut flows = Vec::new();
        for (i, spec) in cfg.flows.iter().enumerate() {
            let mut c = EndpointConfig::new(seed32(&mut master), seed32(&mut master));
            c.handshake_timeout = cfg.handshake_timeout;
            let mut s = EndpointConfig::new(seed32(&mut master), seed32(&mut master));
            s.accept = true;
            nodes.push(Endpoint::new(c));
            nodes.push(Endpoint::new(s));
            flows.push(FlowState {
                spec: spec.clone(),
                key: master.next_u64(),
                client: None,
                server: None,
                started: false,
                stopped: false,
                written: 0,
                finished: false,
                closing: false,
                received: 0,
                interval_bytes: 0,
                msgs_sent: 0,
                seen: Vec::new(),
                res: FlowResult {
                    profile: spec.profile.name.clone(),
                    prop_rtt_us: cfg.topology.propagation_rtt(i).as_micros() as u64,
                    ..FlowResult::default()
                },
                done_at: None,
                max_cwnd: 0,
                max_overshoot: 0,
                overshoot_reported: false,
            });
        }
        let next_sample = Instant::ZERO + cfg.interval;
        World {
            cfg,
            now: Instant::ZERO,
            links,
            nodes,
            flows,
            queue: EventQueue::default(),
            trace: blake3::Hasher::new(),
            buf: Vec::with_capacity(65_536),
            out: Vec::new(),
            rbuf: vec![0u8; 1 << 16],
            chunk: vec![0u8; 16_384],
            packets: 0,
            next_sample,
        }
    }

    fn at(d: Duration) -> Instant {
        Instant::ZERO + d
    }

    /// Adds one packet event to the trace hash: time, link, kind, length, the first 48 bytes
    /// (headers) and the last 4 (the integrity trailer, which commits to the whole packet).
    fn trace_event(&mut self, link: usize, kind: u8, bytes: &[u8]) {
        let mut rec = [0u8; 8 + 4 + 1 + 4 + 48 + 4];
        rec[..8].copy_from_slice(&self.now.as_micros().to_le_bytes());
        rec[8..12].copy_from_slice(&(link as u32).to_le_bytes());
        rec[12] = kind;
        rec[13..17].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
        let head = bytes.len().min(48);
        rec[17..17 + head].copy_from_slice(&bytes[..head]);
        let tail = bytes.len().min(4);
        rec[65..65 + tail].copy_from_slice(&bytes[bytes.len() - tail..]);
        self.trace.update(&rec);
    }

    /// Offers `bytes` of `flow` to hop `hop` of its route in direction `dir`.
    fn forward(&mut self, flow: usize, dir: usize, hop: usize, bytes: Vec<u8>) {
        let route = &self.cfg.topology.routes[flow][dir];
        if hop == route.len() {
            let node = 2 * flow + if dir == 0 { 1 } else { 0 };
            let from = addr(flow, dir == 1);
            self.nodes[node].handle_datagram(self.now, from, &bytes);
            return;
        }
        let l = route[hop];
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        match self.links[l].send(self.now, bytes, &mut out) {
            Ok(()) => {
                for (at, b) in out.drain(..) {
                    self.trace_event(l, 0, &b);
                    self.queue.push(
                        at,
                        Ev::Hop {
                            flow,
                            dir,
                            hop: hop + 1,
                            bytes: b,
                        },
                    );
                }
            }
            Err((k, bytes)) => {
                let kind = match k {
                    DropKind::Queue => 1,
                    DropKind::Loss => 2,
                    DropKind::Down => 3,
                };
                self.trace_event(l, kind, &bytes);
            }
        }
        self.out = out;
    }

    fn collect_transmits(&mut self) {
        for n in 0..self.nodes.len() {
            let flow = n / 2;
            let dir = n % 2;
            let peer = addr(flow, dir == 0);
            loop {
                let mut buf = std::mem::take(&mut self.buf);
                let t = self.nodes[n].poll_transmit(self.now, &mut buf);
                let Some(t) = t else {
                    self.buf = buf;
                    break;
                };
                self.packets += 1;
                let bytes = buf[..t.size.min(buf.len())].to_vec();
                self.buf = buf;
                if t.destination != peer {
                    let v = format!("node {n} sent to {} (expected {peer})", t.destination);
                    self.flows[flow].res.violations.push(v);
                    continue;
                }
                self.forward(flow, dir, 0, bytes);
            }
        }
    }

    fn handle_events(&mut self) {
        for n in 0..self.nodes.len() {
            let f = n / 2;
            while let Some(e) = self.nodes[n].poll_event() {
                let fl = &mut self.flows[f];
                match e {
                    EndpointEvent::Incoming(h) => {
                        if fl.server.is_some() {
                            fl.res.violations.push("second incoming connection".into());
                        }
                        fl.server = Some(h);
                    }
                    EndpointEvent::Connected(_) => {
                        fl.res.connected_us = Some(self.now.as_micros());
                    }
                    EndpointEvent::Activity(_) => {}
                    EndpointEvent::Closed(_, r) => {
                        let slot = if n % 2 == 0 {
                            &mut fl.res.sender_close
                        } else {
                            &mut fl.res.receiver_close
                        };
                        if slot.is_none() {
                            *slot = Some(r.to_string());
                        }
                        if n % 2 == 0
                            && r == CloseReason::Graceful
                            && !fl.spec.profile.is_reliable()
                            && fl.closing
                            && fl.done_at.is_none()
                        {
                            fl.done_at = Some(self.now);
                            fl.res.completed = true;
                        }
                    }
                }
            }
        }
    }

    fn run_apps(&mut self) {
        let now = self.now;
        for f in 0..self.flows.len() {
            let fl = &mut self.flows[f];
            let (ci, si) = (2 * f, 2 * f + 1);
            if !fl.started && now >= Self::at(fl.spec.start) {
                fl.started = true;
                match self.nodes[ci].connect(now, addr(f, true), &fl.spec.profile) {
                    Ok(h) => fl.client = Some(h),
                    Err(e) => fl.res.sender_close = Some(format!("connect refused: {e}")),
                }
            }
            if let (Some(stop), false) = (fl.spec.stop, fl.stopped) {
                if now >= Self::at(stop) && fl.started {
                    fl.stopped = true;
                    if fl.done_at.is_none() {
                        if let Some(c) = fl.client.and_then(|h| self.nodes[ci].connection_mut(h)) {
                            c.abort(now, "flow stopped");
                        }
                    }
                }
            }
            // Sender.
            if let Some(c) = fl.client.and_then(|h| self.nodes[ci].connection_mut(h)) {
                if self.cfg.check_limits {
                    let s = c.stats();
                    let mtu = c.params().max_udp_payload as u64;
                    // The window can grow on an ACK and be halved by a loss detected within
                    // the same datagram, so the peak may never be observed between steps;
                    // NewReno's decrease halves it, so twice the current window bounds the
                    // window segments were released under. One packet of slack: a segment
                    // may go when the window is just below full.
                    fl.max_cwnd = fl.max_cwnd.max(s.cwnd);
                    let bound = fl.max_cwnd.max(2 * s.cwnd) + mtu;
                    fl.max_overshoot = fl
                        .max_overshoot
                        .max(s.bytes_in_flight.saturating_sub(bound - mtu));
                    if s.bytes_in_flight > bound && !fl.overshoot_reported {
                        fl.overshoot_reported = true;
                        fl.res.violations.push(format!(
                            "{} bytes in flight above the window bound {} \
                             (at {} µs; cwnd now {}, {} packets sent, {} lost)",
                            s.bytes_in_flight,
                            bound,
                            now.as_micros(),
                            s.cwnd,
                            s.packets_sent,
                            s.packets_lost
                        ));
                    }
                }
                if c.is_established() && !fl.stopped && !fl.closing {
                    let limit = fl.spec.bytes.unwrap_or(u64::MAX);
                    if fl.spec.profile.is_reliable() {
                        let chunk = &mut self.chunk;
                        while fl.written < limit && c.send_room() > 0 {
                            let n = (limit - fl.written).min(chunk.len() as u64) as usize;
                            let n = n.min(c.send_room());
                            payload::fill(fl.key, fl.written, &mut chunk[..n]);
                            match c.stream_write(now, &chunk[..n]) {
                                Ok(0) | Err(_) => break,
                                Ok(k) => fl.written += k as u64,
                            }
                        }
                        if fl.written >= limit && !fl.finished {
                            fl.finished = c.stream_finish(now).is_ok();
                            if fl.finished {
                                c.close(now);
                                fl.closing = true;
                            }
                        }
                    } else {
                        let size = fl.spec.message_size.max(8);
                        while fl.written < limit && c.send_room() >= size {
                            let m = payload::message(fl.key, fl.msgs_sent, size);
                            if c.send_msg(now, Bytes::from(m)).is_err() {
                                break;
                            }
                            fl.msgs_sent += 1;
                            fl.written += size as u64;
                        }
                        if fl.written >= limit {
                            c.close(now);
                            fl.closing = true;
                        }
                    }
                }
            }
            // Receiver.
            if let Some(c) = fl.server.and_then(|h| self.nodes[si].connection_mut(h)) {
                let recv_limit = c.params().recv_buffer as u64;
                let mut got_now = 0u64;
                if fl.spec.profile.is_reliable() {
                    loop {
                        match c.stream_read(now, &mut self.rbuf) {
                            Ok(0) => {
                                if fl.done_at.is_none() {
                                    fl.done_at = Some(now);
                                    fl.res.completed = true;
                                    if Some(fl.received) != fl.spec.bytes {
                                        fl.res.violations.push(format!(
                                            "end of stream after {} bytes, {:?} sent",
                                            fl.received, fl.spec.bytes
                                        ));
                                    }
                                    c.close(now);
                                }
                                break;
                            }
                            Ok(n) => {
                                let data = &self.rbuf[..n];
                                if let Some(i) = payload::first_mismatch(fl.key, fl.received, data)
                                {
                                    if fl.res.violations.len() < 8 {
                                        fl.res.violations.push(format!(
                                            "stream byte {} differs from what was sent",
                                            fl.received + i as u64
                                        ));
                                    }
                                }
                                fl.received += n as u64;
                                got_now += n as u64;
                            }
                            Err(_) => break,
                        }
                    }
                } else {
                    let size = fl.spec.message_size.max(8);
                    while let Ok(m) = c.recv_msg(now) {
                        match payload::check_message(fl.key, size, &m) {
                            Some(id) if id < fl.msgs_sent => {
                                let (w, b) = ((id / 64) as usize, id % 64);
                                if fl.seen.len() <= w {
                                    fl.seen.resize(w + 1, 0);
                                }
                                if fl.seen[w] & (1 << b) != 0 {
                                    fl.res
                                        .violations
                                        .push(format!("message {id} delivered twice"));
                                }
                                fl.seen[w] |= 1 << b;
                                fl.res.msgs_delivered += 1;
                                fl.received += m.len() as u64;
                                got_now += m.len() as u64;
                            }
                            _ => {
                                if fl.res.violations.len() < 8 {
                                    fl.res
                                        .violations
                                        .push("corrupt or unknown message delivered".into());
                                }
                            }
                        }
                    }
                }
                if got_now > recv_limit {
                    fl.res.violations.push(format!(
                        "receiver held {got_now} bytes, above its {recv_limit}-byte buffer"
                    ));
                }
                fl.interval_bytes += got_now;
            }
        }
    }

    fn sample(&mut self) {
        let t_end = self.next_sample;
        let t_start = Instant::from_micros(
            t_end
                .as_micros()
                .saturating_sub(self.cfg.interval.as_micros() as u64),
        );
        for f in 0..self.flows.len() {
            let fl = &mut self.flows[f];
            let srtt = fl
                .client
                .and_then(|h| self.nodes[2 * f].connection(h))
                .map_or(0, |c| c.stats().srtt_us);
            let connected = fl
                .res
                .connected_us
                .is_some_and(|c| c <= t_start.as_micros());
            let stopped = fl.spec.stop.is_some_and(|s| Self::at(s) < t_end);
            let done = fl.done_at.is_some_and(|d| d < t_end);
            fl.res.samples.push(Sample {
                bytes: fl.interval_bytes,
                active: connected && !stopped && !done,
                srtt_us: srtt,
            });
            fl.interval_bytes = 0;
        }
        self.next_sample += self.cfg.interval;
    }

    /// Every flow started, its sender closed, and its receiver finished (or never existed).
    fn all_done(&self) -> bool {
        self.flows.iter().all(|f| {
            f.started
                && f.res.sender_close.is_some()
                && (f.done_at.is_some() || f.res.receiver_close.is_some() || f.server.is_none())
        })
    }

    /// Runs to the end; `progress` is called with the virtual time after each interval.
    pub fn run(mut self, progress: &mut dyn FnMut(Duration)) -> RunResult {
        let wall = std::time::Instant::now();
        let end = Self::at(self.cfg.duration);
        let mut same_time = 0u32;
        let mut stuck = None;
        loop {
            self.handle_events();
            self.run_apps();
            self.collect_transmits();
            self.handle_events();
            if self.cfg.stop_when_done && self.all_done() {
                break;
            }
            let mut next = self.next_sample.min(end);
            if let Some(t) = self.queue.peek_time() {
                next = next.min(t);
            }
            for n in &self.nodes {
                if let Some(t) = n.poll_timeout() {
                    next = next.min(t);
                }
            }
            for fl in &self.flows {
                if !fl.started {
                    next = next.min(Self::at(fl.spec.start));
                }
                if let (Some(s), false) = (fl.spec.stop, fl.stopped) {
                    next = next.min(Self::at(s));
                }
            }
            if next <= self.now {
                same_time += 1;
                if same_time > 100_000 {
                    stuck = Some(format!(
                        "virtual time stopped at {} µs: a deadline that firing does not move",
                        self.now.as_micros()
                    ));
                    break;
                }
            } else {
                same_time = 0;
            }
            self.now = self.now.max(next);
            if self.now >= end && self.queue.peek_time().is_none_or(|t| t > end) {
                while self.next_sample <= end {
                    self.sample();
                }
                break;
            }
            while let Some((
                _,
                Ev::Hop {
                    flow,
                    dir,
                    hop,
                    bytes,
                },
            )) = self.queue.pop_due(self.now)
            {
                self.forward(flow, dir, hop, bytes);
            }
            for n in &mut self.nodes {
                if n.poll_timeout().is_some_and(|t| t <= self.now) {
                    n.handle_timeout(self.now);
                }
            }
            while self.now >= self.next_sample && self.next_sample <= end {
                self.sample();
                progress(self.now - Instant::ZERO);
            }
        }
        self.finish(wall, stuck)
    }

    fn finish(mut self, wall: std::time::Instant, stuck: Option<String>) -> RunResult {
        let mut bad_checksum = 0;
        for n in &self.nodes {
            bad_checksum += n.stats().bad_checksum;
        }
        for (f, fl) in self.flows.iter_mut().enumerate() {
            if let Some(c) = fl.client.and_then(|h| self.nodes[2 * f].connection(h)) {
                let s = c.stats();
                fl.res.packets_sent = s.packets_sent;
                fl.res.packets_lost = s.packets_lost;
                fl.res.segments_sent = s.segments_sent;
                fl.res.retransmissions = s.retransmissions;
                if fl.res.sender_close.is_none() {
                    if let ConnectionState::Closed(r) = c.state() {
                        fl.res.sender_close = Some(r.to_string());
                    }
                }
            }
            fl.res.bytes_sent = fl.written;
            fl.res.max_cwnd_overshoot = fl.max_overshoot;
            fl.res.bytes_delivered = fl.received;
            fl.res.msgs_sent = fl.msgs_sent;
            fl.res.completion_us = fl.done_at.map(|d| {
                d.as_micros()
                    .saturating_sub(fl.spec.start.as_micros() as u64)
            });
        }
        RunResult {
            flows: self.flows.into_iter().map(|f| f.res).collect(),
            links: self.links.iter().map(|l| l.stats).collect(),
            bad_checksum,
            trace_hash: self.trace.finalize().to_hex().to_string(),
            packets: self.packets,
            virtual_us: self.now.as_micros(),
            wall_secs: wall.elapsed().as_secs_f64(),
            interval_us: self.cfg.interval.as_micros() as u64,
            stuck,
        }
    }
}
