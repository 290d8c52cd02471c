//! The file-transfer framing (version 2) carried over a `reliable` byte stream.
//!
//! ```text
//! sender → receiver:    "CTPF" | version u8 = 2 | flags u8 | manifest length u32 | manifest
//! receiver → sender:    "GO" | length u32 | for each file: block count u32 | the BLAKE3
//!                       of each block (1 MiB) of a partial copy it kept (0 blocks: none)
//!                    or "ER" | length u16 | reason (UTF-8)     refused before any content
//! sender → receiver:    for each file, in manifest order: start offset u64
//!                       | content from that offset | BLAKE3 of the whole content (32 bytes)
//!                       | end of stream
//! receiver → sender:    "OK" | BLAKE3 of the manifest and every file's digest
//!                    or "ER" | length u16 | reason
//! ```
//! All integers are big-endian; the manifest is [`super::manifest`]'s. Flag bit 0
//! (`FLAG_RESUME`) asks the receiver to keep what arrived of an interrupted file and to offer
//! what it kept. The receiver renames each file into place once its digest matched, and
//! answers `OK` only after the last one, so a sender that sees `OK` with the digest it
//! computed itself knows the whole transfer is complete. Version 1 (one file, no manifest)
//! is refused with a reason the version-1 sender prints.
//!
//! This module and [`super::manifest`] depend on nothing else of the crate (the fuzz
//! targets compile them on their own).

use super::manifest::{Manifest, MAX_MANIFEST};

pub use super::manifest::HeaderError;

/// Magic bytes opening a transfer.
pub const MAGIC: &[u8; 4] = b"CTPF";
/// Framing version.
pub const VERSION: u8 = 2;
/// Bytes of a BLAKE3 digest.
pub const DIGEST_LEN: usize = 32;
/// Flag: keep partial files and offer them for resuming.
pub const FLAG_RESUME: u8 = 1;
/// Bytes of a resume block: the receiver's answer names a partial copy by the BLAKE3 of
/// each of its blocks of this size (the last block of a file may be shorter).
pub const BLOCK: u64 = 1 << 20;

/// What opens a transfer: the flags and the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// [`FLAG_RESUME`] or 0.
    pub flags: u8,
    /// The entries offered.
    pub manifest: Manifest,
}

impl Hello {
    /// Encodes the opening.
    pub fn encode(&self) -> Vec<u8> {
        let manifest = self.manifest.encode();
        let mut out = Vec::with_capacity(10 + manifest.len());
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        out.push(self.flags);
        out.extend_from_slice(&(manifest.len() as u32).to_be_bytes());
        out.extend_from_slice(&manifest);
        out
    }

    /// Decodes the opening from the start of `buf`; returns it and the bytes used, or
    /// `None` when more bytes are needed.
    pub fn decode(buf: &[u8]) -> Result<Option<(Hello, usize)>, HeaderError> {
        if buf.len() >= 4 && &buf[..4] != MAGIC {
            return Err(HeaderError(
                "not a ctp file transfer (bad magic); is the sender using --raw or another tool?"
                    .into(),
            ));
        }
        if buf.len() < 5 {
            return Ok(None);
        }
        match buf[4] {
            VERSION => {}
            1 => {
                return Err(HeaderError(
                    "the sender speaks file-transfer version 1 (an older ctp); this receiver \
                     speaks version 2 only: upgrade the sender"
                        .into(),
                ))
            }
            v => {
                return Err(HeaderError(format!(
                    "unsupported transfer version {v} (this ctp speaks {VERSION})"
                )))
            }
        }
        if buf.len() < 10 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([buf[6], buf[7], buf[8], buf[9]]);
        if len > MAX_MANIFEST {
            return Err(HeaderError(format!(
                "a manifest of {len} bytes is too long (at most {MAX_MANIFEST})"
            )));
        }
        let total = 10 + len as usize;
        if buf.len() < total {
            return Ok(None);
        }
        let manifest = Manifest::decode(&buf[10..total])?;
        Ok(Some((
            Hello {
                flags: buf[5],
                manifest,
            },
            total,
        )))
    }
}

/// The receiver's answer to the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Send the files; for each, the block digests of the partial copy the receiver kept.
    Go(Vec<Vec<[u8; DIGEST_LEN]>>),
    /// Refused, with the reason.
    Refused(String),
}

