//! The simulation proper: endpoints on nodes, packets moving hop by hop over links, the
//! application side of each flow, all on one virtual clock.

use crate::app::FlowApp;
pub use crate::app::{FlowKind, FlowResult, FlowSpec, Sample};
use crate::attacker::{AttackConfig, AttackStats, Attacker, Injection};
use crate::clock::{EventQueue, WakeTimes};
use crate::group::GroupApp;
pub use crate::group::{GroupResult, GroupSpec};
use crate::link::{Carried, DropKind, Link};
use crate::net::{Net, NetStats, Routed};
use crate::topology::{NodeNet, SourceChoice, Topology};
use core::time::Duration;
use ctp_proto::udt::WireFormat;
use ctp_proto::{
    CloseReason, ConnectionHandle, ConnectionState, Endpoint, EndpointConfig, EndpointEvent,
    Instant, Transmit,
};
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};
use std::net::SocketAddr;

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
    /// An adversarial third party injecting datagrams (none in scenarios).
    pub attacker: Option<AttackConfig>,
    /// Groups ([`crate::group`]): their members are the flows of kind
    /// [`FlowKind::Group`] naming them.
    pub groups: Vec<GroupSpec>,
}

/// The outcome of a run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RunResult {
    /// Per flow.
    pub flows: Vec<FlowResult>,
    /// Per group, if the run has any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupResult>,
    /// Link counters, in topology order.
    pub links: Vec<crate::link::LinkStats>,
    /// Datagrams endpoints dropped for a failed integrity check (corruption caught).
    pub bad_checksum: u64,
    /// Datagrams endpoints dropped because their header named no connection of theirs —
    /// where corruption of a short packet's connection id ends up, since the check of its
    /// trailer needs the connection (it covers the whole packet number).
    pub unknown_connection: u64,
    /// Datagrams the receiving host's UDP checksum dropped: corrupted on the way to an
    /// endpoint whose wire format has no integrity check of its own (UDT4's). The UDP
    /// checksum catches every one-bit error, the only corruption the links make.
    pub udp_checksum_drops: u64,
    /// BLAKE3 over every packet event (carried or dropped, with time, link and bytes).
    pub trace_hash: String,
    /// Datagrams emitted by endpoints.
    pub packets: u64,
    /// Virtual time simulated, µs.
    pub virtual_us: u64,
    /// Wall-clock seconds the run took (for the speed figure only; never asserted on).
    pub wall_secs: f64,
    /// CPU seconds the run's thread used (the speed figure's denominator; never asserted on).
    pub cpu_secs: f64,
    /// Sampling interval, µs.
    pub interval_us: u64,
    /// The run ended because time stood still (an endpoint deadline that never moves).
    pub stuck: Option<String>,
    /// What the attacker did, if there was one.
    pub attack: Option<AttackStats>,
    /// Addressing counters, when the topology has more than one address per node, one
    /// route per flow, or rebinds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net: Option<NetStats>,
}

/// Bytes of trace records hashed at once.
const TRACE_BATCH: usize = 64 * 1024;
/// Trace kind of a datagram the receiving host's UDP checksum dropped (links' drops are
/// 1–4, a packet carried 0).
const HOST_UDP_CHECKSUM_DROP: u8 = 5;
/// Trace kind of a datagram the attacker injected (its link: [`INJECTED_LINK`]).
const INJECTED: u8 = 6;
/// Trace link number of injected datagrams.
const INJECTED_LINK: usize = 0xFFFF;
/// Trace kind of a datagram dropped on arrival at an address a rebind replaced.
const STALE_ADDRESS_DROP: u8 = 7;

/// The one kind of queued event: a packet arriving at hop `hop` of route `route` in
/// direction `dir`, seen from address id `src` and sent to address id `dst` (see
/// [`Net`]), `corrupted` if a link flipped a bit of it; its bytes wait in slot `slot` of
/// the world's packet slab (a small event keeps the queue fast). Node and application
/// wakes are kept apart ([`WakeTimes`]).
struct Hop {
    route: u32,
    slot: u32,
    src: u16,
    dst: u16,
    dir: u8,
    hop: u8,
    corrupted: bool,
}

