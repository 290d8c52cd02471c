//! File ranges over a connection's byte stream: UDT4's `sendfile`/`recvfile` with offsets.
//!
//! `sendfile(ifs, offset, size, block)` sends `size` bytes of a file starting at `offset`
//! and `recvfile(ofs, offset, size, block)` writes the next `size` bytes of the stream into
//! a file at `offset`; both advance `offset` by what was transferred. Here the file is any
//! seekable async reader or writer (`tokio::fs::File`, `std::io::Cursor`, …), read and
//! written in blocks of at most [`FILE_BLOCK`] bytes, and the bytes go through the same
//! stream path as [`tokio::io::AsyncWriteExt::write_all`] and
//! [`tokio::io::AsyncReadExt::read`] on the [`Connection`], so every profile with a byte
//! stream (`udt` and the composed reliable ones) carries them.

use crate::connection::Connection;
use crate::error::FileError;
use std::io::{self, SeekFrom};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncSeek, AsyncSeekExt, AsyncWrite, AsyncWriteExt};

/// Largest block read from or written to the file at a time, bytes (UDT4's default block is
/// 7,280,000 bytes; a smaller one keeps the memory of many parallel transfers low and still
/// amortises the file system calls).
pub const FILE_BLOCK: usize = 1 << 20;

/// The stream ended before `size` bytes arrived, or the connection failed, while a block
/// was being filled.
enum Stop {
    Ended,
    Failed(FileError),
}

impl Connection {
    /// Sends `size` bytes of `file` starting at `*offset` on the byte stream, as UDT4's
    /// `sendfile(ifs, offset, size)`; returns the bytes sent (`size` on success) and leaves
    /// the file positioned after them.
    ///
    /// `*offset` advances by every byte the connection accepted, also when an error stops
    /// the transfer partway or the future is dropped, so a caller can resume from it. As
    /// with UDT4 and [`tokio::io::AsyncWriteExt::write_all`], "sent" means handed to the
    /// connection's send buffer; await [`Connection::close`] (or an answer from the peer) to
    /// know that it arrived. The file is read in blocks of at most [`FILE_BLOCK`] bytes.
    ///
    /// Errors: [`FileError::OffsetPastEnd`] or [`FileError::RangePastEnd`] when the file
    /// does not hold the range (checked first: nothing is sent, the offset and the file
    /// position are unchanged); [`FileError::Connection`] when the connection fails;
    /// [`FileError::Io`] when the file cannot be read or shrinks while being sent.
    pub async fn send_file<F>(
        &self,
        file: &mut F,
        offset: &mut u64,
        size: u64,
    ) -> Result<u64, FileError>
    where
        F: AsyncRead + AsyncSeek + Unpin + ?Sized,
    {
        let pos = file.stream_position().await?;
        let len = file.seek(SeekFrom::End(0)).await?;
        let bad = if *offset > len {
            Some(FileError::OffsetPastEnd {
                offset: *offset,
                len,
            })
        } else if size > len - *offset {
            Some(FileError::RangePastEnd {
                offset: *offset,
                size,
                len,
            })
        } else {
            None
        };
        if let Some(e) = bad {
            file.seek(SeekFrom::Start(pos)).await?;
            return Err(e);
        }
        file.seek(SeekFrom::Start(*offset)).await?;
        let mut buf = vec![0u8; block_len(size)];
        let mut done = 0u64;
        while done < size {
            let want = block_len(size - done).min(buf.len());
            let n = file.read(&mut buf[..want]).await?;
            if n == 0 {
                return Err(FileError::Io(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "the file ended at {} while being sent ({done} of {size} bytes sent)",
                        *offset
                    ),
                )));
            }
            let mut sent = 0;
            while sent < n {
                let k = self.write_some(&buf[sent..n]).await?;
                sent += k;
                done += k as u64;
                *offset += k as u64;
            }
        }
        Ok(done)
    }

    /// Receives the next `size` bytes of the byte stream into `file` at `*offset`, as
    /// UDT4's `recvfile(ofs, offset, size)`; returns the bytes written (`size` on success)
    /// and leaves the file positioned after them.
    ///
    /// The file is neither truncated nor required to be large enough: bytes are written at
    /// the offset (past the end the file grows, as a `pwrite` would), so several ranges,
    /// received in any order, can fill one file. Data is written in blocks of at most
    /// [`FILE_BLOCK`] bytes, each flushed before `*offset` advances by it, so on an error
    /// `*offset` is exactly where the written bytes end. Exactly `size` bytes are taken
    /// from the stream; what follows stays there for the next read.
    ///
    /// Errors: [`FileError::StreamEnded`] when the peer finished the stream or closed
    /// before `size` bytes arrived (what did arrive is written first);
    /// [`FileError::Connection`] when the connection failed otherwise (likewise);
    /// [`FileError::Io`] when the file cannot be written (the block being written is lost
    /// to the stream). Dropping the future loses the block being filled: the stream has
    /// moved past it but `*offset` has not.
    pub async fn recv_file<F>(
        &self,
        file: &mut F,
        offset: &mut u64,
        size: u64,
    ) -> Result<u64, FileError>
    where
        F: AsyncWrite + AsyncSeek + Unpin + ?Sized,
    {
        if size == 0 {
            return Ok(0);
        }
        file.seek(SeekFrom::Start(*offset)).await?;
        let mut buf = vec![0u8; block_len(size)];
        let mut done = 0u64;
        while done < size {
            let want = block_len(size - done).min(buf.len());
            let mut filled = 0;
            let mut stop = None;
            while filled < want {
                match self.read_some(&mut buf[filled..want]).await {
                    Ok(0) => {
                        stop = Some(Stop::Ended);
                        break;
                    }
                    Ok(n) => filled += n,
                    Err(e) => {
                        stop = Some(Stop::Failed(e.into()));
                        break;
                    }
                }
            }
            let mut written = 0;
            while written < filled {
                let k = file.write(&buf[written..filled]).await?;
                if k == 0 {
                    return Err(FileError::Io(io::ErrorKind::WriteZero.into()));
                }
                // Buffered writers (tokio's `File`) report failures on flush.
                file.flush().await?;
                written += k;
                done += k as u64;
                *offset += k as u64;
            }
            match stop {
                None => {}
                Some(Stop::Ended) => return Err(FileError::StreamEnded { got: done, size }),
                Some(Stop::Failed(e)) => return Err(e),
            }
        }
        Ok(done)
    }
}

/// The block to use for `remaining` bytes: at most [`FILE_BLOCK`].
fn block_len(remaining: u64) -> usize {
    remaining.min(FILE_BLOCK as u64) as usize
}
