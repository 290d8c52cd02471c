//! The composed connection core: the microprotocols a profile chose, bound to the events
//! they handle, and the two packet paths through them (a received packet validated, then its
//! frames dispatched; a packet built from the frame writers and one sendable segment). It
//! sits above the engine's framework (`crate::engine`: events, hold bits, session state,
//! the handler context) and the microprotocol catalogue (`crate::micro`), which both build on
//! that framework alone.

use crate::engine::admission::Admission;
use crate::engine::event::{Event, EventKind, OwnedEvents, PacketInfo, EVENT_KINDS};
use crate::engine::session::CloseReason;
use crate::engine::streams::{Outgoing, StreamRead};
use crate::engine::{
    BorrowedRing, Cx, FrameWriter, Microprotocol, SetupError, State, MAX_HANDLERS,
};
use crate::micro::AnyMicro;
use crate::packet::{ShortPacket, NOSTATE_LEN};
use crate::protection::PacketProtection;
use crate::wire::frame::{CompressedFrame, DataFrame, Frame};
use crate::wire::header::ConnectionId;
use crate::wire::{varint, Reader, WireError};
use bytes::Bytes;
use ctp_cc::time::Instant;
use std::collections::VecDeque;

/// What a received packet carried that the connection (not a microprotocol) handles.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Received {
    /// A CLOSE frame: code and reason.
    pub close: Option<(u64, String)>,
    /// A PATH_CHALLENGE's token: the peer validates the path it came over.
    pub challenge: Option<[u8; 8]>,
    /// A PATH_RESPONSE's token: the peer answered a challenge.
    pub response: Option<[u8; 8]>,
    /// It carries a frame other than path validation and padding: a packet of this kind
    /// from a new address shows the peer moved there (RFC 9000 §9.2).
    pub non_probing: bool,
}

#[derive(Clone, Copy, Default)]
struct Binding {
    ids: [u8; MAX_HANDLERS],
    n: u8,
}

impl Binding {
    fn ids(&self) -> &[u8] {
        &self.ids[..self.n as usize]
    }
}

/// A composed connection core: its microprotocols, binding tables and shared state.
pub struct Engine {
    micros: Vec<AnyMicro>,
    bindings: [Binding; EVENT_KINDS],
    writers: Binding,
    /// The microprotocol that decodes compressed segments, if one was composed.
    decoder: Option<u8>,
    /// Shared state: microprotocols write it through their handler context; everyone else
    /// reads it through [`Engine::state`] and changes it through the engine's operations.
    st: State,
    owned: OwnedEvents,
    /// Path-validation frames owed to the peer: a challenge and a response token.
    path_frames: [Option<[u8; 8]>; 2],
}

impl Engine {
    /// Builds the binding tables for `micros` (already set up against `st`).
    pub fn new(micros: Vec<AnyMicro>, st: State) -> Result<Self, SetupError> {
        let mut bindings = [Binding::default(); EVENT_KINDS];
        let mut writers = Binding::default();
        let decoder = micros
            .iter()
            .position(Microprotocol::decodes_segments)
            .map(|i| i as u8);
        for (i, m) in micros.iter().enumerate() {
            for &k in m.bindings() {
                let b = &mut bindings[k as usize];
                if b.n as usize == MAX_HANDLERS {
                    return Err(SetupError::Bindings(k));
                }
                b.ids[b.n as usize] = i as u8;
                b.n += 1;
            }
            if m.writes_frames() && (writers.n as usize) < MAX_HANDLERS {
                writers.ids[writers.n as usize] = i as u8;
                writers.n += 1;
            }
        }
        Ok(Engine {
            micros,
            bindings,
            writers,
            decoder,
            st,
            // Grows to what bursts need; an idle connection keeps a few slots.
            owned: OwnedEvents::with_capacity(8),
            path_frames: [None; 2],
        })
    }

    /// The shared state, to read (microprotocols write it through their handler context,
    /// the connection through the operations below).
    pub fn state(&self) -> &State {
        &self.st
    }

