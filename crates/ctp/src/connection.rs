//! A connection: the async face of one proto connection.

use crate::error::ConnectionError;
use crate::shared::{register, Shared, State};
use bytes::{Buf, Bytes};
use ctp_proto::{
    CloseReason, ConnectionHandle, ConnectionState, ConnectionStats, MicroSet, MsgOptions, Params,
    PerfMon, ReadError, StreamId, WriteError,
};
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connection to a peer: an ordered byte stream ([`AsyncRead`]/[`AsyncWrite`]) and
/// messages, as the negotiated profile provides them.
///
/// Clones share the connection. When the last clone is dropped while the endpoint lives
/// on, the connection is closed gracefully (data already written is still delivered); when
/// every handle of the endpoint is dropped too, the endpoint's driver stops and aborts what
/// is left. Await [`Connection::close`] to know that everything arrived.
#[derive(Clone)]
pub struct Connection {
    inner: Arc<ConnInner>,
}

/// One clone family of a connection; its drop releases the connection.
struct ConnInner {
    shared: Arc<Shared>,
    handle: ConnectionHandle,
    remote: SocketAddr,
}

impl Drop for ConnInner {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        let now = self.shared.now();
        let h = self.handle;
        if let Some(s) = st.slot(h) {
            s.owned = false;
        }
        if st.closed.is_none() {
            if let Some(c) = st.ep.connection_mut(h) {
                c.close(now);
            }
        }
        st.maybe_remove(h);
        st.user_refs = st.user_refs.saturating_sub(1);
        drop(st);
        self.shared.wake_driver();
    }
}

/// What a closed endpoint's or aborted connection's operations fail with, if anything.
fn gate(st: &mut State, h: ConnectionHandle) -> Option<ConnectionError> {
    if let Some(r) = &st.closed {
        return Some(ConnectionError::Closed(r.clone()));
    }
    match st.slot(h) {
        Some(s) => s.aborted.clone().map(ConnectionError::Closed),
        None => Some(gone()),
    }
}

fn gone() -> ConnectionError {
    ConnectionError::Closed(CloseReason::LocalAbort(
        "connection no longer exists".into(),
    ))
}

/// Maps a refused write to what the application sees (`None`: wait for room).
pub(crate) fn write_error(
    e: WriteError,
    state: &ConnectionState,
    closing: bool,
) -> Option<ConnectionError> {
    match e {
        WriteError::Blocked => None,
        WriteError::TooLarge { len, max } => Some(ConnectionError::MessageTooLarge { len, max }),
        WriteError::Finished => Some(ConnectionError::Finished),
        WriteError::BadDependency(why) => Some(ConnectionError::BadDependency(why)),
        WriteError::NoStream(why) => Some(ConnectionError::NoStream(why)),
        WriteError::NotOpen(_) => Some(match state {
            ConnectionState::Closed(r) => ConnectionError::Closed(r.clone()),
            _ if closing => ConnectionError::Closing,
            // Draining after a close the peer or a timer started, or not yet set up.
            _ => ConnectionError::Closing,
        }),
    }
}

impl Connection {
    /// Wraps proto connection `h`; counts a user handle. Call with the state locked.
    pub(crate) fn new(shared: Arc<Shared>, st: &mut State, h: ConnectionHandle) -> Connection {
        let remote = st
            .ep
            .connection(h)
            .map_or(shared.local_addr, |c| c.remote());
        st.slot_entry(h).owned = true;
        st.user_refs += 1;
        Connection {
            inner: Arc::new(ConnInner {
                shared,
                handle: h,
                remote,
            }),
        }
    }

