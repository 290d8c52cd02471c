//! Printing to stdout that tolerates a closed pipe (`ctp profiles | head` must not panic):
//! when the reader has gone away, the process exits quietly.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once anything was written to stdout.
static WROTE: AtomicBool = AtomicBool::new(false);

/// Whether this process has written to stdout (a command that reported its result, e.g.
/// an interrupted `perf --listen` with what arrived, gets no second JSON object).
pub fn wrote() -> bool {
    WROTE.load(Ordering::Relaxed)
}

/// Writes one line to stdout; exits with status 0 if stdout is a closed pipe.
pub fn line(text: std::fmt::Arguments<'_>) {
    WROTE.store(true, Ordering::Relaxed);
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(text).and_then(|_| out.write_all(b"\n")) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
    }
}

/// `println!` that survives a closed pipe.
macro_rules! outln {
    () => { $crate::output::line(format_args!("")) };
    ($($arg:tt)*) => { $crate::output::line(format_args!($($arg)*)) };
}
pub(crate) use outln;
