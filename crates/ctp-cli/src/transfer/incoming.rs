//! Reading the peer's half of the byte stream as the framing needs it: whole frames,
//! fixed-size fields, and content in pieces of a bounded size, without copying content.

use super::header::HeaderError;
use super::CHUNK;
use anyhow::{bail, Context, Result};
use bytes::{Buf, Bytes};
use ctp::Connection;

/// The peer's byte stream with what arrived but was not consumed yet.
pub struct Incoming<'a> {
    conn: &'a Connection,
    pending: Bytes,
}

impl<'a> Incoming<'a> {
    /// Reads `conn`'s stream from where it is.
    pub fn new(conn: &'a Connection) -> Self {
        Incoming {
            conn,
            pending: Bytes::new(),
        }
    }

    /// The next piece of the stream, at most `max` bytes (not 0); `None` at its orderly
    /// end, an error when the connection broke before it.
    pub async fn piece(&mut self, max: usize) -> Result<Option<Bytes>> {
        if self.pending.is_empty() {
            match next_chunk(self.conn).await? {
                Some(c) => self.pending = c,
                None => return Ok(None),
            }
        }
        let n = self.pending.len().min(max.max(1));
        Ok(Some(self.pending.split_to(n)))
    }

    /// Exactly `N` bytes; `what` names them when the stream ends first.
    pub async fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        let mut got = 0;
        while got < N {
            let Some(p) = self.piece(N - got).await? else {
                bail!("the stream ended before {what}");
            };
            out[got..got + p.len()].copy_from_slice(&p);
            got += p.len();
        }
        Ok(out)
    }

    /// A frame that `decode` recognises once enough bytes are there (it returns the value
    /// and the bytes it used, or `None` for more); at most `limit` bytes are gathered.
    pub async fn frame<T>(
        &mut self,
        what: &str,
        limit: usize,
        decode: impl Fn(&[u8]) -> Result<Option<(T, usize)>, HeaderError>,
    ) -> Result<T> {
        let mut buf = Vec::new();
        loop {
            if let Some((v, used)) = decode(&buf)? {
                let mut rest = Bytes::from(buf);
                rest.advance(used);
                // What followed the frame is read next, before anything still pending.
                if !self.pending.is_empty() {
                    let mut joined = rest.to_vec();
                    joined.extend_from_slice(&self.pending);
                    rest = Bytes::from(joined);
                }
                self.pending = rest;
                return Ok(v);
            }
            if buf.len() >= limit {
                bail!("{what} is longer than {limit} bytes");
            }
            let Some(p) = self
                .piece(CHUNK)
                .await
                .with_context(|| format!("reading {what}"))?
            else {
                bail!("the stream ended before {what} was complete");
            };
            buf.extend_from_slice(&p);
        }
    }

    /// Everything until the stream's orderly end, at most `limit` bytes.
    pub async fn rest(&mut self, limit: usize) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(p) = self.piece(CHUNK).await? {
            if out.len() + p.len() > limit {
                bail!("the peer sent more than {limit} bytes where a short reply was due");
            }
            out.extend_from_slice(&p);
        }
        Ok(out)
    }

    /// Checks that the stream ends here.
    pub async fn end(&mut self) -> Result<()> {
        if self.piece(1).await?.is_some() {
            bail!("the sender sent more than the manifest announced");
        }
        Ok(())
    }
}

/// The next received piece of `conn`'s stream (at most [`CHUNK`] bytes, not copied):
/// `None` at its orderly end, an error when the connection broke before it.
pub async fn next_chunk(conn: &Connection) -> Result<Option<Bytes>> {
    conn.read_chunk(CHUNK)
        .await
        .context("receiving (the connection broke before an orderly close)")
}