    /// Locks the state and runs `f` on the proto connection (with the time and whether the
    /// application is closing it), unless the endpoint is closed, the connection was
    /// aborted, or it no longer exists. The driver is woken afterwards when `f` reports that
    /// it changed something.
    pub(crate) fn with<T>(
        &self,
        cx: Option<&mut Context<'_>>,
        f: impl FnOnce(&mut ctp_proto::connection::Connection, ctp_proto::Instant, bool) -> Op<T>,
    ) -> Poll<Result<T, ConnectionError>> {
        let shared = &self.inner.shared;
        let h = self.inner.handle;
        let mut guard = shared.lock();
        let st = &mut *guard;
        if let Some(e) = gate(st, h) {
            return Poll::Ready(Err(e));
        }
        let now = shared.now();
        let closing = st.slot(h).is_some_and(|s| s.closing);
        let Some(c) = st.ep.connection_mut(h) else {
            return Poll::Ready(Err(gone()));
        };
        match f(c, now, closing) {
            Op::Done(v, changed) => {
                drop(guard);
                if changed {
                    shared.wake_driver();
                }
                Poll::Ready(v)
            }
            Op::Wait => {
                if let (Some(cx), Some(s)) = (cx, st.slot(h)) {
                    register(&mut s.wakers, cx.waker());
                }
                Poll::Pending
            }
            Op::Watch(v) => {
                if let (Some(cx), Some(s)) = (cx, st.slot(h)) {
                    register(&mut s.wakers, cx.waker());
                }
                Poll::Ready(Ok(v))
            }
        }
    }

    /// Reads bytes of `stream` (0: the connection's own) into `dst`, or registers to be
    /// woken when some arrive.
    fn poll_read_on(
        &self,
        cx: &mut Context<'_>,
        stream: StreamId,
        dst: &mut [u8],
    ) -> Poll<Result<usize, ConnectionError>> {
        self.poll_stream_read(cx, |c, now| c.read_on(now, stream, dst), |&n| n > 0)
    }

