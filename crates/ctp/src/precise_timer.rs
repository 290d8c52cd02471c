//! A sub-millisecond sleep for the driver.
//!
//! tokio's timer wheel ticks in whole milliseconds, while a pacer at gigabit rates asks to
//! be woken every few hundred microseconds. Sleeping on tokio would oversleep by up to a
//! millisecond (and lose the rate the pacer could not bank); yielding in a loop until the
//! deadline would burn a core. On Linux the driver instead arms a `timerfd` (an hrtimer,
//! accurate to the thread's timer slack, 50 µs by default) and waits for it in tokio's
//! reactor like any other file descriptor. Elsewhere the driver keeps yielding.

#[cfg(target_os = "linux")]
mod imp {
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::time::Instant;
    use tokio::io::unix::AsyncFd;
    use tokio::io::Interest;

    /// A one-shot high-resolution timer.
    pub(crate) struct PreciseTimer {
        fd: AsyncFd<OwnedFd>,
    }

    impl PreciseTimer {
        /// Creates the timer (a non-blocking `CLOCK_MONOTONIC` timerfd).
        pub(crate) fn new() -> io::Result<Self> {
            // SAFETY: timerfd_create has no memory-safety preconditions; the result is
            // checked before it is wrapped.
            let raw = unsafe {
                libc::timerfd_create(
                    libc::CLOCK_MONOTONIC,
                    libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
                )
            };
            if raw < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `raw` is a freshly created descriptor that nothing else owns.
            let owned = unsafe { OwnedFd::from_raw_fd(raw) };
            // SAFETY: an OwnedFd keeps its descriptor open and returns the same one from
            // every as_raw_fd call for as long as it lives (it moves into the AsyncFd).
            let fd = unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }
                .map_err(|e| e.into_parts().1)?;
            Ok(PreciseTimer { fd })
        }

        /// Waits until `deadline` (already past: returns at once).
        pub(crate) async fn sleep_until(&self, deadline: Instant) -> io::Result<()> {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            let spec = libc::itimerspec {
                it_interval: libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: libc::timespec {
                    tv_sec: left.as_secs() as libc::time_t,
                    tv_nsec: left.subsec_nanos() as libc::c_long,
                },
            };
            // Re-arming resets the expiration count, so an expiry of an earlier, abandoned
            // sleep cannot end this one early (a stale readiness is cleared below).
            // SAFETY: the descriptor is open (owned by `self.fd`); `spec` is a valid
            // itimerspec and the old value is not requested.
            let rc = unsafe {
                libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut())
            };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
            loop {
                let mut guard = self.fd.readable().await?;
                let read = guard.try_io(|fd| {
                    let mut expirations = 0u64;
                    // SAFETY: reads 8 bytes into a u64 that lives across the call.
                    let n = unsafe {
                        libc::read(
                            fd.as_raw_fd(),
                            (&mut expirations as *mut u64).cast(),
                            std::mem::size_of::<u64>(),
                        )
                    };
                    if n < 0 {
                        Err(io::Error::last_os_error())
                    } else {
                        Ok(())
                    }
                });
                match read {
                    Ok(result) => return result,
                    // Would block: a stale readiness; try_io cleared it, wait again.
                    Err(_would_block) => continue,
                }
            }
        }
    }
}

#[cfg(target_os = "linux")]
pub(crate) use imp::PreciseTimer;

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::PreciseTimer;
    use std::time::{Duration, Instant};

    #[tokio::test]
    async fn wakes_after_the_deadline_and_a_rearm_replaces_an_abandoned_sleep() {
        let t = PreciseTimer::new().expect("timerfd");
        // An abandoned sleep leaves its timer armed; the next one re-arms it.
        let abandoned = Instant::now() + Duration::from_micros(100);
        let _ = tokio::time::timeout(Duration::ZERO, t.sleep_until(abandoned)).await;
        let start = Instant::now();
        let deadline = start + Duration::from_micros(700);
        t.sleep_until(deadline).await.expect("sleep");
        // Never early (the only bound a test may assert: lateness depends on the load).
        assert!(Instant::now() >= deadline, "woke before the deadline");
        // A deadline in the past returns at once without touching the timer.
        t.sleep_until(start).await.expect("past deadline");
    }
}
