//! `ctp send --limit-rate`: a token bucket in front of the connection that holds the file
//! content handed to it to a rate, whatever the congestion control would allow.
//!
//! The runtime has no cap on the sending rate that works with every congestion control
//! (`cc_rate_kbps` sets the rate of the fixed-rate controllers, which ignore loss), so the
//! limit is the sender's: content enters the connection no faster than the rate, and the
//! connection cannot send faster than it is fed. It counts file content; headers,
//! acknowledgements and retransmissions come on top (a few percent).

use std::time::{Duration, Instant};

/// Content allowed at the start and after a pause: this much time at the rate (so the
/// content goes out in pieces of about this length, not in bursts).
const PIECE_TIME: Duration = Duration::from_millis(50);
/// Smallest piece, bytes (a very low rate still sends whole pieces, further apart).
const MIN_PIECE: u64 = 1024;

/// A token bucket of bytes.
#[derive(Clone, Debug)]
pub struct RateLimit {
    /// Bytes per second.
    rate: f64,
    /// Bytes that may go now (negative: owed, a wait first).
    tokens: f64,
    /// Most bytes the bucket holds (one piece).
    burst: f64,
    /// When `tokens` was last brought up to date.
    last: Instant,
}

impl RateLimit {
    /// A limit of `bits_per_second`, starting empty at `now` (the first piece waits its
    /// turn too, so no transfer starts with a burst).
    pub fn new(bits_per_second: u64, now: Instant) -> Self {
        let rate = bits_per_second as f64 / 8.0;
        RateLimit {
            rate,
            tokens: 0.0,
            burst: (rate * PIECE_TIME.as_secs_f64()).max(MIN_PIECE as f64),
            last: now,
        }
    }

    /// Bytes to read and send at a time.
    pub fn piece(&self) -> usize {
        self.burst as usize
    }

    /// Takes `n` bytes at `now`: how long to wait before sending them (zero if the bucket
    /// holds them).
    pub fn take(&mut self, n: u64, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst) - n as f64;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate)
        }
    }

    /// Waits until `n` bytes may be sent.
    pub async fn wait(&mut self, n: u64) {
        let d = self.take(n, Instant::now());
        if !d.is_zero() {
            tokio::time::sleep(d).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends `total` bytes in pieces through `limit` on a virtual clock starting at `t0`;
    /// returns when the last piece left.
    fn run(limit: &mut RateLimit, t0: Instant, total: u64) -> Instant {
        let mut now = t0;
        let mut sent = 0;
        while sent < total {
            let n = (limit.piece() as u64).min(total - sent);
            now += limit.take(n, now);
            sent += n;
        }
        now
    }

    #[test]
    fn the_rate_holds_in_virtual_time_from_the_first_byte() {
        let t0 = Instant::now();
        for bps in [8_000_000u64, 1_000, 10_000_000_000] {
            let mut limit = RateLimit::new(bps, t0);
            let total = 50 * limit.piece() as u64;
            let took = run(&mut limit, t0, total).duration_since(t0).as_secs_f64();
            let ideal = total as f64 * 8.0 / bps as f64;
            assert!(
                (took - ideal).abs() <= ideal * 1e-6,
                "{bps} bit/s: {took} s for {ideal} s"
            );
        }
    }

    #[test]
    fn a_pause_banks_one_piece_at_most() {
        let t0 = Instant::now();
        let mut limit = RateLimit::new(8_000_000, t0);
        let piece = limit.piece() as u64;
        assert_eq!(piece, 50_000, "50 ms at 1 MB/s");
        let end = run(&mut limit, t0, 10 * piece);
        // Ten seconds idle, then 20 pieces: one goes at once, the rest at the rate.
        let later = end + Duration::from_secs(10);
        let done = run(&mut limit, later, 20 * piece);
        let took = done.duration_since(later).as_secs_f64();
        assert!((took - 19.0 * 0.05).abs() < 1e-6, "{took}");
    }
}
