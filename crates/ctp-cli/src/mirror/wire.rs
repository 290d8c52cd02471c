//! The mirror service's requests and answers (`ctp serve` / `ctp get`): one stream per
//! request, opened for [`SERVICE`], the request written and the stream finished; the
//! answer on the same stream.
//!
//! ```text
//! request = "INFO " NAME "\n"            answer = "OK " SIZE "\n" ENTRY*   (32 bytes each)
//!         | "GET " INDEX " " NAME "\n"            | "OK " LEN "\n" BYTES
//!                                                 | "ERR " MESSAGE "\n"
//! ```

use super::tree;

/// The stream service of the mirror protocol.
pub const SERVICE: u64 = 0x6d69_7272; // "mirr"

/// The longest request or answer line.
pub const MAX_LINE: usize = 4096;

/// What a client asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// The file's size and segment entries.
    Info(String),
    /// Segment `index` of the file.
    Get(String, u64),
}

impl Request {
    /// The request's bytes.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Request::Info(name) => format!("INFO {name}\n"),
            Request::Get(name, i) => format!("GET {i} {name}\n"),
        }
        .into_bytes()
    }

    /// Reads a request (one line, without the newline); says what is wrong otherwise.
    pub fn parse(line: &[u8]) -> Result<Request, String> {
        let line = std::str::from_utf8(line).map_err(|_| "a request is UTF-8".to_string())?;
        let name = |n: &str| {
            if n.is_empty() || n.contains('\n') {
                Err("a request names a file".to_string())
            } else {
                Ok(n.to_string())
            }
        };
        match line.split_once(' ') {
            Some(("INFO", n)) => Ok(Request::Info(name(n)?)),
            Some(("GET", rest)) => {
                let (i, n) = rest.split_once(' ').ok_or("GET INDEX NAME")?;
                let i = i.parse().map_err(|_| format!("not a segment index: {i}"))?;
                Ok(Request::Get(name(n)?, i))
            }
            _ => Err("unknown request (INFO NAME or GET INDEX NAME)".into()),
        }
    }
}

/// A file's size and segment entries, as `INFO` answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Info {
    /// Bytes.
    pub size: u64,
    /// One entry per segment ([`tree::segment_entry`]).
    pub entries: Vec<[u8; 32]>,
}

impl Info {
    /// The answer's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = format!("OK {}\n", self.size).into_bytes();
        for e in &self.entries {
            out.extend_from_slice(e);
        }
        out
    }

    /// Reads an answer to `INFO` (all of it); a refusal is the server's message.
    pub fn parse(bytes: &[u8]) -> Result<Info, String> {
        let (size, rest) = header(bytes)?;
        let count = tree::segment_count(size);
        if rest.len() as u64 != count * 32 {
            return Err(format!(
                "an answer for {size} bytes carries {count} entries, not {} bytes",
                rest.len()
            ));
        }
        let entries = rest
            .chunks_exact(32)
            .map(|c| c.try_into().unwrap_or([0; 32]))
            .collect();
        Ok(Info { size, entries })
    }
}

/// The `OK N` line of an answer and what follows it, or the server's `ERR` message.
pub fn header(bytes: &[u8]) -> Result<(u64, &[u8]), String> {
    let end = bytes
        .iter()
        .take(MAX_LINE)
        .position(|&b| b == b'\n')
        .ok_or("an answer without its first line")?;
    let line = String::from_utf8_lossy(&bytes[..end]);
    let rest = &bytes[end + 1..];
    if let Some(msg) = line.strip_prefix("ERR ") {
        return Err(msg.to_string());
    }
    let n = line
        .strip_prefix("OK ")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("not an answer: {line:?}"))?;
    Ok((n, rest))
}

/// A refusal's bytes.
pub fn refusal(msg: &str) -> Vec<u8> {
    format!("ERR {}\n", msg.replace('\n', " ")).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_answers_round_trip_and_bad_ones_say_why() {
        for r in [
            Request::Info("a b/c.iso".into()),
            Request::Get("x".into(), 7),
        ] {
            let bytes = r.encode();
            assert_eq!(Request::parse(&bytes[..bytes.len() - 1]), Ok(r));
        }
        assert!(Request::parse(b"GET x y")
            .unwrap_err()
            .contains("segment index"));
        assert!(Request::parse(b"PUT x").unwrap_err().contains("unknown"));
        assert!(Request::parse(b"INFO ").is_err());
        let info = Info {
            size: tree::SEGMENT + 1,
            entries: vec![[1; 32], [2; 32]],
        };
        assert_eq!(Info::parse(&info.encode()), Ok(info.clone()));
        let mut short = info.encode();
        short.pop();
        assert!(Info::parse(&short).is_err());
        assert_eq!(
            Info::parse(&refusal("no such file: x")),
            Err("no such file: x".into())
        );
    }
}
