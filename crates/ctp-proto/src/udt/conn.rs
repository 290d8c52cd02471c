//! One UDT connection, sans-IO: set-up, the data path and its timers (UDT 4.11 `CUDT`;
//! draft-gg-udt-03 §3–§6).
//!
//! Timers, as the draft names them (§4):
//! - **ACK** every SYN = 10 ms: a full ACK (RTT, RTT variance, available buffer, arrival
//!   speed, link capacity) when the acknowledgement point moved or, unchanged and not yet
//!   confirmed by ACK2, after 2 RTT; a *light* ACK every 64 packets in between.
//! - **NAK**: a gap is reported at once; each range of the receiver's loss list is
//!   reported again only once `k`·RTT passed since its last report, `k` = 2, 3, … (capped)
//!   counting its reports (draft-gg-udt-03, the receiver's loss list), so a loss whose
//!   retransmission is still on its way is not reported twice, and a lost NAK or a lost
//!   retransmission is reported again. The timer fires when the next range falls due.
//! - **EXP**: nothing heard for `count·(RTT + 4·RTTVar) + SYN` (at least `count·300 ms`):
//!   packets in flight are presumed lost, otherwise a keep-alive goes out; after 16
//!   expirations and [`UdtConfig::expiry`] of silence the connection is broken. A peer's
//!   keep-alive (sent after a second without sending) counts as hearing from it, but
//!   neither restarts the timer nor resets its count while packets are in flight.
//! - **SND**: the inter-packet period from the congestion controller (UDT4's `m_ullInterval`);
//!   packets whose sequence number is a multiple of 16 leave back to back with their
//!   successor (the receiver's packet-pair capacity probe).
//!
//! Congestion control is any algorithm of the [`ctp_cc`] library (UDT native by default):
//! its window (bytes → packets) and pacing period drive the sender, its `on_ack` sees one
//! event per ACK with the newly acknowledged bytes and a delivery rate — for UDT native the
//! receiver's arrival speed, as in UDT4; for the others (BBR) the sender's own sample
//! ([`ctp_cc::rate`]: packets a token bucket releases in clumps make the receiver's
//! intervals read ten times the link) — `on_loss` one event per NAK range, `on_timeout`
//! each EXP expiry with data in flight. Their window counts only the packets whose fate
//! is unknown ([`Sender::unsettled`]); UDT native counts every unacknowledged one.
//!
//! ctp extension (invisible to UDT4, which passes unknown user-defined control packets to
//! its congestion controller and ignores them): a stream can be *finished* without closing
//! the connection ([`UdtConnection::stream_finish`]) with a user-defined control packet of
//! extended type [`EXT_FIN`] carrying the end sequence number, acknowledged by
//! [`EXT_FIN_ACK`]. `--raw` transfers do not use it: closing the connection (UDT's
//! shutdown) marks the end of the file, as any UDT4 application expects.

use super::handshake::{check_compatible, Proposal};
use super::loss::{Wait, FIRST_K};
use super::packet::{
    nak_ranges, nak_words, req, AckBody, Control, ControlBody, DataHeader, Handshake, Packet,
    HEADER_LEN, MAX_NAK_WORDS,
};
use super::receiver::Receiver;
use super::sender::{Next, Sender};
use super::seq;
use crate::conn_core::{ConnectionCore, Dropped};
use crate::conn_state::{ConnectionState, MsgOptions, ReadError, WriteError, STREAM_CHUNK};
use crate::engine::session::CloseReason;
use crate::perfmon::{PerfInstant, PerfMon, PerfMonitor};
use crate::profile::{MicroSet, Params, Profile};
use crate::stats::ConnectionStats;
use bytes::Bytes;
use core::time::Duration;
use ctp_cc::pace::{PaceClock, Spacing};
use ctp_cc::rate::{Acks, DeliveryRate};
use ctp_cc::time::Instant;
use ctp_cc::{self as cc, Ack, AnyCc, CcKind, CongestionControl, Loss, Sent};
use std::collections::VecDeque;
use std::net::SocketAddr;

/// The rate-control and ACK interval, microseconds.
pub const SYN_US: u64 = 10_000;
/// Handshake retransmission interval (UDT4: 250 ms).
pub const HANDSHAKE_INTERVAL: Duration = Duration::from_millis(250);
/// Light ACK after this many packets.
pub const LIGHT_ACK_PACKETS: u32 = 64;
/// Smallest RTT the NAK timer counts with, microseconds: a loss is reported again at the
/// earliest `2 · NAK_MIN_RTT_US` after its last report (20 ms, the old periodic-NAK floor),
/// however short the path.
pub const NAK_MIN_RTT_US: u64 = SYN_US;
/// Smallest EXP interval per expiration, microseconds (UDT4: 300 ms).
pub const MIN_EXP_US: u64 = 300_000;
/// Expirations before the connection may be declared broken (UDT4: 16).
pub const MAX_EXP_COUNT: u32 = 16;
/// A keep-alive goes out after this long without sending anything.
pub const KEEPALIVE_US: u64 = 1_000_000;
/// ACK records kept to match ACK2s.
pub const ACK_WINDOW: usize = 1024;
/// Control packets queued at most (beyond, new ones are dropped: a peer flooding ACKs or
/// handshakes cannot grow the queue of answers).
pub const MAX_CTRL_QUEUE: usize = 4096;
/// IP + UDP header bytes that UDT's MSS includes.
pub const IP_UDP_OVERHEAD: u32 = 28;
/// Extended type of the ctp end-of-stream control packet (ASCII "CF").
pub const EXT_FIN: u16 = 0x4346;
/// Extended type of its acknowledgement (ASCII "Cf").
pub const EXT_FIN_ACK: u16 = 0x4366;
/// How long a closed connection lingers to get its SHUTDOWN out.
pub const LINGER: Duration = Duration::from_millis(30);
/// On a message connection, how long SHUTDOWN waits after everything was acknowledged.
/// UDT4's blocking `recvmsg` throws away a message it has just read when SHUTDOWN arrives
/// at the same moment (`core.cpp`: the broken check after `readMsg`); the grace lets the
/// application drain its receive buffer first. Stream `recv` has no such race.
pub const DGRAM_SHUTDOWN_GRACE: Duration = Duration::from_millis(200);

/// What a UDT connection is set up with.
#[derive(Clone, Debug)]
pub struct UdtConfig {
    /// Message (datagram) socket rather than a stream.
    pub dgram: bool,
    /// Maximum packet size, IP datagram bytes (UDT4 default 1500).
    pub mss: u32,
    /// Flow window and receive buffer, packets.
    pub flow_window: u32,
    /// Send buffer limit, bytes.
    pub send_buffer: usize,
    /// Congestion control.
    pub cc: CcKind,
    /// Rate for rate-configured algorithms, bytes/s.
    pub cc_rate: u64,
    /// Give up set-up after this long.
    pub handshake_timeout: Duration,
    /// Silence after which (and 16 expirations) the connection is broken.
    pub expiry: Duration,
}

