//! Topologies: one or more disjoint paths between the senders' side and the receivers' side
//! (a dumbbell when there is one), each flow on one path, with its own access links so that
//! round-trip times differ.
//!
//! Addresses: flow `f`'s client is node `2f`, its server node `2f + 1`. Each node owns one
//! or more addresses ([`NodeNet`]), the first its primary. A flow's first route joins the
//! two primaries across the shared path it was placed on; [`Topology::add_path`] adds
//! further routes, each joining one client address to one server address with links of its
//! own (a path is named by its pair of addresses). [`Rebind`]s change the address a node's
//! datagrams are seen with (NAT rebinding) at a given time; [`Topology::path_down`] takes a
//! route's links down for a while. The simulator's side of all this lives in `crate::net`.
//!
//! Every node reaches the network through an access link of its own that models its network
//! interface: a finite rate (the `nic_bps` of [`Topology::multipath`]) and a short queue.
//! The simulator does not poll an endpoint while its interface queue is full — the
//! back-pressure a blocking socket gives a real sender — so even a protocol without
//! congestion control sends at a finite rate.

use crate::link::LinkConfig;
use core::time::Duration;
use ctp_proto::Instant;
use std::net::SocketAddr;

/// Index of the forward (sender → receiver) link of the first path.
pub const BOTTLENECK_FWD: usize = 0;
/// Index of the reverse (receiver → sender) link of the first path.
pub const BOTTLENECK_REV: usize = 1;
/// Default rate of a node's network interface: 10 Gb/s.
pub const DEFAULT_NIC_BPS: u64 = 10_000_000_000;
/// Packets a node's interface queue holds; the node is not polled while it is full.
pub const NIC_QUEUE_PACKETS: usize = 64;

/// Where one flow runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct FlowPlacement {
    /// Index of the path it uses.
    pub path: usize,
    /// One-way delay of the access link on each side.
    pub access_delay: Duration,
}

/// Which of its addresses a node's datagrams leave from when its endpoint names none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SourceChoice {
    /// Always this one (an index into the node's [`NodeNet::addrs`]; 0 is the primary).
    Address(usize),
    /// Each of the node's addresses in turn, one datagram each: spreads a flow over its
    /// paths before the endpoint schedules paths itself (a testing aid).
    Alternate,
    /// The primary address.
    #[default]
    Primary,
}

/// A node's addresses as its endpoint knows them (behind any NAT).
#[derive(Clone, Debug)]
pub struct NodeNet {
    /// Its addresses, the primary first; every one is unique in the topology.
    pub addrs: Vec<SocketAddr>,
    /// Where its datagrams leave from when the endpoint does not say.
    pub source: SourceChoice,
}

/// One route of a flow: which client and server addresses it joins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathEnds {
    /// Index into the client's [`NodeNet::addrs`].
    pub client: usize,
    /// Index into the server's [`NodeNet::addrs`].
    pub server: usize,
    /// Index into [`Topology::routes`].
    pub route: usize,
}

/// A NAT rebinding: from `at`, node `node`'s address `addr` is seen as `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rebind {
    /// When.
    pub at: Instant,
    /// The node (`2f` client, `2f + 1` server of flow `f`).
    pub node: usize,
    /// Index into the node's [`NodeNet::addrs`].
    pub addr: usize,
    /// The address its datagrams are seen with from then on (and that reaches it).
    pub to: SocketAddr,
    /// How long the address it was seen with before still reaches it (0: not at all).
    pub keep: Duration,
}

/// Links, per-flow routes (lists of link indices) and the nodes' addresses.
#[derive(Clone, Debug)]
pub struct Topology {
    /// Every link direction: the paths first (forward, reverse), then per flow its two
    /// access links (sender side, receiver side), then the links of routes added by
    /// [`Topology::add_path`].
    pub links: Vec<LinkConfig>,
    /// For each route: the forward (client → server) and the reverse link list. Route `f`
    /// is flow `f`'s first route; [`Topology::add_path`] appends the others. The first hop
    /// of each is the sending node's own access link.
    pub routes: Vec<[Vec<usize>; 2]>,
    /// The flow each route belongs to.
    pub route_flow: Vec<usize>,
    /// Number of shared paths.
    pub paths: usize,
    /// Per node (`2f` client, `2f + 1` server of flow `f`): its addresses.
    pub nodes: Vec<NodeNet>,
    /// Per flow: the routes joining its two nodes, its first route first.
    pub flow_paths: Vec<Vec<PathEnds>>,
    /// Address changes, in any order.
    pub rebinds: Vec<Rebind>,
}

/// A node's primary address when the topology names none: `10.0.F.F:1000` for flow `F`'s
/// client, `10.1.F.F:2000` for its server.
pub fn default_addr(flow: usize, server: bool) -> SocketAddr {
    let (net, port) = if server { (1, 2000) } else { (0, 1000) };
    SocketAddr::from(([10, net, (flow >> 8) as u8, flow as u8], port))
}

impl Topology {
    /// A dumbbell: one shared path in both directions, every flow on it; access links of
    /// the given one-way delays and interfaces of [`DEFAULT_NIC_BPS`].
    pub fn dumbbell(fwd: LinkConfig, rev: LinkConfig, access: &[Duration]) -> Self {
        let place: Vec<FlowPlacement> = access
            .iter()
            .map(|&d| FlowPlacement {
                path: 0,
                access_delay: d,
            })
            .collect();
        Self::multipath(vec![(fwd, rev)], &place, DEFAULT_NIC_BPS)
    }

