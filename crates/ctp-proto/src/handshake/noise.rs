//! The secure channel's key agreement: Noise XX (`snow`), three messages carried by the
//! handshake ([`super`]): message 1 in COOKIE_ECHO, message 2 in the responder's HANDSHAKE
//! packet, message 3 in the initiator's. Each side proves a static X25519 key (its
//! [`Identity`]); the ephemeral–ephemeral exchange gives forward secrecy; the prologue
//! binds the negotiated offer, so a rewritten INIT or INIT_ACK fails message 2.
//!
//! The secrets of the two directions come from Noise's `split()`; the packet keys are
//! derived from them by [`crate::protection::aead`]. Randomness (the ephemeral keys) comes
//! from a generator seeded by the endpoint, so a simulation replays bit for bit.

use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use snow::params::NoiseParams;
use snow::resolvers::{CryptoResolver, DefaultResolver, FallbackResolver};
use snow::types::{Cipher, Dh, Hash, Random};
use std::net::SocketAddr;
use std::sync::Arc;

/// The Noise protocol name: XX, X25519, ChaCha20-Poly1305 and BLAKE2s for the handshake
/// itself (the packets use the negotiated AEAD suite).
pub const NOISE_PATTERN: &str = "Noise_XX_25519_ChaChaPoly_BLAKE2s";

/// What every prologue starts with: the protocol and its wire version.
const PROLOGUE_LABEL: &[u8] = b"ctp secure channel, wire 0xc7a00007";

/// Largest Noise message the handshake carries (message 2: 32 + 48 + 16 bytes; room for
/// nothing else).
pub const MAX_NOISE_MESSAGE: usize = 256;

/// An endpoint's static key pair: who it is.
#[derive(Clone, PartialEq, Eq)]
pub struct Identity {
    /// The X25519 private key.
    pub private: [u8; 32],
    /// The X25519 public key (what peers pin and allow).
    pub public: [u8; 32],
}

impl core::fmt::Debug for Identity {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Never the private key, not even in a log.
        // The public key as people see it: 44 characters of base64 (`ctp keygen`).
        use base64::Engine as _;
        f.debug_struct("Identity")
            .field(
                "public",
                &base64::engine::general_purpose::STANDARD.encode(self.public),
            )
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// A fresh key pair drawn from `seed` (an endpoint without a configured identity
    /// makes one at start: its peers cannot pin it, but its channel is still encrypted).
    pub fn generate(seed: [u8; 32]) -> Identity {
        Self::from_builder(snow::Builder::with_resolver(params(), resolver(seed)))
    }

    /// A fresh key pair from the operating system's random source: an identity to keep
    /// (`ctp keygen`).
    pub fn random() -> Identity {
        Self::from_builder(snow::Builder::new(params()))
    }

    fn from_builder(b: snow::Builder<'_>) -> Identity {
        let kp = b.generate_keypair().expect("X25519 key generation");
        Identity {
            private: kp.private.as_slice().try_into().expect("32-byte key"),
            public: kp.public.as_slice().try_into().expect("32-byte key"),
        }
    }

    /// The key pair of a private key (its public key computed).
    pub fn from_private(private: [u8; 32]) -> Identity {
        let mut dh = DefaultResolver
            .resolve_dh(&snow::params::DHChoice::Curve25519)
            .expect("X25519");
        dh.set(&private);
        Identity {
            private,
            public: dh.pubkey().try_into().expect("32-byte key"),
        }
    }
}

/// A peer's static key, as the handshake proved it, for the application to judge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerKey {
    /// The peer's X25519 public key.
    pub key: [u8; 32],
    /// The address the handshake came from.
    pub remote: SocketAddr,
    /// True when the peer initiated the connection (this side is the responder).
    pub peer_initiated: bool,
}

/// Decides whether a peer's proven key is acceptable: a pinned key, first-use trust,
/// an allow list. `Err` carries the reason, which ends the handshake (and, at the
/// responder, is sent to the initiator).
#[derive(Clone)]
pub struct PeerPolicy(Arc<PeerJudge>);

/// The function behind a [`PeerPolicy`].
type PeerJudge = dyn Fn(&PeerKey) -> Result<(), String> + Send + Sync;

impl PeerPolicy {
    /// A policy from a function.
    pub fn new(f: impl Fn(&PeerKey) -> Result<(), String> + Send + Sync + 'static) -> Self {
        PeerPolicy(Arc::new(f))
    }

    /// Accepts any key: the channel is encrypted and authenticated against the key the
    /// peer proved, but no key is required of it.
    pub fn any() -> Self {
        Self::new(|_| Ok(()))
    }

