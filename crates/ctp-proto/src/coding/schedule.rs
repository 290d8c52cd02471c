//! CTCP's sender loop over one or several paths: which block the next coded packet belongs
//! to, on which path, and whether it is a source or a repair symbol (Algorithms 3 and 4),
//! with each path's round trip, loss estimate (Algorithm 1) and tokens (Algorithm 2).
//!
//! Sans-IO: nothing here reads a clock or touches a socket. The caller opens blocks as data
//! comes ([`Scheduler::open_block`]), asks [`Scheduler::next`] for a packet whenever a path
//! could send (it answers `None` when the path has no token, or when no block needs what the
//! path would add: the token is then kept for later, as the paper's sender does), reports
//! the receiver's acknowledgements ([`Scheduler::on_ack`]) and calls
//! [`Scheduler::on_timer`] by [`Scheduler::poll_timeout`].
//!
//! # Per path
//!
//! Each path has its own sequence numbers and [`LossEstimator`] (p, p_long, p_stdlong and
//! the redundancy `R = 1/(1−p̂)`), its smoothed round trip (`RTT ← (1−g)·RTT + g·rtt`,
//! g = 1/8) and retransmission timeout `RTO = γ·RTT` (γ = 2, within
//! `[min_rto, max_rto]`), and its own congestion controller (by default
//! [`ctp_cc::ctcp::Ctcp`], the paper's tokens). A packet takes a token; its
//! acknowledgement, or a later acknowledgement that declares it lost, returns it. No ACK
//! for an RTO while packets are out is a timeout (Algorithm 2): RTO doubles, the tokens
//! restart, and everything the path had out is forgotten — so the blocks it carried count
//! on other paths again. After `fail_after` timeouts in a row the path is *failed*: it is
//! left out of every estimate and carries one probe packet per RTO (backed off to
//! `max_rto`); an acknowledgement on it brings it back (in slow start). The caller may fail
//! a path itself ([`Scheduler::fail_path`], an interface gone down).
//!
//! # Which block (Algorithm 4; with one path it is Algorithm 3)
//!
//! For every path `k` that is up, with `w_k = 1/R_k` the share of its packets expected to
//! arrive and `n_k` its packets out:
//!
//! ```text
//! thru = Σ w_k·n_k / RTT_k        expected delivery rate of the connection
//! sent = Σ w_k·n_k                packets out that will arrive
//! cof_b = Σ w_k·(packets of block b sent by k less than 1.5·RTT_k ago)
//! ```
//!
//! Packets older than 1.5 RTT are likely lost or badly late and count for nothing. Then,
//! for the path `i` asking, blocks in order from `currblk`:
//!
//! - `currblk` is sent from when `max(0, thru·RTT_i − sent) + cof'_currblk < missing +
//!   margin`, `missing = k − currdof`. `thru·RTT_i − sent` is what the other paths will
//!   deliver beyond what is out within one round trip of path `i`: a path slower than the
//!   rest leaves the current block to faster ones. `cof'` counts only the packets expected
//!   to arrive no later than one sent now on path `i` would (sent at `T` on path `k`:
//!   `T + RTT_k/2 ≤ now + RTT_i/2`), so a faster path tops the current block up instead of
//!   waiting for a slow path's packets: a slow path never stalls a block. With one path the
//!   rule is Algorithm 3's `(1−p)·onfly < k − currdof`.
//!
//!   Deviation: the paper adds `thru·RTT_i − sent` unfloored, so a path faster than the
//!   others (negative term) sends that many packets beyond the block's need. Measured in
//!   this module's model that tripled the repairs on two *equal* paths (queueing makes
//!   their RTTs differ a little all the time) and sent a fast path's whole window into one
//!   block beside a path six times slower; the arrival-time test above gets the intent (do
//!   not wait for the slow path) at the cost of only the slow path's share of the block.
//! - a later block `b` is sent from when `cof_b + known_b < k_b + margin` (Algorithm 3's
//!   `(1−p)·onfly < k`, counting its packets already acknowledged: see [`super::blocks`]).
//!
//! `margin = margin_sd·√(missing·p̂_i)` allows for the spread of the losses around their
//! mean so that a block usually decodes without waiting a round trip for its last symbol
//! (the paper sends for the mean alone: `margin_sd = 0`). The first block that passes gets
//! the packet; its next symbol is a source symbol until all `k` left, a repair after.
//!
//! Where the paper's listings are read here (the extracted text is ambiguous): the current
//! block is sent from only by its own rule (not also by the later blocks' `cof < k`); the
//! staleness test is `now < T(seqno) + 1.5·RTT` in both listings (Algorithm 4's text shows
//! the comparison reversed, which would count only the stale packets).

use super::blocks::{BlockError, BlockWindow, Symbol};
use super::loss::{AckOutcome, LossEstimator, LossParams};
use core::time::Duration;
use ctp_cc::{AnyCc, CcKind, CongestionControl, Instant};
use std::collections::{BTreeMap, VecDeque};