// The queue entry (time, sequence, event) stays 32 bytes.
const _: () = assert!(std::mem::size_of::<Hop>() == 16);

/// Where a packet is on its way: route, direction, addresses (the fields of [`Hop`] that
/// stay the same from hop to hop).
#[derive(Clone, Copy)]
struct Way {
    route: usize,
    dir: usize,
    src: u16,
    dst: u16,
}

/// The source address an endpoint chose for a datagram (a source the node does not own
/// is a violation); none leaves it to the node's configured choice.
fn transmit_source(t: &Transmit) -> Option<SocketAddr> {
    t.src
}

/// The addresses a client endpoint may send from, the one it sends from by default first
/// (none when it has one address, or spreads its datagrams over all of them).
fn client_locals(net: &NodeNet) -> Vec<SocketAddr> {
    let first = match net.source {
        _ if net.addrs.len() < 2 => return Vec::new(),
        SourceChoice::Alternate => return Vec::new(),
        SourceChoice::Primary => 0,
        SourceChoice::Address(i) => i,
    };
    let mut locals = vec![net.addrs[first]];
    locals.extend(
        net.addrs
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != first)
            .map(|(_, &a)| a),
    );
    locals
}

struct FlowState {
    app: FlowApp,
    client: Option<ConnectionHandle>,
    server: Option<ConnectionHandle>,
    started: bool,
    stopped: bool,
}