    /// Judges `peer`.
    pub fn check(&self, peer: &PeerKey) -> Result<(), String> {
        (self.0)(peer)
    }
}

impl Default for PeerPolicy {
    fn default() -> Self {
        Self::any()
    }
}

impl core::fmt::Debug for PeerPolicy {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("PeerPolicy(..)")
    }
}

/// Why the key agreement failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoiseError {
    /// A message did not decrypt or parse: forged, corrupted, or the offer it binds was
    /// rewritten on the way.
    #[error("the peer's handshake message did not authenticate ({0})")]
    Bad(String),
    /// A message arrived out of turn.
    #[error("handshake message out of turn")]
    OutOfTurn,
}

/// The two directions' secrets once the handshake is done.
#[derive(Clone, PartialEq, Eq)]
pub struct Secrets {
    /// Seals what this side sends.
    pub send: [u8; 32],
    /// Opens what this side receives.
    pub recv: [u8; 32],
}

/// One side of a Noise XX handshake in progress.
pub struct Noise {
    state: Box<snow::HandshakeState>,
    initiator: bool,
}

impl core::fmt::Debug for Noise {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Noise")
            .field("initiator", &self.initiator)
            .field("finished", &self.state.is_handshake_finished())
            .finish_non_exhaustive()
    }
}

/// The prologue both sides bind: the label, the initiator's offer as the responder
/// received it, and the negotiated answer.
pub fn prologue(init_offer_hash: &[u8; 32], answer: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(PROLOGUE_LABEL.len() + 32 + answer.len());
    p.extend_from_slice(PROLOGUE_LABEL);
    p.extend_from_slice(init_offer_hash);
    p.extend_from_slice(answer);
    p
}

/// The hash of an INIT offer that the prologue binds (and the cookie carries).
pub fn offer_hash(init_offer: &[u8]) -> [u8; 32] {
    *blake3::hash(init_offer).as_bytes()
}

impl Noise {
    /// The initiator's side with identity `me`, binding `prologue`; `seed` draws its
    /// ephemeral key.
    pub fn initiator(me: &Identity, prologue: &[u8], seed: [u8; 32]) -> Noise {
        Self::build(me, prologue, seed, true)
    }

    /// The responder's side.
    pub fn responder(me: &Identity, prologue: &[u8], seed: [u8; 32]) -> Noise {
        Self::build(me, prologue, seed, false)
    }

    fn build(me: &Identity, prologue: &[u8], seed: [u8; 32], initiator: bool) -> Noise {
        let b = snow::Builder::with_resolver(params(), resolver(seed))
            .local_private_key(&me.private)
            .and_then(|b| b.prologue(prologue))
            .expect("a fresh builder takes one key and one prologue");
        let state = if initiator {
            b.build_initiator()
        } else {
            b.build_responder()
        }
        .expect("XX needs nothing but the local key");
        Noise {
            state: Box::new(state),
            initiator,
        }
    }

    /// Appends this side's next message (no payload) to `out`.
    pub fn write(&mut self, out: &mut Vec<u8>) -> Result<(), NoiseError> {
        if !self.state.is_my_turn() || self.state.is_handshake_finished() {
            return Err(NoiseError::OutOfTurn);
        }
        let mut buf = [0u8; MAX_NOISE_MESSAGE];
        let n = self
            .state
            .write_message(&[], &mut buf)
            .map_err(|e| NoiseError::Bad(e.to_string()))?;
        out.extend_from_slice(&buf[..n]);
        Ok(())
    }

    /// Reads the peer's next message. A message that fails leaves the state as it was
    /// (snow rolls back), so a forged message cannot end a genuine handshake.
    pub fn read(&mut self, msg: &[u8]) -> Result<(), NoiseError> {
        if self.state.is_my_turn() || self.state.is_handshake_finished() {
            return Err(NoiseError::OutOfTurn);
        }
        if msg.len() > MAX_NOISE_MESSAGE {
            return Err(NoiseError::Bad("message too long".into()));
        }
        let mut payload = [0u8; MAX_NOISE_MESSAGE];
        let n = self
            .state
            .read_message(msg, &mut payload)
            .map_err(|e| NoiseError::Bad(e.to_string()))?;
        if n != 0 {
            return Err(NoiseError::Bad("unexpected payload".into()));
        }
        Ok(())
    }

    /// The peer's static public key, once its message carrying it was read.
    pub fn remote_static(&self) -> Option<[u8; 32]> {
        self.state.get_remote_static()?.try_into().ok()
    }

