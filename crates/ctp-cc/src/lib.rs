//! # ctp-cc — congestion control for any transport stack
//!
//! Fourteen congestion-control algorithms behind one small trait, after Composable UDT's
//! CCC class, plus the pieces a stack needs around them: a pacer ([`pace`]), a
//! delivery-rate sampler ([`rate`]) and a microsecond time type ([`time`]). The crate has
//! no dependencies and never touches a socket, a thread or a clock: the stack that uses it
//! calls a controller when something happens to its packets, passing the current time, and
//! reads back how much it may have in flight and how fast it may send. It is ctp's library
//! (ctp's congestion-policy microprotocol, `ctp_proto::micro::cc`, is one such caller, and
//! ctp's UDT4-wire sender another), but nothing in it knows ctp: it lives in its own crate
//! so that it *cannot* depend on the engine that drives it.
//!
//! # Units
//!
//! - **Time** is an [`Instant`]: microseconds since an epoch the caller chooses (when the
//!   connection or the program started, or a simulator's virtual zero). Only differences
//!   matter. From a real clock:
//!   `Instant::from_micros(std_now.duration_since(epoch).as_micros() as u64)`.
//! - **RTTs** (`rtt_us`, `srtt_us`, `min_rtt_us`) are microseconds; 0 (smoothed) or
//!   `u64::MAX` (minimum) until measured.
//! - **Amounts of data** — a packet's `bytes`, `bytes_in_flight`, the window
//!   ([`CongestionControl::cwnd`]) — are bytes, as counted on the wire by the stack. Count
//!   them consistently with [`Config::mss`], the size of a full packet: the algorithms
//!   reason in packets of `mss` bytes internally.
//! - **Rates** are bytes per second ([`CongestionControl::pacing_rate`], [`Config::rate`],
//!   `Ack::delivery_rate`), and [`CongestionControl::pacing_period_us`] turns one into the
//!   gap, in microseconds, between packets of a given size.
//! - [`Config::initial_window`] and [`Config::max_window`] are in **packets**.
//! - Packet numbers (`pn`) are the stack's own, increasing as it sends; the algorithms
//!   compare them (a loss after the last decrease opens a new congestion event) and key
//!   delivery-rate samples by them.
//!
//! # Driving a controller
//!
//! Build one by name or kind from a [`Config`] ([`by_name`], [`CcKind::from_name`],
//! [`CcKind::build`]); the result is an [`AnyCc`], which implements [`CongestionControl`].
//! Then, for each connection:
//!
//! | when the stack … | it calls | with |
//! |---|---|---|
//! | sends a packet that counts in flight | [`on_packet_sent`](CongestionControl::on_packet_sent) | a [`Sent`]: time, number, size, bytes in flight before it |
//! | learns a packet was received (one call per packet) | [`on_ack`](CongestionControl::on_ack) | an [`Ack`]: time, number, size, send time, the RTT sample, smoothed and minimum RTT, bytes in flight, a delivery-rate sample (0 if the stack keeps none; see [`rate::DeliveryRate`]) |
//! | declares packets lost (one call per packet or per range) | [`on_loss`](CongestionControl::on_loss) | a [`Loss`]: time, the range, bytes, send time of the latest lost packet, largest number sent, smoothed RTT |
//! | has its retransmission timer expire | [`on_timeout`](CongestionControl::on_timeout) | the time and how many times in a row it expired (1, 2, …) |
//! | receives a packet from the peer (receiver side) | [`on_packet_received`](CongestionControl::on_packet_received) | the time and its size |
//! | receives a custom control message for the algorithm | [`on_custom`](CongestionControl::on_custom) | the time and the message (at most [`MAX_CC_MSG`] bytes) |
//!
//! After each call the outputs may have changed; read them before the next decision:
//!
//! - [`cwnd`](CongestionControl::cwnd): send only while the bytes in flight stay within it
//!   (`u64::MAX`: no window, the rate alone limits).
//! - [`pacing_rate`](CongestionControl::pacing_rate) /
//!   [`pacing_period_us`](CongestionControl::pacing_period_us): space packets out at this
//!   rate (0 / `None`: send as fast as the window allows). [`pace::PaceClock`] does the
//!   spacing, with exact average rates and short trains at high rates.
//! - [`paused_until`](CongestionControl::paused_until): send nothing, retransmissions
//!   included, before that time (UDT's freeze after a congestion event).
//! - [`packet_pairs`](CongestionControl::packet_pairs),
//!   [`ack_interval`](CongestionControl::ack_interval): requests to the sender's pacing and
//!   the receiver's acknowledgement policy.
//! - [`sends_messages`](CongestionControl::sends_messages) /
//!   [`poll_message`](CongestionControl::poll_message): an algorithm with a half on each end
//!   (UDT's receiver-side link-capacity estimate) hands the stack small messages to carry to
//!   the peer's instance, which gets them through `on_custom`. Losing one is harmless.
//! - [`wants_packet_events`](CongestionControl::wants_packet_events): false when the
//!   algorithm ignores `on_packet_sent`, `on_packet_received`, `Ack::delivery_rate` and
//!   `Loss::largest_sent_pn`; the stack may then skip that per-packet work.
//!
//! A controller is per connection and per direction of data, holds no references and is
//! `Send`. It never fails: odd input (a zero RTT, an ACK for a packet it never saw, junk in
//! `on_custom`) is absorbed.
//!
//! ## Example: a sender driving NewReno
//!
//! A stack's own bookkeeping (its packets in flight, its RTT estimate) around one
//! controller: a window of packets, one round trip, a paced second window with a loss, then
//! a retransmission timeout.
//!
//! ```
//! use core::time::Duration;
//! use ctp_cc::{Ack, AnyCc, CcKind, Config, CongestionControl, Instant, Loss, Sent};
//! use std::collections::BTreeMap;
//!
//! /// The stack's side of one connection.
//! struct Sender {
//!     cc: AnyCc,
//!     mss: u64,
//!     /// Packets in flight: number → send time.
//!     flight: BTreeMap<u64, Instant>,
//!     next_pn: u64,
//!     srtt_us: u64,
//!     min_rtt_us: u64,
//! }
//!
//! impl Sender {
//!     fn bytes_in_flight(&self) -> u64 {
//!         self.flight.len() as u64 * self.mss
//!     }
//!
//!     /// Sends one full packet at `now` if the window has room; returns its number.
//!     fn send(&mut self, now: Instant) -> Option<u64> {
//!         if self.bytes_in_flight() + self.mss > self.cc.cwnd() {
//!             return None;
//!         }
//!         let pn = self.next_pn;
//!         self.next_pn += 1;
//!         let bytes_in_flight = self.bytes_in_flight();
//!         self.cc.on_packet_sent(&Sent { now, pn, bytes: self.mss, bytes_in_flight });
//!         self.flight.insert(pn, now);
//!         Some(pn)
//!     }
//!
//!     /// The peer acknowledged packet `pn`.
//!     fn acked(&mut self, pn: u64, now: Instant) {
//!         let sent_at = self.flight.remove(&pn).expect("in flight");
//!         let rtt_us = (now - sent_at).as_micros() as u64;
//!         self.srtt_us = match self.srtt_us {
//!             0 => rtt_us,
//!             s => (7 * s + rtt_us) / 8,
//!         };
//!         self.min_rtt_us = self.min_rtt_us.min(rtt_us);
//!         self.cc.on_ack(&Ack {
//!             now,
//!             pn,
//!             bytes: self.mss,
//!             sent_at,
//!             rtt_us,
//!             srtt_us: self.srtt_us,
//!             min_rtt_us: self.min_rtt_us,
//!             bytes_in_flight: self.bytes_in_flight(),
//!             delivery_rate: 0, // NewReno reads none (see `wants_packet_events`)
//!         });
//!     }
//!
//!     /// The stack's loss detection declared packet `pn` lost.
//!     fn lost(&mut self, pn: u64, now: Instant) {
//!         let sent_at = self.flight.remove(&pn).expect("in flight");
//!         self.cc.on_loss(&Loss {
//!             now,
//!             first_pn: pn,
//!             last_pn: pn,
//!             bytes: self.mss,
//!             sent_at,
//!             largest_sent_pn: self.next_pn - 1,
//!             srtt_us: self.srtt_us,
//!         });
//!     }
//! }
//!
//! let cfg = Config { mss: 1000, initial_window: 10, ..Config::default() };
//! let kind = CcKind::from_name("newreno").expect("a built-in algorithm");
//! let mut s = Sender {
//!     cc: kind.build(&cfg),
//!     mss: cfg.mss,
//!     flight: BTreeMap::new(),
//!     next_pn: 0,
//!     srtt_us: 0,
//!     min_rtt_us: u64::MAX,
//! };
//! let rtt = Duration::from_millis(50);
//! let ms = |v: u64| Instant::from_micros(v * 1000);
//!
//! // The initial window: 10 packets, all at once (no RTT yet, so no pacing rate).
//! assert_eq!(s.cc.cwnd(), 10 * 1000);
//! assert_eq!(s.cc.pacing_period_us(1000), None);
//! let first: Vec<u64> = std::iter::from_fn(|| s.send(ms(0))).collect();
//! assert_eq!(first.len(), 10);
//!
//! // One round trip later every one is acknowledged: slow start doubles the window, and
//! // pacing starts at 2 × cwnd / srtt = 800 kB/s, one 1000-byte packet every 1.25 ms.
//! for pn in first {
//!     s.acked(pn, ms(50));
//! }
//! assert_eq!(s.cc.cwnd(), 20 * 1000);
//! assert_eq!(s.cc.pacing_period_us(1000), Some(1250));
//!
//! // The second window leaves paced.
//! let mut now = ms(50);
//! let mut second = Vec::new();
//! while let Some(pn) = s.send(now) {
//!     second.push(pn);
//!     now += Duration::from_micros(s.cc.pacing_period_us(1000).unwrap());
//! }
//! assert_eq!(second, (10..30).collect::<Vec<_>>());
//!
//! // Packet 15 is lost: 10..=14 and 16..=18 are acknowledged (slow start goes on, +1 packet
//! // each), then the stack's loss detection gives up on 15 and the window halves.
//! for pn in (10..=14).chain(16..=18) {
//!     now = s.flight[&pn] + rtt;
//!     s.acked(pn, now);
//! }
//! assert_eq!(s.cc.cwnd(), 28 * 1000);
//! s.lost(15, now);
//! assert_eq!(s.cc.cwnd(), 14 * 1000);
//!
//! // The rest of that window was sent before the loss: its ACKs do not grow the window
//! // (one decrease, and no growth, per recovery period). Out of slow start, NewReno paces at
//! // 1.25 × cwnd / srtt = 350 kB/s.
//! for pn in 19..30 {
//!     now = s.flight[&pn] + rtt;
//!     s.acked(pn, now);
//! }
//! assert_eq!(s.cc.cwnd(), 14 * 1000);
//! assert_eq!(s.cc.pacing_period_us(1000), Some(2857));
//!
//! // A retransmission timeout collapses the window to two packets.
//! s.cc.on_timeout(now + Duration::from_secs(1), 1);
//! assert_eq!(s.cc.cwnd(), 2 * 1000);
//! ```
//!
//! ## Example: pacing a rate controller
//!
//! [`pace::PaceClock`] turns a rate into departure times. Here the fixed-rate `blast`
//! controller, whose rate the application changes while running with a [`RateMessage`]:
//!
//! ```
//! use ctp_cc::pace::{PaceClock, Spacing};
//! use ctp_cc::{CcKind, Config, CongestionControl, Instant, RateMessage};
//!
//! let mut cc = CcKind::Blast.build(&Config { rate: 1_000_000, ..Config::default() });
//! let mut clock = PaceClock::new();
//! let (mut now, end) = (Instant::ZERO, Instant::from_micros(1_000_000));
//! let mut sent = 0;
//! // One second of 1000-byte packets: each leaves when the clock allows and moves the
//! // clock on by its gap; in between the stack sleeps until `wake_at`.
//! while now < end {
//!     let rate = cc.pacing_rate();
//!     if clock.ready(now, rate, 1000, Spacing::Packets) {
//!         let gap = clock.gap_us(1000, rate).expect("paced");
//!         clock.delay(gap);
//!         sent += 1;
//!     } else {
//!         now = clock.wake_at(rate, 1000, Spacing::Packets);
//!     }
//! }
//! assert_eq!(sent, 1000); // 1 MB/s
//! cc.on_custom(now, &RateMessage(2_000_000).encode());
//! assert_eq!(cc.pacing_period_us(1000), Some(500));
//! ```
//!
//! # The algorithms
//!
//! | name ([`CcKind`]) | kind | in short |
//! |---|---|---|
//! | `newreno` ([`newreno`]) | window, loss | slow start, AIMD, one halving per recovery period (the default) |
//! | `cubic` ([`cubic`]) | window, loss | RFC 9438: cubic growth around the last maximum, β = 0.7 |
//! | `bbr` ([`bbr`]) | model | BBR v1: bottleneck bandwidth and min RTT set rate and window; loss is not a signal; reads delivery-rate samples |
//! | `udt` ([`udt`]) | rate, loss | UDT's native DAIMD rate control from the link capacity, random loss decrease; packet pairs, a receiver-side half, a freeze after a decrease |
//! | `udt-noisy` ([`udt`]) | rate, loss | `udt` that ignores isolated losses and losses without a queue |
//! | `scalable` ([`scalable`]) | window, loss | Scalable TCP: +1 % of a packet per ACK, −1/8 on loss |
//! | `highspeed` ([`highspeed`]) | window, loss | RFC 3649: increase and decrease from the response function |
//! | `bic` ([`bic`]) | window, loss | BiC: binary search toward the last maximum, then max probing |
//! | `westwood` ([`westwood`]) | window, loss | Westwood+: the bandwidth estimate sets ssthresh after a loss |
//! | `vegas` ([`vegas`]) | window, delay | keeps 2 to 4 packets queued, from expected vs actual rate |
//! | `fast` ([`fast`]) | window, delay | FAST TCP: w ← (1−γ)w + γ(baseRTT/RTT·w + α) every RTT |
//! | `ctcp` ([`ctcp`]) | window, delay | CTCP's tokens: Vegas-like on the share of the round trip queued; random loss does not shrink the window (coding repairs it), a loss surge on a queued path or a timeout does |
//! | `blast` ([`blast`]) | fixed rate | constant rate set by [`Config::rate`] or a [`RateMessage`]; ignores loss |
//! | `group` ([`group`]) | assigned rate | a share of a budget ([`group::GroupBudget`]) that a receiver or runtime assigns with [`RateMessage`]s |
//!
//! Window algorithms pace too, at a gain over `cwnd / srtt` once the RTT is known. The
//! trait is object-safe: an algorithm of your own is a `Box<dyn CongestionControl>`
//! (every hook but `name`, `cwnd` and `pacing_rate` has a no-op default). [`AnyCc`] is an
//! enum over the built-in ones, so a stack that sticks to them dispatches with a `match`.
//! [`CcKind::id`] is a stable number for negotiating the algorithm with a peer.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bbr;
pub mod bic;
pub mod blast;
pub mod ctcp;
pub mod cubic;
pub mod fast;
pub mod group;
pub mod highspeed;
pub mod newreno;
pub mod pace;
pub mod rate;
pub mod scalable;
pub mod time;
pub mod udt;
pub mod vegas;
pub mod westwood;