impl Default for UdtConfig {
    fn default() -> Self {
        UdtConfig {
            dgram: false,
            mss: 1500,
            flow_window: 8192,
            send_buffer: 16 << 20,
            cc: CcKind::Udt,
            cc_rate: 12_500_000,
            handshake_timeout: Duration::from_secs(10),
            expiry: Duration::from_secs(5),
        }
    }
}

/// How the connection is being set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Client: the cookie once the server sent one.
    Client { cookie: Option<i32> },
    /// Server: created from a valid cookie echo.
    Server,
    /// Rendezvous.
    Rendezvous,
}

/// One UDT connection.
#[derive(Debug)]
pub struct UdtConnection {
    /// Where it is in its life.
    pub state: ConnectionState,
    /// Something changed for the application.
    pub activity: bool,
    role: Role,
    remote: SocketAddr,
    cfg: UdtConfig,
    prop: Proposal,
    /// The peer's socket id (0 until known).
    peer_id: u32,
    peer_isn: u32,
    /// Payload bytes of the data packets sent: what the negotiated MSS allows.
    payload: usize,
    /// Largest payload a received data packet may carry: what the MSS this side proposed
    /// allows (a larger one is dropped: the receive buffer is sized in such packets).
    max_rcv_payload: usize,
    start: Instant,
    ctrl_out: VecDeque<Control>,
    snd: Sender,
    rcv: Receiver,
    cc: AnyCc,
    /// The sender's delivery-rate samples, for controllers that model the path (BBR). UDT
    /// native reads the receiver's arrival speed from the full ACK instead, as UDT4 does.
    rate: DeliveryRate,
    /// The sender's own round-trip samples (ACK arrival − send time of the newest packet it
    /// covers), latest and smallest, for controllers that model the path: the ACK's RTT
    /// field is the receiver's estimate, which starts at UDT's initial 100 ms before any
    /// ACK2 returned, and a delay-based controller would take that for the base RTT.
    own_rtt: Option<OwnRtt>,
    peer_window: u64,
    peer_avail: u64,
    // timers
    hs_next: Option<Instant>,
    hs_give_up: Instant,
    next_ack: Instant,
    /// When the next receiver loss falls due for a report again (`None`: none lost).
    next_nak: Option<Instant>,
    exp_count: u32,
    exp_base: Instant,
    last_rsp: Instant,
    last_sent: Instant,
    /// When the next data packet may leave (trains at high rates, see [`ctp_cc::pace`]).
    pace: PaceClock,
    linger_until: Option<Instant>,
    shutdown_at: Option<Instant>,
    // RTT (receiver side from ACK/ACK2, sender side from the ACK's fields)
    rtt_us: u64,
    rttvar_us: u64,
    // receiver ACK bookkeeping
    ack_seq: u32,
    ack_window: VecDeque<(u32, u64, Instant)>,
    last_ack: u64,
    last_ack_time: Instant,
    last_ack2: u64,
    last_rate_ack: Instant,
    light_count: u32,
    // closing
    closing: bool,
    fin: Option<u64>,
    fin_acked: bool,
    peer_fin: Option<u64>,
    peer_closed: bool,
    /// Counters.
    pub stats: ConnectionStats,
    // performance monitor
    perf: PerfMonitor,
    /// Since when the sender has had data (UDT's send duration), if it has.
    busy_since: Option<Instant>,
    /// The microprotocols and parameters of the profile it runs (what UDT is made of).
    profile: (MicroSet, Params),
    /// The link capacity the peer's last full ACK reported, packets/s.
    peer_capacity: u32,
}

/// Data payload bytes per packet at maximum packet size `mss` (an IP datagram: UDT4's
/// `m_iPayloadSize`, the MSS less the IP, UDP and UDT headers).
fn payload_for(mss: u32) -> usize {
    mss.saturating_sub(IP_UDP_OVERHEAD + HEADER_LEN as u32)
        .max(16) as usize
}

/// The congestion controller of `cfg` for packets of `payload` bytes.
fn build_cc(cfg: &UdtConfig, payload: usize) -> AnyCc {
    cfg.cc.build(&cc::Config {
        mss: payload as u64,
        initial_window: 16,
        rate: cfg.cc_rate,
        max_window: u64::from(cfg.flow_window),
    })
}

/// UDT native (or its noisy-link mode): the controller that keeps UDT4's own accounting.
fn is_udt_native(cc: &AnyCc) -> bool {
    matches!(cc, AnyCc::Udt(_) | AnyCc::UdtNoisy(_))
}

/// The sender's own round-trip samples: the latest and the smallest.
#[derive(Clone, Copy, Debug)]
struct OwnRtt {
    latest_us: u64,
    min_us: u64,
}

impl UdtConnection {
    fn new(
        now: Instant,
        role: Role,
        remote: SocketAddr,
        cfg: UdtConfig,
        socket_id: u32,
        isn: u32,
    ) -> Self {
        let payload = payload_for(cfg.mss);
        let cc = build_cc(&cfg, payload);
        let rate = if cc.wants_packet_events() && !is_udt_native(&cc) {
            DeliveryRate::new(u64::from(cfg.flow_window), Acks::Cumulative)
        } else {
            DeliveryRate::off()
        };
        let prop = Proposal {
            dgram: cfg.dgram,
            isn,
            mss: cfg.mss,
            flow_window: cfg.flow_window,
            socket_id,
        };
        UdtConnection {
            state: ConnectionState::Initiating,
            activity: false,
            role,
            remote,
            prop,
            peer_id: 0,
            peer_isn: 0,
            payload,
            max_rcv_payload: payload,
            start: now,
            ctrl_out: VecDeque::new(),
            snd: Sender::new(payload, cfg.send_buffer),
            rcv: Receiver::new(cfg.dgram, cfg.flow_window as usize, payload),
            cc,
            rate,
            own_rtt: None,
            peer_window: u64::from(cfg.flow_window),
            peer_avail: u64::from(cfg.flow_window),
            hs_next: Some(now),
            hs_give_up: now + cfg.handshake_timeout,
            next_ack: now,
            next_nak: None,
            exp_count: 1,
            exp_base: now,
            last_rsp: now,
            last_sent: now,
            pace: PaceClock::new(),
            linger_until: None,
            shutdown_at: None,
            rtt_us: 10 * SYN_US,
            rttvar_us: 5 * SYN_US,
            ack_seq: 0,
            ack_window: VecDeque::new(),
            last_ack: 0,
            last_ack_time: now,
            last_ack2: 0,
            last_rate_ack: now,
            light_count: 0,
            closing: false,
            fin: None,
            fin_acked: false,
            peer_fin: None,
            peer_closed: false,
            stats: ConnectionStats::default(),
            perf: PerfMonitor::new(now),
            busy_since: None,
            profile: (MicroSet::default(), Params::default()),
            peer_capacity: 0,
            cfg,
        }
    }

    /// A client connection: it starts sending requests at once.
    pub fn client(
        now: Instant,
        remote: SocketAddr,
        cfg: UdtConfig,
        socket_id: u32,
        isn: u32,
    ) -> Self {
        Self::new(
            now,
            Role::Client { cookie: None },
            remote,
            cfg,
            socket_id,
            isn,
        )
    }

