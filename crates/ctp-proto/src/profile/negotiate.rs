//! Negotiation in the handshake: the offer each side sends ([`encode_offer`],
//! [`decode_offer`]) and the responder's decision on a request ([`negotiate`]).

use super::catalogue::{MicroId, MicroSet, OPTIONAL};
use super::params::Params;
use super::rules::check_micros;
use crate::wire::{Reader, WireError};
use ctp_cc::CcKind;

/// Initial sequence numbers one side chose in the handshake.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Isn {
    /// First segment sequence number.
    pub seg: u64,
    /// First message sequence number.
    pub msg: u64,
    /// First packet number.
    pub pn: u64,
}

/// Encodes a profile request (initiator) or answer (responder) for the handshake.
pub fn encode_offer(out: &mut Vec<u8>, micros: MicroSet, p: &Params, isn: &Isn) {
    use crate::wire::varint::put;
    put(out, micros.0);
    for v in [
        p.max_udp_payload as u64,
        p.flow_window as u64,
        p.max_message as u64,
        p.idle_timeout_ms as u64,
    ] {
        put(out, v);
    }
    put(out, isn.seg);
    put(out, isn.msg);
    put(out, isn.pn);
    // Only with the `cc` bit: offers without it stay byte-identical to earlier versions.
    if micros.has(MicroId::Cc) {
        put(out, p.cc.id());
        put(out, p.cc_rate_kbps as u64);
    }
    if micros.has(MicroId::Secure) {
        put(out, p.suites.into());
    }
    if micros.has(MicroId::Coded) {
        put(out, p.coded_k.into());
        put(out, p.coded_blocks.into());
    }
}

/// Decodes what [`encode_offer`] wrote; the remaining parameters are taken from `local`.
pub fn decode_offer(
    r: &mut Reader<'_>,
    local: &Params,
) -> Result<(MicroSet, Params, Isn), WireError> {
    let micros = MicroSet(r.varint()?);
    let mut p = *local;
    let clamp32 = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    p.max_udp_payload =
        u16::try_from(r.varint()?).map_err(|_| WireError::Invalid("max_udp_payload"))?;
    p.flow_window = clamp32(r.varint()?);
    p.max_message = clamp32(r.varint()?);
    p.idle_timeout_ms = clamp32(r.varint()?);
    let isn = Isn {
        seg: r.varint()?,
        msg: r.varint()?,
        pn: r.varint()?,
    };
    if micros.has(MicroId::Cc) {
        p.cc = CcKind::from_id(r.varint()?)
            .ok_or(WireError::Invalid("unknown congestion-control algorithm"))?;
        p.cc_rate_kbps = clamp32(r.varint()?);
    }
    if micros.has(MicroId::Secure) {
        p.suites = u8::try_from(r.varint()?).map_err(|_| WireError::Invalid("suites"))?;
    }
    if micros.has(MicroId::Coded) {
        p.coded_k = u16::try_from(r.varint()?).map_err(|_| WireError::Invalid("coded_k"))?;
        p.coded_blocks =
            u16::try_from(r.varint()?).map_err(|_| WireError::Invalid("coded_blocks"))?;
    }
    Ok((micros, p, isn))
}

/// The responder's decision on a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Negotiated {
    /// Accepted as asked, or narrowed to this set and parameters.
    Accept(MicroSet, Params),
    /// Refused, with a reason for the initiator.
    Refuse(String),
}

