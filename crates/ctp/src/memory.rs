//! The process's allocator, tuned for a program that moves data at high rates.
//!
//! A connection frees and allocates buffers of tens of kilobytes (stream chunks, reassembled
//! messages) tens of thousands of times a second. glibc's `malloc` hands the top of a heap
//! back to the kernel as soon as 128 KiB of it is free, so the same pages went back and
//! were faulted in and cleared again for the next chunk: on loopback at 9 Gb/s, 7 % of the
//! receiver's time was the kernel clearing pages, and the stalls overflowed its socket
//! buffer (3 000–11 000 dropped packets per 2 GiB; none with the tuning below).

/// Bytes of free memory at the top of a heap that glibc keeps instead of returning them.
const TRIM_THRESHOLD: i32 = 64 << 20;

/// Allocations from this size up get pages of their own (`mmap`), returned when freed.
const MMAP_THRESHOLD: i32 = 4 << 20;

/// Makes the process's allocator keep freed memory for reuse (up to 64 MiB per heap)
/// instead of returning it to the kernel at once. Process-wide: call it once, early, in a
/// program whose main work is moving data (the `ctp` command does). Does nothing where the
/// allocator is not glibc's. Returns whether the setting was taken.
pub fn retain_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `mallopt` only changes the allocator's parameters; both values are in
        // the ranges glibc documents.
        unsafe {
            libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
                && libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    /// Minor page faults of the calling thread so far.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn faults() -> i64 {
        // SAFETY: `getrusage` fills the struct it is given.
        unsafe {
            let mut u: libc::rusage = core::mem::zeroed();
            libc::getrusage(libc::RUSAGE_THREAD, &mut u);
            u.ru_minflt
        }
    }

    /// Page faults while a fresh thread fills 64-KiB buffers a burst at a time and frees
    /// them, as a receiver does with the stream chunks of one batch of datagrams.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn churn_faults() -> i64 {
        std::thread::spawn(|| {
            let burst = |i: u8| {
                let chunks: Vec<Vec<u8>> = (0..32).map(|_| vec![i; 64 << 10]).collect();
                std::hint::black_box(&chunks);
            };
            burst(0);
            let before = faults();
            for i in 0..50 {
                burst(i);
            }
            faults() - before
        })
        .join()
        .expect("the churn thread")
    }

    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn freed_chunks_are_reused_without_faulting_their_pages_in_again() {
        let untuned = churn_faults();
        assert!(super::retain_freed_memory());
        let tuned = churn_faults();
        eprintln!("page faults over 50 bursts of 32 chunks: {untuned} untuned, {tuned} tuned");
        assert!(tuned < 100, "{tuned} page faults");
    }
}
