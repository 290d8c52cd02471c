//! The sender's segment store: a slab of segments with generation-checked handles and a pool
//! of payload buffers, so that the steady-state data path allocates nothing.

use super::hold::{HoldRegistry, Holds};
use bytes::Bytes;
use std::collections::{BTreeMap, VecDeque};

/// Initial capacity of a segment's payload buffer.
const HEADER_ROOM: usize = 32;

/// A handle to a segment. Stale handles (to a freed and reused slot) are detected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SegId {
    idx: u32,
    gen: u32,
}

/// One unit of transmission: a sequence number and encoded message pieces.
#[derive(Debug, Default)]
pub struct Segment {
    /// Segment sequence number, kept across retransmissions.
    pub seq: u64,
    /// Encoded pieces (the body of a DATA frame), up to [`Segment::tail`], with
    /// [`Segment::inner`] inserted.
    pub payload: Vec<u8>,
    /// The data of an earlier piece referenced instead of copied (the end of one stream
    /// chunk, before the next chunk's piece): on the wire it goes at `payload[at]`.
    pub inner: Option<(usize, Bytes)>,
    /// The data of the last piece when it runs to the end of the segment, referenced from
    /// the application's buffer instead of copied; on the wire it follows `payload`.
    pub tail: Bytes,
    /// Hold bits not yet set.
    pub holds: Holds,
    /// Times the segment was put in a packet.
    pub transmissions: u32,
    /// The peer acknowledged a packet carrying it.
    pub acked: bool,
    /// The payload is an inflated length and an LZ4 block of the pieces (sent as `DATA_Z`).
    pub compressed: bool,
    /// The oldest of the connection's own messages (stream 0) with a piece in it, while
    /// the segment is not done ([`SegmentStore::done_below`]).
    first_msg: Option<u64>,
    /// The chunks of watched streams (stream, chunk offset) with a piece in it, while the
    /// segment is not done ([`SegmentStore::oldest_open_chunk`]); empty (and unallocated)
    /// unless a stream is watched.
    chunks: Vec<(u64, u64)>,
    gen: u32,
    live: bool,
}

impl Segment {
    /// Bytes of the DATA frame's body: `payload` with `inner`, then `tail`.
    pub fn body_len(&self) -> usize {
        self.payload.len() + self.inner.as_ref().map_or(0, |(_, b)| b.len()) + self.tail.len()
    }

    /// Appends the DATA frame's body to `out`: `payload` with `inner` in place, then
    /// `tail`.
    pub fn put_body(&self, out: &mut Vec<u8>) {
        match &self.inner {
            Some((at, b)) => {
                out.extend_from_slice(&self.payload[..*at]);
                out.extend_from_slice(b);
                out.extend_from_slice(&self.payload[*at..]);
            }
            None => out.extend_from_slice(&self.payload),
        }
        out.extend_from_slice(&self.tail);
    }

    /// Moves the referenced data into `payload`, for a microprotocol that needs the body
    /// in one piece (an erasure code, a compressor).
    pub fn flatten_body(&mut self) {
        if let Some((at, b)) = self.inner.take() {
            self.payload.splice(at..at, b.iter().copied());
        }
        if !self.tail.is_empty() {
            self.payload.extend_from_slice(&self.tail);
            self.tail = Bytes::new();
        }
    }
}

/// Slab of live segments plus the queue of segments whose send barrier is open.
#[derive(Debug, Default)]
pub struct SegmentStore {
    slots: Vec<Segment>,
    free: Vec<u32>,
    pool: Vec<Vec<u8>>,
    /// Segments whose send bits are all set, in release order.
    pub sendable: VecDeque<SegId>,
    live: usize,
    /// Live segments never put in a packet.
    unsent: usize,
    limit: usize,
    /// Segments not done yet, counted by the oldest stream-0 message they hold a piece of.
    open_msgs: BTreeMap<u64, u32>,
    /// Per (watched stream, chunk offset): segments not done holding a piece of it.
    open_chunks: BTreeMap<(u64, u64), u32>,
}