/// The scheduler's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScheduleConfig {
    /// Blocks open at once (the paper's `numblks`).
    pub max_blocks: usize,
    /// Congestion controller of every path.
    pub cc: CcKind,
    /// Its configuration (`mss`: the size every coded packet is counted at).
    pub cc_config: ctp_cc::Config,
    /// Loss estimator parameters of every path.
    pub loss: LossParams,
    /// A packet older than `stale_rtts` round trips is left out of a block's expected
    /// arrivals (the paper: 1.5; at least 1).
    pub stale_rtts: f64,
    /// RTO = `rto_rtts` × RTT (the paper's γ > 1).
    pub rto_rtts: f64,
    /// Smallest RTO.
    pub min_rto: Duration,
    /// Largest RTO (backoff stops there; a failed path is probed this often at least).
    pub max_rto: Duration,
    /// Round trip assumed before the first sample (the paper's "predefined default").
    pub initial_rtt: Duration,
    /// Timeouts in a row that fail a path.
    pub fail_after: u32,
    /// Safety margin of a block, in standard deviations of its losses (0: the paper's mean).
    pub margin_sd: f64,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        ScheduleConfig {
            max_blocks: 4,
            cc: CcKind::Ctcp,
            cc_config: ctp_cc::Config::default(),
            loss: LossParams::default(),
            stale_rtts: 1.5,
            rto_rtts: 2.0,
            min_rto: Duration::from_millis(50),
            max_rto: Duration::from_secs(2),
            initial_rtt: Duration::from_millis(100),
            fail_after: 3,
            margin_sd: 1.0,
        }
    }
}

/// The shortfall of a block's expected arrivals below its missing dofs, in packets, that
/// is worth a packet: below it the block is left as it is (a block of one segment on a
/// path that lost 0.1 % expects 0.999 arrivals, and a repair for that would double it).
const MIN_DEFICIT: f64 = 0.25;

/// A path's number, in the order [`Scheduler::add_path`] gave them.
pub type PathId = usize;

/// Whether a path carries data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathState {
    /// In use.
    Up,
    /// Failed: one probe at a time until an acknowledgement brings it back.
    Failed,
}

/// One coded packet to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Path it goes on.
    pub path: PathId,
    /// Its sequence number on that path.
    pub seqno: u64,
    /// Block it is a symbol of.
    pub block: u64,
    /// Source or repair symbol.
    pub symbol: Symbol,
}

/// An acknowledgement from the receiver (one per packet received).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DofAck {
    /// Sequence number of the packet acknowledged (on the path the ACK is for).
    pub seqno: u64,
    /// The receiver's oldest undecoded block (`ack_currblk`).
    pub current_block: u64,
    /// Dofs the receiver holds of that block (`ack_currdof`).
    pub current_dofs: u32,
    /// How long the receiver held the acknowledgement before sending it: taken out of the
    /// round-trip sample, as QUIC does, unless that would take it below the path's minimum.
    pub ack_delay: Duration,
}

/// A path's figures.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PathStats {
    /// Up or failed.
    pub state: PathState,
    /// Smoothed round trip (`None` before the first sample).
    pub srtt: Option<Duration>,
    /// Current retransmission timeout.
    pub rto: Duration,
    /// The controller's window, packets.
    pub window: u64,
    /// Packets out.
    pub in_flight: u64,
    /// Short- and long-term loss estimates.
    pub p: f64,
    /// Long-term loss estimate.
    pub p_long: f64,
    /// Redundancy the path's loss calls for.
    pub redundancy: f64,
    /// Packets sent, acknowledged, declared lost.
    pub sent: u64,
    /// Packets acknowledged.
    pub acked: u64,
    /// Packets declared lost (timeouts excluded).
    pub lost: u64,
    /// Timeouts.
    pub timeouts: u64,
}

#[derive(Clone, Copy, Debug)]
struct Flight {
    block: u64,
    sent_at: Instant,
}

/// A path's packets out, in the order sent, and how many of each block are *fresh* (sent
/// less than `stale_rtts` round trips ago): counted as they are sent, resolved and grow
/// stale, so that choosing a packet's block looks at the open blocks, not at every packet
/// out (a scan of a thousand packets three times per packet took 40 % of a sender's CPU
/// at 200 Mb/s and 60 ms).
#[derive(Debug, Default)]
struct Flights {
    /// Packets `loss.seqno_una() ..` in order.
    queue: VecDeque<Flight>,
    /// The first `stale` packets of the queue are stale.
    stale: usize,
    /// Fresh packets per block.
    fresh: BTreeMap<u64, u32>,
}

impl Flights {
    fn len(&self) -> usize {
        self.queue.len()
    }

    fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    fn front(&self) -> Option<&Flight> {
        self.queue.front()
    }

    fn get(&self, i: usize) -> Option<&Flight> {
        self.queue.get(i)
    }

    fn count(&mut self, block: u64, up: bool) {
        let c = self.fresh.entry(block).or_insert(0);
        if up {
            *c += 1;
        } else {
            *c = c.saturating_sub(1);
            if *c == 0 {
                self.fresh.remove(&block);
            }
        }
    }

    fn push(&mut self, f: Flight) {
        self.queue.push_back(f);
        self.count(f.block, true);
    }

    fn pop_front(&mut self) -> Option<Flight> {
        let f = self.queue.pop_front()?;
        if self.stale > 0 {
            self.stale -= 1;
        } else {
            self.count(f.block, false);
        }
        Some(f)
    }

    fn drop_front(&mut self, n: usize) {
        for _ in 0..n {
            self.pop_front();
        }
    }

    fn clear(&mut self) {
        *self = Flights::default();
    }