impl Plan {
    /// Encodes the answer.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Plan::Go(files) => {
                let mut out = b"GO\0\0\0\0".to_vec();
                for blocks in files {
                    out.extend_from_slice(&(blocks.len() as u32).to_be_bytes());
                    for b in blocks {
                        out.extend_from_slice(b);
                    }
                }
                let len = (out.len() - 6) as u32;
                out[2..6].copy_from_slice(&len.to_be_bytes());
                out
            }
            Plan::Refused(r) => Reply::Err(r.clone()).encode(),
        }
    }

    /// Decodes the answer for files of `sizes` from the start of `buf`; returns it and the
    /// bytes used, or `None` when more bytes are needed. A file is offered at most the
    /// blocks it has.
    pub fn decode(buf: &[u8], sizes: &[u64]) -> Result<Option<(Plan, usize)>, HeaderError> {
        match buf.get(..2) {
            None => Ok(None),
            Some(b"GO") => {
                let Some(len) = buf.get(2..6) else {
                    return Ok(None);
                };
                let end = 6 + u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
                let Some(mut body) = buf.get(6..end) else {
                    return Ok(None);
                };
                let mut files = Vec::with_capacity(sizes.len());
                for &size in sizes {
                    let Some((n, rest)) = body.split_first_chunk::<4>() else {
                        return Err(HeaderError("the receiver's answer is truncated".into()));
                    };
                    let n = u32::from_be_bytes(*n) as u64;
                    if n > size.div_ceil(BLOCK) {
                        return Err(HeaderError(format!(
                            "the receiver offers {n} blocks of a {size}-byte file"
                        )));
                    }
                    let Some((hashes, rest)) = rest.split_at_checked(n as usize * DIGEST_LEN)
                    else {
                        return Err(HeaderError("the receiver's answer is truncated".into()));
                    };
                    files.push(
                        hashes
                            .chunks_exact(DIGEST_LEN)
                            .map(|c| c.try_into().unwrap_or_default())
                            .collect(),
                    );
                    body = rest;
                }
                if !body.is_empty() {
                    return Err(HeaderError(
                        "the receiver's answer is longer than the manifest calls for".into(),
                    ));
                }
                Ok(Some((Plan::Go(files), end)))
            }
            Some(b"ER") => {
                let Some(n) = buf.get(2..4) else {
                    return Ok(None);
                };
                let end = 4 + u16::from_be_bytes([n[0], n[1]]) as usize;
                match buf.get(..end) {
                    None => Ok(None),
                    Some(all) => match Reply::decode(all)? {
                        Reply::Err(r) => Ok(Some((Plan::Refused(r), end))),
                        Reply::Ok(_) => Err(HeaderError("malformed refusal".into())),
                    },
                }
            }
            Some(_) => Err(HeaderError(
                "malformed answer from the receiver (is it an older ctp?)".into(),
            )),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::manifest::{Entry, Kind, Mtime};

    fn hello() -> Hello {
        Hello {
            flags: FLAG_RESUME,
            manifest: Manifest {
                entries: vec![Entry {
                    path: "big.iso".into(),
                    kind: Kind::File,
                    size: 1 << 40,
                    mode: 0o600,
                    mtime: Mtime::default(),
                }],
            },
        }
    }

    #[test]
    fn the_opening_round_trips_and_needs_all_bytes() {
        let h = hello();
        let b = h.encode();
        for cut in 0..b.len() {
            assert_eq!(Hello::decode(&b[..cut]).unwrap(), None, "cut at {cut}");
        }
        let mut more = b.clone();
        more.extend_from_slice(b"content");
        assert_eq!(Hello::decode(&more).unwrap(), Some((h, b.len())));
    }

    #[test]
    fn malformed_openings_are_errors_not_panics() {
        assert!(Hello::decode(b"HTTP/1.1 200").is_err());
        assert!(Hello::decode(b"CTPF\x09\x00\x00")
            .unwrap_err()
            .to_string()
            .contains("version"));
        let v1 = Hello::decode(b"CTPF\x01\x00\x05hello")
            .unwrap_err()
            .to_string();
        assert!(v1.contains("version 1") && v1.contains("upgrade"), "{v1}");
        let mut long = b"CTPF\x02\x00".to_vec();
        long.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(Hello::decode(&long)
            .unwrap_err()
            .to_string()
            .contains("too long"));
        let mut bad = b"CTPF\x02\x00".to_vec();
        bad.extend_from_slice(&4u32.to_be_bytes());
        bad.extend_from_slice(&0u32.to_be_bytes());
        assert!(Hello::decode(&bad)
            .unwrap_err()
            .to_string()
            .contains("empty"));
        for junk in [&b""[..], b"O", b"OKshort", b"ER\x00\x09abc", b"??"] {
            let _ = Reply::decode(junk);
            let _ = Plan::decode(junk, &[10]);
        }
        assert!(Reply::decode(b"ER\x00\x09abc").is_err());
    }

    #[test]
    fn plans_round_trip_and_offer_no_more_blocks_than_a_file_has() {
        let sizes = [3 << 20, 0, 1];
        for p in [
            Plan::Go(vec![vec![[1; 32], [2; 32], [3; 32]], vec![], vec![[4; 32]]]),
            Plan::Refused("exists".into()),
        ] {
            let b = p.encode();
            for cut in 0..b.len() {
                assert_eq!(Plan::decode(&b[..cut], &sizes).unwrap(), None, "cut {cut}");
            }
            assert_eq!(Plan::decode(&b, &sizes).unwrap(), Some((p, b.len())));
        }
        let too_many = Plan::Go(vec![vec![[1; 32]; 4], vec![], vec![]]).encode();
        assert!(Plan::decode(&too_many, &sizes).is_err());
    }

    #[test]
    fn replies_round_trip() {
        for r in [Reply::Ok([7; 32]), Reply::Err("disk full".into())] {
            assert_eq!(Reply::decode(&r.encode()).unwrap(), r);
        }
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
