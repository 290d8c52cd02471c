//! AEAD packet protection: the secure channel's seal (RFC 9001's packet protection,
//! simplified for ctp's short header).
//!
//! ```text
//! sealed:   first byte | dcid | truncated pn | payload, encrypted   | tag (16)
//!           ╰─ masked ─╯        ╰─ masked ──╯                        ╰─ sample ─╯
//! ```
//!
//! - **Suites**: AES-128-GCM and ChaCha20-Poly1305 ([`Suite`]), from *ring* (the backend
//!   chosen by measurement, `benches/aead.rs` and `docs/decisions.md`).
//! - **Keys**: each direction has its own chain of 32-byte secrets, the first from the Noise
//!   handshake's `split()`. From a generation's secret, `blake3::derive_key` gives the packet
//!   key ([`CONTEXT_PACKET_KEY`]; AES-128 takes its first 16 bytes) and the IV
//!   ([`CONTEXT_PACKET_IV`], first 12 bytes); the next generation's secret is
//!   `derive_key(`[`CONTEXT_KEY_UPDATE`]`, secret)`. The header-protection key
//!   ([`CONTEXT_HEADER_PROTECTION`]) comes from the direction's *first* secret and stays for
//!   the connection's life, as in RFC 9001 §6: the receiver removes header protection before
//!   it knows the key phase, so that key cannot depend on it.
//! - **Nonce** = IV XOR the 62-bit whole packet number, big-endian in the last 8 bytes;
//!   **AAD** = the header as sent, before header protection (first byte with the key phase,
//!   dcid, truncated packet number).
//! - **Header protection**: the sample is the packet's last 16 bytes, its tag — a PRF output
//!   under the packet key, so no minimum payload is needed (QUIC samples at pn offset + 4
//!   and pads short packets). The mask is AES-128-ECB(hp key, sample) for AES-GCM, and the
//!   ChaCha20 block with counter = sample\[0..4\] little-endian and nonce = sample\[4..16\]
//!   for ChaCha20-Poly1305 (RFC 9001 §5.4.3, §5.4.4); mask\[0\] & 0x1f is XORed into the
//!   first byte (key phase and reserved bits), mask\[1..\] into the truncated packet number,
//!   all 1, 2, 4 or 8 of its bytes (RFC 9001 uses 5 mask bytes since QUIC's number is at
//!   most 4 bytes; ctp's may be 8, so the block primitives come from the RustCrypto `aes`
//!   and `chacha20` crates, whose output is the same block, whole).
//! - **Key update**: the sender moves to the next generation, flipping the key phase
//!   ([`crate::wire::header::KEY_PHASE`]), after [`Suite::confidentiality_limit`] packets
//!   sealed with one key (RFC 9001 §6.6), settable with [`Aead::with_update_after`]. The two
//!   directions are independent: each has its own secret chain, advanced by its sender
//!   alone, and a receiver that sees its peer update does not update its own sending keys
//!   (QUIC ties the two because one key phase bit covers both; here each direction's bit
//!   describes that direction only). The receiver holds the current key, the next one
//!   (derived in advance, so that a packet with the other phase costs no derivation an
//!   attacker could time) and the previous one for reordered packets: a packet whose phase
//!   differs from the current one is opened with the next key when its number is above
//!   every number opened in the current generation (a sender numbers packets in order, so a
//!   new generation's numbers are above the old one's), else with the previous key. A
//!   packet that opens with the next key promotes it. The previous key is dropped once the
//!   current generation has opened a number [`REPLAY_WINDOW`] − 1 above the lowest it
//!   opened: every packet of the previous generation (numbered below that lowest) is then
//!   [`REPLAY_WINDOW`] or more below the highest, which the replay window refuses anyway,
//!   so dropping the key loses nothing the window would let in.
//!   A receiver follows as long as one packet of each generation reaches it: a sender that
//!   moved two generations on while none of the middle one arrived is no longer understood
//!   (with the limits above, millions of packets lost in a row, a dead path anyway).
//! - **Replay window**: a packet whose number has already opened, or that is
//!   [`REPLAY_WINDOW`] or more below the highest opened, is refused before it is decrypted
//!   (a bitmap as in RFC 6479 and WireGuard); a number is recorded once its packet opens.
//!
//! No cryptographic primitive is written here: the AEADs are *ring*'s, the header-protection
//! blocks RustCrypto's, the derivations BLAKE3's. Secrets and keys are overwritten when a
//! generation is left, without a guarantee that no copy remains in memory.

use core::fmt;

use aes::cipher::{BlockEncrypt, KeyInit};
use chacha20::cipher::{KeyIvInit, StreamCipherCore};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey};

use super::{PacketProtection, Unprotected};
use crate::wire::header::KEY_PHASE;

/// `blake3::derive_key` context of a generation's packet key.
pub const CONTEXT_PACKET_KEY: &str = "ctp 2026-11 packet key";
/// `blake3::derive_key` context of a generation's IV.
pub const CONTEXT_PACKET_IV: &str = "ctp 2026-11 packet iv";
/// `blake3::derive_key` context of a direction's header-protection key.
pub const CONTEXT_HEADER_PROTECTION: &str = "ctp 2026-11 header protection";
/// `blake3::derive_key` context of the next generation's secret.
pub const CONTEXT_KEY_UPDATE: &str = "ctp 2026-11 key update";

/// Bytes of the authentication tag, the whole overhead.
pub const TAG_LEN: usize = 16;

/// How far below the highest packet number opened a packet may be and still open (when
/// its number has not opened before).
pub const REPLAY_WINDOW: u64 = 2048;

/// Bits of the first byte under the header-protection mask: the key phase and the reserved
/// bits.
const FIRST_BYTE_MASK: u8 = 0x1f;

/// Packet numbers are 62 bits.
const PN_LIMIT: u64 = 1 << 62;

