//! A user's identity: the static X25519 key pair ctp proves in its handshakes, stored as
//! `id_x25519` (private, mode 0600) and `id_x25519.pub` in the configuration directory.

use super::{create_dir, encode_key, KeyError, KEY_LEN, KEY_TEXT_LEN};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The private key file's name in the configuration directory.
pub const PRIVATE_FILE: &str = "id_x25519";

/// The public key file's name in the configuration directory.
pub const PUBLIC_FILE: &str = "id_x25519.pub";

/// A static X25519 key pair: the runtime's own type ([`ctp::Identity`]: `Debug` never shows
/// the private key); this module only keeps it in files.
pub use ctp::Identity;

/// An identity kept in the configuration directory's files.
pub trait IdentityFile: Sized {
    /// Reads the private key file `path` (as `--key FILE` names one). A file that others
    /// than its owner may read is refused, as ssh refuses one, with the `chmod` that
    /// fixes it.
    fn load(path: &Path) -> Result<Self, KeyError>;

    /// The identity in `dir` ([`PRIVATE_FILE`]), created there if there is none yet (and
    /// `dir` with it); `true` when it was created.
    fn load_or_create(dir: &Path) -> Result<(Self, bool), KeyError>;

    /// Writes this identity into `dir` (created if missing, mode 0700): [`PRIVATE_FILE`]
    /// with mode 0600 and [`PUBLIC_FILE`], each written whole under a temporary name first,
    /// so that no reader sees half a key. An existing identity is kept
    /// ([`KeyError::Exists`]) unless `replace`. Returns the private key file's path.
    fn save(&self, dir: &Path, replace: bool) -> Result<PathBuf, KeyError>;
}

impl IdentityFile for Identity {
    fn load(path: &Path) -> Result<Identity, KeyError> {
        let io = |action, source| KeyError::Io {
            action,
            path: path.to_path_buf(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                KeyError::NoIdentity {
                    path: path.to_path_buf(),
                }
            } else {
                io("read private key", e)
            }
        })?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(KeyError::TooOpen {
                path: path.to_path_buf(),
                mode,
            });
        }
        let text = std::fs::read_to_string(path).map_err(|e| io("read private key", e))?;
        let bad = |line, why: String| KeyError::BadLine {
            path: path.to_path_buf(),
            line,
            why,
        };
        let mut found = None;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if found.is_some() {
                return Err(bad(i + 1, "a second key: the file holds one".into()));
            }
            // Not `parse_key`, whose message would quote the secret.
            let private: [u8; KEY_LEN] = (line.len() == KEY_TEXT_LEN)
                .then(|| STANDARD.decode(line).ok())
                .flatten()
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| {
                    bad(
                        i + 1,
                        "not a ctp private key (44 characters of base64, as `ctp keygen` writes)"
                            .into(),
                    )
                })?;
            found = Some(private);
        }
        let private = found.ok_or_else(|| {
            bad(
                text.lines().count().max(1),
                "no private key in the file (`ctp keygen` writes one)".into(),
            )
        })?;
        Ok(Identity::from_private(private))
    }

    fn load_or_create(dir: &Path) -> Result<(Identity, bool), KeyError> {
        let path = dir.join(PRIVATE_FILE);
        match Identity::load(&path) {
            Err(KeyError::NoIdentity { .. }) => {}
            other => return other.map(|id| (id, false)),
        }
        let id = Identity::random();
        match id.save(dir, false) {
            Ok(_) => Ok((id, true)),
            // Another ctp created one meanwhile: use that.
            Err(KeyError::Exists { .. }) => Identity::load(&path).map(|id| (id, false)),
            Err(e) => Err(e),
        }
    }

    fn save(&self, dir: &Path, replace: bool) -> Result<PathBuf, KeyError> {
        create_dir(dir)?;
        let path = dir.join(PRIVATE_FILE);
        if !replace && path.exists() {
            return Err(KeyError::Exists { path });
        }
        let private = format!(
            "# ctp private key (X25519): keep it secret. Its public key: {}\n{}\n",
            encode_key(&self.public),
            STANDARD.encode(self.private)
        );
        write_new(dir, &path, private.as_bytes(), 0o600, replace)?;
        let public = format!("{}\n", encode_key(&self.public));
        write_new(dir, &dir.join(PUBLIC_FILE), public.as_bytes(), 0o644, true)?;
        Ok(path)
    }
}

