//! Two native endpoints with an established connection exchange a byte stream while a
//! hostile third party delivers, drops, duplicates, reorders, replays, truncates and mutates
//! their datagrams and injects its own, some of them forged with a valid trailer.
//!
//! Checked: nothing panics; on a reliable profile the bytes the application reads are a
//! prefix of those written, unless a forged (correctly sealed) packet reached the receiver
//! — the CRC32C trailer is no defence against a forger, so then only "no panic" holds.

use crate::net::{Net, TO_CLIENT, TO_SERVER};
use arbitrary::{Arbitrary, Unstructured};
use core::time::Duration;
use ctp_proto::packet::ShortPacket;
use ctp_proto::profile::decode_offer;
use ctp_proto::protection::{crc32c, Crc32c, PacketProtection};
use ctp_proto::udt::WireFormat;
use ctp_proto::wire::frame::{ty, Frame};
use ctp_proto::wire::header::{ConnectionId, Header, LongType};
use ctp_proto::wire::truncated::Truncated;
use ctp_proto::wire::{varint, Reader};
use ctp_proto::{Params, Profile};

/// Operations per execution, at most.
const MAX_OPS: usize = 64;
/// Bytes the sender may write in one execution.
const MAX_STREAM: usize = 64 * 1024;

/// Profiles the target runs (the first input byte picks one).
const PROFILES: &[&str] = &[
    "reliable",
    "ctp-bulk",
    "datagram",
    "ctp-minimal",
    "ctp-lossy-fifo",
    "ctp-video",
    "ctp-audio",
    "coded",
];

#[derive(Arbitrary, Debug)]
enum Dir {
    ToServer,
    ToClient,
}

impl Dir {
    fn idx(&self) -> usize {
        match self {
            Dir::ToServer => TO_SERVER,
            Dir::ToClient => TO_CLIENT,
        }
    }
}

/// A frame of a forged packet; numbers are relative to what the forger saw on the wire.
#[derive(Arbitrary, Debug)]
enum FFrame {
    Padding(u8),
    Ping,
    Ack {
        back: u8,
        delay: u16,
        first: u8,
        ranges: Vec<(u8, u8)>,
    },
    Nak(Vec<(u8, u8)>),
    AckFloor(i8),
    MaxSeg(u16),
    XonXoff(u8),
    Rts(u16),
    Cts(i8),
    CcMsg(Vec<u8>),
    Close {
        code: u8,
        reason: Vec<u8>,
    },
    Data {
        seg: i8,
        pieces: Vec<FPiece>,
    },
    DataZ {
        seg: i8,
        len: u16,
        block: Vec<u8>,
    },
    Repair {
        seg: i8,
        k: u8,
        m: u8,
        index: u8,
        shard: Vec<u8>,
    },
    Raw(u8, Vec<u8>),
}

#[derive(Arbitrary, Debug)]
struct FPiece {
    flags: u8,
    ts: Option<u16>,
    msg: i8,
    deps: Vec<u8>,
    offset: u16,
    data: Vec<u8>,
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// The client writes this many more bytes of the stream (or sends one message).
    Write(u16),
    /// The client finishes its stream.
    Finish,
    /// The server reads whatever is readable.
    Read,
    /// Deliver the queued datagram at this index (0: the oldest, in order).
    Deliver(Dir, u8),
    /// Drop the queued datagram at this index.
    Drop(Dir, u8),
    /// Deliver a copy of the queued datagram at this index, keeping it queued.
    Duplicate(Dir, u8),
    /// Clean network for a few rounds.
    Settle(u8),
    /// Virtual time moves on (milliseconds).
    Advance(u16),
    /// Deliver again a datagram sent earlier.
    Replay(Dir, u8),
    /// Deliver a remembered datagram with one byte changed (the trailer will not match).
    Flip(Dir, u8, u16, u8),
    /// Deliver a remembered datagram with one byte changed and the trailer recomputed.
    FlipResealed(Dir, u8, u16, u8),
    /// Deliver a prefix of a remembered datagram.
    Truncate(Dir, u8, u16),
    /// Deliver arbitrary bytes, from the peer's address or a stranger's.
    Raw(Dir, bool, Vec<u8>),
    /// Deliver a packet built from these frames, with the connection's id, a plausible
    /// packet number and a correct trailer.
    Forge(Dir, i8, Vec<FFrame>),
    /// The client closes (gracefully) or aborts.
    Close(bool),
}

#[derive(Arbitrary, Debug)]
struct Input {
    profile: u8,
    ops: Vec<Op>,
}