/// An AEAD and its header protection, as negotiated by the handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Suite {
    /// AES-128-GCM, header protection AES-128-ECB.
    Aes128Gcm,
    /// ChaCha20-Poly1305, header protection ChaCha20.
    ChaCha20Poly1305,
}

impl Suite {
    /// Every suite, in the order of preference of a CPU with AES instructions.
    pub const ALL: [Suite; 2] = [Suite::Aes128Gcm, Suite::ChaCha20Poly1305];

    /// Its number on the wire (in the handshake's suite list): 1 and 2; 0 is no suite.
    pub fn id(self) -> u8 {
        match self {
            Suite::Aes128Gcm => 1,
            Suite::ChaCha20Poly1305 => 2,
        }
    }

    /// The suite numbered `id` on the wire, if this implementation has it.
    pub fn from_id(id: u8) -> Option<Suite> {
        Suite::ALL.into_iter().find(|s| s.id() == id)
    }

    /// Its name, for statistics, logs and configuration: `aes-128-gcm`,
    /// `chacha20-poly1305`.
    pub fn name(self) -> &'static str {
        match self {
            Suite::Aes128Gcm => "aes-128-gcm",
            Suite::ChaCha20Poly1305 => "chacha20-poly1305",
        }
    }

    /// Packets a sender seals with one key before it moves to the next generation
    /// (RFC 9001 §6.6): 2^23 for AES-128-GCM, 2^62 (never, in practice) for
    /// ChaCha20-Poly1305.
    pub fn confidentiality_limit(self) -> u64 {
        match self {
            Suite::Aes128Gcm => 1 << 23,
            Suite::ChaCha20Poly1305 => 1 << 62,
        }
    }

    /// Forged packets a receiver may fail to open, over all its keys, before it must stop
    /// using the connection (RFC 9001 §6.6): 2^52 for AES-128-GCM, 2^36 for
    /// ChaCha20-Poly1305. Counted in [`AeadStats::failed_opens`]; a connection that
    /// reaches it closes ([`PacketProtection::integrity_exhausted`]).
    pub fn integrity_limit(self) -> u64 {
        match self {
            Suite::Aes128Gcm => 1 << 52,
            Suite::ChaCha20Poly1305 => 1 << 36,
        }
    }

    fn algorithm(self) -> &'static ring::aead::Algorithm {
        match self {
            Suite::Aes128Gcm => &ring::aead::AES_128_GCM,
            Suite::ChaCha20Poly1305 => &ring::aead::CHACHA20_POLY1305,
        }
    }
}

impl fmt::Display for Suite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How long one connection may use its keys, when tighter than its suite's own limits
/// ([`Suite::confidentiality_limit`], [`Suite::integrity_limit`]): shorter-lived keys for
/// whoever wants them, and limits that tests can reach.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyLimits {
    /// Packets a sender seals under one key before it moves to the next (at least 1;
    /// `None`: the suite's confidentiality limit).
    pub update_after: Option<u64>,
    /// Packets that may fail to open over the connection's life before it must close
    /// (at least 1; `None`: the suite's integrity limit).
    pub failed_opens: Option<u64>,
}

/// Counters of one connection's packet protection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AeadStats {
    /// Packets sealed.
    pub sealed: u64,
    /// Packets opened.
    pub opened: u64,
    /// Packets that reached [`PacketProtection::open`] and failed it: forged, corrupted,
    /// recovered to the wrong number, sealed with a key no longer (or not yet) held, or too
    /// short to hold a tag. (A packet whose header protection cannot even be removed fails
    /// before that and is not counted here.)
    pub failed_opens: u64,
    /// Packets refused by the replay window before decryption: a number that has already
    /// opened, or one too far below the highest opened.
    pub replays: u64,
    /// Key generations moved to, sending and receiving together.
    pub key_updates: u64,
}

/// The packet key and IV of one generation of one direction.
struct PacketKey {
    key: LessSafeKey,
    iv: [u8; 12],
}

impl PacketKey {
    fn derive(suite: Suite, secret: &[u8; 32]) -> PacketKey {
        let alg = suite.algorithm();
        let key = blake3::derive_key(CONTEXT_PACKET_KEY, secret);
        let iv = blake3::derive_key(CONTEXT_PACKET_IV, secret);
        let unbound = UnboundKey::new(alg, &key[..alg.key_len()])
            .expect("the key is as long as the algorithm asks");
        PacketKey {
            key: LessSafeKey::new(unbound),
            iv: iv[..12].try_into().expect("12 of 32 bytes"),
        }
    }

    /// IV XOR the packet number, big-endian in the last 8 bytes.
    fn nonce(&self, pn: u64) -> Nonce {
        let mut n = self.iv;
        for (b, p) in n[4..].iter_mut().zip(pn.to_be_bytes()) {
            *b ^= p;
        }
        Nonce::assume_unique_for_key(n)
    }
}

/// ChaCha20 (IETF: 32-bit block counter, 96-bit nonce), block by block.
type ChaCha20Core = chacha20::ChaChaCore<chacha20::R20, chacha20::variants::Ietf>;

/// A direction's header-protection key.
enum HeaderKey {
    Aes(Box<aes::Aes128>),
    ChaCha([u8; 32]),
}

impl HeaderKey {
    fn derive(suite: Suite, first_secret: &[u8; 32]) -> HeaderKey {
        Self::new(
            suite,
            blake3::derive_key(CONTEXT_HEADER_PROTECTION, first_secret),
        )
    }

    /// The key from 32 bytes (AES-128 takes the first 16).
    fn new(suite: Suite, key: [u8; 32]) -> HeaderKey {
        match suite {
            Suite::Aes128Gcm => {
                let key: [u8; 16] = key[..16].try_into().expect("16 of 32 bytes");
                HeaderKey::Aes(Box::new(aes::Aes128::new(&key.into())))
            }
            Suite::ChaCha20Poly1305 => HeaderKey::ChaCha(key),
        }
    }

