//! What the network said about a destination that cannot be reached: the ICMP (or ICMPv6)
//! destination-unreachable messages a runtime reads from its socket, reduced to what
//! decides how a connection reacts.
//!
//! Such a report ends only a connection still in its handshake, as it ends a TCP connect
//! (`ECONNREFUSED`, `EHOSTUNREACH`): there is nothing yet to lose, and waiting out the
//! handshake timeout would only delay the same verdict. Unlike TCP, the attempt ends only
//! once the peer was reported unreachable for [`UNREACHABLE_GRACE`] (the first handshake
//! packet and two retransmissions refused): a receiver started a moment after its sender
//! (`ctp recv … & ctp send …`) is still reached, and one stale or forged report ends
//! nothing. An established connection ignores
//! it: an ICMP message is unauthenticated and easily forged, routes recover, and the idle
//! timeout ends a connection whose peer is really gone (RFC 8085 §5.2, RFC 9000 §14.2).

/// How long the peer must have been reported unreachable before a connection attempt to it
/// ends (the handshake retransmits after 250 ms, then 500 ms: a closed port fails an attempt
/// at the third refusal, after 750 ms).
pub const UNREACHABLE_GRACE: core::time::Duration = core::time::Duration::from_millis(500);

/// Why the network reported a destination unreachable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unreachable {
    /// The host answered, but nothing listens on the port (ICMP type 3 code 3; ICMPv6
    /// type 1 code 4).
    Port,
    /// The host cannot be reached (no neighbour answered, or a router said so).
    Host,
    /// No route to the destination's network.
    Network,
    /// A firewall refused the packets (communication administratively prohibited).
    Prohibited,
}

impl Unreachable {
    /// The human reason a connection attempt ends with.
    pub fn reason(self) -> &'static str {
        match self {
            Unreachable::Port => "the peer's port is closed (ICMP port unreachable)",
            Unreachable::Host => "the peer's host is unreachable (ICMP host unreachable)",
            Unreachable::Network => "no route to the peer's network (ICMP network unreachable)",
            Unreachable::Prohibited => {
                "a firewall refused the packets (ICMP administratively prohibited)"
            }
        }
    }
}

impl core::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.reason())
    }
}
