//! The sending side of a UDT connection: the send buffer (packets from the oldest
//! unacknowledged one on), the sender's loss list and message time-to-live (UDT4's
//! `CSndBuffer` and `CSndLossList`).
//!
//! Sequence numbers are extended (64-bit, starting at 0 for the initial sequence number).

use super::loss::LossList;
use super::packet::{Boundary, MAX_MSG};
use bytes::Bytes;
use ctp_cc::time::Instant;
use std::collections::VecDeque;

/// One packet of the send buffer.
#[derive(Clone, Debug)]
pub struct OutPacket {
    /// Message number (29 bits).
    pub msg: u32,
    /// Position in its message.
    pub boundary: Boundary,
    /// The message must be delivered in order.
    pub in_order: bool,
    /// Payload.
    pub payload: Bytes,
    /// After this, the message is no longer worth sending (TTL).
    pub expires: Option<Instant>,
    /// Extended sequence numbers of its message's first and last packets.
    pub msg_span: (u64, u64),
    /// When it last left ([`Instant::ZERO`] before it first does).
    pub sent_at: Instant,
}

/// What to send next.
#[derive(Clone, Debug)]
pub enum Next {
    /// A packet (extended sequence number, retransmission?).
    Packet(u64, bool),
    /// A message expired before it was delivered: ask the receiver to drop it
    /// (message number, first and last extended sequence numbers).
    Drop(u32, u64, u64),
}

/// The send buffer and loss list.
#[derive(Debug)]
pub struct Sender {
    buf: VecDeque<OutPacket>,
    /// Oldest unacknowledged packet (== sequence number of `buf[0]`).
    una: u64,
    /// Next packet never sent yet.
    next_new: u64,
    /// One past the highest packet the receiver is known to hold: a NAK of `a..=b` is sent
    /// when `b + 1` arrives.
    frontier: u64,
    loss: LossList,
    next_msg: u32,
    bytes: usize,
    limit: usize,
    payload: usize,
}

impl Sender {
    /// An empty sender: packets of `payload` bytes, at most `limit` bytes buffered.
    pub fn new(payload: usize, limit: usize) -> Self {
        Sender {
            buf: VecDeque::new(),
            una: 0,
            next_new: 0,
            frontier: 0,
            loss: LossList::new(),
            next_msg: 1,
            bytes: 0,
            limit,
            payload: payload.max(1),
        }
    }

    /// Bytes that can be queued now.
    pub fn room(&self) -> usize {
        self.limit.saturating_sub(self.bytes)
    }

    /// Bytes buffered (unacknowledged or unsent).
    pub fn buffered(&self) -> usize {
        self.bytes
    }

    /// Bytes queued and never sent (about: every packet counted at the full payload size).
    pub fn unsent(&self) -> usize {
        (self.end() - self.next_new) as usize * self.payload
    }

    /// Oldest unacknowledged sequence number.
    pub fn una(&self) -> u64 {
        self.una
    }

    /// The sequence number the next new packet gets.
    pub fn next_new(&self) -> u64 {
        self.next_new
    }

    /// One past the last packet queued.
    pub fn end(&self) -> u64 {
        self.una + self.buf.len() as u64
    }

    /// True when nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Packets sent at least once and not acknowledged.
    pub fn in_flight(&self) -> u64 {
        self.next_new - self.una
    }

    /// Packets sent whose fate is unknown: those after the highest one the receiver is known
    /// to hold. Below it, each packet has arrived or was reported lost (RFC 6675's *pipe*,
    /// with a NAK's end standing in for a SACK block; retransmissions not counted).
    pub fn unsettled(&self) -> u64 {
        self.next_new - self.frontier.max(self.una)
    }

    /// Packets waiting for retransmission.
    pub fn loss_len(&self) -> u64 {
        self.loss.len()
    }

    /// The packet with extended sequence number `seq`, if buffered.
    pub fn get(&self, seq: u64) -> Option<&OutPacket> {
        self.buf.get(self.index(seq)?)
    }

    /// Where packet `seq` sits in the buffer (`None` below the acknowledgement point).
    fn index(&self, seq: u64) -> Option<usize> {
        usize::try_from(seq.checked_sub(self.una)?).ok()
    }

    /// Packet `seq` left at `now` (the first time or again).
    pub fn mark_sent(&mut self, seq: u64, now: Instant) {
        if let Some(p) = self.index(seq).and_then(|i| self.buf.get_mut(i)) {
            p.sent_at = now;
        }
    }

    /// Queues one message (or, in stream mode, one write) split into packets.
    pub fn push(&mut self, data: &Bytes, in_order: bool, expires: Option<Instant>) {
        let msg = self.next_msg;
        self.next_msg = if msg >= MAX_MSG { 1 } else { msg + 1 };
        let n = data.len().div_ceil(self.payload).max(1);
        let first = self.una + self.buf.len() as u64;
        let span = (first, first + n as u64 - 1);
        for i in 0..n {
            let end = ((i + 1) * self.payload).min(data.len());
            self.buf.push_back(OutPacket {
                msg,
                boundary: Boundary::of(i == 0, i + 1 == n),
                in_order,
                payload: data.slice(i * self.payload..end),
                expires,
                msg_span: span,
                sent_at: Instant::ZERO,
            });
        }
        self.bytes += data.len();
    }

