//! The receiving side of a UDT connection: reassembly and delivery (stream bytes or whole
//! messages), the receiver's loss list, message drop requests, and the arrival-speed and
//! link-capacity estimates that full ACKs carry (UDT4's `CRcvBuffer`, `CRcvLossList`,
//! `CPktTimeWindow`).
//!
//! Sequence numbers are extended (64-bit, 0 = the peer's initial sequence number).

use super::loss::{Feedback, RcvLossList, Wait};
use super::packet::Boundary;
use bytes::{Bytes, BytesMut};
use ctp_cc::time::Instant;
use std::collections::{BTreeMap, VecDeque};

/// Samples in the arrival-interval and packet-pair median filters (UDT4: 16).
pub const RATE_WINDOW: usize = 16;

#[derive(Clone, Debug)]
struct InPacket {
    boundary: Boundary,
    in_order: bool,
    payload: Bytes,
    /// A placeholder for a packet of a dropped message.
    dropped: bool,
}

/// What an arriving data packet did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Arrival {
    /// Already received (or before the delivery point).
    pub duplicate: bool,
    /// No room in the receive buffer: dropped.
    pub no_room: bool,
    /// A gap it revealed (to report in a NAK at once).
    pub new_loss: Option<(u64, u64)>,
}

/// A median-filtered rate from intervals (UDT4's `CPktTimeWindow::getPktRcvSpeed`).
#[derive(Clone, Debug, Default)]
struct IntervalWindow {
    samples: VecDeque<u64>,
}

impl IntervalWindow {
    fn push(&mut self, us: u64) {
        if self.samples.len() == RATE_WINDOW {
            self.samples.pop_front();
        }
        self.samples.push_back(us.max(1));
    }

    /// Packets per second: the mean of the intervals within [median/8, median·8], inverted.
    fn rate(&self) -> u32 {
        if self.samples.len() < RATE_WINDOW / 2 {
            return 0;
        }
        let mut s: Vec<u64> = self.samples.iter().copied().collect();
        s.sort_unstable();
        let median = s[s.len() / 2];
        let (lo, hi) = (median / 8, median * 8);
        let kept: Vec<u64> = s.into_iter().filter(|&x| x > lo && x < hi).collect();
        if kept.len() <= RATE_WINDOW / 2 {
            return 0;
        }
        let mean = kept.iter().sum::<u64>() / kept.len() as u64;
        (1_000_000 / mean.max(1)) as u32
    }
}

/// The receive buffer, loss list and rate estimates.
#[derive(Debug)]
pub struct Receiver {
    dgram: bool,
    pending: BTreeMap<u64, InPacket>,
    /// Next packet to deliver (or to start a message with).
    deliver: u64,
    /// One past the largest sequence number received.
    next_expected: u64,
    loss: RcvLossList,
    stream: VecDeque<Bytes>,
    msgs: VecDeque<Bytes>,
    queued_bytes: usize,
    limit_pkts: usize,
    payload: usize,
    arrivals: IntervalWindow,
    last_arrival: Option<Instant>,
    pairs: IntervalWindow,
    probe_at: Option<Instant>,
    /// Messages dropped at the sender's request.
    pub dropped_msgs: u64,
}

impl Receiver {
    /// An empty receiver holding at most `limit_pkts` packets of `payload` bytes.
    pub fn new(dgram: bool, limit_pkts: usize, payload: usize) -> Self {
        Receiver {
            dgram,
            pending: BTreeMap::new(),
            deliver: 0,
            next_expected: 0,
            loss: RcvLossList::new(),
            stream: VecDeque::new(),
            msgs: VecDeque::new(),
            queued_bytes: 0,
            limit_pkts: limit_pkts.max(2),
            payload: payload.max(1),
            arrivals: IntervalWindow::default(),
            last_arrival: None,
            pairs: IntervalWindow::default(),
            probe_at: None,
            dropped_msgs: 0,
        }
    }

    /// The acknowledgement point: every packet before it was received.
    pub fn ack_point(&self) -> u64 {
        self.loss.first().unwrap_or(self.next_expected)
    }

    /// One past the largest sequence number received.
    pub fn next_expected(&self) -> u64 {
        self.next_expected
    }

    /// Free room, packets (advertised in ACKs as the available buffer).
    pub fn available(&self) -> u32 {
        // Data waiting for the application counts as the packets it would fill.
        let queued = self.queued_bytes.div_ceil(self.payload);
        self.limit_pkts
            .saturating_sub(self.pending.len() + queued)
            .min(u32::MAX as usize) as u32
    }

