//! Addresses at run time: which address a datagram leaves from, which route carries it,
//! who receives it and from what address it is seen — through NAT rebindings.
//!
//! The topology ([`crate::topology`]) gives each node its addresses and each flow its
//! routes, a route per (client address, server address) pair. Here every address a
//! datagram can carry has a small id; a datagram on the wire carries the ids of the source
//! it is seen with and of its destination. A [`Rebind`] gives a node's address a new id
//! (its datagrams are seen with it, and it reaches the node); the old one reaches the node
//! for the rebind's `keep` only, then datagrams to it are dropped at arrival.

use crate::topology::{PathEnds, Rebind, SourceChoice, Topology};
use ctp_proto::Instant;
use std::collections::HashMap;
use std::net::SocketAddr;

/// Counters of the addressing layer (reported when the topology has more than one address
/// per node, one route per flow, or rebinds).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct NetStats {
    /// Rebinds that took effect.
    pub rebinds: u64,
    /// Datagrams to an address a rebind replaced, delivered while the NAT kept it.
    pub stale_delivered: u64,
    /// Datagrams to an address a rebind replaced, dropped on arrival.
    pub stale_dropped: u64,
    /// Datagrams from one of a node's addresses to one of its peer's that no route joins.
    pub no_path: u64,
    /// Datagrams whose endpoint named a source address its node does not own.
    pub foreign_source: u64,
    /// Datagrams delivered, per source address they were seen with: the nodes' own
    /// addresses in node order, then those rebinds gave them.
    pub delivered_from: Vec<AddressCount>,
}

/// Datagrams delivered from one address.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct AddressCount {
    /// The source address as the receiver saw it.
    pub address: SocketAddr,
    /// The node that owns it (`2f` client, `2f + 1` server of flow `f`).
    pub node: usize,
    /// Datagrams delivered.
    pub datagrams: u64,
}

/// A datagram arriving.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// The node that receives it.
    pub node: usize,
    /// The source address it is seen from.
    pub from: SocketAddr,
    /// The node's own address it reached (behind any NAT): what a socket bound to several
    /// addresses reports, and what an endpoint with several paths needs to know.
    pub local: SocketAddr,
}

/// Where a datagram goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routed {
    /// Onto route `route` in direction `dir` (0 client → server), seen from address id
    /// `src`, to address id `dst`.
    Path {
        /// Route index.
        route: u32,
        /// 0 client → server, 1 back.
        dir: u8,
        /// Id of the source address it is seen with.
        src: u16,
        /// Id of its destination.
        dst: u16,
    },
    /// Its destination is no address of the sending node's peer.
    NotPeer,
    /// Both addresses are the flow's, but no route joins them.
    NoPath,
    /// The endpoint named a source address its node does not own.
    ForeignSource,
}

/// One address that can appear on the wire.
struct AddrInfo {
    addr: SocketAddr,
    node: u32,
    /// Index among the node's own addresses.
    index: u16,
    /// Reaches the node only before this (set when a rebind replaced it).
    until: Option<Instant>,
    delivered: u64,
}

/// The addressing state of a run.
pub struct Net {
    addrs: Vec<AddrInfo>,
    ids: HashMap<SocketAddr, u16>,
    /// Per node: its own addresses, as its endpoint knows them.
    own: Vec<Vec<SocketAddr>>,
    /// Per node: the id each of its addresses is seen with now.
    seen: Vec<Vec<u16>>,
    /// Per node: the address its datagrams leave from when its endpoint names none.
    source: Vec<SourceChoice>,
    /// Per node: the next address of [`SourceChoice::Alternate`].
    turn: Vec<usize>,
    /// Per flow: its routes.
    paths: Vec<Vec<PathEnds>>,
    /// Rebinds in time order (stable), how many took effect, and when the next one does.
    rebinds: Vec<Rebind>,
    applied: usize,
    next: Option<Instant>,
    /// The counters.
    pub stats: NetStats,
}

impl Net {
    /// The addressing of `t`: every node's addresses seen as themselves.
    pub fn new(t: &Topology) -> Self {
        let mut net = Net {
            addrs: Vec::new(),
            ids: HashMap::new(),
            own: t.nodes.iter().map(|n| n.addrs.clone()).collect(),
            seen: Vec::new(),
            source: t.nodes.iter().map(|n| n.source).collect(),
            turn: vec![0; t.nodes.len()],
            paths: t.flow_paths.clone(),
            rebinds: t.rebinds.clone(),
            applied: 0,
            next: None,
            stats: NetStats::default(),
        };
        net.rebinds.sort_by_key(|r| r.at);
        net.next = net.rebinds.first().map(|r| r.at);
        for (n, x) in t.nodes.iter().enumerate() {
            let ids = (0..x.addrs.len())
                .map(|i| net.bind(x.addrs[i], n, i))
                .collect();
            net.seen.push(ids);
        }
        net
    }