    /// A rendezvous connection: both sides send rendezvous requests.
    pub fn rendezvous(
        now: Instant,
        remote: SocketAddr,
        cfg: UdtConfig,
        socket_id: u32,
        isn: u32,
    ) -> Self {
        Self::new(now, Role::Rendezvous, remote, cfg, socket_id, isn)
    }

    /// A server connection for a client's valid cookie echo `hs`; established at once and
    /// answering with its response. Both directions start at the client's sequence number,
    /// as UDT4 does.
    pub fn server(
        now: Instant,
        remote: SocketAddr,
        mut cfg: UdtConfig,
        socket_id: u32,
        hs: &Handshake,
    ) -> Self {
        cfg.mss = cfg.mss.min(hs.mss as u32);
        cfg.flow_window = cfg.flow_window.min(hs.flow_window as u32);
        let isn = hs.isn as u32 & super::packet::MAX_SEQ;
        let mut c = Self::new(now, Role::Server, remote, cfg, socket_id, isn);
        c.hs_next = None;
        c.establish(now, hs);
        c.queue_handshake(req::RESPONSE, hs.cookie);
        c
    }

    /// Records the profile this connection runs (what [`ConnectionCore::micros`] and
    /// [`ConnectionCore::params`] report).
    pub fn with_profile(mut self, profile: &Profile) -> Self {
        self.profile = (profile.micros, profile.params);
        self
    }

    /// True for a message (datagram) connection.
    pub fn is_dgram(&self) -> bool {
        self.cfg.dgram
    }

    /// This side's socket id.
    pub fn socket_id(&self) -> u32 {
        self.prop.socket_id
    }

    /// The peer's socket id (0 until known).
    pub fn peer_id(&self) -> u32 {
        self.peer_id
    }

    /// True for a rendezvous connection.
    pub fn is_rendezvous(&self) -> bool {
        self.role == Role::Rendezvous
    }

    /// The peer's address.
    pub fn remote(&self) -> SocketAddr {
        self.remote
    }

    /// Data payload bytes per packet.
    pub fn payload_size(&self) -> usize {
        self.payload
    }

    fn timestamp(&self, now: Instant) -> u32 {
        now.saturating_since(self.start).as_micros() as u32
    }

    fn wire_snd(&self, ext: u64) -> u32 {
        seq::add(self.prop.isn, (ext % (1 << 31)) as i32)
    }

    fn wire_rcv(&self, ext: u64) -> u32 {
        seq::add(self.peer_isn, (ext % (1 << 31)) as i32)
    }

    /// The extended number of wire sequence number `s` near extended `reference`.
    fn ext_near(reference: u64, reference_wire: u32, s: u32) -> Option<u64> {
        reference.checked_add_signed(i64::from(seq::offset(reference_wire, s)))
    }

    /// Queues a control packet (dropped when the queue is full).
    fn push_ctrl(&mut self, c: Control) {
        if self.ctrl_out.len() < MAX_CTRL_QUEUE {
            self.ctrl_out.push_back(c);
        }
    }

    fn queue_ctrl(&mut self, info: u32, body: ControlBody) {
        self.push_ctrl(Control::new(info, 0, self.peer_id, body));
    }

    fn queue_handshake(&mut self, req_type: i32, cookie: i32) {
        let hs = self.prop.handshake(req_type, cookie, self.remote);
        // The first request of a client or rendezvous side goes to socket 0.
        let dst = if req_type == req::RESPONSE {
            self.peer_id
        } else {
            0
        };
        self.push_ctrl(Control::new(0, 0, dst, ControlBody::Handshake(hs)));
    }

    fn establish(&mut self, now: Instant, hs: &Handshake) {
        self.adopt_mss(hs.mss as u32);
        self.peer_id = hs.socket_id as u32;
        self.peer_isn = hs.isn as u32 & super::packet::MAX_SEQ;
        let w = (hs.flow_window.max(2) as u64).min(u64::from(self.cfg.flow_window));
        self.peer_window = w;
        self.peer_avail = w;
        self.state = ConnectionState::Established;
        self.hs_next = None;
        self.activity = true;
        self.last_rsp = now;
        self.next_ack = now + Duration::from_micros(SYN_US);
    }

    /// Sends packets no larger than the peer's `mss` allows (the server's response carries
    /// the smaller of both sides' MSS, a rendezvous peer's handshake its own). Nothing was
    /// written before set-up, so the sender and the congestion controller start afresh
    /// with the new packet size. What this side accepts stays what it proposed.
    fn adopt_mss(&mut self, mss: u32) {
        self.cfg.mss = self.cfg.mss.min(mss);
        let payload = payload_for(self.cfg.mss);
        if payload == self.payload {
            return;
        }
        debug_assert!(self.snd.is_empty(), "data queued before set-up");
        self.payload = payload;
        self.snd = Sender::new(payload, self.cfg.send_buffer);
        self.cc = build_cc(&self.cfg, payload);
    }

    /// Handles a handshake addressed to this connection.
    pub fn on_handshake(&mut self, now: Instant, hs: &Handshake) {
        if let Err(why) = check_compatible(hs, self.cfg.dgram) {
            if self.state == ConnectionState::Initiating {
                self.terminate(CloseReason::Handshake(format!(
                    "{} refused: {why}",
                    self.remote
                )));
            }
            return;
        }
        match self.role {
            Role::Client { .. } if self.state == ConnectionState::Initiating => {
                if hs.req_type == req::REQUEST && hs.cookie != 0 {
                    // The server's cookie challenge: echo it.
                    self.role = Role::Client {
                        cookie: Some(hs.cookie),
                    };
                    self.queue_handshake(req::RESPONSE, hs.cookie);
                    self.hs_next = Some(now + HANDSHAKE_INTERVAL);
                } else if hs.req_type == req::RESPONSE && hs.socket_id != 0 {
                    self.establish(now, hs);
                }
            }
            Role::Rendezvous => {
                if self.state == ConnectionState::Initiating {
                    self.peer_id = hs.socket_id as u32;
                    if hs.req_type == req::RENDEZVOUS {
                        self.queue_handshake(req::RESPONSE, 0);
                    } else if hs.req_type == req::RESPONSE || hs.req_type == req::RESPONSE2 {
                        self.establish(now, hs);
                        self.queue_handshake(req::RESPONSE, 0);
                    }
                } else if hs.req_type == req::RENDEZVOUS {
                    // The peer missed our response.
                    self.queue_handshake(req::RESPONSE, 0);
                }
            }
            Role::Server => {
                if hs.req_type == req::RESPONSE {
                    // A repeated cookie echo: our response was lost.
                    self.queue_handshake(req::RESPONSE, hs.cookie);
                }
            }
            Role::Client { .. } => {}
        }
    }

