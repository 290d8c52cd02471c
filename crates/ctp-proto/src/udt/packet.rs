//! The UDT4 packet format (draft-gg-udt-03 §2, UDT 4.11 `packet.cpp`), parsed and emitted
//! byte for byte.
//!
//! Every packet starts with a 128-bit header of four big-endian 32-bit words:
//!
//! ```text
//! data:    |0|            sequence number (31)             |
//!          |ff|o|          message number (29)             |
//!          |                 time stamp                    |
//!          |           destination socket id               |
//! control: |1|  type (15)  |     reserved / extended type  |
//!          |              additional info                  |
//!          |                 time stamp                    |
//!          |           destination socket id               |
//! ```
//!
//! `ff` is the message boundary (`10` first, `01` last, `11` only, `00` middle) and `o` the
//! in-order flag. A control packet's body is a list of 32-bit words which UDT4 converts to
//! network order one by one, so every word is big-endian here too.
//!
//! The parser keeps every bit it does not interpret (reserved header bits, the 4-byte
//! padding UDT4 appends to body-less control packets), so [`Packet::emit`] reproduces the
//! parsed datagram exactly; the golden vectors in `tests/data/udt4/` check that against
//! packets captured from the reference library.

use core::fmt;

/// Size of the fixed header of every packet.
pub const HEADER_LEN: usize = 16;
/// Size of a handshake body (UDT4's `CHandShake::m_iContentSize`).
pub const HANDSHAKE_LEN: usize = 48;
/// Largest sequence number (sequence numbers are 31 bits and wrap).
pub const MAX_SEQ: u32 = 0x7FFF_FFFF;
/// Largest message number (29 bits, wrapping).
pub const MAX_MSG: u32 = 0x1FFF_FFFF;
/// Most loss-list words a NAK may carry (a full-sized datagram's worth).
pub const MAX_NAK_WORDS: usize = 2048;
/// Largest user-defined control body accepted.
pub const MAX_USER_BODY: usize = 65_536;

/// Why a datagram is not a UDT4 packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    /// Shorter than a header or than its body's fixed part.
    #[error("UDT packet truncated")]
    Truncated,
    /// A control type UDT4 does not define.
    #[error("unknown UDT control type {0:#x}")]
    UnknownType(u16),
    /// A body whose length or contents do not fit its type.
    #[error("invalid UDT {0}")]
    Invalid(&'static str),
}

/// The message-boundary bits of a data packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Boundary {
    /// `00`: a middle packet of a message.
    Middle,
    /// `01`: the last packet of a message.
    Last,
    /// `10`: the first packet of a message.
    First,
    /// `11`: the message fits in this one packet.
    Solo,
}

impl Boundary {
    fn from_bits(b: u32) -> Self {
        match b & 3 {
            0 => Boundary::Middle,
            1 => Boundary::Last,
            2 => Boundary::First,
            _ => Boundary::Solo,
        }
    }

    fn bits(self) -> u32 {
        match self {
            Boundary::Middle => 0,
            Boundary::Last => 1,
            Boundary::First => 2,
            Boundary::Solo => 3,
        }
    }

    /// True when this packet starts a message.
    pub fn is_first(self) -> bool {
        matches!(self, Boundary::First | Boundary::Solo)
    }

    /// True when this packet ends a message.
    pub fn is_last(self) -> bool {
        matches!(self, Boundary::Last | Boundary::Solo)
    }

    /// The boundary of a packet that starts (`first`) and/or ends (`last`) a message.
    pub fn of(first: bool, last: bool) -> Self {
        match (first, last) {
            (true, true) => Boundary::Solo,
            (true, false) => Boundary::First,
            (false, true) => Boundary::Last,
            (false, false) => Boundary::Middle,
        }
    }
}

/// The header of a data packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DataHeader {
    /// Sequence number (31 bits).
    pub seq: u32,
    /// Where the packet sits in its message.
    pub boundary: Boundary,
    /// The message must be delivered in order.
    pub in_order: bool,
    /// Message number (29 bits).
    pub msg: u32,
    /// Microseconds since the sender's connection started.
    pub timestamp: u32,
    /// The receiving socket's id.
    pub dst: u32,
}

