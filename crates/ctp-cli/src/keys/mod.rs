//! Keys for people: how a ctp endpoint's static X25519 key (the one it proves in the Noise
//! XX handshake) is shown, typed, stored and trusted.
//!
//! - A public key is shown and typed as the standard base64 of its 32 bytes, 44
//!   characters (as WireGuard shows keys). That string is the fingerprint people compare
//!   and pin; there is no shorter form ([`encode_key`], [`parse_key`]).
//! - Each user has an identity ([`Identity`]) in the configuration directory
//!   ([`config_dir`]): `id_x25519` (private, mode 0600) and `id_x25519.pub`.
//! - A sender remembers the key of each receiver it reached, by the address typed
//!   (`known_peers`, trust on first use as ssh does) unless a key is pinned with
//!   `--peer-key` ([`KnownPeers`]).
//! - A receiver may accept only the senders listed in an allow list ([`AllowList`]).
//!
//! [`Security`] gathers what one command asked for, checked before anything is bound or
//! sent; the handshake consults it for the peer's key.

mod allow;
mod channel;
mod identity;
mod known_peers;

pub use allow::AllowList;
pub use channel::Channel;
pub use identity::{Identity, IdentityFile, PRIVATE_FILE, PUBLIC_FILE};
pub use known_peers::{normalize_addr, KnownPeers, Trust};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

/// Bytes of an X25519 key, public or private.
pub const KEY_LEN: usize = 32;

/// Characters of a key's base64 text ([`encode_key`]).
pub const KEY_TEXT_LEN: usize = 44;

/// What a malformed key is compared with in error messages.
const EXPECTED: &str =
    "expected 44 characters of base64 (as printed by `ctp keygen` or by `ctp recv`)";

/// The base64 text of a key (standard alphabet, padded: 44 characters), as it is shown,
/// typed, pinned and stored.
pub fn encode_key(key: &[u8; KEY_LEN]) -> String {
    STANDARD.encode(key)
}

/// Reads a public key typed or pasted by a person: the 44 characters of [`encode_key`]
/// (whitespace around them is ignored). The error says what is wrong with the text and
/// what a key looks like.
pub fn parse_key(text: &str) -> Result<[u8; KEY_LEN], KeyError> {
    let t = text.trim();
    let bad = |why: String| KeyError::NotAKey {
        text: shorten(t),
        why,
    };
    if t.is_empty() {
        return Err(bad(format!("it is empty; {EXPECTED}")));
    }
    if t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad(format!(
            "it looks like hexadecimal; ctp keys are base64: {EXPECTED}"
        )));
    }
    if let Some(c) = t.chars().find(|c| *c == '-' || *c == '_') {
        return Err(bad(format!(
            "`{c}` belongs to URL-safe base64; ctp keys use the standard alphabet (`+` and `/`): {EXPECTED}"
        )));
    }
    if let Some(c) = t
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=')))
    {
        return Err(bad(format!("`{c}` is not a base64 character; {EXPECTED}")));
    }
    if t.chars().count() != KEY_TEXT_LEN {
        return Err(bad(format!("it has {} characters; {EXPECTED}", t.len())));
    }
    let bytes = STANDARD.decode(t).map_err(|e| {
        bad(match e {
            base64::DecodeError::InvalidLastSymbol(..) => {
                format!("its last characters are not those of any key (mistyped?); {EXPECTED}")
            }
            base64::DecodeError::InvalidPadding | base64::DecodeError::InvalidByte(..) => {
                format!("`=` may only end it; {EXPECTED}")
            }
            other => format!("{other}; {EXPECTED}"),
        })
    })?;
    bytes.try_into().map_err(|b: Vec<u8>| {
        bad(format!(
            "it decodes to {} bytes, not {KEY_LEN}; {EXPECTED}",
            b.len()
        ))
    })
}

/// `text` cut short for an error message.
fn shorten(text: &str) -> String {
    const MAX: usize = 60;
    if text.chars().count() <= MAX {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(MAX - 12).collect::<String>())
    }
}

/// The directory of ctp's keys: `$CTP_CONFIG_DIR` if set, else `$XDG_CONFIG_HOME/ctp`,
/// else `$HOME/.config/ctp`; `None` when none of them is set.
pub fn config_dir() -> Option<PathBuf> {
    config_dir_from(|name| std::env::var_os(name))
}

