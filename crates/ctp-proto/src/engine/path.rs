//! The transport variables of one network path: what the RTT estimator, the congestion
//! controller, the pacer and path-MTU discovery measure and decide for the path a
//! connection's packets take.
//!
//! They are apart from the [`super::session::Session`] (sequencing, flow credit, close),
//! which belongs to the connection whatever path it uses: a connection that moves to a new
//! address keeps its session and gets the new path's variables. Every packet event names
//! the [`PathId`] its packet left on, so an acknowledgement of a packet sent on a path the
//! connection has left never touches the current path's counters.

use ctp_cc::time::Instant;

/// Names one path of a connection. Path 0 is the one the handshake used; a path the
/// connection moves to gets the next number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PathId(pub u8);

/// The transport variables of one path.
#[derive(Clone, Debug)]
pub struct PathVars {
    /// Which path these are.
    pub id: PathId,
    /// Smoothed round-trip time, microseconds (0 until the first sample).
    pub srtt_us: u64,
    /// Round-trip-time variation, microseconds.
    pub rttvar_us: u64,
    /// Smallest round-trip time seen, microseconds.
    pub min_rtt_us: u64,
    /// Latest round-trip sample, microseconds.
    pub latest_rtt_us: u64,
    /// Retransmission timeout before back-off, microseconds.
    pub rto_us: u64,
    /// Retransmission timeouts in a row without an acknowledgement on this path (the
    /// timeout's back-off exponent; a connection with another path gives this one up
    /// after a few).
    pub rto_backoff: u32,
    /// Congestion window, bytes.
    pub cwnd: u64,
    /// Bytes sent on this path and not yet acknowledged or declared lost.
    pub bytes_in_flight: u64,
    /// Pacing rate in bytes per second; 0 means unpaced.
    pub pacing_rate: u64,
    /// Pacing sends every 16th packet right behind the one before (UDT's packet pairs).
    pub pacing_pairs: bool,
    /// The congestion policy stopped sending until this time (UDT's freeze).
    pub paused_until: Option<Instant>,
    /// Largest UDP payload known to cross the path (path MTU discovery publishes it).
    pub plpmtu: usize,
}

impl Default for PathVars {
    fn default() -> Self {
        PathVars {
            id: PathId(0),
            srtt_us: 0,
            rttvar_us: 0,
            min_rtt_us: u64::MAX,
            latest_rtt_us: 0,
            rto_us: 200_000,
            rto_backoff: 0,
            cwnd: u64::MAX,
            bytes_in_flight: 0,
            pacing_rate: 0,
            pacing_pairs: false,
            paused_until: None,
            plpmtu: 1200,
        }
    }
}

impl PathVars {
    /// These variables with the round-trip estimate started again from
    /// `initial_rto_us`: for a path to another host, whose round trip is unknown. The
    /// controller's window, rate and the path MTU carry over (one controller serves the
    /// connection's one path; its next samples adapt it).
    pub fn with_fresh_rtt(&self, initial_rto_us: u64) -> PathVars {
        PathVars {
            srtt_us: 0,
            rttvar_us: 0,
            min_rtt_us: u64::MAX,
            latest_rtt_us: 0,
            rto_us: initial_rto_us,
            ..self.clone()
        }
    }
}
