//! The microprotocol catalogue: sets of microprotocols ([`MicroSet`]), which ones every
//! profile holds and which a responder may drop, and every microprotocol's declaration
//! ([`MicroDecl`], written beside its code in [`crate::micro`]) collected in composition
//! order.

pub use crate::micro::decl::{Doubt, Group, MicroDecl, MicroId, Need, NeedOneOf};
use crate::micro::{
    ack_tracking, arq, built_in, causal, cc, coded, compression, fec, flow_window, fragmentation,
    jitter, keepalive, newreno, ordering, pacing, pmtud, rts_cts, rtt, scp, sequencing, tfrc,
    window, xon_xoff,
};

/// A set of microprotocols (a bitfield, as sent in the handshake).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MicroSet(pub u64);

impl MicroSet {
    /// Builds a set from a list.
    pub fn of(ids: &[MicroId]) -> Self {
        MicroSet(ids.iter().fold(0, |acc, &m| acc | 1 << m as u64))
    }

    /// True when `m` is in the set.
    pub fn has(self, m: MicroId) -> bool {
        self.0 & (1 << m as u64) != 0
    }

    /// The set without `m`.
    pub fn without(self, m: MicroId) -> Self {
        MicroSet(self.0 & !(1 << m as u64))
    }

    /// The set with `m`.
    pub fn with(self, m: MicroId) -> Self {
        MicroSet(self.0 | 1 << m as u64)
    }

    /// The members of both sets.
    pub fn union(self, other: MicroSet) -> Self {
        MicroSet(self.0 | other.0)
    }

    /// The members, in composition order.
    pub fn iter(self) -> impl Iterator<Item = MicroId> {
        MicroId::ALL.iter().copied().filter(move |&m| self.has(m))
    }

    /// Bits that name no known microprotocol.
    pub fn unknown_bits(self) -> u64 {
        self.0 & !MicroSet::of(MicroId::ALL).0
    }
}

/// Microprotocols a responder may drop from a request while narrowing it.
pub const OPTIONAL: &[MicroId] = &[MicroId::KeepAlive, MicroId::Pacing];

/// Microprotocols every profile must contain.
pub const MANDATORY: &[MicroId] = &[
    MicroId::Demux,
    MicroId::Integrity,
    MicroId::Setup,
    MicroId::Fragmentation,
];

/// Every microprotocol's declaration, in composition order ([`MicroId::ALL`]): one each.
pub const DECLS: &[&MicroDecl] = &[
    &built_in::DEMUX_DECL,
    &built_in::INTEGRITY_DECL,
    &built_in::SETUP_DECL,
    &fragmentation::DECL,
    &sequencing::DECL,
    &ack_tracking::DECL,
    &rtt::DECL,
    &arq::DECL,
    &ordering::FIFO_DECL,
    &ordering::UNORDERED_DECL,
    &flow_window::DECL,
    &window::DECL,
    &pacing::DECL,
    &newreno::DECL,
    &keepalive::DECL,
    &ordering::LOSSY_FIFO_DECL,
    &fec::DECL,
    &scp::DECL,
    &tfrc::DECL,
    &xon_xoff::DECL,
    &rts_cts::DECL,
    &jitter::FIXED_INTERVAL_DECL,
    &jitter::PLAYOUT_DECL,
    &ordering::URGENT_DECL,
    &cc::DECL,
    &causal::DECL,
    &compression::DECL,
    &pmtud::DECL,
    &built_in::SECURE_DECL,
    &coded::DECL,
];

// `DECLS[i]` declares `MicroId::ALL[i]`, whose bit is `i`, checked when the crate compiles:
// so every microprotocol has exactly one declaration and [`MicroId::decl`] is an index.
const _: () = {
    assert!(DECLS.len() == MicroId::ALL.len());
    let mut i = 0;
    while i < DECLS.len() {
        assert!(DECLS[i].id as usize == i && MicroId::ALL[i] as usize == i);
        i += 1;
    }
};

impl MicroId {
    /// This microprotocol's declaration: what it needs, excludes and reads.
    pub fn decl(self) -> &'static MicroDecl {
        DECLS[self as usize]
    }
}

impl MicroSet {
    /// True when a member of the reliability group (`arq`, `coded`) makes sure every
    /// segment is eventually delivered.
    pub fn is_reliable(self) -> bool {
        self.0 & Group::Reliability.members().0 != 0
    }
}

impl Group {
    /// The microprotocols whose declarations name this exclusive group.
    pub fn members(self) -> MicroSet {
        DECLS
            .iter()
            .filter(|d| d.groups.contains(&self))
            .fold(MicroSet::default(), |set, d| set.with(d.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_microprotocol_has_exactly_one_declaration() {
        for &m in MicroId::ALL {
            let declared = DECLS.iter().filter(|d| d.id == m).count();
            assert_eq!(declared, 1, "{m} has {declared} declarations");
            assert_eq!(m.decl().id, m);
        }
        assert_eq!(DECLS.len(), MicroId::ALL.len());
    }

    #[test]
    fn declarations_name_real_parameters_and_other_microprotocols() {
        // Every declared parameter is a field of `Params` (as its `Debug` form names them).
        let fields = format!("{:?}", super::super::Params::default());
        for d in DECLS {
            for p in d.params {
                assert!(fields.contains(&format!(" {p}: ")), "{}: `{p}`", d.id);
            }
            for need in d.needs {
                assert_ne!(need.micro, d.id, "{} needs itself", d.id);
                assert!(!need.why.is_empty());
            }
            for o in d.needs_one_of {
                assert!(!o.group.members().has(d.id), "{} needs its own group", d.id);
            }
        }
    }

    #[test]
    fn every_group_has_members_to_exclude() {
        for &g in Group::ALL {
            assert!(g.members().iter().count() >= 2, "group `{g}`");
        }
    }
}
