//! A receiver's allow list (`ctp recv --allow FILE`): the public keys of the senders it
//! accepts, one `KEY [comment]` a line.

use super::{parse_key, KeyError, KEY_LEN};
use std::path::{Path, PathBuf};

/// The senders a receiver accepts, read from a file of `KEY [comment]` lines (`#` starts
/// a comment line; blank lines are skipped).
#[derive(Debug, Clone)]
pub struct AllowList {
    path: PathBuf,
    /// Each key and the comment beside it (empty if none).
    keys: Vec<([u8; KEY_LEN], String)>,
}

impl AllowList {
    /// Reads the allow list `path`. A line that is not `KEY [comment]` is an error naming
    /// the file and the line; so is a list without any key (it would refuse everyone).
    pub fn load(path: &Path) -> Result<AllowList, KeyError> {
        let text = std::fs::read_to_string(path).map_err(|source| KeyError::Io {
            action: "read allow list",
            path: path.to_path_buf(),
            source,
        })?;
        let mut keys = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (key, comment) = line
                .split_once(char::is_whitespace)
                .map_or((line, ""), |(k, c)| (k, c.trim()));
            let key = parse_key(key).map_err(|e| KeyError::BadLine {
                path: path.to_path_buf(),
                line: i + 1,
                why: format!("{e}; a line is `KEY [comment]`"),
            })?;
            keys.push((key, comment.to_string()));
        }
        if keys.is_empty() {
            return Err(KeyError::EmptyAllowList {
                path: path.to_path_buf(),
            });
        }
        Ok(AllowList {
            path: path.to_path_buf(),
            keys,
        })
    }

    /// Whether `key` is in the list.
    pub fn allows(&self, key: &[u8; KEY_LEN]) -> bool {
        self.keys.iter().any(|(k, _)| k == key)
    }

    /// The comment beside `key` (e.g. who it is), if it is in the list with one.
    #[cfg(test)]
    pub fn comment(&self, key: &[u8; KEY_LEN]) -> Option<&str> {
        self.keys
            .iter()
            .find(|(k, c)| k == key && !c.is_empty())
            .map(|(_, c)| c.as_str())
    }

    /// The number of keys in the list.
    #[cfg(test)]
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// The file it was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::encode_key;

    fn key(n: u8) -> [u8; KEY_LEN] {
        [n; KEY_LEN]
    }

    #[test]
    fn an_allow_list_holds_keys_with_comments() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("allowed");
        std::fs::write(
            &path,
            format!(
                "# senders of the lab\n\n{} alice's laptop\n  {}\t\n{} # bob\n",
                encode_key(&key(1)),
                encode_key(&key(2)),
                encode_key(&key(3))
            ),
        )
        .unwrap();
        let list = AllowList::load(&path).unwrap();
        assert_eq!(list.len(), 3);
        assert!(list.allows(&key(1)) && list.allows(&key(2)) && list.allows(&key(3)));
        assert!(!list.allows(&key(4)));
        assert_eq!(list.comment(&key(1)), Some("alice's laptop"));
        assert_eq!(list.comment(&key(2)), None);
        assert_eq!(list.comment(&key(3)), Some("# bob"));
        assert_eq!(list.path(), path);
    }

    #[test]
    fn allow_list_errors_name_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("allowed");
        let good = encode_key(&key(1));
        for (text, needle) in [
            (
                format!("{good}\n# c\nnot-a-key bob\n"),
                "line 3: `not-a-key` is not a ctp public key",
            ),
            (format!("\n\n\n{}x carol\n", &good[..43]), "line 4: `"),
            (format!("{good} ok\n{}\n", &good[..40]), "line 2: `"),
            ("# nobody yet\n\n".to_string(), "lists no key"),
            (String::new(), "lists no key"),
        ] {
            std::fs::write(&path, &text).unwrap();
            let e = AllowList::load(&path).unwrap_err().to_string();
            assert!(e.contains(needle), "{text:?}: expected {needle:?} in {e}");
            assert!(e.contains(&path.display().to_string()), "{e}");
        }
        let e = AllowList::load(&dir.path().join("absent")).unwrap_err();
        assert!(matches!(e, KeyError::Io { .. }), "{e}");
        let e = e.to_string();
        assert!(
            e.contains("cannot read allow list") && e.contains("absent"),
            "{e}"
        );
    }
}
