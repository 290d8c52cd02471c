//! One stream of a connection other than its own byte stream: opened with
//! [`Connection::open_stream`] or accepted with [`Connection::accept_stream`].

use crate::connection::{write_error, Connection, Op};
use crate::error::ConnectionError;
use ctp_proto::{ConnectionState, StreamId, StreamKind, WriteError};
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
    service: Option<u64>,
}

impl Stream {
    pub(crate) fn new(conn: Connection, id: StreamId, service: Option<u64>) -> Self {
        Stream { conn, id, service }
    }

    /// The stream's id (bit 0: opened by the responder; bit 1: unidirectional).
    pub fn id(&self) -> StreamId {
        self.id
    }

    /// The connection it belongs to.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The service the stream is for, if its opener named one
    /// ([`Connection::open_stream_for`]): what an accepting application dispatches on, as
    /// on a port.
    pub fn service(&self) -> Option<u64> {
        self.service
    }

    /// Writes all of `data` and finishes the stream with it, waiting for room: a stream
    /// opened, written and finished this way before the next packet leaves travels in that
    /// one packet (CUSP's stream per action). `data` is at most one chunk
    /// ([`ctp_proto::connection::STREAM_CHUNK`] bytes).
    pub async fn write_last(&self, data: &[u8]) -> Result<(), ConnectionError> {
        let id = self.id;
        poll_fn(|cx| {
            self.conn
                .poll_send(cx, |c, now| match c.write_last_on(now, id, data) {
                    Ok(0) if !data.is_empty() => Err(WriteError::Blocked),
                    r => r,
                })
        })
        .await
        .map(|_| ())
    }

    /// Abandons the stream with `code`: what was written and not yet sent is dropped, and
    /// the peer's reads end with [`ConnectionError::StreamReset`] and the code.
    pub fn reset(&self, code: u64) -> Result<(), ConnectionError> {
        let id = self.id;
        match self
            .conn
            .with(None, |c, now, closing| match c.reset_on(now, id, code) {
                Ok(()) => Op::Done(Ok(()), true),
                Err(e) => Op::Done(
                    Err(write_error(e, c.state(), closing).unwrap_or(ConnectionError::Closing)),
                    false,
                ),
            }) {
            Poll::Ready(r) => r,
            Poll::Pending => unreachable!("a reset never waits"),
        }
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
        self.open_stream_with(None, |c| c.open_stream(kind, priority))
    }

    /// Opens a stream as [`Connection::open_stream`] does, for `service`: an id the two
    /// applications agree on, as a port, that the peer reads with [`Stream::service`]. A
    /// request that expects answers names in its data the services its replies should be
    /// opened for (CUSP's reply services).
    pub fn open_stream_for(
        &self,
        kind: StreamKind,
        priority: u8,
        service: u64,
    ) -> Result<Stream, ConnectionError> {
        self.open_stream_with(Some(service), |c| {
            c.open_stream_for(kind, priority, service)
        })
    }

    fn open_stream_with(
        &self,
        service: Option<u64>,
        open: impl FnOnce(&mut ctp_proto::connection::Connection) -> Result<StreamId, WriteError>,
    ) -> Result<Stream, ConnectionError> {
        let id = match self.with(None, |c, _, _| match open(c) {
            Ok(id) => Op::Done(Ok(id), false),
            Err(e) => Op::Done(
                Err(write_error(e, c.state(), false).unwrap_or(ConnectionError::Closing)),
                false,
            ),
        }) {
            Poll::Ready(r) => r?,
            Poll::Pending => unreachable!("opening a stream never waits"),
        };
        Ok(Stream::new(self.clone(), id, service))
    }

    /// Waits for the next stream the peer opened (by sending on it).
    pub async fn accept_stream(&self) -> Result<Stream, ConnectionError> {
        let (id, service) = poll_fn(|cx| {
            self.with(Some(cx), |c, _, _| match c.accept_stream() {
                Some(id) => Op::Done(Ok((id, c.stream_service(id))), false),
                None => match c.state() {
                    ConnectionState::Closed(r) => {
                        Op::Done(Err(ConnectionError::Closed(r.clone())), false)
                    }
                    _ => Op::Wait,
                },
            })
        })
        .await?;
        Ok(Stream::new(self.clone(), id, service))
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