pub use crate::time::Instant;
use core::fmt;

/// Largest custom control message, bytes: what [`CongestionControl::poll_message`] may
/// write, and what a stack must be able to carry to the peer's `on_custom`.
pub const MAX_CC_MSG: usize = 32;

/// One acknowledged packet, as the algorithm sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack {
    /// When the acknowledgement was processed.
    pub now: Instant,
    /// Packet number.
    pub pn: u64,
    /// Bytes the packet occupied on the wire.
    pub bytes: u64,
    /// When the packet was sent.
    pub sent_at: Instant,
    /// This packet's round-trip sample (`now − sent_at`), microseconds.
    pub rtt_us: u64,
    /// Smoothed RTT, microseconds (0 until measured).
    pub srtt_us: u64,
    /// Smallest RTT seen, microseconds (`u64::MAX` until measured).
    pub min_rtt_us: u64,
    /// Bytes in flight as the window mechanism last published them.
    pub bytes_in_flight: u64,
    /// Delivery-rate sample in bytes per second (0 when unknown): bytes acknowledged between
    /// this packet's sending and its acknowledgement, over that interval (BBR's rate sample).
    pub delivery_rate: u64,
}

/// A loss report: a range of packet numbers declared lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loss {
    /// When the loss was declared.
    pub now: Instant,
    /// First lost packet number.
    pub first_pn: u64,
    /// Last lost packet number (inclusive).
    pub last_pn: u64,
    /// Bytes lost.
    pub bytes: u64,
    /// When the (latest) lost packet was sent.
    pub sent_at: Instant,
    /// Largest packet number sent so far.
    pub largest_sent_pn: u64,
    /// Smoothed RTT, microseconds (0 until measured).
    pub srtt_us: u64,
}

