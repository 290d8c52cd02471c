//! The application of a `streams` flow: several streams over one connection, each either a
//! sequence of messages generated at a constant rate or a bulk byte stream, each with its
//! own priority — or, for comparison, the same data multiplexed on the connection's one
//! ordered byte stream (stream 0), as an application without streams would send it.
//!
//! Each stream is a byte stream of its own payload (see [`crate::payload`]), checked byte by
//! byte at the receiver; a message stream's message `k` is bytes `k·size .. (k+1)·size`,
//! generated at the moment its turn came (as a cbr source's), and delivered when the
//! receiver has read its last byte. Multiplexed on stream 0, the sender keeps the order it
//! wrote the streams' bytes in (what a header per message would tell a real receiver), and
//! the receiver splits what it reads back into the streams.
//!
//! **Head-of-line blocking.** A message is *late* when its delay (generation to delivery)
//! exceeds the flow's smallest message delay by more than half the propagation RTT: it
//! waited for a retransmission (which costs at least a round trip). A late message was
//! *held by another stream* when it was delivered at the same instant as a late message of
//! another stream generated before it: the two were released together by the same
//! retransmission, which carried the other stream's data (its own data arrived, or it would
//! have arrived after the other's retransmission, at another instant: the bottleneck
//! serializes packets). With streams ordered each on its own this never happens; on one
//! ordered stream every message that arrived during a retransmission's round trip waits
//! for it.

use crate::payload;
use bytes::Bytes;
use core::time::Duration;
use ctp_proto::connection::Connection;
use ctp_proto::{Instant, StreamId, StreamKind};
use serde::Serialize;
use std::collections::{HashMap, VecDeque};

/// One stream of a `streams` flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamSpec {
    /// Higher is served first; equal priorities take turns.
    pub priority: u8,
    /// Bytes per message (a bulk stream's unit of writing).
    pub message_size: usize,
    /// Messages generated at this payload bit rate; `None`: a bulk stream, written as fast
    /// as the connection takes it.
    pub rate_bps: Option<u64>,
    /// Bytes the stream carries, then ends; `None`: until the run ends.
    pub bytes: Option<u64>,
}

/// The outcome of one stream of a `streams` flow.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StreamResult {
    /// The stream's id on the connection (0 for every stream multiplexed on stream 0).
    pub stream: u64,
    /// Its priority.
    pub priority: u8,
    /// A message stream (generated at a rate), not a bulk one.
    pub messages: bool,
    /// Bytes written by the sender.
    pub bytes_sent: u64,
    /// Bytes delivered and verified at the receiver.
    pub bytes_delivered: u64,
    /// Messages generated.
    pub msgs_sent: u64,
    /// Messages delivered whole.
    pub msgs_delivered: u64,
    /// From the flow's start to the stream's last byte delivered, µs.
    pub completion_us: Option<u64>,
    /// Median message delay (generation to delivery), µs.
    pub delay_p50_us: Option<u64>,
    /// 99th percentile of the message delays, µs.
    pub delay_p99_us: Option<u64>,
    /// Largest message delay, µs.
    pub delay_max_us: Option<u64>,
    /// Messages that waited for a retransmission (see the module documentation).
    pub late: u64,
    /// Late messages held by another stream's retransmission.
    pub held_by_other: u64,
}

/// The nearest-rank percentile `p` (0..=100) of sorted `v`.
pub fn percentile(v: &[u64], p: u64) -> Option<u64> {
    (!v.is_empty()).then(|| v[((v.len() as u64 * p).div_ceil(100).max(1) - 1) as usize])
}

/// Largest write of a bulk stream at once.
const BULK_WRITE: usize = 16_384;

#[derive(Default)]
struct Tx {
    id: StreamId,
    written: u64,
    /// Bytes generated so far (a message stream's messages are generated on time, written
    /// as the connection takes them).
    generated: u64,
    next_due: Option<Instant>,
    gen_us: Vec<u64>,
}

#[derive(Default)]
struct Rx {
    delivered: u64,
    deliver_us: Vec<u64>,
    done_us: Option<u64>,
    ended: bool,
}

/// The running state of a `streams` flow's application (both ends).
pub(crate) struct StreamsApp {
    /// Bytes a bulk stream keeps written but unsent (the application's `SEND_AHEAD`).
    send_ahead: usize,
    specs: Vec<StreamSpec>,
    /// Everything on stream 0, in the order written.
    single: bool,
    key: u64,
    tx: Vec<Tx>,
    rx: Vec<Rx>,
    by_id: HashMap<StreamId, usize>,
    /// Multiplexed: which stream each run of stream 0's bytes belongs to, in order.
    log: VecDeque<(usize, u64)>,
    started: Option<Instant>,
    finished: bool,
    buf: Vec<u8>,
    /// Bytes delivered that differ from what was sent.
    pub violations: Vec<String>,
}