impl DataHeader {
    /// Writes the 16-byte header.
    pub fn emit(&self, out: &mut Vec<u8>) {
        put(out, self.seq & MAX_SEQ);
        put(
            out,
            self.boundary.bits() << 30 | u32::from(self.in_order) << 29 | (self.msg & MAX_MSG),
        );
        put(out, self.timestamp);
        put(out, self.dst);
    }
}

/// Control packet types (the 15-bit type field).
pub mod ctrl {
    /// Connection handshake.
    pub const HANDSHAKE: u16 = 0;
    /// Keep-alive.
    pub const KEEPALIVE: u16 = 1;
    /// Acknowledgement.
    pub const ACK: u16 = 2;
    /// Negative acknowledgement (loss report).
    pub const NAK: u16 = 3;
    /// Congestion warning (defined, unused by UDT4's native control).
    pub const CONGESTION_WARNING: u16 = 4;
    /// Shutdown.
    pub const SHUTDOWN: u16 = 5;
    /// Acknowledgement of an acknowledgement.
    pub const ACK2: u16 = 6;
    /// Message drop request.
    pub const DROP_REQUEST: u16 = 7;
    /// Error signal from the peer.
    pub const ERROR_SIGNAL: u16 = 8;
    /// User-defined type; the extended type is in the header's low 16 bits.
    pub const USER: u16 = 0x7FFF;
}

/// Connection request types of the handshake (`m_iReqType`).
pub mod req {
    /// A client's request (and a server's cookie challenge, which repeats it).
    pub const REQUEST: i32 = 1;
    /// A rendezvous request.
    pub const RENDEZVOUS: i32 = 0;
    /// A response: the client's cookie echo, the server's and the rendezvous peer's answer.
    pub const RESPONSE: i32 = -1;
    /// The second rendezvous response.
    pub const RESPONSE2: i32 = -2;
}

/// Socket types of the handshake.
pub mod sock {
    /// A byte stream (`SOCK_STREAM`).
    pub const STREAM: i32 = 1;
    /// Messages (`SOCK_DGRAM`).
    pub const DGRAM: i32 = 2;
}

/// A handshake body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Handshake {
    /// UDT version (4).
    pub version: i32,
    /// Socket type ([`sock`]).
    pub sock_type: i32,
    /// Initial sequence number.
    pub isn: i32,
    /// Maximum packet size (IP datagram size, e.g. 1500).
    pub mss: i32,
    /// Flow window (maximum packets in flight).
    pub flow_window: i32,
    /// Connection request type ([`req`]).
    pub req_type: i32,
    /// Sender's socket id.
    pub socket_id: i32,
    /// SYN cookie.
    pub cookie: i32,
    /// The address the sender sees the peer at, as UDT4 stores it (4 words, host order of
    /// the `s_addr` bytes).
    pub peer_ip: [u32; 4],
}

/// The body of an ACK. UDT4 sends three sizes: a *light* ACK (the acknowledged sequence
/// number only), a *lite* ACK (plus RTT, RTT variance and available buffer) and a *full* one
/// (plus receiving rate and link capacity, at most once per SYN).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AckBody {
    /// Every packet before this sequence number was received.
    pub ack: u32,
    /// RTT, RTT variance (µs) and available buffer (packets); absent in a light ACK.
    pub lite: Option<(u32, u32, u32)>,
    /// Packet arrival rate and estimated link capacity (packets/s); full ACK only.
    pub full: Option<(u32, u32)>,
}

/// The body of a control packet, by type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ControlBody {
    /// Handshake.
    Handshake(Handshake),
    /// Keep-alive; the optional word is UDT4's padding.
    KeepAlive(Option<u32>),
    /// Acknowledgement; the ACK sequence number is the header's additional info.
    Ack(AckBody),
    /// Loss report: raw loss-list words (a word with bit 31 set starts a range that the next
    /// word ends). See [`nak_ranges`] and [`nak_words`].
    Nak(Vec<u32>),
    /// Congestion warning (padding).
    CongestionWarning(Option<u32>),
    /// Shutdown (padding).
    Shutdown(Option<u32>),
    /// ACK of an ACK; the ACK sequence number is the header's additional info (padding).
    Ack2(Option<u32>),
    /// Message drop request: the message number is the header's additional info; the first
    /// and last sequence numbers of the message (UDT4 sends both words; `None` if absent).
    DropRequest(Option<(u32, u32)>),
    /// Error signal: the error code is the header's additional info (padding).
    ErrorSignal(Option<u32>),
    /// User-defined control; the extended type is the header's reserved field.
    User(Vec<u8>),
}

