//! Delivery-rate samples for the algorithms that model the path (BBR): the sender's own
//! measure of how fast its data reached the receiver, after draft-cheng-iccrg-delivery-rate-
//! estimation.
//!
//! When a packet leaves, the bytes delivered so far, the time of the latest delivery and
//! the send time of the packet delivered latest are remembered in a ring of slots indexed by
//! packet number. When it is acknowledged (with everything acknowledged together with it),
//!
//! `rate = (delivered now − delivered then) / (now − delivery time then)`,
//!
//! how long the acknowledgements took. With [`Acks::Cumulative`] the interval is at least
//! how long the data took to send (`its send time − that packet's send time`): a cumulative
//! acknowledgement jumps when a retransmission fills a hole, and ACKs come bunched by the
//! receiver's timer, and neither may make the sample faster than the sender sent (without
//! the bound, BBR over the UDT4 wire at 1 % loss measured the link 10–20 % fast and lost a
//! fifth of its packets in the bottleneck queue). Selective acknowledgements (the composed
//! engine's) do not jump; there the bound only cost BBR efficiency in the simulator's
//! `rtt-fairness` (0.98 → 0.95 on three seeds), so it is not applied. A packet whose slot a
//! later one reused gives no sample.
//!
//! The ring starts at [`RATE_SLOTS`] and doubles whenever a packet in flight would be
//! overwritten, up to twice the flow window: a connection pays for the flight it has, not
//! for the largest it could have.

use crate::time::Instant;

/// Fewest packets in flight whose delivery state is remembered for rate samples.
pub const RATE_SLOTS: usize = 1024;

/// Slots for a flow window of `max_window` packets: twice that (retransmissions and
/// control packets take packet numbers too), a power of two within `RATE_SLOTS..=2^20`.
fn rate_slots(max_window: u64) -> usize {
    (max_window.saturating_mul(2) as usize)
        .clamp(RATE_SLOTS, 1 << 20)
        .next_power_of_two()
}

/// How the peer acknowledges, which decides the interval of a sample.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Acks {
    /// Packet by packet (ranges, as the composed engine's ACK frames): the interval is how
    /// long the acknowledgements took.
    #[default]
    Selective,
    /// Everything below a sequence number (UDT's ACK): the interval is also at least how
    /// long the data took to send.
    Cumulative,
}

#[derive(Clone, Copy, Debug, Default)]
struct RateSlot {
    pn: u64,
    delivered: u64,
    delivered_at: Instant,
    /// Send time of the packet delivered latest when this one left.
    first_sent_at: Instant,
    sent_at: Instant,
    valid: bool,
}

/// The delivery-rate sampler of one connection (inert when built with [`Self::off`]).
#[derive(Debug, Default)]
pub struct DeliveryRate {
    delivered: u64,
    /// Time of the latest delivery (`None` before the first packet left).
    delivered_at: Option<Instant>,
    /// Send time of the packet delivered latest.
    first_sent_at: Option<Instant>,
    slots: Box<[RateSlot]>,
    /// The most slots the ring may grow to.
    max_slots: usize,
    acks: Acks,
}

impl DeliveryRate {
    /// A sampler for a flow window of `max_window` packets acknowledged as `acks` says.
    pub fn new(max_window: u64, acks: Acks) -> Self {
        DeliveryRate {
            slots: vec![RateSlot::default(); RATE_SLOTS].into_boxed_slice(),
            max_slots: rate_slots(max_window),
            acks,
            ..Self::default()
        }
    }

    /// A sampler that remembers nothing and gives no samples (for algorithms that read
    /// none: they pay nothing per packet).
    pub fn off() -> Self {
        Self::default()
    }

    /// Bytes delivered so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Packet `pn` leaves at `now` (a retransmission too: it is sampled when it arrives);
    /// `idle` when nothing else is in flight, so a pause does not count as delivery time.
    pub fn on_sent(&mut self, pn: u64, now: Instant, idle: bool) {
        if self.slots.is_empty() {
            return;
        }
        if idle || self.delivered_at.is_none() {
            self.delivered_at = Some(now);
            self.first_sent_at = Some(now);
        }
        let slot = RateSlot {
            pn,
            delivered: self.delivered,
            delivered_at: self.delivered_at.unwrap_or(now),
            first_sent_at: self.first_sent_at.unwrap_or(now),
            sent_at: now,
            valid: true,
        };
        *self.slot_for_sent(pn) = slot;
    }

    /// `bytes` were acknowledged at `now`, the last packet sent among them `pn`; returns
    /// the rate sample in bytes per second (0 when there is none).
    pub fn on_acked(&mut self, pn: u64, bytes: u64, now: Instant) -> u64 {
        if self.slots.is_empty() {
            return 0;
        }
        self.delivered += bytes;
        self.delivered_at = Some(now);
        let n = self.slots.len() as u64;
        let slot = &mut self.slots[(pn % n) as usize];
        if !slot.valid || slot.pn != pn {
            return 0;
        }
        slot.valid = false;
        self.first_sent_at = Some(slot.sent_at);
        let mut us = now.saturating_since(slot.delivered_at).as_micros() as u64;
        if self.acks == Acks::Cumulative {
            us = us.max(
                slot.sent_at
                    .saturating_since(slot.first_sent_at)
                    .as_micros() as u64,
            );
        }
        if us == 0 {
            return 0;
        }
        ((self.delivered - slot.delivered) as u128 * 1_000_000 / us as u128) as u64
    }