/// A packet that left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sent {
    /// When it left.
    pub now: Instant,
    /// Packet number.
    pub pn: u64,
    /// Bytes on the wire.
    pub bytes: u64,
    /// Bytes in flight before it.
    pub bytes_in_flight: u64,
}

/// What every algorithm is built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Bytes per full-sized packet.
    pub mss: u64,
    /// Initial window, packets.
    pub initial_window: u64,
    /// Rate for rate-configured algorithms (`blast`, the initial share of `group`), bytes/s.
    pub rate: u64,
    /// Largest useful window, packets (the flow window): UDT leaves slow start there.
    pub max_window: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mss: 1452,
            initial_window: 10,
            rate: 12_500_000,
            max_window: 16_384,
        }
    }
}

/// A congestion-control algorithm (Composable UDT's CCC). Every hook has a no-op default;
/// the outputs are read after each hook.
pub trait CongestionControl: fmt::Debug + Send {
    /// The name used in profiles and on the command line.
    fn name(&self) -> &'static str;
    /// A packet was acknowledged.
    fn on_ack(&mut self, _ack: &Ack) {}
    /// Packets were declared lost.
    fn on_loss(&mut self, _loss: &Loss) {}
    /// The retransmission timer expired (`backoff` consecutive times).
    fn on_timeout(&mut self, _now: Instant, _backoff: u32) {}
    /// A packet left.
    fn on_packet_sent(&mut self, _sent: &Sent) {}
    /// A packet arrived from the peer (receiver-side algorithms).
    fn on_packet_received(&mut self, _now: Instant, _bytes: u64) {}
    /// A custom control message (see [`RateMessage`]); unknown or malformed ones are ignored.
    fn on_custom(&mut self, _now: Instant, _msg: &[u8]) {}
    /// Congestion window in bytes; `u64::MAX` leaves the window open.
    fn cwnd(&self) -> u64;
    /// Pacing rate in bytes per second; 0 sends unpaced.
    fn pacing_rate(&self) -> u64;
    /// Sending stops until this time (UDT's freeze after a congestion event); `None` or a
    /// time already past: no pause.
    fn paused_until(&self) -> Option<Instant> {
        None
    }
    /// Inter-packet period for packets of `bytes` bytes, microseconds (`None` when unpaced).
    fn pacing_period_us(&self, bytes: u64) -> Option<u64> {
        (bytes * 1_000_000).checked_div(self.pacing_rate())
    }
    /// The acknowledgement interval the algorithm asks for, in packets (`None`: the default).
    fn ack_interval(&self) -> Option<u32> {
        None
    }
    /// True when the algorithm wants UDT's packet pairs: every 16th packet leaves right
    /// behind the one before it, without the pacing gap, so the receiver can measure the
    /// bottleneck's capacity from their spacing.
    fn packet_pairs(&self) -> bool {
        false
    }
    /// True when the algorithm sends custom messages to its peer ([`Self::poll_message`]).
    fn sends_messages(&self) -> bool {
        false
    }
    /// A custom control message for the peer's algorithm, written into `out`; returns its
    /// length (0: nothing to send). The peer receives it in `on_custom`; it rides in the
    /// next packet that has room, and like any control information it may be lost.
    fn poll_message(&mut self, _out: &mut [u8; MAX_CC_MSG]) -> usize {
        0
    }
    /// True when the algorithm reads per-packet events: `on_packet_sent`,
    /// `on_packet_received`, `Ack::delivery_rate` or `Loss::largest_sent_pn`. The adapter
    /// only tracks sent and received packets for those that do.
    fn wants_packet_events(&self) -> bool {
        false
    }
}

