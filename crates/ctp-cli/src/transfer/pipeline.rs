//! Read-ahead and write-behind: a file's disk I/O and its BLAKE3 hashing on a thread of
//! their own, beside the connection, in bounded memory.
//!
//! Through tokio's file API every block crossed two copies and a hop to the blocking pool
//! (tokio reads into a buffer of its own, then copies out; a `BufWriter` copies in, then
//! tokio copies again), and the hashing ran on the task that also fed the connection. Here
//! a thread reads straight into the block that the connection then sends (no copy in user
//! space), or writes the connection's received pieces straight from their buffers
//! (`writev`), and hashes them on its way: the protocol's thread only moves references.
//! At most [`DEPTH`] blocks wait between the thread and the connection.

use bytes::Bytes;
use std::fs::File;
use std::io::{self, IoSlice, Read, Write};
use std::thread::JoinHandle;
use tokio::sync::mpsc;

/// Blocks waiting between the disk thread and the connection, each way.
pub const DEPTH: usize = 8;

/// Bytes a write-behind thread gathers into one `writev`.
const WRITE_BATCH: usize = 1 << 20;

/// A BLAKE3 digest.
pub type Digest = [u8; 32];

/// Reads a file ahead of the connection, in blocks, hashing what it reads.
pub struct ReadAhead {
    blocks: mpsc::Receiver<io::Result<Bytes>>,
    thread: Option<JoinHandle<Digest>>,
}

impl ReadAhead {
    /// Starts reading `file` from its current position, `block` bytes at a time, until
    /// its end or `limit` bytes, adding what it reads to `hasher` (which may hold what came
    /// before, such as the part of a file a receiver already has).
    pub fn start(
        mut file: File,
        block: usize,
        limit: u64,
        mut hasher: blake3::Hasher,
    ) -> io::Result<ReadAhead> {
        let block = block.max(1);
        let (tx, blocks) = mpsc::channel(DEPTH);
        let thread = std::thread::Builder::new()
            .name("ctp-read".into())
            .spawn(move || {
                let mut left = limit;
                while left > 0 {
                    let want = left.min(block as u64) as usize;
                    let r = read_block(&mut file, want);
                    if let Ok(b) = &r {
                        if b.is_empty() {
                            break;
                        }
                        hasher.update(b);
                        left -= b.len() as u64;
                    }
                    let failed = r.is_err();
                    if tx.blocking_send(r).is_err() || failed {
                        break;
                    }
                }
                *hasher.finalize().as_bytes()
            })?;
        Ok(ReadAhead {
            blocks,
            thread: Some(thread),
        })
    }

    /// The next block (never empty), `None` at the end, or the read error that ended it.
    pub async fn next(&mut self) -> Option<io::Result<Bytes>> {
        self.blocks.recv().await
    }

    /// The BLAKE3 digest of what the hasher held and every byte returned by
    /// [`ReadAhead::next`], once it returned `None`.
    pub async fn digest(mut self) -> io::Result<Digest> {
        let thread = self.thread.take().expect("joined once");
        tokio::task::spawn_blocking(move || thread.join())
            .await
            .map_err(io::Error::other)?
            .map_err(|_| io::Error::other("the read-ahead thread panicked"))
    }
}

/// Reads up to `want` bytes (fewer only at the end of the file) into a new block. The
/// block is not zeroed first: `read_to_end` reads into its spare capacity (retrying on
/// `Interrupted`), and the limit stops it at `want` without another system call.
fn read_block(file: &mut File, want: usize) -> io::Result<Bytes> {
    let mut buf = Vec::with_capacity(want);
    file.take(want as u64).read_to_end(&mut buf)?;
    Ok(Bytes::from(buf))
}

/// Writes the pieces of a received stream behind the connection, hashing them.
pub struct WriteBehind {
    pieces: Option<mpsc::Sender<Bytes>>,
    thread: Option<JoinHandle<io::Result<(File, Digest)>>>,
}

impl WriteBehind {
    /// Starts a thread that writes to `file` at its current position, adding what it
    /// writes to `hasher` (which may hold what the file already had).
    pub fn start(mut file: File, mut hasher: blake3::Hasher) -> io::Result<WriteBehind> {
        let (tx, mut rx) = mpsc::channel::<Bytes>(DEPTH * 16);
        let thread = std::thread::Builder::new()
            .name("ctp-write".into())
            .spawn(move || {
                let mut batch: Vec<Bytes> = Vec::new();
                while let Some(first) = rx.blocking_recv() {
                    batch.push(first);
                    let mut bytes = batch[0].len();
                    while bytes < WRITE_BATCH {
                        match rx.try_recv() {
                            Ok(p) => {
                                bytes += p.len();
                                batch.push(p);
                            }
                            Err(_) => break,
                        }
                    }
                    for p in &batch {
                        hasher.update(p);
                    }
                    write_all_vectored(&mut file, &batch)?;
                    batch.clear();
                }
                Ok((file, *hasher.finalize().as_bytes()))
            })?;
        Ok(WriteBehind {
            pieces: Some(tx),
            thread: Some(thread),
        })
    }