impl SegmentStore {
    /// A store holding at most `limit` live segments.
    pub fn new(limit: usize) -> Self {
        SegmentStore {
            limit: limit.max(1),
            ..Default::default()
        }
    }

    /// Live segments.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Bytes of the live segments the peer has not acknowledged (their DATA frames'
    /// bodies); a walk over the slots, for occasional reports, not per packet.
    pub fn unacked_bytes(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.live && !s.acked)
            .map(Segment::body_len)
            .sum()
    }

    /// Live segments that were never put in a packet (cut, waiting for the window, the
    /// pacer or their turn).
    pub fn unsent(&self) -> usize {
        self.unsent
    }

    /// Counts a transmission of the segment behind `id`: the segment, and whether this was
    /// its first (it then no longer waits to be sent).
    pub fn transmit(&mut self, id: SegId) -> Option<(&mut Segment, bool)> {
        let s = live_slot(&mut self.slots, id)?;
        s.transmissions += 1;
        let first = s.transmissions == 1;
        if first {
            self.unsent -= 1;
        }
        Some((s, first))
    }

    /// Records that segment `id` holds a piece of stream-0 message `msg` (called for each
    /// such piece as the segment is cut; the oldest counts).
    pub fn holds_msg(&mut self, id: SegId, msg: u64) {
        let Some(s) = live_slot(&mut self.slots, id) else {
            return;
        };
        match s.first_msg {
            Some(m) if m <= msg => {}
            old => {
                s.first_msg = Some(msg);
                if let Some(m) = old {
                    release_msg(&mut self.open_msgs, m);
                }
                *self.open_msgs.entry(msg).or_default() += 1;
            }
        }
    }

    /// The segment behind `id` passed its done barrier: its messages no longer wait for it.
    pub fn done(&mut self, id: SegId) {
        if let Some(s) = live_slot(&mut self.slots, id) {
            if let Some(m) = s.first_msg.take() {
                release_msg(&mut self.open_msgs, m);
            }
            for c in s.chunks.drain(..) {
                release_msg(&mut self.open_chunks, c);
            }
        }
    }

    /// Records that segment `id` holds a piece of the chunk at `offset` of watched stream
    /// `stream` (called once per piece as the segment is cut).
    pub fn holds_chunk(&mut self, id: SegId, stream: u64, offset: u64) {
        let Some(s) = live_slot(&mut self.slots, id) else {
            return;
        };
        if !s.chunks.contains(&(stream, offset)) {
            s.chunks.push((stream, offset));
            *self.open_chunks.entry((stream, offset)).or_default() += 1;
        }
    }

    /// The offset of the oldest chunk of watched stream `stream` that still has a piece
    /// in a segment not done.
    pub fn oldest_open_chunk(&self, stream: u64) -> Option<u64> {
        self.open_chunks
            .range((stream, 0)..=(stream, u64::MAX))
            .next()
            .map(|(&(_, o), _)| o)
    }

    /// The oldest stream-0 message that still has a piece in a segment not done (`None`:
    /// no segment holds one).
    pub fn oldest_open_msg(&self) -> Option<u64> {
        self.open_msgs.keys().next().copied()
    }

    /// True when no further segment may be allocated.
    pub fn is_full(&self) -> bool {
        self.live >= self.limit
    }

    /// Allocates a segment with fresh hold bits; `None` when the store is full.
    pub fn alloc(&mut self, seq: u64, reg: &HoldRegistry) -> Option<SegId> {
        if self.is_full() {
            return None;
        }
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Segment::default());
                (self.slots.len() - 1) as u32
            }
        };
        // Room for a few piece headers from the start: bulk segments hold only headers
        // (their data is the tail), which must not grow the buffer piece by piece.
        let payload = self
            .pool
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(HEADER_ROOM));
        let s = &mut self.slots[idx as usize];
        s.gen = s.gen.wrapping_add(1);
        s.live = true;
        s.seq = seq;
        s.payload = payload;
        s.payload.clear();
        s.inner = None;
        s.tail = Bytes::new();
        s.holds = Holds::new(reg);
        s.transmissions = 0;
        s.acked = false;
        s.compressed = false;
        s.first_msg = None;
        s.chunks.clear();
        self.live += 1;
        self.unsent += 1;
        Some(SegId { idx, gen: s.gen })
    }

    /// The segment behind `id`, if it is still live.
    pub fn get(&self, id: SegId) -> Option<&Segment> {
        self.slots
            .get(id.idx as usize)
            .filter(|s| s.live && s.gen == id.gen)
    }

    /// Mutable access to the segment behind `id`, if it is still live.
    pub fn get_mut(&mut self, id: SegId) -> Option<&mut Segment> {
        live_slot(&mut self.slots, id)
    }

    /// Frees a segment and keeps its buffer for reuse (a segment freed before it was done
    /// — its stream reset, the connection aborted — holds no message back any more).
    pub fn free(&mut self, id: SegId) {
        if let Some(s) = live_slot(&mut self.slots, id) {
            s.live = false;
            if let Some(m) = s.first_msg.take() {
                release_msg(&mut self.open_msgs, m);
            }
            for c in s.chunks.drain(..) {
                release_msg(&mut self.open_chunks, c);
            }
            let buf = std::mem::take(&mut s.payload);
            // Lets go of the application's buffer at once (a writer may be waiting to reuse it).
            s.inner = None;
            s.tail = Bytes::new();
            let never_sent = s.transmissions == 0;
            self.pool.push(buf);
            self.free.push(id.idx);
            self.live -= 1;
            if never_sent {
                self.unsent -= 1;
            }
        }
    }
}

