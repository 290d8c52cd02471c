//! Printing to stdout that tolerates a closed pipe (`ctp profiles | head` must not panic):
//! when the reader has gone away, the process exits quietly.

use std::io::Write;

/// Writes one line to stdout; exits with status 0 if stdout is a closed pipe.
pub fn line(text: std::fmt::Arguments<'_>) {
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