/// The custom control message that sets a rate (`blast`, `group`): `b'R'` then the rate in
/// bytes per second as 8 little-endian bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateMessage(pub u64);

impl RateMessage {
    /// Tag byte.
    pub const TAG: u8 = b'R';

    /// Encodes the message.
    pub fn encode(self) -> [u8; 9] {
        let mut b = [0u8; 9];
        b[0] = Self::TAG;
        b[1..].copy_from_slice(&self.0.to_le_bytes());
        b
    }

    /// Decodes a message; `None` unless it is exactly a rate message.
    pub fn decode(msg: &[u8]) -> Option<Self> {
        let (&tag, rest) = msg.split_first()?;
        let bytes: [u8; 8] = rest.try_into().ok()?;
        (tag == Self::TAG).then(|| RateMessage(u64::from_le_bytes(bytes)))
    }
}

/// No algorithm of that name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownCc {
    /// The name given.
    pub name: String,
}

impl fmt::Display for UnknownCc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown congestion control `{}`; known: {}",
            self.name,
            known_names()
        )
    }
}

impl std::error::Error for UnknownCc {}

/// The known names, comma-separated.
pub fn known_names() -> String {
    CcKind::ALL
        .iter()
        .map(|k| k.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Builds the algorithm called `name`.
pub fn by_name(name: &str, cfg: &Config) -> Result<AnyCc, UnknownCc> {
    CcKind::from_name(name)
        .map(|k| k.build(cfg))
        .ok_or_else(|| UnknownCc { name: name.into() })
}

/// The two outputs of an algorithm built on the Reno skeleton held in its field `w`: the
/// window, and the pacing rate derived from it.
macro_rules! window_outputs {
    () => {
        fn cwnd(&self) -> u64 {
            self.w.cwnd
        }

        fn pacing_rate(&self) -> u64 {
            self.w.pacing()
        }
    };
}
pub(crate) use window_outputs;

macro_rules! algorithms {
    ($($variant:ident = $id:literal, $name:literal, $ty:ty, $new:path, $doc:literal;)*) => {
        /// A built-in algorithm. The numbers travel in the handshake.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub enum CcKind {
            /// NewReno (the default).
            #[default]
            NewReno = 0,
            $(#[doc = $doc] $variant = $id,)*
        }

        impl CcKind {
            /// Every built-in algorithm.
            pub const ALL: &'static [CcKind] = &[CcKind::NewReno, $(CcKind::$variant,)*];

            /// The name used in profiles and on the command line.
            pub fn name(self) -> &'static str {
                match self { CcKind::NewReno => "newreno", $(CcKind::$variant => $name,)* }
            }

            /// One-line description.
            pub fn describe(self) -> &'static str {
                match self {
                    CcKind::NewReno => "NewReno: slow start, AIMD, one halving per recovery period",
                    $(CcKind::$variant => $doc,)*
                }
            }

            /// Looks an algorithm up by name.
            pub fn from_name(name: &str) -> Option<CcKind> {
                match name { "newreno" => Some(CcKind::NewReno), $($name => Some(CcKind::$variant),)* _ => None }
            }

            /// The number sent in the handshake.
            pub fn id(self) -> u64 {
                self as u64
            }

            /// Looks an algorithm up by its handshake number.
            pub fn from_id(id: u64) -> Option<CcKind> {
                CcKind::ALL.iter().copied().find(|k| k.id() == id)
            }

            /// True for the rate-based algorithms (UDT, BBR, blast, group), whose rate
            /// only a pacer carries out; window algorithms pace as an option.
            pub fn rate_based(self) -> bool {
                matches!(
                    self,
                    CcKind::Udt
                        | CcKind::UdtNoisy
                        | CcKind::Bbr
                        | CcKind::BbrFair
                        | CcKind::Blast
                        | CcKind::Group
                )
            }

            /// Builds the algorithm.
            pub fn build(self, cfg: &Config) -> AnyCc {
                match self {
                    CcKind::NewReno => AnyCc::NewReno(newreno::NewReno::new(cfg)),
                    $(CcKind::$variant => AnyCc::$variant($new(cfg)),)*
                }
            }
        }

        /// One built-in algorithm (an enum, so the engine dispatches with a `match`).
        #[derive(Debug)]
        pub enum AnyCc {
            /// See [`newreno::NewReno`].
            NewReno(newreno::NewReno),
            $(#[doc = concat!("See [`", stringify!($ty), "`].")] $variant($ty),)*
        }

        impl CongestionControl for AnyCc {
            fn name(&self) -> &'static str {
                match self { AnyCc::NewReno(a) => a.name(), $(AnyCc::$variant(a) => a.name(),)* }
            }
            #[inline]
            fn on_ack(&mut self, ack: &Ack) {
                match self { AnyCc::NewReno(a) => a.on_ack(ack), $(AnyCc::$variant(a) => a.on_ack(ack),)* }
            }
            fn on_loss(&mut self, loss: &Loss) {
                match self { AnyCc::NewReno(a) => a.on_loss(loss), $(AnyCc::$variant(a) => a.on_loss(loss),)* }
            }
            fn on_timeout(&mut self, now: Instant, backoff: u32) {
                match self {
                    AnyCc::NewReno(a) => a.on_timeout(now, backoff),
                    $(AnyCc::$variant(a) => a.on_timeout(now, backoff),)*
                }
            }
            #[inline]
            fn on_packet_sent(&mut self, sent: &Sent) {
                match self { AnyCc::NewReno(a) => a.on_packet_sent(sent), $(AnyCc::$variant(a) => a.on_packet_sent(sent),)* }
            }
            #[inline]
            fn on_packet_received(&mut self, now: Instant, bytes: u64) {
                match self {
                    AnyCc::NewReno(a) => a.on_packet_received(now, bytes),
                    $(AnyCc::$variant(a) => a.on_packet_received(now, bytes),)*
                }
            }
            fn on_custom(&mut self, now: Instant, msg: &[u8]) {
                match self { AnyCc::NewReno(a) => a.on_custom(now, msg), $(AnyCc::$variant(a) => a.on_custom(now, msg),)* }
            }
            #[inline]
            fn cwnd(&self) -> u64 {
                match self { AnyCc::NewReno(a) => a.cwnd(), $(AnyCc::$variant(a) => a.cwnd(),)* }
            }
            #[inline]
            fn pacing_rate(&self) -> u64 {
                match self { AnyCc::NewReno(a) => a.pacing_rate(), $(AnyCc::$variant(a) => a.pacing_rate(),)* }
            }
            fn ack_interval(&self) -> Option<u32> {
                match self { AnyCc::NewReno(a) => a.ack_interval(), $(AnyCc::$variant(a) => a.ack_interval(),)* }
            }
            fn paused_until(&self) -> Option<Instant> {
                match self { AnyCc::NewReno(a) => a.paused_until(), $(AnyCc::$variant(a) => a.paused_until(),)* }
            }
            fn packet_pairs(&self) -> bool {
                match self { AnyCc::NewReno(a) => a.packet_pairs(), $(AnyCc::$variant(a) => a.packet_pairs(),)* }
            }
            fn sends_messages(&self) -> bool {
                match self { AnyCc::NewReno(a) => a.sends_messages(), $(AnyCc::$variant(a) => a.sends_messages(),)* }
            }
            fn poll_message(&mut self, out: &mut [u8; MAX_CC_MSG]) -> usize {
                match self { AnyCc::NewReno(a) => a.poll_message(out), $(AnyCc::$variant(a) => a.poll_message(out),)* }
            }
            fn wants_packet_events(&self) -> bool {
                match self {
                    AnyCc::NewReno(a) => a.wants_packet_events(),
                    $(AnyCc::$variant(a) => a.wants_packet_events(),)*
                }
            }
        }
    };
}