    /// The mask for `sample` (RFC 9001 §5.4.3, §5.4.4), 16 bytes of it.
    fn mask(&self, sample: &[u8; TAG_LEN]) -> [u8; 16] {
        match self {
            HeaderKey::Aes(aes) => {
                let mut block = aes::Block::from(*sample);
                aes.encrypt_block(&mut block);
                block.into()
            }
            HeaderKey::ChaCha(key) => {
                // The core, not the stream cipher: the stream refuses to give the block at
                // counter 2^32 - 1 (the end of its keystream), which a sample can ask for.
                let counter = u32::from_le_bytes([sample[0], sample[1], sample[2], sample[3]]);
                let nonce: [u8; 12] = sample[4..].try_into().expect("12 of 16 bytes");
                let mut chacha = ChaCha20Core::new(&(*key).into(), &nonce.into());
                chacha.set_block_pos(counter);
                let mut block = Default::default();
                chacha.write_keystream_block(&mut block);
                block[..16].try_into().expect("16 of 64 bytes")
            }
        }
    }

    /// The mask for the packet `packet`, or `None` when it cannot hold a byte of packet
    /// number after `pn_offset` and a tag.
    fn packet_mask(&self, packet: &[u8], pn_offset: usize) -> Option<[u8; 16]> {
        if packet.len() < pn_offset.checked_add(1 + TAG_LEN)? {
            return None;
        }
        let sample = packet[packet.len() - TAG_LEN..]
            .try_into()
            .expect("TAG_LEN bytes");
        Some(self.mask(&sample))
    }
}

/// Bytes of a truncated packet number whose first byte is `first` (its length is in the top
/// two bits, [`crate::wire::truncated`]).
fn pn_len(first: u8) -> usize {
    1 << (first >> 6)
}

/// The sending half: the current generation's secret and key.
struct Sender {
    secret: [u8; 32],
    key: PacketKey,
    phase: bool,
    generation: u64,
    sealed_with_key: u64,
    hp: HeaderKey,
}

impl Sender {
    fn new(suite: Suite, secret: [u8; 32]) -> Sender {
        Sender {
            key: PacketKey::derive(suite, &secret),
            hp: HeaderKey::derive(suite, &secret),
            secret,
            phase: false,
            generation: 0,
            sealed_with_key: 0,
        }
    }

    fn update(&mut self, suite: Suite) {
        self.secret = blake3::derive_key(CONTEXT_KEY_UPDATE, &self.secret);
        self.key = PacketKey::derive(suite, &self.secret);
        self.phase = !self.phase;
        self.generation += 1;
        self.sealed_with_key = 0;
    }
}

/// The replay window: the highest packet number opened and a bitmap of the numbers opened
/// below it (RFC 6479): bit `pn % 64` of word `(pn / 64) % WORDS`.
struct ReplayWindow {
    highest: Option<u64>,
    bitmap: [u64; WORDS],
}

/// Words of the bitmap: the window spans at most `REPLAY_WINDOW / 64 + 1` of them.
const WORDS: usize = (REPLAY_WINDOW / 64) as usize + 1;

impl ReplayWindow {
    fn new() -> ReplayWindow {
        ReplayWindow {
            highest: None,
            bitmap: [0; WORDS],
        }
    }

    fn slot(pn: u64) -> (usize, u64) {
        (((pn / 64) % WORDS as u64) as usize, 1 << (pn % 64))
    }

    /// Whether a packet numbered `pn` may still open.
    fn fresh(&self, pn: u64) -> bool {
        match self.highest {
            None => true,
            Some(h) if pn > h => true,
            Some(h) if h - pn >= REPLAY_WINDOW => false,
            Some(_) => {
                let (word, bit) = Self::slot(pn);
                self.bitmap[word] & bit == 0
            }
        }
    }

    /// Records that the packet numbered `pn` opened (it was [`Self::fresh`]).
    fn record(&mut self, pn: u64) {
        match self.highest {
            Some(h) if pn <= h => {}
            _ => {
                // Clear the words the window slides over, from the one after the highest's
                // to the new highest's (all of them when it jumps farther).
                let to = pn / 64;
                let from = self.highest.map_or(to, |h| h / 64 + 1);
                for w in from.max(to.saturating_sub(WORDS as u64 - 1))..=to {
                    self.bitmap[(w % WORDS as u64) as usize] = 0;
                }
                self.highest = Some(pn);
            }
        }
        let (word, bit) = Self::slot(pn);
        self.bitmap[word] |= bit;
    }
}

/// Which receiving key opens a packet.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Generation {
    Previous,
    Current,
    Next,
}

/// The receiving half: previous, current and next keys, the replay window.
struct Receiver {
    /// The next generation's secret (the one [`Self::next`] comes from).
    next_secret: [u8; 32],
    previous: Option<PacketKey>,
    current: PacketKey,
    next: PacketKey,
    phase: bool,
    generation: u64,
    /// Lowest and highest packet numbers opened in the current generation.
    lowest: Option<u64>,
    highest: Option<u64>,
    replay: ReplayWindow,
    hp: HeaderKey,
}

impl Receiver {
    fn new(suite: Suite, secret: [u8; 32]) -> Receiver {
        let next_secret = blake3::derive_key(CONTEXT_KEY_UPDATE, &secret);
        Receiver {
            previous: None,
            current: PacketKey::derive(suite, &secret),
            next: PacketKey::derive(suite, &next_secret),
            next_secret,
            phase: false,
            generation: 0,
            lowest: None,
            highest: None,
            replay: ReplayWindow::new(),
            hp: HeaderKey::derive(suite, &secret),
        }
    }

    /// The key for a packet numbered `pn` with key phase `phase`, if one is held.
    fn choose(&self, pn: u64, phase: bool) -> Option<(Generation, &PacketKey)> {
        if phase == self.phase {
            Some((Generation::Current, &self.current))
        } else if self.highest.is_none_or(|h| pn > h) {
            Some((Generation::Next, &self.next))
        } else {
            self.previous.as_ref().map(|k| (Generation::Previous, k))
        }
    }

