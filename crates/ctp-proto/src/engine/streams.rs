//! Streams: what the application queued on each stream, the scheduler that picks which
//! stream's data is cut next, and what was delivered on each stream for the application
//! to read.
//!
//! Stream 0 is the connection's default stream: the byte stream and the messages of
//! `stream_write`/`send_msg` ride on it, numbered by the connection's message sequence as
//! before. Any other stream is opened by writing to it — no round trip, and a stream's
//! opening, data and end can share one packet (CUSP's streams, one per action) — and
//! carries a byte stream whose chunks are numbered by the offset of their first byte in
//! the stream; the receiver orders each stream on its own, so a stream waiting for a
//! retransmission holds up no other.
//!
//! A stream that ended (its end was cut, or reset) is *retired* on each side: its state
//! is freed and its id recorded in [`Retired`] — a floor per kind of id and the few ended
//! above it — so a retransmitted or late piece never opens it again, and a connection can
//! carry any number of streams over its life, [`MAX_STREAMS`] at a time.
//!
//! The scheduler serves the highest priority with data queued first and streams of equal
//! priority in turn, one queued chunk (at most [`crate::conn_state::STREAM_CHUNK`] bytes)
//! each; a higher-priority stream that gets data preempts the one being cut at the next
//! segment.

use bytes::Bytes;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Something the application queued for sending.
#[derive(Clone, Debug)]
pub struct Outgoing {
    /// Bytes of the message or stream chunk.
    pub data: Bytes,
    /// Bytes already cut into segments.
    pub cut: usize,
    /// Part of the ordered byte stream rather than a discrete message.
    pub stream: bool,
    /// The byte stream ends after this chunk.
    pub fin: bool,
    /// Message sequence number, assigned when the first piece is cut.
    pub msg: Option<u64>,
    /// Sender timestamp (microseconds), when the profile stamps messages.
    pub sent_us: Option<u64>,
    /// Out of band: may bypass the receiver's ordering.
    pub urgent: bool,
    /// Earlier messages the receiver must deliver first (causal ordering).
    pub deps: Vec<u64>,
    /// The stream it goes on (0: the default stream).
    pub stream_id: StreamId,
    /// On a stream's first chunk, the service the stream is for.
    pub service: Option<u64>,
    /// The stream is abandoned here, with this code (an empty chunk that ends it).
    pub reset: Option<u64>,
    /// The stream's done barrier is watched ([`SendQueue::watch`]): the segments that
    /// carry this chunk count it until they are done.
    pub watched: bool,
}

impl Outgoing {
    /// A message (or stream chunk) not yet cut.
    pub fn new(data: Bytes, stream: bool, fin: bool, sent_us: Option<u64>) -> Self {
        Outgoing {
            data,
            cut: 0,
            stream,
            fin,
            msg: None,
            sent_us,
            urgent: false,
            deps: Vec::new(),
            stream_id: 0,
            service: None,
            reset: None,
            watched: false,
        }
    }
}

/// Identifies a stream of a connection. Bit 0 says who opened it (0: the initiator, 1:
/// the responder), so the two sides never pick the same id; bit 1 is set on a
/// unidirectional stream (only its opener writes); the rest counts the opener's streams of
/// that kind. 0 is the default stream (the initiator's first bidirectional one).
pub type StreamId = u64;

/// Whether a stream carries data both ways or from its opener only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamKind {
    /// Both sides write.
    Bidirectional,
    /// Only the side that opened it writes.
    Unidirectional,
}

/// The id of the `n`th stream of `kind` opened by the initiator (`initiator` true) or the
/// responder.
pub fn stream_id(initiator: bool, kind: StreamKind, n: u64) -> StreamId {
    n << 2 | u64::from(kind == StreamKind::Unidirectional) << 1 | u64::from(!initiator)
}

/// Whether stream `id` was opened by the initiator.
pub fn opened_by_initiator(id: StreamId) -> bool {
    id & 1 == 0
}

/// The kind of stream `id`.
pub fn kind_of(id: StreamId) -> StreamKind {
    if id & 2 == 0 {
        StreamKind::Bidirectional
    } else {
        StreamKind::Unidirectional
    }
}

