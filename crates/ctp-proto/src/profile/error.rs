//! Why a profile is not a valid composition.

use super::catalogue::{Group, MicroId};

/// Why a profile is not a valid composition.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    /// A microprotocol every profile needs is absent.
    #[error("every profile needs `{0}` ({desc}); add it", desc = .0.describe())]
    Mandatory(MicroId),
    /// A microprotocol lacks one it depends on.
    #[error("microprotocol `{micro}` needs `{needs}`: {why}; add `{needs}` or remove `{micro}`")]
    Missing {
        /// The microprotocol with the dependency.
        micro: MicroId,
        /// What it needs.
        needs: MicroId,
        /// Why.
        why: &'static str,
    },
    /// A microprotocol lacks every member of the group it needs one of.
    #[error("microprotocol `{micro}` needs one of {}: {why}; add one", .group.members().iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", "))]
    MissingOneOf {
        /// The microprotocol with the dependency.
        micro: MicroId,
        /// The group whose members are the alternatives.
        group: Group,
        /// Why.
        why: &'static str,
    },
    /// Two members of one exclusive group cannot be composed together.
    #[error("microprotocols `{a}` and `{b}` conflict: both are in the exclusive group `{group}` ({why}); keep only one", why = .group.why())]
    Conflict {
        /// First of the pair, in composition order.
        a: MicroId,
        /// Second of the pair.
        b: MicroId,
        /// The exclusive group both belong to.
        group: Group,
    },
    /// No delivery (ordering) microprotocol.
    #[error("a profile needs a delivery microprotocol: add `fifo` (in order), `lossy-fifo`, `causal` or `unordered`")]
    NoDelivery,
    /// A parameter is out of range.
    #[error("parameter `{name}` = {value} is out of range: {hint}")]
    Param {
        /// Parameter name.
        name: &'static str,
        /// Given value.
        value: u64,
        /// Allowed range.
        hint: &'static str,
    },
    /// `--cc` / `cc =` on a profile that has no congestion control to replace.
    #[error("profile `{0}` has no congestion control (no `ack-tracking`); choose a profile such as `reliable` or `datagram` to set `cc`")]
    NoCongestionControl(String),
    /// `--cc` / `cc =` on a profile whose coded scheduler runs its own control.
    #[error("profile `{0}` codes its data (`coded`): CTCP's token control runs in its scheduler, per path, and `cc` does not apply to it; leave `cc` out")]
    CodedCongestionControl(String),
    /// Unknown profile or microprotocol name.
    #[error("unknown {what} `{name}`; known: {known}")]
    Unknown {
        /// "profile" or "microprotocol".
        what: &'static str,
        /// The name given.
        name: String,
        /// The names that exist.
        known: String,
    },
}