    /// Everything before `ack` was received; returns (packets, bytes) newly acknowledged.
    pub fn ack(&mut self, ack: u64) -> (u64, u64) {
        if ack <= self.una || ack > self.next_new {
            return (0, 0);
        }
        let mut bytes = 0;
        let n = ack - self.una;
        for _ in 0..n {
            if let Some(p) = self.buf.pop_front() {
                bytes += p.payload.len() as u64;
            }
        }
        self.bytes -= bytes as usize;
        self.una = ack;
        self.loss.remove_below(ack);
        (n, bytes)
    }

    /// Packets `a..=b` were reported lost; returns how many were newly added.
    pub fn nak(&mut self, a: u64, b: u64) -> u64 {
        let a = a.max(self.una);
        let b = b.min(self.next_new.saturating_sub(1));
        if self.next_new == 0 || a > b {
            return 0;
        }
        self.frontier = self.frontier.max(b + 2).min(self.next_new);
        self.loss.insert(a, b)
    }

    /// Every packet in flight is presumed lost (the EXP timer fired).
    pub fn all_lost(&mut self) -> u64 {
        if self.next_new > self.una {
            self.loss.insert(self.una, self.next_new - 1)
        } else {
            0
        }
    }

    /// The next packet to send: a retransmission first, else a new packet if `window`
    /// (packets in flight) allows. Expired messages turn into drop requests.
    pub fn next(&mut self, now: Instant, window: u64) -> Option<Next> {
        while let Some(seq) = self.loss.pop_first() {
            let Some(p) = self.get(seq) else { continue };
            if p.expires.is_some_and(|t| t <= now) {
                let (msg, (a, b)) = (p.msg, p.msg_span);
                self.loss.remove(a, b);
                return Some(Next::Drop(msg, a, b));
            }
            return Some(Next::Packet(seq, true));
        }
        let buffered_end = self.una + self.buf.len() as u64;
        if self.next_new < buffered_end && self.in_flight() < window {
            let seq = self.next_new;
            self.next_new += 1;
            return Some(Next::Packet(seq, false));
        }
        None
    }

    /// True when something could be sent given `window`.
    pub fn has_work(&self, window: u64) -> bool {
        !self.loss.is_empty()
            || (self.next_new < self.una + self.buf.len() as u64 && self.in_flight() < window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_acks_and_retransmits_first() {
        let mut s = Sender::new(10, 1000);
        s.push(&Bytes::from(vec![1u8; 25]), false, None);
        assert_eq!(s.buffered(), 25);
        let t = Instant::ZERO;
        let seqs: Vec<_> = (0..3)
            .map(|_| match s.next(t, 10) {
                Some(Next::Packet(q, false)) => q,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(seqs, vec![0, 1, 2]);
        assert_eq!(s.get(0).unwrap().boundary, Boundary::First);
        assert_eq!(s.get(2).unwrap().boundary, Boundary::Last);
        assert_eq!(s.get(2).unwrap().payload.len(), 5);
        assert!(s.next(t, 10).is_none());
        assert_eq!(s.nak(1, 1), 1);
        assert!(matches!(s.next(t, 10), Some(Next::Packet(1, true))));
        assert_eq!(s.ack(2), (2, 20));
        assert_eq!(s.una(), 2);
        assert_eq!(s.nak(0, 1), 0, "acknowledged packets are not lost");
    }

    #[test]
    fn window_limits_new_packets_and_expired_messages_become_drops() {
        let mut s = Sender::new(10, 1000);
        let t = Instant::from_micros(1000);
        s.push(&Bytes::from(vec![0u8; 20]), true, Some(t));
        s.push(&Bytes::from(vec![0u8; 5]), true, None);
        assert!(matches!(
            s.next(Instant::ZERO, 1),
            Some(Next::Packet(0, false))
        ));
        assert!(s.next(Instant::ZERO, 1).is_none(), "window of one packet");
        s.nak(0, 0);
        assert!(matches!(s.next(t, 1), Some(Next::Drop(1, 0, 1))));
    }

    #[test]
    fn a_nak_settles_the_packets_before_its_end() {
        let mut s = Sender::new(10, 1000);
        s.push(&Bytes::from(vec![0u8; 100]), false, None);
        let t = Instant::ZERO;
        while s.next(t, 100).is_some() {}
        assert_eq!((s.in_flight(), s.unsettled()), (10, 10));
        // The send buffer remembers when each packet last left (a loss's send time).
        s.mark_sent(4, Instant::from_micros(70));
        assert_eq!(s.get(4).map(|p| p.sent_at), Some(Instant::from_micros(70)));
        assert_eq!(s.get(5).map(|p| p.sent_at), Some(Instant::ZERO));
        // 3..=4 lost means 5 arrived: 0..=5 are settled (arrived or lost).
        s.nak(3, 4);
        assert_eq!((s.in_flight(), s.unsettled()), (10, 4));
        // An older NAK does not move the frontier back; an ACK past it moves it on.
        s.nak(1, 1);
        assert_eq!(s.unsettled(), 4);
        s.ack(8);
        assert_eq!((s.in_flight(), s.unsettled()), (2, 2));
        // A NAK reaching past the last packet sent settles no more than was sent.
        s.nak(9, 50);
        assert_eq!(s.unsettled(), 0);
    }
}