/// The barrier every stream other than 0 starts with, on both sides (CUSP's minimum
/// window: 16 Ethernet MSS): what its sender may send before the receiver says more.
pub const MIN_BARRIER: u64 = 16 * 1460;

/// A stream's receive window in round trips of what the application read in one (CUSP
/// has 2; data that waits a round trip or two behind a lost packet needs more).
const WINDOW_RTTS: u64 = 4;

/// Streams open at once at most on one connection, by either side (each costs its state,
/// see [`StreamTx`] and [`StreamRx`]); streams that ended do not count.
pub const MAX_STREAMS: usize = 65_536;

/// The streams that ended on one side of a connection: for each of the four kinds of id
/// (opener, direction) a floor below which every stream ended, and the ended ones above
/// it. Streams of one kind are opened in order and mostly end in order, so this stays a
/// few numbers; a stream that never ends holds the floor and the ones ending after it
/// wait above it.
#[derive(Debug, Default)]
pub struct Retired {
    floor: [u64; 4],
    above: std::collections::BTreeSet<StreamId>,
}

impl Retired {
    /// Whether stream `id` ended.
    pub fn contains(&self, id: StreamId) -> bool {
        id >> 2 < self.floor[(id & 3) as usize] || self.above.contains(&id)
    }

    /// Records that stream `id` ended.
    pub fn insert(&mut self, id: StreamId) {
        if self.contains(id) {
            return;
        }
        let class = id & 3;
        let floor = &mut self.floor[class as usize];
        if id >> 2 != *floor {
            self.above.insert(id);
            return;
        }
        *floor += 1;
        while self.above.remove(&(*floor << 2 | class)) {
            *floor += 1;
        }
    }

    /// Ended streams recorded one by one (above their floor).
    pub fn scattered(&self) -> usize {
        self.above.len()
    }
}

/// The send side of one stream.
#[derive(Debug)]
pub struct StreamTx {
    /// The stream.
    pub id: StreamId,
    /// Higher goes first.
    pub priority: u8,
    /// Chunks queued, oldest first.
    queue: VecDeque<Outgoing>,
    /// The offset in the stream of the next byte queued (streams other than 0 number
    /// their chunks by it).
    pub next_offset: u64,
    /// The application finished the stream.
    pub finished: bool,
    /// The offset below which the peer lets this stream send (its barrier).
    pub barrier: u64,
    /// The stream has data queued but waits at its barrier: it left the ready queues.
    blocked: bool,
    /// Its chunks are counted by the segments that carry them, for its done barrier
    /// ([`crate::engine::State::stream_done_below`]).
    pub watched: bool,
}

impl StreamTx {
    /// The offset of the oldest chunk still queued (whole or partly cut).
    pub fn first_queued_offset(&self) -> Option<u64> {
        self.queue.front()?.msg
    }
}

/// What the application queued on every stream, and the order it is cut in.
#[derive(Debug, Default)]
pub struct SendQueue {
    /// Stream states by slot; slot 0 is stream 0 once anything was queued on it. The
    /// slot of a retired stream is reused.
    streams: Vec<StreamTx>,
    slot_of: HashMap<StreamId, u32>,
    free: Vec<u32>,
    /// The service of each stream opened for one, until its first chunk takes it (kept
    /// apart: most streams name none, and an idle stream stays small).
    services: HashMap<StreamId, u64>,
    /// Streams whose end was cut.
    retired: Retired,
    /// Streams waiting at their barrier, in turn for a `STREAM_BLOCKED` reminder.
    blocked: VecDeque<StreamId>,
    /// Streams that reached their barrier since the last packet: each owes its peer a
    /// `STREAM_BLOCKED`.
    newly_blocked: Vec<StreamId>,
    /// When the last `STREAM_BLOCKED` reminder left (microseconds).
    reminded_us: u64,
    /// Streams with data queued, by priority (highest first), in turn within one. A
    /// priority's queue stays when it empties (at most 256 of them), so a queue that
    /// drains after every message allocates nothing.
    ready: BTreeMap<core::cmp::Reverse<u8>, VecDeque<u32>>,
    /// The slot whose chunk is being cut: it stays first until that chunk is cut whole,
    /// unless a higher priority gets data.
    head: Option<u32>,
    /// Chunks queued on all streams.
    len: usize,
}