/// Narrows a request against what the responder supports and requires.
///
/// Optional microprotocols the responder lacks are dropped; a missing non-optional one, a
/// request without one the responder requires (`secure`, unless it accepts plaintext), an
/// unknown bit or an invalid result refuses with a reason naming it. Numeric parameters
/// become the smaller of the two sides' values.
pub fn negotiate(
    requested: MicroSet,
    asked: &Params,
    supported: MicroSet,
    required: MicroSet,
    local: &Params,
) -> Negotiated {
    if let Some(m) = required.iter().find(|&m| !requested.has(m)) {
        return Negotiated::Refuse(if m == MicroId::Secure {
            "this responder accepts only encrypted connections: connect without `--insecure`".into()
        } else {
            format!("this responder requires microprotocol `{m}`")
        });
    }
    if requested.unknown_bits() != 0 {
        return Negotiated::Refuse(format!(
            "unknown microprotocol bits {:#x}",
            requested.unknown_bits()
        ));
    }
    let mut set = requested;
    for m in requested.iter() {
        if !supported.has(m) {
            if OPTIONAL.contains(&m) {
                set = set.without(m);
            } else if m == MicroId::Secure {
                return Negotiated::Refuse(
                    "the responder runs without encryption (`--insecure`): connect with \
                     `--insecure` too, or run the responder without it"
                        .into(),
                );
            } else {
                return Negotiated::Refuse(format!(
                    "responder does not support microprotocol `{m}`"
                ));
            }
        }
    }
    if let Err(e) = check_micros(set) {
        return Negotiated::Refuse(format!("requested profile is invalid: {e}"));
    }
    let mut p = *local;
    p.max_udp_payload = asked.max_udp_payload.min(local.max_udp_payload);
    p.flow_window = asked.flow_window.min(local.flow_window);
    p.max_message = asked.max_message.min(local.max_message);
    p.idle_timeout_ms = asked.idle_timeout_ms.min(local.idle_timeout_ms);
    p.coded_k = asked.coded_k.min(local.coded_k);
    p.coded_blocks = asked.coded_blocks.min(local.coded_blocks);
    // The initiator chooses the algorithm; both sides run it for what they send.
    p.cc = asked.cc;
    p.cc_rate_kbps = asked.cc_rate_kbps;
    if set.has(MicroId::Secure) {
        // The responder picks: the first suite (lowest bit) both sides allow.
        let common = asked.suites & local.suites;
        if common == 0 {
            return Negotiated::Refuse(format!(
                "no AEAD suite in common (offered {:#x}, allowed {:#x})",
                asked.suites, local.suites
            ));
        }
        p.suites = common & common.wrapping_neg();
    }
    if let Err(e) = p.check() {
        return Negotiated::Refuse(format!("requested parameters are invalid: {e}"));
    }
    Negotiated::Accept(set, p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::*;
    use MicroId::*;

    #[test]
    fn negotiation_accepts_narrows_or_refuses() {
        let local = Params::default();
        let all = MicroSet::of(MicroId::ALL);
        let r = Profile::reliable();
        // The responder picks one AEAD suite of those offered (the first both allow).
        assert_eq!(
            negotiate(r.micros, &r.params, all, MicroSet::default(), &local),
            Negotiated::Accept(r.micros, Params { suites: 1, ..local })
        );
        let chacha_only = Params { suites: 2, ..local };
        assert_eq!(
            negotiate(r.micros, &r.params, all, MicroSet::default(), &chacha_only),
            Negotiated::Accept(r.micros, Params { suites: 2, ..local })
        );
        match negotiate(
            r.micros,
            &chacha_only,
            all,
            MicroSet::default(),
            &Params { suites: 1, ..local },
        ) {
            Negotiated::Refuse(why) => assert!(why.contains("no AEAD suite in common"), "{why}"),
            other => panic!("{other:?}"),
        }
        // Without encryption, nothing about suites is decided.
        let plain = r.clone().insecure();
        assert_eq!(
            negotiate(
                plain.micros,
                &plain.params,
                all,
                MicroSet::default(),
                &local
            ),
            Negotiated::Accept(plain.micros, local)
        );
        // Narrowing: the responder lacks keepalive (optional) and has a smaller window.
        let small = Params {
            flow_window: 64,
            ..local
        };
        match negotiate(
            r.micros,
            &r.params,
            all.without(KeepAlive),
            MicroSet::default(),
            &small,
        ) {
            Negotiated::Accept(set, p) => {
                assert_eq!(set, r.micros.without(KeepAlive));
                assert_eq!(p.flow_window, 64);
            }
            other => panic!("{other:?}"),
        }
        // Refusal: ARQ is not optional.
        match negotiate(
            r.micros,
            &r.params,
            all.without(Arq),
            MicroSet::default(),
            &local,
        ) {
            Negotiated::Refuse(why) => assert!(why.contains("`arq`"), "{why}"),
            other => panic!("{other:?}"),
        }
        // Unknown bits.
        assert!(matches!(
            negotiate(MicroSet(1 << 60), &local, all, MicroSet::default(), &local),
            Negotiated::Refuse(_)
        ));
    }

    #[test]
    fn offers_round_trip() {
        let p = Params {
            flow_window: 99,
            ..Params::default()
        };
        let isn = Isn {
            seg: 1 << 40,
            msg: 7,
            pn: 99,
        };
        let mut out = Vec::new();
        encode_offer(&mut out, Profile::datagram().micros, &p, &isn);
        let (m, q, i) = decode_offer(&mut Reader::new(&out), &Params::default()).unwrap();
        assert_eq!((m, q, i), (Profile::datagram().micros, p, isn));
    }

    #[test]
    fn the_cc_choice_travels_in_the_offer_only_with_the_cc_bit() {
        let isn = Isn::default();
        // Without `cc`: byte-identical to an offer that never heard of it.
        let plain = Params {
            cc: CcKind::Bbr,
            ..Params::default()
        };
        let (mut a, mut b) = (Vec::new(), Vec::new());
        encode_offer(&mut a, Profile::reliable().micros, &plain, &isn);
        encode_offer(&mut b, Profile::reliable().micros, &Params::default(), &isn);
        assert_eq!(a, b);
        // With it: the algorithm and its rate round-trip.
        let p = Profile::reliable().with_cc(CcKind::Udt).unwrap();
        let q = Params {
            cc_rate_kbps: 5_000,
            ..p.params
        };
        let mut out = Vec::new();
        encode_offer(&mut out, p.micros, &q, &isn);
        let (m, got, _) = decode_offer(&mut Reader::new(&out), &Params::default()).unwrap();
        assert_eq!(
            (m, got.cc, got.cc_rate_kbps),
            (p.micros, CcKind::Udt, 5_000)
        );
        // An unknown algorithm number is rejected, not guessed.
        let mut bad = Vec::new();
        let isn_bytes = {
            let mut v = Vec::new();
            encode_offer(&mut v, p.micros, &q, &isn);
            v
        };
        bad.extend_from_slice(&isn_bytes[..isn_bytes.len() - 3]);
        crate::wire::varint::put(&mut bad, 77);
        crate::wire::varint::put(&mut bad, 5_000);
        assert!(decode_offer(&mut Reader::new(&bad), &Params::default()).is_err());
        // The responder adopts the initiator's choice.
        let all = MicroSet::of(MicroId::ALL);
        match negotiate(p.micros, &q, all, MicroSet::default(), &Params::default()) {
            Negotiated::Accept(set, n) => {
                assert!(set.has(Cc));
                assert_eq!((n.cc, n.cc_rate_kbps), (CcKind::Udt, 5_000));
            }
            other => panic!("{other:?}"),
        }
    }
}
