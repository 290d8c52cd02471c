//! Named compositions: [`Profile`], the built-in profiles ([`BUILTIN`]) and what can be
//! asked of a profile (its congestion control, whether it is reliable, whether it is valid).

use super::catalogue::{Group, MicroId, MicroSet};
use super::error::ProfileError;
use super::params::Params;
use super::rules::check_micros;
use ctp_cc::CcKind;

/// A named composition: microprotocols plus parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    /// Profile name.
    pub name: String,
    /// The microprotocols.
    pub micros: MicroSet,
    /// Their parameters.
    pub params: Params,
}

/// Every built-in profile, name and description: the ctp-wire ones ([`BUILTIN`]), then
/// the UDT4-wire ones ([`crate::udt::PROFILES`]).
pub fn every_builtin() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    BUILTIN.iter().chain(crate::udt::PROFILES)
}

/// Names and one-line descriptions of the built-in profiles.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "reliable",
        "ordered, reliable byte stream and messages; NewReno congestion control; encrypted (Noise XX, AEAD)",
    ),
    (
        "datagram",
        "unordered, unreliable messages; still congestion-controlled; encrypted (Noise XX, AEAD)",
    ),
    (
        "coded",
        "ordered, reliable byte stream and messages over network coding (CTCP): losses repaired by coded symbols, never retransmitted; token congestion control; encrypted",
    ),
    (
        "ctp-minimal",
        "CTP-Minimal: segmentation only; datagrams as they arrive, no guarantees",
    ),
    (
        "ctp-lossy-fifo",
        "CTP-LossyFIFO: sequencing and in-order delivery that skips late messages",
    ),
    (
        "ctp-bulk",
        "CTP-Bulk: reliable, in order, retransmission, TCP-style (ack-clocked) congestion control; encrypted",
    ),
    (
        "ctp-video",
        "CTP-Video: SCP-style congestion control, positive and negative ACKs, RTT, unreliable in-order delivery",
    ),
    (
        "ctp-audio",
        "CTP-Audio: CTP-Video plus block FEC (recovers 1 loss in 5 by default)",
    ),
];

impl Profile {
    /// The `reliable` profile.
    pub fn reliable() -> Self {
        use MicroId::*;
        Profile {
            name: "reliable".into(),
            micros: MicroSet::of(&[
                Demux,
                Integrity,
                Setup,
                Fragmentation,
                Sequencing,
                AckTracking,
                Rtt,
                Arq,
                Fifo,
                FlowWindow,
                CongestionWindow,
                Pacing,
                NewReno,
                KeepAlive,
                Secure,
            ]),
            params: Params::default(),
        }
    }

    /// The `datagram` profile.
    pub fn datagram() -> Self {
        use MicroId::*;
        Profile {
            name: "datagram".into(),
            micros: MicroSet::of(&[
                Demux,
                Integrity,
                Setup,
                Fragmentation,
                Sequencing,
                AckTracking,
                Rtt,
                Unordered,
                CongestionWindow,
                Pacing,
                NewReno,
                KeepAlive,
                Secure,
            ]),
            params: Params::default(),
        }
    }

    /// The `coded` profile: `reliable`'s delivery, with retransmission, acknowledgement
    /// tracking, the congestion window and pacing replaced by network coding (CTCP).
    pub fn coded() -> Self {
        use MicroId::*;
        Profile {
            name: "coded".into(),
            micros: MicroSet::of(&[
                Demux,
                Integrity,
                Setup,
                Fragmentation,
                Sequencing,
                Fifo,
                Coded,
                KeepAlive,
                Secure,
            ]),
            params: Params::default(),
        }
    }

    /// This profile without encryption (`--insecure`): the channel is checked by CRC32C
    /// only, readable and forgeable by anyone on the path.
    pub fn insecure(self) -> Self {
        Profile {
            micros: self.micros.without(MicroId::Secure),
            ..self
        }
    }

    /// CTP-Minimal: segmentation only.
    pub fn ctp_minimal() -> Self {
        use MicroId::*;
        let micros = MicroSet::of(&[Demux, Integrity, Setup, Fragmentation, Unordered]);
        Profile {
            name: "ctp-minimal".into(),
            micros,
            params: Params::default(),
        }
    }

    /// CTP-LossyFIFO: sequencing plus lossy in-order delivery.
    pub fn ctp_lossy_fifo() -> Self {
        use MicroId::*;
        let micros = MicroSet::of(&[
            Demux,
            Integrity,
            Setup,
            Fragmentation,
            Sequencing,
            LossyFifo,
        ]);
        Profile {
            name: "ctp-lossy-fifo".into(),
            micros,
            params: Params::default(),
        }
    }

    /// CTP-Bulk: `reliable` without pacing, so the window is clocked by acknowledgements as
    /// in TCP.
    pub fn ctp_bulk() -> Self {
        Profile {
            name: "ctp-bulk".into(),
            micros: Self::reliable().micros.without(MicroId::Pacing),
            params: Params::default(),
        }
    }

    /// CTP-Video: SCP-style congestion control, positive and negative ACKs, RTT estimation,
    /// unreliable in-order delivery.
    pub fn ctp_video() -> Self {
        use MicroId::*;
        let micros = MicroSet::of(&[
            Demux,
            Integrity,
            Setup,
            Fragmentation,
            Sequencing,
            AckTracking,
            Rtt,
            LossyFifo,
            CongestionWindow,
            Pacing,
            Scp,
            KeepAlive,
        ]);
        Profile {
            name: "ctp-video".into(),
            micros,
            params: Params::default(),
        }
    }

