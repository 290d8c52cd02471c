//! Progress bars: bytes, rate and ETA on a terminal, nothing otherwise.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

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