impl ControlBody {
    /// The control type number.
    pub fn type_code(&self) -> u16 {
        match self {
            ControlBody::Handshake(_) => ctrl::HANDSHAKE,
            ControlBody::KeepAlive(_) => ctrl::KEEPALIVE,
            ControlBody::Ack(_) => ctrl::ACK,
            ControlBody::Nak(_) => ctrl::NAK,
            ControlBody::CongestionWarning(_) => ctrl::CONGESTION_WARNING,
            ControlBody::Shutdown(_) => ctrl::SHUTDOWN,
            ControlBody::Ack2(_) => ctrl::ACK2,
            ControlBody::DropRequest(_) => ctrl::DROP_REQUEST,
            ControlBody::ErrorSignal(_) => ctrl::ERROR_SIGNAL,
            ControlBody::User(_) => ctrl::USER,
        }
    }
}

/// A control packet.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Control {
    /// The header's low 16 bits (zero, or the extended type of a user-defined packet).
    pub reserved: u16,
    /// Additional info: ACK sequence number (ACK, ACK2), message number (drop request),
    /// error code (error signal).
    pub info: u32,
    /// Microseconds since the sender's connection started.
    pub timestamp: u32,
    /// The receiving socket's id (0 in a first handshake).
    pub dst: u32,
    /// Type and body.
    pub body: ControlBody,
}

/// A parsed UDT4 packet; a data packet borrows its payload from the datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Packet<'a> {
    /// A data packet.
    Data(DataHeader, &'a [u8]),
    /// A control packet.
    Control(Control),
}

fn put(out: &mut Vec<u8>, w: u32) {
    out.extend_from_slice(&w.to_be_bytes());
}

/// The 32-bit big-endian words of `b` (whose length is a multiple of 4).
fn words(b: &[u8]) -> impl Iterator<Item = u32> + '_ {
    b.chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
}

/// A body that is empty or one padding word.
fn pad(body: &[u8], what: &'static str) -> Result<Option<u32>, PacketError> {
    match body.len() {
        0 => Ok(None),
        4 => Ok(words(body).next()),
        _ => Err(PacketError::Invalid(what)),
    }
}

/// Checks a loss list: a range start (bit 31) is followed by a plain word.
fn check_nak(w: &[u32]) -> Result<(), PacketError> {
    if w.is_empty() || w.len() > MAX_NAK_WORDS {
        return Err(PacketError::Invalid("NAK length"));
    }
    let mut i = 0;
    while i < w.len() {
        if w[i] & 0x8000_0000 != 0 {
            match w.get(i + 1) {
                Some(&end) if end & 0x8000_0000 == 0 => i += 2,
                _ => return Err(PacketError::Invalid("NAK range")),
            }
        } else {
            i += 1;
        }
    }
    Ok(())
}

/// The loss ranges `(first, last)` of a NAK's words (already checked by the parser).
pub fn nak_ranges(w: &[u32]) -> impl Iterator<Item = (u32, u32)> + '_ {
    let mut i = 0;
    core::iter::from_fn(move || {
        let first = *w.get(i)?;
        if first & 0x8000_0000 != 0 {
            let last = w.get(i + 1).copied().unwrap_or(first) & MAX_SEQ;
            i += 2;
            Some((first & MAX_SEQ, last))
        } else {
            i += 1;
            Some((first, first))
        }
    })
}

/// Encodes loss ranges as UDT4 does: a single loss as one word, a range as start with bit 31
/// set then end.
pub fn nak_words(ranges: impl IntoIterator<Item = (u32, u32)>, out: &mut Vec<u32>) {
    for (a, b) in ranges {
        if a == b {
            out.push(a & MAX_SEQ);
        } else {
            out.push(a & MAX_SEQ | 0x8000_0000);
            out.push(b & MAX_SEQ);
        }
    }
}