/// Takes one segment off message `msg`'s count.
fn release_msg<K: Ord>(open: &mut BTreeMap<K, u32>, msg: K) {
    if let Some(n) = open.get_mut(&msg) {
        *n -= 1;
        if *n == 0 {
            open.remove(&msg);
        }
    }
}

/// The slot behind `id` if it still holds that segment (borrowing only the slots, so that
/// the store's counters stay at hand).
fn live_slot(slots: &mut [Segment], id: SegId) -> Option<&mut Segment> {
    slots
        .get_mut(id.idx as usize)
        .filter(|s| s.live && s.gen == id.gen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_handles_are_rejected_and_limit_holds() {
        let reg = HoldRegistry::default();
        let mut st = SegmentStore::new(2);
        let a = st.alloc(1, &reg).unwrap();
        let b = st.alloc(2, &reg).unwrap();
        assert!(st.alloc(3, &reg).is_none());
        st.free(a);
        let c = st.alloc(3, &reg).unwrap();
        assert!(
            st.get(a).is_none(),
            "a stale handle must not reach the reused slot"
        );
        assert_eq!(st.get(c).unwrap().seq, 3);
        assert_eq!(st.get(b).unwrap().seq, 2);
        st.free(a); // double free through a stale handle is harmless
        assert_eq!(st.live(), 2);
    }

    #[test]
    fn the_oldest_open_message_follows_segments_done_in_any_order() {
        let reg = HoldRegistry::default();
        let mut st = SegmentStore::new(8);
        let a = st.alloc(1, &reg).unwrap();
        st.holds_msg(a, 4);
        st.holds_msg(a, 5); // a later piece in the same segment changes nothing
        let b = st.alloc(2, &reg).unwrap();
        st.holds_msg(b, 5);
        let c = st.alloc(3, &reg).unwrap();
        st.holds_msg(c, 7);
        assert_eq!(st.oldest_open_msg(), Some(4));
        st.done(b);
        assert_eq!(st.oldest_open_msg(), Some(4), "a later segment done first");
        st.done(a);
        st.done(a); // once only
        assert_eq!(st.oldest_open_msg(), Some(7));
        st.free(c); // freed before it was done (a reset)
        assert_eq!(st.oldest_open_msg(), None);
    }
}
