//! An adversarial third party: a node that injects datagrams into the flows' endpoints at
//! random moments.
//!
//! Three kinds, from weakest to strongest:
//! - **off-path** ([`AttackMode::OffPath`]): knows the endpoints' addresses but sees no
//!   traffic. It sends random garbage and blind guesses at packets (a plausible header with
//!   a random connection id, a handshake packet with a valid trailer — anyone can compute a
//!   CRC), from the real peer's address (spoofed) and from other ones (its own, another
//!   flow's, impossible ones such as port 0 or broadcast).
//! - **on-path observer** ([`AttackMode::Observer`]): also sees the datagrams crossing the
//!   links it taps, keeps a sample of them, and injects replays (unchanged copies, long
//!   after) and mutated copies (bit flips, truncation, extension, header bytes changed)
//!   without fixing their integrity trailer. (Copies of UDT4-wire datagrams are only
//!   replayed: that wire has no integrity check, so a mutated copy would be a forgery.)
//! - **forger** ([`AttackMode::Forger`]): an observer that recomputes the integrity trailer
//!   of every mutated copy. The trailer is a CRC32C, not a MAC: even the whole packet and
//!   segment numbers it covers (a pseudo-header never sent) are no obstacle, as the CRC
//!   register can be run backwards over the packet from its trailer to the state after the
//!   pseudo-header. ctp has no authentication yet; against a forger it can only promise to
//!   stay within its limits and to end every connection.
//!
//! The attacker draws from its own random stream (seeded apart from the world's), so a run
//! without one has exactly the trace it had before attackers existed.

use crate::loss::uniform;
use core::time::Duration;
use ctp_proto::udt::WireFormat;
use ctp_proto::Instant;
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};
use serde::Serialize;
use std::net::SocketAddr;

/// How much the attacker knows and can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum AttackMode {
    /// Knows the addresses, sees nothing.
    OffPath,
    /// Sees the datagrams on the links it taps; replays and mutates them.
    Observer,
    /// An observer that gives mutated copies a valid integrity trailer.
    Forger,
}

/// An attacker's configuration.
#[derive(Clone, Debug)]
pub struct AttackConfig {
    /// What it knows and does.
    pub mode: AttackMode,
    /// Seed of its own random stream.
    pub seed: u64,
    /// Mean time between bursts (exponentially distributed gaps).
    pub mean_gap: Duration,
    /// Most datagrams per burst (at least one).
    pub burst: u32,
    /// No attack after this moment.
    pub until: Duration,
    /// Most datagrams injected in the whole run.
    pub max_injections: u64,
    /// Links whose datagrams it sees (on-path modes; topology indices).
    pub tap: Vec<usize>,
}

/// What the attacker did.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct AttackStats {
    /// Datagrams injected in all.
    pub injected: u64,
    /// Random or blindly guessed datagrams.
    pub garbage: u64,
    /// Mutated copies of observed datagrams.
    pub mutated: u64,
    /// Of those, given a valid integrity trailer.
    pub forged: u64,
    /// Unchanged copies of observed datagrams, sent later.
    pub replayed: u64,
    /// Injected with the real peer's address as their source.
    pub spoofed: u64,
    /// Datagrams seen on the tapped links.
    pub observed: u64,
    /// Datagrams endpoints sent to an address that was not their peer's (replies to the
    /// attacker's sources).
    pub replies: u64,
}

/// One datagram to deliver: to node `node`, from `from`.
pub struct Injection {
    /// Receiving node (`2f` sender, `2f + 1` receiver of flow `f`).
    pub node: usize,
    /// Source address it claims.
    pub from: SocketAddr,
    /// The datagram.
    pub bytes: Vec<u8>,
}

/// A copy of a datagram seen on a tapped link.
struct Seen {
    flow: usize,
    dir: usize,
    bytes: Vec<u8>,
}

/// Observed datagrams kept (a uniform sample of everything seen: old ones stay likely).
const KEEP: usize = 256;

/// The attacker's state during a run.
pub struct Attacker {
    cfg: AttackConfig,
    rng: ChaCha8Rng,
    next: Option<Instant>,
    seen: Vec<Seen>,
    tapped: Vec<bool>,
    /// Per flow: (wire, sender address, receiver address).
    flows: Vec<(WireFormat, SocketAddr, SocketAddr)>,
    /// Counters.
    pub stats: AttackStats,
}