impl SendQueue {
    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether a chunk could be cut now: queued on a stream its barrier lets send (a
    /// stream waiting at its barrier has data queued but none to cut until the peer
    /// raises it).
    pub fn has_ready(&self) -> bool {
        self.head.is_some_and(|s| !self.at_barrier(s))
            || self.ready.values().flatten().any(|&s| !self.at_barrier(s))
    }

    /// Chunks queued on all streams.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Streams with send state (open, or ended with data still to cut).
    pub fn stream_count(&self) -> usize {
        self.slot_of.len()
    }

    /// Whether stream `id`'s end was cut: it takes no more data.
    pub fn is_retired(&self, id: StreamId) -> bool {
        self.retired.contains(id)
    }

    fn slot(&mut self, id: StreamId, priority: u8) -> u32 {
        if let Some(&s) = self.slot_of.get(&id) {
            return s;
        }
        let st = StreamTx {
            id,
            priority,
            queue: VecDeque::new(),
            next_offset: 0,
            finished: false,
            barrier: MIN_BARRIER,
            blocked: false,
            watched: false,
        };
        let s = match self.free.pop() {
            Some(s) => {
                self.streams[s as usize] = st;
                s
            }
            None => {
                self.streams.push(st);
                (self.streams.len() - 1) as u32
            }
        };
        self.slot_of.insert(id, s);
        s
    }

    /// Opens stream `id` for `service` (its first chunk names it to the peer).
    pub fn open_for(&mut self, id: StreamId, priority: u8, service: u64) {
        self.slot(id, priority);
        self.services.insert(id, service);
    }

    /// Abandons stream `id`: drops what is queued on it and not yet cut and queues its
    /// reset with `code` (an empty chunk that ends it); returns the bytes dropped.
    pub fn reset(&mut self, id: StreamId, code: u64) -> usize {
        let s = self.slot(id, 0);
        let st = &mut self.streams[s as usize];
        let was_blocked = std::mem::take(&mut st.blocked);
        let was_ready = !st.queue.is_empty() && !was_blocked;
        let mut dropped = 0;
        let mut at = st.next_offset;
        // A chunk partly cut stays (its first pieces left, so the rest follows them);
        // the others go, and the reset takes the offset after what stays.
        let keep = usize::from(st.queue.front().is_some_and(|o| o.cut > 0));
        for o in st.queue.drain(keep..) {
            dropped += o.data.len() - o.cut;
            at -= o.data.len() as u64;
            self.len -= 1;
        }
        st.next_offset = at;
        st.finished = true;
        // What stays of a chunk already partly sent, and the reset, go whatever the
        // barrier: the reset frees the receiver of the stream.
        st.barrier = u64::MAX;
        let priority = st.priority;
        if was_ready && st.queue.is_empty() {
            self.unready(s, priority);
        }
        let mut out = Outgoing::new(Bytes::new(), true, true, None);
        out.stream_id = id;
        out.reset = Some(code);
        self.push_back(out);
        if was_blocked {
            self.blocked.retain(|&b| b != id);
            if self.streams[s as usize].queue.len() > 1 {
                // The part left of a chunk kept it out of the ready queues.
                self.make_ready(s);
            }
        }
        dropped
    }

    /// The send state of stream `id`, if it has any.
    pub fn stream(&self, id: StreamId) -> Option<&StreamTx> {
        self.slot_of.get(&id).map(|&s| &self.streams[s as usize])
    }

    /// The id of the oldest message still queued (whole or partly cut) on stream 0.
    pub fn first_queued_msg(&self) -> Option<u64> {
        self.stream(0)?.queue.front()?.msg
    }

    /// Has the segments count stream `id`'s chunks from now on, for its done barrier (the
    /// stream is opened if it was not).
    pub fn watch(&mut self, id: StreamId) {
        let s = self.slot(id, 0);
        self.streams[s as usize].watched = true;
    }

    /// Opens stream `id` with `priority` (or changes the priority of an open one).
    pub fn open(&mut self, id: StreamId, priority: u8) {
        let s = self.slot(id, priority);
        let st = &mut self.streams[s as usize];
        if st.priority != priority {
            let was_ready = !st.queue.is_empty();
            let old = st.priority;
            st.priority = priority;
            if was_ready {
                self.unready(s, old);
                self.make_ready(s);
            }
        }
    }

    /// Marks stream `id` finished by the application.
    pub fn finish(&mut self, id: StreamId) {
        let s = self.slot(id, 0);
        self.streams[s as usize].finished = true;
    }

    /// Queues a chunk on its stream (`out.stream_id`); stream 0 at priority 0 unless it
    /// was opened with another. A chunk of a stream other than 0 is numbered here, by its
    /// stream (stream 0's are numbered by the connection before).
    pub fn push_back(&mut self, mut out: Outgoing) {
        let s = self.slot(out.stream_id, 0);
        let st = &mut self.streams[s as usize];
        if out.stream_id != 0 {
            out.watched = st.watched;
            out.msg = Some(st.next_offset);
            st.next_offset += out.data.len() as u64;
            if out.msg == Some(0) {
                out.service = self.services.remove(&out.stream_id);
            }
        }
        st.queue.push_back(out);
        self.len += 1;
        if st.queue.len() == 1 {
            self.make_ready(s);
        }
    }

    fn make_ready(&mut self, s: u32) {
        let p = self.streams[s as usize].priority;
        self.ready
            .entry(core::cmp::Reverse(p))
            .or_default()
            .push_back(s);
        // A higher priority preempts the chunk being cut (at the next segment).
        if self
            .head
            .is_some_and(|h| self.streams[h as usize].priority < p)
        {
            self.head = None;
        }
    }

    fn unready(&mut self, s: u32, priority: u8) {
        if let Some(q) = self.ready.get_mut(&core::cmp::Reverse(priority)) {
            q.retain(|&x| x != s);
        }
        if self.head == Some(s) {
            self.head = None;
        }
    }

    /// The slot to cut from: the chunk being cut, else the first stream of the highest
    /// priority with data that its barrier lets send; a stream found at its barrier
    /// leaves the ready queues until the barrier rises.
    fn head_slot(&mut self) -> Option<u32> {
        loop {
            if self.head.is_none() {
                self.head = self.ready.values().find_map(|q| q.front().copied());
            }
            let s = self.head?;
            if !self.at_barrier(s) {
                return Some(s);
            }
            let st = &mut self.streams[s as usize];
            st.blocked = true;
            let (id, priority) = (st.id, st.priority);
            self.unready(s, priority);
            self.blocked.push_back(id);
            self.newly_blocked.push(id);
        }
    }

    /// Whether slot `s`'s next chunk has bytes and starts at or beyond its barrier. A
    /// chunk that starts below goes whole: the receiver delivers whole chunks, so one cut
    /// at the barrier would wait for a barrier that only its delivery can move. The
    /// receiver may thus hold up to a chunk ([`crate::conn_state::STREAM_CHUNK`]) beyond
    /// the barrier of each stream; the connection's credit bounds them all.
    fn at_barrier(&self, s: u32) -> bool {
        let st = &self.streams[s as usize];
        st.id != 0
            && st.queue.front().is_some_and(|o| {
                o.cut == 0 && !o.data.is_empty() && o.msg.unwrap_or(0) >= st.barrier
            })
    }

    /// Raises stream `id`'s barrier to `offset` (a `STREAM_BARRIER` from the peer);
    /// true when that lets a stream waiting at its barrier send again.
    pub fn raise_barrier(&mut self, id: StreamId, offset: u64) -> bool {
        let Some(&s) = self.slot_of.get(&id) else {
            return false;
        };
        let st = &mut self.streams[s as usize];
        if offset <= st.barrier {
            return false;
        }
        st.barrier = offset;
        if !st.blocked || self.at_barrier(s) {
            return false;
        }
        self.streams[s as usize].blocked = false;
        self.blocked.retain(|&b| b != id);
        self.make_ready(s);
        true
    }

    /// Streams waiting at their barrier.
    pub fn blocked_count(&self) -> usize {
        self.blocked.len()
    }

    /// Whether a `STREAM_BLOCKED` is owed now: a stream reached its barrier since the last
    /// packet, or one still waits and no reminder left for `interval_us`.
    pub fn owes_blocked(&self, now_us: u64, interval_us: u64) -> bool {
        !self.newly_blocked.is_empty()
            || (!self.blocked.is_empty() && now_us >= self.reminded_us + interval_us)
    }

    /// When the next `STREAM_BLOCKED` reminder is due (microseconds), while a stream
    /// waits at its barrier: the connection must wake then even if nothing else is
    /// pending, or a lost `STREAM_BARRIER` would hold the stream until some other timer.
    pub fn reminder_due(&self, interval_us: u64) -> Option<u64> {
        (!self.blocked.is_empty()).then(|| self.reminded_us.saturating_add(interval_us))
    }

    /// The `STREAM_BLOCKED` frames owed now, as (stream, barrier), at most `max`: every
    /// stream newly at its barrier, else one waiting stream in turn once per `interval_us`
    /// (a reminder that repairs a lost `STREAM_BARRIER`).
    pub fn take_blocked(
        &mut self,
        now_us: u64,
        interval_us: u64,
        max: usize,
    ) -> Vec<(StreamId, u64)> {
        let barrier_of = |q: &Self, id: StreamId| {
            q.slot_of
                .get(&id)
                .map(|&s| &q.streams[s as usize])
                .filter(|st| st.blocked)
                .map(|st| (id, st.barrier))
        };
        let mut out = Vec::new();
        if !self.newly_blocked.is_empty() {
            let fresh = std::mem::take(&mut self.newly_blocked);
            out.extend(
                fresh
                    .into_iter()
                    .filter_map(|id| barrier_of(self, id))
                    .take(max),
            );
        } else if !self.blocked.is_empty() && now_us >= self.reminded_us + interval_us {
            if let Some(id) = self.blocked.pop_front() {
                out.extend(barrier_of(self, id));
                self.blocked.push_back(id);
            }
        }
        if !out.is_empty() {
            self.reminded_us = now_us;
        }
        out
    }

    /// The chunk to cut next.
    pub fn front_mut(&mut self) -> Option<&mut Outgoing> {
        let s = self.head_slot()?;
        self.streams[s as usize].queue.front_mut()
    }

    /// Removes the chunk [`SendQueue::front_mut`] gave, cut whole: its stream goes behind
    /// the others of its priority.
    pub fn pop_front(&mut self) -> Option<Outgoing> {
        let s = self.head_slot()?;
        self.head = None;
        let st = &mut self.streams[s as usize];
        let out = st.queue.pop_front()?;
        self.len -= 1;
        let mut ended = None;
        if st.queue.is_empty() && st.id != 0 {
            // An idle stream keeps no buffer (stream 0, the bulk path, keeps its own).
            st.queue = VecDeque::new();
            ended = out.fin.then_some(st.id);
        }
        let (priority, more) = (st.priority, !st.queue.is_empty());
        if let Some(q) = self.ready.get_mut(&core::cmp::Reverse(priority)) {
            if q.front() == Some(&s) {
                q.pop_front();
                if more {
                    q.push_back(s);
                }
            }
        }
        if let Some(id) = ended {
            // Its end is cut: the stream is retired and its slot freed.
            self.slot_of.remove(&id);
            self.free.push(s);
            self.retired.insert(id);
        }
        Some(out)
    }
}

/// The receive side of one stream other than 0: delivered chunks the application has not
/// read, whether the peer finished it, and its barrier (CUSP's per-stream flow control:
/// the sender may send below it; it moves with what the application reads, by a window
/// that follows the application's pace).
#[derive(Debug)]
pub struct StreamRx {
    /// Delivered chunks, oldest first.
    pub chunks: VecDeque<Bytes>,
    /// The peer finished the stream and everything before its end was delivered.
    pub fin: bool,
    /// A `STREAM_BARRIER` is owed (the stream is in [`RecvStreams`]' list of them).
    owes: bool,
    /// Bytes the application read.
    read: u64,
    /// The barrier last granted.
    granted: u64,
    /// The window: how far ahead of `read` the barrier goes.
    window: u32,
    /// Bytes read since the last window estimate (saturating).
    since_sample: u32,
    /// When the last window estimate was made (milliseconds, wrapping; 0: never).
    sample_ms: u32,
}

impl Default for StreamRx {
    fn default() -> Self {
        StreamRx {
            chunks: VecDeque::new(),
            fin: false,
            owes: false,
            read: 0,
            granted: MIN_BARRIER,
            window: MIN_BARRIER as u32,
            since_sample: 0,
            sample_ms: 0,
        }
    }
}

impl StreamRx {
    /// After the application read: the barrier the stream should have now, if it is a
    /// quarter of the minimum window beyond the granted one (CUSP's policy). Once per
    /// round trip the window becomes [`WINDOW_RTTS`] times what the application read in
    /// one, at least [`MIN_BARRIER`] and at most `cap`.
    fn regrant(&mut self, n: usize, now_us: u64, rtt_us: u64, cap: u64) -> bool {
        self.since_sample = self
            .since_sample
            .saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
        let now_ms = ((now_us / 1_000) as u32).max(1);
        let elapsed_ms = now_ms.wrapping_sub(self.sample_ms);
        let rtt_ms = (rtt_us / 1_000).max(1);
        if self.sample_ms == 0 {
            self.sample_ms = now_ms;
            self.since_sample = 0;
        } else if u64::from(elapsed_ms) >= rtt_ms {
            let per_rtt = u64::from(self.since_sample) * rtt_ms / u64::from(elapsed_ms);
            let cap = cap.clamp(MIN_BARRIER, u64::from(u32::MAX));
            self.window = per_rtt.saturating_mul(WINDOW_RTTS).clamp(MIN_BARRIER, cap) as u32;
            self.sample_ms = now_ms;
            self.since_sample = 0;
        }
        let target = self.read + u64::from(self.window);
        if target < self.granted + MIN_BARRIER / 4 {
            return false;
        }
        self.granted = target;
        true
    }
}

/// What was delivered on the streams other than 0.
#[derive(Debug, Default)]
pub struct RecvStreams {
    streams: HashMap<StreamId, StreamRx>,
    /// Streams that got data the application has not been told of, oldest first.
    fresh: VecDeque<StreamId>,
    /// Chunks held in all streams.
    pub chunk_count: usize,
    /// Streams whose end (or reset) the application read: they keep no state.
    read_out: Retired,
    /// The service each stream was opened for, of those that named one (kept apart: most
    /// name none, and an idle stream stays small).
    services: HashMap<StreamId, u64>,
    /// Streams the peer reset, and the code, until the application reads it.
    resets: HashMap<StreamId, u64>,
    /// Streams that owe their peer a `STREAM_BARRIER`, oldest first.
    owed: VecDeque<StreamId>,
}

/// What one read of a stream found.
#[derive(Debug, PartialEq, Eq)]
pub enum StreamRead<T> {
    /// Data (`n` bytes), and whether the end follows it.
    Data(T, usize, bool),
    /// The end: the stream is finished and everything was read.
    End,
    /// The peer reset the stream with this code.
    Reset(u64),
}

impl RecvStreams {
    /// Adds a delivered chunk of stream `id`; `fin` when it ends the stream, `service` on
    /// its first chunk, `reset` when the peer abandoned it. Returns the bytes a reset
    /// dropped (delivered, never read).
    pub fn deliver(
        &mut self,
        id: StreamId,
        data: Bytes,
        fin: bool,
        service: Option<u64>,
        reset: Option<u64>,
    ) -> usize {
        let is_new = !self.streams.contains_key(&id);
        let st = self.streams.entry(id).or_default();
        if let Some(service) = service {
            self.services.insert(id, service);
        }
        let mut dropped = 0;
        if let Some(code) = reset {
            dropped = st.chunks.iter().map(Bytes::len).sum();
            self.chunk_count -= st.chunks.len();
            st.chunks = VecDeque::new();
            self.resets.insert(id, code);
        } else if !data.is_empty() {
            st.chunks.push_back(data);
            self.chunk_count += 1;
        }
        st.fin |= fin;
        if is_new {
            self.fresh.push_back(id);
        }
        dropped
    }