    /// The [`AsyncRead`] step of `stream` (the connection's own, 0, or a [`crate::Stream`]).
    pub(crate) fn poll_async_read(
        &self,
        cx: &mut Context<'_>,
        stream: StreamId,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        let dst = buf.initialize_unfilled();
        match self.poll_read_on(cx, stream, dst) {
            Poll::Ready(Ok(n)) => {
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e.into())),
            Poll::Pending => Poll::Pending,
        }
    }

    /// The [`AsyncWrite`] step of `stream`: hands bytes from `src` to the protocol, or
    /// registers to be woken when there is room.
    pub(crate) fn poll_async_write(
        &self,
        cx: &mut Context<'_>,
        stream: StreamId,
        src: &[u8],
    ) -> Poll<io::Result<usize>> {
        if src.is_empty() {
            return Poll::Ready(Ok(0));
        }
        self.poll_write_on(cx, stream, src).map_err(io::Error::from)
    }

    /// Runs one stream read (`read`, whose value `got` says whether it delivered bytes) on
    /// the proto connection, or registers to be woken when bytes arrive. A graceful close
    /// reads as the end of the stream (`T::default()`: nothing).
    pub(crate) fn poll_stream_read<T: Default>(
        &self,
        cx: &mut Context<'_>,
        read: impl FnOnce(
            &mut ctp_proto::connection::Connection,
            ctp_proto::Instant,
        ) -> Result<T, ReadError>,
        got: impl Fn(&T) -> bool,
    ) -> Poll<Result<T, ConnectionError>> {
        self.with(Some(cx), |c, now, _| {
            match read(c, now) {
                Ok(v) => {
                    let changed = got(&v);
                    Op::Done(Ok(v), changed)
                }
                Err(ReadError::Blocked) => Op::Wait,
                // Everything the peer sent was delivered before it closed: end of stream.
                Err(ReadError::Closed(CloseReason::Graceful)) => Op::Done(Ok(T::default()), false),
                Err(ReadError::Closed(r)) => Op::Done(Err(ConnectionError::Closed(r)), false),
                Err(ReadError::Reset(code)) => {
                    Op::Done(Err(ConnectionError::StreamReset(code)), false)
                }
            }
        })
    }

    /// Reads the next received piece of the byte stream without copying it: at most `max`
    /// bytes (not 0), waiting until some are there; `None` at the end of the stream. The
    /// zero-copy form of [`tokio::io::AsyncReadExt::read`].
    pub async fn read_chunk(&self, max: usize) -> Result<Option<Bytes>, ConnectionError> {
        let max = max.max(1);
        let chunk = poll_fn(|cx| {
            self.poll_stream_read(
                cx,
                |c, now| c.stream_read_chunk(now, max),
                |b: &Bytes| !b.is_empty(),
            )
        })
        .await?;
        Ok((!chunk.is_empty()).then_some(chunk))
    }

    fn poll_write_on(
        &self,
        cx: &mut Context<'_>,
        stream: StreamId,
        src: &[u8],
    ) -> Poll<Result<usize, ConnectionError>> {
        self.poll_send(cx, |c, now| c.write_on(now, stream, src))
    }

    /// Runs one send operation (`write`: a stream write or a queued message) on the proto
    /// connection, or registers to be woken when there is room.
    pub(crate) fn poll_send<T>(
        &self,
        cx: &mut Context<'_>,
        write: impl FnOnce(
            &mut ctp_proto::connection::Connection,
            ctp_proto::Instant,
        ) -> Result<T, WriteError>,
    ) -> Poll<Result<T, ConnectionError>> {
        self.with(Some(cx), |c, now, closing| {
            if closing {
                return Op::Done(Err(ConnectionError::Closing), false);
            }
            match write(c, now) {
                Ok(n) => Op::Done(Ok(n), true),
                Err(e) => match write_error(e, c.state(), closing) {
                    None => Op::Wait,
                    Some(e) => Op::Done(Err(e), false),
                },
            }
        })
    }

    /// Reads stream bytes into `dst` (not empty), waiting until some are there; `Ok(0)` is
    /// the end of the stream. The awaitable form of the poll path behind [`AsyncRead`], used by
    /// the file transfers.
    pub(crate) async fn read_some(&self, dst: &mut [u8]) -> Result<usize, ConnectionError> {
        poll_fn(|cx| self.poll_read_on(cx, 0, dst)).await
    }

    /// Writes all of `data` on the byte stream without copying it (the connection keeps
    /// references to it until acknowledged), waiting for room in the send buffer as
    /// needed. The zero-copy form of [`tokio::io::AsyncWriteExt::write_all`].
    pub async fn write_bytes(&self, mut data: Bytes) -> Result<(), ConnectionError> {
        while !data.is_empty() {
            let n =
                poll_fn(|cx| self.poll_send(cx, |c, now| c.stream_write_bytes(now, &data))).await?;
            data.advance(n);
        }
        Ok(())
    }

    /// Hands stream bytes from `src` (not empty) to the protocol, waiting for room in the
    /// send buffer; returns how many it took. The awaitable form of the poll path behind
    /// [`AsyncWrite`], used by the file transfers.
    pub(crate) async fn write_some(&self, src: &[u8]) -> Result<usize, ConnectionError> {
        poll_fn(|cx| self.poll_write_on(cx, 0, src)).await
    }

    /// Ends `stream` (0: the connection's own byte stream).
    pub(crate) fn poll_finish_on(&self, stream: StreamId) -> Poll<Result<(), ConnectionError>> {
        self.with(None, |c, now, closing| match c.finish_on(now, stream) {
            Ok(()) => Op::Done(Ok(()), true),
            Err(e) => Op::Done(
                Err(write_error(e, c.state(), closing).unwrap_or(ConnectionError::Closing)),
                false,
            ),
        })
    }

    /// Sends one message, waiting for room in the send buffer. Messages keep their
    /// boundaries; whether they arrive reliably and in order depends on the profile.
    pub async fn send_msg(&self, msg: Bytes) -> Result<(), ConnectionError> {
        self.queue_msg(|c, now| c.send_msg_after(now, msg.clone(), &[]))
            .await
            .map(|_| ())
    }

    /// Sends one message with per-message options, waiting for room in the send buffer: on
    /// a `udt` connection a time-to-live (an expired, unacknowledged message is dropped with
    /// a drop request instead of retransmitted) and the in-order flag, as UDT's `sendmsg`.
    /// Composed profiles ignore the options (see [`ctp_proto::connection::Connection::send_msg_with`]).
    pub async fn send_msg_with(&self, msg: Bytes, opts: MsgOptions) -> Result<(), ConnectionError> {
        self.queue_msg(|c, now| c.send_msg_with(now, msg.clone(), opts).map(|()| 0))
            .await
            .map(|_| ())
    }

    /// Sends one message that the receiver delivers only after the earlier messages `after`
    /// (ids returned by previous calls) were delivered; returns its id. With the `causal`
    /// microprotocol a message naming no predecessor is delivered as soon as it is complete.
    pub async fn send_msg_after(&self, msg: Bytes, after: &[u64]) -> Result<u64, ConnectionError> {
        self.queue_msg(|c, now| c.send_msg_after(now, msg.clone(), after))
            .await
    }

    /// Sends one urgent (out-of-band) message: with the `urgent` microprotocol in the
    /// profile the receiver delivers it as soon as it is complete, ahead of the ordering.
    pub async fn send_urgent(&self, msg: Bytes) -> Result<(), ConnectionError> {
        self.queue_msg(|c, now| c.send_urgent(now, msg.clone()).map(|()| 0))
            .await
            .map(|_| ())
    }

    /// Queues one message with `send` (which returns its id), waiting for room in the send
    /// buffer; the one wait loop behind every message-sending call.
    async fn queue_msg(
        &self,
        send: impl Fn(
            &mut ctp_proto::connection::Connection,
            ctp_proto::Instant,
        ) -> Result<u64, WriteError>,
    ) -> Result<u64, ConnectionError> {
        poll_fn(|cx| self.poll_send(cx, &send)).await
    }

    /// Receives the next message. Fails with the close reason once the connection ended
    /// (with [`CloseReason::Graceful`] after an orderly close) and no message is left.
    pub async fn recv_msg(&self) -> Result<Bytes, ConnectionError> {
        poll_fn(|cx| {
            self.with(Some(cx), |c, now, _| match c.recv_msg(now) {
                Ok(m) => Op::Done(Ok(m), true),
                Err(ReadError::Blocked) => Op::Wait,
                Err(ReadError::Closed(r)) => Op::Done(Err(ConnectionError::Closed(r)), false),
                Err(ReadError::Reset(code)) => {
                    Op::Done(Err(ConnectionError::StreamReset(code)), false)
                }
            })
        })
        .await
    }

    /// Ends the byte stream: the peer reads end-of-stream after everything written before.
    /// Messages can still be sent.
    pub async fn finish(&self) -> Result<(), ConnectionError> {
        poll_fn(|_| self.poll_finish_on(0)).await
    }

    /// Closes gracefully: everything written is delivered first, then both sides close.
    /// Resolves when the connection has ended: `Ok` for an orderly close, otherwise the
    /// reason it ended some other way.
    pub async fn close(&self) -> Result<(), ConnectionError> {
        {
            let shared = &self.inner.shared;
            let mut st = shared.lock();
            let now = shared.now();
            let h = self.inner.handle;
            if st.closed.is_none() {
                if let Some(s) = st.slot(h) {
                    s.closing = true;
                }
                if let Some(c) = st.ep.connection_mut(h) {
                    c.close(now);
                }
            }
            drop(st);
            shared.wake_driver();
        }
        match self.closed().await {
            CloseReason::Graceful => Ok(()),
            r => Err(ConnectionError::Closed(r)),
        }
    }

    /// Aborts at once: buffered data is discarded and the peer is told `reason`.
    pub fn abort(&self, reason: &str) {
        let shared = &self.inner.shared;
        let mut st = shared.lock();
        let now = shared.now();
        let h = self.inner.handle;
        if st.closed.is_some() {
            return;
        }
        let already = st
            .ep
            .connection(h)
            .is_none_or(|c| matches!(c.state(), ConnectionState::Closed(_)));
        if let Some(c) = st.ep.connection_mut(h) {
            c.abort(now, reason);
        }
        let mut wakers = Vec::new();
        if let Some(s) = st.slot(h) {
            if !already && s.aborted.is_none() {
                s.aborted = Some(CloseReason::LocalAbort(reason.to_string()));
            }
            wakers = std::mem::take(&mut s.wakers);
        }
        drop(st);
        shared.wake_driver();
        wakers.into_iter().for_each(|w| w.wake());
    }

    /// Resolves with the reason once the connection has ended.
    pub async fn closed(&self) -> CloseReason {
        poll_fn(|cx| {
            let shared = &self.inner.shared;
            let h = self.inner.handle;
            let mut st = shared.lock();
            if let Some(r) = st.ep.connection(h).and_then(|c| c.close_reason()) {
                return Poll::Ready(r.clone());
            }
            if let Some(r) = &st.closed {
                return Poll::Ready(r.clone());
            }
            match st.slot(h) {
                Some(s) => {
                    register(&mut s.wakers, cx.waker());
                    Poll::Pending
                }
                None => Poll::Ready(CloseReason::LocalAbort(
                    "connection no longer exists".into(),
                )),
            }
        })
        .await
    }

    /// The reason the connection ended, or `None` while it is open.
    pub fn close_reason(&self) -> Option<CloseReason> {
        let mut st = self.inner.shared.lock();
        let h = self.inner.handle;
        if let Some(r) = st.ep.connection(h).and_then(|c| c.close_reason()) {
            return Some(r.clone());
        }
        st.closed
            .clone()
            .or_else(|| st.slot(h).and_then(|s| s.aborted.clone()))
    }

    /// A snapshot of every counter of this connection.
    pub fn stats(&self) -> ConnectionStats {
        let st = self.inner.shared.lock();
        st.ep
            .connection(self.inner.handle)
            .map(|c| c.stats())
            .unwrap_or_default()
    }

    /// Bytes written on this connection that the peer has not acknowledged yet (queued or
    /// in flight); 0 once the connection is gone. What was written less this is what the
    /// peer has: the measure of a sender's progress. See
    /// [`ctp_proto::connection::Connection::unacked_bytes`].
    pub fn unacked_bytes(&self) -> u64 {
        let st = self.inner.shared.lock();
        st.ep
            .connection(self.inner.handle)
            .map_or(0, |c| c.unacked_bytes())
    }

    /// Every message with a smaller id (as [`Connection::send_msg_after`] returns them) was
    /// acknowledged whole by the peer (with a reliable profile); `None` on the UDT4 wire
    /// or once the connection is gone. See
    /// [`ctp_proto::connection::Connection::messages_done_below`].
    pub fn messages_done_below(&self) -> Option<u64> {
        let st = self.inner.shared.lock();
        st.ep
            .connection(self.inner.handle)
            .and_then(|c| c.messages_done_below())
    }

    /// The performance monitor (UDT's `perfmon(u, &perf, clear)`): UDT's counters as
    /// totals, since the last clearing query and the values of the moment; with `clear`
    /// the next interval starts now. See [`ctp_proto::connection::Connection::perfmon`].
    pub fn perfmon(&self, clear: bool) -> PerfMon {
        let shared = &self.inner.shared;
        let mut st = shared.lock();
        let now = shared.now();
        st.ep
            .connection_mut(self.inner.handle)
            .map(|c| c.perfmon(now, clear))
            .unwrap_or_default()
    }

    /// On a secure channel, the static key the peer proved in the handshake (`None` on a
    /// connection without encryption).
    pub fn peer_key(&self) -> Option<[u8; 32]> {
        let st = self.inner.shared.lock();
        st.ep
            .connection(self.inner.handle)
            .and_then(|c| c.peer_key())
    }

    /// The peer's address.
    pub fn remote_addr(&self) -> SocketAddr {
        self.inner.remote
    }

    /// The microprotocols negotiated for this connection.
    pub fn profile_micros(&self) -> MicroSet {
        let st = self.inner.shared.lock();
        st.ep
            .connection(self.inner.handle)
            .map(|c| c.micros())
            .unwrap_or_default()
    }

    /// Whether the peer ended its byte stream (`finish`) before the end of the stream was
    /// read: a graceful close without it also reads as the end, but the stream may then be
    /// cut short. Always false on the UDT4 wire, which has no end-of-stream mark. See
    /// [`ctp_proto::connection::Connection::peer_finished`].
    pub fn peer_finished(&self) -> bool {
        let st = self.inner.shared.lock();
        st.ep
            .connection(self.inner.handle)
            .is_some_and(|c| c.peer_finished())
    }

    /// The parameters negotiated for this connection (largest message, windows, timeouts).
    pub fn params(&self) -> Params {
        let st = self.inner.shared.lock();
        st.ep
            .connection(self.inner.handle)
            .map(|c| *c.params())
            .unwrap_or_default()
    }

    /// The proto handle (for the endpoint's internal use).
    pub(crate) fn handle(&self) -> ConnectionHandle {
        self.inner.handle
    }
}

/// The result of one attempt at an operation.
pub(crate) enum Op<T> {
    /// Finished with a result; `true` when the driver should run.
    Done(Result<T, ConnectionError>, bool),
    /// Not possible yet; wait for activity on the connection.
    Wait,
    /// A reading that is ready now, with a wake-up on the connection's next activity.
    Watch(T),
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("handle", &self.inner.handle.0)
            .field("remote", &self.inner.remote)
            .finish()
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.poll_async_read(cx, 0, buf)
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_async_write(cx, 0, buf)
    }

    /// Data is handed to the protocol by `poll_write`; there is nothing to flush.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Finishes the byte stream (see [`Connection::finish`]).
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_finish_on(0).map_err(io::Error::from)
    }
}