impl Attacker {
    /// An attacker of flows given as (wire, sender address, receiver address).
    pub fn new(
        cfg: AttackConfig,
        flows: Vec<(WireFormat, SocketAddr, SocketAddr)>,
        n_links: usize,
    ) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0xA77A_C4ED_0BAD_F00D);
        let mut tapped = vec![false; n_links];
        if cfg.mode != AttackMode::OffPath {
            for &l in &cfg.tap {
                if l < n_links {
                    tapped[l] = true;
                }
            }
        }
        let first = Instant::ZERO + exp_gap(&mut rng, cfg.mean_gap);
        let next = (first <= Instant::ZERO + cfg.until && !flows.is_empty()).then_some(first);
        Attacker {
            cfg,
            rng,
            next,
            seen: Vec::new(),
            tapped,
            flows,
            stats: AttackStats::default(),
        }
    }

    /// When the next burst is due.
    pub fn next_at(&self) -> Option<Instant> {
        self.next
    }

    /// True when it sees the datagrams carried by link `l`.
    pub fn taps(&self, l: usize) -> bool {
        self.tapped.get(l).copied().unwrap_or(false)
    }

    /// A datagram of flow `flow` in direction `dir` crossed a tapped link.
    pub fn observe(&mut self, flow: usize, dir: usize, bytes: &[u8]) {
        self.stats.observed += 1;
        let n = self.stats.observed;
        let slot = if self.seen.len() < KEEP {
            self.seen.len()
        } else {
            let j = (self.rng.next_u64() % n) as usize;
            if j >= KEEP {
                return;
            }
            j
        };
        let s = Seen {
            flow,
            dir,
            bytes: bytes.to_vec(),
        };
        if slot == self.seen.len() {
            self.seen.push(s);
        } else {
            self.seen[slot] = s;
        }
    }

    /// The burst due at `now` (empty if none), and the next one scheduled.
    pub fn fire(&mut self, now: Instant, out: &mut Vec<Injection>) {
        if self.next.is_none_or(|t| t > now) {
            return;
        }
        let k = 1 + self.rng.next_u64() % u64::from(self.cfg.burst.max(1));
        for _ in 0..k {
            if self.stats.injected >= self.cfg.max_injections {
                break;
            }
            let inj = self.one();
            self.stats.injected += 1;
            out.push(inj);
        }
        let t = now + exp_gap(&mut self.rng, self.cfg.mean_gap).max(Duration::from_micros(1));
        self.next = (t <= Instant::ZERO + self.cfg.until
            && self.stats.injected < self.cfg.max_injections)
            .then_some(t);
    }

    fn one(&mut self) -> Injection {
        let copy = self.cfg.mode != AttackMode::OffPath
            && !self.seen.is_empty()
            && !self.rng.next_u64().is_multiple_of(4);
        if !copy {
            return self.garbage();
        }
        let i = (self.rng.next_u64() % self.seen.len() as u64) as usize;
        let (flow, dir) = (self.seen[i].flow, self.seen[i].dir);
        let wire = self.flows[flow].0;
        let mut bytes = self.seen[i].bytes.clone();
        // Usually to where the copy was going; sometimes back to its sender.
        let to_receiver = (dir == 0) != self.rng.next_u64().is_multiple_of(5);
        let mutate = !self.rng.next_u64().is_multiple_of(3)
            && (wire == WireFormat::Ctp || self.cfg.mode == AttackMode::Forger);
        if mutate {
            let orig = bytes.clone();
            self.mutate(&mut bytes);
            self.stats.mutated += 1;
            if self.cfg.mode == AttackMode::Forger && wire == WireFormat::Ctp {
                forge_trailer(&orig, &mut bytes);
                self.stats.forged += 1;
            } else if wire == WireFormat::Udt4 {
                self.stats.forged += 1;
            }
        } else {
            self.stats.replayed += 1;
        }
        let from = self.source(flow, to_receiver);
        Injection {
            node: 2 * flow + usize::from(to_receiver),
            from,
            bytes,
        }
    }

    /// The source of a datagram to flow `flow`'s receiver (or sender): mostly the real peer's
    /// address, otherwise another.
    fn source(&mut self, flow: usize, to_receiver: bool) -> SocketAddr {
        let (_, s, r) = self.flows[flow];
        if self.rng.next_u64() % 10 < 7 {
            self.stats.spoofed += 1;
            return if to_receiver { s } else { r };
        }
        let r64 = self.rng.next_u64();
        let port = (r64 >> 16) as u16;
        match r64 % 6 {
            0 => {
                // Another flow's endpoint (or this flow's other side).
                let f = (r64 >> 40) as usize % self.flows.len();
                if (r64 >> 48) & 1 == 0 {
                    self.flows[f].1
                } else {
                    self.flows[f].2
                }
            }
            // The right host, another port.
            1 => {
                let a = if to_receiver { s } else { r };
                SocketAddr::new(a.ip(), port | 1)
            }
            // Impossible sources: they must be dropped before any reply.
            2 => SocketAddr::from(([0, 0, 0, 0], port)),
            3 => match (r64 >> 8) % 3 {
                0 => SocketAddr::from(([255, 255, 255, 255], port)),
                1 => SocketAddr::from(([224, 0, 0, 1], port)),
                _ => SocketAddr::from(([10, 66, 0, 1], 0)),
            },
            // The attacker's own addresses.
            _ => SocketAddr::from(([10, 66, (r64 >> 24) as u8, (r64 >> 32) as u8], port | 1)),
        }
    }

    /// Random bytes, or a blind guess at a packet of the target's wire format.
    fn garbage(&mut self) -> Injection {
        self.stats.garbage += 1;
        let flow = (self.rng.next_u64() % self.flows.len() as u64) as usize;
        let to_receiver = self.rng.next_u64().is_multiple_of(2);
        let wire = self.flows[flow].0;
        let len = match self.rng.next_u64() % 4 {
            0 => (self.rng.next_u64() % 24) as usize,
            1 => 1200 + (self.rng.next_u64() % 400) as usize,
            _ => (self.rng.next_u64() % 1500) as usize,
        };
        let mut b = vec![0u8; len];
        self.rng.fill_bytes(&mut b);
        if !b.is_empty() {
            match (wire, self.rng.next_u64() % 3) {
                (_, 0) => {} // pure noise
                (WireFormat::Ctp, 1) => {
                    // A short header with a random connection id and some trailer.
                    b[0] = 0x40;
                }
                (WireFormat::Ctp, _) => {
                    // A handshake packet of a random kind, version right, trailer valid.
                    b[0] = 0xC0 | (self.rng.next_u64() % 5) as u8;
                    if b.len() >= 5 {
                        b[1..5].copy_from_slice(&ctp_proto::wire::header::VERSION.to_be_bytes());
                    }
                    if b.len() >= 8 {
                        b.truncate(b.len() - 4);
                        let crc = crc32c::crc32c(&b);
                        b.extend_from_slice(&crc.to_be_bytes());
                    }
                }
                (WireFormat::Udt4, 1) => {
                    // A control packet (type in the high half), random socket id.
                    b[0] = 0x80;
                    if b.len() >= 2 {
                        b[1] = (self.rng.next_u64() % 8) as u8;
                    }
                }
                (WireFormat::Udt4, _) => {
                    // A data packet: sequence number's top bit clear.
                    b[0] &= 0x7f;
                }
            }
        }
        let from = self.source(flow, to_receiver);
        Injection {
            node: 2 * flow + usize::from(to_receiver),
            from,
            bytes: b,
        }
    }

    /// Changes a copy: bit flips, truncation, extension, header bytes overwritten.
    fn mutate(&mut self, b: &mut Vec<u8>) {
        let kinds = 1 + self.rng.next_u64() % 2;
        for _ in 0..kinds {
            match self.rng.next_u64() % 4 {
                0 if !b.is_empty() => {
                    for _ in 0..1 + self.rng.next_u64() % 8 {
                        let i = (self.rng.next_u64() % b.len() as u64) as usize;
                        b[i] ^= 1 << (self.rng.next_u64() % 8);
                    }
                }
                1 if !b.is_empty() => {
                    let n = (self.rng.next_u64() % b.len() as u64) as usize;
                    b.truncate(n);
                }
                2 => {
                    let extra = 1 + (self.rng.next_u64() % 64) as usize;
                    for _ in 0..extra {
                        b.push(self.rng.next_u64() as u8);
                    }
                }
                _ if !b.is_empty() => {
                    // A header field: one of the first 24 bytes set to a random or an
                    // extreme value.
                    let i = (self.rng.next_u64() % b.len().min(24) as u64) as usize;
                    b[i] = match self.rng.next_u64() % 3 {
                        0 => 0,
                        1 => 0xff,
                        _ => self.rng.next_u64() as u8,
                    };
                }
                _ => b.push(0),
            }
        }
    }
}