    /// Several disjoint paths (forward, reverse link each); each flow on the path its
    /// placement names (which must exist); interfaces of `nic_bps` bits per second.
    pub fn multipath(
        paths: Vec<(LinkConfig, LinkConfig)>,
        flows: &[FlowPlacement],
        nic_bps: u64,
    ) -> Self {
        let n_paths = paths.len();
        let mut links: Vec<LinkConfig> = paths.into_iter().flat_map(|(f, r)| [f, r]).collect();
        let mut routes = Vec::new();
        for fp in flows {
            assert!(
                fp.path < n_paths,
                "flow placed on path {} of {n_paths}",
                fp.path
            );
            let a = links.len();
            for _ in 0..2 {
                links.push(LinkConfig {
                    delay: fp.access_delay,
                    bandwidth_bps: nic_bps,
                    queue_packets: NIC_QUEUE_PACKETS,
                    ..LinkConfig::default()
                });
            }
            routes.push([vec![a, 2 * fp.path], vec![a + 1, 2 * fp.path + 1]]);
        }
        let n_flows = flows.len();
        let nodes = (0..2 * n_flows)
            .map(|n| NodeNet {
                addrs: vec![default_addr(n / 2, n % 2 == 1)],
                source: SourceChoice::Primary,
            })
            .collect();
        let flow_paths = (0..n_flows)
            .map(|f| {
                vec![PathEnds {
                    client: 0,
                    server: 0,
                    route: f,
                }]
            })
            .collect();
        Topology {
            links,
            routes,
            route_flow: (0..n_flows).collect(),
            paths: n_paths,
            nodes,
            flow_paths,
            rebinds: Vec::new(),
        }
    }

    /// Index of `addr` among node `node`'s addresses, adding it if it is new.
    pub fn add_address(&mut self, node: usize, addr: SocketAddr) -> usize {
        let addrs = &mut self.nodes[node].addrs;
        match addrs.iter().position(|&a| a == addr) {
            Some(i) => i,
            None => {
                addrs.push(addr);
                addrs.len() - 1
            }
        }
    }

    /// A further route of `flow` between its client's address `client` and its server's
    /// address `server` (added to the nodes if new), over links of its own: `fwd` from
    /// client to server, `rev` back, each behind the sending node's access link. Returns
    /// the route's index. Panics if the flow has a route between those addresses already.
    pub fn add_path(
        &mut self,
        flow: usize,
        client: SocketAddr,
        server: SocketAddr,
        fwd: LinkConfig,
        rev: LinkConfig,
    ) -> usize {
        let ends = PathEnds {
            client: self.add_address(2 * flow, client),
            server: self.add_address(2 * flow + 1, server),
            route: self.routes.len(),
        };
        assert!(
            !self.flow_paths[flow]
                .iter()
                .any(|p| (p.client, p.server) == (ends.client, ends.server)),
            "flow {flow} has a path from {client} to {server} already"
        );
        let l = self.links.len();
        self.links.extend([fwd, rev]);
        let [f0, r0] = [self.routes[flow][0][0], self.routes[flow][1][0]];
        self.routes.push([vec![f0, l], vec![r0, l + 1]]);
        self.route_flow.push(flow);
        self.flow_paths[flow].push(ends);
        ends.route
    }

    /// Takes route `route` down in both directions from `from` until `until`: every link it
    /// crosses beyond the nodes' access links drops what it is offered then (for a flow's
    /// first route that is a shared path, down for every flow on it).
    pub fn path_down(&mut self, route: usize, from: Instant, until: Instant) {
        for dir in &self.routes[route] {
            for &l in &dir[1..] {
                self.links[l].down.push((from, until));
            }
        }
    }

    /// True if anything is configured beyond one address per node and one route per flow.
    pub fn has_addressing(&self) -> bool {
        self.routes.len() > self.flow_paths.len()
            || !self.rebinds.is_empty()
            || self.nodes.iter().enumerate().any(|(n, x)| {
                x.addrs != [default_addr(n / 2, n % 2 == 1)] || x.source != SourceChoice::Primary
            })
    }

    /// Checks that no address belongs to two nodes, that rebinds name existing nodes and
    /// addresses and do not take another node's address, and that every source choice names
    /// an existing address.
    pub fn check_addressing(&self) -> Result<(), String> {
        let mut owner = std::collections::HashMap::new();
        for (n, x) in self.nodes.iter().enumerate() {
            for (i, &a) in x.addrs.iter().enumerate() {
                if let Some((m, _)) = owner.insert(a, (n, i)) {
                    return Err(format!("address {a} given twice (nodes {m} and {n})"));
                }
            }
            if let SourceChoice::Address(i) = x.source {
                if i >= x.addrs.len() {
                    return Err(format!("node {n} has no address {i}"));
                }
            }
        }
        for r in &self.rebinds {
            let Some(x) = self.nodes.get(r.node) else {
                return Err(format!("rebind of node {}: no such node", r.node));
            };
            if r.addr >= x.addrs.len() {
                return Err(format!("rebind of node {}: no address {}", r.node, r.addr));
            }
            if owner.get(&r.to).is_some_and(|&o| o != (r.node, r.addr)) {
                return Err(format!("rebind to {}: an address in use", r.to));
            }
            owner.insert(r.to, (r.node, r.addr));
        }
        Ok(())
    }

    /// Propagation round-trip time of a flow (no queueing, no serialisation).
    pub fn propagation_rtt(&self, flow: usize) -> Duration {
        self.routes[flow]
            .iter()
            .flatten()
            .map(|&l| self.links[l].delay)
            .sum()
    }

    /// The forward link of the path `flow` uses (its bottleneck).
    pub fn path_link(&self, flow: usize) -> usize {
        self.routes[flow][0][1]
    }
}