impl<'a> Packet<'a> {
    /// The destination socket id of a datagram (the header's fourth word, in data and
    /// control packets alike), read without parsing the rest; `None` when shorter than
    /// a header.
    pub fn peek_dst(b: &[u8]) -> Option<u32> {
        let w = b.get(12..HEADER_LEN)?;
        Some(u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
    }

    /// Parses one datagram. Never panics; anything malformed is an error.
    pub fn parse(b: &'a [u8]) -> Result<Packet<'a>, PacketError> {
        if b.len() < HEADER_LEN {
            return Err(PacketError::Truncated);
        }
        let mut h = words(&b[..HEADER_LEN]);
        let mut next = || h.next().unwrap_or(0);
        let (w0, w1, timestamp, dst) = (next(), next(), next(), next());
        let body = &b[HEADER_LEN..];
        if w0 & 0x8000_0000 == 0 {
            let hdr = DataHeader {
                seq: w0,
                boundary: Boundary::from_bits(w1 >> 30),
                in_order: w1 & (1 << 29) != 0,
                msg: w1 & MAX_MSG,
                timestamp,
                dst,
            };
            return Ok(Packet::Data(hdr, body));
        }
        let ty = ((w0 >> 16) & 0x7FFF) as u16;
        let reserved = w0 as u16;
        if ty != ctrl::USER && !body.len().is_multiple_of(4) {
            return Err(PacketError::Invalid("control body length"));
        }
        let body = match ty {
            ctrl::HANDSHAKE => {
                if body.len() != HANDSHAKE_LEN {
                    return Err(PacketError::Invalid("handshake length"));
                }
                let mut w = words(body);
                let mut n = || w.next().unwrap_or(0);
                let mut hs = Handshake {
                    version: n() as i32,
                    sock_type: n() as i32,
                    isn: n() as i32,
                    mss: n() as i32,
                    flow_window: n() as i32,
                    req_type: n() as i32,
                    socket_id: n() as i32,
                    cookie: n() as i32,
                    peer_ip: [0; 4],
                };
                for ip in &mut hs.peer_ip {
                    *ip = n();
                }
                ControlBody::Handshake(hs)
            }
            ctrl::KEEPALIVE => ControlBody::KeepAlive(pad(body, "keep-alive")?),
            ctrl::ACK => {
                let w: Vec<u32> = words(body).collect();
                let ack = match w.len() {
                    1 => AckBody {
                        ack: w[0],
                        lite: None,
                        full: None,
                    },
                    4 => AckBody {
                        ack: w[0],
                        lite: Some((w[1], w[2], w[3])),
                        full: None,
                    },
                    6 => AckBody {
                        ack: w[0],
                        lite: Some((w[1], w[2], w[3])),
                        full: Some((w[4], w[5])),
                    },
                    _ => return Err(PacketError::Invalid("ACK length")),
                };
                ControlBody::Ack(ack)
            }
            ctrl::NAK => {
                let w: Vec<u32> = words(body).take(MAX_NAK_WORDS + 1).collect();
                check_nak(&w)?;
                ControlBody::Nak(w)
            }
            ctrl::CONGESTION_WARNING => {
                ControlBody::CongestionWarning(pad(body, "congestion warning")?)
            }
            ctrl::SHUTDOWN => ControlBody::Shutdown(pad(body, "shutdown")?),
            ctrl::ACK2 => ControlBody::Ack2(pad(body, "ACK2")?),
            ctrl::DROP_REQUEST => match body.len() {
                0 => ControlBody::DropRequest(None),
                8 => {
                    let mut w = words(body);
                    let first = w.next().unwrap_or(0);
                    ControlBody::DropRequest(Some((first, w.next().unwrap_or(0))))
                }
                _ => return Err(PacketError::Invalid("drop request length")),
            },
            ctrl::ERROR_SIGNAL => ControlBody::ErrorSignal(pad(body, "error signal")?),
            ctrl::USER => {
                if body.len() > MAX_USER_BODY {
                    return Err(PacketError::Invalid("user-defined length"));
                }
                ControlBody::User(body.to_vec())
            }
            other => return Err(PacketError::UnknownType(other)),
        };
        Ok(Packet::Control(Control {
            reserved,
            info: w1,
            timestamp,
            dst,
            body,
        }))
    }

    /// Writes the packet (appending to `out`).
    pub fn emit(&self, out: &mut Vec<u8>) {
        match self {
            Packet::Data(h, payload) => {
                h.emit(out);
                out.extend_from_slice(payload);
            }
            Packet::Control(c) => c.emit(out),
        }
    }

    /// Bytes [`Packet::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            Packet::Data(_, p) => HEADER_LEN + p.len(),
            Packet::Control(c) => c.buffer_len(),
        }
    }
}