/// [`config_dir`] with the environment read through `var` (empty values count as unset,
/// and so does a relative `XDG_CONFIG_HOME`, as the XDG specification says).
pub fn config_dir_from(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set("CTP_CONFIG_DIR") {
        return Some(dir);
    }
    if let Some(xdg) = set("XDG_CONFIG_HOME").filter(|p| p.is_absolute()) {
        return Some(xdg.join("ctp"));
    }
    set("HOME").map(|home| home.join(".config").join("ctp"))
}

/// Why a key could not be read, stored or trusted. Each message names the file (and line)
/// and says what to do.
#[derive(Debug)]
pub enum KeyError {
    /// Text that is not a public key ([`parse_key`]).
    NotAKey {
        /// The text (cut short if long).
        text: String,
        /// What is wrong with it.
        why: String,
    },
    /// A file or directory could not be read or written.
    Io {
        /// What was being done ("read", "create", …).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// A private key file that others than its owner may read.
    TooOpen {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// An identity already exists where a new one was to be written.
    Exists {
        /// The private key file.
        path: PathBuf,
    },
    /// No identity where one was to be read.
    NoIdentity {
        /// The private key file looked for.
        path: PathBuf,
    },
    /// A line of a key file, known-peers file or allow list that cannot be read.
    BadLine {
        /// The file.
        path: PathBuf,
        /// Its line number, from 1.
        line: usize,
        /// What is wrong with the line.
        why: String,
    },
    /// An allow list that lists nobody.
    EmptyAllowList {
        /// The file.
        path: PathBuf,
    },
    /// No configuration directory can be named (no `CTP_CONFIG_DIR`, `XDG_CONFIG_HOME`
    /// or `HOME`).
    NoConfigDir,
    /// The peer's key differs from the one remembered for its address.
    PeerKeyChanged {
        /// The address as remembered.
        addr: String,
        /// The known-peers file.
        path: PathBuf,
        /// The line that remembers the old key.
        line: usize,
        /// The key remembered.
        remembered: [u8; KEY_LEN],
        /// The key the peer proved now.
        offered: [u8; KEY_LEN],
    },
    /// The peer's key differs from the one pinned with `--peer-key`.
    PinMismatch {
        /// The peer's address as typed.
        addr: String,
        /// The key pinned.
        pinned: [u8; KEY_LEN],
        /// The key the peer proved.
        offered: [u8; KEY_LEN],
    },
    /// The peer's key is not in the allow list.
    NotAllowed {
        /// The allow list.
        path: PathBuf,
        /// The key the peer proved.
        offered: [u8; KEY_LEN],
    },
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::NotAKey { text, why } => {
                write!(f, "`{text}` is not a ctp public key: {why}")
            }
            KeyError::Io {
                action,
                path,
                source,
            } => write!(f, "cannot {action} {}: {source}", path.display()),
            KeyError::TooOpen { path, mode } => write!(
                f,
                "permissions {mode:04o} for private key {p} are too open: others than its owner \
                 may read it, so it is refused; run `chmod 600 {p}`",
                p = path.display()
            ),
            KeyError::Exists { path } => write!(
                f,
                "an identity already exists in {}; `ctp keygen --force` replaces it (peers that \
                 pinned or remembered its public key will then refuse this host until told the \
                 new one)",
                path.display()
            ),
            KeyError::NoIdentity { path } => write!(
                f,
                "no identity in {}: create one with `ctp keygen`",
                path.display()
            ),
            KeyError::BadLine { path, line, why } => {
                write!(f, "{} line {line}: {why}", path.display())
            }
            KeyError::EmptyAllowList { path } => write!(
                f,
                "allow list {} lists no key, so every sender would be refused; add a line \
                 `KEY [comment]` per sender (KEY as `ctp keygen --show` prints it there)",
                path.display()
            ),
            KeyError::NoConfigDir => write!(
                f,
                "no directory for ctp's keys: set CTP_CONFIG_DIR (or XDG_CONFIG_HOME or HOME), \
                 or give --key FILE"
            ),
            KeyError::PeerKeyChanged {
                addr,
                path,
                line,
                remembered,
                offered,
            } => write!(
                f,
                "WARNING: the key of {addr} has changed! Someone may be intercepting the \
                 connection (a man in the middle), or the receiver's identity was replaced.\n\
                 remembered: {} ({} line {line})\n\
                 offered:    {}\n\
                 Nothing was sent. If you know the receiver's key changed, delete line {line} \
                 of {} (or pin the new key with --peer-key) and connect again.",
                encode_key(remembered),
                path.display(),
                encode_key(offered),
                path.display()
            ),
            KeyError::PinMismatch {
                addr,
                pinned,
                offered,
            } => write!(
                f,
                "the key of {addr} is not the one pinned with --peer-key: pinned {}, offered {}; \
                 nothing was sent",
                encode_key(pinned),
                encode_key(offered)
            ),
            KeyError::NotAllowed { path, offered } => write!(
                f,
                "the sender's key {} is not in the allow list {}",
                encode_key(offered),
                path.display()
            ),
        }
    }
}

