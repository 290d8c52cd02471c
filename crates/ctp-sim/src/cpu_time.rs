//! CPU time of the calling thread, for the simulator's speed figure (datagrams per CPU
//! second). Wall-clock time would count whatever else the machine runs; the thread's own
//! CPU time does not. Never used for anything a run's result depends on.

/// A stopwatch over the calling thread's CPU time.
#[derive(Clone, Copy, Debug)]
pub struct ThreadCpuClock {
    start: f64,
}

impl ThreadCpuClock {
    /// Starts measuring now.
    pub fn start() -> Self {
        Self { start: now_secs() }
    }

    /// CPU seconds this thread has used since [`ThreadCpuClock::start`].
    pub fn elapsed_secs(&self) -> f64 {
        (now_secs() - self.start).max(0.0)
    }
}

/// The thread's CPU time in seconds (`CLOCK_THREAD_CPUTIME_ID`).
fn now_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant Linux knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_work_done_by_this_thread() {
        let clock = ThreadCpuClock::start();
        let mut x = 1u64;
        let spun = std::time::Instant::now();
        while spun.elapsed() < std::time::Duration::from_millis(30) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        // 30 ms of spinning is at least some CPU time, and never more than the wall time
        // that has passed since the clock started.
        let cpu = clock.elapsed_secs();
        assert!(cpu > 0.0, "{cpu}");
        assert!(cpu <= spun.elapsed().as_secs_f64() + 0.01, "{cpu}");
    }
}