    /// Owes the peer a `PATH_CHALLENGE` (`response` false) or `PATH_RESPONSE` with `token`
    /// in the next packet (a later one of the same kind replaces it).
    pub fn owe_path_frame(&mut self, response: bool, token: [u8; 8]) {
        self.path_frames[usize::from(response)] = Some(token);
    }

    /// Tells the microprotocols which routes the next packet may take (a connection over
    /// several paths sets them before every packet: a route required is for that packet
    /// only); the route a microprotocol chooses is cleared.
    pub fn set_routes(&mut self, routes: crate::engine::route::Routes) {
        self.st.routes = routes;
    }

    /// Moves the connection to another path: `vars` become the variables packets leave
    /// with, and the previous path's are returned.
    pub fn switch_path(
        &mut self,
        vars: crate::engine::path::PathVars,
    ) -> crate::engine::path::PathVars {
        core::mem::replace(&mut self.st.path, vars)
    }

    /// The shared state, to write: tests set up situations with it.
    #[cfg(test)]
    pub(crate) fn state_mut(&mut self) -> &mut State {
        &mut self.st
    }

    /// The id the next queued message gets.
    pub fn next_msg_id(&self) -> u64 {
        self.st.session.next_msg_seq
    }

    /// Puts an entry in the application's send queue, numbered now (message ids follow the
    /// order of queueing: the connection's for stream 0, the stream's own for another), and
    /// counts its bytes as queued; returns its id on stream 0. The caller raises
    /// [`Event::UserData`] once it queued what it had.
    pub fn queue(&mut self, mut out: Outgoing) -> u64 {
        let id = self.st.session.next_msg_seq;
        if out.stream_id == 0 {
            self.st.session.next_msg_seq += 1;
            out.msg = Some(id);
        }
        self.st.app.tx_bytes += out.data.len();
        self.st.app.tx.push_back(out);
        id
    }

    /// Takes received stream bytes with `take` (which returns what it took and how many
    /// bytes); when it took some, the microprotocols learn that the application read.
    pub fn read_stream<T>(
        &mut self,
        now: Instant,
        take: impl FnOnce(&mut VecDeque<Bytes>) -> (T, usize),
    ) -> (T, usize) {
        let app = &mut self.st.app;
        let (got, n) = take(&mut app.rx_stream);
        app.rx_bytes -= n;
        if n > 0 {
            self.dispatch(now, Event::UserRead);
        }
        (got, n)
    }

    /// Opens stream `id` with `priority`, or changes an open stream's priority.
    pub fn open_stream(&mut self, id: crate::engine::streams::StreamId, priority: u8) {
        self.st.app.tx.open(id, priority);
    }

    /// Has stream `id`'s chunks counted for its done barrier ([`State::stream_done_below`]).
    pub fn watch_stream(&mut self, id: crate::engine::streams::StreamId) {
        self.st.app.tx.watch(id);
    }

    /// Marks stream `id` finished (its end is queued).
    pub fn finish_stream(&mut self, id: crate::engine::streams::StreamId) {
        self.st.app.tx.finish(id);
    }

    /// Whether the peer sent data on stream `id`.
    pub fn peer_opened(&self, id: crate::engine::streams::StreamId) -> bool {
        self.st.app.rx_streams.contains(id)
    }

    /// The next stream the peer opened that the application was not told of.
    pub fn accept_stream(&mut self) -> Option<crate::engine::streams::StreamId> {
        self.st.app.rx_streams.accept()
    }

    /// Takes received data of stream `id` (not 0) with `take`, as
    /// [`Engine::read_stream`]; `None` when nothing was delivered on it yet.
    pub fn read_stream_on<T>(
        &mut self,
        now: Instant,
        id: crate::engine::streams::StreamId,
        take: impl FnOnce(&mut VecDeque<Bytes>) -> (T, usize),
    ) -> Option<StreamRead<T>> {
        let pace = (
            now.as_micros(),
            self.st.path.srtt_us,
            self.st.app.rx_limit as u64 / 2,
        );
        let app = &mut self.st.app;
        let read = app.rx_streams.take(id, take, pace)?;
        if let StreamRead::Data(_, n, _) = read {
            app.rx_bytes -= n;
            if n > 0 {
                self.dispatch(now, Event::UserRead);
            }
        }
        Some(read)
    }