    /// Whether the peer ever sent on stream `id` (it may have ended since).
    pub fn contains(&self, id: StreamId) -> bool {
        self.streams.contains_key(&id) || self.read_out.contains(id)
    }

    /// The next stream the peer opened that the application was not told of.
    pub fn accept(&mut self) -> Option<StreamId> {
        self.fresh.pop_front()
    }

    /// The receive state of stream `id`.
    pub fn get_mut(&mut self, id: StreamId) -> Option<&mut StreamRx> {
        self.streams.get_mut(&id)
    }

    /// The service stream `id` is for, as its opener named it.
    pub fn service(&self, id: StreamId) -> Option<u64> {
        self.services.get(&id).copied()
    }

    /// Whether a `STREAM_BARRIER` is owed.
    pub fn owes_barriers(&self) -> bool {
        !self.owed.is_empty()
    }

    /// The `STREAM_BARRIER` frames owed, as (stream, barrier), at most `max`.
    pub fn take_barriers(&mut self, max: usize) -> Vec<(StreamId, u64)> {
        let mut out = Vec::new();
        while out.len() < max {
            let Some(id) = self.owed.pop_front() else {
                break;
            };
            if let Some(st) = self.streams.get_mut(&id).filter(|st| st.owes) {
                st.owes = false;
                out.push((id, st.granted));
            }
        }
        out
    }

