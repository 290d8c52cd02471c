//! One stream of a connection other than its own byte stream: opened with
//! [`Connection::open_stream`] or accepted with [`Connection::accept_stream`].

use crate::connection::{write_error, Connection, Op};
use crate::error::ConnectionError;
use ctp_proto::{ConnectionState, StreamId, StreamKind};
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A stream of a connection: an ordered byte stream of its own ([`AsyncRead`] and
/// [`AsyncWrite`]; shutting the writer down finishes it), delivered in order on its own —
/// a stream waiting for a retransmission holds up no other — and sent by its priority.
/// On a bidirectional stream either side writes; on a unidirectional one only its opener.
#[derive(Clone, Debug)]
pub struct Stream {
    conn: Connection,
    id: StreamId,
}

impl Stream {
    pub(crate) fn new(conn: Connection, id: StreamId) -> Self {
        Stream { conn, id }
    }

    /// The stream's id (bit 0: opened by the responder; bit 1: unidirectional).
    pub fn id(&self) -> StreamId {
        self.id
    }

    /// The connection it belongs to.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// Changes the stream's priority (higher is served first).
    pub fn set_priority(&self, priority: u8) -> Result<(), ConnectionError> {
        let id = self.id;
        match self
            .conn
            .with(None, |c, _, closing| match c.set_priority(id, priority) {
                Ok(()) => Op::Done(Ok(()), true),
                Err(e) => Op::Done(
                    Err(write_error(e, c.state(), closing).unwrap_or(ConnectionError::Closing)),
                    false,
                ),
            }) {
            Poll::Ready(r) => r,
            Poll::Pending => unreachable!("a priority change never waits"),
        }
    }
}

/// Streams are opened and accepted on their connection.
impl Connection {
    /// Opens a stream of this side, of `kind` (bidirectional, or written by this side
    /// only), with `priority` (higher is served first, equal priorities take turns): a byte
    /// stream of its own, ordered on its own, that the peer receives with
    /// [`Connection::accept_stream`]. Opening costs no round trip —
    /// the peer learns of the stream with its first data. Needs an ordered, reliable
    /// profile.
    pub fn open_stream(&self, kind: StreamKind, priority: u8) -> Result<Stream, ConnectionError> {
        let id = match self.with(None, |c, _, _| match c.open_stream(kind, priority) {
            Ok(id) => Op::Done(Ok(id), false),
            Err(e) => Op::Done(
                Err(write_error(e, c.state(), false).unwrap_or(ConnectionError::Closing)),
                false,
            ),
        }) {
            Poll::Ready(r) => r?,
            Poll::Pending => unreachable!("opening a stream never waits"),
        };
        Ok(Stream::new(self.clone(), id))
    }

    /// Waits for the next stream the peer opened (by sending on it).
    pub async fn accept_stream(&self) -> Result<Stream, ConnectionError> {
        let id = poll_fn(|cx| {
            self.with(Some(cx), |c, _, _| match c.accept_stream() {
                Some(id) => Op::Done(Ok(id), false),
                None => match c.state() {
                    ConnectionState::Closed(r) => {
                        Op::Done(Err(ConnectionError::Closed(r.clone())), false)
                    }
                    _ => Op::Wait,
                },
            })
        })
        .await?;
        Ok(Stream::new(self.clone(), id))
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.conn.poll_async_read(cx, self.id, buf)
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.conn.poll_async_write(cx, self.id, buf)
    }

    /// Data is handed to the protocol by `poll_write`; there is nothing to flush.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Finishes the stream: the peer reads its end after everything written before.
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.conn.poll_finish_on(self.id).map_err(io::Error::from)
    }
}
