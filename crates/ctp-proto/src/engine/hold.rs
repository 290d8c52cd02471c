//! Hold bits: the per-segment barriers of CTP.
//!
//! Every segment carries three barriers. A microprotocol registers a bit in a barrier at
//! connection set-up and later *sets* (releases) it on individual segments:
//! - **send**: the segment leaves when every registered send bit is set, in whatever order;
//! - **deallocate**: the segment's memory is freed when nobody needs it any more;
//! - **done**: the segment will never be sent again (congestion and buffer accounting).
//!
//! Send bits come in two flavours: [`Rearm::PerTransmission`] bits (congestion window,
//! pacing) must be set again for every retransmission, [`Rearm::Once`] bits (flow control)
//! stay set once given.

/// A hold bit index.
pub type HoldBit = u8;

/// A set of hold bits of one barrier.
pub type HoldMask = u16;

/// Most bits one barrier can hold.
pub const MAX_BITS: usize = HoldMask::BITS as usize;

/// The three barriers of a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Barrier {
    /// Gate on leaving the connection.
    Send,
    /// Gate on freeing the segment.
    Deallocate,
    /// Gate on declaring the segment finished.
    Done,
    /// Gate on handing a received message to the application (ordering, jitter control).
    Deliver,
}

/// Whether a send bit must be set again for each retransmission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rearm {
    /// Set once for the life of the segment.
    Once,
    /// Cleared again after each transmission.
    PerTransmission,
}

/// Error when a barrier has no free bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no free hold bit in the {0:?} barrier (at most {MAX_BITS})")]
pub struct HoldBitsExhausted(pub Barrier);

/// The bits registered at connection set-up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HoldRegistry {
    /// Every send bit.
    pub send: HoldMask,
    /// The send bits that are cleared again after each transmission.
    pub send_rearm: HoldMask,
    /// Every deallocate bit.
    pub dealloc: HoldMask,
    /// Every done bit.
    pub done: HoldMask,
    /// Every delivery bit (on received messages).
    pub deliver: HoldMask,
}

impl HoldRegistry {
    /// Allocates a new bit in `barrier`.
    pub fn register(
        &mut self,
        barrier: Barrier,
        rearm: Rearm,
    ) -> Result<HoldBit, HoldBitsExhausted> {
        let mask = match barrier {
            Barrier::Send => &mut self.send,
            Barrier::Deallocate => &mut self.dealloc,
            Barrier::Done => &mut self.done,
            Barrier::Deliver => &mut self.deliver,
        };
        let bit = (!*mask).trailing_zeros() as usize;
        if bit >= MAX_BITS {
            return Err(HoldBitsExhausted(barrier));
        }
        *mask |= 1 << bit;
        if barrier == Barrier::Send && rearm == Rearm::PerTransmission {
            self.send_rearm |= 1 << bit;
        }
        Ok(bit as HoldBit)
    }
}

/// The unset bits of one segment's three barriers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Holds {
    /// Send bits not yet set.
    pub send: HoldMask,
    /// Deallocate bits not yet set.
    pub dealloc: HoldMask,
    /// Done bits not yet set.
    pub done: HoldMask,
}

/// What setting one bit did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// The bit was already set (or not registered); nothing changed.
    NoChange,
    /// Other bits are still unset.
    Pending,
    /// Exactly one bit is still unset.
    LastLeft(HoldBit),
    /// Every bit of the barrier is now set.
    Complete,
}

impl Holds {
    /// Fresh barriers for a new segment: nothing is set yet.
    pub fn new(reg: &HoldRegistry) -> Self {
        Holds {
            send: reg.send,
            dealloc: reg.dealloc,
            done: reg.done,
        }
    }

    /// Sets `bit` in `barrier` and reports whether the barrier opened.
    pub fn set(&mut self, barrier: Barrier, bit: HoldBit) -> Release {
        let mask = match barrier {
            Barrier::Send => &mut self.send,
            Barrier::Deallocate => &mut self.dealloc,
            Barrier::Done => &mut self.done,
            // Delivery bits live on parked messages, not on segments.
            Barrier::Deliver => return Release::NoChange,
        };
        let b: HoldMask = 1 << bit;
        if *mask & b == 0 {
            return Release::NoChange;
        }
        *mask &= !b;
        match mask.count_ones() {
            0 => Release::Complete,
            1 => Release::LastLeft(mask.trailing_zeros() as HoldBit),
            _ => Release::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The barrier opens only when every registered bit is set, in any order.
    #[test]
    fn send_barrier_opens_after_all_bits_in_any_order() {
        let mut reg = HoldRegistry::default();
        let bits: Vec<_> = (0..4)
            .map(|_| reg.register(Barrier::Send, Rearm::Once).unwrap())
            .collect();
        // Every permutation of the four bits.
        let mut perms: Vec<Vec<u8>> = vec![vec![]];
        for _ in 0..4 {
            let mut next = Vec::new();
            for p in &perms {
                for &b in bits.iter().filter(|&b| !p.contains(b)) {
                    next.push([p.clone(), vec![b]].concat());
                }
            }
            perms = next;
        }
        assert_eq!(perms.len(), 24);
        for order in perms {
            let mut h = Holds::new(&reg);
            for (i, &b) in order.iter().enumerate() {
                let r = h.set(Barrier::Send, b);
                match i {
                    0 | 1 => assert_eq!(r, Release::Pending),
                    2 => assert_eq!(r, Release::LastLeft(order[3])),
                    _ => assert_eq!(r, Release::Complete),
                }
                // Setting a bit twice changes nothing.
                assert_eq!(h.set(Barrier::Send, b), Release::NoChange);
            }
        }
    }

    #[test]
    fn barriers_are_independent_and_bits_run_out() {
        let mut reg = HoldRegistry::default();
        let s = reg.register(Barrier::Send, Rearm::PerTransmission).unwrap();
        let d = reg.register(Barrier::Done, Rearm::Once).unwrap();
        assert_eq!(reg.send_rearm, 1 << s);
        let mut h = Holds::new(&reg);
        assert_eq!(h.set(Barrier::Done, d), Release::Complete);
        assert_eq!(h.send, 1 << s);
        assert_eq!(h.dealloc, 0);
        for _ in 1..MAX_BITS {
            reg.register(Barrier::Deallocate, Rearm::Once).unwrap();
        }
        reg.register(Barrier::Deallocate, Rearm::Once).unwrap();
        assert_eq!(
            reg.register(Barrier::Deallocate, Rearm::Once),
            Err(HoldBitsExhausted(Barrier::Deallocate))
        );
    }
}
