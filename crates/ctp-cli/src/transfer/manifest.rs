//! The manifest of a transfer: every directory and file the sender offers, by relative
//! path, with its size, permission bits and modification time; its wire encoding; and the
//! checks that keep a hostile manifest from naming anything outside the receiver's `--out`.
//!
//! ```text
//! manifest:  entry count u32 | entries
//! entry:     kind u8 (1 directory, 2 file) | mode u32 | mtime seconds i64 | mtime nanoseconds u32
//!            | size u64 (0 for a directory) | path length u16 | path (UTF-8)
//! ```
//! All integers are big-endian. A path is relative, its components joined by `/`; none is
//! empty, `.` or `..`, longer than [`MAX_COMPONENT`] bytes, or holds a control or bidi
//! character. Entries are unique, and no entry lies under a file.

use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A malformed transfer framing: the manifest, a header or a reply (the manifest is the
/// lowest layer of the framing, so the type lives here).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderError(pub String);

impl std::fmt::Display for HeaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HeaderError {}

/// Most entries one manifest may list.
pub const MAX_ENTRIES: u32 = 1_000_000;
/// Longest encoded manifest, bytes.
pub const MAX_MANIFEST: u32 = 64 << 20;
/// Longest relative path, bytes.
pub const MAX_PATH: usize = 4096;
/// Longest path component, bytes (Linux's NAME_MAX).
pub const MAX_COMPONENT: usize = 255;
/// The permission bits a receiver applies: read, write and execute for owner, group and
/// others. Set-user-ID, set-group-ID and sticky bits are never carried over.
pub const MODE_MASK: u32 = 0o777;

/// What an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A directory (kept even when empty).
    Dir,
    /// A regular file.
    File,
}

/// A modification time: seconds and nanoseconds since the Unix epoch (seconds may be
/// negative).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mtime {
    /// Whole seconds since 1970-01-01 UTC.
    pub secs: i64,
    /// Nanoseconds within the second (below 10^9).
    pub nanos: u32,
}

impl Mtime {
    /// The time `t` stands for.
    pub fn from_system(t: SystemTime) -> Mtime {
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => Mtime {
                secs: d.as_secs() as i64,
                nanos: d.subsec_nanos(),
            },
            Err(e) => {
                // Before 1970: round down to whole seconds, keep the nanoseconds positive.
                let d = e.duration();
                let (mut secs, mut nanos) = (-(d.as_secs() as i64), d.subsec_nanos());
                if nanos > 0 {
                    secs -= 1;
                    nanos = 1_000_000_000 - nanos;
                }
                Mtime { secs, nanos }
            }
        }
    }

    /// The time as a [`SystemTime`].
    pub fn to_system(self) -> SystemTime {
        let nanos = Duration::from_nanos(u64::from(self.nanos.min(999_999_999)));
        if self.secs >= 0 {
            UNIX_EPOCH + Duration::from_secs(self.secs as u64) + nanos
        } else {
            UNIX_EPOCH - Duration::from_secs(self.secs.unsigned_abs()) + nanos
        }
    }
}

/// One directory or file of a transfer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Relative path, components joined by `/` (checked by [`check_path`]).
    pub path: String,
    /// Directory or file.
    pub kind: Kind,
    /// Content length in bytes (0 for a directory).
    pub size: u64,
    /// Permission bits (the receiver applies those in [`MODE_MASK`]).
    pub mode: u32,
    /// Modification time.
    pub mtime: Mtime,
}

/// Every entry of a transfer, parents before their children.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    /// The entries, in the order the files' contents follow on the wire.
    pub entries: Vec<Entry>,
}

