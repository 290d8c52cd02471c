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
//! - `currblk` is sent from when `thru·RTT_i − sent + cof_currblk < missing + margin`,
//!   `missing = k − currdof`. `thru·RTT_i − sent` is what the other paths will deliver
//!   beyond what is out within one round trip of path `i`: a path slower than the rest
//!   (positive term) leaves the current block to faster ones, a faster one (negative) tops
//!   the block up so that it need not wait for the slow one. With one path, or paths of one
//!   RTT, the term is 0 and the rule is Algorithm 3's `(1−p)·onfly < k − currdof`.
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
use std::collections::VecDeque;

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

#[derive(Debug)]
struct Path {
    cc: AnyCc,
    loss: LossEstimator,
    /// Packets `loss.seqno_una() ..` in order.
    flights: VecDeque<Flight>,
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
            cfg,
        }
    }

    /// Adds a path (up, in slow start); returns its number.
    pub fn add_path(&mut self, now: Instant) -> PathId {
        let rto = self.rto_for(self.cfg.initial_rtt.as_micros() as u64);
        self.paths.push(Path {
            cc: self.cfg.cc.build(&self.cfg.cc_config),
            loss: LossEstimator::new(self.cfg.loss),
            flights: VecDeque::new(),
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

    /// The next packet path `path` should send at `now`, counted as sent; `None` when the
    /// path has no token or no block needs a packet from it (or the path is unknown).
    pub fn next(&mut self, path: PathId, now: Instant) -> Option<Transmit> {
        let mss = self.cfg.cc_config.mss;
        let p = self.paths.get(path)?;
        let allowed = match p.state {
            PathState::Up => (p.flights.len() as u64 + 1) * mss <= p.cc.cwnd(),
            PathState::Failed => p.flights.is_empty(),
        };
        if !allowed {
            return None;
        }
        let block = match self.choose_block(path, now) {
            Some(b) => b,
            // A failed path's probe carries something useful if anything is open.
            None if p.state == PathState::Failed && self.blocks.open_count() > 0 => {
                self.blocks.current()
            }
            None => return None,
        };
        let symbol = self.blocks.take_symbol(block)?;
        let p = &mut self.paths[path];
        let seqno = p.loss.send();
        let bytes_in_flight = p.flights.len() as u64 * mss;
        if p.flights.is_empty() && p.last_ack < now {
            // Idle until now: the RTO runs from this packet.
            p.last_ack = now;
        }
        p.flights.push_back(Flight { block, sent_at: now });
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
    fn choose_block(&self, path: PathId, now: Instant) -> Option<u64> {
        let first = self.blocks.current();
        let open = self.blocks.open_count();
        if open == 0 {
            return None;
        }
        let mut cof = vec![0.0f64; open];
        let (mut thru, mut sent) = (0.0f64, 0.0f64);
        for p in self.paths.iter().filter(|p| p.state == PathState::Up) {
            let w = p.loss.expected_delivery();
            let rtt = p.rtt_us(&self.cfg);
            let out = p.flights.len() as f64;
            thru += w * out / rtt as f64;
            sent += w * out;
            let fresh_for = Duration::from_micros((rtt as f64 * self.cfg.stale_rtts) as u64);
            for f in p.flights.iter().rev() {
                if f.sent_at + fresh_for <= now {
                    break; // older ones are staler still
                }
                if let Some(i) = f.block.checked_sub(first).map(|i| i as usize) {
                    if let Some(c) = cof.get_mut(i) {
                        *c += w;
                    }
                }
            }
        }
        let me = &self.paths[path];
        let my_rtt = me.rtt_us(&self.cfg) as f64;
        let my_loss = me.loss.planning_loss();
        let margin = |missing: u32| self.cfg.margin_sd * (f64::from(missing) * my_loss).sqrt();
        for (i, b) in self.blocks.iter().enumerate() {
            let missing = self.blocks.missing_dofs(b.id);
            if missing == 0 {
                continue;
            }
            let expected = if b.id == first {
                thru * my_rtt - sent + cof[i]
            } else {
                cof[i]
            };
            if expected < f64::from(missing) + margin(missing) {
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
        let last_lost_sent = lost.checked_sub(1).and_then(|i| p.flights.get(i)).map(|f| f.sent_at);
        p.flights.drain(..lost);
        let Some(acked) = p.flights.pop_front() else {
            return;
        };
        let rtt_us = now.saturating_since(acked.sent_at).as_micros() as u64;
        let srtt = match p.srtt_us {
            None => rtt_us,
            Some(s) => (7 * s + rtt_us) / 8,
        };
        p.srtt_us = Some(srtt);
        p.min_rtt_us = p.min_rtt_us.min(rtt_us);
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
