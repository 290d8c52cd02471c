//! Finding the programs the bench runs (peers, path tools) on `PATH`.

use std::path::PathBuf;

/// Where `program` is on `PATH`, if it is.
pub fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// Whether a program is on `PATH`.
pub fn on_path(program: &str) -> bool {
    which(program).is_some()
}
