//! The bench thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`) as criterion's measurement, for
//! the benches that run on a machine shared with other work: the time the thread waits
//! preempted is not counted. Included by `aead.rs` and `coding.rs` with `#[path]`.

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use std::time::Duration;

/// The calling thread's CPU time, as criterion's measurement.
pub struct ThreadCpu;

fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to write.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(r, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Durations print as the wall clock's do.
static DURATIONS: WallTime = WallTime;

impl Measurement for ThreadCpu {
    type Intermediate = Duration;
    type Value = Duration;

    fn start(&self) -> Duration {
        thread_cpu_time()
    }

    fn end(&self, start: Duration) -> Duration {
        thread_cpu_time().saturating_sub(start)
    }

    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }

    fn zero(&self) -> Duration {
        Duration::ZERO
    }

    fn to_f64(&self, d: &Duration) -> f64 {
        d.as_nanos() as f64
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        DURATIONS.formatter()
    }
}
