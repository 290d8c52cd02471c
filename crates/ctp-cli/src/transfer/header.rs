//! The file-transfer framing carried over a `reliable` byte stream.
//!
//! ```text
//! sender → receiver:  "CTPF" | version u8 = 1 | name length u16 | name (UTF-8) | size u64
//!                     | size bytes of content | BLAKE3 of the content (32 bytes) | end of stream
//! receiver → sender:  "OK" | BLAKE3 (32 bytes)            the file is stored and verified
//!                     "ER" | length u16 | reason (UTF-8)  it is not; the reason says why
//! ```
//! All integers are big-endian. The receiver answers only after the file is safely renamed
//! into place, so a sender that sees `OK` knows the transfer is complete.

/// A malformed transfer header or reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderError(pub String);

impl std::fmt::Display for HeaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HeaderError {}

/// Magic bytes opening a transfer.
pub const MAGIC: &[u8; 4] = b"CTPF";
/// Framing version.
pub const VERSION: u8 = 1;
/// Longest file name carried.
pub const MAX_NAME: usize = 1024;
/// Bytes of a BLAKE3 digest.
pub const DIGEST_LEN: usize = 32;

/// The header preceding the content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileHeader {
    /// The sender's base file name.
    pub name: String,
    /// Content length in bytes.
    pub size: u64,
}

impl FileHeader {
    /// Encodes the header.
    pub fn encode(&self) -> Vec<u8> {
        let name = self.name.as_bytes();
        let name = &name[..name.len().min(MAX_NAME)];
        let mut out = Vec::with_capacity(4 + 1 + 2 + name.len() + 8);
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        out.extend_from_slice(&(name.len() as u16).to_be_bytes());
        out.extend_from_slice(name);
        out.extend_from_slice(&self.size.to_be_bytes());
        out
    }

    /// Decodes a header from the start of `buf`; returns it and the bytes used, or `None`
    /// when more bytes are needed.
    pub fn decode(buf: &[u8]) -> Result<Option<(FileHeader, usize)>, HeaderError> {
        if buf.len() >= 4 && &buf[..4] != MAGIC {
            return Err(HeaderError(
                "not a ctp file transfer (bad magic); is the sender using --raw or another tool?"
                    .into(),
            ));
        }
        if buf.len() < 7 {
            return Ok(None);
        }
        if buf[4] != VERSION {
            return Err(HeaderError(format!(
                "unsupported transfer version {} (this ctp speaks {VERSION})",
                buf[4]
            )));
        }
        let name_len = u16::from_be_bytes([buf[5], buf[6]]) as usize;
        if name_len > MAX_NAME {
            return Err(HeaderError(format!(
                "file name of {name_len} bytes is too long (at most {MAX_NAME})"
            )));
        }
        let total = 7 + name_len + 8;
        if buf.len() < total {
            return Ok(None);
        }
        let name = std::str::from_utf8(&buf[7..7 + name_len])
            .map_err(|_| HeaderError("file name is not valid UTF-8".into()))?
            .to_string();
        let mut size = [0u8; 8];
        size.copy_from_slice(&buf[7 + name_len..total]);
        Ok(Some((
            FileHeader {
                name,
                size: u64::from_be_bytes(size),
            },
            total,
        )))
    }
}

/// The receiver's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Stored and verified, with the digest.
    Ok([u8; DIGEST_LEN]),
    /// Failed, with the reason.
    Err(String),
}

impl Reply {
    /// Encodes the reply.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Reply::Ok(d) => [&b"OK"[..], d].concat(),
            Reply::Err(r) => {
                let r = &r.as_bytes()[..r.len().min(u16::MAX as usize)];
                [&b"ER"[..], &(r.len() as u16).to_be_bytes(), r].concat()
            }
        }
    }

    /// Decodes a complete reply.
    pub fn decode(buf: &[u8]) -> Result<Reply, HeaderError> {
        match buf.get(..2) {
            Some(b"OK") if buf.len() == 2 + DIGEST_LEN => {
                let mut d = [0u8; DIGEST_LEN];
                d.copy_from_slice(&buf[2..]);
                Ok(Reply::Ok(d))
            }
            Some(b"ER") if buf.len() >= 4 => {
                let n = u16::from_be_bytes([buf[2], buf[3]]) as usize;
                let r = buf
                    .get(4..4 + n)
                    .ok_or_else(|| HeaderError("truncated error reply".into()))?;
                Ok(Reply::Err(ctp_proto::text::peer_text(r)))
            }
            _ => Err(HeaderError(format!(
                "malformed reply from the receiver ({} bytes)",
                buf.len()
            ))),
        }
    }
}