    /// Streams other than 0 with send or receive state here.
    pub fn streams_with_state(&self) -> usize {
        let app = &self.st.app;
        let tx = app.tx.stream_count() - usize::from(app.tx.stream(0).is_some());
        tx + app.rx_streams.len()
    }

    /// The service stream `id` is for, as the peer named it when it opened the stream.
    pub fn stream_service(&self, id: crate::engine::streams::StreamId) -> Option<u64> {
        self.st.app.rx_streams.service(id)
    }

    /// Opens stream `id` with `priority` for `service` (its first chunk names it).
    pub fn open_stream_for(
        &mut self,
        id: crate::engine::streams::StreamId,
        priority: u8,
        service: u64,
    ) {
        self.st.app.tx.open_for(id, priority, service);
    }

    /// Abandons stream `id` with `code`: what is queued on it and not yet cut is dropped,
    /// and its reset is queued. The caller raises [`Event::UserData`].
    pub fn reset_stream(&mut self, id: crate::engine::streams::StreamId, code: u64) {
        let dropped = self.st.app.tx.reset(id, code);
        self.st.app.tx_bytes -= dropped;
    }

    /// Whether stream `id` takes no more data from this side: its end (or reset) was
    /// cut.
    pub fn stream_retired(&self, id: crate::engine::streams::StreamId) -> bool {
        self.st.app.tx.is_retired(id)
    }

    /// Takes the next received message, if any; the microprotocols learn that the
    /// application read.
    pub fn recv_msg(&mut self, now: Instant) -> Option<Bytes> {
        let m = self.st.app.rx_msgs.pop_front()?;
        self.st.app.rx_bytes -= m.len();
        self.dispatch(now, Event::UserRead);
        Some(m)
    }

    /// True when the peer's end of stream reached the receive queue in order.
    pub fn peer_finished(&self) -> bool {
        self.st.app.rx_fin
    }

    /// The end the microprotocols decided for the connection (idle timeout, protocol
    /// violation), taken.
    pub fn take_close(&mut self) -> Option<CloseReason> {
        self.st.session.close.take()
    }

    /// Makes the next packet ack-eliciting: it carries PING when nothing else asks for an
    /// acknowledgement (the responder's first packet, which tells the initiator that the
    /// connection exists, goes out and is acknowledged even without data).
    pub fn owe_ping(&mut self) {
        self.st.session.ping_owed = true;
    }

    /// Appends a packet with only CLOSE (padded to more than [`NOSTATE_LEN`] bytes), sealed
    /// by `protection` and counted as sent (never held back by congestion control, outside
    /// the microprotocols' packet events).
    pub fn build_close(
        &mut self,
        dcid: ConnectionId,
        code: u64,
        reason: &str,
        out: &mut Vec<u8>,
        protection: &mut dyn PacketProtection,
    ) {
        let packet = ShortPacket::begin(out, dcid, self.st.next_pn, self.st.pn_on_wire());
        Frame::emit_close(out, code, reason);
        // Padded to be larger than a NOSTATE: a peer that has forgotten the connection
        // may answer it with one (which never amplifies), ending our drain at once.
        let sealed = out.len() - packet.start() + protection.overhead();
        if sealed <= NOSTATE_LEN {
            out.resize(out.len() + NOSTATE_LEN + 1 - sealed, 0);
        }
        let bytes = packet.seal(out, protection);
        self.st.next_pn += 1;
        self.st.stats.packets_sent += 1;
        self.st.stats.bytes_sent += bytes as u64;
    }

    /// The microprotocols bound to `kind`, by index.
    pub fn bound(&self, kind: EventKind) -> &[u8] {
        self.bindings[kind as usize].ids()
    }

    /// The composed microprotocols.
    pub fn micros(&self) -> &[AnyMicro] {
        &self.micros
    }

    /// Hands a custom control message to the congestion-control algorithm: raises
    /// [`Event::CongestionMessage`]; false when no microprotocol binds it (the composition
    /// has no congestion controller to take it).
    pub fn congestion_message(&mut self, now: Instant, msg: &[u8]) -> bool {
        if self.bound(EventKind::CongestionMessage).is_empty() {
            return false;
        }
        let mut ring = BorrowedRing::default();
        ring.push(Event::CongestionMessage(msg));
        self.run(now, &mut ring);
        true
    }

