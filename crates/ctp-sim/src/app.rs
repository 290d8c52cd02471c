//! The application side of one flow: what the sender writes, what the receiver checks.
//!
//! Three kinds of flow:
//! - **bulk**: a byte count (or unbounded) written as fast as the connection takes it — the
//!   ordered byte stream for reliable profiles, messages of `message_size` otherwise;
//! - **cbr**: messages of `message_size` generated at a constant bit rate (an audio or video
//!   source); each message's latency is measured from the moment it was generated, and
//!   counted on time if it arrives within the flow's deadline;
//! - **ping-pong**: one small message at a time, echoed by the receiver; the round-trip
//!   latency of each round is recorded (the CTP paper's latency experiment);
//! - **streams**: several streams over the one connection, each a constant-rate sequence of
//!   messages or a bulk byte stream with its own priority, or the same data multiplexed on
//!   stream 0 for comparison (see [`crate::streams`]);
//! - **group**: one member of a group ([`crate::group`]): the group's messages, placed on
//!   this flow's connection by the group's policy, checked by the group at the receiver.
//!
//! Every byte and message received is checked against the deterministic generator of
//! [`crate::payload`]: a wrong, duplicated or corrupted delivery is recorded as a violation.

use crate::payload;
use crate::streams::{StreamResult, StreamSpec, StreamsApp};
use bytes::Bytes;
use core::time::Duration;
use ctp_proto::connection::Connection;
use ctp_proto::{Instant, Profile};
use serde::Serialize;

/// What a flow's application does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowKind {
    /// As fast as the connection accepts.
    Bulk,
    /// Messages at a constant bit rate.
    Cbr {
        /// Bits per second of message payload.
        rate_bps: u64,
    },
    /// Request/echo rounds, one outstanding at a time.
    PingPong {
        /// Number of rounds.
        rounds: u64,
    },
    /// Several streams over the one connection ([`FlowSpec::streams`]).
    Streams {
        /// Every stream's data multiplexed on stream 0 instead, in the order written (an
        /// application without streams).
        single: bool,
    },
    /// A member of group `group` ([`crate::group`]): the group sends, the flow carries.
    Group {
        /// Index into [`crate::world::SimConfig::groups`].
        group: usize,
    },
}

/// What the application side of one flow does.
#[derive(Clone, Debug)]
pub struct FlowSpec {
    /// Profile the sender asks for.
    pub profile: Profile,
    /// When the sender connects.
    pub start: Duration,
    /// When the sender aborts the flow, if it has not finished by then.
    pub stop: Option<Duration>,
    /// Bytes to send, then close; `None` = until `stop` or the end of the run.
    pub bytes: Option<u64>,
    /// Message size for message flows (unreliable profiles, cbr, ping-pong).
    pub message_size: usize,
    /// Bulk, constant bit rate or ping-pong.
    pub kind: FlowKind,
    /// Messages delivered later than this after they were generated are late; for
    /// ping-pong, a round not answered within it is given up.
    pub deadline: Option<Duration>,
    /// The streams of a [`FlowKind::Streams`] flow (empty otherwise).
    pub streams: Vec<StreamSpec>,
}

impl FlowSpec {
    /// A bulk flow of `profile` starting at time zero.
    pub fn bulk(profile: Profile, bytes: Option<u64>) -> Self {
        FlowSpec {
            profile,
            start: Duration::ZERO,
            stop: None,
            bytes,
            message_size: 1200,
            kind: FlowKind::Bulk,
            deadline: None,
            streams: Vec::new(),
        }
    }

    /// True when the flow sends discrete messages rather than the byte stream.
    pub fn uses_messages(&self) -> bool {
        !self.profile.is_reliable()
            || matches!(
                self.kind,
                FlowKind::Cbr { .. } | FlowKind::PingPong { .. } | FlowKind::Group { .. }
            )
    }
}

/// One sample of one flow at the end of an interval.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Sample {
    /// Application bytes delivered during the interval.
    pub bytes: u64,
    /// The flow was running for the whole interval.
    pub active: bool,
    /// Sender's smoothed RTT at the end of the interval, µs (0 if unknown).
    pub srtt_us: u64,
}