/// Writes `bytes` to `path` in `dir` atomically: into a new temporary file of mode `mode`,
/// flushed to disk, then renamed over `path` (`replace`) or linked to it, which fails if
/// `path` exists ([`KeyError::Exists`]).
fn write_new(
    dir: &Path,
    path: &Path,
    bytes: &[u8],
    mode: u32,
    replace: bool,
) -> Result<(), KeyError> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = dir.join(format!(".{name}.{}.{nanos}.tmp", std::process::id()));
    let io = |action, path: &Path, source| KeyError::Io {
        action,
        path: path.to_path_buf(),
        source,
    };
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_all()
        });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io("write", &tmp, e));
    }
    let placed = if replace {
        std::fs::rename(&tmp, path)
    } else {
        let linked = std::fs::hard_link(&tmp, path);
        let _ = std::fs::remove_file(&tmp);
        linked
    };
    match placed {
        Ok(()) => {
            // The new name itself survives a crash once the directory is on disk too.
            let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(KeyError::Exists {
            path: path.to_path_buf(),
        }),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(io("write", path, e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_generated_identity_has_the_public_key_of_its_private_key() {
        let a = Identity::random();
        let b = Identity::random();
        assert_ne!(a.private, b.private);
        assert_eq!(Identity::from_private(a.private), a);
        // The private key is never shown by Debug.
        let shown = format!("{a:?}");
        assert!(!shown.contains(&STANDARD.encode(a.private)), "{shown}");
        assert!(shown.contains(&encode_key(&a.public)), "{shown}");
    }

    #[test]
    fn an_identity_is_created_once_then_loaded() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("nested").join("ctp");
        let (id, created) = Identity::load_or_create(&dir).unwrap();
        assert!(created);
        let private = dir.join(PRIVATE_FILE);
        assert_eq!(mode(&private), 0o600);
        assert_eq!(mode(&dir), 0o700);
        let text = std::fs::read_to_string(&private).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].starts_with('#') && lines[0].contains(&encode_key(&id.public)));
        assert_eq!(lines[1], STANDARD.encode(id.private));
        assert_eq!(
            std::fs::read_to_string(dir.join(PUBLIC_FILE)).unwrap(),
            format!("{}\n", encode_key(&id.public))
        );
        let (again, created) = Identity::load_or_create(&dir).unwrap();
        assert!(!created);
        assert_eq!(again, id);
        assert_eq!(Identity::load(&private).unwrap(), id);
        // No temporary file is left.
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, [PRIVATE_FILE, PUBLIC_FILE]);
    }

    #[test]
    fn an_existing_identity_is_replaced_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let (first, _) = Identity::load_or_create(dir.path()).unwrap();
        let other = Identity::random();
        let e = other.save(dir.path(), false).unwrap_err();
        assert!(matches!(e, KeyError::Exists { .. }), "{e}");
        assert!(e.to_string().contains("--force"), "{e}");
        assert!(e.to_string().contains(PRIVATE_FILE), "{e}");
        assert_eq!(
            Identity::load(&dir.path().join(PRIVATE_FILE)).unwrap(),
            first
        );
        other.save(dir.path(), true).unwrap();
        let path = dir.path().join(PRIVATE_FILE);
        assert_eq!(Identity::load(&path).unwrap(), other);
        assert_eq!(mode(&path), 0o600);
    }

    #[test]
    fn a_private_key_others_may_read_is_refused_with_the_chmod() {
        let dir = tempfile::tempdir().unwrap();
        Identity::load_or_create(dir.path()).unwrap();
        let path = dir.path().join(PRIVATE_FILE);
        for bad in [0o644, 0o640, 0o604, 0o660, 0o601] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(bad)).unwrap();
            let e = Identity::load(&path).unwrap_err();
            assert!(matches!(e, KeyError::TooOpen { .. }), "{bad:o}: {e}");
            let e = e.to_string();
            assert!(e.contains(&format!("{bad:04o}")), "{e}");
            assert!(e.contains(&format!("chmod 600 {}", path.display())), "{e}");
            assert!(Identity::load_or_create(dir.path()).is_err());
        }
        for ok in [0o600, 0o400] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(ok)).unwrap();
            assert!(Identity::load(&path).is_ok(), "{ok:o}");
        }
    }

    #[test]
    fn a_malformed_or_missing_key_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        let e = Identity::load(&path).unwrap_err();
        assert!(matches!(e, KeyError::NoIdentity { .. }), "{e}");
        assert!(e.to_string().contains("ctp keygen"), "{e}");
        let write = |text: &str| {
            let _ = std::fs::remove_file(&path);
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
        };
        let good = STANDARD.encode([9u8; 32]);
        for (text, needle) in [
            ("", "line 1: no private key"),
            ("# only a comment\n\n", "line 2: no private key"),
            ("# c\nnot a key\n", "line 2: not a ctp private key"),
            (&format!("{good}\n{good}\n") as &str, "line 2: a second key"),
        ] {
            write(text);
            let e = Identity::load(&path).unwrap_err().to_string();
            assert!(e.contains(needle), "{text:?}: {e}");
            assert!(e.contains(&path.display().to_string()), "{e}");
        }
        write(&format!("  {good}  \n"));
        assert_eq!(Identity::load(&path).unwrap().private, [9u8; 32]);
    }
}