/// What a forger learns from one direction's traffic.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    dcid: Option<ConnectionId>,
    /// One past the largest packet number.
    pn_next: u64,
    /// One past the largest segment number.
    seg_next: u64,
    /// The first segment number: DATA frames carry offsets from it.
    seg_isn: u64,
    /// Message numbers start here.
    msg_isn: u64,
}

impl Seen {
    /// Learns from a datagram the sender of this direction sent.
    fn learn(&mut self, d: &[u8]) {
        let Some(packet) = d.len().checked_sub(crc32c::TRAILER_LEN).map(|n| &d[..n]) else {
            return;
        };
        let mut r = Reader::new(packet);
        match Header::parse(&mut r) {
            Ok(Header::Long { ty, .. }) => {
                if matches!(ty, LongType::Init | LongType::InitAck) {
                    if let Ok((_, _, isn)) = decode_offer(&mut r, &Params::default()) {
                        self.pn_next = isn.pn;
                        self.seg_next = isn.seg;
                        self.seg_isn = isn.seg;
                        self.msg_isn = isn.msg;
                    }
                }
            }
            Ok(Header::Short { dcid, pn, .. }) => {
                self.dcid = Some(dcid);
                self.pn_next = self.pn_next.max(pn.expand(self.pn_next) + 1);
                while !r.is_empty() {
                    match Frame::parse(&mut r, self.seg_isn) {
                        Ok(Frame::Data(f)) => self.seg_next = self.seg_next.max(f.seg + 1),
                        Ok(Frame::DataZ(f)) => self.seg_next = self.seg_next.max(f.seg + 1),
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
            }
            Err(_) => {}
        }
    }

    /// The whole packet number and header length a receiver would recover for this short
    /// packet (without its trailer).
    fn number(&self, packet: &[u8]) -> Option<(u64, usize)> {
        let mut r = Reader::new(packet);
        let Ok(h @ Header::Short { pn, .. }) = Header::parse(&mut r) else {
            return None;
        };
        Some((pn.expand(self.pn_next), h.wire_len()))
    }
}

fn rel(base: u64, d: i8) -> u64 {
    base.saturating_add_signed(i64::from(d))
}

/// Encodes forged frames; returns the last data segment number (what the trailer covers).
fn encode_frames(frames: &[FFrame], this: &Seen, other: &Seen, out: &mut Vec<u8>) {
    for f in frames.iter().take(8) {
        match f {
            FFrame::Padding(n) => {
                out.push(0);
                out.resize(out.len() + usize::from(*n), 0);
            }
            FFrame::Ping => varint::put(out, ty::PING),
            FFrame::Ack {
                back,
                delay,
                first,
                ranges,
            } => {
                // Acknowledges what the other direction sent.
                varint::put(out, ty::ACK);
                varint::put(out, other.pn_next.saturating_sub(1 + u64::from(*back)));
                varint::put(out, u64::from(*delay));
                let ranges = &ranges[..ranges.len().min(8)];
                varint::put(out, ranges.len() as u64);
                varint::put(out, u64::from(*first));
                for &(gap, len) in ranges {
                    varint::put(out, u64::from(gap));
                    varint::put(out, u64::from(len));
                }
            }
            FFrame::Nak(ranges) => {
                varint::put(out, ty::NAK);
                let ranges = &ranges[..ranges.len().min(8)];
                varint::put(out, ranges.len() as u64);
                for &(back, len) in ranges {
                    varint::put(out, other.pn_next.saturating_sub(u64::from(back)));
                    varint::put(out, u64::from(len));
                }
            }
            FFrame::AckFloor(d) => {
                varint::put(out, ty::ACK_FLOOR);
                varint::put(out, rel(other.seg_next, *d));
            }
            FFrame::MaxSeg(v) => {
                varint::put(out, ty::MAX_SEG);
                varint::put(out, rel(other.seg_next, 0) + u64::from(*v));
            }
            FFrame::XonXoff(v) => {
                varint::put(out, ty::XON_XOFF);
                out.push(*v % 3);
            }
            FFrame::Rts(v) => {
                varint::put(out, ty::RTS);
                varint::put(out, u64::from(*v));
            }
            FFrame::Cts(d) => {
                varint::put(out, ty::CTS);
                varint::put(out, rel(other.seg_next, *d));
            }
            FFrame::CcMsg(m) => Frame::emit_cc_msg(out, &m[..m.len().min(40)]),
            FFrame::Close { code, reason } => {
                varint::put(out, ty::CLOSE);
                varint::put(out, u64::from(*code % 5));
                let reason = &reason[..reason.len().min(64)];
                varint::put(out, reason.len() as u64);
                out.extend_from_slice(reason);
            }
            FFrame::Data { seg: d, pieces } => {
                let s = rel(this.seg_next, *d);
                Frame::emit_data_header(out, s.wrapping_sub(this.seg_isn));
                for p in pieces.iter().take(4) {
                    out.push(p.flags);
                    if let Some(ts) = p.ts {
                        varint::put(out, u64::from(ts));
                    }
                    varint::put(out, rel(this.msg_isn + 2, p.msg));
                    if !p.deps.is_empty() {
                        let deps = &p.deps[..p.deps.len().min(17)];
                        varint::put(out, deps.len() as u64);
                        for &d in deps {
                            varint::put(out, u64::from(d));
                        }
                    }
                    varint::put(out, u64::from(p.offset));
                    let data = &p.data[..p.data.len().min(256)];
                    varint::put(out, data.len() as u64);
                    out.extend_from_slice(data);
                }
            }
            FFrame::DataZ { seg: d, len, block } => {
                let s = rel(this.seg_next, *d);
                Frame::emit_compressed_header(out, s.wrapping_sub(this.seg_isn));
                varint::put(out, u64::from(*len));
                out.extend_from_slice(&block[..block.len().min(512)]);
            }
            FFrame::Repair {
                seg: d,
                k,
                m,
                index,
                shard,
            } => {
                varint::put(out, ty::REPAIR);
                varint::put(out, rel(this.seg_next, *d));
                out.extend_from_slice(&[*k % 17, *m % 5, *index]);
                let shard = &shard[..shard.len().min(1500)];
                varint::put(out, shard.len() as u64);
                out.extend_from_slice(shard);
            }
            FFrame::Raw(t, b) => {
                varint::put(out, u64::from(*t));
                out.extend_from_slice(&b[..b.len().min(256)]);
            }
        }
    }
}

/// The sender's stream: byte `i` is a function of `i`, so a read can be checked.
fn stream_byte(i: usize) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 8)) as u8
}