/// The outcome of one flow.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FlowResult {
    /// Profile name.
    pub profile: String,
    /// Propagation RTT, µs.
    pub prop_rtt_us: u64,
    /// Application bytes (or message bytes) accepted by the sender.
    pub bytes_sent: u64,
    /// Application bytes delivered and verified at the receiver.
    pub bytes_delivered: u64,
    /// Messages (or ping-pong rounds) sent.
    pub msgs_sent: u64,
    /// Messages delivered intact (ping-pong: rounds answered).
    pub msgs_delivered: u64,
    /// Messages delivered within the deadline.
    pub msgs_on_time: u64,
    /// Sum of message latencies (generation to delivery), µs.
    pub latency_sum_us: u64,
    /// Largest message latency, µs.
    pub latency_max_us: u64,
    /// Ping-pong: the round-trip time of every answered round, µs.
    pub round_trips_us: Vec<u64>,
    /// The receiver saw the end of the stream (reliable) or the sender closed gracefully.
    pub completed: bool,
    /// Virtual time from start to completion, µs.
    pub completion_us: Option<u64>,
    /// Connection established at, µs of virtual time.
    pub connected_us: Option<u64>,
    /// Close reason on the sender side, if closed.
    pub sender_close: Option<String>,
    /// Close reason on the receiver side, if closed.
    pub receiver_close: Option<String>,
    /// Packets the sender sent.
    pub packets_sent: u64,
    /// Packets declared lost by the sender.
    pub packets_lost: u64,
    /// Segments sent, including retransmissions.
    pub segments_sent: u64,
    /// Retransmitted segments.
    pub retransmissions: u64,
    /// Repair packets sent: forward-error-correction shards or coded repair symbols.
    pub repairs_sent: u64,
    /// Most bytes the sender's connection held in its buffers at once.
    pub peak_sender_buffered: u64,
    /// Most bytes the receiver's connection held in its buffers at once.
    pub peak_receiver_buffered: u64,
    /// Largest excess of bytes in flight over the window bound (the largest congestion
    /// window seen, or twice the current one); only measured with `check_limits`.
    pub max_cwnd_overshoot: u64,
    /// Most bytes either connection held beyond its buffers (send + receive buffer); only
    /// measured with `check_limits`.
    pub max_buffer_excess: u64,
    /// Violations of the invariants (empty when all is well).
    pub violations: Vec<String>,
    /// Violations of the endpoints' limits (bytes in flight, buffers, where they send):
    /// the invariants that must hold even against a forger of packets.
    pub limit_violations: Vec<String>,
    /// Per-interval samples.
    pub samples: Vec<Sample>,
    /// A `streams` flow: each stream's outcome.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<StreamResult>,
    /// A `streams` flow: late messages released by another stream's retransmission
    /// (head-of-line blocking across streams; see [`crate::streams`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_by_other: Option<u64>,
}

/// Violations recorded per flow at most (a broken flow would otherwise flood the report).
const MAX_VIOLATIONS: usize = 8;

/// The running state of one flow's application.
pub(crate) struct FlowApp {
    pub spec: FlowSpec,
    key: u64,
    finished: bool,
    pub closing: bool,
    pub interval_bytes: u64,
    /// Generation time (µs) of each message, by id.
    generated_us: Vec<u64>,
    seen: payload::Delivered,
    next_msg_at: Instant,
    ping_sent_at: Option<Instant>,
    pub done_at: Option<Instant>,
    max_cwnd: u64,
    overshoot_reported: bool,
    memory_reported: bool,
    streams: Option<StreamsApp>,
    pub res: FlowResult,
}

/// Bytes a connection may hold beyond its send and receive buffers (segments in flight are
/// counted at their largest size).
pub const BUFFER_SLACK: u64 = 256 * 1024;

/// Largest stream write: stream writes are the sender's messages, which the receiver
/// reassembles whole before delivering them.
const STREAM_WRITE: usize = 16_384;

/// How far a bulk stream sender writes ahead of what has been sent: like a `TCP_NOTSENT_LOWAT`
/// application, it keeps up to this much unsent and tops it up when less than half is left
/// (`World` asks it to whenever the sender's poll comes back empty), so the sender is never
/// short of data while the bytes it sends are still in cache, and a flow's buffer holds its
/// window plus this rather than the whole send buffer.
pub const SEND_AHEAD: usize = 256 * 1024;

impl FlowApp {
    pub fn new(spec: FlowSpec, key: u64, prop_rtt: Duration) -> Self {
        let res = FlowResult {
            profile: spec.profile.name.clone(),
            prop_rtt_us: prop_rtt.as_micros() as u64,
            ..FlowResult::default()
        };
        let streams = match spec.kind {
            FlowKind::Streams { single } => Some(StreamsApp::new(
                spec.streams.clone(),
                single,
                key,
                SEND_AHEAD,
            )),
            _ => None,
        };
        FlowApp {
            streams,
            next_msg_at: Instant::ZERO + spec.start,
            spec,
            key,
            finished: false,
            closing: false,
            interval_bytes: 0,
            generated_us: Vec::new(),
            seen: payload::Delivered::default(),
            ping_sent_at: None,
            done_at: None,
            max_cwnd: 0,
            overshoot_reported: false,
            memory_reported: false,
            res,
        }
    }