impl Control {
    /// A control packet with zero reserved bits.
    pub fn new(info: u32, timestamp: u32, dst: u32, body: ControlBody) -> Self {
        Control {
            reserved: 0,
            info,
            timestamp,
            dst,
            body,
        }
    }

    /// Bytes [`Control::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        let opt = |p: &Option<u32>| if p.is_some() { 4 } else { 0 };
        HEADER_LEN
            + match &self.body {
                ControlBody::Handshake(_) => HANDSHAKE_LEN,
                ControlBody::Ack(a) => {
                    4 + if a.lite.is_some() { 12 } else { 0 } + if a.full.is_some() { 8 } else { 0 }
                }
                ControlBody::Nak(w) => 4 * w.len(),
                ControlBody::DropRequest(r) => {
                    if r.is_some() {
                        8
                    } else {
                        0
                    }
                }
                ControlBody::User(d) => d.len(),
                ControlBody::KeepAlive(p)
                | ControlBody::CongestionWarning(p)
                | ControlBody::Shutdown(p)
                | ControlBody::Ack2(p)
                | ControlBody::ErrorSignal(p) => opt(p),
            }
    }

    /// Writes the packet (appending to `out`).
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.reserve(self.buffer_len());
        put(
            out,
            0x8000_0000 | u32::from(self.body.type_code()) << 16 | u32::from(self.reserved),
        );
        put(out, self.info);
        put(out, self.timestamp);
        put(out, self.dst);
        match &self.body {
            ControlBody::Handshake(h) => {
                for w in [
                    h.version,
                    h.sock_type,
                    h.isn,
                    h.mss,
                    h.flow_window,
                    h.req_type,
                    h.socket_id,
                    h.cookie,
                ] {
                    put(out, w as u32);
                }
                for &w in &h.peer_ip {
                    put(out, w);
                }
            }
            ControlBody::Ack(a) => {
                put(out, a.ack);
                if let Some((rtt, var, avail)) = a.lite {
                    put(out, rtt);
                    put(out, var);
                    put(out, avail);
                }
                if let Some((rate, cap)) = a.full {
                    put(out, rate);
                    put(out, cap);
                }
            }
            ControlBody::Nak(w) => w.iter().for_each(|&w| put(out, w)),
            ControlBody::DropRequest(r) => {
                if let Some((a, b)) = r {
                    put(out, *a);
                    put(out, *b);
                }
            }
            ControlBody::User(d) => out.extend_from_slice(d),
            ControlBody::KeepAlive(p)
            | ControlBody::CongestionWarning(p)
            | ControlBody::Shutdown(p)
            | ControlBody::Ack2(p)
            | ControlBody::ErrorSignal(p) => {
                if let Some(w) = p {
                    put(out, *w);
                }
            }
        }
    }
}

