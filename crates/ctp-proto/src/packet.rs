//! Building and opening packets: the one place a native packet gets its header and its seal,
//! and the one place a received short packet is opened — before any of its frames is parsed.
//!
//! ```text
//! out:  ShortPacket::begin (header) → frames written by the connection → ShortPacket::seal
//! in:   endpoint reads the dcid → open_short (unprotect header, recover pn, open) → frames
//! ```

use crate::protection::{crc32c, PacketProtection, Unprotected};
use crate::wire::header::{
    ConnectionId, Header, LongType, NoState, ECHO_LEN, SHORT_PN_OFFSET, SHORT_RESERVED, VERSION,
};
use crate::wire::truncated::Truncated;
use crate::wire::Reader;

/// A short packet being built at the end of a buffer (a batch may hold datagrams before it).
#[derive(Clone, Copy, Debug)]
#[must_use = "a begun packet is sealed or abandoned"]
pub struct ShortPacket {
    start: usize,
    header_len: usize,
    pn: u64,
}

impl ShortPacket {
    /// Appends the header of packet number `pn`, sent as `pn_wire`, for the peer's
    /// connection id `dcid`.
    pub fn begin(out: &mut Vec<u8>, dcid: ConnectionId, pn: u64, pn_wire: Truncated) -> Self {
        let start = out.len();
        // The key phase is the protection's to set when it seals.
        Header::Short {
            dcid,
            pn: pn_wire,
            key_phase: false,
        }
        .emit(out);
        ShortPacket {
            start,
            header_len: out.len() - start,
            pn,
        }
    }

    /// Where the packet starts in the buffer.
    pub fn start(&self) -> usize {
        self.start
    }

    /// Bytes of header.
    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// Its whole packet number.
    pub fn pn(&self) -> u64 {
        self.pn
    }

    /// Removes the packet from the buffer: nothing was worth sending, and its number stays
    /// unused.
    pub fn abandon(self, out: &mut Vec<u8>) {
        out.truncate(self.start);
    }

    /// Seals the packet (header, then everything written after it) and returns its size on
    /// the wire.
    pub fn seal(self, out: &mut Vec<u8>, protection: &mut dyn PacketProtection) -> usize {
        protection.seal(self.pn, out, self.start, self.header_len);
        protection.protect_header(&mut out[self.start..], SHORT_PN_OFFSET);
        out.len() - self.start
    }
}

/// A received short packet, opened.
#[derive(Debug)]
pub struct Opened<'a> {
    /// Its whole packet number.
    pub pn: u64,
    /// Its frames, now believable.
    pub frames: &'a [u8],
}

/// Opens a received short packet: removes header protection, checks the reserved bits of
/// the first byte (the key phase may be set), reads the truncated packet number, recovers
/// the whole one with `recover` (`None`: no packet of this connection can have it), and
/// opens the payload with that number. Nothing is parsed beyond the packet number unless
/// the packet opens.
pub fn open_short<'a>(
    packet: &'a mut [u8],
    protection: &mut dyn PacketProtection,
    recover: impl FnOnce(Truncated) -> Option<u64>,
) -> Result<Opened<'a>, Unprotected> {
    protection.unprotect_header(packet, SHORT_PN_OFFSET)?;
    if packet.first().ok_or(Unprotected)? & SHORT_RESERVED != 0 {
        return Err(Unprotected);
    }
    let mut r = Reader::new(packet.get(SHORT_PN_OFFSET..).ok_or(Unprotected)?);
    let truncated = Truncated::read(&mut r).map_err(|_| Unprotected)?;
    let header_len = SHORT_PN_OFFSET + truncated.wire_len();
    let pn = recover(truncated).ok_or(Unprotected)?;
    let len = protection.open(pn, packet, header_len)?;
    Ok(Opened {
        pn,
        frames: &packet[header_len..header_len + len],
    })
}

/// A sealed handshake packet (long header, `body`, CRC32C trailer), padded with zeros to
/// `pad_to` bytes when shorter: what an endpoint sends, and what a test or fuzzer needs to
/// speak to one.
pub fn long_packet(
    ty: LongType,
    dcid: ConnectionId,
    scid: ConnectionId,
    body: &[u8],
    pad_to: usize,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(pad_to.max(64));
    Header::Long {
        ty,
        version: VERSION,
        dcid,
        scid,
    }
    .emit(&mut out);
    out.extend_from_slice(body);
    if out.len() + crc32c::TRAILER_LEN < pad_to {
        out.resize(pad_to - crc32c::TRAILER_LEN, 0);
    }
    crc32c::seal_long(&mut out);
    out
}