    /// Packet `pn` was declared lost: it gives no sample.
    pub fn on_lost(&mut self, pn: u64) {
        if let Some(slot) = self.slot(pn).filter(|s| s.pn == pn) {
            slot.valid = false;
        }
    }

    /// Slots in the ring now (tests).
    pub fn ring_len(&self) -> usize {
        self.slots.len()
    }

    fn slot(&mut self, pn: u64) -> Option<&mut RateSlot> {
        let n = self.slots.len() as u64;
        (n > 0).then(|| &mut self.slots[(pn % n) as usize])
    }

    /// The slot for packet `pn` about to leave: the ring doubles (up to its limit) while
    /// that slot still holds a packet in flight.
    fn slot_for_sent(&mut self, pn: u64) -> &mut RateSlot {
        while self.slots.len() < self.max_slots
            && self.slot(pn).is_some_and(|s| s.valid && s.pn != pn)
        {
            let n = self.slots.len() * 2;
            let mut grown = vec![RateSlot::default(); n].into_boxed_slice();
            // Valid entries have distinct numbers modulo n / 2, so modulo n too.
            for s in self.slots.iter().filter(|s| s.valid) {
                grown[(s.pn % n as u64) as usize] = *s;
            }
            self.slots = grown;
        }
        let n = self.slots.len() as u64;
        &mut self.slots[(pn % n) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PKT: u64 = 1000;

    fn at(us: u64) -> Instant {
        Instant::from_micros(us)
    }

    /// Packets 0..700 sent 10 µs apart (100 MB/s), each 1 ms on its way; 300 and 400
    /// are lost. The cumulative acknowledgement moves packet by packet up to 300, jumps to
    /// 400 when 300's retransmission (sent at 4.5 ms) arrives and to 700 when 400's (sent at
    /// 6 ms) does. Returns the sample of the last jump, taken, as UDT's sender takes it, on
    /// the last packet the acknowledgement covers.
    fn two_holes(acks: Acks) -> u64 {
        enum Ev {
            Sent(u64),
            Acked(u64, u64),
        }
        let mut evs: Vec<(u64, Ev)> = (0..700).map(|pn| (10 * pn, Ev::Sent(pn))).collect();
        evs.extend((0..300).map(|pn| (10 * pn + 1000, Ev::Acked(pn, 1))));
        evs.push((4500, Ev::Sent(300)));
        evs.push((5500, Ev::Acked(399, 100)));
        evs.push((6000, Ev::Sent(400)));
        evs.push((8000, Ev::Acked(699, 300)));
        evs.sort_by_key(|(t, e)| (*t, matches!(e, Ev::Acked(..))));
        let mut r = DeliveryRate::new(4096, acks);
        let mut last = 0;
        for (t, ev) in evs {
            match ev {
                Ev::Sent(pn) => r.on_sent(pn, at(t), pn == 0),
                Ev::Acked(pn, n) => last = r.on_acked(pn, n * PKT, at(t)),
            }
        }
        last
    }

    #[test]
    fn a_steady_flow_samples_its_rate_either_way() {
        for acks in [Acks::Selective, Acks::Cumulative] {
            let mut r = DeliveryRate::new(4096, acks);
            let mut last = 0;
            for pn in 0..400u64 {
                r.on_sent(pn, at(10 * pn), pn == 0);
                if pn >= 100 {
                    last = r.on_acked(pn - 100, PKT, at(10 * pn));
                }
            }
            // 1000 bytes every 10 µs.
            assert!(
                (99_000_000..=101_000_000).contains(&last),
                "{acks:?} {last}"
            );
        }
    }

    #[test]
    fn a_cumulative_jump_is_not_faster_than_the_data_was_sent() {
        // 300 packets over the 2.5 ms since the previous jump: 1.2 times the sending rate.
        let selective = two_holes(Acks::Selective);
        assert_eq!(selective, 120_000_000);
        // Over the 3 ms it took to send them: the sending rate.
        let cumulative = two_holes(Acks::Cumulative);
        assert_eq!(cumulative, 100_000_000);
    }

    #[test]
    fn a_pause_with_nothing_in_flight_is_not_delivery_time() {
        let mut r = DeliveryRate::new(4096, Acks::Cumulative);
        r.on_sent(0, at(0), true);
        assert_eq!(r.on_acked(0, PKT, at(1000)), 1_000_000);
        // One second of silence, then a packet that is acknowledged 1 ms later.
        r.on_sent(1, at(1_001_000), true);
        assert_eq!(r.on_acked(1, PKT, at(1_002_000)), 1_000_000);
        // Without the idle mark the silence counts.
        r.on_sent(2, at(3_002_000), false);
        assert!(r.on_acked(2, PKT, at(3_003_000)) < 1_000);
    }

    #[test]
    fn a_reused_or_lost_slot_gives_no_sample_and_off_gives_none() {
        let mut r = DeliveryRate::new(0, Acks::Selective);
        r.on_sent(5, at(0), true);
        r.on_lost(5);
        assert_eq!(r.on_acked(5, PKT, at(100)), 0);
        assert_eq!(
            r.delivered(),
            PKT,
            "a lost packet's late acknowledgement still counts"
        );
        let mut off = DeliveryRate::off();
        off.on_sent(0, at(0), true);
        assert_eq!(off.on_acked(0, PKT, at(100)), 0);
        assert_eq!(off.ring_len(), 0);
    }
}
