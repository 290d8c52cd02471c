//! Packet headers.
//!
//! ```text
//! long header (handshake):  1 1 0 0 T T T T | version u32 | dcid u32 | scid u32 | body…  | crc32c
//! short header (data):      0 1 0 0 0 K 0 0 | dcid u32 | packet number (truncated) | frames… | seal
//! ```
//! A short packet's seal is its connection's packet protection ([`crate::protection`]):
//! a CRC32C trailer, or an AEAD tag on a secure channel. `K` is the key phase
//! ([`KEY_PHASE`]), which only an AEAD sets. An AEAD also masks the low five bits of the
//! first byte and the packet number (header protection), so on the wire those bits are
//! noise: [`short_dcid`] checks only the two form bits, and the reserved bits are checked
//! once the header protection is removed ([`crate::packet::open_short`]).
//!
//! The second-highest bit is always set so that a datagram of another protocol that happens
//! to arrive (a zero byte, for instance) is rejected at the first byte. Connection ids are
//! chosen by the side that receives packets carrying them, so demultiplexing is one lookup.

use super::truncated::Truncated;
use super::{Reader, WireError};

/// The only version this implementation speaks.
pub const VERSION: u32 = 0xc7a0_0007;

const LONG: u8 = 0x80;
const FIXED: u8 = 0x40;

/// A connection id: 32 random bits chosen by the endpoint that will receive it (as UDT's
/// socket id). With the peer's address, which the endpoint checks too, it is what a blind
/// attacker would have to guess.
pub type ConnectionId = u32;

/// True when a datagram starting with `first` has a long (handshake) header.
pub fn is_long(first: u8) -> bool {
    first & LONG != 0
}

/// Offset of a short packet's (truncated) packet number: after the first byte and the
/// destination connection id.
pub const SHORT_PN_OFFSET: usize = 1 + 4;

/// The key-phase bit of a short header's first byte: which generation of keys sealed the
/// packet ([`crate::protection::aead`]). Zero under protections without key updates.
pub const KEY_PHASE: u8 = 0x04;

/// The bits of a short header's first byte that must be zero once header protection is
/// removed: all but the two form bits and [`KEY_PHASE`].
pub const SHORT_RESERVED: u8 = 0x3f & !KEY_PHASE;

/// The destination connection id of a short packet, once its form bits check out: all the
/// endpoint reads before the packet's connection opens it. The other bits of the first
/// byte may be masked by header protection and are checked after it is removed.
pub fn short_dcid(packet: &[u8]) -> Result<ConnectionId, WireError> {
    let mut r = Reader::new(packet);
    let first = r.u8()?;
    if first & (LONG | FIXED) != FIXED {
        return Err(WireError::Invalid("short header"));
    }
    r.u32()
}

/// Kinds of long-header (handshake) packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LongType {
    /// Initiator → responder: the requested profile.
    Init = 0,
    /// Responder → initiator: the negotiated profile and a stateless cookie.
    InitAck = 1,
    /// Initiator → responder: the cookie, echoed; proves the initiator's address.
    CookieEcho = 2,
    /// Responder → initiator: the request is refused, with a reason.
    Refuse = 3,
    /// Either way, on a secure channel: a Noise message (2 from the responder, 3 from the
    /// initiator).
    Handshake = 4,
    /// Either way, sent statelessly: the sender has no connection for a short packet it
    /// received. The header's source connection id is that packet's destination id (the
    /// receiver's *remote* id), the destination id is zero, and the body is the
    /// [`ECHO_LEN`] trailing bytes of the packet ([`NoState`]).
    NoState = 5,
}

impl LongType {
    fn from_bits(b: u8) -> Result<Self, WireError> {
        Ok(match b {
            0 => LongType::Init,
            1 => LongType::InitAck,
            2 => LongType::CookieEcho,
            3 => LongType::Refuse,
            4 => LongType::Handshake,
            5 => LongType::NoState,
            other => return Err(WireError::Unknown("long packet", other.into())),
        })
    }
}

/// Bytes of a triggering packet a NOSTATE echoes: its trailing bytes, which are the AEAD
/// tag on a secure channel (and the CRC32C with the payload's tail on a plain one).
pub const ECHO_LEN: usize = 16;

/// The body of a NOSTATE packet ([`LongType::NoState`]), with the connection id from its
/// header: which connection the sender does not know, and the trailing bytes of the
/// packet that showed it. The receiver honours it only when the echo equals the end of
/// the last packet it sent on that connection, which only someone who saw that packet
/// can know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoState {
    /// The connection id the unknown short packet carried (the receiver's remote id).
    pub cid: ConnectionId,
    /// The last [`ECHO_LEN`] bytes of that packet.
    pub echo: [u8; ECHO_LEN],
}

impl NoState {
    /// Reads a NOSTATE from its header's source id `scid` and its body (the bytes after
    /// the long header, without the CRC32C trailer): exactly [`ECHO_LEN`] bytes.
    pub fn parse(scid: ConnectionId, body: &[u8]) -> Result<NoState, WireError> {
        let echo = body
            .try_into()
            .map_err(|_| WireError::Invalid("nostate echo"))?;
        Ok(NoState { cid: scid, echo })
    }

    /// The echo of a packet: its last [`ECHO_LEN`] bytes (zeros before a shorter one).
    pub fn echo_of(packet: &[u8]) -> [u8; ECHO_LEN] {
        // Every packet a connection sends is longer than the echo: one 16-byte load, where
        // the general case below is a call to `memcpy` (taken for every packet sent).
        if let Some(tail) = packet.last_chunk::<ECHO_LEN>() {
            return *tail;
        }
        let mut echo = [0u8; ECHO_LEN];
        let tail = &packet[packet.len().saturating_sub(ECHO_LEN)..];
        echo[ECHO_LEN - tail.len()..].copy_from_slice(tail);
        echo
    }
}