    /// The peer's sender of stream `id` waits at `barrier`: if a larger one was granted,
    /// its update was lost and is owed again.
    pub fn on_blocked(&mut self, id: StreamId, barrier: u64) {
        if let Some(st) = self.streams.get_mut(&id) {
            if st.granted > barrier && !st.owes {
                st.owes = true;
                self.owed.push_back(id);
            }
        }
    }

    /// Takes chunks of stream `id` with `take` (which returns what it took and how many
    /// bytes); `None` when nothing was delivered on it yet. The stream's state is freed
    /// once its end (or reset) was read. What was read moves the stream's barrier (see
    /// [`StreamRx`]); `now_us`, `rtt_us` and `cap` (the largest window) are for that.
    pub fn take<T>(
        &mut self,
        id: StreamId,
        take: impl FnOnce(&mut VecDeque<Bytes>) -> (T, usize),
        (now_us, rtt_us, cap): (u64, u64, u64),
    ) -> Option<StreamRead<T>> {
        let Some(st) = self.streams.get_mut(&id) else {
            return self.read_out.contains(id).then_some(StreamRead::End);
        };
        if let Some(code) = self.resets.remove(&id) {
            self.forget(id);
            return Some(StreamRead::Reset(code));
        }
        let before = st.chunks.len();
        let (got, n) = take(&mut st.chunks);
        self.chunk_count -= before - st.chunks.len();
        if st.chunks.is_empty() {
            // An idle stream keeps no buffer.
            st.chunks = VecDeque::new();
        }
        let end = st.chunks.is_empty() && st.fin;
        if end && n == 0 {
            self.forget(id);
            return Some(StreamRead::End);
        }
        st.read += n as u64;
        if n > 0 && !st.fin && st.regrant(n, now_us, rtt_us, cap) && !st.owes {
            st.owes = true;
            self.owed.push_back(id);
        }
        Some(StreamRead::Data(got, n, end))
    }

