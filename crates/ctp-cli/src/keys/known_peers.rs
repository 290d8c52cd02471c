//! Trust on first use: the receivers a sender has reached and the key each proved, in the
//! file `known_peers` of the configuration directory, one `HOST:PORT KEY` a line, as ssh
//! keeps `known_hosts`.

use super::{create_dir, encode_key, parse_key, KeyError, KEY_LEN};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The known-peers file's name in the configuration directory.
pub const KNOWN_PEERS_FILE: &str = "known_peers";

/// The first line of a new known-peers file.
const HEADER: &str = "# ctp known peers: `HOST:PORT KEY`, one receiver a line, remembered the \
                      first time it was reached. Delete a line to forget a key.\n";

/// The form an address is remembered under: as typed, without surrounding whitespace,
/// lower-case (host names are not case-sensitive).
pub fn normalize_addr(addr: &str) -> String {
    addr.trim().to_lowercase()
}

/// What the known peers say of a key proved by a peer at an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// The key remembered for the address (or the pinned key).
    Known,
    /// Nothing is remembered for the address: the key is trusted on first use.
    New,
    /// Another key is remembered for the address: the connection must be refused.
    Changed {
        /// The key remembered for the address.
        remembered: [u8; KEY_LEN],
    },
}

/// One remembered peer.
#[derive(Debug, Clone)]
struct Entry {
    addr: String,
    key: [u8; KEY_LEN],
    /// Its line in the file, from 1.
    line: usize,
}

/// The known-peers file of a configuration directory, as read (and appended to).
#[derive(Debug, Clone)]
pub struct KnownPeers {
    path: PathBuf,
    entries: Vec<Entry>,
    /// Lines in the file, as far as this value knows (for the line of the next entry).
    lines: usize,
}