    /// Makes `addr` reach node `node`'s address `index` (for good); returns its id.
    fn bind(&mut self, addr: SocketAddr, node: usize, index: usize) -> u16 {
        if let Some(&id) = self.ids.get(&addr) {
            let a = &mut self.addrs[id as usize];
            assert_eq!((a.node as usize, a.index as usize), (node, index));
            a.until = None;
            return id;
        }
        let id = u16::try_from(self.addrs.len()).expect("at most 65536 addresses");
        self.addrs.push(AddrInfo {
            addr,
            node: node as u32,
            index: index as u16,
            until: None,
            delivered: 0,
        });
        self.ids.insert(addr, id);
        id
    }

    /// The address node `node`'s primary address is seen with now (what its peer dials).
    pub fn primary(&self, node: usize) -> SocketAddr {
        self.addrs[self.seen[node][0] as usize].addr
    }

    /// When the next rebind takes effect.
    #[inline]
    pub fn next_event(&self) -> Option<Instant> {
        self.next
    }

    /// Applies the rebinds due at `now`.
    #[inline]
    pub fn apply_due(&mut self, now: Instant) {
        if self.next_event().is_some_and(|t| t <= now) {
            self.apply_rebinds(now);
        }
    }

    fn apply_rebinds(&mut self, now: Instant) {
        while let Some(&r) = self.rebinds.get(self.applied).filter(|r| r.at <= now) {
            self.applied += 1;
            self.stats.rebinds += 1;
            let old = self.seen[r.node][r.addr];
            let new = self.bind(r.to, r.node, r.addr);
            if old != new {
                self.addrs[old as usize].until = Some(now + r.keep);
                self.seen[r.node][r.addr] = new;
            }
        }
        self.next = self.rebinds.get(self.applied).map(|r| r.at);
    }

    /// Where a datagram node `node` sends to `dst` goes; `named_src` is the source address
    /// its endpoint chose, if it chose one.
    #[inline]
    pub fn route(&mut self, node: usize, dst: SocketAddr, named_src: Option<SocketAddr>) -> Routed {
        // The common case first: from the node's primary address to its peer's.
        if named_src.is_none() && self.source[node] == SourceChoice::Primary {
            let d = self.seen[node ^ 1][0];
            if self.addrs[d as usize].addr == dst {
                return Routed::Path {
                    route: (node / 2) as u32,
                    dir: (node % 2) as u8,
                    src: self.seen[node][0],
                    dst: d,
                };
            }
        }
        self.route_any(node, dst, named_src)
    }

    /// [`Net::route`] for any source and destination.
    fn route_any(&mut self, node: usize, dst: SocketAddr, named_src: Option<SocketAddr>) -> Routed {
        let peer = node ^ 1;
        let i = match named_src {
            Some(s) => match self.own[node].iter().position(|&a| a == s) {
                Some(i) => i,
                None => {
                    self.stats.foreign_source += 1;
                    return Routed::ForeignSource;
                }
            },
            None => match self.source[node] {
                SourceChoice::Primary => 0,
                SourceChoice::Address(i) => i,
                SourceChoice::Alternate => {
                    let i = self.turn[node];
                    self.turn[node] = (i + 1) % self.own[node].len();
                    i
                }
            },
        };
        let primary = self.seen[peer][0];
        let d = if self.addrs[primary as usize].addr == dst {
            primary
        } else {
            match self.ids.get(&dst) {
                Some(&d) if self.addrs[d as usize].node as usize == peer => d,
                _ => return Routed::NotPeer,
            }
        };
        let j = self.addrs[d as usize].index as usize;
        let server = node % 2;
        let (c, s) = if server == 1 { (j, i) } else { (i, j) };
        let flow = node / 2;
        let route = if (c, s) == (0, 0) {
            flow
        } else {
            match self.paths[flow]
                .iter()
                .find(|p| (p.client, p.server) == (c, s))
            {
                Some(p) => p.route,
                None => {
                    self.stats.no_path += 1;
                    return Routed::NoPath;
                }
            }
        };
        Routed::Path {
            route: route as u32,
            dir: server as u8,
            src: self.seen[node][i],
            dst: d,
        }
    }