    fn violation(&mut self, v: String) {
        if self.res.violations.len() < MAX_VIOLATIONS {
            self.res.violations.push(v);
        }
    }

    fn limit_violation(&mut self, v: String) {
        if self.res.limit_violations.len() < MAX_VIOLATIONS {
            self.res.limit_violations.push(v);
        }
    }

    /// Checks that a connection of the flow (the sender's, or the receiver's) holds no more
    /// data than its buffers allow, plus [`BUFFER_SLACK`]: whatever a peer sends, memory
    /// stays bounded.
    pub fn check_memory(&mut self, now: Instant, c: &Connection, sender: bool) {
        let p = c.params();
        let held = c.buffered_bytes();
        let bound = u64::from(p.send_buffer) + u64::from(p.recv_buffer);
        let excess = held.saturating_sub(bound);
        self.res.max_buffer_excess = self.res.max_buffer_excess.max(excess);
        if excess > BUFFER_SLACK && !self.memory_reported {
            self.memory_reported = true;
            self.limit_violation(format!(
                "{} holds {held} bytes, above its buffers ({bound}) by more than {BUFFER_SLACK} (at {} µs)",
                if sender { "sender" } else { "receiver" },
                now.as_micros()
            ));
        }
    }

    fn size(&self) -> usize {
        self.spec.message_size.max(8)
    }

    fn limit(&self) -> u64 {
        self.spec.bytes.unwrap_or(u64::MAX)
    }

    /// The next moment after `now` the application wants to act (a cbr message falls due,
    /// a ping-pong round times out), if any. A message already due but not yet accepted
    /// waits for the connection's own events (handshake, acknowledgements).
    pub fn next_wake(&self, now: Instant) -> Option<Instant> {
        if self.closing || self.done_at.is_some() {
            return None;
        }
        match self.spec.kind {
            FlowKind::Cbr { .. } if self.res.bytes_sent < self.limit() => Some(self.next_msg_at),
            FlowKind::PingPong { .. } => self
                .ping_sent_at
                .zip(self.spec.deadline)
                .map(|(t, d)| t + d),
            FlowKind::Streams { .. } => self.streams.as_ref().and_then(StreamsApp::next_wake),
            _ => None,
        }
        .filter(|&t| t > now)
    }

    /// Checks the sender's limits: bytes in flight within the congestion window bound.
    pub fn check_limits(&mut self, now: Instant, c: &Connection) {
        let s = c.stats();
        let mtu = c.params().max_udp_payload as u64;
        // The window can grow on an ACK and shrink on a loss detected within the same
        // datagram, so its peak may never be observed between steps: the window reports
        // the largest it released anything under (`cwnd_peak`; NewReno's decrease, set
        // from the flight minus the lost packets, can leave twice the new window below
        // it). One packet of slack: a segment may go when the window is just below full.
        self.max_cwnd = self.max_cwnd.max(s.cwnd);
        let bound = self.max_cwnd.max(2 * s.cwnd).max(s.cwnd_peak) + mtu;
        self.res.max_cwnd_overshoot = self
            .res
            .max_cwnd_overshoot
            .max(s.bytes_in_flight.saturating_sub(bound - mtu));
        if s.bytes_in_flight > bound && !self.overshoot_reported {
            self.overshoot_reported = true;
            self.limit_violation(format!(
                "{} bytes in flight above the window bound {} \
                 (at {} µs; cwnd now {}, {} packets sent, {} lost)",
                s.bytes_in_flight,
                bound,
                now.as_micros(),
                s.cwnd,
                s.packets_sent,
                s.packets_lost
            ));
        }
    }