    /// Queues `piece` to be written. Fails when the thread stopped on a write error:
    /// [`WriteBehind::finish`] then returns that error.
    pub async fn write(&mut self, piece: Bytes) -> Result<(), Stopped> {
        match &self.pieces {
            Some(tx) if !piece.is_empty() => tx.send(piece).await.map_err(|_| Stopped),
            Some(_) => Ok(()),
            None => Err(Stopped),
        }
    }

    /// Waits for every queued piece to be written; returns the file and the BLAKE3 digest
    /// of what the hasher held and everything written, or the write error that stopped the
    /// thread.
    pub async fn finish(mut self) -> io::Result<(File, Digest)> {
        self.pieces = None;
        let thread = self.thread.take().expect("joined once");
        tokio::task::spawn_blocking(move || thread.join())
            .await
            .map_err(io::Error::other)?
            .map_err(|_| io::Error::other("the write-behind thread panicked"))?
    }
}

/// The write-behind thread stopped (on a write error, which `finish` returns).
#[derive(Debug)]
pub struct Stopped;

/// Writes every byte of `pieces`, in order, with as few `writev` calls as the kernel allows.
fn write_all_vectored(file: &mut File, pieces: &[Bytes]) -> io::Result<()> {
    let (mut i, mut off) = (0, 0);
    while i < pieces.len() {
        let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(pieces.len() - i);
        slices.push(IoSlice::new(&pieces[i][off..]));
        slices.extend(pieces[i + 1..].iter().map(|p| IoSlice::new(p)));
        let mut n = match file.write_vectored(&slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        while i < pieces.len() && n >= pieces[i].len() - off {
            n -= pieces[i].len() - off;
            i += 1;
            off = 0;
        }
        off += n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Seek;

    fn data(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 + i / 7) as u8).collect()
    }

    fn temp_file(content: &[u8]) -> File {
        let mut f = tempfile::tempfile().expect("a temporary file");
        f.write_all(content).expect("written");
        f.rewind().expect("rewound");
        f
    }

    #[tokio::test]
    async fn read_ahead_returns_the_file_in_blocks_and_its_digest() {
        let content = data(3 * 1000 + 17);
        let mut r = ReadAhead::start(temp_file(&content), 1000, u64::MAX, blake3::Hasher::new())
            .expect("started");
        let mut got = Vec::new();
        let mut sizes = Vec::new();
        while let Some(b) = r.next().await {
            let b = b.expect("read");
            sizes.push(b.len());
            got.extend_from_slice(&b);
        }
        assert_eq!(got, content);
        assert_eq!(sizes, [1000, 1000, 1000, 17]);
        assert_eq!(
            r.digest().await.unwrap(),
            *blake3::hash(&content).as_bytes()
        );
    }

    #[tokio::test]
    async fn read_ahead_stops_at_the_limit() {
        let content = data(5000);
        // The hasher already holds a prefix (what a receiver had): the digest covers both.
        let mut seeded = blake3::Hasher::new();
        seeded.update(b"prefix");
        let mut r = ReadAhead::start(temp_file(&content), 4096, 4500, seeded).expect("started");
        let mut got = Vec::new();
        while let Some(b) = r.next().await {
            got.extend_from_slice(&b.unwrap());
        }
        assert_eq!(got, content[..4500]);
        let whole = [&b"prefix"[..], &got].concat();
        assert_eq!(r.digest().await.unwrap(), *blake3::hash(&whole).as_bytes());
    }

    #[tokio::test]
    async fn write_behind_writes_every_piece_in_order_and_hashes_them() {
        let content = data(3 << 20);
        let mut w = WriteBehind::start(tempfile::tempfile().unwrap(), blake3::Hasher::new())
            .expect("started");
        // Pieces of every size from 1 byte up, as the connection hands them over.
        let mut at = 0;
        let mut size = 1;
        while at < content.len() {
            let end = (at + size).min(content.len());
            w.write(Bytes::copy_from_slice(&content[at..end]))
                .await
                .expect("written");
            at = end;
            size = size * 3 % 70_001 + 1;
        }
        let (mut f, digest) = w.finish().await.expect("finished");
        assert_eq!(digest, *blake3::hash(&content).as_bytes());
        f.rewind().unwrap();
        let mut back = Vec::new();
        f.read_to_end(&mut back).unwrap();
        assert_eq!(back, content);
    }

    #[tokio::test]
    async fn a_write_error_stops_the_writer_and_is_returned() {
        // A file opened read-only cannot be written: EBADF.
        let path = tempfile::NamedTempFile::new().unwrap();
        let f = File::open(path.path()).unwrap();
        let mut w = WriteBehind::start(f, blake3::Hasher::new()).expect("started");
        for _ in 0..3 {
            let _ = w.write(Bytes::from_static(b"data")).await;
        }
        let e = w.finish().await.expect_err("the write failed");
        assert_eq!(e.raw_os_error(), Some(9), "{e}");
    }
}