    /// The next key opened a packet: it becomes the current one.
    fn promote(&mut self, suite: Suite) {
        self.next_secret = blake3::derive_key(CONTEXT_KEY_UPDATE, &self.next_secret);
        let next = PacketKey::derive(suite, &self.next_secret);
        let current = core::mem::replace(&mut self.next, next);
        self.previous = Some(core::mem::replace(&mut self.current, current));
        self.phase = !self.phase;
        self.generation += 1;
        self.lowest = None;
        self.highest = None;
    }

    /// A packet numbered `pn` opened with the current key.
    fn opened_current(&mut self, pn: u64) {
        let lowest = self.lowest.map_or(pn, |l| l.min(pn));
        let highest = self.highest.map_or(pn, |h| h.max(pn));
        (self.lowest, self.highest) = (Some(lowest), Some(highest));
        // Every number of the previous generation is below `lowest`, so at most
        // `highest - REPLAY_WINDOW`: the replay window refuses them all.
        if highest - lowest >= REPLAY_WINDOW - 1 {
            self.previous = None;
        }
    }
}

/// AEAD packet protection of one connection: seals with one direction's keys, opens with
/// the other's. See the [module documentation](self) for the construction.
pub struct Aead {
    suite: Suite,
    update_after: u64,
    integrity_limit: u64,
    send: Sender,
    recv: Receiver,
    stats: AeadStats,
}

impl Aead {
    /// Protection with `suite`, sealing with keys from `send_secret` and opening with keys
    /// from `recv_secret` (the two secrets of the handshake's `split()`: the peer's
    /// `send_secret` is this side's `recv_secret`).
    pub fn new(suite: Suite, send_secret: [u8; 32], recv_secret: [u8; 32]) -> Aead {
        Aead {
            suite,
            update_after: suite.confidentiality_limit(),
            integrity_limit: suite.integrity_limit(),
            send: Sender::new(suite, send_secret),
            recv: Receiver::new(suite, recv_secret),
            stats: AeadStats::default(),
        }
    }

    /// The same, but moving to the next sending key every `n` packets (at least 1) instead
    /// of at the suite's [`Suite::confidentiality_limit`]: for tests, and for whoever wants
    /// shorter-lived keys. Only the sending direction is concerned; the receiver follows
    /// whatever its peer does.
    pub fn with_update_after(mut self, n: u64) -> Aead {
        self.update_after = n.max(1);
        self
    }

    /// The same with `limits` where they are set (see [`KeyLimits`]).
    pub fn with_limits(mut self, limits: KeyLimits) -> Aead {
        if let Some(n) = limits.update_after {
            self = self.with_update_after(n);
        }
        if let Some(n) = limits.failed_opens {
            self.integrity_limit = n.max(1);
        }
        self
    }

    /// The suite.
    pub fn suite(&self) -> Suite {
        self.suite
    }

    /// The counters.
    pub fn stats(&self) -> AeadStats {
        self.stats
    }

    /// The generation of the sending key: 0 for the handshake's secret, one more at each
    /// key update.
    pub fn send_generation(&self) -> u64 {
        self.send.generation
    }

    /// The generation of the current receiving key.
    pub fn recv_generation(&self) -> u64 {
        self.recv.generation
    }
}