    /// Moves the line between stale and fresh packets to `now − fresh_for` (either way:
    /// a round trip that grew makes packets fresh again).
    fn age(&mut self, now: Instant, fresh_for: Duration) {
        let is_stale = |f: &Flight| f.sent_at + fresh_for <= now;
        while let Some(&f) = self.queue.get(self.stale).filter(|f| is_stale(f)) {
            self.count(f.block, false);
            self.stale += 1;
        }
        while let Some(&f) = self
            .stale
            .checked_sub(1)
            .and_then(|i| self.queue.get(i))
            .filter(|f| !is_stale(f))
        {
            self.count(f.block, true);
            self.stale -= 1;
        }
    }

    /// Fresh packets of `block`.
    fn fresh_of(&self, block: u64) -> u32 {
        self.fresh.get(&block).copied().unwrap_or(0)
    }

    /// Fresh packets of `block` sent at or before `by`: the block's fresh count less its
    /// packets sent after `by`, counted from the newest back (`by` is a little before now,
    /// so few are).
    fn fresh_of_sent_by(&self, block: u64, by: Instant) -> u32 {
        let later = self
            .queue
            .range(self.stale..)
            .rev()
            .take_while(|f| f.sent_at > by)
            .filter(|f| f.block == block)
            .count() as u32;
        self.fresh_of(block).saturating_sub(later)
    }
}

#[derive(Debug)]
struct Path {
    cc: AnyCc,
    loss: LossEstimator,
    /// Packets `loss.seqno_una() ..` in order.
    flights: Flights,
    srtt_us: Option<u64>,
    min_rtt_us: u64,
    rto_us: u64,
    last_ack: Instant,
    timeouts_in_row: u32,
    state: PathState,
    sent: u64,
    timeouts: u64,
}

impl Path {
    fn rtt_us(&self, cfg: &ScheduleConfig) -> u64 {
        self.srtt_us
            .unwrap_or(cfg.initial_rtt.as_micros() as u64)
            .max(1)
    }

    fn window_packets(&self, mss: u64) -> u64 {
        self.cc.cwnd() / mss
    }

    /// When the path times out if nothing comes back (`None`: nothing out).
    fn deadline(&self) -> Option<Instant> {
        let oldest = self.flights.front()?.sent_at;
        let since = if self.last_ack > oldest {
            self.last_ack
        } else {
            oldest
        };
        Some(since + Duration::from_micros(self.rto_us))
    }
}

/// The coded sender's scheduler: open blocks, paths, and the choice of the next packet.
#[derive(Debug)]
pub struct Scheduler {
    cfg: ScheduleConfig,
    blocks: BlockWindow,
    paths: Vec<Path>,
    /// Scratch of [`Scheduler::choose_block`] (coded packets expected per open block),
    /// kept so that choosing a packet's block allocates nothing.
    expected: Vec<f64>,
}

impl Scheduler {
    /// A scheduler with no path and no block.
    pub fn new(cfg: ScheduleConfig) -> Self {
        let mut cfg = cfg;
        cfg.stale_rtts = finite_or(cfg.stale_rtts, 1.5).max(1.0);
        cfg.rto_rtts = finite_or(cfg.rto_rtts, 2.0).max(1.0);
        cfg.margin_sd = finite_or(cfg.margin_sd, 0.0).clamp(0.0, 10.0);
        cfg.cc_config.mss = cfg.cc_config.mss.max(1);
        cfg.max_rto = cfg.max_rto.max(cfg.min_rto);
        Scheduler {
            blocks: BlockWindow::new(cfg.max_blocks),
            paths: Vec::new(),
            expected: Vec::new(),
            cfg,
        }
    }

    /// Adds a path (up, in slow start); returns its number.
    pub fn add_path(&mut self, now: Instant) -> PathId {
        let rto = self.rto_for(self.cfg.initial_rtt.as_micros() as u64);
        self.paths.push(Path {
            cc: self.cfg.cc.build(&self.cfg.cc_config),
            loss: LossEstimator::new(self.cfg.loss),
            flights: Flights::default(),
            srtt_us: None,
            min_rtt_us: u64::MAX,
            rto_us: rto,
            last_ack: now,
            timeouts_in_row: 0,
            state: PathState::Up,
            sent: 0,
            timeouts: 0,
        });
        self.paths.len() - 1
    }

    /// Paths added.
    pub fn path_count(&self) -> usize {
        self.paths.len()
    }

    /// Opens the next block of `k` source symbols (see [`BlockWindow::open`]).
    pub fn open_block(&mut self, k: u16) -> Result<u64, BlockError> {
        self.blocks.open(k)
    }

    /// The open blocks.
    pub fn blocks(&self) -> &BlockWindow {
        &self.blocks
    }

    /// Path `path`'s smoothed round trip (`None` before its first sample).
    pub fn srtt(&self, path: PathId) -> Option<Duration> {
        self.paths.get(path)?.srtt_us.map(Duration::from_micros)
    }

    /// A path's figures (`None` for an unknown path).
    pub fn path_stats(&self, path: PathId) -> Option<PathStats> {
        let p = self.paths.get(path)?;
        Some(PathStats {
            state: p.state,
            srtt: p.srtt_us.map(Duration::from_micros),
            rto: Duration::from_micros(p.rto_us),
            window: p.window_packets(self.cfg.cc_config.mss),
            in_flight: p.flights.len() as u64,
            p: p.loss.p(),
            p_long: p.loss.p_long(),
            redundancy: p.loss.redundancy(),
            sent: p.sent,
            acked: p.loss.acks(),
            lost: p.loss.losses(),
            timeouts: p.timeouts,
        })
    }