    /// A datagram from address id `src` to address id `dst` arrives at `now`: who gets it,
    /// or `None` if its destination no longer reaches anyone (an address a rebind replaced).
    #[inline]
    pub fn deliver(&mut self, now: Instant, src: u16, dst: u16) -> Option<Arrival> {
        let d = &self.addrs[dst as usize];
        let (node, index) = (d.node as usize, d.index as usize);
        if let Some(until) = d.until {
            if now >= until {
                self.stats.stale_dropped += 1;
                return None;
            }
            self.stats.stale_delivered += 1;
        }
        let s = &mut self.addrs[src as usize];
        s.delivered += 1;
        Some(Arrival {
            node,
            from: s.addr,
            local: self.own[node][index],
        })
    }

    /// The counters, with the datagrams delivered per source address.
    pub fn finish(mut self) -> NetStats {
        self.stats.delivered_from = self
            .addrs
            .iter()
            .map(|a| AddressCount {
                address: a.addr,
                node: a.node as usize,
                datagrams: a.delivered,
            })
            .collect();
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::LinkConfig;
    use crate::topology::FlowPlacement;
    use core::time::Duration;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// One flow; its client has a second address with a path of its own to the server.
    fn two_paths() -> Topology {
        let l = LinkConfig::default();
        let mut t = Topology::multipath(
            vec![(l.clone(), l.clone())],
            &[FlowPlacement::default()],
            1_000_000,
        );
        t.add_path(0, a("10.0.0.2:1"), a("10.1.0.0:2000"), l.clone(), l);
        t
    }

    fn path(r: Routed) -> (u32, u8, u16, u16) {
        match r {
            Routed::Path {
                route,
                dir,
                src,
                dst,
            } => (route, dir, src, dst),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sources_pick_routes_and_arrivals_name_both_ends() {
        let mut t = two_paths();
        t.nodes[0].source = SourceChoice::Alternate;
        let mut net = Net::new(&t);
        let server = net.primary(1);
        let (r0, d0, s0, x0) = path(net.route(0, server, None));
        let (r1, _, s1, x1) = path(net.route(0, server, None));
        assert_eq!((r0, d0, r1), (0, 0, 1), "each address in turn");
        assert_eq!(x0, x1);
        let got = net.deliver(Instant::ZERO, s1, x1).unwrap();
        assert_eq!(
            (got.node, got.from, got.local),
            (1, a("10.0.0.2:1"), server)
        );
        // The server answers either address over the path that joins it.
        let (r, d, s, x) = path(net.route(1, a("10.0.0.2:1"), None));
        assert_eq!((r, d), (1, 1));
        let got = net.deliver(Instant::ZERO, s, x).unwrap();
        assert_eq!(
            (got.node, got.from, got.local),
            (0, server, a("10.0.0.2:1"))
        );
        let got = net.deliver(Instant::ZERO, s0, x0).unwrap();
        assert_eq!(got.from, a("10.0.0.0:1000"));
        // Not the peer's; not an address of the node's.
        assert_eq!(net.route(0, a("10.9.9.9:9"), None), Routed::NotPeer);
        assert_eq!(
            net.route(0, server, Some(a("10.9.9.9:9"))),
            Routed::ForeignSource
        );
        assert_eq!(net.stats.foreign_source, 1);
    }

    #[test]
    fn a_rebind_changes_the_source_seen_and_retires_the_old_address_after_keep() {
        let mut t = two_paths();
        let at = Instant::ZERO + Duration::from_secs(1);
        t.rebinds.push(Rebind {
            at,
            node: 0,
            addr: 0,
            to: a("10.0.0.9:4000"),
            keep: Duration::from_millis(10),
        });
        let mut net = Net::new(&t);
        let old = net.primary(0);
        let (_, _, _, to_old) = path(net.route(1, old, None));
        assert_eq!(net.next_event(), Some(at));
        net.apply_due(Instant::ZERO + Duration::from_millis(999));
        assert_eq!(net.primary(0), old, "not yet");
        net.apply_due(at);
        assert_eq!(net.next_event(), None);
        assert_eq!(net.primary(0), a("10.0.0.9:4000"));
        let (_, _, src, dst) = path(net.route(0, net.primary(1), None));
        let got = net.deliver(at, src, dst).unwrap();
        assert_eq!((got.from, got.local), (a("10.0.0.9:4000"), net.primary(1)));
        // The old address still reaches the client for 10 ms, then not.
        let s = net.seen[1][0];
        let kept = net.deliver(at, s, to_old).unwrap();
        assert_eq!((kept.node, kept.local), (0, old));
        assert!(net
            .deliver(at + Duration::from_millis(10), s, to_old)
            .is_none());
        assert_eq!((net.stats.stale_delivered, net.stats.stale_dropped), (1, 1));
        // The old address is still the client's: the server can route to it.
        assert!(matches!(net.route(1, old, None), Routed::Path { .. }));
    }
}