    /// CTP-Audio: CTP-Video plus forward error correction.
    pub fn ctp_audio() -> Self {
        let video = Self::ctp_video();
        Profile {
            name: "ctp-audio".into(),
            micros: video.micros.with(MicroId::Fec),
            params: video.params,
        }
    }

    /// A built-in profile by name.
    pub fn builtin(name: &str) -> Result<Self, ProfileError> {
        match name {
            "reliable" => Ok(Self::reliable()),
            "datagram" => Ok(Self::datagram()),
            "coded" => Ok(Self::coded()),
            "ctp-minimal" => Ok(Self::ctp_minimal()),
            "ctp-lossy-fifo" => Ok(Self::ctp_lossy_fifo()),
            "ctp-bulk" => Ok(Self::ctp_bulk()),
            "ctp-video" => Ok(Self::ctp_video()),
            "ctp-audio" => Ok(Self::ctp_audio()),
            "udt" => Ok(Self::udt()),
            "udt-dgram" => Ok(Self::udt_dgram()),
            _ => Err(ProfileError::Unknown {
                what: "profile",
                name: name.into(),
                known: every_builtin().map(|b| b.0).collect::<Vec<_>>().join(", "),
            }),
        }
    }

    /// The same profile with its congestion policy replaced by the `cc` microprotocol
    /// running `kind`: the policy in force (`newreno`, `scp` or `tfrc`, any member of
    /// [`Group::CongestionPolicy`]) is removed, the window mechanism added,
    /// and pacing added for the rate-based algorithms (UDT, BBR, blast, group). A profile
    /// without congestion control (no `ack-tracking`) is refused.
    pub fn with_cc(mut self, kind: CcKind) -> Result<Self, ProfileError> {
        use MicroId::*;
        if self.micros.has(Coded) {
            return Err(ProfileError::CodedCongestionControl(self.name));
        }
        if !self.micros.has(AckTracking) {
            return Err(ProfileError::NoCongestionControl(self.name));
        }
        let policies = Group::CongestionPolicy.members();
        let mut set =
            MicroSet((self.micros.0 & !policies.0) | MicroSet::of(&[Cc, CongestionWindow]).0);
        if kind.rate_based() {
            set = set.with(Pacing);
        }
        self.micros = set;
        self.params.cc = kind;
        self.check()?;
        Ok(self)
    }

    /// The congestion-control algorithm in force: the `cc` parameter when the profile
    /// composes `cc`, else the name of its congestion policy microprotocol, if any.
    pub fn congestion_control(&self) -> Option<&'static str> {
        if self.micros.has(MicroId::Cc) {
            return Some(self.params.cc.name());
        }
        MicroSet(self.micros.0 & Group::CongestionPolicy.members().0)
            .iter()
            .next()
            .map(MicroId::name)
    }

    /// True when every segment is eventually delivered.
    pub fn is_reliable(&self) -> bool {
        self.micros.is_reliable()
    }

    /// Checks dependencies, conflicts and parameters.
    pub fn check(&self) -> Result<(), ProfileError> {
        check_micros(self.micros)?;
        self.params.check()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::*;
    use MicroId::*;

    #[test]
    fn builtins_are_valid() {
        for (name, _) in BUILTIN {
            Profile::builtin(name).unwrap().check().unwrap();
        }
        for (name, _) in every_builtin() {
            assert_eq!(Profile::builtin(name).unwrap().name, *name);
        }
        // An unknown name lists every built-in, the UDT4-wire ones included.
        let Err(ProfileError::Unknown { known, .. }) = Profile::builtin("nope") else {
            panic!("an unknown name must be refused");
        };
        let listed: Vec<&str> = known.split(", ").collect();
        let all: Vec<&str> = every_builtin().map(|b| b.0).collect();
        assert_eq!(listed, all);
    }

    #[test]
    fn with_cc_replaces_the_policy_and_keeps_the_rest() {
        let r = Profile::reliable().with_cc(CcKind::Cubic).unwrap();
        assert_eq!(
            r.micros,
            Profile::reliable().micros.without(NewReno).with(Cc)
        );
        let coded = Profile::coded().with_cc(CcKind::Cubic).unwrap_err();
        assert!(coded.to_string().contains("`cc` does not apply"), "{coded}");
        let v = Profile::ctp_video().with_cc(CcKind::Vegas).unwrap();
        assert!(v.micros.has(Cc) && !v.micros.has(Scp));
        let b = Profile::ctp_bulk().with_cc(CcKind::Bbr).unwrap();
        assert!(b.micros.has(Pacing));
        assert!(!Profile::ctp_bulk()
            .with_cc(CcKind::Cubic)
            .unwrap()
            .micros
            .has(Pacing));
        assert!(matches!(
            Profile::ctp_minimal().with_cc(CcKind::Cubic),
            Err(ProfileError::NoCongestionControl(_))
        ));
        assert!(matches!(
            check_micros(r.micros.with(NewReno)),
            Err(ProfileError::Conflict { .. })
        ));
        assert_eq!(Profile::reliable().congestion_control(), Some("newreno"));
        assert_eq!(Profile::ctp_video().congestion_control(), Some("scp"));
        assert_eq!(Profile::ctp_minimal().congestion_control(), None);
        for &k in CcKind::ALL {
            let p = Profile::reliable().with_cc(k).unwrap();
            compose(p.micros, &p.params, Isn::default(), Isn::default()).unwrap();
        }
    }
}
