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

    /// A datagram from address id `src` to address id `dst` arrives at `now`: the node it
    /// reaches and the address it is seen from, or `None` if its destination no longer
    /// reaches anyone (an address a rebind replaced).
    pub fn deliver(&mut self, now: Instant, src: u16, dst: u16) -> Option<(usize, SocketAddr)> {
        let d = &self.addrs[dst as usize];
        let node = d.node as usize;
        if let Some(until) = d.until {
            if now >= until {
                self.stats.stale_dropped += 1;
                return None;
            }
            self.stats.stale_delivered += 1;
        }
        let s = &mut self.addrs[src as usize];
        s.delivered += 1;
        Some((node, s.addr))
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
