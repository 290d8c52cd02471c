//! Progress bars: bytes, rate and ETA on a terminal, nothing otherwise.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::future::Future;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How often a sender's bar looks at what the receiver acknowledged.
const TICK: Duration = Duration::from_millis(100);

/// A progress bar for `total` bytes (its message names the file under way), hidden when
/// stderr is not a terminal or `quiet`.
pub fn bar(total: u64, label: &str, quiet: bool) -> ProgressBar {
    let pb = ProgressBar::new(total);
    if quiet || !std::io::stderr().is_terminal() {
        pb.set_draw_target(ProgressDrawTarget::hidden());
        return pb;
    }
    let style = ProgressStyle::with_template(
        "{prefix:>8} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta} {wide_msg}",
    )
    .map(|s| s.progress_chars("=> "))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    pb.set_style(style);
    pb.set_prefix(label.to_string());
    pb
}

/// A bar counting `total` things done (a group's transfers), labelled `label`; hidden as
/// [`bar`] is.
pub fn count_bar(total: u64, label: &str, quiet: bool) -> ProgressBar {
    let pb = ProgressBar::new(total);
    if quiet || !std::io::stderr().is_terminal() {
        pb.set_draw_target(ProgressDrawTarget::hidden());
        return pb;
    }
    let style = ProgressStyle::with_template("{prefix:>8} [{bar:30}] {pos}/{len} done {wide_msg}")
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    pb.set_style(style);
    pb.set_prefix(label.to_string());
    pb
}

/// A sender's progress: the bytes the receiver acknowledged, not the bytes handed to the
/// connection. Those run ahead by the send buffer (megabytes): a bar driven by them shows
/// the local write speed and reads 100 % while the data is still on its way.
pub struct Sending {
    bar: ProgressBar,
    /// Content bytes handed to the connection.
    written: AtomicU64,
}

impl Sending {
    /// Follows the content sent into `bar`.
    pub fn new(bar: ProgressBar) -> Self {
        Sending {
            bar,
            written: AtomicU64::new(0),
        }
    }

    /// Sets the content's length.
    pub fn set_length(&self, len: u64) {
        self.bar.set_length(len);
    }

    /// Names what is being sent (a file's path) beside the bar.
    pub fn set_message(&self, msg: String) {
        self.bar.set_message(msg);
    }

    /// Prints a line above the bar (or nothing when the bar is hidden).
    pub fn println(&self, line: String) {
        self.bar.println(line);
    }

    /// Counts `n` more content bytes handed to the connection.
    pub fn wrote(&self, n: u64) {
        self.written.fetch_add(n, Ordering::Relaxed);
    }

    /// Runs `work` (the sending) while moving the bar, every [`TICK`], to the content bytes
    /// `conn` had acknowledged.
    pub async fn follow<F: Future>(&self, conn: &ctp::Connection, work: F) -> F::Output {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(work);
        loop {
            tokio::select! {
                r = &mut work => return r,
                _ = tick.tick() => {
                    let written = self.written.load(Ordering::Relaxed);
                    self.bar
                        .set_position(acknowledged(written, conn.unacked_bytes()));
                }
            }
        }
    }

    /// Removes the bar.
    pub fn finish_and_clear(&self) {
        self.bar.finish_and_clear();
    }
}

/// The line printed above a bar once a file of a transfer is complete, on either side.
pub fn file_done(path: &str, size: u64) -> String {
    format!("{path} ({})", crate::summary::human_bytes(size))
}

/// The content bytes the receiver has, of `written` handed to a connection that holds
/// `unacked` bytes unacknowledged (framing written with the content, a header or a
/// trailer, counts there too while unacknowledged, so this errs low by those few bytes,
/// never high).
pub fn acknowledged(written: u64, unacked: u64) -> u64 {
    written.saturating_sub(unacked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_counts_acknowledged_bytes_not_written_ones() {
        // 8 MiB handed over, 6 MiB of them (and a 30-byte header) still unacknowledged.
        assert_eq!(acknowledged(8 << 20, (6 << 20) + 30), (2 << 20) - 30);
        assert_eq!(acknowledged(1000, 0), 1000, "all acknowledged");
        assert_eq!(acknowledged(10, 40), 0, "only framing acknowledged so far");
    }
}