impl KnownPeers {
    /// Reads `dir`'s [`KNOWN_PEERS_FILE`]; a missing one is empty. A malformed line is an
    /// error naming the file and the line.
    pub fn load(dir: &Path) -> Result<KnownPeers, KeyError> {
        let path = dir.join(KNOWN_PEERS_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(source) => {
                return Err(KeyError::Io {
                    action: "read",
                    path,
                    source,
                })
            }
        };
        let mut entries = Vec::new();
        // A last line without its newline may be another process's record still being
        // appended (a reader can see part of a write): one that does not parse is left out.
        let count = text.lines().count();
        let unterminated = !text.is_empty() && !text.ends_with('\n');
        for (i, line) in text.lines().enumerate() {
            let partial = unterminated && i + 1 == count;
            let bad = |why: String| KeyError::BadLine {
                path: path.clone(),
                line: i + 1,
                why,
            };
            let content = line.split_once('#').map_or(line, |(before, _)| before);
            let mut fields = content.split_whitespace();
            let Some(addr) = fields.next() else {
                continue;
            };
            let parsed = fields
                .next()
                .ok_or_else(|| {
                    bad(format!(
                        "`{addr}` has no key: expected `HOST:PORT KEY` (delete the line to forget it)"
                    ))
                })
                .and_then(|key| match fields.next() {
                    Some(extra) => Err(bad(format!(
                        "`{extra}` after the key: expected `HOST:PORT KEY` (a comment starts with #)"
                    ))),
                    None => parse_key(key).map_err(|e| bad(e.to_string())),
                });
            let key = match parsed {
                Ok(key) => key,
                Err(_) if partial => continue,
                Err(e) => return Err(e),
            };
            entries.push(Entry {
                addr: normalize_addr(addr),
                key,
                line: i + 1,
            });
        }
        Ok(KnownPeers {
            path,
            entries,
            lines: text.lines().count(),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What is remembered for `addr` (as typed; compared normalised) about `key`.
    pub fn check(&self, addr: &str, key: &[u8; KEY_LEN]) -> Trust {
        let addr = normalize_addr(addr);
        let mut remembered = None;
        for e in self.entries.iter().filter(|e| e.addr == addr) {
            if &e.key == key {
                return Trust::Known;
            }
            remembered.get_or_insert(e.key);
        }
        match remembered {
            Some(remembered) => Trust::Changed { remembered },
            None => Trust::New,
        }
    }

    /// The line (from 1) of the first entry for `addr`, if any.
    #[cfg(test)]
    pub fn line_of(&self, addr: &str) -> Option<usize> {
        let addr = normalize_addr(addr);
        self.entries.iter().find(|e| e.addr == addr).map(|e| e.line)
    }

    /// The refusal of a peer at `addr` that proved `offered` where another key is
    /// remembered: names both keys, the file and the line to delete, as ssh does.
    pub fn changed(&self, addr: &str, offered: &[u8; KEY_LEN]) -> KeyError {
        let norm = normalize_addr(addr);
        let entry = self.entries.iter().find(|e| e.addr == norm);
        KeyError::PeerKeyChanged {
            addr: norm,
            path: self.path.clone(),
            line: entry.map_or(0, |e| e.line),
            remembered: entry.map_or([0; KEY_LEN], |e| e.key),
            offered: *offered,
        }
    }

    /// Remembers `key` for `addr`: appends a line to the file (created with mode 0600, and
    /// its directory, if missing). One `write` in append mode per line, so that ctp
    /// processes appending at once do not mix their lines.
    pub fn remember(&mut self, addr: &str, key: &[u8; KEY_LEN]) -> Result<(), KeyError> {
        let addr = normalize_addr(addr);
        if let Some(dir) = self.path.parent() {
            create_dir(dir)?;
        }
        let io = |source| KeyError::Io {
            action: "append to",
            path: self.path.clone(),
            source,
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&self.path)
            .map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let mut record = String::new();
        if len == 0 {
            record.push_str(HEADER);
            self.lines = 1;
        } else {
            // A file edited by hand may lack its last newline.
            let mut last = [0u8];
            file.read_exact_at(&mut last, len - 1).map_err(io)?;
            if last[0] != b'\n' {
                record.push('\n');
            }
        }
        record.push_str(&format!("{addr} {}\n", encode_key(key)));
        (&file).write_all(record.as_bytes()).map_err(io)?;
        self.lines += 1;
        self.entries.push(Entry {
            addr,
            key: *key,
            line: self.lines,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn key(n: u8) -> [u8; KEY_LEN] {
        [n; KEY_LEN]
    }

    #[test]
    fn a_peer_is_new_then_known_and_a_changed_key_is_named_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut peers = KnownPeers::load(dir.path()).unwrap();
        assert_eq!(peers.check("example.com:9000", &key(1)), Trust::New);
        peers.remember("Example.com:9000", &key(1)).unwrap();
        peers.remember("[::1]:9000", &key(2)).unwrap();
        let path = dir.path().join(KNOWN_PEERS_FILE);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text.lines().skip(1).collect::<Vec<_>>(),
            [
                format!("example.com:9000 {}", encode_key(&key(1))),
                format!("[::1]:9000 {}", encode_key(&key(2))),
            ]
        );
        assert!(text.starts_with('#'));
        for peers in [peers.clone(), KnownPeers::load(dir.path()).unwrap()] {
            assert_eq!(peers.check("EXAMPLE.COM:9000", &key(1)), Trust::Known);
            assert_eq!(peers.check(" example.com:9000 ", &key(1)), Trust::Known);
            assert_eq!(peers.check("[::1]:9000", &key(2)), Trust::Known);
            // Another port or another name for the same host is another peer.
            assert_eq!(peers.check("example.com:9001", &key(1)), Trust::New);
            assert_eq!(
                peers.check("example.com:9000", &key(3)),
                Trust::Changed { remembered: key(1) }
            );
            assert_eq!(peers.line_of("[::1]:9000"), Some(3));
            let e = peers.changed("[::1]:9000", &key(3)).to_string();
            for needle in [
                "the key of [::1]:9000 has changed",
                &encode_key(&key(2)),
                &encode_key(&key(3)),
                &format!("delete line 3 of {}", path.display()),
                "man in the middle",
            ] {
                assert!(e.contains(needle), "{needle:?} in {e}");
            }
        }
    }

    #[test]
    fn comments_blank_lines_and_a_missing_last_newline_are_kept_apart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KNOWN_PEERS_FILE);
        std::fs::write(
            &path,
            format!(
                "# mine\n\nhost:1 {}  # the lab\nhost:2 {}",
                encode_key(&key(1)),
                encode_key(&key(2))
            ),
        )
        .unwrap();
        let mut peers = KnownPeers::load(dir.path()).unwrap();
        assert_eq!(peers.check("host:1", &key(1)), Trust::Known);
        peers.remember("host:3", &key(3)).unwrap();
        assert_eq!(peers.line_of("host:3"), Some(5));
        let again = KnownPeers::load(dir.path()).unwrap();
        assert_eq!(again.check("host:2", &key(2)), Trust::Known);
        assert_eq!(again.check("host:3", &key(3)), Trust::Known);
        assert_eq!(again.line_of("host:3"), Some(5));
    }

    #[test]
    fn a_malformed_known_peers_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KNOWN_PEERS_FILE);
        let good = encode_key(&key(1));
        for (text, needle) in [
            ("# c\nhost:1\n".to_string(), "line 2: `host:1` has no key"),
            (
                format!("host:1 {good} extra\n"),
                "line 1: `extra` after the key",
            ),
            (
                "host:1 nokey\n".to_string(),
                "line 1: `nokey` is not a ctp public key",
            ),
        ] {
            std::fs::write(&path, &text).unwrap();
            let e = KnownPeers::load(dir.path()).unwrap_err().to_string();
            assert!(e.contains(needle), "{text:?}: {e}");
            assert!(e.contains(&path.display().to_string()), "{e}");
        }
    }