    fn rto_for(&self, rtt_us: u64) -> u64 {
        let rto = (rtt_us as f64 * self.cfg.rto_rtts) as u64;
        rto.clamp(
            self.cfg.min_rto.as_micros() as u64,
            self.cfg.max_rto.as_micros() as u64,
        )
    }

    /// The block path `path` would send from at `now`: `None` when the path has no token
    /// or no block needs a packet from it (or the path is unknown).
    fn choose(&mut self, path: PathId, now: Instant) -> Option<u64> {
        let mss = self.cfg.cc_config.mss;
        let p = self.paths.get(path)?;
        let allowed = match p.state {
            PathState::Up => (p.flights.len() as u64 + 1) * mss <= p.cc.cwnd(),
            PathState::Failed => p.flights.is_empty(),
        };
        if !allowed {
            return None;
        }
        let failed = p.state == PathState::Failed;
        let stale_rtts = self.cfg.stale_rtts;
        for p in &mut self.paths {
            let fresh_for = p.rtt_us(&self.cfg) as f64 * stale_rtts;
            p.flights.age(now, Duration::from_micros(fresh_for as u64));
        }
        let mut expected = std::mem::take(&mut self.expected);
        let chosen = self.choose_block(path, now, &mut expected);
        self.expected = expected;
        match chosen {
            Some(b) => Some(b),
            // A failed path's probe carries something useful if anything is open.
            None if failed && self.blocks.open_count() > 0 => Some(self.blocks.current()),
            None => None,
        }
    }

    /// What [`Scheduler::next`] would answer at `now` (block and symbol), counting nothing.
    pub fn peek(&mut self, path: PathId, now: Instant) -> Option<(u64, Symbol)> {
        let block = self.choose(path, now)?;
        Some((block, self.blocks.peek_symbol(block)?))
    }

    /// The next packet path `path` should send at `now`, counted as sent; `None` when the
    /// path has no token or no block needs a packet from it (or the path is unknown).
    pub fn next(&mut self, path: PathId, now: Instant) -> Option<Transmit> {
        let block = self.choose(path, now)?;
        self.send_from(path, now, block)
    }

    /// Counts a packet of `block` as sent on `path` at `now` — the block a [`Self::peek`]
    /// at the same moment answered, so that the choice is not made twice (`None` for a
    /// block not open or an unknown path).
    pub fn send_from(&mut self, path: PathId, now: Instant, block: u64) -> Option<Transmit> {
        let mss = self.cfg.cc_config.mss;
        self.paths.get(path)?;
        let symbol = self.blocks.take_symbol(block)?;
        let p = &mut self.paths[path];
        let seqno = p.loss.send();
        let bytes_in_flight = p.flights.len() as u64 * mss;
        if p.flights.is_empty() && p.last_ack < now {
            // Idle until now: the RTO runs from this packet.
            p.last_ack = now;
        }
        p.flights.push(Flight {
            block,
            sent_at: now,
        });
        p.sent += 1;
        p.cc.on_packet_sent(&ctp_cc::Sent {
            now,
            pn: seqno,
            bytes: mss,
            bytes_in_flight,
        });
        Some(Transmit {
            path,
            seqno,
            block,
            symbol,
        })
    }

    /// Algorithm 4: the block path `path` should send from, if any.
    /// `cof` is scratch space (its contents are replaced).
    fn choose_block(&self, path: PathId, now: Instant, cof: &mut Vec<f64>) -> Option<u64> {
        let first = self.blocks.current();
        let open = self.blocks.open_count();
        if open == 0 {
            return None;
        }
        let me = &self.paths[path];
        let my_rtt = me.rtt_us(&self.cfg);
        // When a packet sent now on this path would arrive (half a round trip from now).
        let my_arrival = now + Duration::from_micros(my_rtt / 2);
        cof.clear();
        cof.resize(open, 0.0);
        // The current block's expected arrivals that come no later than this path's would.
        let mut cof_first_sooner = 0.0f64;
        let (mut thru, mut sent) = (0.0f64, 0.0f64);
        for p in self.paths.iter().filter(|p| p.state == PathState::Up) {
            let w = p.loss.expected_delivery();
            let rtt = p.rtt_us(&self.cfg);
            let out = p.flights.len() as f64;
            thru += w * out / rtt as f64;
            sent += w * out;
            // Packets of this path sent by then arrive no later than one sent now on
            // `path` would.
            let sooner_by = (my_arrival.as_micros() as i64 - rtt as i64 / 2).max(0);
            for (&block, &n) in p.flights.fresh.range(first..first + open as u64) {
                cof[(block - first) as usize] += w * f64::from(n);
            }
            let sooner = p
                .flights
                .fresh_of_sent_by(first, Instant::from_micros(sooner_by as u64));
            cof_first_sooner += w * f64::from(sooner);
        }
        let my_rtt = my_rtt as f64;
        let my_loss = me.loss.planning_loss();
        let margin = |missing: u32| self.cfg.margin_sd * (f64::from(missing) * my_loss).sqrt();
        for (i, b) in self.blocks.iter().enumerate() {
            let missing = self.blocks.missing_dofs(b.id);
            if missing == 0 {
                continue;
            }
            // The current block holds every later one back: even a fraction of a packet
            // short is topped up. A later block is left a fraction short; it is topped up
            // if it is still short when it becomes the current one.
            let (expected, slack) = if b.id == first {
                ((thru * my_rtt - sent).max(0.0) + cof_first_sooner, 0.0)
            } else {
                (cof[i], MIN_DEFICIT)
            };
            if expected + slack < f64::from(missing) + margin(missing) {
                return Some(b.id);
            }
        }
        None
    }