    /// Handles a packet addressed to this connection.
    pub fn on_packet(&mut self, now: Instant, p: Packet<'_>, wire_len: usize) {
        self.stats.packets_received += 1;
        self.stats.bytes_received += wire_len as u64;
        if matches!(self.state, ConnectionState::Closed(_)) {
            return;
        }
        if let Packet::Control(Control {
            body: ControlBody::Handshake(hs),
            ..
        }) = &p
        {
            return self.on_handshake(now, hs);
        }
        if !self.is_open() {
            return;
        }
        self.last_rsp = now;
        // A keep-alive says the peer lives, nothing about our data: while packets are in
        // flight it must not restart (nor un-back-off) the timer that presumes them lost.
        // The peer sends one after a second of silence; with an EXP interval above a
        // second, a flight lost whole — a tail in an outage — would otherwise never be sent
        // again. (UDT4 has no such keep-alive, only the EXP's own, whose spacing grows.)
        let keep_alive = matches!(
            p,
            Packet::Control(Control {
                body: ControlBody::KeepAlive(_),
                ..
            })
        );
        if !(keep_alive && self.snd.in_flight() > 0) {
            self.exp_base = now;
            self.exp_count = 1;
        }
        match p {
            Packet::Data(h, payload) => self.on_data(now, &h, payload),
            Packet::Control(c) => self.on_control(now, c),
        }
    }

    fn is_open(&self) -> bool {
        matches!(
            self.state,
            ConnectionState::Established | ConnectionState::Closing
        )
    }

    fn on_data(&mut self, now: Instant, h: &DataHeader, payload: &[u8]) {
        if payload.len() > self.max_rcv_payload {
            // Larger than the MSS this side proposed allows: no UDT4 sender makes such a
            // packet, and buffering it would let a peer hold a flow window of 64 KB
            // datagrams instead of full-size packets.
            self.stats.oversize_dropped += 1;
            return;
        }
        self.stats.segments_received += 1;
        let reference = self.rcv.next_expected();
        let Some(ext) = Self::ext_near(reference, self.wire_rcv(reference), h.seq) else {
            self.stats.duplicate_segments += 1;
            return;
        };
        self.rcv.on_arrival(now, h.seq);
        self.cc.on_packet_received(now, payload.len() as u64);
        let a = self.rcv.on_data(
            now,
            ext,
            h.boundary,
            h.in_order,
            Bytes::copy_from_slice(payload),
        );
        if a.duplicate {
            self.stats.duplicate_segments += 1;
        }
        if a.no_room {
            self.stats.out_of_window_segments += 1;
        }
        if let Some((x, y)) = a.new_loss {
            self.stats.receiver_losses += y - x + 1;
            self.send_nak(&[(x, y)]);
            let due = now + Duration::from_micros(self.nak_wait().after(FIRST_K));
            self.arm_nak(due);
        }
        if self.rcv.queued_bytes() > 0 {
            self.activity = true;
        }
        self.light_count += 1;
        if self.light_count >= LIGHT_ACK_PACKETS {
            self.send_ack(now, true);
        }
        self.check_peer_fin();
    }

    fn send_nak(&mut self, ranges: &[(u64, u64)]) {
        let mut words = Vec::new();
        let wire: Vec<(u32, u32)> = ranges
            .iter()
            .map(|&(a, b)| (self.wire_rcv(a), self.wire_rcv(b)))
            .collect();
        nak_words(wire, &mut words);
        words.truncate(MAX_NAK_WORDS);
        if words.last().is_some_and(|w| w & 0x8000_0000 != 0) {
            words.pop();
        }
        if words.is_empty() {
            return;
        }
        self.stats.naks_sent += 1;
        self.queue_ctrl(0, ControlBody::Nak(words));
    }

    /// How long a reported loss waits before it is reported again: `k` RTTs (at least
    /// [`NAK_MIN_RTT_US`] each), but at most halfway from one RTT to the peer's EXP
    /// interval (`max(RTT + 4·RTTVar + SYN, 300 ms)`, as [`Self::exp_interval`] computes it
    /// for one expiration): the sender resends its whole flight when EXP expires, and with
    /// the head of the window lost and the flow window full it hears nothing else, so the
    /// report must reach it first. This only shortens the wait on paths whose RTT is near
    /// or above 150 ms.
    fn nak_wait(&self) -> Wait {
        let rtt_us = self.rtt_us.max(NAK_MIN_RTT_US);
        let exp = (self.rtt_us + 4 * self.rttvar_us + SYN_US).max(MIN_EXP_US);
        Wait {
            rtt_us,
            cap_us: (rtt_us + exp.saturating_sub(rtt_us) / 2).max(rtt_us),
        }
    }

    /// Makes the NAK timer fire by `at` at the latest.
    fn arm_nak(&mut self, at: Instant) {
        self.next_nak = Some(self.next_nak.map_or(at, |t| t.min(at)));
    }

    /// The NAK timer: reports the losses that fell due (at most what one NAK carries; the
    /// rest stay due, so the timer fires again at once) and waits for the next one.
    fn on_nak_timer(&mut self, now: Instant) {
        let wait = self.nak_wait();
        let (ranges, next) = self.rcv.due_losses(now, wait, MAX_NAK_WORDS / 2);
        if !ranges.is_empty() {
            self.send_nak(&ranges);
        }
        self.next_nak = next;
    }

    /// Sends an ACK: a light one (`light`) or a full/lite one as UDT4 does.
    fn send_ack(&mut self, now: Instant, light: bool) {
        self.light_count = 0;
        let ack = self.rcv.ack_point();
        let wire = self.wire_rcv(ack);
        if light {
            if ack > self.last_ack {
                self.stats.acks_sent += 1;
                self.queue_ctrl(
                    0,
                    ControlBody::Ack(AckBody {
                        ack: wire,
                        lite: None,
                        full: None,
                    }),
                );
            }
            return;
        }
        if ack == self.last_ack2 && ack == self.last_ack {
            return;
        }
        if ack == self.last_ack
            && now.saturating_since(self.last_ack_time).as_micros() < u128::from(2 * self.rtt_us)
        {
            return;
        }
        self.ack_seq = if self.ack_seq >= super::packet::MAX_SEQ {
            1
        } else {
            self.ack_seq + 1
        };
        let lite = Some((
            self.rtt_us as u32,
            self.rttvar_us as u32,
            self.rcv.available().max(2),
        ));
        let full = (now.saturating_since(self.last_rate_ack).as_micros() >= u128::from(SYN_US))
            .then(|| {
                self.last_rate_ack = now;
                (self.rcv.arrival_rate(), self.rcv.capacity())
            });
        self.stats.acks_sent += 1;
        self.queue_ctrl(
            self.ack_seq,
            ControlBody::Ack(AckBody {
                ack: wire,
                lite,
                full,
            }),
        );
        if self.ack_window.len() == ACK_WINDOW {
            self.ack_window.pop_front();
        }
        self.ack_window.push_back((self.ack_seq, ack, now));
        self.last_ack = ack;
        self.last_ack_time = now;
    }