    /// True when all three messages were written or read.
    pub fn is_finished(&self) -> bool {
        self.state.is_handshake_finished()
    }

    /// The directions' secrets; `None` before the handshake finished.
    pub fn secrets(&mut self) -> Option<Secrets> {
        if !self.state.is_handshake_finished() {
            return None;
        }
        // `split()` gives (initiator → responder, responder → initiator).
        let (i2r, r2i) = self.state.dangerously_get_raw_split();
        Some(if self.initiator {
            Secrets {
                send: i2r,
                recv: r2i,
            }
        } else {
            Secrets {
                send: r2i,
                recv: i2r,
            }
        })
    }
}

/// The parsed [`NOISE_PATTERN`].
fn params() -> NoiseParams {
    NOISE_PATTERN.parse().expect("a valid Noise pattern")
}

/// snow's default primitives with the endpoint's seeded generator for the ephemeral keys.
fn resolver(seed: [u8; 32]) -> Box<dyn CryptoResolver + Send> {
    Box::new(FallbackResolver::new(
        Box::new(SeededRng(seed)),
        Box::new(DefaultResolver),
    ))
}

/// Resolves only the random-number generator: ChaCha20 from a seed.
struct SeededRng([u8; 32]);

impl CryptoResolver for SeededRng {
    fn resolve_rng(&self) -> Option<Box<dyn Random>> {
        Some(Box::new(SeededRandom(ChaCha20Rng::from_seed(self.0))))
    }
    fn resolve_dh(&self, _: &snow::params::DHChoice) -> Option<Box<dyn Dh>> {
        None
    }
    fn resolve_hash(&self, _: &snow::params::HashChoice) -> Option<Box<dyn Hash>> {
        None
    }
    fn resolve_cipher(&self, _: &snow::params::CipherChoice) -> Option<Box<dyn Cipher>> {
        None
    }
}

struct SeededRandom(ChaCha20Rng);

