//! The hidden names a receiver writes under before a file is complete: a temporary name
//! per transfer, and the partial copy (and its sidecar) kept for resuming. Each fits the
//! file system's NAME_MAX whatever the file's own name. And the move from such a name to
//! the final one, which replaces nothing unless asked to.

use super::precheck::NAME_MAX;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// The temporary name's own bytes beyond the file's: `.`, `.ctp-partial-`, pid, nanos.
const TEMP_EXTRA: usize = 1 + 13 + 10 + 1 + 8;

/// Moves the complete file at `temp` to `dest`. With `overwrite` it is a rename (replacing
/// what is there); without, a hard link — which fails with `AlreadyExists` if `dest`
/// appeared meanwhile, so nothing another writer put there is ever replaced — then the
/// temporary name's removal. On a file system without hard links: a check, then a rename.
pub fn move_into_place(temp: &Path, dest: &Path, overwrite: bool) -> std::io::Result<()> {
    if overwrite {
        return std::fs::rename(temp, dest);
    }
    match std::fs::hard_link(temp, dest) {
        Ok(()) => {
            let _ = std::fs::remove_file(temp);
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(e),
        Err(_) if !dest.exists() => std::fs::rename(temp, dest),
        Err(_) => Err(std::io::ErrorKind::AlreadyExists.into()),
    }
}

/// A fresh temporary name for a file received into `dest`: hidden, in the same directory,
/// unique to this process and moment.
pub fn temp_path(dest: &Path) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    hidden_path(
        dest,
        &format!(".ctp-partial-{}-{nanos:08x}", std::process::id()),
    )
}

/// `dest`'s hidden companion: `.` + its name + `suffix` (at most [`TEMP_EXTRA`] bytes with
/// the dot), in the same directory. The name must fit NAME_MAX too: a long one is cut (at
/// a character).
pub fn hidden_path(dest: &Path, suffix: &str) -> PathBuf {
    let mut base = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let room = NAME_MAX - TEMP_EXTRA;
    if base.len() > room {
        let mut end = room;
        while !base.is_char_boundary(end) {
            end -= 1;
        }
        base.truncate(end);
    }
    dest.with_file_name(format!(".{base}{suffix}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moving_into_place_replaces_nothing_unless_asked() {
        let dir = tempfile::tempdir().unwrap();
        let (dest, temp) = (dir.path().join("f"), dir.path().join(".f.tmp"));
        std::fs::write(&temp, b"new").unwrap();
        move_into_place(&temp, &dest, false).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"new");
        assert!(!temp.exists(), "the temporary name is gone");
        // Something is there now: kept, and the temporary file too (its owner removes it).
        std::fs::write(&temp, b"newer").unwrap();
        let e = move_into_place(&temp, &dest, false).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&dest).unwrap(), b"new");
        move_into_place(&temp, &dest, true).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"newer");
        assert!(!temp.exists());
    }

    #[test]
    fn the_temporary_name_of_a_long_name_fits_the_file_system() {
        let long = "é".repeat(127); // 254 bytes: a valid name
        let tmp = temp_path(&Path::new("/data").join(&long));
        let name = tmp.file_name().unwrap().len();
        assert!(name <= NAME_MAX, "{name} bytes");
        assert!(tmp.to_str().is_some(), "cut at a character boundary");
    }
}