    fn on_control(&mut self, now: Instant, c: Control) {
        match c.body {
            ControlBody::Ack(a) => self.on_ack(now, c.info, &a),
            ControlBody::Ack2(_) => {
                // As UDT4's ACK window: an ACK is answered once. The entry and every older
                // one go, so a duplicated or replayed ACK2 (seconds later) finds nothing
                // instead of feeding a huge RTT sample, which would stretch the sender's
                // retransmission timer past the end of the connection.
                if let Some(i) = self.ack_window.iter().position(|r| r.0 == c.info) {
                    let (_, ack, t) = self.ack_window[i];
                    self.ack_window.drain(..=i);
                    let sample = now.saturating_since(t).as_micros() as u64;
                    self.rttvar_us = (self.rttvar_us * 3 + self.rtt_us.abs_diff(sample)) / 4;
                    self.rtt_us = (self.rtt_us * 7 + sample) / 8;
                    self.last_ack2 = self.last_ack2.max(ack);
                }
            }
            ControlBody::Nak(words) => self.on_nak(now, &words),
            ControlBody::DropRequest(Some((a, b))) => {
                let reference = self.rcv.next_expected();
                let rw = self.wire_rcv(reference);
                if let (Some(x), Some(y)) = (
                    Self::ext_near(reference, rw, a),
                    Self::ext_near(reference, rw, b),
                ) {
                    if self.rcv.drop_message(x, y) {
                        self.stats.out_of_window_segments += 1;
                    }
                    if !self.rcv.loss().is_empty() {
                        // A gap before the dropped message is reported by the timer.
                        self.arm_nak(now);
                    }
                    self.stats.messages_abandoned += 1;
                    self.activity = true;
                }
            }
            ControlBody::Shutdown(_) => {
                self.peer_closed = true;
                self.terminate(CloseReason::Graceful);
            }
            ControlBody::User(body) if c.reserved == EXT_FIN => {
                if let Ok(w) = <[u8; 8]>::try_from(&body[..]) {
                    self.peer_fin = Some(u64::from_be_bytes(w));
                }
                let mut ack = Control::new(0, 0, self.peer_id, ControlBody::User(body));
                ack.reserved = EXT_FIN_ACK;
                self.push_ctrl(ack);
                self.check_peer_fin();
            }
            ControlBody::User(_) if c.reserved == EXT_FIN_ACK => {
                self.fin_acked = true;
                self.progress_close(now);
            }
            ControlBody::User(body) => self.cc.on_custom(now, &body),
            _ => {}
        }
    }

    fn check_peer_fin(&mut self) {
        if self
            .peer_fin
            .is_some_and(|f| self.rcv.ack_point() >= f && !self.peer_closed)
        {
            self.peer_closed = true;
            self.activity = true;
        }
    }

    fn on_ack(&mut self, now: Instant, ack_seq: u32, a: &AckBody) {
        self.stats.acks_received += 1;
        if let Some((rtt, _var, avail)) = a.lite {
            self.queue_ctrl(ack_seq, ControlBody::Ack2(Some(0)));
            // As UDT4's sender: the ACK's RTT smoothed again; the variance from its own
            // differences (the ACK's variance field is not used).
            let rtt = u64::from(rtt);
            self.rttvar_us = (self.rttvar_us * 3 + self.rtt_us.abs_diff(rtt)) / 4;
            self.rtt_us = (self.rtt_us * 7 + rtt) / 8;
            self.peer_avail = u64::from(avail);
        }
        let una = self.snd.una();
        let Some(ext) = Self::ext_near(una, self.wire_snd(una), a.ack) else {
            return;
        };
        // When the newest packet this ACK covers last left (a controller's recovery check
        // compares it with its last cut); an ACK that covers nothing new falls back to one
        // round trip ago.
        let newest_sent = self.snd.get(ext.saturating_sub(1)).map(|p| p.sent_at);
        let (pkts, bytes) = self.snd.ack(ext);
        if self.snd.is_empty() {
            self.stop_busy(now);
        }
        let (rate, capacity) = a.full.unwrap_or((0, 0));
        if capacity > 0 {
            self.peer_capacity = capacity;
            let bps = u64::from(capacity) * self.payload as u64;
            match &mut self.cc {
                AnyCc::Udt(u) | AnyCc::UdtNoisy(u) => u.set_link_capacity(bps),
                _ => {}
            }
        }
        let delivery_rate = if is_udt_native(&self.cc) {
            u64::from(rate) * self.payload as u64
        } else if pkts > 0 {
            // Packets as they travelled, headers too (as the composed engine counts them).
            let wire = bytes + pkts * HEADER_LEN as u64;
            self.rate.on_acked(ext - 1, wire, now)
        } else {
            0
        };
        // The send time of the newest packet this ACK newly covers, if it covers any.
        let newly_sent = newest_sent.filter(|_| pkts > 0);
        if let Some(sent) = newly_sent {
            let sample = now.saturating_since(sent).as_micros() as u64;
            let min_us = self.own_rtt.map_or(sample, |o| o.min_us.min(sample));
            self.own_rtt = Some(OwnRtt {
                latest_us: sample,
                min_us,
            });
        }
        // UDT native works from the ACK's RTT, as UDT4's does; the others from the sender's
        // own samples, and hear of nothing before the first one.
        let (rtt_us, min_rtt_us) = match (is_udt_native(&self.cc), self.own_rtt) {
            (true, _) => (Some(self.rtt_us), self.rtt_us),
            (false, Some(o)) => (Some(o.latest_us), o.min_us),
            (false, None) => (None, 0),
        };
        if let Some(rtt_us) = rtt_us.filter(|_| pkts > 0 || a.full.is_some()) {
            self.cc.on_ack(&Ack {
                now,
                pn: ext.saturating_sub(1),
                bytes,
                sent_at: newly_sent.unwrap_or_else(|| {
                    Instant::from_micros(now.as_micros().saturating_sub(self.rtt_us))
                }),
                rtt_us,
                srtt_us: self.rtt_us,
                min_rtt_us,
                bytes_in_flight: self.pipe() * self.payload as u64,
                delivery_rate,
            });
        }
        if pkts > 0 {
            self.activity = true;
        }
        self.progress_close(now);
    }

    fn on_nak(&mut self, now: Instant, words: &[u32]) {
        self.stats.naks_received += 1;
        let una = self.snd.una();
        let uw = self.wire_snd(una);
        for (a, b) in nak_ranges(words) {
            let (Some(x), Some(y)) = (Self::ext_near(una, uw, a), Self::ext_near(una, uw, b))
            else {
                continue;
            };
            let n = self.snd.nak(x, y);
            if n > 0 {
                self.stats.packets_lost += n;
                // When the range's last packet left: a window-based controller cuts once
                // for the losses of one window, not once per NAK (a loss reported later
                // of a packet sent before its cut is part of the same event).
                let largest_sent = self.snd.next_new().saturating_sub(1);
                let sent_at = self.snd.get(y.min(largest_sent)).map_or(now, |p| p.sent_at);
                self.cc.on_loss(&Loss {
                    now,
                    first_pn: x,
                    last_pn: y,
                    bytes: n * self.payload as u64,
                    sent_at,
                    largest_sent_pn: largest_sent,
                    srtt_us: self.rtt_us,
                });
            }
        }
    }