impl std::error::Error for KeyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KeyError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// What the command line asked for about encryption and keys, unchecked
/// ([`Security::from_args`] checks it).
#[derive(Debug, Clone, Default)]
pub struct SecurityArgs {
    /// `--insecure`: no encryption, no keys (the other fields are then ignored).
    pub insecure: bool,
    /// `--key FILE`: the identity to prove instead of the configuration directory's.
    pub key: Option<PathBuf>,
    /// `--peer-key KEY` (a sender's): the only key the receiver may prove.
    pub peer_key: Option<[u8; KEY_LEN]>,
    /// `--allow FILE` (a receiver's): the only keys senders may prove.
    pub allow: Option<PathBuf>,
    /// A sender's: the receiver's address as typed, under which its key is remembered.
    pub peer: Option<String>,
}

/// Encryption and keys of one command, checked before anything is bound or sent, to be
/// handed to the handshake.
#[derive(Debug)]
pub struct Security {
    /// No encryption: `identity`, `peer_key`, `allow` and `known_peers` are then `None`.
    pub insecure: bool,
    /// The static key pair this side proves.
    pub identity: Option<Identity>,
    /// Where `identity` is stored (its private key file).
    pub identity_path: Option<PathBuf>,
    /// Whether `identity` was created by this command (the first use of the configuration
    /// directory).
    pub identity_created: bool,
    /// A sender's pin: the only key the receiver may prove.
    pub peer_key: Option<[u8; KEY_LEN]>,
    /// A receiver's allow list: the only keys senders may prove.
    pub allow: Option<AllowList>,
    /// A sender's peer, as typed and normalised ([`normalize_addr`]).
    pub peer: Option<String>,
    /// A sender's remembered receivers (without a pin): the receiver's key is checked
    /// against them and remembered the first time.
    pub known_peers: Option<KnownPeers>,
}

impl Security {
    /// Checks what the command line asked for and loads the keys it names: the identity
    /// (`--key FILE`, or the configuration directory's, created there on first use), the
    /// allow list and, for a sender without a pin, the known peers. Nothing is loaded with
    /// `--insecure`.
    pub fn from_args(args: SecurityArgs) -> Result<Security, KeyError> {
        Self::from_args_in(args, config_dir().as_deref())
    }

    /// [`Security::from_args`] with the configuration directory given (`None`: there is
    /// none).
    pub fn from_args_in(args: SecurityArgs, dir: Option<&Path>) -> Result<Security, KeyError> {
        let peer = args.peer.as_deref().map(normalize_addr);
        if args.insecure {
            return Ok(Security {
                insecure: true,
                identity: None,
                identity_path: None,
                identity_created: false,
                peer_key: None,
                allow: None,
                peer,
                known_peers: None,
            });
        }
        // The allow list first: a mistake in it is the likeliest, and reading it changes
        // nothing.
        let allow = args.allow.as_deref().map(AllowList::load).transpose()?;
        let (identity, identity_path, identity_created) = match &args.key {
            Some(path) => (Identity::load(path)?, path.clone(), false),
            None => {
                let dir = dir.ok_or(KeyError::NoConfigDir)?;
                let (id, created) = Identity::load_or_create(dir)?;
                (id, dir.join(PRIVATE_FILE), created)
            }
        };
        let known_peers = match (&peer, args.peer_key) {
            (Some(_), None) => Some(KnownPeers::load(dir.ok_or(KeyError::NoConfigDir)?)?),
            _ => None,
        };
        Ok(Security {
            insecure: false,
            identity: Some(identity),
            identity_path: Some(identity_path),
            identity_created,
            peer_key: args.peer_key,
            allow,
            peer,
            known_peers,
        })
    }