algorithms! {
    Cubic = 1, "cubic", cubic::Cubic, cubic::Cubic::new, "CUBIC (RFC 9438): cubic window growth around the last maximum, β = 0.7";
    Bbr = 2, "bbr", bbr::Bbr, bbr::Bbr::new, "BBR v1: bottleneck bandwidth and min-RTT model, pacing-gain cycle; loss is not a signal";
    Udt = 3, "udt", udt::Udt, udt::Udt::new, "UDT native: DAIMD rate control from the link capacity, random loss decrease";
    UdtNoisy = 4, "udt-noisy", udt::Udt, udt::Udt::noisy, "UDT native in noisy-link mode: ignores the first loss of a congestion event, and losses while the path holds no queue";
    Scalable = 5, "scalable", scalable::Scalable, scalable::Scalable::new, "Scalable TCP: +1% of a packet per ACK, −1/8 on loss";
    HighSpeed = 6, "highspeed", highspeed::HighSpeed, highspeed::HighSpeed::new, "HighSpeed TCP (RFC 3649): a(w), b(w) from the response function";
    Bic = 7, "bic", bic::Bic, bic::Bic::new, "BiC: binary search toward the last maximum, then max probing";
    Westwood = 8, "westwood", westwood::Westwood, westwood::Westwood::new, "Westwood+: the bandwidth estimate sets ssthresh after a loss";
    Vegas = 9, "vegas", vegas::Vegas, vegas::Vegas::new, "Vegas: keeps 2 to 4 packets queued, from expected vs actual rate";
    Fast = 10, "fast", fast::Fast, fast::Fast::new, "FAST TCP: w ← (1−γ)w + γ(baseRTT/RTT·w + α) every RTT";
    Blast = 11, "blast", blast::Blast, blast::Blast::new, "fixed-rate blast: constant rate, changeable while running, ignores loss";
    Group = 12, "group", group::Group, group::Group::new, "group controller (GTP-style): rate assigned by a shared receiver-driven budget";
    BbrFair = 13, "bbr-fair", bbr::Bbr, bbr::Bbr::fair, "BBR that yields to loss-based flows: a loss while the path holds a queue caps its inflight at 0.7 of its window (regrowing a packet per window while a queue shows); random loss on an empty path changes nothing";
    Ctcp = 14, "ctcp", ctcp::Ctcp, ctcp::Ctcp::new, "CTCP tokens (coded transport): Vegas-like on the share of the RTT queued; random loss returns its token, a loss surge on a queued path or a timeout cuts";
}