    /// Gives the sender's connection what the application has for it.
    pub fn drive_sender(&mut self, now: Instant, c: &mut Connection) {
        self.res.peak_sender_buffered = self.res.peak_sender_buffered.max(c.buffered_bytes());
        if !c.is_established() || self.closing {
            return;
        }
        match self.spec.kind {
            // The group's policy puts the messages on the connection.
            FlowKind::Group { .. } => {}
            FlowKind::Streams { .. } => self.write_streams(now, c),
            FlowKind::Bulk if !self.spec.uses_messages() => self.write_stream(now, c),
            FlowKind::Bulk => {
                while self.res.bytes_sent < self.limit() && c.send_room() >= self.size() {
                    if !self.send_message(now, now, c) {
                        break;
                    }
                }
                self.close_when_written(now, c);
            }
            FlowKind::Cbr { rate_bps } => {
                let period = Duration::from_nanos(
                    (self.size() as u64 * 8 * 1_000_000_000).div_ceil(rate_bps.max(1)),
                );
                if self.res.msgs_sent == 0 {
                    // The source starts once the connection is up.
                    self.next_msg_at = self.next_msg_at.max(now);
                }
                while self.res.bytes_sent < self.limit()
                    && now >= self.next_msg_at
                    && c.send_room() >= self.size()
                {
                    let generated = self.next_msg_at;
                    if !self.send_message(now, generated, c) {
                        break;
                    }
                    self.next_msg_at += period;
                }
                self.close_when_written(now, c);
            }
            FlowKind::PingPong { rounds } => {
                if let (Some(t), Some(d)) = (self.ping_sent_at, self.spec.deadline) {
                    if now >= t + d {
                        // Given up: the round counts as sent and unanswered.
                        self.ping_sent_at = None;
                    }
                }
                if self.ping_sent_at.is_none() {
                    if self.res.msgs_sent >= rounds {
                        self.done_at = Some(now);
                        self.res.completed = true;
                        self.closing = true;
                        c.close(now);
                    } else if self.send_message(now, now, c) {
                        self.ping_sent_at = Some(now);
                    }
                }
            }
        }
    }

    /// Writes more of a bulk stream (up to [`SEND_AHEAD`] unsent) once the connection holds
    /// less than half of that unsent; true if it wrote anything.
    pub fn top_up(&mut self, now: Instant, c: &mut Connection) -> bool {
        // Below half: a sender that found the window shut with this much queued was not
        // short of data, and topping up after every packet would cost a second poll each.
        if self.closing
            || c.unsent_bytes() >= SEND_AHEAD / 2
            || !c.is_established()
            || self.spec.uses_messages()
        {
            return false;
        }
        let before = self.res.bytes_sent;
        if self.streams.is_some() {
            self.write_streams(now, c);
        } else {
            self.write_stream(now, c);
        }
        self.res.bytes_sent > before
    }

    fn write_streams(&mut self, now: Instant, c: &mut Connection) {
        let Some(s) = self.streams.as_mut() else {
            return;
        };
        self.res.bytes_sent += s.drive_sender(now, c);
        if s.finished() {
            self.closing = true;
        }
    }

    /// A `streams` flow: the streams' outcomes, into the result (at the end of the run).
    pub fn finish_streams(&mut self) {
        if let Some(s) = &self.streams {
            let start = self.spec.start.as_micros() as u64;
            let (streams, held) = s.results(start, self.res.prop_rtt_us);
            self.res.streams = streams;
            self.res.held_by_other = Some(held);
        }
    }

    fn write_stream(&mut self, now: Instant, c: &mut Connection) {
        let limit = self.limit();
        while self.res.bytes_sent < limit && c.send_room() > 0 && c.unsent_bytes() < SEND_AHEAD {
            let offset = self.res.bytes_sent;
            let n = ((limit - offset) as usize)
                .min(STREAM_WRITE)
                .min(c.send_room());
            let data = payload::stream_slice(self.key, offset, n);
            match c.stream_write_bytes(now, &data) {
                Ok(0) | Err(_) => break,
                Ok(k) => self.res.bytes_sent += k as u64,
            }
        }
        if self.res.bytes_sent >= limit && !self.finished {
            self.finished = c.stream_finish(now).is_ok();
            if self.finished {
                c.close(now);
                self.closing = true;
            }
        }
    }

    /// Sends message number `msgs_sent`, generated at `generated`; false if refused.
    fn send_message(&mut self, now: Instant, generated: Instant, c: &mut Connection) -> bool {
        let id = self.res.msgs_sent;
        let m = payload::message(self.key, id, self.size());
        if c.send_msg(now, Bytes::from(m)).is_err() {
            return false;
        }
        self.generated_us.push(generated.as_micros());
        self.res.msgs_sent += 1;
        self.res.bytes_sent += self.size() as u64;
        true
    }

    fn close_when_written(&mut self, now: Instant, c: &mut Connection) {
        if self.res.bytes_sent >= self.limit() {
            c.close(now);
            self.closing = true;
        }
    }