impl StreamsApp {
    /// A streams application for `specs`; `single` puts them all on stream 0.
    pub fn new(specs: Vec<StreamSpec>, single: bool, key: u64, send_ahead: usize) -> Self {
        let n = specs.len();
        StreamsApp {
            specs,
            single,
            key,
            send_ahead,
            tx: (0..n).map(|_| Tx::default()).collect(),
            rx: (0..n).map(|_| Rx::default()).collect(),
            by_id: HashMap::new(),
            log: VecDeque::new(),
            started: None,
            finished: false,
            buf: vec![0; 64 * 1024],
            violations: Vec::new(),
        }
    }

    fn stream_key(&self, i: usize) -> u64 {
        payload::splitmix(self.key ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    fn period(&self, i: usize) -> Option<Duration> {
        let s = &self.specs[i];
        s.rate_bps.map(|r| {
            Duration::from_nanos((s.message_size as u64 * 8 * 1_000_000_000).div_ceil(r.max(1)))
        })
    }

    fn limit(&self, i: usize) -> u64 {
        self.specs[i].bytes.unwrap_or(u64::MAX)
    }

    /// True once the sender wrote and finished every stream.
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// The next moment a message falls due, if any.
    pub fn next_wake(&self) -> Option<Instant> {
        (0..self.specs.len())
            .filter(|&i| self.tx[i].generated < self.limit(i))
            .filter_map(|i| self.tx[i].next_due)
            .min()
    }

    /// Opens the streams (first call), generates the messages due, writes what the
    /// connection takes; finishes the streams and closes once everything is written.
    /// Returns the bytes written.
    pub fn drive_sender(&mut self, now: Instant, c: &mut Connection) -> u64 {
        if self.finished {
            return 0;
        }
        if self.started.is_none() {
            self.started = Some(now);
            let n = self.specs.len() as u32;
            for i in 0..self.specs.len() {
                let id = if self.single {
                    0
                } else {
                    match c.open_stream(StreamKind::Bidirectional, self.specs[i].priority) {
                        Ok(id) => id,
                        Err(_) => return 0,
                    }
                };
                self.tx[i].id = id;
                self.by_id.insert(id, i);
                // Message streams start staggered over one period, not all at once.
                self.tx[i].next_due = self.period(i).map(|p| now + p * i as u32 / n);
            }
        }
        let mut wrote = 0;
        for i in 0..self.specs.len() {
            let limit = self.limit(i);
            if let Some(period) = self.period(i) {
                let size = self.specs[i].message_size.max(1) as u64;
                let t = &mut self.tx[i];
                while let Some(due) = t.next_due.filter(|&d| d <= now && t.generated < limit) {
                    t.gen_us.push(due.as_micros());
                    t.generated = (t.generated + size).min(limit);
                    t.next_due = Some(due + period);
                }
                wrote += self.write(now, i, c);
            } else {
                // A bulk stream keeps up to `SEND_AHEAD` unsent, like the bulk flows.
                while self.tx[i].written < limit && c.unsent_bytes() < self.send_ahead {
                    let t = &mut self.tx[i];
                    t.generated = limit.min(t.written + BULK_WRITE as u64);
                    let k = self.write(now, i, c);
                    if k == 0 {
                        break;
                    }
                    wrote += k;
                }
            }
        }
        let all_written = (0..self.specs.len())
            .all(|i| self.specs[i].bytes.is_some_and(|b| self.tx[i].written >= b));
        if all_written {
            let ok = if self.single {
                c.stream_finish(now).is_ok()
            } else {
                (0..self.specs.len()).all(|i| c.finish_on(now, self.tx[i].id).is_ok())
            };
            if ok {
                self.finished = true;
                c.close(now);
            }
        }
        wrote
    }

    /// Writes what stream `i` generated and has not written yet, as far as the connection
    /// takes it; returns the bytes written.
    fn write(&mut self, now: Instant, i: usize, c: &mut Connection) -> u64 {
        let mut wrote = 0;
        while self.tx[i].written < self.tx[i].generated {
            let off = self.tx[i].written;
            let n = (self.tx[i].generated - off).min(BULK_WRITE as u64) as usize;
            let data: Bytes = payload::stream_slice(self.stream_key(i), off, n);
            let r = if self.single {
                c.stream_write_bytes(now, &data)
            } else {
                c.write_on(now, self.tx[i].id, &data)
            };
            let k = match r {
                Ok(0) | Err(_) => break,
                Ok(k) => k as u64,
            };
            self.tx[i].written += k;
            wrote += k;
            if self.single {
                match self.log.back_mut() {
                    Some((s, len)) if *s == i => *len += k,
                    _ => self.log.push_back((i, k)),
                }
            }
        }
        wrote
    }

    /// Reads what arrived on every stream and checks it; returns the bytes read and whether
    /// every stream has ended.
    pub fn drive_receiver(&mut self, now: Instant, c: &mut Connection) -> (u64, bool) {
        let mut got = 0;
        if self.single {
            loop {
                match c.stream_read_chunk(now, usize::MAX) {
                    Ok(chunk) if chunk.is_empty() => {
                        for r in &mut self.rx {
                            r.ended = true;
                        }
                        break;
                    }
                    Ok(chunk) => {
                        got += chunk.len() as u64;
                        let mut at = 0;
                        while at < chunk.len() {
                            let Some((i, left)) = self.log.front_mut() else {
                                break;
                            };
                            let (i, n) = (*i, (*left).min((chunk.len() - at) as u64) as usize);
                            *left -= n as u64;
                            if *left == 0 {
                                self.log.pop_front();
                            }
                            self.deliver(now, i, &chunk[at..at + n]);
                            at += n;
                        }
                    }
                    Err(_) => break,
                }
            }
        } else {
            while c.accept_stream().is_some() {}
            for i in 0..self.specs.len() {
                let id = self.tx[i].id;
                if self.rx[i].ended || !self.by_id.contains_key(&id) {
                    continue;
                }
                loop {
                    let mut buf = std::mem::take(&mut self.buf);
                    let r = c.read_on(now, id, &mut buf);
                    match r {
                        Ok(0) => self.rx[i].ended = true,
                        Ok(n) => {
                            got += n as u64;
                            self.deliver(now, i, &buf[..n]);
                        }
                        Err(_) => {}
                    }
                    self.buf = buf;
                    if !matches!(r, Ok(n) if n > 0) {
                        break;
                    }
                }
            }
        }
        (got, self.rx.iter().all(|r| r.ended))
    }

    fn deliver(&mut self, now: Instant, i: usize, data: &[u8]) {
        let off = self.rx[i].delivered;
        if let Some(k) = payload::first_mismatch(self.stream_key(i), off, data) {
            if self.violations.len() < 8 {
                let at = off + k as u64;
                self.violations
                    .push(format!("stream {i}: byte {at} differs from what was sent"));
            }
        }
        let r = &mut self.rx[i];
        r.delivered += data.len() as u64;
        let size = self.specs[i].message_size.max(1) as u64;
        if self.specs[i].rate_bps.is_some() {
            let whole = r.delivered / size
                + u64::from(
                    self.specs[i].bytes == Some(r.delivered) && !r.delivered.is_multiple_of(size),
                );
            while (r.deliver_us.len() as u64) < whole {
                r.deliver_us.push(now.as_micros());
            }
        }
        if self.specs[i].bytes == Some(r.delivered) {
            r.done_us = Some(now.as_micros());
        }
    }

    /// Every stream's outcome and the flow's messages held by another stream;
    /// `start_us` is the flow's start, `prop_rtt_us` its propagation RTT.
    pub fn results(&self, start_us: u64, prop_rtt_us: u64) -> (Vec<StreamResult>, u64) {
        // (delivered at, generated at, stream, delay) of every message delivered.
        let mut msgs: Vec<(u64, u64, usize, u64)> = Vec::new();
        for (i, (t, r)) in self.tx.iter().zip(&self.rx).enumerate() {
            for (&g, &d) in t.gen_us.iter().zip(&r.deliver_us) {
                msgs.push((d, g, i, d.saturating_sub(g)));
            }
        }
        let floor = msgs.iter().map(|m| m.3).min().unwrap_or(0);
        let late_after = floor + prop_rtt_us / 2;
        msgs.sort_unstable();
        let mut held = vec![0u64; self.specs.len()];
        let mut late = vec![0u64; self.specs.len()];
        let mut k = 0;
        while k < msgs.len() {
            let same = msgs[k..].iter().take_while(|m| m.0 == msgs[k].0).count();
            let group = &msgs[k..k + same];
            for m in group.iter().filter(|m| m.3 > late_after) {
                late[m.2] += 1;
                if group
                    .iter()
                    .any(|o| o.2 != m.2 && o.1 < m.1 && o.3 > late_after)
                {
                    held[m.2] += 1;
                }
            }
            k += same;
        }
        let out = (0..self.specs.len())
            .map(|i| {
                let (t, r) = (&self.tx[i], &self.rx[i]);
                let mut d: Vec<u64> = t
                    .gen_us
                    .iter()
                    .zip(&r.deliver_us)
                    .map(|(&g, &d)| d.saturating_sub(g))
                    .collect();
                d.sort_unstable();
                StreamResult {
                    stream: t.id,
                    priority: self.specs[i].priority,
                    messages: self.specs[i].rate_bps.is_some(),
                    bytes_sent: t.written,
                    bytes_delivered: r.delivered,
                    msgs_sent: t.gen_us.len() as u64,
                    msgs_delivered: r.deliver_us.len() as u64,
                    completion_us: r.done_us.map(|x| x.saturating_sub(start_us)),
                    delay_p50_us: percentile(&d, 50),
                    delay_p99_us: percentile(&d, 99),
                    delay_max_us: d.last().copied(),
                    late: late[i],
                    held_by_other: held[i],
                }
            })
            .collect();
        (out, held.iter().sum())
    }
}