    fn window(&self) -> u64 {
        let cwnd = self.cc.cwnd();
        let cwnd_pkts = if cwnd == u64::MAX {
            u64::MAX
        } else {
            (cwnd / self.payload as u64).max(2)
        };
        // The flow window bounds every packet unacknowledged; the congestion window only
        // those in the pipe (`Sender::next` compares the former with the window).
        let settled = self.snd.in_flight() - self.pipe();
        cwnd_pkts
            .saturating_add(settled)
            .min(self.peer_window)
            .min(self.peer_avail.max(2))
    }

    /// Packets in flight as the congestion controller counts them: UDT native counts every
    /// packet not yet acknowledged, as UDT4 does; the others (TCP's windows, BBR's) leave
    /// out those the receiver is known to hold or to have lost, as SACK lets TCP do — with
    /// cumulative ACKs alone, a 1 % random loss keeps a hole open most of the time and the
    /// window fills with packets that have arrived.
    fn pipe(&self) -> u64 {
        if is_udt_native(&self.cc) {
            self.snd.in_flight()
        } else {
            self.snd.unsettled()
        }
    }

    fn exp_interval(&self) -> Duration {
        let n = u64::from(self.exp_count);
        let t = (n * (self.rtt_us + 4 * self.rttvar_us) + SYN_US).max(n * MIN_EXP_US);
        Duration::from_micros(t)
    }

    fn exp_deadline(&self) -> Instant {
        self.exp_base + self.exp_interval()
    }