/// Node `2f` is flow `f`'s sender, node `2f + 1` its receiver.
fn is_sender(node: usize) -> bool {
    node.is_multiple_of(2)
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
    queue: EventQueue<Hop>,
    trace: blake3::Hasher,
    /// Trace records not hashed yet (see `flush_trace`).
    trace_buf: Vec<u8>,
    /// Packet buffers back from delivered or dropped packets, reused for new ones.
    pool: Vec<Vec<u8>>,
    /// Packets on the wire, addressed by the events that carry them.
    slab: Vec<Vec<u8>>,
    /// Free slots of `slab`.
    free_slots: Vec<u32>,
    out: Vec<(Instant, Vec<u8>)>,
    packets: u64,
    /// See [`RunResult::udp_checksum_drops`].
    udp_checksum_drops: u64,
    next_sample: Instant,
    /// Per node, its one wake (a deadline, or its interface queue draining): kept out of
    /// the event queue, where the superseded ones would pile up.
    node_wake: WakeTimes,
    /// Per flow, its application's one wake (start, stop, or what it has due).
    flow_wake: WakeTimes,
    /// Nodes to step at the current instant, and the same as flags.
    touched: Vec<u32>,
    node_touched: Vec<bool>,
    /// Nodes whose deadline was already due when they were scheduled.
    timeouts_due: Vec<u32>,
    /// The adversarial third party, if any.
    attacker: Option<Attacker>,
    /// Addresses, routes and rebinds.
    net: Net,
    /// The groups' sending and checking sides.
    groups: Vec<GroupApp>,
    /// Per flow, the group it is a member of.
    flow_group: Vec<Option<usize>>,
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
            c.wire = spec.profile.wire();
            c.local_addrs = client_locals(&cfg.topology.nodes[2 * i]);
            let mut s = EndpointConfig::new(seed32(&mut master), seed32(&mut master));
            s.accept = true;
            s.wire = spec.profile.wire();
            nodes.push(Endpoint::new(c));
            nodes.push(Endpoint::new(s));
            let key = master.next_u64();
            let rtt = cfg.topology.propagation_rtt(i);
            flows.push(FlowState {
                app: FlowApp::new(spec.clone(), key, rtt),
                client: None,
                server: None,
                started: false,
                stopped: false,
            });
        }
        let flow_group: Vec<Option<usize>> = cfg
            .flows
            .iter()
            .map(|s| match s.kind {
                FlowKind::Group { group } => Some(group),
                _ => None,
            })
            .collect();
        // Drawn after everything else: a run without groups has the world it always had.
        let groups = cfg
            .groups
            .iter()
            .enumerate()
            .map(|(g, spec)| {
                let members = (0..flow_group.len())
                    .filter(|&f| flow_group[f] == Some(g))
                    .collect();
                GroupApp::new(spec.clone(), master.next_u64(), members)
            })
            .collect();
        let next_sample = Instant::ZERO + cfg.interval;
        let n_flows = flows.len();
        let net = Net::new(&cfg.topology);
        // The attacker has its own random stream: the world's draws are the same with one
        // or without.
        let attacker = cfg.attacker.clone().map(|a| {
            let targets = cfg
                .flows
                .iter()
                .enumerate()
                .map(|(i, s)| (s.profile.wire(), net.primary(2 * i), net.primary(2 * i + 1)))
                .collect();
            Attacker::new(a, targets, cfg.topology.links.len())
        });
        World {
            cfg,
            now: Instant::ZERO,
            links,
            nodes,
            flows,
            queue: EventQueue::default(),
            trace: blake3::Hasher::new(),
            trace_buf: Vec::with_capacity(TRACE_BATCH),
            pool: Vec::new(),
            slab: Vec::new(),
            free_slots: Vec::new(),
            out: Vec::new(),
            packets: 0,
            udp_checksum_drops: 0,
            next_sample,
            node_wake: WakeTimes::new(2 * n_flows),
            flow_wake: WakeTimes::new(n_flows),
            touched: Vec::new(),
            node_touched: vec![false; 2 * n_flows],
            timeouts_due: Vec::new(),
            attacker,
            net,
            groups,
            flow_group,
        }
    }

    fn at(d: Duration) -> Instant {
        Instant::ZERO + d
    }

    /// Adds one packet event to the trace hash: time, link, kind, length, the first 15 bytes
    /// (the short header) and the last 4 (the integrity trailer, which commits to the whole
    /// packet): 32 bytes, two events per BLAKE3 block.
    fn trace_event(&mut self, link: usize, kind: u8, bytes: &[u8]) {
        const HEAD: usize = 15;
        let mut rec = [0u8; 4 + 2 + 1 + 2 + HEAD + 4 + 4];
        rec[..4].copy_from_slice(&(self.now.as_micros() as u32).to_le_bytes());
        rec[4..6].copy_from_slice(&(link as u16).to_le_bytes());
        rec[6] = kind;
        rec[7..9].copy_from_slice(&(bytes.len() as u16).to_le_bytes());
        let head = bytes.len().min(HEAD);
        rec[9..9 + head].copy_from_slice(&bytes[..head]);
        let tail = bytes.len().min(4);
        rec[24..24 + tail].copy_from_slice(&bytes[bytes.len() - tail..]);
        rec[28..32].copy_from_slice(&((self.now.as_micros() >> 32) as u32).to_le_bytes());
        self.trace_buf.extend_from_slice(&rec);
        if self.trace_buf.len() >= TRACE_BATCH {
            self.flush_trace();
        }
    }

    /// Hashes the buffered trace records. BLAKE3 of a stream does not depend on how it is
    /// split into updates, so batching changes no hash; it lets BLAKE3 hash many chunks at
    /// once instead of one 32-byte record at a time.
    fn flush_trace(&mut self) {
        self.trace.update(&self.trace_buf);
        self.trace_buf.clear();
    }

    /// Offers `bytes` to hop `hop` of their way (past the last hop: delivers them);
    /// `corrupted` if a link before flipped a bit of them.
    fn forward(&mut self, way: Way, hop: usize, mut bytes: Vec<u8>, corrupted: bool) {
        let topo = &self.cfg.topology;
        let route = &topo.routes[way.route][way.dir];
        if hop == route.len() {
            let last = route[hop - 1];
            let flow = topo.route_flow[way.route];
            if corrupted && self.cfg.flows[flow].profile.wire() == WireFormat::Udt4 {
                // Nothing in the UDT4 wire format would notice: the receiving host's UDP
                // checksum drops the datagram before the endpoint sees it.
                self.udp_checksum_drops += 1;
                self.trace_event(last, HOST_UDP_CHECKSUM_DROP, &bytes);
                self.recycle(bytes);
                return;
            }
            match self.net.deliver(self.now, way.src, way.dst) {
                // `a.local`, the address it reached, is for when the endpoint takes one.
                Some(a) => {
                    self.nodes[a.node].handle_datagram(self.now, a.from, &mut bytes);
                    self.touch(a.node);
                }
                None => self.trace_event(last, STALE_ADDRESS_DROP, &bytes),
            }
            self.recycle(bytes);
            return;
        }
        let l = route[hop];
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        match self.links[l].send(self.now, bytes, &mut out) {
            Ok(carried) => {
                let corrupted = corrupted || carried == Carried::Corrupted;
                for (at, b) in out.drain(..) {
                    self.trace_event(l, 0, &b);
                    // A copy of a packet a link corrupted is not one the attacker could
                    // replay: the UDP checksum would drop it on the way (and the UDT4 wire
                    // would take a clean copy of wrong bytes for a forgery).
                    if let Some(a) = self.attacker.as_mut().filter(|a| a.taps(l) && !corrupted) {
                        a.observe(self.cfg.topology.route_flow[way.route], way.dir, &b);
                    }
                    let slot = self.stash(b);
                    // A link hands packets on in order unless it jitters or reorders.
                    self.queue.push_in_lane(
                        l,
                        at,
                        Hop {
                            route: way.route as u32,
                            slot,
                            src: way.src,
                            dst: way.dst,
                            dir: way.dir as u8,
                            hop: (hop + 1) as u8,
                            corrupted,
                        },
                    );
                }
            }
            Err((k, bytes)) => {
                let kind = match k {
                    DropKind::Queue => 1,
                    DropKind::Loss => 2,
                    DropKind::Down => 3,
                    DropKind::Aqm => 4,
                };
                self.trace_event(l, kind, &bytes);
                self.recycle(bytes);
            }
        }
        self.out = out;
    }

    /// The access link a node sends through.
    fn nic(&self, node: usize) -> usize {
        self.cfg.topology.routes[node / 2][node % 2][0]
    }

    /// True while a node's interface queue is full: it is not polled (back-pressure).
    fn nic_blocked(&mut self, node: usize) -> bool {
        let l = self.nic(node);
        let limit = self.links[l].config().queue_packets;
        limit > 0 && self.links[l].queue_len(self.now) >= limit
    }

    /// Keeps a packet on the wire until its event comes due.
    fn stash(&mut self, bytes: Vec<u8>) -> u32 {
        match self.free_slots.pop() {
            Some(i) => {
                self.slab[i as usize] = bytes;
                i
            }
            None => {
                self.slab.push(bytes);
                (self.slab.len() - 1) as u32
            }
        }
    }

    /// Takes a packet off the wire.
    fn unstash(&mut self, slot: u32) -> Vec<u8> {
        self.free_slots.push(slot);
        std::mem::take(&mut self.slab[slot as usize])
    }

    /// Returns a packet buffer to the pool (bounded: the excess is freed).
    fn recycle(&mut self, bytes: Vec<u8>) {
        const POOL_LIMIT: usize = 4096;
        if self.pool.len() < POOL_LIMIT {
            self.pool.push(bytes);
        }
    }

    /// Sends what node `n` has to send, until its interface queue is full.
    fn collect_transmits(&mut self, n: usize) {
        let flow = n / 2;
        while !self.nic_blocked(n) {
            let mut bytes = self.pool.pop().unwrap_or_default();
            let t = self.nodes[n].poll_transmit(self.now, &mut bytes);
            let Some(t) = t else {
                self.recycle(bytes);
                if is_sender(n) && self.top_up(flow) {
                    continue;
                }
                break;
            };
            self.packets += 1;
            bytes.truncate(t.size);
            match self.net.route(n, t.destination, transmit_source(&t)) {
                Routed::Path {
                    route,
                    dir,
                    src,
                    dst,
                } => {
                    let way = Way {
                        route: route as usize,
                        dir: dir as usize,
                        src,
                        dst,
                    };
                    self.forward(way, 0, bytes, false);
                }
                Routed::NotPeer => {
                    self.not_to_peer(n, t.destination);
                    self.recycle(bytes);
                }
                Routed::ForeignSource => {
                    let v = format!("node {n} sent from an address it does not own");
                    self.flows[flow].app.res.limit_violations.push(v);
                    self.recycle(bytes);
                }
                // Counted by the addressing layer: the scenario joined no route there.
                Routed::NoPath => self.recycle(bytes),
            }
        }
    }

    /// Node `n` sent to `to`, no address of its peer's: a reply to a source the attacker
    /// used, or a violation.
    fn not_to_peer(&mut self, n: usize, to: SocketAddr) {
        let answerable = {
            let ip = to.ip();
            to.port() != 0
                && !ip.is_unspecified()
                && !ip.is_multicast()
                && ip != std::net::Ipv4Addr::BROADCAST
        };
        if let (Some(a), true) = (self.attacker.as_mut(), answerable) {
            // A reply to a source the attacker used: it goes nowhere.
            a.stats.replies += 1;
        } else {
            let peer = self.net.primary(n ^ 1);
            let v = format!("node {n} sent to {to} (expected {peer})");
            self.flows[n / 2].app.res.limit_violations.push(v);
        }
    }

    /// Lets flow `f`'s sending application write more (see [`crate::app::SEND_AHEAD`]); true
    /// if it did.
    fn top_up(&mut self, f: usize) -> bool {
        let fl = &mut self.flows[f];
        if fl.stopped {
            return false;
        }
        let Some(c) = fl.client.and_then(|h| self.nodes[2 * f].connection_mut(h)) else {
            return false;
        };
        fl.app.top_up(self.now, c)
    }

    /// Takes node `n`'s endpoint events.
    fn handle_events(&mut self, n: usize) {
        while let Some(e) = self.nodes[n].poll_event() {
            let fl = &mut self.flows[n / 2];
            let app = &mut fl.app;
            match e {
                EndpointEvent::Incoming(h) => {
                    if fl.server.is_some() {
                        app.res.violations.push("second incoming connection".into());
                    }
                    // Under attack, the flow's connection is the first one accepted.
                    if fl.server.is_none() || self.attacker.is_none() {
                        fl.server = Some(h);
                    }
                }
                EndpointEvent::Connected(_) => {
                    app.res.connected_us = Some(self.now.as_micros());
                }
                EndpointEvent::Activity(_) => {}
                EndpointEvent::Closed(_, r) => {
                    let slot = if is_sender(n) {
                        &mut app.res.sender_close
                    } else {
                        &mut app.res.receiver_close
                    };
                    if slot.is_none() {
                        *slot = Some(r.to_string());
                    }

                    // A message flow is complete once its sender closed gracefully
                    // (everything it promised to deliver was delivered).
                    if is_sender(n)
                        && r == CloseReason::Graceful
                        && app.spec.uses_messages()
                        && app.closing
                        && app.done_at.is_none()
                    {
                        app.done_at = Some(self.now);
                        app.res.completed = true;
                    }
                    if let (true, Some(g)) = (is_sender(n), self.flow_group[n / 2]) {
                        self.groups[g].member_closed(self.now, n / 2, &r.to_string());
                        self.touch_group(g);
                    }
                }
            }
        }
    }

    /// Runs node `n`'s side of its flow's application: on the sender, start, stop, the
    /// limits, echoes and sending; on the receiver, receiving.
    fn run_app(&mut self, n: usize) {
        let now = self.now;
        let fl = &mut self.flows[n / 2];
        let ep = &mut self.nodes[n];
        if !is_sender(n) {
            if let Some(c) = fl.server.and_then(|h| ep.connection_mut(h)) {
                match self.flow_group[n / 2] {
                    Some(g) => {
                        self.groups[g].receive(now, n / 2, &mut fl.app, c);
                    }
                    None => fl.app.drive_receiver(now, c),
                }
                if self.cfg.check_limits {
                    fl.app.check_memory(now, c, false);
                }
            }
            return;
        }
        if !fl.started && now >= Self::at(fl.app.spec.start) {
            fl.started = true;
            match ep.connect(now, self.net.primary(n + 1), &fl.app.spec.profile) {
                Ok(h) => fl.client = Some(h),
                Err(e) => fl.app.res.sender_close = Some(format!("connect refused: {e}")),
            }
        }
        if let (Some(stop), false) = (fl.app.spec.stop, fl.stopped) {
            if now >= Self::at(stop) && fl.started {
                fl.stopped = true;
                if fl.app.done_at.is_none() {
                    if let Some(c) = fl.client.and_then(|h| ep.connection_mut(h)) {
                        c.abort(now, "flow stopped");
                    }
                }
            }
        }
        let mut conn = fl.client.and_then(|h| ep.connection_mut(h));
        if let Some(c) = conn.as_deref_mut() {
            if self.cfg.check_limits {
                fl.app.check_limits(now, c);
                fl.app.check_memory(now, c, true);
            }
            fl.app.drive_echoes(now, c);
            if !fl.stopped {
                fl.app.drive_sender(now, c);
            }
        }
        if let Some(g) = self.flow_group[n / 2] {
            if self.groups[g].pump(now, n / 2, &mut fl.app, conn) {
                self.touch_group(g);
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
            let app = &mut fl.app;
            let connected = app
                .res
                .connected_us
                .is_some_and(|c| c <= t_start.as_micros());
            let stopped = app.spec.stop.is_some_and(|s| Self::at(s) < t_end);
            let done = app.done_at.is_some_and(|d| d < t_end);
            app.res.samples.push(Sample {
                bytes: app.interval_bytes,
                active: connected && !stopped && !done,
                srtt_us: srtt,
            });
            app.interval_bytes = 0;
        }
        self.next_sample += self.cfg.interval;
    }

    /// Every flow started, its sender closed, and its receiver finished (or never existed).
    fn all_done(&self) -> bool {
        self.flows.iter().all(|f| {
            f.started
                && f.app.res.sender_close.is_some()
                && (f.app.done_at.is_some()
                    || f.app.res.receiver_close.is_some()
                    || f.server.is_none())
        })
    }

    /// Runs to the end; `progress` is called with the virtual time after each interval.
    ///
    /// Event-driven: only nodes that received a packet, fired a timer or were woken (or
    /// whose flow's application has something due) are stepped at an instant; every other
    /// node sleeps in the event queue until its own deadline. The order of work at one
    /// instant is fixed: packets arriving, then due timers, then the applications,
    /// transmissions and endpoint events of the touched nodes (all in node order: a flow's
    /// sender before its receiver).
    pub fn run(mut self, progress: &mut dyn FnMut(Duration)) -> RunResult {
        let wall = std::time::Instant::now();
        let cpu = crate::cpu_time::ThreadCpuClock::start();
        let end = Self::at(self.cfg.duration);
        let mut same_time = 0u32;
        let mut stuck = None;
        for f in 0..self.flows.len() {
            self.touch_flow(f);
        }
        loop {
            self.step_touched();
            if self.cfg.stop_when_done && self.all_done() {
                break;
            }
            let mut next = self.next_sample.min(end);
            if let Some(t) = self.next_event_time() {
                next = next.min(t);
            }
            if !self.timeouts_due.is_empty() || !self.touched.is_empty() {
                next = self.now;
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
            if self.now >= end && self.next_event_time().is_none_or(|t| t > end) {
                while self.next_sample <= end {
                    self.sample();
                }
                break;
            }
            let due = std::mem::take(&mut self.timeouts_due);
            for &n in &due {
                self.touch(n as usize);
            }
            self.timeouts_due = due;
            self.timeouts_due.clear();
            while let Some(n) = self.node_wake.pop_due(self.now) {
                self.touch(n);
            }
            while let Some(f) = self.flow_wake.pop_due(self.now) {
                self.touch_flow(f);
            }
            self.net.apply_due(self.now);
            while let Some(((_, ev), next)) = self.queue.pop_due_peek(self.now) {
                if let Some(n) = next {
                    // The link's next packet is handled a few events from now; its bytes,
                    // in flight for milliseconds, have left the caches meanwhile.
                    crate::prefetch::prefetch(&self.slab[n.slot as usize]);
                }
                let bytes = self.unstash(ev.slot);
                let way = Way {
                    route: ev.route as usize,
                    dir: ev.dir as usize,
                    src: ev.src,
                    dst: ev.dst,
                };
                self.forward(way, ev.hop as usize, bytes, ev.corrupted);
            }
            self.inject();
            // Due timers, in node order (an untouched node has none due: it sleeps in the
            // queue until its deadline).
            self.touched.sort_unstable();
            for i in 0..self.touched.len() {
                let n = self.touched[i] as usize;
                if self.nodes[n].poll_timeout().is_some_and(|t| t <= self.now) {
                    self.nodes[n].handle_timeout(self.now);
                }
            }
            while self.now >= self.next_sample && self.next_sample <= end {
                self.sample();
                progress(self.now - Instant::ZERO);
            }
        }
        self.finish(wall, cpu, stuck)
    }

    /// Delivers the attacker's burst due now, if any, straight to its target endpoints.
    fn inject(&mut self) {
        let Some(a) = self.attacker.as_mut() else {
            return;
        };
        let mut burst: Vec<Injection> = Vec::new();
        a.fire(self.now, &mut burst);
        for mut inj in burst {
            self.trace_event(INJECTED_LINK, INJECTED, &inj.bytes);
            self.nodes[inj.node].handle_datagram(self.now, inj.from, &mut inj.bytes);
            self.touch(inj.node);
        }
    }

    /// Marks node `n` (and its side of its flow's application) for a step at the current
    /// instant.
    fn touch(&mut self, n: usize) {
        if !self.node_touched[n] {
            self.node_touched[n] = true;
            self.touched.push(n as u32);
        }
    }

    /// Marks both nodes of flow `f` for a step (its application woke, started or stopped).
    fn touch_flow(&mut self, f: usize) {
        self.touch(2 * f);
        self.touch(2 * f + 1);
    }

    /// Marks the sending node of every member of group `g` for a step (the group has
    /// something new for them: messages, a failed member, its end).
    fn touch_group(&mut self, g: usize) {
        for i in 0..self.groups[g].members.len() {
            let f = self.groups[g].members[i];
            self.touch(2 * f);
        }
    }

    /// Steps every touched node: endpoint events, its side of the application,
    /// transmissions, endpoint events again; then schedules each touched node's and its
    /// flow application's next wake. A node nothing happened to is not polled: only a
    /// packet, a timer or its application changes what it would send.
    fn step_touched(&mut self) {
        let mut list = std::mem::take(&mut self.touched);
        list.sort_unstable();
        for &n in &list {
            self.node_touched[n as usize] = false;
        }
        for &n in &list {
            self.handle_events(n as usize);
        }
        for &n in &list {
            self.run_app(n as usize);
        }
        for &n in &list {
            self.collect_transmits(n as usize);
        }
        for &n in &list {
            self.handle_events(n as usize);
        }
        for &n in &list {
            let n = n as usize;
            self.schedule_node(n);
            self.schedule_flow(n / 2);
        }
        list.clear();
        if self.touched.is_empty() {
            self.touched = list;
        }
    }

    /// When the next queued packet, node wake, application wake, attack or rebind is due.
    fn next_event_time(&self) -> Option<Instant> {
        /// The earlier of two times (either may be missing).
        fn earlier(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
            match (a, b) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, y) => x.or(y),
            }
        }
        let mut t = earlier(self.queue.peek_time(), self.node_wake.earliest());
        t = earlier(t, self.flow_wake.earliest());
        if let Some(a) = &self.attacker {
            t = earlier(t, a.next_at());
        }
        earlier(t, self.net.next_event())
    }

    /// Puts a node's next wake in the queue: its earliest deadline, or while its interface
    /// queue is full (it is not polled then) the moment that queue drains. A deadline already
    /// due fires at this instant again — unless the interface is full: then the deadline is
    /// one that only sending satisfies (a pacing slot), and it waits for the drain, or
    /// virtual time would stand still while the interface is busy.
    fn schedule_node(&mut self, n: usize) {
        let deadline = self.nodes[n].poll_timeout();
        let blocked = self.nic_blocked(n);
        if !blocked && deadline.is_some_and(|d| d <= self.now) {
            self.timeouts_due.push(n as u32);
        }
        let want = if blocked {
            let drained = self.links[self.nic(n)].next_departure();
            match (deadline, drained) {
                (Some(d), Some(q)) if d <= self.now => Some(q),
                (Some(d), Some(q)) => Some(d.min(q)),
                (d, q) => d.or(q),
            }
        } else {
            deadline
        };
        if want != self.node_wake.get(n) {
            self.node_wake.set(n, want);
        }
    }

    /// Puts a flow application's next wake in the queue: its start, its stop, or what the
    /// application itself has due (the next message of a constant-rate source, a deadline).
    fn schedule_flow(&mut self, f: usize) {
        let fl = &self.flows[f];
        let mut want = None::<Instant>;
        let mut consider = |t: Instant| want = Some(want.map_or(t, |w| w.min(t)));
        if !fl.started {
            consider(Self::at(fl.app.spec.start));
        }
        if let (Some(s), false) = (fl.app.spec.stop, fl.stopped) {
            consider(Self::at(s));
        }
        if fl.started && !fl.stopped {
            if let Some(t) = fl.app.next_wake(self.now) {
                consider(t);
            }
        }
        if let Some(t) = self.flow_group[f].and_then(|g| self.groups[g].next_wake()) {
            consider(t.max(self.now));
        }
        if want != self.flow_wake.get(f) {
            self.flow_wake.set(f, want);
        }
    }

    fn finish(
        mut self,
        wall: std::time::Instant,
        cpu: crate::cpu_time::ThreadCpuClock,
        stuck: Option<String>,
    ) -> RunResult {
        self.flush_trace();
        let (mut bad_checksum, mut unknown_connection) = (0, 0);
        for n in &self.nodes {
            bad_checksum += n.stats().bad_checksum;
            unknown_connection += n.stats().unknown_connection;
        }
        for (f, fl) in self.flows.iter_mut().enumerate() {
            let app = &mut fl.app;
            if let Some(c) = fl.client.and_then(|h| self.nodes[2 * f].connection(h)) {
                let s = c.stats();
                app.res.packets_sent = s.packets_sent;
                app.res.packets_lost = s.packets_lost;
                app.res.segments_sent = s.segments_sent;
                app.res.retransmissions = s.retransmissions;
                app.res.repairs_sent = s.fec_repairs_sent + s.coded_repairs_sent;
                if app.res.sender_close.is_none() {
                    if let ConnectionState::Closed(r) = c.state() {
                        app.res.sender_close = Some(r.to_string());
                    }
                }
            }
            app.res.completion_us = app.done_at.map(|d| {
                d.as_micros()
                    .saturating_sub(app.spec.start.as_micros() as u64)
            });
            app.finish_streams();
        }
        RunResult {
            flows: self.flows.into_iter().map(|f| f.app.res).collect(),
            groups: self.groups.into_iter().map(GroupApp::finish).collect(),
            links: self.links.iter().map(|l| l.stats).collect(),
            bad_checksum,
            unknown_connection,
            udp_checksum_drops: self.udp_checksum_drops,
            trace_hash: self.trace.finalize().to_hex().to_string(),
            packets: self.packets,
            virtual_us: self.now.as_micros(),
            wall_secs: wall.elapsed().as_secs_f64(),
            cpu_secs: cpu.elapsed_secs(),
            interval_us: self.cfg.interval.as_micros() as u64,
            stuck,
            attack: self.attacker.map(|a| a.stats),
            net: self
                .cfg
                .topology
                .has_addressing()
                .then(|| self.net.finish()),
        }
    }
}