/// Pacing rate for a window-based algorithm: `gain × cwnd / srtt` (0 until the RTT is known),
/// with NewReno's gains: 2 in slow start, 1.25 otherwise.
pub(crate) fn window_pacing(cwnd: u64, srtt_us: u64, slow_start: bool) -> u64 {
    if srtt_us == 0 || cwnd == u64::MAX {
        return 0;
    }
    let gain = if slow_start { 2.0 } else { 1.25 };
    (gain * cwnd as f64 * 1e6 / srtt_us as f64) as u64
}

/// The Reno skeleton most window algorithms share: slow start, a recovery period that
/// allows one decrease per window of data, and the collapse on a timeout.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Window {
    pub mss: u64,
    pub cwnd: u64,
    pub ssthresh: u64,
    pub min_cwnd: u64,
    pub recovery_start: Option<Instant>,
    pub srtt_us: u64,
    /// Bytes acknowledged in congestion avoidance since the window last grew.
    pub acked_in_ca: u64,
    /// Fraction of a byte of growth not yet added to the window.
    pub carry: f64,
}

impl Window {
    pub fn new(cfg: &Config) -> Self {
        let mss = cfg.mss.max(1);
        Window {
            mss,
            cwnd: mss * cfg.initial_window.max(2),
            ssthresh: u64::MAX,
            min_cwnd: 2 * mss,
            recovery_start: None,
            srtt_us: 0,
            acked_in_ca: 0,
            carry: 0.0,
        }
    }