    /// The receiver's acknowledgement of packet `ack.seqno` on `path`, arrived at `now`.
    pub fn on_ack(&mut self, path: PathId, now: Instant, ack: DofAck) {
        let mss = self.cfg.cc_config.mss;
        let Some(p) = self.paths.get_mut(path) else {
            return;
        };
        let una = p.loss.seqno_una();
        let outcome = p.loss.on_ack(ack.seqno);
        // The receiver's block report holds whatever path it came on.
        self.blocks.on_ack(ack.current_block, ack.current_dofs);
        let AckOutcome::Counted { losses } = outcome else {
            return;
        };
        // Packets una .. ack.seqno − 1 are lost, ack.seqno arrived.
        let lost = (losses as usize).min(p.flights.len());
        let last_lost_sent = lost
            .checked_sub(1)
            .and_then(|i| p.flights.get(i))
            .map(|f| f.sent_at);
        p.flights.drop_front(lost);
        let Some(acked) = p.flights.pop_front() else {
            return;
        };
        let raw_us = now.saturating_since(acked.sent_at).as_micros() as u64;
        p.min_rtt_us = p.min_rtt_us.min(raw_us);
        let held_us = ack.ack_delay.as_micros() as u64;
        let rtt_us = match raw_us.checked_sub(held_us) {
            Some(rtt) if rtt >= p.min_rtt_us => rtt,
            _ => raw_us,
        };
        let srtt = match p.srtt_us {
            None => rtt_us,
            Some(s) => (7 * s + rtt_us) / 8,
        };
        p.srtt_us = Some(srtt);
        p.last_ack = now;
        p.timeouts_in_row = 0;
        if p.state == PathState::Failed {
            p.state = PathState::Up;
        }
        if let Some(sent_at) = last_lost_sent {
            p.cc.on_loss(&ctp_cc::Loss {
                now,
                first_pn: una,
                last_pn: ack.seqno - 1,
                bytes: losses * mss,
                sent_at,
                largest_sent_pn: p.loss.seqno_nxt() - 1,
                srtt_us: srtt,
            });
        }
        p.cc.on_ack(&ctp_cc::Ack {
            now,
            pn: ack.seqno,
            bytes: mss,
            sent_at: acked.sent_at,
            rtt_us,
            srtt_us: srtt,
            min_rtt_us: p.min_rtt_us,
            bytes_in_flight: p.flights.len() as u64 * mss,
            delivery_rate: 0,
        });
        let rto = self.rto_for(srtt);
        self.paths[path].rto_us = rto;
        self.blocks.on_packet_acked(acked.block);
    }

    /// The earliest time a path times out (`None`: nothing out anywhere).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.paths.iter().filter_map(Path::deadline).min()
    }

    /// Handles the timeouts due at `now` (Algorithm 2's first rule).
    pub fn on_timer(&mut self, now: Instant) {
        let max_rto = self.cfg.max_rto.as_micros() as u64;
        for p in &mut self.paths {
            if p.deadline().is_none_or(|d| now < d) {
                continue;
            }
            p.timeouts += 1;
            p.timeouts_in_row = p.timeouts_in_row.saturating_add(1);
            p.rto_us = p.rto_us.saturating_mul(2).min(max_rto);
            p.cc.on_timeout(now, p.timeouts_in_row);
            p.loss.on_timeout();
            p.flights.clear();
            p.last_ack = now;
            if p.timeouts_in_row >= self.cfg.fail_after {
                p.state = PathState::Failed;
            }
        }
    }

    /// The path's sequence numbers not yet resolved: `una .. nxt` (`None`: unknown path).
    /// Acknowledgements of numbers outside it say nothing new.
    pub fn unresolved(&self, path: PathId) -> Option<core::ops::Range<u64>> {
        let p = self.paths.get(path)?;
        Some(p.loss.seqno_una()..p.loss.seqno_nxt())
    }

    /// The pacing rate of the path's controller, bytes per second (0: unpaced).
    pub fn pacing_rate(&self, path: PathId) -> u64 {
        self.paths.get(path).map_or(0, |p| p.cc.pacing_rate())
    }

    /// Declares `path` failed (its interface went down): what it had out counts for
    /// nothing any more, so other paths cover those blocks; it is probed until it answers.
    pub fn fail_path(&mut self, path: PathId, now: Instant) {
        if let Some(p) = self.paths.get_mut(path) {
            p.state = PathState::Failed;
            p.timeouts_in_row = p.timeouts_in_row.max(self.cfg.fail_after);
            p.cc.on_timeout(now, p.timeouts_in_row);
            p.loss.on_timeout();
            p.flights.clear();
            p.last_ack = now;
        }
    }
}