    /// Frees the state of stream `id`, whose end the application read.
    fn forget(&mut self, id: StreamId) {
        self.streams.remove(&id);
        self.services.remove(&id);
        self.read_out.insert(id);
    }

    /// Streams with receive state.
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    /// True when no stream has receive state.
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(stream: StreamId, tag: u8) -> Outgoing {
        let mut o = Outgoing::new(Bytes::from(vec![tag]), true, false, None);
        o.stream_id = stream;
        o
    }

    fn order(q: &mut SendQueue) -> Vec<u8> {
        let mut v = Vec::new();
        while let Some(o) = q.front_mut() {
            v.push(o.data[0]);
            q.pop_front();
        }
        v
    }

    #[test]
    fn the_highest_priority_goes_first_and_equals_take_turns() {
        let mut q = SendQueue::default();
        q.open(2, 1);
        q.open(4, 1);
        q.open(6, 9);
        for t in [10, 11, 12] {
            q.push_back(chunk(2, t));
        }
        for t in [20, 21] {
            q.push_back(chunk(4, t));
        }
        q.push_back(chunk(0, 0));
        q.push_back(chunk(6, 60));
        assert_eq!(q.len(), 7);
        assert_eq!(order(&mut q), vec![60, 10, 20, 11, 21, 12, 0]);
        assert!(q.is_empty());
    }

