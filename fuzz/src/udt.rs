//! Two UDT4 endpoints with an established `udt` (or `udt-dgram`) connection, fed arbitrary
//! datagrams: raw bytes, mutated and replayed copies of real packets, and control and data
//! packets built field by field with the right socket id and sequence numbers near the
//! live ones.
//!
//! Checked: nothing panics; the stream read is a prefix of the stream written as long as
//! nothing hostile reached the receiver (UDT4 has no integrity check, so a forged data
//! packet is data).

use crate::net::{Net, TO_CLIENT, TO_SERVER};
use arbitrary::{Arbitrary, Unstructured};
use core::time::Duration;
use ctp_proto::udt::packet::{
    nak_words, AckBody, Boundary, Control, ControlBody, DataHeader, Handshake, Packet, MAX_SEQ,
};
use ctp_proto::udt::WireFormat;
use ctp_proto::Profile;

const MAX_OPS: usize = 64;
const MAX_STREAM: usize = 64 * 1024;

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

/// A control body; sequence numbers are relative to what was seen on the wire.
#[derive(Arbitrary, Debug)]
enum FCtrl {
    Handshake {
        version: i8,
        sock_type: i8,
        isn: i32,
        mss: i16,
        flow_window: i16,
        req_type: i8,
        socket_id: bool,
        cookie: i32,
    },
    KeepAlive(Option<u32>),
    Ack {
        ack: i16,
        lite: Option<(u32, u32, u32)>,
        full: Option<(u32, u32)>,
    },
    Nak(Vec<(i16, u8)>),
    CongestionWarning(Option<u32>),
    Shutdown(Option<u32>),
    Ack2(Option<u32>),
    DropRequest(Option<(i16, i16)>),
    ErrorSignal(Option<u32>),
    User(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
enum Op {
    Write(u16),
    Read,
    Deliver(Dir, u8),
    Drop(Dir, u8),
    Duplicate(Dir, u8),
    Settle(u8),
    Advance(u16),
    Replay(Dir, u8),
    Flip(Dir, u8, u16, u8),
    Truncate(Dir, u8, u16),
    Raw(Dir, bool, Vec<u8>),
    /// A control packet to the endpoint `Dir` leads to.
    Control {
        dir: Dir,
        info: i16,
        timestamp: u32,
        body: FCtrl,
    },
    /// A data packet to the endpoint `Dir` leads to.
    Data {
        dir: Dir,
        seq: i16,
        boundary: u8,
        in_order: bool,
        msg: u16,
        payload: Vec<u8>,
    },
    Close(bool),
}

#[derive(Arbitrary, Debug)]
struct Input {
    dgram: bool,
    ops: Vec<Op>,
}

/// What an observer learns from one direction's traffic.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    /// Socket id of the receiving side.
    dst: u32,
    /// Socket id of the sending side (from its handshake).
    src: u32,
    /// Largest data sequence number.
    seq: u32,
    /// Largest message number.
    msg: u32,
}

impl Seen {
    fn learn(&mut self, d: &[u8]) {
        match Packet::parse(d) {
            Ok(Packet::Data(h, _)) => {
                self.dst = h.dst;
                self.seq = h.seq;
                self.msg = h.msg;
            }
            Ok(Packet::Control(c)) => {
                if c.dst != 0 {
                    self.dst = c.dst;
                }
                if let ControlBody::Handshake(h) = c.body {
                    self.src = h.socket_id as u32;
                    if self.seq == 0 {
                        self.seq = h.isn as u32;
                    }
                }
            }
            Err(_) => {}
        }
    }
}

fn seq(base: u32, d: i16) -> u32 {
    (base as i64 + i64::from(d)).rem_euclid(i64::from(MAX_SEQ) + 1) as u32
}

fn control_body(b: FCtrl, this: &Seen, other: &Seen) -> ControlBody {
    match b {
        FCtrl::Handshake {
            version,
            sock_type,
            isn,
            mss,
            flow_window,
            req_type,
            socket_id,
            cookie,
        } => ControlBody::Handshake(Handshake {
            version: i32::from(version),
            sock_type: i32::from(sock_type),
            isn,
            mss: i32::from(mss),
            flow_window: i32::from(flow_window),
            req_type: i32::from(req_type),
            socket_id: if socket_id { this.src as i32 } else { 0x1234 },
            cookie,
            peer_ip: [0x0100_000a, 0, 0, 0],
        }),
        FCtrl::KeepAlive(p) => ControlBody::KeepAlive(p),
        // Acknowledges what the other direction sent.
        FCtrl::Ack { ack, lite, full } => ControlBody::Ack(AckBody {
            ack: seq(other.seq, ack),
            lite,
            full: lite.and(full),
        }),
        FCtrl::Nak(ranges) => {
            let mut w = Vec::new();
            nak_words(
                ranges.iter().take(16).map(|&(d, len)| {
                    let a = seq(other.seq, d);
                    (a, seq(a, i16::from(len)))
                }),
                &mut w,
            );
            if w.is_empty() {
                w.push(other.seq);
            }
            ControlBody::Nak(w)
        }
        FCtrl::CongestionWarning(p) => ControlBody::CongestionWarning(p),
        FCtrl::Shutdown(p) => ControlBody::Shutdown(p),
        FCtrl::Ack2(p) => ControlBody::Ack2(p),
        FCtrl::DropRequest(r) => {
            ControlBody::DropRequest(r.map(|(a, b)| (seq(this.seq, a), seq(this.seq, b))))
        }
        FCtrl::ErrorSignal(p) => ControlBody::ErrorSignal(p),
        FCtrl::User(mut b) => {
            b.truncate(256);
            ControlBody::User(b)
        }
    }
}

fn stream_byte(i: usize) -> u8 {
    (i.wrapping_mul(29) ^ (i >> 9)) as u8
}

/// The target: see the module documentation.
pub fn udt_conn(data: &[u8]) {
    let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    run(input);
}

fn run(input: Input) {
    let profile = if input.dgram {
        Profile::udt_dgram()
    } else {
        Profile::udt()
    };
    let mut net = Net::new(WireFormat::Udt4);
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
    let mut read = 0usize;
    let mut hostile_to_receiver = false;
    let mut rbuf = vec![0u8; 4096];
    for op in input.ops.into_iter().take(MAX_OPS) {
        let now = net.now;
        match op {
            Op::Write(n) => {
                let Some(conn) = net.client.connection_mut(c) else {
                    continue;
                };
                let n = usize::from(n) % 4096;
                let end = (written + n).min(MAX_STREAM);
                let chunk: Vec<u8> = (written..end).map(stream_byte).collect();
                if input.dgram {
                    if !chunk.is_empty() && conn.send_msg(now, chunk.clone().into()).is_ok() {
                        written += chunk.len();
                    }
                } else if let Ok(k) = conn.stream_write(now, &chunk) {
                    assert!(k <= chunk.len());
                    written += k;
                }
                net.collect();
            }
            Op::Read => {
                let Some(conn) = net.server.connection_mut(s) else {
                    continue;
                };
                for _ in 0..64 {
                    let got = if input.dgram {
                        match conn.recv_msg(now) {
                            Ok(m) => {
                                let k = m.len().min(rbuf.len());
                                rbuf[..k].copy_from_slice(&m[..k]);
                                k
                            }
                            Err(_) => break,
                        }
                    } else {
                        match conn.stream_read(now, &mut rbuf) {
                            Ok(0) | Err(_) => break,
                            Ok(k) => k,
                        }
                    };
                    // Messages may be dropped whole (TTL), so only the stream is checked.
                    if !hostile_to_receiver && !input.dgram {
                        assert!(read + got <= written, "read more than written");
                        for (j, &b) in rbuf[..got].iter().enumerate() {
                            assert_eq!(b, stream_byte(read + j), "byte {} differs", read + j);
                        }
                    }
                    read += got;
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
                        hostile_to_receiver |= d.idx() == TO_SERVER;
                        net.deliver(d.idx(), &b, false);
                    }
                }
            }
            Op::Truncate(d, i, len) => {
                if let Some(mut b) = net.remembered(d.idx(), usize::from(i)) {
                    b.truncate(usize::from(len) % (b.len() + 1));
                    hostile_to_receiver |= d.idx() == TO_SERVER;
                    net.deliver(d.idx(), &b, false);
                }
            }
            Op::Raw(d, stranger, mut b) => {
                b.truncate(1500);
                hostile_to_receiver |= d.idx() == TO_SERVER && !stranger;
                net.deliver(d.idx(), &b, stranger);
            }
            Op::Control {
                dir,
                info,
                timestamp,
                body,
            } => {
                let d = dir.idx();
                let (this, other) = (seen[d], seen[1 - d]);
                let body = control_body(body, &this, &other);
                let info = match body {
                    ControlBody::Ack(_) | ControlBody::Ack2(_) => info as u32 & 0xff,
                    _ => info as u32,
                };
                let mut b = Vec::new();
                Control::new(info, timestamp, this.dst, body).emit(&mut b);
                hostile_to_receiver |= d == TO_SERVER;
                net.deliver(d, &b, false);
            }
            Op::Data {
                dir,
                seq: sd,
                boundary,
                in_order,
                msg,
                mut payload,
            } => {
                let d = dir.idx();
                let this = seen[d];
                payload.truncate(1456);
                let h = DataHeader {
                    seq: seq(this.seq, sd),
                    boundary: Boundary::of(boundary & 1 != 0, boundary & 2 != 0),
                    in_order,
                    msg: this.msg.wrapping_add(u32::from(msg)) & 0x1FFF_FFFF,
                    timestamp: 0,
                    dst: this.dst,
                };
                let mut b = Vec::new();
                Packet::Data(h, &payload).emit(&mut b);
                hostile_to_receiver |= d == TO_SERVER;
                net.deliver(d, &b, false);
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
    net.settle(4);
    let _ = net.client.connection(c).map(|x| x.stats());
    let _ = net.server.connection(s).map(|x| x.stats());
}
