//! The routes a packet may take, as the microprotocols see them: a connection over several
//! paths at once (the `coded` profile's multipath) tells its microprotocols which of its
//! routes may carry data, and the microprotocol that schedules packets over them names the
//! route of the packet being built.
//!
//! A route is a (local address, peer address) pair of the connection; route 0 is the one
//! the handshake used. A connection over one path has route 0 only, and nothing here
//! changes how its packets leave. The addresses, their validation and the budget of an
//! address not yet validated belong to the connection ([`crate::connection::multipath`]);
//! this is what it shares for the packet being built.

/// Routes one connection may have at most.
pub const MAX_ROUTES: usize = 8;

/// The routes of the connection, for the packet being built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Routes {
    /// Routes that may carry data now, bit `i` for route `i` (validated, not given up).
    /// Route 0 alone on a connection over one path.
    pub usable: u8,
    /// The route the packet being built must take (it carries a path challenge to that
    /// route's address): data goes in it only when the route is usable.
    pub required: Option<u8>,
    /// The route a microprotocol chose for the packet being built (set while it writes
    /// its frames; cleared before every packet).
    pub chosen: Option<u8>,
}

impl Routes {
    /// Whether route `i` may carry data (validated, not given up).
    pub fn is_usable(&self, i: usize) -> bool {
        i < MAX_ROUTES && self.usable & (1 << i) != 0
    }

    /// Whether route `i` may carry data in the packet being built.
    pub fn may_carry(&self, i: usize) -> bool {
        self.is_usable(i) && self.required.is_none_or(|r| usize::from(r) == i)
    }

    /// The highest usable route plus one (0 when none is usable).
    pub fn span(&self) -> usize {
        8 - self.usable.leading_zeros() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_required_route_excludes_the_others() {
        let mut r = Routes {
            usable: 0b101,
            ..Routes::default()
        };
        assert!(r.may_carry(0) && !r.may_carry(1) && r.may_carry(2));
        assert_eq!(r.span(), 3);
        r.required = Some(2);
        assert!(!r.may_carry(0) && r.may_carry(2));
        r.required = Some(1);
        assert!(
            (0..MAX_ROUTES).all(|i| !r.may_carry(i)),
            "route 1 is being validated"
        );
        assert_eq!(Routes::default().span(), 0);
    }
}