/// Makes a received name safe to create inside a directory: no separators, no `..`, no
/// leading dot games, no control characters or bidi overrides (they would also reach the
/// terminal in the summary); never empty.
pub fn sanitize_name(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or("");
    let cleaned: String = base
        .chars()
        .filter(|&c| !ctp_proto::text::is_unsafe(c))
        .collect();
    let cleaned = cleaned.trim().trim_start_matches('.').to_string();
    if cleaned.is_empty() {
        "received.bin".to_string()
    } else {
        cleaned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_needs_all_bytes() {
        let h = FileHeader {
            name: "big.iso".into(),
            size: 1 << 40,
        };
        let b = h.encode();
        for cut in 0..b.len() {
            assert_eq!(FileHeader::decode(&b[..cut]).unwrap(), None, "cut at {cut}");
        }
        let mut more = b.clone();
        more.extend_from_slice(b"content");
        assert_eq!(FileHeader::decode(&more).unwrap(), Some((h, b.len())));
    }

    #[test]
    fn malformed_headers_are_errors_not_panics() {
        assert!(FileHeader::decode(b"HTTP/1.1 200").is_err());
        assert!(FileHeader::decode(b"CTPF\x09\x00\x00")
            .unwrap_err()
            .to_string()
            .contains("version"));
        let mut long = b"CTPF\x01".to_vec();
        long.extend_from_slice(&u16::MAX.to_be_bytes());
        assert!(FileHeader::decode(&long)
            .unwrap_err()
            .to_string()
            .contains("too long"));
        let mut bad = b"CTPF\x01\x00\x02".to_vec();
        bad.extend_from_slice(&[0xff, 0xfe]);
        bad.extend_from_slice(&[0; 8]);
        assert!(FileHeader::decode(&bad)
            .unwrap_err()
            .to_string()
            .contains("UTF-8"));
        for junk in [&b""[..], b"O", b"OKshort", b"ER\x00\x09abc", b"??"] {
            let _ = Reply::decode(junk);
        }
        assert!(Reply::decode(b"ER\x00\x09abc").is_err());
    }

    #[test]
    fn replies_round_trip() {
        for r in [Reply::Ok([7; 32]), Reply::Err("disk full".into())] {
            assert_eq!(Reply::decode(&r.encode()).unwrap(), r);
        }
    }

    #[test]
    fn names_are_sanitised() {
        assert_eq!(sanitize_name("../../etc/passwd"), "passwd");
        assert_eq!(sanitize_name("C:\\x\\y.txt"), "y.txt");
        assert_eq!(sanitize_name(".."), "received.bin");
        assert_eq!(sanitize_name(".hidden"), "hidden");
        assert_eq!(sanitize_name("a\u{0}b\nc"), "abc");
        assert_eq!(sanitize_name(""), "received.bin");
        assert_eq!(sanitize_name("report 2026.pdf"), "report 2026.pdf");
        assert_eq!(sanitize_name("\u{1b}]0;x\u{7}a\u{9b}b"), "]0;xab");
        assert_eq!(sanitize_name("evil\u{202e}fdp.exe"), "evilfdp.exe");
        assert_eq!(sanitize_name("\u{2066}x\u{2069}"), "x");
    }

    #[test]
    fn error_reasons_from_the_receiver_are_sanitised() {
        let wire = Reply::Err("disk\u{1b}[2J full\u{202e}".into()).encode();
        assert_eq!(
            Reply::decode(&wire).unwrap(),
            Reply::Err("disk\\x1b[2J full\\u{202e}".into())
        );
    }
}
