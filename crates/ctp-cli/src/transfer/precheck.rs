//! What a receiver checks once a file's header arrived, before any of its content flows: a
//! file that cannot be stored is refused then, with the reason, which the sender prints,
//! instead of after it crossed the network.
//!
//! Checked: the output directory exists, is a directory and may be written in; the name
//! fits the file system (`NAME_MAX`; the temporary name is cut to fit by itself); an
//! existing file is not replaced without `--overwrite`; the announced size fits the free
//! space. Each check is also a reason a write can still fail later (the disk fills up
//! meanwhile, a directory is removed): the receiver then aborts with that reason at once.

use anyhow::{bail, Result};
use nix::unistd::{access, AccessFlags};
use std::path::{Path, PathBuf};

/// Longest file name (bytes) the file systems ctp writes to accept (Linux's NAME_MAX).
pub const NAME_MAX: usize = 255;

/// Whether `out` is written as a directory (`dir/`), whether or not it exists.
fn names_directory(out: &Path) -> bool {
    out.as_os_str()
        .as_encoded_bytes()
        .last()
        .is_some_and(|&b| std::path::is_separator(b as char))
}

/// The directory files for `out` are written in, refused unless it exists, is a directory
/// and this process may create files in it.
pub fn output_dir(out: &Path) -> Result<PathBuf> {
    let dir = if out.is_dir() || names_directory(out) {
        out.to_path_buf()
    } else {
        match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    };
    if !dir.exists() {
        bail!(
            "the receiver's output directory {} does not exist",
            dir.display()
        );
    }
    if !dir.is_dir() {
        bail!(
            "the receiver's output directory {} is not a directory",
            dir.display()
        );
    }
    if let Err(e) = access(&dir, AccessFlags::W_OK | AccessFlags::X_OK) {
        bail!(
            "the receiver cannot write in {}: {}",
            dir.display(),
            e.desc()
        );
    }
    Ok(dir)
}

/// Refuses a file of `size` bytes (`None`: unknown, a raw stream) at `dest`, received for
/// `--out out`, when it cannot be stored there: the reason (see the module's list).
pub fn check(out: &Path, dest: &Path, size: Option<u64>, overwrite: bool) -> Result<()> {
    let dir = output_dir(out)?;
    let name_len = dest.file_name().map_or(0, |n| n.len());
    if name_len > NAME_MAX {
        bail!(
            "the file name is {name_len} bytes; the receiver's file system allows {NAME_MAX} \
             (rename the file, or give the receiver a file name with --out)"
        );
    }
    if dest.is_dir() {
        bail!("{} is a directory on the receiver", dest.display());
    }
    // A dangling link counts: a file would appear where it points.
    if !overwrite && dest.symlink_metadata().is_ok() {
        bail!("{}", exists(dest));
    }
    if let Some(size) = size {
        room(&dir, size, available_space(&dir))?;
    }
    Ok(())
}

/// Refuses `bytes` of files for `--out out` when its file system has less room.
pub fn room_for(out: &Path, bytes: u64) -> Result<()> {
    let dir = output_dir(out)?;
    room(&dir, bytes, available_space(&dir))
}

/// Why a file was not stored at `dest`.
pub fn exists(dest: &Path) -> String {
    format!(
        "{} already exists and was not overwritten (the receiver may pass --overwrite)",
        dest.display()
    )
}

/// Refuses `size` bytes in `dir` where `available` are free (`None`: unknown, allowed).
fn room(dir: &Path, size: u64, available: Option<u64>) -> Result<()> {
    if let Some(free) = available.filter(|&free| free < size) {
        bail!(
            "not enough space on the receiver: the file needs {size} bytes, {} has {free} free",
            dir.display()
        );
    }
    Ok(())
}

/// Bytes an unprivileged writer may still use on the file system of `dir` (`None` when it
/// cannot be told).
fn available_space(dir: &Path) -> Option<u64> {
    let st = nix::sys::statvfs::statvfs(dir).ok()?;
    Some((st.blocks_available() as u64).saturating_mul(st.fragment_size() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_cannot_fit_is_refused_with_the_reason() {
        let dir = Path::new("/data");
        assert!(room(dir, 1000, Some(1000)).is_ok());
        assert!(room(dir, 1000, None).is_ok(), "unknown free space: try");
        let e = room(dir, 1001, Some(1000)).unwrap_err().to_string();
        assert!(
            e.contains("not enough space") && e.contains("1001") && e.contains("/data"),
            "{e}"
        );
    }

    #[test]
    fn a_name_too_long_an_existing_file_and_a_missing_directory_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path();
        let long = out.join("n".repeat(NAME_MAX + 1));
        let e = check(out, &long, Some(1), false).unwrap_err().to_string();
        assert!(e.contains("256 bytes") && e.contains("allows 255"), "{e}");
        assert!(check(out, &out.join("n".repeat(NAME_MAX)), Some(1), false).is_ok());
        let old = out.join("old");
        std::fs::write(&old, b"x").unwrap();
        let e = check(out, &old, Some(1), false).unwrap_err().to_string();
        assert!(
            e.contains("already exists") && e.contains("--overwrite"),
            "{e}"
        );
        assert!(check(out, &old, Some(1), true).is_ok());
        let missing = out.join("nothere/");
        let e = check(&missing, &missing.join("f"), Some(1), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not exist") && e.contains("nothere"), "{e}");
        let e = check(out, out, None, true).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let e = check(out, &out.join("f"), Some(u64::MAX), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not enough space"), "{e}");
    }
}