impl Random for SeededRandom {
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), snow::Error> {
        self.0.fill_bytes(dest);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lower-case hex of `bytes`.
    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn pair() -> (Noise, Noise, Identity, Identity) {
        let (a, b) = (Identity::generate([1; 32]), Identity::generate([2; 32]));
        let p = prologue(&offer_hash(b"offer"), b"answer");
        (
            Noise::initiator(&a, &p, [3; 32]),
            Noise::responder(&b, &p, [4; 32]),
            a,
            b,
        )
    }

    #[test]
    fn three_messages_agree_on_secrets_and_identities() {
        let (mut i, mut r, a, b) = pair();
        let (mut m1, mut m2, mut m3) = (Vec::new(), Vec::new(), Vec::new());
        i.write(&mut m1).unwrap();
        r.read(&m1).unwrap();
        r.write(&mut m2).unwrap();
        i.read(&m2).unwrap();
        assert_eq!(i.remote_static(), Some(b.public));
        i.write(&mut m3).unwrap();
        r.read(&m3).unwrap();
        assert_eq!(r.remote_static(), Some(a.public));
        let (si, sr) = (i.secrets().unwrap(), r.secrets().unwrap());
        assert_eq!(si.send, sr.recv);
        assert_eq!(si.recv, sr.send);
        assert_ne!(si.send, si.recv);
        assert_eq!((m1.len(), m2.len(), m3.len()), (32, 96, 64));
    }

    #[test]
    fn a_different_prologue_fails_message_two_and_a_flipped_bit_changes_nothing() {
        let (a, b) = (Identity::generate([1; 32]), Identity::generate([2; 32]));
        let mut i = Noise::initiator(&a, &prologue(&[0; 32], b"x"), [3; 32]);
        let mut r = Noise::responder(&b, &prologue(&[1; 32], b"x"), [4; 32]);
        let (mut m1, mut m2) = (Vec::new(), Vec::new());
        i.write(&mut m1).unwrap();
        r.read(&m1).unwrap();
        r.write(&mut m2).unwrap();
        assert!(matches!(i.read(&m2), Err(NoiseError::Bad(_))));

        let (mut i, mut r, _, b) = pair();
        let (mut m1, mut m2) = (Vec::new(), Vec::new());
        i.write(&mut m1).unwrap();
        r.read(&m1).unwrap();
        r.write(&mut m2).unwrap();
        for bit in 0..m2.len() * 8 {
            let mut bad = m2.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(i.read(&bad).is_err(), "bit {bit}");
        }
        // The genuine message still completes the handshake after every forgery.
        i.read(&m2).unwrap();
        assert_eq!(i.remote_static(), Some(b.public));
    }

    /// Interoperability with `snow` used directly as the other side (the reference
    /// implementation of the pattern, none of ctp's code): ctp's initiator against a plain
    /// snow responder, and a plain snow initiator against ctp's responder, with fixed keys
    /// and prologue. The three messages are pinned as a test vector (their BLAKE3), so a
    /// change of pattern, prologue layout or key derivation shows here.
    #[test]
    fn interoperates_with_snow_used_directly_and_matches_the_test_vector() {
        let (a, b) = (
            Identity::from_private([0x11; 32]),
            Identity::from_private([0x22; 32]),
        );
        let p = prologue(&offer_hash(b"init offer"), b"answer");
        let params: NoiseParams = NOISE_PATTERN.parse().unwrap();
        let plain = |me: &Identity, eph: [u8; 32], initiator: bool| {
            let b = snow::Builder::new(params.clone())
                .local_private_key(&me.private)
                .unwrap()
                .prologue(&p)
                .unwrap()
                .fixed_ephemeral_key_for_testing_only(&eph);
            if initiator {
                b.build_initiator().unwrap()
            } else {
                b.build_responder().unwrap()
            }
        };
        let mut buf = [0u8; 256];
        let mut transcript = blake3::Hasher::new();

        // ctp initiator, snow responder.
        let mut ours = Noise::initiator(&a, &p, [3; 32]);
        let mut theirs = plain(&b, [0x44; 32], false);
        let mut m1 = Vec::new();
        ours.write(&mut m1).unwrap();
        theirs.read_message(&m1, &mut buf).unwrap();
        let n = theirs.write_message(&[], &mut buf).unwrap();
        let m2 = buf[..n].to_vec();
        ours.read(&m2).unwrap();
        let mut m3 = Vec::new();
        ours.write(&mut m3).unwrap();
        theirs.read_message(&m3, &mut buf).unwrap();
        assert_eq!(ours.remote_static(), Some(b.public));
        assert_eq!(theirs.get_remote_static(), Some(&a.public[..]));
        let (i2r, r2i) = theirs.dangerously_get_raw_split();
        let s = ours.secrets().unwrap();
        assert_eq!((s.send, s.recv), (i2r, r2i));

        // snow initiator, ctp responder; fixed ephemerals on the snow side.
        let mut theirs = plain(&a, [0x33; 32], true);
        let mut ours = Noise::responder(&b, &p, [4; 32]);
        let n = theirs.write_message(&[], &mut buf).unwrap();
        let m1 = buf[..n].to_vec();
        ours.read(&m1).unwrap();
        let mut m2 = Vec::new();
        ours.write(&mut m2).unwrap();
        theirs.read_message(&m2, &mut buf).unwrap();
        let n = theirs.write_message(&[], &mut buf).unwrap();
        let m3 = buf[..n].to_vec();
        ours.read(&m3).unwrap();
        assert_eq!(ours.remote_static(), Some(a.public));
        let (i2r, r2i) = theirs.dangerously_get_raw_split();
        let s = ours.secrets().unwrap();
        assert_eq!((s.recv, s.send), (i2r, r2i));

        // The vector: two snow sides with fixed ephemerals give these exact messages.
        let mut i = plain(&a, [0x33; 32], true);
        let mut r = plain(&b, [0x44; 32], false);
        for turn in 0..3 {
            let (w, rd) = if turn % 2 == 0 {
                (&mut i, &mut r)
            } else {
                (&mut r, &mut i)
            };
            let n = w.write_message(&[], &mut buf).unwrap();
            transcript.update(&buf[..n]);
            let msg = buf[..n].to_vec();
            rd.read_message(&msg, &mut buf).unwrap();
        }
        assert_eq!(
            transcript.finalize().to_hex().as_str(),
            VECTOR,
            "the XX transcript for fixed keys changed"
        );
    }

    /// BLAKE3 of Noise messages 1‖2‖3 for static keys 0x11…/0x22…, ephemerals 0x33…/0x44…
    /// and the prologue of the test above (whose label names the wire version: a new
    /// version gives a new vector).
    const VECTOR: &str = "7552a5a1ec5323092c0a700257927d699d491386b978879e4dba76340d4984f6";

    #[test]
    fn seeded_generation_repeats_and_private_keys_give_their_public_keys() {
        let k = Identity::generate([9; 32]);
        assert_eq!(k, Identity::generate([9; 32]));
        assert_ne!(k, Identity::generate([8; 32]));
        assert_eq!(Identity::from_private(k.private), k);
        assert!(!format!("{k:?}").contains(&hex(&k.private)));
    }
}