impl fmt::Debug for Aead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Aead")
            .field("suite", &self.suite)
            .field("send_generation", &self.send.generation)
            .field("recv_generation", &self.recv.generation)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl PacketProtection for Aead {
    fn name(&self) -> &'static str {
        self.suite.name()
    }

    fn overhead(&self) -> usize {
        TAG_LEN
    }

    /// Seals in place: sets the key phase in the first byte, encrypts the payload with the
    /// header as AAD, appends the tag. Moves to the next key first when the current one has
    /// sealed its share.
    fn seal(&mut self, pn: u64, buf: &mut Vec<u8>, start: usize, header_len: usize) {
        debug_assert!(pn < PN_LIMIT, "packet numbers are 62 bits");
        if self.send.sealed_with_key >= self.update_after {
            self.send.update(self.suite);
            self.stats.key_updates += 1;
        }
        let packet = &mut buf[start..];
        let phase = if self.send.phase { KEY_PHASE } else { 0 };
        packet[0] = (packet[0] & !KEY_PHASE) | phase;
        let (header, payload) = packet.split_at_mut(header_len);
        let tag = self
            .send
            .key
            .key
            .seal_in_place_separate_tag(self.send.key.nonce(pn), Aad::from(&*header), payload)
            .expect("a packet is far below the AEAD's length limit");
        buf.extend_from_slice(tag.as_ref());
        self.send.sealed_with_key += 1;
        self.stats.sealed += 1;
    }

    /// Opens in place, after the replay window has let the number through, with the key
    /// the key phase and the number point to; records the number once the packet opens.
    fn open(
        &mut self,
        pn: u64,
        packet: &mut [u8],
        header_len: usize,
    ) -> Result<usize, Unprotected> {
        if pn >= PN_LIMIT || packet.len() < header_len.saturating_add(TAG_LEN) {
            self.stats.failed_opens += 1;
            return Err(Unprotected);
        }
        if !self.recv.replay.fresh(pn) {
            self.stats.replays += 1;
            return Err(Unprotected);
        }
        let phase = packet[0] & KEY_PHASE != 0;
        let Some((generation, key)) = self.recv.choose(pn, phase) else {
            self.stats.failed_opens += 1;
            return Err(Unprotected);
        };
        let (header, sealed) = packet.split_at_mut(header_len);
        let Ok(payload) = key
            .key
            .open_in_place(key.nonce(pn), Aad::from(&*header), sealed)
        else {
            self.stats.failed_opens += 1;
            return Err(Unprotected);
        };
        let len = payload.len();
        match generation {
            Generation::Previous => {}
            Generation::Current => self.recv.opened_current(pn),
            Generation::Next => {
                self.recv.promote(self.suite);
                self.recv.opened_current(pn);
                self.stats.key_updates += 1;
            }
        }
        self.recv.replay.record(pn);
        self.stats.opened += 1;
        Ok(len)
    }

    /// True once [`AeadStats::failed_opens`] reached the integrity limit (the suite's, or
    /// a tighter one from [`Aead::with_limits`]).
    fn integrity_exhausted(&self) -> bool {
        self.stats.failed_opens >= self.integrity_limit
    }

    fn protect_header(&self, packet: &mut [u8], pn_offset: usize) {
        let Some(mask) = self.send.hp.packet_mask(packet, pn_offset) else {
            debug_assert!(false, "a sealed packet holds a packet number and a tag");
            return;
        };
        let n = pn_len(packet[pn_offset]);
        debug_assert!(packet.len() >= pn_offset + n + TAG_LEN);
        packet[0] ^= mask[0] & FIRST_BYTE_MASK;
        for (b, m) in packet[pn_offset..pn_offset + n].iter_mut().zip(&mask[1..]) {
            *b ^= m;
        }
    }

    /// Removes header protection, or fails changing nothing when the packet cannot hold its
    /// header and a tag.
    fn unprotect_header(&self, packet: &mut [u8], pn_offset: usize) -> Result<(), Unprotected> {
        let mask = self
            .recv
            .hp
            .packet_mask(packet, pn_offset)
            .ok_or(Unprotected)?;
        let first_pn = packet[pn_offset] ^ mask[1];
        let n = pn_len(first_pn);
        if packet.len() < pn_offset + n + TAG_LEN {
            return Err(Unprotected);
        }
        packet[0] ^= mask[0] & FIRST_BYTE_MASK;
        for (b, m) in packet[pn_offset..pn_offset + n].iter_mut().zip(&mask[1..]) {
            *b ^= m;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{open_short, ShortPacket};
    use crate::wire::header::SHORT_PN_OFFSET;
    use crate::wire::truncated::Truncated;
    use proptest::prelude::*;

    const X: [u8; 32] = [0x11; 32];
    const Y: [u8; 32] = [0x22; 32];

    /// Two ends of one connection: A seals with X and opens with Y, B the other way round.
    fn pair(suite: Suite) -> (Aead, Aead) {
        (Aead::new(suite, X, Y), Aead::new(suite, Y, X))
    }

    /// Encodings of every length: 1, 2, 4 and 8 bytes.
    fn every_length(pn: u64) -> [Truncated; 4] {
        [
            Truncated::encode(pn, Some(10)),
            Truncated::encode(pn, Some(1000)),
            Truncated::encode(pn, None),
            Truncated::whole(pn),
        ]
    }

    /// A sealed short packet numbered `pn`, sent as `sent_as`, carrying `frames`.
    fn sealed_as(a: &mut Aead, pn: u64, sent_as: Truncated, frames: &[u8]) -> Vec<u8> {
        let mut out = vec![0xee; 3]; // a datagram before it in the batch
        let p = ShortPacket::begin(&mut out, 0x0102_0304, pn, sent_as);
        out.extend_from_slice(frames);
        let size = p.seal(&mut out, a);
        assert_eq!(size, out.len() - 3);
        assert_eq!(size, 1 + 4 + sent_as.wire_len() + frames.len() + TAG_LEN);
        out.split_off(3)
    }

    /// Sealed and sent whole, so that it opens whatever the receiver expects.
    fn sealed(a: &mut Aead, pn: u64) -> Vec<u8> {
        sealed_as(a, pn, Truncated::whole(pn), &frames_of(pn))
    }

    fn frames_of(pn: u64) -> Vec<u8> {
        (0..(pn % 50) as u8 + 20).map(|i| i ^ pn as u8).collect()
    }

    /// Opens with `open_short`, recovering the number as the one closest to `expected`.
    fn open(b: &mut Aead, packet: &[u8], expected: u64) -> Result<(u64, Vec<u8>), Unprotected> {
        let mut p = packet.to_vec();
        let o = open_short(&mut p, b, |t| Some(t.expand(expected)))?;
        Ok((o.pn, o.frames.to_vec()))
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn suites_are_numbered_and_named() {
        for s in Suite::ALL {
            assert_eq!(Suite::from_id(s.id()), Some(s));
            assert_eq!(s.to_string(), s.name());
            assert_eq!(Aead::new(s, X, Y).name(), s.name());
            assert_eq!(Aead::new(s, X, Y).overhead(), 16);
        }
        assert_eq!(Suite::Aes128Gcm.name(), "aes-128-gcm");
        assert_eq!(Suite::ChaCha20Poly1305.name(), "chacha20-poly1305");
        assert_eq!(Suite::from_id(0), None);
        assert_eq!(Suite::from_id(3), None);
    }

    #[test]
    fn seals_and_opens_with_both_suites_and_every_number_length() {
        for suite in Suite::ALL {
            let (mut a, mut b) = pair(suite);
            let mut sealed_count = 0;
            for pn in [0, 1, 63, 64, 70_000, (1 << 40) + 5, (1 << 62) - 1] {
                for t in every_length(pn) {
                    for frames in [&b""[..], b"x", &[0xa5; 1452]] {
                        let p = sealed_as(&mut a, pn, t, frames);
                        sealed_count += 1;
                        let o = open(&mut b, &p, pn);
                        assert_eq!(o, Ok((pn, frames.to_vec())), "{suite} pn {pn} {t:?}");
                        // Opened once; a second time it is a replay.
                        assert_eq!(open(&mut b, &p, pn), Err(Unprotected));
                        // Forget it, so that the same number can be sent again.
                        b.recv.replay = ReplayWindow::new();
                    }
                }
            }
            assert_eq!(a.stats().sealed, sealed_count);
            assert_eq!(b.stats().opened, sealed_count);
            assert_eq!(b.stats().replays, sealed_count);
            assert_eq!(b.stats().failed_opens, 0);
        }
    }

    /// RFC 9001 appendix A.2 (AES) and A.5 (ChaCha20): the first five bytes of the mask are
    /// QUIC's, and agree with *ring*'s QUIC header protection for any sample.
    #[test]
    fn header_protection_masks_are_rfc_9001s() {
        let mut aes_key = [0u8; 32];
        aes_key[..16].copy_from_slice(&hex("9f50449e04a0e810283a1e9933adedd2"));
        let aes = HeaderKey::new(Suite::Aes128Gcm, aes_key);
        let sample = hex("d1b1c98dd7689fb8ec11d242b123dc9b").try_into().unwrap();
        assert_eq!(aes.mask(&sample)[..5], hex("437b9aec36"));

        let chacha_key: [u8; 32] =
            hex("25a282b9e82f06f21f488917a4fc8f1b73573685608597d0efcb076b0ab7a7a4")
                .try_into()
                .unwrap();
        let chacha = HeaderKey::new(Suite::ChaCha20Poly1305, chacha_key);
        let sample = hex("5e5cd55c41f69080575d7999c25a5bfb").try_into().unwrap();
        assert_eq!(chacha.mask(&sample)[..5], hex("aefefe7d03"));

        use ring::aead::quic;
        let ring_aes = quic::HeaderProtectionKey::new(&quic::AES_128, &aes_key[..16]).unwrap();
        let ring_chacha = quic::HeaderProtectionKey::new(&quic::CHACHA20, &chacha_key).unwrap();
        let mut sample = [0u8; 16];
        for i in 0..300u32 {
            // Every counter byte pattern at the edges, then a spread of samples.
            sample[..4].copy_from_slice(
                &match i {
                    0 => u32::MAX,
                    1 => 0,
                    _ => i.wrapping_mul(0x9e37_79b9),
                }
                .to_le_bytes(),
            );
            sample[4..].copy_from_slice(&blake3::hash(&i.to_le_bytes()).as_bytes()[..12]);
            assert_eq!(aes.mask(&sample)[..5], ring_aes.new_mask(&sample).unwrap());
            assert_eq!(
                chacha.mask(&sample)[..5],
                ring_chacha.new_mask(&sample).unwrap()
            );
        }
    }

    /// The number and the low bits of the first byte are masked on the wire.
    #[test]
    fn the_packet_number_is_not_sent_in_the_clear() {
        for suite in Suite::ALL {
            let (mut a, _) = pair(suite);
            let mut same = 0;
            let mut first_bytes = std::collections::HashSet::new();
            for pn in 0..256 {
                let t = Truncated::encode(pn, None);
                let p = sealed_as(&mut a, pn, t, b"frames");
                let mut clear = Vec::new();
                t.put(&mut clear);
                same += usize::from(p[SHORT_PN_OFFSET..SHORT_PN_OFFSET + 4] == clear[..]);
                first_bytes.insert(p[0]);
                assert_eq!(p[0] & 0xe0, 0x40, "form bits in the clear");
            }
            assert!(same < 2, "{suite}: {same} numbers in the clear");
            assert_eq!(first_bytes.len(), 32, "{suite}: low five bits masked");
        }
    }

    /// Any single bit flipped anywhere, header included, makes the packet fail to open, and
    /// leaves the receiver able to open the packet as sent.
    #[test]
    fn any_flipped_bit_fails_to_open() {
        for suite in Suite::ALL {
            let (mut a, mut b) = pair(suite);
            for i in 0..4 {
                let pn = 1000 + i as u64;
                let t = every_length(pn)[i];
                let p = sealed_as(&mut a, pn, t, b"some frames to protect");
                for bit in 0..p.len() * 8 {
                    let mut q = p.clone();
                    q[bit / 8] ^= 1 << (bit % 8);
                    assert_eq!(open(&mut b, &q, pn), Err(Unprotected), "{suite} bit {bit}");
                }
                assert_eq!(b.stats().opened, i as u64);
                assert_eq!(
                    open(&mut b, &p, pn),
                    Ok((pn, b"some frames to protect".to_vec()))
                );
            }
        }
    }

    #[test]
    fn a_packet_opened_with_another_whole_number_fails() {
        for suite in Suite::ALL {
            let (mut a, mut b) = pair(suite);
            let p = sealed_as(&mut a, 70_000, Truncated::encode(70_000, Some(10)), b"f");
            // The same low bits, recovered to the number a window (64) away.
            assert_eq!(open(&mut b, &p, 70_000 + 64), Err(Unprotected));
            let mut q = p.clone();
            b.unprotect_header(&mut q, SHORT_PN_OFFSET).unwrap();
            for wrong in [69_999, 70_001, 70_000 ^ (1 << 40)] {
                assert_eq!(b.clone_open(wrong, &q), Err(Unprotected), "{wrong}");
            }
            assert_eq!(b.stats().failed_opens, 4);
            assert_eq!(open(&mut b, &p, 70_000), Ok((70_000, b"f".to_vec())));
        }
    }

    impl Aead {
        /// `open` on a copy of `packet`, with the header already unprotected.
        fn clone_open(&mut self, pn: u64, packet: &[u8]) -> Result<usize, Unprotected> {
            let header_len = SHORT_PN_OFFSET + pn_len(packet[SHORT_PN_OFFSET]);
            self.open(pn, &mut packet.to_vec(), header_len)
        }
    }

    #[test]
    fn a_replayed_packet_is_refused_and_counted() {
        for suite in Suite::ALL {
            let (mut a, mut b) = pair(suite);
            let p = sealed(&mut a, 5);
            assert_eq!(open(&mut b, &p, 0).unwrap().0, 5);
            for _ in 0..3 {
                assert_eq!(open(&mut b, &p, 6), Err(Unprotected));
            }
            let s = b.stats();
            assert_eq!((s.opened, s.replays, s.failed_opens), (1, 3, 0));
        }
    }

    #[test]
    fn failed_opens_exhaust_the_keys_at_the_integrity_limit_and_replays_do_not() {
        for suite in Suite::ALL {
            assert!(!pair(suite).1.integrity_exhausted());
            let (mut a, b) = pair(suite);
            let limits = KeyLimits {
                failed_opens: Some(3),
                ..KeyLimits::default()
            };
            let mut b = b.with_limits(limits);
            let p = sealed(&mut a, 1);
            assert!(open(&mut b, &p, 0).is_ok());
            for _ in 0..10 {
                assert!(open(&mut b, &p, 2).is_err(), "a replay");
            }
            assert!(!b.integrity_exhausted(), "replays are no forgeries");
            let forged_at = |b: &mut Aead, pn: u64| {
                let mut f = sealed(&mut pair(suite).0, pn);
                let i = f.len() - TAG_LEN - 1;
                f[i] ^= 1;
                open(b, &f, 2)
            };
            assert!(forged_at(&mut b, 2).is_err());
            assert!(forged_at(&mut b, 2).is_err());
            assert!(!b.integrity_exhausted(), "{suite}: two of three");
            assert!(forged_at(&mut b, 3).is_err());
            assert!(b.integrity_exhausted(), "{suite}: the third");
            assert_eq!(b.stats().failed_opens, 3);
        }
    }

    #[test]
    fn a_packet_older_than_the_window_is_refused() {
        for suite in Suite::ALL {
            let (mut a, mut b) = pair(suite);
            let packets: Vec<_> = (0..=3000).map(|pn| sealed(&mut a, pn)).collect();
            assert!(open(&mut b, &packets[3000], 0).is_ok());
            let edge = (3000 - REPLAY_WINDOW + 1) as usize;
            assert!(open(&mut b, &packets[edge], 3001).is_ok(), "just inside");
            for old in [edge - 1, 500, 0] {
                assert_eq!(open(&mut b, &packets[old], 3001), Err(Unprotected), "{old}");
            }
            let s = b.stats();
            assert_eq!((s.opened, s.replays, s.failed_opens), (2, 3, 0));
        }
    }

    #[test]
    fn reordered_packets_within_the_window_open_once() {
        for suite in Suite::ALL {
            let (mut a, mut b) = pair(suite);
            let packets: Vec<_> = (0..5000).map(|pn| sealed(&mut a, pn)).collect();
            // Blocks of 1000 sent backwards, so every packet but each block's first arrives
            // behind a higher number; then all of them again, replayed.
            let order: Vec<usize> = (0..5)
                .flat_map(|blk| (blk * 1000..blk * 1000 + 1000).rev())
                .collect();
            for &i in &order {
                assert_eq!(open(&mut b, &packets[i], 0).map(|o| o.0), Ok(i as u64));
            }
            for &i in &order {
                assert_eq!(open(&mut b, &packets[i], 0), Err(Unprotected));
            }
            let s = b.stats();
            assert_eq!((s.opened, s.replays, s.failed_opens), (5000, 5000, 0));
        }
    }

    /// Keys change every few packets over thousands of them, packets arrive out of order
    /// across key changes (blocks sent backwards), and every packet opens once.
    #[test]
    fn key_updates_every_few_packets_with_reordering() {
        for suite in Suite::ALL {
            for n in [1u64, 2, 7, 16] {
                let (a, mut b) = pair(suite);
                let mut a = a.with_update_after(n);
                let count = 4000u64;
                let packets: Vec<_> = (0..count).map(|pn| sealed(&mut a, pn)).collect();
                assert_eq!(a.send_generation(), (count - 1) / n);
                assert_eq!(a.stats().key_updates, (count - 1) / n);
                // Blocks of n numbers, sent backwards, straddling the key changes (they
                // start half a generation in): the receiver sees the newer generation first,
                // then the older one's late packets. (With the numbers since the last block,
                // a block spans at most two generations, as a receiver that keeps one
                // previous and one next key needs.)
                let n_ = n as usize;
                let mut order: Vec<usize> = (0..n_ / 2).rev().collect();
                for start in (n_ / 2..count as usize).step_by(n_) {
                    order.extend((start..(start + n_).min(count as usize)).rev());
                }
                let mut highest = 0;
                for &i in &order {
                    let o = open(&mut b, &packets[i], highest + 1);
                    assert_eq!(o.map(|o| o.0), Ok(i as u64), "{suite} n {n} pn {i}");
                    highest = highest.max(i as u64);
                }
                assert_eq!(b.recv_generation(), a.send_generation(), "{suite} n {n}");
                for &i in &order {
                    assert_eq!(open(&mut b, &packets[i], highest + 1), Err(Unprotected));
                }
                let s = b.stats();
                assert_eq!(
                    (s.opened, s.replays, s.failed_opens, s.key_updates),
                    (count, count, 0, (count - 1) / n),
                    "{suite} n {n}"
                );
            }
        }
    }

    /// A packet sealed with a key two generations behind the receiver's fails, whether the
    /// key phase sends it to the current key or to the previous one.
    #[test]
    fn a_packet_from_two_generations_ago_fails() {
        for suite in Suite::ALL {
            let (a, mut b) = pair(suite);
            let mut a = a.with_update_after(4);
            let packets: Vec<_> = (0..16).map(|pn| sealed(&mut a, pn)).collect();
            // Generations: 0-3, 4-7, 8-11, 12-15. Packets 1 and 5 are held back.
            for i in (0..12).filter(|&i| i != 1 && i != 5) {
                assert!(open(&mut b, &packets[i], i as u64).is_ok());
            }
            assert_eq!(b.recv_generation(), 2);
            // Packet 1 has generation 2's key phase: tried with the current key, fails.
            assert_eq!(open(&mut b, &packets[1], 12), Err(Unprotected));
            // Packet 5 (generation 1, the previous) still opens.
            assert_eq!(open(&mut b, &packets[5], 12).map(|o| o.0), Ok(5));
            assert!(open(&mut b, &packets[12], 12).is_ok());
            assert_eq!(b.recv_generation(), 3);
            // Now packet 1 goes to the previous key (generation 2), and fails there too.
            assert_eq!(open(&mut b, &packets[1], 13), Err(Unprotected));
            let s = b.stats();
            assert_eq!((s.opened, s.failed_opens, s.replays), (12, 2, 0));
        }
    }

    /// The previous key stays until the current generation has opened a number a whole
    /// window above its lowest, and then goes: nothing of the previous generation could
    /// pass the replay window any more.
    #[test]
    fn the_previous_key_is_dropped_once_the_window_has_passed_it() {
        let (a, mut b) = pair(Suite::Aes128Gcm);
        let mut a = a.with_update_after(100);
        let mut packets: Vec<_> = (0..=100).map(|pn| sealed(&mut a, pn)).collect();
        a.update_after = u64::MAX;
        packets.extend((101..2200).map(|pn| sealed(&mut a, pn)));
        // Generation 0: 0-99; generation 1: 100 on. Packet 99 is held back.
        for i in (0..=100).filter(|&i| i != 99) {
            assert!(open(&mut b, &packets[i], i as u64).is_ok());
        }
        assert_eq!(b.recv_generation(), 1);
        assert!(b.recv.previous.is_some());
        let last_kept = 100 + REPLAY_WINDOW as usize - 2;
        for (i, p) in packets[..=last_kept].iter().enumerate().skip(101) {
            assert!(open(&mut b, p, i as u64).is_ok());
        }
        assert!(b.recv.previous.is_some());
        assert_eq!(
            open(&mut b, &packets[99], 2000).map(|o| o.0),
            Ok(99),
            "late, with the previous key, the last one the window lets in"
        );
        assert!(open(&mut b, &packets[last_kept + 1], 2000).is_ok());
        assert!(b.recv.previous.is_none());
        assert_eq!(b.stats().opened, last_kept as u64 + 2);
    }

    #[test]
    fn truncated_packets_fail_without_a_panic() {
        for suite in Suite::ALL {
            let (mut a, mut b) = pair(suite);
            for t in every_length(9) {
                let p = sealed_as(&mut a, 9, t, b"frames");
                for len in 0..p.len() {
                    let mut q = p[..len].to_vec();
                    let r = open_short(&mut q, &mut b, |t| Some(t.expand(9)));
                    assert_eq!(r.unwrap_err(), Unprotected, "{suite} {t:?} {len}");
                    let header_len = SHORT_PN_OFFSET + t.wire_len();
                    // Shorter than the least header and a tag: the header protection
                    // cannot be removed. (Longer, it is, with a mask from the wrong sample.)
                    if len < SHORT_PN_OFFSET + 1 + TAG_LEN {
                        let mut q = p[..len].to_vec();
                        assert_eq!(
                            b.unprotect_header(&mut q, SHORT_PN_OFFSET),
                            Err(Unprotected)
                        );
                        assert_eq!(q, p[..len], "nothing changed");
                    }
                    for hl in [0, header_len, len, len + 1, usize::MAX] {
                        let _ = b.open(9, &mut p[..len].to_vec(), hl);
                    }
                }
                assert_eq!(b.stats().opened, 0);
                b.recv.replay = ReplayWindow::new();
            }
        }
    }

    #[test]
    fn the_two_directions_interoperate() {
        for suite in Suite::ALL {
            let (mut a, mut b) = pair(suite);
            for pn in 0..100 {
                let to_b = sealed(&mut a, pn);
                let to_a = sealed(&mut b, pn);
                assert_eq!(open(&mut b, &to_b, pn), Ok((pn, frames_of(pn))));
                assert_eq!(open(&mut a, &to_a, pn), Ok((pn, frames_of(pn))));
            }
            // A's own packets do not open at A: each direction has its own keys.
            let mine = sealed(&mut a, 100);
            assert_eq!(open(&mut a, &mine, 100), Err(Unprotected));
            // Nor with the other suite.
            let other = Suite::ALL.into_iter().find(|&s| s != suite).unwrap();
            assert_eq!(
                open(&mut Aead::new(other, Y, X), &mine, 100),
                Err(Unprotected)
            );
            assert_eq!(open(&mut b, &mine, 100).map(|o| o.0), Ok(100));
        }
    }

    proptest! {
        /// Random bytes never make `open_short` panic, whatever number they recover to, and
        /// (with overwhelming probability) never open.
        #[test]
        fn random_bytes_never_panic_open_short(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
            expected in any::<u64>(),
            chacha in any::<bool>(),
        ) {
            let suite = if chacha { Suite::ChaCha20Poly1305 } else { Suite::Aes128Gcm };
            let (_, mut b) = pair(suite);
            let mut p = bytes.clone();
            let r = open_short(&mut p, &mut b, |t| Some(t.expand(expected >> 2)));
            prop_assert!(r.is_err());
        }

        /// A sealed packet with random bytes overwritten never opens, nor panics.
        #[test]
        fn a_tampered_packet_never_opens(
            pn in 0u64..(1 << 62),
            at in any::<prop::sample::Index>(),
            with in 1u8..,
            chacha in any::<bool>(),
        ) {
            let suite = if chacha { Suite::ChaCha20Poly1305 } else { Suite::Aes128Gcm };
            let (mut a, mut b) = pair(suite);
            let mut p = sealed(&mut a, pn);
            let i = at.index(p.len());
            p[i] ^= with;
            prop_assert_eq!(open(&mut b, &p, pn), Err(Unprotected));
        }
    }
}
