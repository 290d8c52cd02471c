//! Finding the programs the bench runs (peers, path tools) on `PATH`, and running the
//! path tools.

use anyhow::{bail, Context};
use std::path::PathBuf;
use std::process::Stdio;

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

/// Runs a command to completion, failing with its stderr.
pub fn sh(args: &[&str]) -> anyhow::Result<String> {
    let out = std::process::Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .with_context(|| {
            format!(
                "cannot run `{}` (apt-get install iproute2 iptables ethtool)",
                args[0]
            )
        })?;
    if !out.status.success() {
        bail!(
            "`{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