    /// Records the smoothed RTT an ACK carries; true when the ACK may grow the window
    /// (its packet was sent after the last decrease).
    pub fn ack_opens(&mut self, a: &Ack) -> bool {
        self.srtt_us = a.srtt_us;
        !self.in_recovery(a.sent_at)
    }

    /// Records the smoothed RTT a loss carries; true when the loss starts a new congestion
    /// event (its packet was sent after the last decrease).
    pub fn loss_opens(&mut self, l: &Loss) -> bool {
        self.srtt_us = l.srtt_us;
        !self.in_recovery(l.sent_at)
    }

    /// Reno growth: the acknowledged bytes in slow start, one packet per window of
    /// acknowledged bytes in congestion avoidance.
    pub fn reno_increase(&mut self, bytes: u64) {
        if self.slow_start() {
            self.cwnd += bytes;
            return;
        }
        self.acked_in_ca += bytes;
        if self.acked_in_ca >= self.cwnd {
            self.acked_in_ca -= self.cwnd;
            self.cwnd += self.mss;
        }
    }

    /// Grows the window by a fractional number of bytes, carrying the fraction over.
    pub fn grow(&mut self, bytes: f64) {
        self.carry += bytes;
        let whole = self.carry.floor();
        self.carry -= whole;
        self.cwnd += whole as u64;
    }

