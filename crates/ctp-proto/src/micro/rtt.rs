//! Round-trip-time estimation and the retransmission timeout, per RFC 6298.
//!
//! > (2.2) When the first RTT measurement R is made, the host MUST set SRTT <- R,
//! > RTTVAR <- R/2, RTO <- SRTT + max (G, K*RTTVAR) where K = 4.
//! > (2.3) When a subsequent RTT measurement R' is made, a host MUST set
//! > RTTVAR <- (1 - beta) * RTTVAR + beta * |SRTT - R'|, SRTT <- (1 - alpha) * SRTT + alpha * R'
//! > (alpha = 1/8, beta = 1/4).
//!
//! The peer's reported acknowledgement delay is subtracted from a sample when that leaves it
//! above the minimum RTT, as QUIC does, so delayed ACKs do not inflate the estimate.

use super::decl::{MicroDecl, MicroId};
use crate::engine::event::{Event, EventKind};
use crate::engine::{Cx, Microprotocol};

/// The declaration of [`MicroId::Rtt`]: what it needs, excludes and reads.
pub const DECL: MicroDecl = MicroDecl {
    params: &["min_rto_us", "max_ack_delay_us"],
    ..MicroDecl::new(MicroId::Rtt)
};

/// Clock granularity G, microseconds.
pub const GRANULARITY_US: u64 = 1_000;

/// The RTT estimator microprotocol.
#[derive(Debug)]
pub struct RttEstimator {
    min_rto_us: u64,
    max_rto_us: u64,
    max_ack_delay_us: u64,
}

impl RttEstimator {
    /// An estimator clamping the RTO to `[min_rto_us, max_rto_us]`.
    pub fn new(min_rto_us: u64, max_rto_us: u64, max_ack_delay_us: u64) -> Self {
        RttEstimator {
            min_rto_us,
            max_rto_us,
            max_ack_delay_us,
        }
    }

    /// Applies one sample to the session variables.
    pub fn sample(&self, rtt_us: u64, ack_delay_us: u64, s: &mut crate::engine::path::PathVars) {
        s.min_rtt_us = s.min_rtt_us.min(rtt_us);
        let delay = ack_delay_us.min(self.max_ack_delay_us);
        let r = if rtt_us >= s.min_rtt_us + delay {
            rtt_us - delay
        } else {
            rtt_us
        };
        s.latest_rtt_us = r;
        if s.srtt_us == 0 {
            s.srtt_us = r.max(1);
            s.rttvar_us = r / 2;
        } else {
            let diff = s.srtt_us.abs_diff(r);
            s.rttvar_us = (3 * s.rttvar_us + diff) / 4;
            s.srtt_us = ((7 * s.srtt_us + r) / 8).max(1);
        }
        let rto = s.srtt_us + GRANULARITY_US.max(4 * s.rttvar_us);
        s.rto_us = rto.clamp(self.min_rto_us, self.max_rto_us);
    }
}

impl Microprotocol for RttEstimator {
    fn bindings(&self) -> &'static [EventKind] {
        &[EventKind::RttSample]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        if let Event::RttSample {
            rtt_us,
            ack_delay_us,
        } = *ev
        {
            self.sample(rtt_us, ack_delay_us, &mut cx.st.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::path::PathVars;

    #[test]
    fn follows_rfc6298() {
        let e = RttEstimator::new(0, u64::MAX, 0);
        let mut s = PathVars::default();
        e.sample(100_000, 0, &mut s);
        assert_eq!(
            (s.srtt_us, s.rttvar_us, s.rto_us),
            (100_000, 50_000, 300_000)
        );
        e.sample(200_000, 0, &mut s);
        // rttvar = 3/4*50000 + 1/4*100000 = 62500; srtt = 7/8*100000 + 1/8*200000 = 112500
        assert_eq!((s.srtt_us, s.rttvar_us), (112_500, 62_500));
        assert_eq!(s.rto_us, 112_500 + 250_000);
    }

    #[test]
    fn rto_is_clamped_and_granularity_applies() {
        let e = RttEstimator::new(10_000, 60_000_000, 25_000);
        let mut s = PathVars::default();
        e.sample(50, 0, &mut s);
        assert_eq!(s.rto_us, 10_000, "a 50 µs path still gets the minimum RTO");
        let e = RttEstimator::new(0, 60_000_000, 25_000);
        let mut s = PathVars::default();
        for _ in 0..50 {
            e.sample(2_000, 0, &mut s);
        }
        assert_eq!(
            s.rto_us,
            2_000 + GRANULARITY_US,
            "rttvar decays; G bounds the margin"
        );
    }

    #[test]
    fn ack_delay_is_subtracted_only_above_min_rtt() {
        let e = RttEstimator::new(0, u64::MAX, 25_000);
        let mut s = PathVars::default();
        e.sample(10_000, 0, &mut s);
        e.sample(30_000, 5_000, &mut s);
        assert_eq!(s.latest_rtt_us, 25_000);
        e.sample(12_000, 5_000, &mut s);
        assert_eq!(
            s.latest_rtt_us, 12_000,
            "subtracting would go below min_rtt"
        );
    }
}