    #[test]
    fn a_higher_priority_preempts_the_chunk_being_cut() {
        let mut q = SendQueue::default();
        q.push_back(chunk(0, 1));
        assert_eq!(q.front_mut().map(|o| o.data[0]), Some(1));
        q.open(2, 5);
        q.push_back(chunk(2, 2));
        assert_eq!(q.front_mut().map(|o| o.data[0]), Some(2));
        assert_eq!(order(&mut q), vec![2, 1]);
    }

    #[test]
    fn ids_say_who_opened_a_stream_and_which_way_it_goes() {
        use StreamKind::*;
        assert_eq!(stream_id(true, Bidirectional, 0), 0, "the default stream");
        let ids = [
            stream_id(true, Bidirectional, 1),
            stream_id(true, Unidirectional, 0),
            stream_id(false, Bidirectional, 0),
            stream_id(false, Unidirectional, 3),
        ];
        assert_eq!(ids, [4, 2, 1, 15]);
        let opener: Vec<bool> = ids.iter().map(|&i| opened_by_initiator(i)).collect();
        assert_eq!(opener, [true, true, false, false]);
        let kinds: Vec<StreamKind> = ids.iter().map(|&i| kind_of(i)).collect();
        assert_eq!(
            kinds,
            [Bidirectional, Unidirectional, Bidirectional, Unidirectional]
        );
    }