/// A message: its index (4 bytes) then bytes derived from it.
fn message(i: u32, len: usize) -> Vec<u8> {
    let mut m = i.to_be_bytes().to_vec();
    m.extend((0..len).map(|k| stream_byte(k + i as usize)));
    m
}

/// The target: see the module documentation.
pub fn pair(data: &[u8]) {
    let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    run(input);
}

fn run(input: Input) {
    let name = PROFILES[usize::from(input.profile) % PROFILES.len()];
    let profile = Profile::builtin(name).expect("a built-in profile");
    let reliable = profile.is_reliable();
    let mut net = Net::new(WireFormat::Ctp);
    let mut seen = [Seen::default(); 2];
    let learn = |net: &mut Net, seen: &mut [Seen; 2]| {
        for (dir, d) in net.fresh.drain(..) {
            seen[dir].learn(&d);
        }
    };
    let ok = net.connect(&profile);
    learn(&mut net, &mut seen);
    if !ok {
        return;
    }
    let (c, s) = (
        net.client_conn.expect("connected"),
        net.server_conn.expect("accepted"),
    );
    let mut written = 0usize;
    let mut msgs_sent = 0u32;
    let mut read = 0usize;
    let mut forged_to_receiver = false;
    let mut rbuf = vec![0u8; 4096];
    for op in input.ops.into_iter().take(MAX_OPS) {
        let now = net.now;
        match op {
            Op::Write(n) => {
                let Some(conn) = net.client.connection_mut(c) else {
                    continue;
                };
                let n = usize::from(n) % 4096;
                if reliable {
                    let end = (written + n).min(MAX_STREAM);
                    let chunk: Vec<u8> = (written..end).map(stream_byte).collect();
                    if let Ok(k) = conn.stream_write(now, &chunk) {
                        assert!(k <= chunk.len());
                        written += k;
                    }
                } else if conn
                    .send_msg(now, message(msgs_sent, n % 1500).into())
                    .is_ok()
                {
                    msgs_sent += 1;
                }
                net.collect();
            }
            Op::Finish => {
                if let Some(conn) = net.client.connection_mut(c) {
                    let _ = conn.stream_finish(now);
                }
                net.collect();
            }
            Op::Read => {
                let Some(conn) = net.server.connection_mut(s) else {
                    continue;
                };
                if reliable {
                    for _ in 0..64 {
                        match conn.stream_read(now, &mut rbuf) {
                            Ok(0) | Err(_) => break,
                            Ok(k) => {
                                if !forged_to_receiver {
                                    assert!(read + k <= written, "read more than written");
                                    for (j, &b) in rbuf[..k].iter().enumerate() {
                                        assert_eq!(
                                            b,
                                            stream_byte(read + j),
                                            "stream byte {} differs",
                                            read + j
                                        );
                                    }
                                }
                                read += k;
                            }
                        }
                    }
                } else {
                    for _ in 0..64 {
                        let Ok(m) = conn.recv_msg(now) else { break };
                        if !forged_to_receiver && name != "ctp-minimal" {
                            // Unreliable profiles may lose messages but not corrupt them.
                            assert!(m.len() >= 4, "short message {m:?}");
                            let i = u32::from_be_bytes([m[0], m[1], m[2], m[3]]);
                            assert!(i < msgs_sent, "message {i} was never sent");
                            assert_eq!(m[..], message(i, m.len() - 4)[..], "message {i} differs");
                        }
                    }
                }
                net.collect();
            }
            Op::Deliver(d, i) => net.deliver_queued(d.idx(), usize::from(i)),
            Op::Drop(d, i) => {
                let q = &mut net.queue[d.idx()];
                if !q.is_empty() {
                    let i = usize::from(i) % q.len();
                    q.remove(i);
                }
            }
            Op::Duplicate(d, i) => {
                let q = &net.queue[d.idx()];
                if !q.is_empty() {
                    let b = q[usize::from(i) % q.len()].clone();
                    net.deliver(d.idx(), &b, false);
                }
            }
            Op::Settle(n) => net.settle(usize::from(n % 8) + 1),
            Op::Advance(ms) => net.advance(Duration::from_millis(u64::from(ms))),
            Op::Replay(d, i) => {
                if let Some(b) = net.remembered(d.idx(), usize::from(i)) {
                    net.deliver(d.idx(), &b, false);
                }
            }
            Op::Flip(d, i, pos, x) => {
                if let Some(mut b) = net.remembered(d.idx(), usize::from(i)) {
                    if !b.is_empty() {
                        let p = usize::from(pos) % b.len();
                        b[p] ^= x.max(1);
                        net.deliver(d.idx(), &b, false);
                    }
                }
            }
            Op::FlipResealed(d, i, pos, x) => {
                let dir = d.idx();
                let Some(mut b) = net.remembered(dir, usize::from(i)) else {
                    continue;
                };
                if b.len() <= crc32c::TRAILER_LEN {
                    continue;
                }
                b.truncate(b.len() - crc32c::TRAILER_LEN);
                let p = usize::from(pos) % b.len();
                b[p] ^= x.max(1);
                if b[0] & 0x80 != 0 {
                    crc32c::seal_long(&mut b);
                } else if let Some((pn, header_len)) = seen[dir].number(&b) {
                    Crc32c.seal(pn, &mut b, 0, header_len);
                } else {
                    continue;
                }
                forged_to_receiver |= dir == TO_SERVER;
                net.deliver(dir, &b, false);
            }
            Op::Truncate(d, i, len) => {
                if let Some(mut b) = net.remembered(d.idx(), usize::from(i)) {
                    b.truncate(usize::from(len) % (b.len() + 1));
                    net.deliver(d.idx(), &b, false);
                }
            }
            Op::Raw(d, stranger, mut b) => {
                b.truncate(1500);
                net.deliver(d.idx(), &b, stranger);
            }
            Op::Forge(d, pn_delta, frames) => {
                let dir = d.idx();
                let (this, other) = (seen[dir], seen[1 - dir]);
                let Some(dcid) = this.dcid else { continue };
                let pn = rel(this.pn_next, pn_delta);
                let mut b = Vec::new();
                let packet = ShortPacket::begin(&mut b, dcid, pn, Truncated::whole(pn));
                encode_frames(&frames, &this, &other, &mut b);
                packet.seal(&mut b, &mut Crc32c);
                forged_to_receiver |= dir == TO_SERVER;
                net.deliver(dir, &b, false);
            }
            Op::Close(graceful) => {
                if let Some(conn) = net.client.connection_mut(c) {
                    if graceful {
                        conn.close(now);
                    } else {
                        conn.abort(now, "fuzz");
                    }
                }
                net.collect();
            }
        }
        learn(&mut net, &mut seen);
    }
    // Whatever happened, the endpoints still answer their polls.
    net.settle(4);
    let _ = net.client.connection(c).map(|x| x.stats());
    let _ = net.server.connection(s).map(|x| x.stats());
}