    /// True while `sent_at` belongs to the window already penalised.
    pub fn in_recovery(&self, sent_at: Instant) -> bool {
        self.recovery_start.is_some_and(|r| sent_at <= r)
    }

    pub fn slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// Starts a recovery period with the window cut to `new_cwnd`.
    pub fn decrease(&mut self, now: Instant, new_cwnd: u64) {
        self.recovery_start = Some(now);
        self.acked_in_ca = 0;
        self.ssthresh = new_cwnd.max(self.min_cwnd);
        self.cwnd = self.ssthresh;
    }

    /// RFC 5681 on a timeout: ssthresh to half, window to the minimum.
    pub fn timeout(&mut self, now: Instant) {
        self.ssthresh = (self.cwnd / 2).max(self.min_cwnd);
        self.cwnd = self.min_cwnd;
        self.recovery_start = Some(now);
    }

    pub fn pacing(&self) -> u64 {
        window_pacing(self.cwnd, self.srtt_us, self.slow_start())
    }
}

/// Deterministic 64-bit mix (splitmix64), for the few algorithms that randomise.
pub(crate) fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
pub(crate) mod test_util {
    use super::*;

    pub const MSS: u64 = 1000;

    pub fn cfg() -> Config {
        Config {
            mss: MSS,
            initial_window: 10,
            rate: 1_000_000,
            max_window: 1000,
        }
    }

    pub fn ms(v: u64) -> Instant {
        Instant::from_micros(1_000_000 + v * 1000)
    }

    /// An ACK of one full packet sent `rtt_ms` before `now_ms`.
    pub fn ack(pn: u64, now_ms: u64, rtt_ms: u64) -> Ack {
        Ack {
            now: ms(now_ms),
            pn,
            bytes: MSS,
            sent_at: ms(now_ms.saturating_sub(rtt_ms)),
            rtt_us: rtt_ms * 1000,
            srtt_us: rtt_ms * 1000,
            min_rtt_us: rtt_ms * 1000,
            bytes_in_flight: 0,
            delivery_rate: 0,
        }
    }

    pub fn loss(pn: u64, now_ms: u64, sent_ms: u64, largest: u64) -> Loss {
        Loss {
            now: ms(now_ms),
            first_pn: pn,
            last_pn: pn,
            bytes: MSS,
            sent_at: ms(sent_ms),
            largest_sent_pn: largest,
            srtt_us: 100_000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_list_the_known_ones() {
        for &k in CcKind::ALL {
            assert_eq!(CcKind::from_name(k.name()), Some(k));
            assert_eq!(CcKind::from_id(k.id()), Some(k));
            let a = by_name(k.name(), &Config::default()).unwrap();
            assert_eq!(a.name(), k.name());
            assert!(a.cwnd() > 0);
        }
        assert_eq!(CcKind::from_id(999), None);
        let e = by_name("reno2", &Config::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`reno2`") && e.contains("cubic") && e.contains("udt-noisy"),
            "{e}"
        );
    }

    #[test]
    fn the_trait_is_object_safe_and_defaults_are_no_ops() {
        #[derive(Debug)]
        struct Fixed;
        impl CongestionControl for Fixed {
            fn name(&self) -> &'static str {
                "fixed"
            }
            fn cwnd(&self) -> u64 {
                10_000
            }
            fn pacing_rate(&self) -> u64 {
                1_000_000
            }
        }
        let mut b: Box<dyn CongestionControl> = Box::new(Fixed);
        b.on_ack(&test_util::ack(1, 10, 10));
        b.on_timeout(test_util::ms(10), 1);
        b.on_custom(test_util::ms(10), b"junk");
        assert_eq!((b.cwnd(), b.pacing_period_us(1000)), (10_000, Some(1000)));
        assert_eq!(b.ack_interval(), None);
        let boxed: Box<dyn CongestionControl> =
            Box::new(by_name("cubic", &Config::default()).unwrap());
        assert_eq!(boxed.name(), "cubic");
    }

    #[test]
    fn rate_messages_round_trip_and_junk_is_rejected() {
        let m = RateMessage(123_456_789);
        assert_eq!(RateMessage::decode(&m.encode()), Some(m));
        assert_eq!(RateMessage::decode(b""), None);
        assert_eq!(RateMessage::decode(b"R1234567"), None);
        assert_eq!(RateMessage::decode(b"X12345678"), None);
    }
}