impl Manifest {
    /// The files, in wire order.
    pub fn files(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| e.kind == Kind::File)
    }

    /// Number of files and of directories.
    pub fn counts(&self) -> (u64, u64) {
        let files = self.files().count() as u64;
        (files, self.entries.len() as u64 - files)
    }

    /// Content bytes of all files.
    pub fn total_bytes(&self) -> u64 {
        self.files().map(|e| e.size).sum()
    }

    /// Whether the transfer is one file at the top level (which a receiver may store under
    /// the name its `--out` gives).
    pub fn is_single_file(&self) -> bool {
        matches!(&self.entries[..], [e] if e.kind == Kind::File)
    }

    /// The BLAKE3 that both sides compare at the end: of the encoded manifest followed by
    /// every file's digest in wire order. Equal values mean the receiver holds these
    /// entries with this content.
    pub fn digest(&self, file_digests: &[[u8; 32]]) -> [u8; 32] {
        let mut h = blake3::Hasher::new();
        h.update(&self.encode());
        for d in file_digests {
            h.update(d);
        }
        *h.finalize().as_bytes()
    }

    /// Encodes the manifest.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + self.entries.len() * 64);
        out.extend_from_slice(&(self.entries.len() as u32).to_be_bytes());
        for e in &self.entries {
            out.push(match e.kind {
                Kind::Dir => 1,
                Kind::File => 2,
            });
            out.extend_from_slice(&e.mode.to_be_bytes());
            out.extend_from_slice(&e.mtime.secs.to_be_bytes());
            out.extend_from_slice(&e.mtime.nanos.to_be_bytes());
            out.extend_from_slice(&e.size.to_be_bytes());
            out.extend_from_slice(&(e.path.len() as u16).to_be_bytes());
            out.extend_from_slice(e.path.as_bytes());
        }
        out
    }

    /// Decodes a complete manifest and checks it (see [`Manifest::check`]).
    pub fn decode(buf: &[u8]) -> Result<Manifest, HeaderError> {
        let mut r = Reader(buf);
        let count = r.u32()?;
        if count > MAX_ENTRIES {
            return Err(HeaderError(format!(
                "the manifest lists {count} entries (at most {MAX_ENTRIES})"
            )));
        }
        let mut entries = Vec::with_capacity(count.min(4096) as usize);
        for _ in 0..count {
            let kind = match r.take(1)?[0] {
                1 => Kind::Dir,
                2 => Kind::File,
                k => return Err(HeaderError(format!("unknown manifest entry kind {k}"))),
            };
            let mode = r.u32()?;
            let secs = i64::from_be_bytes(r.take(8)?.try_into().unwrap_or_default());
            let nanos = r.u32()?;
            let size = r.u64()?;
            let len = u16::from_be_bytes(r.take(2)?.try_into().unwrap_or_default()) as usize;
            let path = std::str::from_utf8(r.take(len)?)
                .map_err(|_| HeaderError("a path in the manifest is not valid UTF-8".into()))?
                .to_string();
            if nanos >= 1_000_000_000 || (kind == Kind::Dir && size != 0) {
                return Err(HeaderError(format!("malformed manifest entry for {path}")));
            }
            entries.push(Entry {
                path,
                kind,
                size,
                mode,
                mtime: Mtime { secs, nanos },
            });
        }
        if !r.0.is_empty() {
            return Err(HeaderError(
                "the manifest has bytes after its last entry".into(),
            ));
        }
        let m = Manifest { entries };
        m.check()?;
        Ok(m)
    }

    /// Checks every path ([`check_path`]), that no path appears twice, that no entry lies
    /// under a file, and that there is at least one entry.
    pub fn check(&self) -> Result<(), HeaderError> {
        if self.entries.is_empty() {
            return Err(HeaderError("the manifest is empty".into()));
        }
        let mut seen = HashSet::with_capacity(self.entries.len());
        let mut files = HashSet::new();
        for e in &self.entries {
            check_path(&e.path).map_err(HeaderError)?;
            if !seen.insert(e.path.as_str()) {
                return Err(HeaderError(format!("the manifest lists {} twice", e.path)));
            }
            if e.kind == Kind::File {
                files.insert(e.path.as_str());
            }
        }
        for e in &self.entries {
            let mut parent = e.path.as_str();
            while let Some((p, _)) = parent.rsplit_once('/') {
                if files.contains(p) {
                    return Err(HeaderError(format!(
                        "the manifest puts {} under the file {p}",
                        e.path
                    )));
                }
                parent = p;
            }
        }
        Ok(())
    }
}