    /// A sender's check of the key the receiver proved: the pin if there is one (then
    /// [`Trust::Known`] or [`KeyError::PinMismatch`]), else the known peers: a key seen
    /// before is [`Trust::Known`], a first one is remembered and [`Trust::New`], a changed
    /// one is refused ([`KeyError::PeerKeyChanged`]). Without a peer address (a receiver)
    /// every key is [`Trust::New`].
    pub fn check_receiver_key(&mut self, key: &[u8; KEY_LEN]) -> Result<Trust, KeyError> {
        let addr = self.peer.clone().unwrap_or_default();
        if let Some(pinned) = self.peer_key {
            return if &pinned == key {
                Ok(Trust::Known)
            } else {
                Err(KeyError::PinMismatch {
                    addr,
                    pinned,
                    offered: *key,
                })
            };
        }
        let Some(known) = self.known_peers.as_mut() else {
            return Ok(Trust::New);
        };
        match known.check(&addr, key) {
            Trust::Known => Ok(Trust::Known),
            Trust::New => {
                known.remember(&addr, key)?;
                Ok(Trust::New)
            }
            Trust::Changed { .. } => Err(known.changed(&addr, key)),
        }
    }

    /// A receiver's check of the key a sender proved: with an allow list, the key must be
    /// in it ([`KeyError::NotAllowed`]); without one every key is accepted.
    pub fn check_sender_key(&self, key: &[u8; KEY_LEN]) -> Result<(), KeyError> {
        match &self.allow {
            Some(list) if !list.allows(key) => Err(KeyError::NotAllowed {
                path: list.path().to_path_buf(),
                offered: *key,
            }),
            _ => Ok(()),
        }
    }

    /// This side's public key in base64, if it has one.
    pub fn public_key_text(&self) -> Option<String> {
        self.identity.as_ref().map(|id| encode_key(&id.public))
    }
}