    /// Raises `ev` and runs every handler it causes, transitively.
    pub fn dispatch(&mut self, now: Instant, ev: Event<'static>) {
        self.owned.push(ev);
        self.run(now, &mut BorrowedRing::default());
    }

    /// Fires due timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        let mut ring = BorrowedRing::default();
        while let Some((id, owner)) = self.st.timers.pop_expired(now) {
            let mut cx = Cx {
                now,
                st: &mut self.st,
                owned: &mut self.owned,
                borrowed: &mut ring,
            };
            self.micros[owner as usize].on_timer(id, &mut cx);
            self.run(now, &mut ring);
        }
    }

    /// The earliest armed timer, or the next `STREAM_BLOCKED` reminder if sooner.
    pub fn next_timeout(&self) -> Option<Instant> {
        let reminder = self
            .st
            .app
            .tx
            .reminder_due(self.st.path.rto_us)
            .map(Instant::from_micros);
        match (self.st.timers.next(), reminder) {
            (Some(t), Some(r)) => Some(t.min(r)),
            (t, r) => t.or(r),
        }
    }

    fn run<'a>(&mut self, now: Instant, ring: &mut BorrowedRing<'a>) {
        loop {
            let ev: Event<'a> = match ring.pop() {
                Some(ev) => ev,
                None => match self.owned.pop() {
                    Some(ev) => ev,
                    None => return,
                },
            };
            self.st.stats.events_dispatched += 1;
            let b = self.bindings[ev.kind() as usize];
            for &i in b.ids() {
                let mut cx = Cx {
                    now,
                    st: &mut self.st,
                    owned: &mut self.owned,
                    borrowed: ring,
                };
                self.micros[i as usize].handle(&ev, &mut cx);
            }
        }
    }

    /// Processes the frames of a received packet, opened by its protection (header and
    /// seal removed). The whole packet is validated before any frame takes effect, so a
    /// malformed packet changes nothing.
    pub fn receive(
        &mut self,
        now: Instant,
        pn: u64,
        frames: &[u8],
        wire_len: usize,
    ) -> Result<Received, WireError> {
        let seg_base = self.st.session.peer_seg_isn;
        let v = validate(frames, seg_base)?;
        let out = Received {
            close: v.close,
            challenge: v.challenge,
            response: v.response,
            non_probing: v.non_probing,
        };
        // A compressed segment is inflated here, while the packet is validated: a bad one
        // drops the whole packet before anything (its acknowledgement included) happens.
        let mut inflated = Vec::new();
        let mut inflated_seg = None;
        if let Some(z) = v.compressed {
            let limit = self.st.session.inflate_limit;
            let decoded = match self.decoder {
                Some(i) => self.micros[i as usize].decode_segment(&z, limit, &mut inflated),
                None => Err(WireError::Invalid("compressed segment without compression")),
            };
            match decoded {
                Ok(d) => inflated_seg = Some(d.seg),
                Err(e) => {
                    self.st.stats.decompress_failed += 1;
                    return Err(e);
                }
            }
        }
        let take_data = match v.data.map(|(seg, body)| self.st.admit_segment(seg, body)) {
            None | Some(Admission::Take) => true,
            Some(Admission::Refuse) => false,
            Some(Admission::Violation(what)) => {
                self.st.stats.protocol_violations += 1;
                self.st.session.close = Some(CloseReason::ProtocolViolation(what));
                return Ok(out);
            }
        };
        self.st.session.last_heard = now;
        let mut ring = BorrowedRing::default();
        if take_data {
            self.st.stats.packets_received += 1;
            self.st.stats.bytes_received += wire_len as u64;
            self.owned.push(Event::PacketReceived {
                pn,
                ack_eliciting: v.ack_eliciting,
                bytes: wire_len,
                probe: v.probe,
            });
            self.run(now, &mut ring);
        } else {
            // Not acknowledged: the sender retransmits the segment once there is room.
            self.st.stats.segments_refused += 1;
        }
        // The frames validation parsed, then any beyond them, parsed again.
        let mut rest = Reader::new(&frames[v.rest..]);
        // Validation parsed every frame, so a failure here cannot happen; it ends the walk.
        let more = core::iter::from_fn(|| {
            if rest.is_empty() {
                None
            } else {
                Frame::parse(&mut rest, seg_base).ok()
            }
        });
        for f in v.parsed[..v.n_parsed].iter().copied().chain(more) {
            if !take_data && matches!(f, Frame::Data(_) | Frame::DataZ(_)) {
                continue;
            }
            let ev = match f {
                Frame::Ping => Event::Ping,
                Frame::Ack(a) => Event::AckFrame(a),
                Frame::Nak(n) => Event::NakFrame(n),
                Frame::Data(d) => Event::SegmentArrived(d),
                Frame::DataZ(_) => {
                    let Some(d) =
                        inflated_seg.and_then(|seg| DataFrame::from_body(seg, &inflated).ok())
                    else {
                        continue;
                    };
                    Event::SegmentArrived(d)
                }
                Frame::AckFloor(v) => Event::AckFloor(v),
                Frame::MaxSeg(v) => Event::MaxSeg(v),
                Frame::XonXoff(v) => Event::XonXoff(v),
                Frame::Rts(v) => Event::Rts(v),
                Frame::CcMsg(m) => Event::CcMessage(m),
                Frame::Cts(v) => Event::Cts(v),
                Frame::Repair(f) => Event::RepairArrived(f),
                Frame::Coded(f) => Event::CodedArrived(f),
                Frame::CodedAck(f) => Event::CodedAckArrived(f),
                Frame::StreamBarrier { stream, offset } => {
                    if !self.st.app.tx.raise_barrier(stream, offset) {
                        continue;
                    }
                    // A stream that waited at its barrier may send again.
                    Event::UserData
                }
                Frame::StreamBlocked { stream, offset } => {
                    self.st.app.rx_streams.on_blocked(stream, offset);
                    continue;
                }
                Frame::Padding
                | Frame::Close { .. }
                | Frame::PathChallenge(_)
                | Frame::PathResponse(_) => continue,
            };
            ring.push(ev);
            self.run(now, &mut ring);
        }
        self.reinject(now);
        self.st.check_held();
        Ok(out)
    }

    /// The CLOSE frame an opened packet carries, if its frames parse: what a connection
    /// that already closed still listens for.
    pub fn peer_close(&self, frames: &[u8]) -> Option<(u64, String)> {
        validate(frames, self.st.session.peer_seg_isn).ok()?.close
    }

    /// Runs recovered frames through the receive path; a recovered frame may complete
    /// another block, so this repeats until nothing is left. Recovered frames carry whole
    /// segment numbers (offsets from zero).
    fn reinject(&mut self, now: Instant) {
        while let Some(buf) = self.st.reinject.pop() {
            let mut r = Reader::new(&buf);
            if let Ok(Frame::Data(d)) = Frame::parse(&mut r, 0) {
                let mut ring = BorrowedRing::default();
                ring.push(Event::SegmentArrived(d));
                self.run(now, &mut ring);
            }
        }
    }

    /// Writes the per-stream flow-control frames owed, as many as fit: barrier updates the
    /// application's reads earned, and `STREAM_BLOCKED` for streams waiting at theirs.
    fn write_stream_frames(&mut self, now: Instant, w: &mut FrameWriter<'_>) {
        /// The most a frame takes (a type byte and two 8-byte varints).
        const MOST: usize = 17;
        let fits = |w: &FrameWriter<'_>| w.room() / MOST;
        let app = &mut self.st.app;
        for (stream, offset) in app.rx_streams.take_barriers(fits(w)) {
            Frame::emit_stream_barrier(w.buf, false, stream, offset);
        }
        let remind_us = self.st.path.rto_us;
        for (stream, offset) in app.tx.take_blocked(now.as_micros(), remind_us, fits(w)) {
            Frame::emit_stream_barrier(w.buf, true, stream, offset);
        }
    }

    /// Appends the next packet to `out` (a batch may hold datagrams before it), sealed by
    /// `protection`: control frames from the frame-writing microprotocols, then at most one
    /// sendable segment. Returns false, leaving `out` as it was, when there is nothing to
    /// send.
    pub fn build_packet(
        &mut self,
        now: Instant,
        dcid: ConnectionId,
        max_len: usize,
        out: &mut Vec<u8>,
        protection: &mut dyn PacketProtection,
    ) -> bool {
        let remind_us = self.st.path.rto_us;
        let nothing_owed = self.st.segs.sendable.is_empty()
            && !self.st.session.ping_owed
            && self.path_frames == [None; 2]
            && !self.st.app.rx_streams.owes_barriers()
            && !self.st.app.tx.owes_blocked(now.as_micros(), remind_us)
            && !self
                .writers
                .ids()
                .iter()
                .any(|&i| self.micros[i as usize].owes_frames(&self.st));
        if nothing_owed && !cfg!(debug_assertions) {
            // Nothing to say (the common poll between packets): no header, no writers.
            // Debug builds take the full path and check that it indeed builds nothing.
            return false;
        }
        let packet = ShortPacket::begin(out, dcid, self.st.next_pn, self.st.pn_on_wire());
        let (start, header_len) = (packet.start(), packet.header_len());
        let seal_overhead = protection.overhead();
        let mut w = FrameWriter {
            buf: out,
            start,
            limit: max_len.saturating_sub(seal_overhead),
            header_len,
            seal_overhead,
            ack_eliciting: false,
            probe: false,
            owed: !nothing_owed,
        };
        for (kind, token) in self.path_frames.iter_mut().enumerate() {
            if let Some(t) = token.take() {
                Frame::emit_path(w.buf, kind == 1, t);
            }
        }
        self.write_stream_frames(now, &mut w);
        let mut ring = BorrowedRing::default();
        for &i in self.writers.ids() {
            let mut cx = Cx {
                now,
                st: &mut self.st,
                owned: &mut self.owned,
                borrowed: &mut ring,
            };
            self.micros[i as usize].write_frames(&mut w, &mut cx);
        }
        let path_limit = self
            .st
            .path
            .plpmtu
            .min(max_len)
            .saturating_sub(seal_overhead);
        let mut ack_eliciting = w.ack_eliciting;
        let probe = w.probe;
        let mut carried = None;
        while let Some(seg) = self.st.segs.sendable.pop_front() {
            let Some(s) = self.st.segs.get(seg).filter(|s| !s.acked) else {
                // Acknowledged or freed while waiting: it will never be sent.
                self.owned.push(Event::SegmentDiscarded(seg));
                continue;
            };
            let offset = self.st.seg_offset(s.seq);
            let need = 1 + varint::len(offset) + s.body_len();
            // Within the path MTU with the control frames written so far; otherwise the
            // segment waits for the next packet, unless it is alone (cut for a larger path
            // MTU before a black hole shrank it).
            let path_room = path_limit.saturating_sub(w.packet_len());
            if need > w.room() || (need > path_room && w.packet_len() > header_len) {
                self.st.segs.sendable.push_front(seg);
                break;
            }
            if s.compressed {
                Frame::emit_compressed_header(w.buf, offset);
            } else {
                Frame::emit_data_header(w.buf, offset);
            }
            s.put_body(w.buf);
            carried = Some(seg);
            ack_eliciting = true;
            break;
        }
        if self.st.session.ping_owed && !ack_eliciting && w.room() >= 1 {
            Frame::emit_simple(w.buf, crate::wire::frame::ty::PING, None);
            ack_eliciting = true;
        }
        if w.packet_len() == header_len {
            // Nothing to say; the packet number stays unused.
            packet.abandon(out);
            return false;
        }
        debug_assert!(
            !nothing_owed,
            "a writer wrote frames its owes_frames denied: the two are out of step"
        );
        if ack_eliciting {
            self.st.session.ping_owed = false;
        }
        let pn = packet.pn();
        let bytes = packet.seal(out, protection);
        self.st.next_pn += 1;
        let stats = &mut self.st.stats;
        stats.packets_sent += 1;
        stats.bytes_sent += bytes as u64;
        if let Some(seg) = carried {
            stats.segments_sent += 1;
            let rearm = self.st.holds.send_rearm;
            if let Some((s, first)) = self.st.segs.transmit(seg) {
                if !first {
                    stats.retransmissions += 1;
                }
                s.holds.send = rearm;
                let (done, free) = (s.holds.done == 0 && first, s.holds.dealloc == 0);
                if done {
                    self.st.segs.done(seg);
                    self.owned.push(Event::SegmentDone(seg));
                }
                if free {
                    self.st.segs.free(seg);
                }
                if first && self.st.wants_cut(self.st.cut_ahead() / 2 + 1) {
                    // The cut-ahead runs low: the application's queue has more.
                    self.owned.push(Event::UserData);
                }
            }
        }
        let info = PacketInfo {
            pn,
            bytes,
            sent_at: now,
            seg: carried,
            in_flight: ack_eliciting,
            probe,
            path: self.st.path.id,
        };
        self.owned.push(Event::PacketSent(info));
        self.run(now, &mut ring);
        true
    }
}