impl fmt::Display for Packet<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Packet::Data(h, p) => write!(
                f,
                "DATA seq={} msg={} {:?}{} len={}",
                h.seq,
                h.msg,
                h.boundary,
                if h.in_order { " in-order" } else { "" },
                p.len()
            ),
            Packet::Control(c) => write!(f, "CTRL {:?} info={}", c.body, c.info),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn roundtrip(b: &[u8]) {
        if let Ok(p) = Packet::parse(b) {
            let mut out = Vec::new();
            p.emit(&mut out);
            assert_eq!(out, b, "{p}");
            assert_eq!(p.buffer_len(), b.len());
        }
    }

    #[test]
    fn nak_words_and_ranges_agree() {
        let mut w = Vec::new();
        nak_words([(5, 5), (7, 9), (MAX_SEQ, MAX_SEQ)], &mut w);
        assert_eq!(w, vec![5, 7 | 0x8000_0000, 9, MAX_SEQ]);
        assert!(check_nak(&w).is_ok());
        let r: Vec<_> = nak_ranges(&w).collect();
        assert_eq!(r, vec![(5, 5), (7, 9), (MAX_SEQ, MAX_SEQ)]);
        assert!(check_nak(&[0x8000_0001]).is_err());
        assert!(check_nak(&[0x8000_0001, 0x8000_0002]).is_err());
    }

    #[test]
    fn malformed_control_is_an_error() {
        let ack = Control::new(1, 0, 7, ControlBody::Ack2(Some(0)));
        let mut b = Vec::new();
        ack.emit(&mut b);
        b.truncate(18);
        assert_eq!(
            Packet::parse(&b),
            Err(PacketError::Invalid("control body length"))
        );
        b.truncate(10);
        assert_eq!(Packet::parse(&b), Err(PacketError::Truncated));
        let mut u = vec![0x80, 0x09, 0, 0];
        u.extend_from_slice(&[0; 12]);
        assert_eq!(Packet::parse(&u), Err(PacketError::UnknownType(9)));
    }

    fn arb_body() -> impl Strategy<Value = ControlBody> {
        let p = proptest::option::of(any::<u32>());
        prop_oneof![
            (any::<[i32; 8]>(), any::<[u32; 4]>()).prop_map(|(w, peer_ip)| ControlBody::Handshake(
                Handshake {
                    version: w[0],
                    sock_type: w[1],
                    isn: w[2],
                    mss: w[3],
                    flow_window: w[4],
                    req_type: w[5],
                    socket_id: w[6],
                    cookie: w[7],
                    peer_ip,
                }
            )),
            p.clone().prop_map(ControlBody::KeepAlive),
            (
                any::<u32>(),
                proptest::option::of(any::<(u32, u32, u32)>()),
                any::<(u32, u32)>()
            )
                .prop_map(|(ack, lite, f)| ControlBody::Ack(AckBody {
                    ack,
                    lite,
                    full: lite.map(|_| f),
                })),
            proptest::collection::vec((0..=MAX_SEQ, 0..=MAX_SEQ), 1..20).prop_map(|r| {
                let mut w = Vec::new();
                nak_words(r, &mut w);
                ControlBody::Nak(w)
            }),
            p.clone().prop_map(ControlBody::CongestionWarning),
            p.clone().prop_map(ControlBody::Shutdown),
            p.clone().prop_map(ControlBody::Ack2),
            proptest::option::of(any::<(u32, u32)>()).prop_map(ControlBody::DropRequest),
            p.prop_map(ControlBody::ErrorSignal),
            proptest::collection::vec(any::<u8>(), 0..64).prop_map(ControlBody::User),
        ]
    }

    proptest! {
        #[test]
        fn control_roundtrip(body in arb_body(), info: u32, ts: u32, dst: u32, ext: u16) {
            let reserved = if matches!(body, ControlBody::User(_)) { ext } else { 0 };
            let c = Control { reserved, info, timestamp: ts, dst, body };
            let mut b = Vec::new();
            c.emit(&mut b);
            prop_assert_eq!(b.len(), c.buffer_len());
            let p = Packet::parse(&b).unwrap();
            prop_assert_eq!(&p, &Packet::Control(c));
            roundtrip(&b);
        }

        #[test]
        fn data_roundtrip(seq in 0..=MAX_SEQ, msg in 0..=MAX_MSG, b in 0u32..4, o: bool,
                          ts: u32, dst: u32, payload in proptest::collection::vec(any::<u8>(), 0..100)) {
            let h = DataHeader { seq, boundary: Boundary::from_bits(b), in_order: o, msg,
                                 timestamp: ts, dst };
            let mut out = Vec::new();
            Packet::Data(h, &payload).emit(&mut out);
            prop_assert_eq!(Packet::parse(&out).unwrap(), Packet::Data(h, &payload[..]));
        }

        #[test]
        fn parse_never_panics_and_reemits_exactly(
            head in prop_oneof![Just(0x8000u16), 0x8000u16..0x8009, Just(0xFFFF), any::<u16>()],
            rest in proptest::collection::vec(any::<u8>(), 0..120)) {
            let mut b = head.to_be_bytes().to_vec();
            b.extend_from_slice(&rest);
            roundtrip(&b);
        }
    }
}
