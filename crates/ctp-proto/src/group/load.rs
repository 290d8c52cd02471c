//! The load metric `Balanced` chooses members by (paper 002, §3.3: "a combination of average
//! response time for the packets sent to it ... and the number of lost packets").

use core::fmt::Debug;
use core::time::Duration;

/// What the group knows of one member's load.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MemberLoad {
    /// Smoothed time from queueing a copy on the member's connection to its
    /// acknowledgement (`None` before the first).
    pub response: Option<Duration>,
    /// Smoothed fraction of the member connection's packets lost.
    pub loss: f64,
    /// Copies queued on the member's connection and not acknowledged yet.
    pub outstanding: usize,
    /// Copies assigned to the member but not yet taken by its connection.
    pub waiting: usize,
}

/// Ranks members for `Balanced`: the lower, the sooner a new message goes there.
pub trait LoadMetric: Debug + Send {
    /// The member's load (finite; lower is less loaded).
    fn load(&self, m: &MemberLoad) -> f64;
}

/// The default metric: the time a new copy can be expected to take, its response time
/// times the copies ahead of it, inflated by the loss rate —
/// `response × (1 + outstanding + waiting) × (1 + loss)`. A member never measured counts
/// as unloaded, so every member is tried.
#[derive(Clone, Copy, Debug, Default)]
pub struct ResponseTime;

impl LoadMetric for ResponseTime {
    fn load(&self, m: &MemberLoad) -> f64 {
        let response = m.response.map_or(0.0, |r| r.as_secs_f64());
        let ahead = 1.0 + (m.outstanding + m.waiting) as f64;
        response * ahead * (1.0 + m.loss.clamp(0.0, 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slower_lossier_and_busier_members_load_more() {
        let base = MemberLoad {
            response: Some(Duration::from_millis(10)),
            loss: 0.0,
            outstanding: 4,
            waiting: 0,
        };
        let m = ResponseTime;
        let slower = MemberLoad {
            response: Some(Duration::from_millis(20)),
            ..base
        };
        let lossier = MemberLoad { loss: 0.05, ..base };
        let busier = MemberLoad { waiting: 3, ..base };
        for worse in [slower, lossier, busier] {
            assert!(m.load(&worse) > m.load(&base), "{worse:?}");
        }
        assert_eq!(m.load(&MemberLoad::default()), 0.0, "untried first");
    }
}