fn exp_gap(rng: &mut ChaCha8Rng, mean: Duration) -> Duration {
    let u = uniform(rng).max(1e-12);
    Duration::from_secs_f64((-u.ln() * mean.as_secs_f64()).min(1e6))
}

/// CRC32C (Castagnoli), reflected polynomial.
const POLY: u32 = 0x82F6_3B78;

const fn table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

const TABLE: [u32; 256] = table();

/// Index of the table entry with a given top byte (the top bytes are a permutation).
const fn inverse() -> [u8; 256] {
    let mut inv = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        inv[(TABLE[i] >> 24) as usize] = i as u8;
        i += 1;
    }
    inv
}

const INVERSE: [u8; 256] = inverse();

/// The CRC32C value before `data` was appended, given the value after (`crc32c_append`
/// run backwards).
pub fn crc32c_unappend(after: u32, data: &[u8]) -> u32 {
    let mut reg = !after;
    for &b in data.iter().rev() {
        let idx = INVERSE[(reg >> 24) as usize];
        let hi = (reg ^ TABLE[idx as usize]) << 8;
        reg = hi | u32::from(idx ^ b);
    }
    !reg
}

/// Gives `forged` (an altered copy of the sealed native datagram `orig`) a trailer the
/// receiver accepts: the CRC of the pseudo-header `orig` was sealed with is recovered by
/// running its trailer backwards over its body, then carried on over the forgery's body.
/// (A handshake packet's trailer covers the packet alone.) Forgeries that change the
/// packet's numbers still fail: the receiver's pseudo-header differs then.
pub fn forge_trailer(orig: &[u8], forged: &mut [u8]) {
    const T: usize = 4;
    if orig.len() < T || forged.len() < T {
        return;
    }
    let (body, t) = orig.split_at(orig.len() - T);
    let trailer = u32::from_be_bytes([t[0], t[1], t[2], t[3]]);
    let long = |b: &[u8]| b.first().is_some_and(|&x| x & 0x80 != 0);
    let pseudo = if long(body) {
        0
    } else {
        crc32c_unappend(trailer, body)
    };
    let n = forged.len() - T;
    let start = if long(&forged[..n]) { 0 } else { pseudo };
    let crc = crc32c::crc32c_append(start, &forged[..n]);
    forged[n..].copy_from_slice(&crc.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_runs_backwards() {
        let pseudo = [1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16];
        let body = b"a short packet with frames in it";
        let p = crc32c::crc32c(&pseudo);
        let all = crc32c::crc32c_append(p, body);
        assert_eq!(crc32c_unappend(all, body), p);
        assert_eq!(crc32c_unappend(crc32c::crc32c(body), body), 0);
    }

    #[test]
    fn forged_trailer_matches_the_hidden_pseudo_header() {
        let pseudo = 0xDEAD_BEEF_0000_0042u64.to_be_bytes();
        let mut orig = vec![0x40u8, 9, 9, 9, 9, 7, 1, 2, 3, 4, 5];
        let crc = crc32c::crc32c_append(crc32c::crc32c(&pseudo), &orig);
        orig.extend_from_slice(&crc.to_be_bytes());
        let mut f = orig.clone();
        f[8] ^= 0x20;
        f.insert(9, 0x77);
        forge_trailer(&orig, &mut f);
        let n = f.len() - 4;
        let want = crc32c::crc32c_append(crc32c::crc32c(&pseudo), &f[..n]);
        assert_eq!(f[n..], want.to_be_bytes());
    }
}