/// Creates `dir` (and its parents) if missing, with mode 0700 for what it creates.
fn create_dir(dir: &Path) -> Result<(), KeyError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| KeyError::Io {
            action: "create directory",
            path: dir.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> [u8; KEY_LEN] {
        std::array::from_fn(|i| n.wrapping_mul(31).wrapping_add(i as u8))
    }

    #[test]
    fn keys_round_trip_through_44_characters_of_base64() {
        for k in [[0u8; 32], [0xff; 32], key(1), key(200)] {
            let text = encode_key(&k);
            assert_eq!(text.len(), KEY_TEXT_LEN);
            assert!(text.ends_with('='), "{text}");
            assert_eq!(parse_key(&text).unwrap(), k);
            // Pasted with a newline or spaces around it.
            assert_eq!(parse_key(&format!("  {text}\n")).unwrap(), k);
        }
        assert_eq!(
            encode_key(&[0u8; 32]),
            "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
        );
    }

    /// Every kind of bad text is refused with what is wrong and what a key looks like.
    #[test]
    fn bad_key_text_is_refused_with_the_reason() {
        let good = encode_key(&key(7));
        let hex: String = key(7).iter().map(|b| format!("{b:02x}")).collect();
        let url_safe = encode_key(&[0xfb; 32]).replace('+', "-").replace('/', "_");
        let cases: Vec<(String, &str)> = vec![
            (String::new(), "it is empty"),
            ("   ".into(), "it is empty"),
            ("abc".into(), "it has 3 characters"),
            (good[..43].into(), "it has 43 characters"),
            (format!("{good}A"), "it has 45 characters"),
            (good.trim_end_matches('=').into(), "it has 43 characters"),
            (hex, "looks like hexadecimal"),
            (url_safe, "URL-safe base64"),
            (format!("{}!", &good[..43]), "`!` is not a base64 character"),
            (
                format!("{} {}", &good[..20], &good[21..]),
                "` ` is not a base64",
            ),
            (format!("{}é", &good[..43]), "`é` is not a base64 character"),
            // 44 characters that end in `==`: 31 bytes.
            (
                format!("{}==", &encode_key(&key(3))[..42]),
                "not those of any key",
            ),
            (format!("{}==", "A".repeat(42)), "decodes to 31 bytes"),
            // `=` in the middle.
            (format!("AAAA={}", &good[5..]), "`=` may only end it"),
            // The last character carries bits no 32-byte key has.
            (format!("{}B=", &good[..42]), "not those of any key"),
            // 44 characters without `=`: 33 bytes.
            ("A".repeat(44), "decodes to 33 bytes"),
        ];
        for (text, needle) in cases {
            let e = parse_key(&text).expect_err(&text).to_string();
            assert!(e.contains(needle), "{text:?}: expected {needle:?} in {e}");
            assert!(e.contains("is not a ctp public key"), "{e}");
            assert!(
                e.contains("expected 44 characters of base64 (as printed by `ctp keygen`"),
                "{e}"
            );
        }
        let e = parse_key("abc").unwrap_err().to_string();
        assert!(e.starts_with("`abc` is not a ctp public key: "), "{e}");
        // A long paste is shown cut short.
        let e = parse_key(&"x".repeat(500)).unwrap_err().to_string();
        assert!(e.len() < 300 && e.contains('…'), "{e}");
    }

    #[test]
    fn the_config_dir_is_ctp_config_dir_then_xdg_then_home() {
        fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| OsString::from(v))
            }
        }
        let all = [
            ("CTP_CONFIG_DIR", "/c"),
            ("XDG_CONFIG_HOME", "/x"),
            ("HOME", "/h"),
        ];
        assert_eq!(config_dir_from(env(&all)), Some("/c".into()));
        assert_eq!(config_dir_from(env(&all[1..])), Some("/x/ctp".into()));
        assert_eq!(
            config_dir_from(env(&all[2..])),
            Some("/h/.config/ctp".into())
        );
        assert_eq!(
            config_dir_from(env(&[
                ("CTP_CONFIG_DIR", ""),
                ("XDG_CONFIG_HOME", "rel"),
                ("HOME", "/h")
            ])),
            Some("/h/.config/ctp".into())
        );
        assert_eq!(config_dir_from(env(&[])), None);
    }

    #[test]
    fn security_loads_what_was_asked_and_nothing_when_insecure() {
        let dir = tempfile::tempdir().unwrap();
        let insecure = Security::from_args_in(
            SecurityArgs {
                insecure: true,
                peer: Some("Host:1".into()),
                ..Default::default()
            },
            Some(dir.path()),
        )
        .unwrap();
        assert!(insecure.insecure && insecure.identity.is_none());
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "no key made"
        );

        // A sender without a pin: an identity is created, the known peers are consulted.
        let mut s = Security::from_args_in(
            SecurityArgs {
                peer: Some("Example.COM:9000".into()),
                ..Default::default()
            },
            Some(dir.path()),
        )
        .unwrap();
        assert!(s.identity_created);
        assert_eq!(s.peer.as_deref(), Some("example.com:9000"));
        assert_eq!(s.check_receiver_key(&key(1)).unwrap(), Trust::New);
        assert_eq!(s.check_receiver_key(&key(1)).unwrap(), Trust::Known);
        let e = s.check_receiver_key(&key(2)).unwrap_err().to_string();
        assert!(e.contains("has changed") && e.contains("line 2"), "{e}");
        // The same identity next time.
        let again = Security::from_args_in(SecurityArgs::default(), Some(dir.path())).unwrap();
        assert!(!again.identity_created);
        assert_eq!(again.public_key_text(), s.public_key_text());
        assert!(again.check_sender_key(&key(9)).is_ok(), "no allow list");

        // A pin replaces the known peers.
        let mut pinned = Security::from_args_in(
            SecurityArgs {
                peer: Some("example.com:9000".into()),
                peer_key: Some(key(3)),
                ..Default::default()
            },
            Some(dir.path()),
        )
        .unwrap();
        assert!(pinned.known_peers.is_none());
        assert_eq!(pinned.check_receiver_key(&key(3)).unwrap(), Trust::Known);
        let e = pinned.check_receiver_key(&key(1)).unwrap_err().to_string();
        assert!(
            e.contains("not the one pinned") && e.contains(&encode_key(&key(3))),
            "{e}"
        );

        // A receiver with an allow list.
        let list = dir.path().join("allowed");
        std::fs::write(&list, format!("{} alice\n", encode_key(&key(5)))).unwrap();
        let r = Security::from_args_in(
            SecurityArgs {
                allow: Some(list.clone()),
                ..Default::default()
            },
            Some(dir.path()),
        )
        .unwrap();
        assert!(r.check_sender_key(&key(5)).is_ok());
        let e = r.check_sender_key(&key(6)).unwrap_err().to_string();
        assert!(e.contains("not in the allow list"), "{e}");

        // Errors come before any key is made: a missing allow list, no directory at all.
        let fresh = tempfile::tempdir().unwrap();
        let e = Security::from_args_in(
            SecurityArgs {
                allow: Some(fresh.path().join("missing")),
                ..Default::default()
            },
            Some(fresh.path()),
        )
        .unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
        assert_eq!(std::fs::read_dir(fresh.path()).unwrap().count(), 0);
        let e = Security::from_args_in(SecurityArgs::default(), None).unwrap_err();
        assert!(matches!(e, KeyError::NoConfigDir), "{e}");
        // `--key FILE` needs no directory, and is never created.
        let e = Security::from_args_in(
            SecurityArgs {
                key: Some(fresh.path().join("nope")),
                ..Default::default()
            },
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
    }
}