    #[test]
    fn retired_streams_fold_into_a_floor_as_they_end_in_order() {
        let mut r = Retired::default();
        let uni = |n: u64| stream_id(false, StreamKind::Unidirectional, n);
        for n in [1, 2, 4] {
            r.insert(uni(n));
        }
        assert_eq!(r.scattered(), 3, "stream 0 still open holds the floor");
        assert!(r.contains(uni(2)) && !r.contains(uni(0)) && !r.contains(uni(3)));
        r.insert(uni(0));
        assert_eq!(
            r.scattered(),
            1,
            "0, 1 and 2 fold into the floor; 4 waits for 3"
        );
        r.insert(uni(3));
        assert_eq!(r.scattered(), 0);
        assert!((0..5).all(|n| r.contains(uni(n))) && !r.contains(uni(5)));
        assert!(
            !r.contains(stream_id(true, StreamKind::Unidirectional, 0)),
            "another kind"
        );
    }

    #[test]
    fn a_reset_drops_what_was_not_cut_and_ends_the_stream_after_what_was() {
        let mut q = SendQueue::default();
        q.open(2, 0);
        let mut first = Outgoing::new(Bytes::from_static(&[1, 1, 1, 1]), true, false, None);
        first.stream_id = 2;
        q.push_back(first);
        for t in [2, 3] {
            q.push_back(chunk(2, t));
        }
        // Half the first chunk left: the rest of it follows; the two behind it go.
        q.front_mut().expect("queued").cut = 2;
        let dropped = q.reset(2, 9);
        assert_eq!(dropped, 2);
        let cut: Vec<(u8, Option<u64>, Option<u64>)> = std::iter::from_fn(|| {
            q.front_mut()?;
            let o = q.pop_front()?;
            Some((o.data.first().copied().unwrap_or(0), o.msg, o.reset))
        })
        .collect();
        assert_eq!(cut, vec![(1, Some(0), None), (0, Some(4), Some(9))]);
        assert!(q.is_retired(2), "its end was cut");
        assert_eq!(q.stream_count(), 0, "its state is freed");
    }

    #[test]
    fn an_idle_stream_is_small() {
        // Without heap: an empty VecDeque and HashMap entry allocate nothing per stream.
        let send = core::mem::size_of::<StreamTx>() + 2 * core::mem::size_of::<u64>();
        let recv = core::mem::size_of::<StreamRx>() + core::mem::size_of::<StreamId>();
        assert!(send + recv < 256, "{send} + {recv} bytes");
    }
}
