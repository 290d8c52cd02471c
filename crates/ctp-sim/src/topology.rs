//! Topologies: a dumbbell (N senders → one bottleneck → N receivers), each flow with its own
//! access delay so that round-trip times differ.

use crate::link::LinkConfig;
use core::time::Duration;

/// Index of the forward (sender → receiver) bottleneck link.
pub const BOTTLENECK_FWD: usize = 0;
/// Index of the reverse (receiver → sender) bottleneck link.
pub const BOTTLENECK_REV: usize = 1;

/// Links and per-flow routes (lists of link indices).
#[derive(Clone, Debug)]
pub struct Topology {
    /// Every link direction.
    pub links: Vec<LinkConfig>,
    /// For each flow: the forward route and the reverse route.
    pub routes: Vec<[Vec<usize>; 2]>,
}

impl Topology {
    /// A dumbbell: the shared bottleneck in both directions, and per flow an access link
    /// (infinitely fast, no impairment) of the given one-way delay on each side.
    pub fn dumbbell(fwd: LinkConfig, rev: LinkConfig, access: &[Duration]) -> Self {
        let mut links = vec![fwd, rev];
        let mut routes = Vec::new();
        for &d in access {
            let a = links.len();
            for _ in 0..2 {
                links.push(LinkConfig {
                    delay: d,
                    ..LinkConfig::default()
                });
            }
            routes.push([vec![a, BOTTLENECK_FWD], vec![BOTTLENECK_REV, a + 1]]);
        }
        Topology { links, routes }
    }

    /// Propagation round-trip time of a flow (no queueing, no serialisation).
    pub fn propagation_rtt(&self, flow: usize) -> Duration {
        self.routes[flow]
            .iter()
            .flatten()
            .map(|&l| self.links[l].delay)
            .sum()
    }
}
