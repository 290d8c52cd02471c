//! Software prefetch: asking the CPU to bring bytes toward its caches before they are used.
//!
//! A packet spends milliseconds of virtual time on a link; meanwhile the simulator moves
//! the rest of a bandwidth-delay product of other packets, and by the time it arrives its
//! bytes have left the caches. The receiving endpoint reads all of them at once (trailer,
//! checksum, frames), so it waited on memory for each of its packets: ~14 % of the speed
//! benchmark's time went to one load of the trailer and the checksum's reads, until the
//! world started fetching the next packet off a link while it handles the current one
//! (docs/decisions.md, "The simulator prefetches the next packet off a link").

/// Bytes per cache line on the machines this runs on.
const LINE: usize = 64;

/// Starts loading `bytes` into the caches without waiting for them; a no-op on targets
/// without a prefetch instruction. Never changes what a run computes, only how long it
/// waits for memory.
pub fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for at in (0..bytes.len()).step_by(LINE) {
        // SAFETY: a prefetch is a hint: it never faults, whatever the address, and the
        // program cannot observe it; SSE is part of the x86-64 baseline.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                bytes.as_ptr().wrapping_add(at).cast(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}