/// Bytes of a NOSTATE packet on the wire: long header, echo, CRC32C trailer. Only a
/// datagram larger than this is answered with one, so a NOSTATE never amplifies.
pub const NOSTATE_LEN: usize = 13 + ECHO_LEN + crc32c::TRAILER_LEN;

/// A NOSTATE packet ([`LongType::NoState`]): `n.cid` is the connection id of the short
/// packet nobody here knows (sent as the source id; the destination id is zero) and
/// `n.echo` its trailing bytes.
pub fn nostate_packet(n: &NoState) -> Vec<u8> {
    let p = long_packet(LongType::NoState, 0, n.cid, &n.echo, 0);
    debug_assert_eq!(p.len(), NOSTATE_LEN);
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protection::Crc32c;

    fn sealed(pn: u64, sent_as: Truncated, frames: &[u8]) -> Vec<u8> {
        let mut out = vec![0xee; 3]; // a datagram before it in the batch
        let p = ShortPacket::begin(&mut out, 0x0102_0304, pn, sent_as);
        out.extend_from_slice(frames);
        let size = p.seal(&mut out, &mut Crc32c);
        assert_eq!(size, out.len() - 3);
        out.split_off(3)
    }

    #[test]
    fn a_sealed_packet_opens_to_its_number_and_frames() {
        let mut p = sealed(70_000, Truncated::encode(70_000, Some(10)), b"frames");
        let o = open_short(&mut p, &mut Crc32c, |t| Some(t.expand(69_990))).unwrap();
        assert_eq!((o.pn, o.frames), (70_000, &b"frames"[..]));
    }

    /// A late copy recovered to another number fails, and the recovery is not even asked
    /// for when the header is cut short.
    #[test]
    fn a_packet_recovered_to_another_number_or_cut_short_fails() {
        let mut p = sealed(70_000, Truncated::encode(70_000, Some(10)), b"frames");
        let late = open_short(&mut p, &mut Crc32c, |t| Some(t.expand(70_000 + 200)));
        assert_eq!(late.unwrap_err(), Unprotected);
        let mut cut = p[..SHORT_PN_OFFSET].to_vec();
        let r = open_short(&mut cut, &mut Crc32c, |_| panic!("no number to recover"));
        assert_eq!(r.unwrap_err(), Unprotected);
        let refused = open_short(&mut p, &mut Crc32c, |_| None);
        assert_eq!(refused.unwrap_err(), Unprotected);
    }

    /// The reserved bits are checked once header protection is removed (here, none is):
    /// a packet with one set fails to open before its number is recovered.
    #[test]
    fn a_reserved_bit_set_fails_to_open() {
        let p = sealed(70_000, Truncated::encode(70_000, Some(10)), b"frames");
        for bit in 0..6 {
            let mut q = p.clone();
            q[0] |= 1 << bit;
            assert!(
                crate::wire::header::short_dcid(&q).is_ok(),
                "form bits only"
            );
            let r = open_short(&mut q, &mut Crc32c, |t| {
                assert_eq!(1 << bit, crate::wire::header::KEY_PHASE, "bit {bit}");
                Some(t.expand(69_990))
            });
            assert_eq!(r.unwrap_err(), Unprotected, "bit {bit}");
        }
    }

    #[test]
    fn a_nostate_packet_is_its_fixed_size_and_parses_back() {
        let n = NoState {
            cid: 0xabcd_0123,
            echo: [9; ECHO_LEN],
        };
        let p = nostate_packet(&n);
        assert_eq!(p.len(), NOSTATE_LEN);
        let body = crc32c::open_long(&p).unwrap();
        let mut r = Reader::new(body);
        let Header::Long { ty, dcid, scid, .. } = Header::parse(&mut r).unwrap() else {
            panic!("a long header");
        };
        assert_eq!((ty, dcid), (LongType::NoState, 0));
        assert_eq!(NoState::parse(scid, r.rest()), Ok(n));
    }

    #[test]
    fn an_abandoned_packet_leaves_the_batch_as_it_was() {
        let mut out = vec![1, 2, 3];
        let p = ShortPacket::begin(&mut out, 9, 1, Truncated::whole(1));
        assert!(out.len() > 3);
        p.abandon(&mut out);
        assert_eq!(out, [1, 2, 3]);
    }
}