    /// A last line still being written by another process (no newline yet) is left out;
    /// the same line complete is an error, and a whole entry without its newline counts.
    #[test]
    fn a_record_still_being_appended_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KNOWN_PEERS_FILE);
        let whole = format!("h:1 {}\n", encode_key(&key(1)));
        std::fs::write(&path, format!("{whole}h:2 ioqKioqK")).unwrap();
        let peers = KnownPeers::load(dir.path()).unwrap();
        assert_eq!(peers.check("h:1", &key(1)), Trust::Known);
        assert_eq!(peers.entries.len(), 1);
        std::fs::write(&path, format!("{whole}h:2 ioqKioqK\n")).unwrap();
        assert!(KnownPeers::load(dir.path()).is_err());
        std::fs::write(&path, format!("{whole}h:2 {}", encode_key(&key(2)))).unwrap();
        let peers = KnownPeers::load(dir.path()).unwrap();
        assert_eq!(peers.check("h:2", &key(2)), Trust::Known);
    }

    /// Processes remembering at once append whole lines, none mixed with another.
    #[test]
    fn concurrent_remembers_append_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let threads: Vec<_> = (0..8u8)
            .map(|t| {
                let dir = dir.path().to_path_buf();
                std::thread::spawn(move || {
                    for i in 0..25u8 {
                        // Each its own view of the file, as separate processes have.
                        let mut peers = KnownPeers::load(&dir).unwrap();
                        peers
                            .remember(&format!("h{t}:{i}"), &key(t * 25 + i))
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let peers = KnownPeers::load(dir.path()).unwrap();
        for t in 0..8u8 {
            for i in 0..25u8 {
                assert_eq!(
                    peers.check(&format!("h{t}:{i}"), &key(t * 25 + i)),
                    Trust::Known
                );
            }
        }
    }
}