    /// The earliest deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if matches!(self.state, ConnectionState::Closed(_)) {
            return None;
        }
        let mut t = [
            self.hs_next,
            self.linger_until.or(self.shutdown_at),
            None,
            None,
            None,
            None,
        ];
        if !self.ctrl_out.is_empty() {
            t[2] = Some(self.start);
        }
        if self.is_open() {
            t[3] = Some(
                self.next_ack
                    .min(self.next_nak.unwrap_or(Instant::FAR_FUTURE)),
            );
            t[4] = Some(
                self.exp_deadline()
                    .min(self.last_sent + Duration::from_micros(KEEPALIVE_US)),
            );
            if self.snd.has_work(self.window()) {
                t[5] = Some(self.pace.wake_at(
                    self.cc.pacing_rate(),
                    self.packet_bytes(),
                    Spacing::Strict,
                ));
            }
        }
        t.into_iter().flatten().min()
    }

    /// Fires due timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.linger_until.is_some_and(|t| t <= now) {
            self.linger_until = None;
            self.terminate(CloseReason::Graceful);
            return;
        }
        if self.shutdown_at.is_some_and(|t| t <= now) && self.linger_until.is_none() {
            self.queue_ctrl(0, ControlBody::Shutdown(Some(0)));
            self.linger_until = Some(now + LINGER);
        }
        if let Some(t) = self.hs_next {
            if t <= now {
                if now >= self.hs_give_up {
                    self.terminate(CloseReason::Handshake(format!(
                        "no answer from {} (UDT handshake timed out)",
                        self.remote
                    )));
                    return;
                }
                match self.role {
                    Role::Client { cookie: None } => self.queue_handshake(req::REQUEST, 0),
                    Role::Client { cookie: Some(c) } => self.queue_handshake(req::RESPONSE, c),
                    Role::Rendezvous => self.queue_handshake(req::RENDEZVOUS, 0),
                    Role::Server => {}
                }
                self.hs_next = Some(now + HANDSHAKE_INTERVAL);
            }
        }
        if !self.is_open() {
            return;
        }
        if self.next_ack <= now {
            self.send_ack(now, false);
            self.next_ack = now + Duration::from_micros(SYN_US);
        }
        if self.next_nak.is_some_and(|t| t <= now) {
            self.on_nak_timer(now);
        }
        if self.exp_deadline() <= now {
            if self.exp_count > MAX_EXP_COUNT
                && now.saturating_since(self.last_rsp) > self.cfg.expiry
            {
                self.terminate(CloseReason::IdleTimeout(self.cfg.expiry));
                return;
            }
            if self.snd.in_flight() > 0 {
                let n = self.snd.all_lost();
                self.stats.rto_expiries += 1;
                self.stats.packets_lost += n;
                self.cc.on_timeout(now, self.exp_count);
            } else {
                self.queue_ctrl(0, ControlBody::KeepAlive(Some(0)));
            }
            if self.fin.is_some() && !self.fin_acked {
                self.queue_fin();
            }
            self.exp_count += 1;
            self.exp_base = now;
        }
        if now.saturating_since(self.last_sent).as_micros() >= u128::from(KEEPALIVE_US) {
            self.queue_ctrl(0, ControlBody::KeepAlive(Some(0)));
        }
    }

    /// Appends the next packet to send to `out`.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        let start = out.len();
        if let Some(mut c) = self.ctrl_out.pop_front() {
            c.timestamp = self.timestamp(now);
            c.emit(out);
            self.sent(now, out.len() - start);
            return true;
        }
        // UDT4's sender has no freeze after a congestion event (`CongestionControl::
        // paused_until`, the paper's §3.3.1): its `processCtrl` queues the NAKed packets
        // for immediate retransmission. This sender follows UDT4; the composed engine's
        // pacing honours the freeze.
        if !self.is_open()
            || !self.pace.ready(
                now,
                self.cc.pacing_rate(),
                self.packet_bytes(),
                Spacing::Strict,
            )
        {
            return false;
        }
        let window = self.window();
        match self.snd.next(now, window) {
            Some(Next::Packet(ext, retx)) => {
                let Some(p) = self.snd.get(ext) else {
                    return false;
                };
                let wire = self.wire_snd(ext);
                DataHeader {
                    seq: wire,
                    boundary: p.boundary,
                    in_order: p.in_order,
                    msg: p.msg,
                    timestamp: self.timestamp(now),
                    dst: self.peer_id,
                }
                .emit(out);
                out.extend_from_slice(&p.payload);
                let bytes = (out.len() - start) as u64;
                self.snd.mark_sent(ext, now);
                // Nothing else in flight: the pause before it is not delivery time.
                self.rate.on_sent(ext, now, self.snd.in_flight() <= 1);
                self.cc.on_packet_sent(&Sent {
                    now,
                    pn: ext,
                    bytes,
                    bytes_in_flight: self.pipe() * self.payload as u64,
                });
                self.stats.segments_sent += 1;
                if retx {
                    self.stats.retransmissions += 1;
                }
                self.sent(now, out.len() - start);
                self.pace(bytes, wire & 0xF == 0 && !retx);
                if self.snd.room() > 0 {
                    self.activity = true;
                }
                true
            }
            Some(Next::Drop(msg, a, b)) => {
                let body = ControlBody::DropRequest(Some((self.wire_snd(a), self.wire_snd(b))));
                let mut c = Control::new(msg, self.timestamp(now), self.peer_id, body);
                c.timestamp = self.timestamp(now);
                c.emit(out);
                self.stats.messages_abandoned += 1;
                self.sent(now, out.len() - start);
                true
            }
            None => false,
        }
    }

    fn sent(&mut self, now: Instant, len: usize) {
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += len as u64;
        self.last_sent = now;
    }

    /// Schedules the next data packet after one of `bytes` (a probe's successor leaves at
    /// once).
    fn pace(&mut self, bytes: u64, probe: bool) {
        if probe {
            return;
        }
        if let Some(gap) = self.pace.gap_us(bytes, self.cc.pacing_rate()) {
            self.pace.delay(gap);
        }
    }

    /// Bytes of a full data packet (header and payload), the unit of the pacing credit.
    fn packet_bytes(&self) -> u64 {
        (self.payload + super::packet::HEADER_LEN) as u64
    }

    fn queue_fin(&mut self) {
        if let Some(f) = self.fin {
            let body = ControlBody::User(f.to_be_bytes().to_vec());
            let mut c = Control::new(0, 0, self.peer_id, body);
            c.reserved = EXT_FIN;
            self.push_ctrl(c);
        }
    }

    fn progress_close(&mut self, now: Instant) {
        if self.closing && self.snd.is_empty() && self.shutdown_at.is_none() {
            let grace = if self.cfg.dgram {
                DGRAM_SHUTDOWN_GRACE
            } else {
                Duration::ZERO
            };
            self.shutdown_at = Some(now + grace);
            if grace.is_zero() {
                self.queue_ctrl(0, ControlBody::Shutdown(Some(0)));
                self.linger_until = Some(now + LINGER);
            }
        }
    }

    /// Ends with `reason`.
    pub fn terminate(&mut self, reason: CloseReason) {
        self.hs_next = None;
        if !matches!(self.state, ConnectionState::Closed(_)) {
            self.state = ConnectionState::Closed(reason);
            self.activity = true;
        }
    }

    fn open_for_write(&self) -> Result<(), WriteError> {
        if self.fin.is_some() {
            return Err(WriteError::Finished);
        }
        if self.state != ConnectionState::Established {
            return Err(WriteError::NotOpen(format!("{:?}", self.state)));
        }
        Ok(())
    }

    /// Queues stream bytes; returns how many were taken.
    pub fn stream_write(&mut self, now: Instant, data: &[u8]) -> Result<usize, WriteError> {
        self.open_for_write()?;
        let n = data.len().min(self.snd.room());
        if n == 0 && !data.is_empty() {
            return Err(WriteError::Blocked);
        }
        let b = Bytes::copy_from_slice(&data[..n]);
        for chunk in (0..n).step_by(STREAM_CHUNK) {
            let end = (chunk + STREAM_CHUNK).min(n);
            // On a message connection each chunk is an in-order message.
            self.snd.push(&b.slice(chunk..end), self.cfg.dgram, None);
        }
        self.stats.app_bytes_sent += n as u64;
        self.start_busy(now);
        Ok(n)
    }

    /// Finishes the stream without closing (ctp extension; see the module documentation).
    pub fn stream_finish(&mut self, _now: Instant) -> Result<(), WriteError> {
        if self.fin.is_some() {
            return Ok(());
        }
        self.open_for_write()?;
        // The end is the sequence number after the last data packet queued.
        self.fin = Some(self.snd.end());
        self.queue_fin();
        Ok(())
    }

    /// Queues one message with a time-to-live and the in-order flag (UDT's `sendmsg`).
    pub fn send_msg(
        &mut self,
        now: Instant,
        data: Bytes,
        ttl: Option<Duration>,
        in_order: bool,
    ) -> Result<(), WriteError> {
        self.open_for_write()?;
        let max = self.cfg.send_buffer;
        if data.len() > max {
            return Err(WriteError::TooLarge {
                len: data.len(),
                max,
            });
        }
        if data.len() > self.snd.room() {
            return Err(WriteError::Blocked);
        }
        self.stats.app_bytes_sent += data.len() as u64;
        self.snd.push(&data, in_order, ttl.map(|t| now + t));
        self.start_busy(now);
        Ok(())
    }

    fn read_gate(&self) -> ReadError {
        match &self.state {
            ConnectionState::Closed(r) if !self.peer_closed => ReadError::Closed(r.clone()),
            _ => ReadError::Blocked,
        }
    }

    /// Reads stream bytes; `Ok(0)` once the peer finished or closed and all was read.
    pub fn stream_read(&mut self, _now: Instant, buf: &mut [u8]) -> Result<usize, ReadError> {
        let n = self.rcv.read_stream(buf);
        if n > 0 {
            self.stats.app_bytes_delivered += n as u64;
            return Ok(n);
        }
        if self.peer_closed || buf.is_empty() {
            return Ok(0);
        }
        Err(self.read_gate())
    }

    /// Reads at most `max` bytes of the next received chunk without copying; empty at the
    /// end of the stream.
    pub fn stream_read_chunk(&mut self, _now: Instant, max: usize) -> Result<Bytes, ReadError> {
        let chunk = self.rcv.read_stream_chunk(max);
        if !chunk.is_empty() {
            self.stats.app_bytes_delivered += chunk.len() as u64;
            return Ok(chunk);
        }
        if self.peer_closed || max == 0 {
            return Ok(chunk);
        }
        Err(self.read_gate())
    }

    /// Takes the next whole message.
    pub fn recv_msg(&mut self, _now: Instant) -> Result<Bytes, ReadError> {
        match self.rcv.read_msg() {
            Some(m) => {
                self.stats.app_bytes_delivered += m.len() as u64;
                self.stats.messages_delivered += 1;
                Ok(m)
            }
            None if self.peer_closed => Err(ReadError::Closed(CloseReason::Graceful)),
            None => Err(self.read_gate()),
        }
    }

    /// Bytes that can be written now.
    pub fn send_room(&self) -> usize {
        self.snd.room()
    }

    /// Bytes written and not yet sent once (about: packets count at the full payload size).
    pub fn unsent_bytes(&self) -> usize {
        self.snd.unsent()
    }

    /// True when everything written was acknowledged.
    pub fn is_flushed(&self) -> bool {
        self.snd.is_empty()
    }

    /// Orderly close: what was written is delivered, then SHUTDOWN goes out.
    pub fn close(&mut self, now: Instant) {
        match self.state {
            ConnectionState::Established => {
                self.closing = true;
                self.state = ConnectionState::Closing;
                self.progress_close(now);
            }
            ConnectionState::Initiating | ConnectionState::Echoing => self.terminate(
                CloseReason::LocalAbort("closed before set-up finished".into()),
            ),
            _ => {}
        }
    }

    /// Aborts at once (UDT has no abort reason on the wire: SHUTDOWN).
    pub fn abort(&mut self, _now: Instant, reason: &str) {
        if matches!(self.state, ConnectionState::Closed(_)) {
            return;
        }
        if self.is_open() {
            // The SHUTDOWN still goes out after the state closed.
            self.ctrl_out.clear();
            self.queue_ctrl(0, ControlBody::Shutdown(Some(0)));
        }
        self.state = ConnectionState::Closed(CloseReason::LocalAbort(reason.to_string()));
        self.activity = true;
    }

    /// Passes a custom control message to the congestion controller.
    pub fn congestion_message(&mut self, now: Instant, msg: &[u8]) -> bool {
        self.cc.on_custom(now, msg);
        true
    }

    /// After a write: a send buffer that was empty starts a busy period (the monitor's send
    /// duration) and, as UDT4's `CUDT::send` does ("delay the EXP timer to avoid mis-fired
    /// timeout"), restarts the EXP timer, which would otherwise count the idle time before
    /// the write as a silent peer and time out the first window before its ACK is due.
    fn start_busy(&mut self, now: Instant) {
        if self.busy_since.is_none() && !self.snd.is_empty() {
            self.busy_since = Some(now);
            self.exp_base = now;
        }
    }

    fn stop_busy(&mut self, now: Instant) {
        if let Some(t) = self.busy_since.take() {
            self.stats.send_duration_us += now.saturating_since(t).as_micros() as u64;
        }
    }

    /// The performance monitor (UDT's `perfmon(u, &perf, clear)`): UDT's counters as totals,
    /// since the last clearing query, and the values of the moment. With `clear` the next
    /// interval starts now.
    pub fn perfmon(&mut self, now: Instant, clear: bool) -> PerfMon {
        let mut s = self.stats();
        if let Some(t) = self.busy_since {
            s.send_duration_us += now.saturating_since(t).as_micros() as u64;
        }
        let payload = self.payload as u64;
        let cwnd = self.cc.cwnd();
        let capacity = if self.peer_capacity > 0 {
            self.peer_capacity
        } else {
            self.rcv.capacity()
        };
        let instant = PerfInstant {
            us_pkt_snd_period: self.cc.pacing_period_us(payload).unwrap_or(0) as f64,
            pkt_flow_window: self.peer_window.min(self.peer_avail),
            pkt_congestion_window: if cwnd == u64::MAX { 0 } else { cwnd / payload },
            pkt_flight_size: self.snd.in_flight(),
            ms_rtt: self.rtt_us as f64 / 1000.0,
            mbps_bandwidth: f64::from(capacity) * payload as f64 * 8.0 / 1e6,
            byte_avail_snd_buf: self.snd.room() as u64,
            byte_avail_rcv_buf: u64::from(self.rcv.available()) * payload,
        };
        self.perf.query(now, &s, instant, clear)
    }

    /// Snapshot of the counters.
    pub fn stats(&self) -> ConnectionStats {
        let mut s = self.stats;
        s.srtt_us = self.rtt_us;
        s.rttvar_us = self.rttvar_us;
        s.cwnd = self.cc.cwnd().min(u64::MAX - 1);
        s.bytes_in_flight = self.pipe() * self.payload as u64;
        s.pacing_rate = self.cc.pacing_rate();
        s.buffered_bytes = (self.snd.buffered() + self.rcv.queued_bytes()) as u64;
        s.path_mtu = u64::from(self.cfg.mss);
        s
    }

    /// True while a control packet waits (it goes out even after the state closed).
    pub fn has_control(&self) -> bool {
        !self.ctrl_out.is_empty()
    }
}

