//! The ctp native wire format: packet headers, frames (the encoded form of message
//! attributes) and the CRC32C integrity trailer.
//!
//! Parsing follows smoltcp's discipline: every read goes through a bounds-checked [`Reader`],
//! so malformed input yields a [`WireError`], never a panic.

pub mod coded;
pub mod frame;
pub mod header;
pub mod sizes;
pub mod truncated;
pub mod varint;

/// Why a packet could not be parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The packet ended before a field did.
    #[error("packet truncated")]
    Truncated,
    /// The integrity trailer does not match the contents.
    #[error("integrity check failed")]
    BadChecksum,
    /// A header or frame carried a value this implementation does not know.
    #[error("unknown {0} type {1:#x}")]
    Unknown(&'static str, u64),
    /// A version this implementation does not speak.
    #[error("unsupported version {0:#x}")]
    UnsupportedVersion(u32),
    /// A length or count larger than allowed.
    #[error("{0} too large")]
    TooLarge(&'static str),
    /// A field's value is inconsistent with the rest of the packet.
    #[error("invalid {0}")]
    Invalid(&'static str),
}

/// A cursor over a byte slice whose reads are bounds-checked.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Starts reading `buf` from its beginning.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    /// True when every byte has been consumed.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// The next byte, without reading it.
    pub fn peek(&self) -> Option<&u8> {
        self.buf.first()
    }

    /// Reads one byte.
    pub fn u8(&mut self) -> Result<u8, WireError> {
        let (&b, rest) = self.buf.split_first().ok_or(WireError::Truncated)?;
        self.buf = rest;
        Ok(b)
    }

    /// Reads a big-endian u32.
    pub fn u32(&mut self) -> Result<u32, WireError> {
        let b = self.bytes(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Reads a big-endian u64.
    pub fn u64(&mut self) -> Result<u64, WireError> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }

    /// Reads a varint.
    pub fn varint(&mut self) -> Result<u64, WireError> {
        varint::get(self)
    }

    /// Reads `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if n > self.buf.len() {
            return Err(WireError::Truncated);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    /// Reads a varint length followed by that many bytes, refusing lengths above `max`.
    pub fn length_prefixed(
        &mut self,
        max: usize,
        what: &'static str,
    ) -> Result<&'a [u8], WireError> {
        let n = self.varint()?;
        if n > max as u64 {
            return Err(WireError::TooLarge(what));
        }
        self.bytes(n as usize)
    }

    /// Consumes and returns everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        core::mem::take(&mut self.buf)
    }
}