    /// Bytes waiting for the application.
    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }

    /// The loss list, with each range's report history.
    pub fn loss(&self) -> &RcvLossList {
        &self.loss
    }

    /// Records the arrival time of packet `wire_seq` for the rate estimates; packets whose
    /// sequence number is a multiple of 16 and their successors are the sender's probe pairs.
    pub fn on_arrival(&mut self, now: Instant, wire_seq: u32) {
        if let Some(t) = self.last_arrival {
            self.arrivals
                .push(now.saturating_since(t).as_micros() as u64);
        }
        self.last_arrival = Some(now);
        match wire_seq & 0xF {
            0 => self.probe_at = Some(now),
            1 => {
                if let Some(t) = self.probe_at.take() {
                    self.pairs.push(now.saturating_since(t).as_micros() as u64);
                }
            }
            _ => self.probe_at = None,
        }
    }

    /// Packet arrival speed, packets/s (0 until known).
    pub fn arrival_rate(&self) -> u32 {
        self.arrivals.rate()
    }

    /// Link capacity from packet pairs, packets/s (0 until known).
    pub fn capacity(&self) -> u32 {
        self.pairs.rate()
    }

    /// Takes a data packet arriving at `now`. A gap it reveals enters the loss list as
    /// reported at `now` (the caller reports it at once: [`Arrival::new_loss`]). A message
    /// sent without the in-order flag is delivered as soon as it is complete, ahead of
    /// earlier incomplete ones (UDT's `sendmsg(…, inorder = false)`).
    pub fn on_data(
        &mut self,
        now: Instant,
        seq: u64,
        boundary: Boundary,
        in_order: bool,
        payload: Bytes,
    ) -> Arrival {
        let mut out = Arrival::default();
        if seq < self.deliver || self.pending.contains_key(&seq) {
            out.duplicate = true;
            return out;
        }
        if seq >= self.next_expected {
            // Beyond the buffer: the packet cannot be kept (UDT4 drops it too).
            if seq - self.deliver >= self.limit_pkts as u64 || self.available() == 0 {
                out.no_room = true;
                return out;
            }
            if seq > self.next_expected {
                self.loss
                    .insert_tagged(self.next_expected, seq - 1, Feedback::reported(Some(now)));
                out.new_loss = Some((self.next_expected, seq - 1));
            }
            self.next_expected = seq + 1;
        } else if self.loss.remove(seq, seq) == 0 {
            out.duplicate = true;
            return out;
        }
        self.pending.insert(
            seq,
            InPacket {
                boundary,
                in_order,
                payload,
                dropped: false,
            },
        );
        self.advance();
        if self.dgram && !in_order {
            self.deliver_unordered(seq);
        }
        out
    }

    /// The boundary of pending packet `s` if it belongs to an undelivered out-of-order
    /// message.
    fn unordered_boundary(&self, s: u64) -> Option<Boundary> {
        self.pending
            .get(&s)
            .filter(|p| !p.dropped && !p.in_order)
            .map(|p| p.boundary)
    }

    /// Delivers the out-of-order message holding `seq` if it is complete; its packets stay
    /// as placeholders until the delivery point passes them.
    fn deliver_unordered(&mut self, seq: u64) {
        // Walk back to the message's first packet, then forward to its last one.
        let mut first = seq;
        loop {
            let Some(b) = self.unordered_boundary(first) else {
                return;
            };
            if b.is_first() {
                break;
            }
            if first != seq && b.is_last() {
                return;
            }
            let Some(f) = first.checked_sub(1) else {
                return;
            };
            first = f;
        }
        let mut last = seq;
        loop {
            let Some(b) = self.unordered_boundary(last) else {
                return;
            };
            if last != first && b.is_first() {
                return;
            }
            if b.is_last() {
                break;
            }
            last += 1;
        }
        let mut m = BytesMut::new();
        for s in first..=last {
            if let Some(p) = self.pending.get_mut(&s) {
                m.extend_from_slice(&p.payload);
                p.payload = Bytes::new();
                p.dropped = true;
            }
        }
        self.queue(m.freeze());
        self.advance();
    }

    /// The sender gave up message `first..=last` (a drop request). A gap it leaves before
    /// the message enters the loss list unreported (due at the next NAK timer). Only the
    /// part within the receive buffer counts, as for data packets: what lies beyond it
    /// could not have been received, and a peer naming a message far ahead must not grow
    /// the loss list (or the placeholders) past the flow window. Returns true when some of
    /// the request lay beyond the buffer and was ignored.
    pub fn drop_message(&mut self, first: u64, last: u64) -> bool {
        if last < first || last < self.deliver || last - first >= self.limit_pkts as u64 {
            return false;
        }
        let end = self.deliver + self.limit_pkts as u64 - 1;
        if first > end {
            return true;
        }
        let beyond = last > end;
        let (first, last) = (first.max(self.deliver), last.min(end));
        self.loss.remove(first, last);
        for s in first..=last {
            let p = self.pending.entry(s).or_insert(InPacket {
                boundary: Boundary::Middle,
                in_order: true,
                payload: Bytes::new(),
                dropped: true,
            });
            p.dropped = true;
        }
        if last >= self.next_expected {
            if first > self.next_expected {
                self.loss
                    .insert_tagged(self.next_expected, first - 1, Feedback::reported(None));
            }
            self.next_expected = last + 1;
        }
        self.dropped_msgs += 1;
        self.advance();
        beyond
    }

    fn queue(&mut self, b: Bytes) {
        self.queued_bytes += b.len();
        if self.dgram {
            self.msgs.push_back(b);
        } else if !b.is_empty() {
            self.stream.push_back(b);
        }
    }

    /// Delivers what became complete.
    fn advance(&mut self) {
        loop {
            let Some(p) = self.pending.get(&self.deliver) else {
                return;
            };
            if p.dropped || (self.dgram && !p.boundary.is_first()) {
                // What is left of a dropped (or torn) message.
                self.pending.remove(&self.deliver);
                self.deliver += 1;
                continue;
            }
            if !self.dgram {
                let p = self.pending.remove(&self.deliver).map(|p| p.payload);
                self.deliver += 1;
                self.queue(p.unwrap_or_default());
                continue;
            }
            // A message: complete when every packet up to its last one is here.
            let mut end = self.deliver;
            loop {
                match self.pending.get(&end) {
                    Some(q) if !q.dropped && q.boundary.is_last() => break,
                    Some(q) if !q.dropped && (end == self.deliver || !q.boundary.is_first()) => {
                        end += 1
                    }
                    Some(_) => {
                        // A torn message: skip its first packet and resynchronise.
                        self.pending.remove(&self.deliver);
                        self.deliver += 1;
                        return self.advance();
                    }
                    None => return,
                }
            }
            let n = (end - self.deliver + 1) as usize;
            let msg = if n == 1 {
                self.pending
                    .remove(&self.deliver)
                    .map(|p| p.payload)
                    .unwrap_or_default()
            } else {
                let mut m = BytesMut::new();
                for s in self.deliver..=end {
                    if let Some(p) = self.pending.remove(&s) {
                        m.extend_from_slice(&p.payload);
                    }
                }
                m.freeze()
            };
            self.deliver = end + 1;
            self.queue(msg);
        }
    }

    /// What stream reads take from: on a message connection the messages, back to back.
    fn stream_queue(&mut self) -> &mut VecDeque<Bytes> {
        if self.dgram {
            &mut self.msgs
        } else {
            &mut self.stream
        }
    }

    /// Reads stream bytes into `buf`; returns how many. On a message connection the
    /// messages are read back to back as one stream (what a file transfer wants).
    pub fn read_stream(&mut self, buf: &mut [u8]) -> usize {
        let n = crate::chunk_queue::read_into(self.stream_queue(), buf);
        self.queued_bytes -= n;
        n
    }

    /// [`Receiver::read_stream`] without copying: at most `max` bytes of the next chunk.
    pub fn read_stream_chunk(&mut self, max: usize) -> Bytes {
        let chunk = crate::chunk_queue::take_front(self.stream_queue(), max);
        self.queued_bytes -= chunk.len();
        chunk
    }

    /// Takes the next whole message.
    pub fn read_msg(&mut self) -> Option<Bytes> {
        let m = self.msgs.pop_front()?;
        self.queued_bytes -= m.len();
        Some(m)
    }

    /// Losses due for a report again at `now` (the NAK timer), at most `max` ranges, each
    /// marked reported; and when the next one falls due (see [`RcvLossList::take_due`]).
    pub fn due_losses(
        &mut self,
        now: Instant,
        wait: Wait,
        max: usize,
    ) -> (Vec<(u64, u64)>, Option<Instant>) {
        self.loss.take_due(now, wait, max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Instant = Instant::ZERO;

    fn b(x: &[u8]) -> Bytes {
        Bytes::copy_from_slice(x)
    }

    #[test]
    fn stream_reorders_and_reports_gaps() {
        let mut r = Receiver::new(false, 100, 1);
        assert_eq!(
            r.on_data(T0, 0, Boundary::Solo, true, b(b"ab")),
            Arrival::default()
        );
        let a = r.on_data(T0, 3, Boundary::Solo, true, b(b"ef"));
        assert_eq!(a.new_loss, Some((1, 2)));
        assert_eq!(r.ack_point(), 1);
        assert!(r
            .on_data(T0, 2, Boundary::Solo, true, b(b"d"))
            .new_loss
            .is_none());
        assert!(r.on_data(T0, 2, Boundary::Solo, true, b(b"d")).duplicate);
        assert_eq!(r.ack_point(), 1);
        r.on_data(T0, 1, Boundary::Solo, true, b(b"c"));
        assert_eq!(r.ack_point(), 4);
        let mut buf = [0u8; 10];
        assert_eq!(r.read_stream(&mut buf), 6);
        assert_eq!(&buf[..6], b"abcdef");
        assert_eq!(r.available(), 100);
    }

    #[test]
    fn messages_are_whole_and_drop_requests_skip_them() {
        let mut r = Receiver::new(true, 100, 1);
        r.on_data(T0, 0, Boundary::First, true, b(b"he"));
        assert!(r.read_msg().is_none());
        r.on_data(T0, 1, Boundary::Last, true, b(b"y"));
        assert_eq!(r.read_msg().unwrap(), b(b"hey"));
        // Message 2..=3 lost, then dropped by the sender; message 4 delivered.
        r.on_data(T0, 4, Boundary::Solo, true, b(b"x"));
        assert!(r.read_msg().is_none());
        r.drop_message(2, 3);
        assert_eq!(r.ack_point(), 5);
        assert_eq!(r.read_msg().unwrap(), b(b"x"));
        assert_eq!(r.dropped_msgs, 1);
    }

    #[test]
    fn drop_requests_count_only_within_the_buffer() {
        let mut r = Receiver::new(true, 100, 1);
        r.on_data(T0, 0, Boundary::Solo, true, b(b"a"));
        // Far ahead: ignored whole, nothing lost, nothing held.
        assert!(r.drop_message(1 << 40, (1 << 40) + 1));
        assert!(r.loss().is_empty());
        assert_eq!((r.ack_point(), r.available()), (1, 100 - 1));
        // Across the end of the buffer (1..=100): cut there.
        assert!(r.drop_message(90, 120));
        assert_eq!(r.loss().ranges().collect::<Vec<_>>(), vec![(1, 89)]);
        assert_eq!(r.next_expected(), 101);
        // Within it: as before.
        assert!(!r.drop_message(5, 6));
        assert_eq!(r.loss().len(), 87);
        assert_eq!(r.dropped_msgs, 2);
    }

    #[test]
    fn full_buffer_drops() {
        let mut r = Receiver::new(false, 2, 1);
        r.on_data(T0, 0, Boundary::Solo, true, b(b"a"));
        r.on_data(T0, 1, Boundary::Solo, true, b(b"b"));
        assert!(r.on_data(T0, 2, Boundary::Solo, true, b(b"c")).no_room);
        let mut buf = [0u8; 1];
        r.read_stream(&mut buf);
        assert!(!r.on_data(T0, 2, Boundary::Solo, true, b(b"c")).no_room);
    }

    #[test]
    fn rates_from_median_filtered_intervals() {
        let mut r = Receiver::new(false, 100, 1);
        for i in 0..200u32 {
            // Pairs 16k, 16k+1 arrive 100 µs apart; other packets 1 ms apart.
            let t = u64::from(i) * 1000 + if i % 16 == 1 { 100 } else { 0 };
            let t = if i % 16 == 1 { t - 1000 } else { t };
            r.on_arrival(Instant::from_micros(t + 10_000), i);
        }
        assert_eq!(r.capacity(), 10_000);
        assert!(
            (900..=1100).contains(&r.arrival_rate()),
            "{}",
            r.arrival_rate()
        );
    }

    #[test]
    fn unordered_messages_overtake_incomplete_ones_and_in_order_ones_wait() {
        let mut r = Receiver::new(true, 100, 1);
        // Message A (0..=1) misses packet 0; B (2..=3) is out of order; C (4) in order.
        r.on_data(T0, 1, Boundary::Last, false, b(b"a2"));
        r.on_data(T0, 3, Boundary::Last, false, b(b"b2"));
        assert!(r.read_msg().is_none());
        r.on_data(T0, 2, Boundary::First, false, b(b"b1"));
        assert_eq!(r.read_msg().unwrap(), b(b"b1b2"));
        r.on_data(T0, 4, Boundary::Solo, true, b(b"c"));
        assert!(r.read_msg().is_none(), "in-order C waits for A");
        r.on_data(T0, 0, Boundary::First, false, b(b"a1"));
        assert_eq!(r.read_msg().unwrap(), b(b"a1a2"));
        assert_eq!(r.read_msg().unwrap(), b(b"c"));
        assert!(r.read_msg().is_none(), "B is not delivered twice");
        assert_eq!(r.ack_point(), 5);
    }
}
