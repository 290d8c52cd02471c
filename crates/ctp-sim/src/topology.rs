//! Topologies: one or more disjoint paths between the senders' side and the receivers' side
//! (a dumbbell when there is one), each flow on one path, with its own access links so that
//! round-trip times differ.
//!
//! Every node reaches the network through an access link of its own that models its network
//! interface: a finite rate (the `nic_bps` of [`Topology::multipath`]) and a short queue.
//! The simulator does not poll an endpoint while its interface queue is full — the
//! back-pressure a blocking socket gives a real sender — so even a protocol without
//! congestion control sends at a finite rate.

use crate::link::LinkConfig;
use core::time::Duration;

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

/// Links and per-flow routes (lists of link indices).
#[derive(Clone, Debug)]
pub struct Topology {
    /// Every link direction: the paths first (forward, reverse), then per flow its two
    /// access links (sender side, receiver side).
    pub links: Vec<LinkConfig>,
    /// For each flow: the forward route and the reverse route. The first hop of each is
    /// the sending node's own access link.
    pub routes: Vec<[Vec<usize>; 2]>,
    /// Number of paths.
    pub paths: usize,
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
        Topology {
            links,
            routes,
            paths: n_paths,
        }
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