/// Checks that `path` is a safe relative path: not empty or absolute, at most
/// [`MAX_PATH`] bytes, no component empty, `.` or `..` or longer than [`MAX_COMPONENT`],
/// no control or bidi characters (they would also reach a terminal). The reason says which
/// rule failed.
pub fn check_path(path: &str) -> Result<(), String> {
    let shown = ctp_proto::text::sanitize(path, 200);
    if path.is_empty() {
        return Err("an empty path in the manifest".into());
    }
    if path.len() > MAX_PATH {
        return Err(format!(
            "a path of {} bytes in the manifest (at most {MAX_PATH})",
            path.len()
        ));
    }
    if path.starts_with('/') {
        return Err(format!("absolute path {shown} refused"));
    }
    if path.chars().any(ctp_proto::text::is_unsafe) {
        return Err(format!(
            "path {shown} refused: it holds control or bidi characters"
        ));
    }
    for c in path.split('/') {
        match c {
            "" => return Err(format!("path {shown} refused: an empty component")),
            "." | ".." => return Err(format!("path {shown} refused: `{c}` is not allowed")),
            _ if c.len() > MAX_COMPONENT => {
                return Err(format!(
                    "path {shown} refused: a component of {} bytes (the file system allows {MAX_COMPONENT})",
                    c.len()
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Reads big-endian fields from a buffer; running out is an error (the buffer is whole).
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], HeaderError> {
        if self.0.len() < n {
            return Err(HeaderError("the manifest is truncated".into()));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, HeaderError> {
        Ok(u32::from_be_bytes(
            self.take(4)?.try_into().unwrap_or_default(),
        ))
    }

    fn u64(&mut self) -> Result<u64, HeaderError> {
        Ok(u64::from_be_bytes(
            self.take(8)?.try_into().unwrap_or_default(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, kind: Kind, size: u64) -> Entry {
        Entry {
            path: path.into(),
            kind,
            size,
            mode: 0o644,
            mtime: Mtime {
                secs: 1_700_000_000,
                nanos: 123,
            },
        }
    }

    #[test]
    fn manifests_round_trip() {
        let m = Manifest {
            entries: vec![
                entry("d", Kind::Dir, 0),
                entry("d/empty", Kind::Dir, 0),
                entry("d/a.txt", Kind::File, 5),
                entry("top.bin", Kind::File, 1 << 40),
            ],
        };
        assert_eq!(Manifest::decode(&m.encode()).unwrap(), m);
        assert_eq!(m.counts(), (2, 2));
        assert_eq!(m.total_bytes(), 5 + (1 << 40));
        assert!(!m.is_single_file());
        let wire = m.encode();
        for cut in 0..wire.len() {
            assert!(Manifest::decode(&wire[..cut]).is_err(), "cut at {cut}");
        }
        assert_ne!(m.digest(&[[1; 32], [2; 32]]), m.digest(&[[1; 32], [3; 32]]));
    }

    #[test]
    fn hostile_paths_are_refused_with_the_reason() {
        for (path, why) in [
            ("../etc/passwd", "`..`"),
            ("a/../../b", "`..`"),
            ("/etc/passwd", "absolute"),
            ("a//b", "empty component"),
            ("a/./b", "`.`"),
            ("", "empty path"),
            ("a/", "empty component"),
            ("evil\u{202e}txt", "bidi"),
            ("new\nline", "control"),
        ] {
            let e = check_path(path).unwrap_err();
            assert!(e.contains(why), "{path:?}: {e}");
            let m = Manifest {
                entries: vec![entry(path, Kind::File, 1)],
            };
            assert!(Manifest::decode(&m.encode()).is_err(), "{path:?}");
        }
        assert!(check_path(&"n".repeat(256))
            .unwrap_err()
            .contains("256 bytes"));
        assert!(check_path("ok/name with spaces.txt").is_ok());
    }

    #[test]
    fn duplicates_and_entries_under_files_are_refused() {
        let twice = Manifest {
            entries: vec![entry("a", Kind::File, 1), entry("a", Kind::Dir, 0)],
        };
        assert!(twice.check().unwrap_err().0.contains("twice"));
        for entries in [
            vec![entry("f", Kind::File, 1), entry("f/x", Kind::File, 1)],
            vec![entry("f/x", Kind::File, 1), entry("f", Kind::File, 1)],
        ] {
            let m = Manifest { entries };
            assert!(m.check().unwrap_err().0.contains("under"), "{m:?}");
        }
        assert!(Manifest::default().check().is_err());
    }

    #[test]
    fn times_before_and_after_the_epoch_round_trip() {
        for t in [
            UNIX_EPOCH + Duration::new(1_700_000_000, 5),
            UNIX_EPOCH - Duration::new(10, 250),
            UNIX_EPOCH,
        ] {
            assert_eq!(Mtime::from_system(t).to_system(), t);
        }
    }
}