    /// Reads what the receiver's connection delivered and checks it; echoes ping-pong
    /// requests.
    pub fn drive_receiver(&mut self, now: Instant, c: &mut Connection) {
        let recv_limit = c.params().recv_buffer as u64;
        let mut got_now = 0u64;
        if let Some(s) = self.streams.as_mut() {
            let (got, ended) = s.drive_receiver(now, c);
            got_now = got;
            self.res.bytes_delivered += got;
            for v in std::mem::take(&mut s.violations) {
                self.violation(v);
            }
            if ended && self.done_at.is_none() {
                self.done_at = Some(now);
                self.res.completed = true;
                c.close(now);
            }
        } else if !self.spec.uses_messages() {
            loop {
                match c.stream_read_chunk(now, usize::MAX) {
                    Ok(chunk) if chunk.is_empty() => {
                        if self.done_at.is_none() {
                            self.done_at = Some(now);
                            self.res.completed = true;
                            if Some(self.res.bytes_delivered) != self.spec.bytes {
                                self.violation(format!(
                                    "end of stream after {} bytes, {:?} sent",
                                    self.res.bytes_delivered, self.spec.bytes
                                ));
                            }
                            c.close(now);
                        }
                        break;
                    }
                    Ok(chunk) => {
                        let n = chunk.len();
                        if let Some(i) =
                            payload::first_mismatch(self.key, self.res.bytes_delivered, &chunk)
                        {
                            self.violation(format!(
                                "stream byte {} differs from what was sent",
                                self.res.bytes_delivered + i as u64
                            ));
                        }
                        self.res.bytes_delivered += n as u64;
                        got_now += n as u64;
                    }
                    Err(_) => break,
                }
            }
        } else {
            let size = self.size();
            while let Ok(m) = c.recv_msg(now) {
                let Some(id) = payload::check_message(self.key, size, &m)
                    .filter(|&id| id < self.res.msgs_sent)
                else {
                    self.violation("corrupt or unknown message delivered".into());
                    continue;
                };
                if matches!(self.spec.kind, FlowKind::PingPong { .. }) {
                    // The echo goes back; the round is counted when it returns.
                    if c.send_msg(now, m).is_err() {
                        self.violation(format!("could not echo round {id}"));
                    }
                    continue;
                }
                if !self.seen.first_time(id) {
                    self.violation(format!("message {id} delivered twice"));
                }
                self.res.msgs_delivered += 1;
                self.record_latency(now, id);
                self.res.bytes_delivered += m.len() as u64;
                got_now += m.len() as u64;
            }
        }
        if got_now > recv_limit {
            self.limit_violation(format!(
                "receiver held {got_now} bytes, above its {recv_limit}-byte buffer"
            ));
        }
        self.interval_bytes += got_now;
        self.res.peak_receiver_buffered = self.res.peak_receiver_buffered.max(c.buffered_bytes());
    }

    fn record_latency(&mut self, now: Instant, id: u64) {
        let Some(&gen) = self.generated_us.get(id as usize) else {
            return;
        };
        let lat = now.as_micros().saturating_sub(gen);
        self.res.latency_sum_us += lat;
        self.res.latency_max_us = self.res.latency_max_us.max(lat);
        if self
            .spec
            .deadline
            .is_none_or(|d| lat <= d.as_micros() as u64)
        {
            self.res.msgs_on_time += 1;
        }
    }

    /// Reads the echoes that came back to the sender (ping-pong).
    pub fn drive_echoes(&mut self, now: Instant, c: &mut Connection) {
        if !matches!(self.spec.kind, FlowKind::PingPong { .. }) {
            return;
        }
        let size = self.size();
        while let Ok(m) = c.recv_msg(now) {
            let id = payload::check_message(self.key, size, &m);
            let current = self.res.msgs_sent.checked_sub(1);
            match (id, self.ping_sent_at) {
                (Some(id), Some(t)) if Some(id) == current => {
                    let rtt = now.saturating_since(t).as_micros() as u64;
                    self.res.round_trips_us.push(rtt);
                    self.res.msgs_delivered += 1;
                    self.record_latency(now, id);
                    self.res.bytes_delivered += m.len() as u64;
                    self.interval_bytes += m.len() as u64;
                    self.ping_sent_at = None;
                }
                (Some(id), _) if id < self.res.msgs_sent => {} // a late echo of a given-up round
                _ => self.violation("corrupt or unknown echo delivered".into()),
            }
        }
    }
}