/// The UDT4 core: UDT4's own wire, timers and handshake. Most calls are the connection's
/// own UDT-named operations; what UDT4 lacks (message dependencies, urgent messages, an
/// end-of-stream mark) degrades as documented on each.
impl ConnectionCore for UdtConnection {
    fn local_id(&self) -> u32 {
        self.socket_id()
    }

    fn remote(&self) -> SocketAddr {
        self.remote
    }

    fn state(&self) -> &ConnectionState {
        &self.state
    }

    fn take_activity(&mut self) -> bool {
        core::mem::take(&mut self.activity)
    }

    fn micros(&self) -> MicroSet {
        self.profile.0
    }

    fn params(&self) -> &Params {
        &self.profile.1
    }

    /// A UDT4 packet: parsed, then handled (UDT4 has no packet protection).
    fn handle_datagram(&mut self, now: Instant, datagram: &mut [u8]) -> Result<(), Dropped> {
        let len = datagram.len();
        let p = Packet::parse(datagram).map_err(|_| Dropped::Malformed)?;
        self.on_packet(now, p, len);
        Ok(())
    }

    fn handle_timeout(&mut self, now: Instant) {
        UdtConnection::handle_timeout(self, now)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        UdtConnection::poll_timeout(self)
    }

    fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        UdtConnection::poll_transmit(self, now, out)
    }

    fn stream_write(&mut self, now: Instant, data: &[u8]) -> Result<usize, WriteError> {
        UdtConnection::stream_write(self, now, data)
    }

    fn stream_finish(&mut self, now: Instant) -> Result<(), WriteError> {
        UdtConnection::stream_finish(self, now)
    }

    fn stream_read(&mut self, now: Instant, buf: &mut [u8]) -> Result<usize, ReadError> {
        UdtConnection::stream_read(self, now, buf)
    }

    fn stream_read_chunk(&mut self, now: Instant, max: usize) -> Result<Bytes, ReadError> {
        UdtConnection::stream_read_chunk(self, now, max)
    }

    /// UDT's `sendmsg(data, ttl, inorder)`.
    fn send_msg(&mut self, now: Instant, data: Bytes, opts: MsgOptions) -> Result<(), WriteError> {
        UdtConnection::send_msg(self, now, data, opts.ttl, opts.in_order)
    }

    /// A plain in-order message (UDT4 names no predecessors); its id is 0.
    fn send_msg_after(
        &mut self,
        now: Instant,
        data: Bytes,
        _after: &[u64],
    ) -> Result<u64, WriteError> {
        UdtConnection::send_msg(self, now, data, None, true).map(|_| 0)
    }

    /// A plain in-order message (UDT4 has no out-of-band data).
    fn send_urgent(&mut self, now: Instant, data: Bytes) -> Result<(), WriteError> {
        UdtConnection::send_msg(self, now, data, None, true)
    }

    fn recv_msg(&mut self, now: Instant) -> Result<Bytes, ReadError> {
        UdtConnection::recv_msg(self, now)
    }

    fn send_room(&self) -> usize {
        UdtConnection::send_room(self)
    }

    fn unsent_bytes(&self) -> usize {
        UdtConnection::unsent_bytes(self)
    }

    fn buffered_bytes(&self) -> u64 {
        UdtConnection::stats(self).buffered_bytes
    }

    fn unacked_bytes(&self) -> u64 {
        self.snd.buffered() as u64
    }

    fn is_flushed(&self) -> bool {
        UdtConnection::is_flushed(self)
    }

    /// Always false: the UDT4 wire has no end-of-stream mark.
    fn peer_finished(&self) -> bool {
        false
    }

    fn congestion_message(&mut self, now: Instant, msg: &[u8]) -> bool {
        UdtConnection::congestion_message(self, now, msg)
    }

    fn close(&mut self, now: Instant) {
        UdtConnection::close(self, now)
    }

    fn abort(&mut self, now: Instant, reason: &str) {
        UdtConnection::abort(self, now, reason)
    }

    fn stats(&self) -> ConnectionStats {
        UdtConnection::stats(self)
    }

    fn perfmon(&mut self, now: Instant, clear: bool) -> PerfMon {
        UdtConnection::perfmon(self, now, clear)
    }
}