/// A parsed header; the rest of the packet (without the integrity trailer) follows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Header {
    /// A handshake packet.
    Long {
        /// Packet kind.
        ty: LongType,
        /// Protocol version.
        version: u32,
        /// Destination connection id (zero in `Init`).
        dcid: ConnectionId,
        /// Source connection id.
        scid: ConnectionId,
    },
    /// A packet of an established connection.
    Short {
        /// Destination connection id.
        dcid: ConnectionId,
        /// Packet number, unique per connection and direction, never reused; its low bits
        /// as sent (the connection recovers the whole number).
        pn: Truncated,
        /// The key phase (an AEAD's key generation; always clear under CRC32C).
        key_phase: bool,
    },
}

impl Header {
    /// Destination connection id of the packet.
    pub fn dcid(&self) -> ConnectionId {
        match *self {
            Header::Long { dcid, .. } | Header::Short { dcid, .. } => dcid,
        }
    }

    /// Parses a header from `r`. The version of a long header is checked here. A short
    /// header is parsed as it is before header protection or after it is removed.
    pub fn parse(r: &mut Reader<'_>) -> Result<Header, WireError> {
        let first = r.u8()?;
        if first & FIXED == 0 {
            return Err(WireError::Invalid("fixed bit"));
        }
        if first & LONG != 0 {
            let ty = LongType::from_bits(first & 0x0f)?;
            if first & 0x30 != 0 {
                return Err(WireError::Invalid("reserved bits"));
            }
            let version = r.u32()?;
            if version != VERSION {
                return Err(WireError::UnsupportedVersion(version));
            }
            let dcid = r.u32()?;
            let scid = r.u32()?;
            Ok(Header::Long {
                ty,
                version,
                dcid,
                scid,
            })
        } else {
            // A short header as sent before header protection, or after it is removed: the
            // key phase may be set, no other bit.
            if first & SHORT_RESERVED != 0 {
                return Err(WireError::Invalid("reserved bits"));
            }
            let dcid = r.u32()?;
            let pn = Truncated::read(r)?;
            Ok(Header::Short {
                dcid,
                pn,
                key_phase: first & KEY_PHASE != 0,
            })
        }
    }

    /// Appends the header to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        match *self {
            Header::Long {
                ty,
                version,
                dcid,
                scid,
            } => {
                out.push(LONG | FIXED | ty as u8);
                out.extend_from_slice(&version.to_be_bytes());
                out.extend_from_slice(&dcid.to_be_bytes());
                out.extend_from_slice(&scid.to_be_bytes());
            }
            Header::Short {
                dcid,
                pn,
                key_phase,
            } => {
                out.push(if key_phase { FIXED | KEY_PHASE } else { FIXED });
                out.extend_from_slice(&dcid.to_be_bytes());
                pn.put(out);
            }
        }
    }

    /// Bytes the header takes on the wire.
    pub fn wire_len(&self) -> usize {
        match *self {
            Header::Long { .. } => 1 + 4 + 4 + 4,
            Header::Short { pn, .. } => 1 + 4 + pn.wire_len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        for h in [
            Header::Long {
                ty: LongType::CookieEcho,
                version: VERSION,
                dcid: 7,
                scid: u32::MAX,
            },
            Header::Short {
                dcid: 0xdead_beef,
                pn: Truncated::encode(1 << 33, Some(100)),
                key_phase: false,
            },
            Header::Short {
                dcid: 5,
                pn: Truncated::encode(77, Some(3)),
                key_phase: true,
            },
        ] {
            let mut out = Vec::new();
            h.emit(&mut out);
            assert_eq!(out.len(), h.wire_len());
            let mut r = Reader::new(&out);
            assert_eq!(Header::parse(&mut r).unwrap(), h);
            assert!(r.is_empty());
        }
    }

    #[test]
    fn unknown_version_and_bad_first_byte_are_rejected() {
        let mut out = Vec::new();
        Header::Long {
            ty: LongType::Init,
            version: 0x0bad,
            dcid: 0,
            scid: 1,
        }
        .emit(&mut out);
        assert_eq!(
            Header::parse(&mut Reader::new(&out)),
            Err(WireError::UnsupportedVersion(0x0bad))
        );
        assert_eq!(
            Header::parse(&mut Reader::new(&[0u8; 20])),
            Err(WireError::Invalid("fixed bit"))
        );
        assert_eq!(
            Header::parse(&mut Reader::new(&[0xcf; 20])),
            Err(WireError::Unknown("long packet", 0xf))
        );
    }

    #[test]
    fn nostate_reads_its_echo_and_nothing_else() {
        let echo: [u8; ECHO_LEN] = core::array::from_fn(|i| i as u8);
        assert_eq!(NoState::parse(9, &echo), Ok(NoState { cid: 9, echo }));
        assert!(NoState::parse(9, &echo[1..]).is_err());
        assert!(NoState::parse(9, &[0; ECHO_LEN + 1]).is_err());
        assert_eq!(LongType::from_bits(5), Ok(LongType::NoState));
        assert!(LongType::from_bits(6).is_err());
        let mut short = [0u8; ECHO_LEN];
        short[ECHO_LEN - 3..].copy_from_slice(&[1, 2, 3]);
        assert_eq!(NoState::echo_of(&[1, 2, 3]), short);
        assert_eq!(NoState::echo_of(&[&[7u8; 4][..], &echo].concat()), echo);
    }
}