fn finite_or(x: f64, default: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        default
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::rand_core::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    const K: u16 = 32;

    /// One direction of a path: a rate with a bounded queue, a delay, random loss; its
    /// acknowledgements come back after the same delay, never lost unless the path is down.
    struct Link {
        delay_us: u64,
        gap_us: u64,
        queue: u64,
        loss: f64,
        up: bool,
        next_free: u64,
        rng: ChaCha8Rng,
        /// Sequence numbers dropped on purpose.
        drop: Vec<u64>,
        delivered: u64,
    }

    impl Link {
        fn new(rtt_ms: u64, loss: f64, seed: u64) -> Self {
            Link {
                delay_us: rtt_ms * 500,
                gap_us: 100,                   // 10 000 packets per second
                queue: (rtt_ms * 10).max(200), // a BDP of buffer
                loss,
                up: true,
                next_free: 0,
                rng: ChaCha8Rng::seed_from_u64(seed),
                drop: Vec::new(),
                delivered: 0,
            }
        }
    }

    enum Ev {
        Arrive {
            path: PathId,
            seqno: u64,
            block: u64,
        },
        Ack {
            path: PathId,
            ack: DofAck,
        },
    }

    /// Sender, paths and a receiver that counts dofs per block (every packet of an
    /// undecoded block is taken as innovative).
    struct Model {
        s: Scheduler,
        links: Vec<Link>,
        events: BinaryHeap<Reverse<(u64, u64)>>,
        pending: std::collections::HashMap<u64, Ev>,
        order: u64,
        now: u64,
        total_blocks: u64,
        k: Vec<u16>,
        opened_at: Vec<u64>,
        decoded_at: Vec<Option<u64>>,
        dofs: Vec<u32>,
        rx_current: u64,
        repairs: Vec<u32>,
        sent_after: Vec<u64>,
        max_open: usize,
    }

    impl Model {
        fn new(cfg: ScheduleConfig, links: Vec<Link>, total_blocks: u64) -> Self {
            let mut s = Scheduler::new(cfg);
            for _ in &links {
                s.add_path(Instant::ZERO);
            }
            let n = links.len();
            Model {
                s,
                links,
                events: BinaryHeap::new(),
                pending: Default::default(),
                order: 0,
                now: 0,
                total_blocks,
                k: Vec::new(),
                opened_at: Vec::new(),
                decoded_at: Vec::new(),
                dofs: Vec::new(),
                rx_current: 0,
                repairs: Vec::new(),
                sent_after: vec![0; n],
                max_open: 0,
            }
        }

        fn at(&self, us: u64) -> Instant {
            Instant::from_micros(us)
        }

        fn push(&mut self, t: u64, ev: Ev) {
            self.order += 1;
            self.events.push(Reverse((t, self.order)));
            self.pending.insert(self.order, ev);
        }

        fn transmit(&mut self, tx: Transmit) {
            if let Symbol::Repair(_) = tx.symbol {
                self.repairs[tx.block as usize] += 1;
            }
            self.sent_after[tx.path] += 1;
            let l = &mut self.links[tx.path];
            let start = l.next_free.max(self.now);
            if (start - self.now) / l.gap_us > l.queue {
                return; // tail drop
            }
            l.next_free = start + l.gap_us;
            let lost = l.drop.contains(&tx.seqno)
                || !l.up
                || (l.rng.next_u64() as f64 / u64::MAX as f64) < l.loss;
            if !lost {
                let t = l.next_free + l.delay_us;
                self.push(
                    t,
                    Ev::Arrive {
                        path: tx.path,
                        seqno: tx.seqno,
                        block: tx.block,
                    },
                );
            }
        }

        fn receive(&mut self, path: PathId, seqno: u64, block: u64) {
            let b = block as usize;
            if block >= self.rx_current {
                self.dofs[b] = (self.dofs[b] + 1).min(u32::from(self.k[b]));
            }
            while (self.rx_current as usize) < self.k.len()
                && self.dofs[self.rx_current as usize]
                    >= u32::from(self.k[self.rx_current as usize])
            {
                self.decoded_at[self.rx_current as usize] = Some(self.now);
                self.rx_current += 1;
            }
            let l = &mut self.links[path];
            l.delivered += 1;
            if l.up {
                let ack = DofAck {
                    seqno,
                    current_block: self.rx_current,
                    current_dofs: self
                        .dofs
                        .get(self.rx_current as usize)
                        .copied()
                        .unwrap_or(0),
                    ack_delay: Duration::ZERO,
                };
                let t = self.now + l.delay_us;
                self.push(t, Ev::Ack { path, ack });
            }
        }

        /// Runs until every block is decoded or `limit_ms` of virtual time passed; `hook`
        /// sees the model at every step. Returns the completion time, µs.
        fn run(&mut self, limit_ms: u64, mut hook: impl FnMut(&mut Model)) -> Option<u64> {
            for _ in 0..5_000_000 {
                while (self.k.len() as u64) < self.total_blocks {
                    let k = if self.k.len() as u64 == self.total_blocks - 1 {
                        10
                    } else {
                        K
                    };
                    match self.s.open_block(k) {
                        Ok(id) => {
                            assert_eq!(id as usize, self.k.len());
                            self.k.push(k);
                            self.opened_at.push(self.now);
                            self.decoded_at.push(None);
                            self.dofs.push(0);
                            self.repairs.push(0);
                        }
                        Err(BlockError::WindowFull) => break,
                        Err(e) => panic!("{e}"),
                    }
                }
                let open = self.s.blocks().open_count();
                assert!(open <= self.s.blocks().max_blocks(), "{open} blocks open");
                self.max_open = self.max_open.max(open);
                for path in 0..self.links.len() {
                    while let Some(tx) = self.s.next(path, self.at(self.now)) {
                        self.transmit(tx);
                    }
                }
                hook(self);
                if self.rx_current == self.total_blocks
                    && self.s.blocks().decoded() == self.total_blocks
                {
                    return Some(self.now);
                }
                let next_ev = self.events.peek().map(|Reverse((t, _))| *t);
                let next_to = self.s.poll_timeout().map(|t| t.as_micros());
                let next = [next_ev, next_to, Some(self.now + 1000)]
                    .into_iter()
                    .flatten()
                    .min()
                    .unwrap();
                self.now = next.max(self.now);
                if self.now > limit_ms * 1000 {
                    return None;
                }
                self.s.on_timer(self.at(self.now));
                while let Some(Reverse((t, id))) = self.events.peek().copied() {
                    if t > self.now {
                        break;
                    }
                    self.events.pop();
                    match self.pending.remove(&id).unwrap() {
                        Ev::Arrive { path, seqno, block } => self.receive(path, seqno, block),
                        Ev::Ack { path, ack } => self.s.on_ack(path, self.at(self.now), ack),
                    }
                }
            }
            None
        }

        fn latencies_ms(&self) -> Vec<f64> {
            let mut v: Vec<f64> = self
                .opened_at
                .iter()
                .zip(&self.decoded_at)
                .map(|(o, d)| (d.expect("decoded") - o) as f64 / 1000.0)
                .collect();
            v.sort_by(f64::total_cmp);
            v
        }
    }

    /// Blocks of 32 symbols, 8 open: 256 packets, above one path's 200-packet BDP.
    fn cfg() -> ScheduleConfig {
        ScheduleConfig {
            max_blocks: 8,
            cc_config: ctp_cc::Config {
                mss: 1000,
                initial_window: 10,
                ..ctp_cc::Config::default()
            },
            ..ScheduleConfig::default()
        }
    }

    /// 64 blocks open: 2048 packets, above the sum of every test's paths' BDPs (the
    /// paper's advice: blocks in flight as large as the bandwidth-delay product).
    fn wide() -> ScheduleConfig {
        ScheduleConfig {
            max_blocks: 64,
            ..cfg()
        }
    }

    fn summary(name: &str, m: &Model, done: Option<u64>) {
        let lat = m.latencies_ms();
        eprintln!(
            "{name}: done {:?} ms, block latency p50 {:.1} p99 {:.1} max {:.1} ms, sent {:?}, delivered {:?}, repairs {}",
            done.map(|t| t / 1000),
            lat[lat.len() / 2],
            lat[lat.len() * 99 / 100],
            lat[lat.len() - 1],
            (0..m.links.len()).map(|p| m.s.path_stats(p).unwrap().sent).collect::<Vec<_>>(),
            m.links.iter().map(|l| l.delivered).collect::<Vec<_>>(),
            m.repairs.iter().sum::<u32>(),
        );
    }

    #[test]
    fn an_acknowledgements_hold_comes_out_of_the_round_trip_but_never_below_the_minimum() {
        let mut s = Scheduler::new(cfg());
        s.add_path(Instant::ZERO);
        let block = s.open_block(K).unwrap();
        for _ in 0..3 {
            s.send_from(0, Instant::ZERO, block).unwrap();
        }
        let ack = |seqno, held_ms| DofAck {
            seqno,
            current_block: block,
            current_dofs: seqno as u32 + 1,
            ack_delay: Duration::from_millis(held_ms),
        };
        let srtt = |s: &Scheduler| s.path_stats(0).unwrap().srtt.unwrap();
        s.on_ack(0, Instant::from_micros(20_000), ack(0, 0));
        assert_eq!(srtt(&s), Duration::from_millis(20));
        // Held 5 ms at the receiver: the path's round trip is still 20 ms.
        s.on_ack(0, Instant::from_micros(25_000), ack(1, 5));
        assert_eq!(srtt(&s), Duration::from_millis(20));
        // A hold that would make the round trip shorter than ever seen is not believed.
        s.on_ack(0, Instant::from_micros(36_000), ack(2, 30));
        assert_eq!(srtt(&s), Duration::from_micros((7 * 20_000 + 36_000) / 8));
    }

    #[test]
    fn a_block_with_losses_gets_its_missing_dofs_resent_and_completes() {
        let mut link = Link::new(20, 0.0, 1);
        link.drop = vec![3, 7, 20, 21];
        let mut m = Model::new(cfg(), vec![link], 2);
        let done = m.run(10_000, |_| {});
        summary("one block, 4 losses", &m, done);
        assert!(done.is_some(), "block 0 never decoded");
        assert!(m.repairs[0] >= 4, "{} repairs", m.repairs[0]);
        // The repairs follow the first ACKs that show losses: no timeout was needed.
        assert_eq!(m.s.path_stats(0).unwrap().timeouts, 0);
        assert_eq!(m.s.path_stats(0).unwrap().lost, 4);
        // Its last symbols wait for the ACKs that show the losses: two round trips.
        assert!(done.unwrap() < 100_000, "{done:?}");
    }

    #[test]
    fn a_lossy_path_completes_every_block_with_redundancy_near_r() {
        let mut m = Model::new(cfg(), vec![Link::new(20, 0.05, 2)], 300);
        let done = m.run(60_000, |_| {});
        summary("one path, 5 % loss", &m, done);
        assert!(done.is_some());
        assert_eq!(m.max_open, 8, "the window filled");
        let st = m.s.path_stats(0).unwrap();
        let source = 299 * u64::from(K) + 10;
        let overhead = st.sent as f64 / source as f64;
        assert!(
            (1.04..1.25).contains(&overhead),
            "sent {} for {source}: {overhead}",
            st.sent
        );
        assert!((1.03..1.09).contains(&st.redundancy), "R {}", st.redundancy);
        assert_eq!(st.timeouts, 0);
    }

    #[test]
    fn two_equal_paths_split_evenly() {
        let links = vec![Link::new(20, 0.0, 3), Link::new(20, 0.0, 4)];
        let mut m = Model::new(wide(), links, 300);
        let done = m.run(60_000, |_| {});
        summary("two equal paths", &m, done);
        assert!(done.is_some());
        let (a, b) = (
            m.s.path_stats(0).unwrap().sent,
            m.s.path_stats(1).unwrap().sent,
        );
        assert!(a.abs_diff(b) * 10 <= a + b, "{a} vs {b}");
        assert_eq!(
            m.repairs.iter().sum::<u32>(),
            0,
            "nothing lost, nothing repaired"
        );
    }

    #[test]
    fn a_lossy_path_carries_less_and_blocks_do_not_wait_on_it() {
        let clean = {
            let links = vec![Link::new(20, 0.0, 5), Link::new(20, 0.0, 6)];
            let mut m = Model::new(wide(), links, 300);
            let done = m.run(60_000, |_| {});
            summary("clean + clean", &m, done);
            (done.unwrap(), m.latencies_ms())
        };
        let links = vec![Link::new(20, 0.0, 5), Link::new(20, 0.05, 6)];
        let mut m = Model::new(wide(), links, 300);
        let done = m.run(60_000, |_| {});
        summary("clean + 5 % lossy", &m, done);
        let done = done.unwrap();
        let (clean_link, lossy_link) = (m.links[0].delivered, m.links[1].delivered);
        assert!(clean_link > lossy_link, "{clean_link} ≤ {lossy_link}");
        let lat = m.latencies_ms();
        let p99 = |v: &[f64]| v[v.len() * 99 / 100];
        assert!(
            p99(&lat) <= 1.5 * p99(&clean.1),
            "p99 block latency {} vs {} without loss",
            p99(&lat),
            p99(&clean.1)
        );
        assert!(done as f64 <= 1.2 * clean.0 as f64, "{done} vs {}", clean.0);
    }

    #[test]
    fn a_slow_path_adds_throughput_without_stalling_blocks() {
        let alone = {
            let mut m = Model::new(wide(), vec![Link::new(20, 0.0, 7)], 300);
            let done = m.run(60_000, |_| {});
            summary("fast path alone", &m, done);
            (done.unwrap(), m.latencies_ms())
        };
        let links = vec![Link::new(20, 0.0, 7), Link::new(120, 0.02, 8)];
        let mut m = Model::new(wide(), links, 300);
        let done = m.run(60_000, |_| {});
        summary("fast + slow lossy", &m, done);
        let done = done.unwrap();
        assert!(done < alone.0, "{done} ≥ {} alone", alone.0);
        assert!(
            m.s.path_stats(1).unwrap().sent > 500,
            "the slow path was used"
        );
    }

    #[test]
    fn a_failed_path_hands_its_share_over_and_is_used_again_when_it_returns() {
        let links = vec![Link::new(20, 0.0, 9), Link::new(20, 0.0, 10)];
        let mut cfg = wide();
        cfg.max_rto = Duration::from_millis(400);
        let mut m = Model::new(cfg, links, 1200);
        let (down_at, up_at) = (300_000, 1_500_000);
        let mut failed_seen = None;
        let mut sent_at_return = 0;
        let mut up_again = None;
        let done = m.run(120_000, |m| {
            if m.now >= down_at && m.now < up_at && m.links[1].up {
                m.links[1].up = false;
            }
            if m.now >= up_at && !m.links[1].up {
                m.links[1].up = true;
                sent_at_return = m.s.path_stats(1).unwrap().sent;
            }
            let st = m.s.path_stats(1).unwrap().state;
            if st == PathState::Failed && failed_seen.is_none() {
                failed_seen = Some(m.now);
            }
            if m.now >= up_at && st == PathState::Up && up_again.is_none() {
                up_again = Some(m.now);
            }
        });
        summary("path 1 down and back", &m, done);
        eprintln!("failed at {failed_seen:?} µs, up again at {up_again:?} µs");
        let done = done.expect("every block decoded");
        let failed = failed_seen.expect("path 1 declared failed");
        assert!(failed > down_at && failed < down_at + 1_000_000, "{failed}");
        let back = up_again.expect("path 1 used again");
        assert!(back < up_at + 500_000, "{back}");
        let after = m.s.path_stats(1).unwrap().sent - sent_at_return;
        assert!(
            done > up_at + 200_000,
            "the transfer should outlast the outage"
        );
        assert!(
            after > 1000,
            "path 1 carried {after} packets after its return"
        );
    }
}