/// What validating a received packet found out, before any frame takes effect.
struct Validated<'a> {
    /// It asks for an acknowledgement (data or PING).
    ack_eliciting: bool,
    /// It is a path-MTU probe: PING and PADDING only.
    probe: bool,
    /// Its PATH_CHALLENGE token.
    challenge: Option<[u8; 8]>,
    /// Its PATH_RESPONSE token.
    response: Option<[u8; 8]>,
    /// It carries a frame other than path validation and padding.
    non_probing: bool,
    /// Its compressed segment, inflated before anything happens.
    compressed: Option<CompressedFrame<'a>>,
    /// Its CLOSE frame: code and reason.
    close: Option<(u64, String)>,
    /// Its segment: number and body length (0 when compressed: the inflation limit
    /// bounds it).
    data: Option<(u64, usize)>,
    /// Its first frames as parsed, so that dispatch does not parse them again (a packet
    /// rarely has more; the rest are parsed again from `rest`).
    parsed: [Frame<'a>; PARSED_FRAMES],
    n_parsed: usize,
    /// Offset in the frames of the first one not in `parsed`.
    rest: usize,
}

/// How many frames of a received packet validation keeps for dispatch.
const PARSED_FRAMES: usize = 4;

/// Parses every frame of an opened packet (segment numbers are offsets from `seg_base`).
fn validate(frames: &[u8], seg_base: u64) -> Result<Validated<'_>, WireError> {
    let mut r = Reader::new(frames);
    if r.is_empty() {
        return Err(WireError::Invalid("empty packet"));
    }
    let (mut ping, mut padding, mut other, mut feedback) = (false, false, false, false);
    let mut out = Validated {
        ack_eliciting: false,
        probe: false,
        challenge: None,
        response: None,
        non_probing: false,
        compressed: None,
        close: None,
        data: None,
        parsed: [Frame::Padding; PARSED_FRAMES],
        n_parsed: 0,
        rest: 0,
    };
    while !r.is_empty() {
        let f = Frame::parse(&mut r, seg_base)?;
        if out.n_parsed < PARSED_FRAMES {
            out.parsed[out.n_parsed] = f;
            out.n_parsed += 1;
            out.rest = frames.len() - r.remaining();
        }
        match f {
            Frame::Ping => ping = true,
            Frame::Padding => padding = true,
            Frame::PathChallenge(t) => out.challenge = Some(t),
            Frame::PathResponse(t) => out.response = Some(t),
            Frame::Ack(_) | Frame::Nak(_) | Frame::AckFloor(_) | Frame::CodedAck(_) => {
                feedback = true
            }
            _ => other = true,
        }
        match f {
            Frame::Ping => out.ack_eliciting = true,
            Frame::Data(d) => {
                out.ack_eliciting = true;
                out.data = Some((d.seg, d.body_len()));
            }
            Frame::DataZ(z) => {
                out.ack_eliciting = true;
                out.compressed = Some(z);
                out.data = Some((z.seg, 0));
            }
            Frame::Close { code, reason } => {
                out.close = Some((code, crate::text::peer_text(reason)))
            }
            _ => {}
        }
    }
    out.probe = ping && padding && !other;
    out.non_probing = ping || other || feedback;
    Ok(out)
}
