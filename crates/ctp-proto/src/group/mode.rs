//! A group's delivery rule (paper 002, §3.3): to how many members a message goes, and how
//! many of them must acknowledge it before it is done for the group.

use core::fmt;
use core::str::FromStr;

/// The delivery rule of a group connection, chosen at connect time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every message goes to every member, and every member must acknowledge it (the
    /// paper's broadcast, `CALL`).
    All,
    /// Every message goes to every member; one acknowledgement is enough (`CANY`).
    Any,
    /// Every message goes to every member; `P` acknowledgements are enough.
    AtLeast(u16),
    /// Each message goes to `k` members in turn and counts once `p` of them acknowledge.
    Spread {
        /// Members a message goes to.
        k: u16,
        /// Acknowledgements that make it done.
        p: u16,
    },
    /// Each message goes to the `k` least loaded members ([`super::LoadMetric`]) and counts
    /// once `p` of them acknowledge (`CBAL`).
    Balanced {
        /// Members a message goes to.
        k: u16,
        /// Acknowledgements that make it done.
        p: u16,
    },
}

/// A mode that cannot work with the group it is given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModeError(pub String);

impl fmt::Display for ModeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ModeError {}

impl Mode {
    /// Acknowledgements a message placed on `copies` members needs.
    pub fn needed(self, copies: usize) -> usize {
        match self {
            Mode::All => copies,
            Mode::Any => 1,
            Mode::AtLeast(p) | Mode::Spread { p, .. } | Mode::Balanced { p, .. } => p as usize,
        }
    }

    /// Members a new message goes to, of `usable`: every one, or `k`.
    pub fn fan_out(self, usable: usize) -> usize {
        match self {
            Mode::All | Mode::Any | Mode::AtLeast(_) => usable,
            Mode::Spread { k, .. } | Mode::Balanced { k, .. } => (k as usize).min(usable),
        }
    }

    /// Whether the mode may leave a member that falls behind out of new messages (every
    /// mode but `All`, whose messages need every member).
    pub fn may_skip(self) -> bool {
        self != Mode::All
    }

    /// Checks the mode against a group of `members` destinations.
    pub fn check(self, members: usize) -> Result<(), ModeError> {
        let fits = |what: &str, v: u16, lo: usize, hi: usize, hint: &str| {
            if (lo..=hi).contains(&(v as usize)) {
                Ok(())
            } else {
                Err(ModeError(format!(
                    "{self}: {what} is {v}, but must be between {lo} and {hi} {hint}"
                )))
            }
        };
        if members == 0 {
            return Err(ModeError("a group needs at least one destination".into()));
        }
        match self {
            Mode::All | Mode::Any => Ok(()),
            Mode::AtLeast(p) => fits("P", p, 1, members, "(the number of destinations)"),
            Mode::Spread { k, p } | Mode::Balanced { k, p } => {
                fits("k", k, 1, members, "(the number of destinations)")?;
                fits("p", p, 1, k as usize, "(k)")
            }
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mode::All => f.write_str("all"),
            Mode::Any => f.write_str("any"),
            Mode::AtLeast(p) => write!(f, "at-least={p}"),
            Mode::Spread { k, p } => write!(f, "spread=k{k}p{p}"),
            Mode::Balanced { k, p } => write!(f, "balanced=k{k}p{p}"),
        }
    }
}

impl FromStr for Mode {
    type Err = ModeError;

    /// `all`, `any`, `at-least=P`, `spread=kKpP`, `balanced=kKpP`.
    fn from_str(s: &str) -> Result<Self, ModeError> {
        let bad = || {
            ModeError(format!(
                "unknown mode {s:?}: use all, any, at-least=P (e.g. at-least=2), \
                 spread=kKpP or balanced=kKpP (e.g. balanced=k2p1: each message to the 2 \
                 least loaded destinations, done once 1 has it)"
            ))
        };
        let number = |v: &str| v.parse::<u16>().map_err(|_| bad());
        let k_p = |v: &str| -> Result<(u16, u16), ModeError> {
            let rest = v.strip_prefix('k').ok_or_else(bad)?;
            let (k, p) = rest.split_once('p').ok_or_else(bad)?;
            Ok((number(k)?, number(p)?))
        };
        match s.split_once('=') {
            None if s == "all" => Ok(Mode::All),
            None if s == "any" => Ok(Mode::Any),
            Some(("at-least", p)) => Ok(Mode::AtLeast(number(p)?)),
            Some(("spread", v)) => k_p(v).map(|(k, p)| Mode::Spread { k, p }),
            Some(("balanced", v)) => k_p(v).map(|(k, p)| Mode::Balanced { k, p }),
            _ => Err(bad()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_and_print_the_same() {
        for m in [
            Mode::All,
            Mode::Any,
            Mode::AtLeast(2),
            Mode::Spread { k: 2, p: 1 },
            Mode::Balanced { k: 3, p: 2 },
        ] {
            assert_eq!(m.to_string().parse::<Mode>(), Ok(m));
        }
        for bad in [
            "most",
            "at-least=",
            "at-least=x",
            "balanced=2",
            "spread=k2",
            "",
        ] {
            let e = bad.parse::<Mode>().unwrap_err();
            assert!(e.0.contains("balanced=k2p1"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_mode_must_fit_its_group() {
        assert!(Mode::AtLeast(2).check(3).is_ok());
        let e = Mode::AtLeast(4).check(3).unwrap_err();
        assert!(e.0.contains("between 1 and 3"), "{e}");
        assert!(Mode::Balanced { k: 2, p: 3 }.check(3).is_err(), "p above k");
        assert!(Mode::Spread { k: 0, p: 0 }.check(3).is_err());
        assert!(Mode::All.check(0).is_err());
        assert_eq!(Mode::All.needed(3), 3);
        assert_eq!(Mode::Any.needed(3), 1);
        assert_eq!(Mode::Balanced { k: 2, p: 1 }.fan_out(3), 2);
        assert_eq!(Mode::AtLeast(2).fan_out(3), 3);
    }
}
