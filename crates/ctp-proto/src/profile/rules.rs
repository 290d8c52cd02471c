//! The composition rules: a microprotocol set checked against the declarations in the
//! catalogue (mandatory members, exclusive groups, needs, a delivery order), and the
//! warnings about valid but doubtful compositions.

use super::catalogue::{Doubt, Group, MicroSet, MANDATORY};
use super::error::ProfileError;

/// Checks a microprotocol set for mandatory members, dependencies and conflicts: the first
/// problem [`problems`] finds.
pub fn check_micros(set: MicroSet) -> Result<(), ProfileError> {
    match problems(set).into_iter().next() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Every rule a microprotocol set breaks, in the order they are checked: mandatory members,
/// conflicts (two members of one exclusive group), dependencies, dependencies on one member
/// of a group, a delivery order. Within each kind, in composition order.
pub fn problems(set: MicroSet) -> Vec<ProfileError> {
    let mut found: Vec<ProfileError> = MANDATORY
        .iter()
        .filter(|&&m| !set.has(m))
        .map(|&m| ProfileError::Mandatory(m))
        .collect();
    for &group in Group::ALL {
        let present: Vec<_> = present(set, group).iter().collect();
        for (i, &a) in present.iter().enumerate() {
            for &b in &present[i + 1..] {
                found.push(ProfileError::Conflict { a, b, group });
            }
        }
    }
    let decls = || set.iter().map(|m| m.decl());
    for d in decls() {
        found.extend(
            d.needs
                .iter()
                .filter(|need| !set.has(need.micro))
                .map(|need| ProfileError::Missing {
                    micro: d.id,
                    needs: need.micro,
                    why: need.why,
                }),
        );
    }
    for d in decls() {
        found.extend(
            d.needs_one_of
                .iter()
                .filter(|o| present(set, o.group) == MicroSet::default())
                .map(|o| ProfileError::MissingOneOf {
                    micro: d.id,
                    group: o.group,
                    why: o.why,
                }),
        );
    }
    if present(set, Group::Delivery) == MicroSet::default() {
        found.push(ProfileError::NoDelivery);
    }
    found
}

/// The members of `group` in `set`.
fn present(set: MicroSet, group: Group) -> MicroSet {
    MicroSet(set.0 & group.members().0)
}

/// Warnings about a valid but semantically doubtful composition (empty when none).
pub fn warnings(set: MicroSet) -> Vec<&'static str> {
    set.iter()
        .flat_map(|m| m.decl().doubts)
        .filter_map(|doubt| match *doubt {
            Doubt::With(other, text) if set.has(other) => Some(text),
            Doubt::Without(other, text) if !set.has(other) => Some(text),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::*;
    use MicroId::*;

    /// Every pair of microprotocols that conflict (the central table's pairs before
    /// conflicts became exclusive groups), each in catalogue order.
    const CONFLICTING_PAIRS: [(MicroId, MicroId); 24] = [
        (Fifo, Unordered),
        (Fifo, LossyFifo),
        (Unordered, LossyFifo),
        (NewReno, Scp),
        (Fec, Compression),
        (Fifo, Causal),
        (LossyFifo, Causal),
        (Unordered, Causal),
        (FlowWindow, XonXoff),
        (FlowWindow, RtsCts),
        (XonXoff, RtsCts),
        (FixedInterval, Playout),
        (NewReno, Tfrc),
        (Scp, Tfrc),
        (NewReno, Cc),
        (Scp, Cc),
        (Tfrc, Cc),
        (Arq, Coded),
        (NewReno, Coded),
        (Fec, Coded),
        (Scp, Coded),
        (Tfrc, Coded),
        (Cc, Coded),
        (Compression, Coded),
    ];

    /// Each dependency rule, provoked by removing what it needs.
    /// Each dependency, alternative and conflict rule, provoked by the smallest set that
    /// breaks it (the mandatory microprotocols, the rule's members, a delivery order), and
    /// gone once the set is fixed as its message says. The rules are written out here, not
    /// read from the declarations, so a rule dropped from a declaration fails this test. A
    /// conflict names its pair in composition order.
    #[test]
    fn each_rule_is_provoked_by_the_set_that_breaks_it() {
        use MicroId::*;
        let set = |members: &[MicroId]| {
            let delivery = [Fifo, LossyFifo, Causal, Unordered];
            let mut v = MANDATORY.to_vec();
            v.extend_from_slice(members);
            if !members.iter().any(|m| delivery.contains(m)) {
                v.push(Unordered);
            }
            MicroSet::of(&v)
        };
        let dependencies = [
            (Arq, AckTracking),
            (Arq, Sequencing),
            (AckTracking, Rtt),
            (Fifo, Sequencing),
            (LossyFifo, Sequencing),
            (Pmtud, AckTracking),
            (Causal, Sequencing),
            (Fec, Sequencing),
            (FlowWindow, Sequencing),
            (CongestionWindow, AckTracking),
            (NewReno, CongestionWindow),
            (NewReno, AckTracking),
            (Scp, CongestionWindow),
            (Scp, Pacing),
            (Scp, AckTracking),
            (Cc, CongestionWindow),
            (Cc, AckTracking),
            (RtsCts, Sequencing),
            (Tfrc, Pacing),
            (Tfrc, AckTracking),
            (Coded, Sequencing),
        ];
        for (micro, needs) in dependencies {
            let is_rule = |e: &ProfileError| matches!(e, ProfileError::Missing { micro: m, needs: n, .. } if *m == micro && *n == needs);
            let broken = set(&[micro]);
            let found = problems(broken);
            let e = found
                .iter()
                .find(|e| is_rule(e))
                .unwrap_or_else(|| panic!("{micro} without {needs}: {found:?}"));
            let text = e.to_string();
            assert!(
                text.contains(&format!("add `{needs}` or remove `{micro}`")),
                "{text}"
            );
            assert!(!problems(broken.with(needs)).iter().any(is_rule));
        }
        for (a, b) in CONFLICTING_PAIRS {
            let is_rule = |e: &ProfileError| matches!(e, ProfileError::Conflict { a: x, b: y, .. } if *x == a && *y == b);
            let found = problems(set(&[a, b]));
            let e = found
                .iter()
                .find(|e| is_rule(e))
                .unwrap_or_else(|| panic!("{a} with {b}: {found:?}"));
            let text = e.to_string();
            assert!(
                text.contains(&format!("`{a}` and `{b}` conflict")),
                "{text}"
            );
            assert!(text.contains("keep only one"), "{text}");
            assert!(!problems(set(&[a]).without(b)).iter().any(is_rule));
        }
        for micro in [CongestionWindow, Pacing] {
            let is_rule = |e: &ProfileError| matches!(e, ProfileError::MissingOneOf { micro: m, .. } if *m == micro);
            let broken = set(&[micro]);
            let found = problems(broken);
            let e = found
                .iter()
                .find(|e| is_rule(e))
                .unwrap_or_else(|| panic!("{micro} without a policy: {found:?}"));
            assert!(
                e.to_string().contains("`newreno`, `scp`, `tfrc`, `cc`"),
                "{e}"
            );
            for policy in [NewReno, Scp, Tfrc, Cc] {
                assert!(!problems(broken.with(policy)).iter().any(is_rule));
            }
        }
        // In-order delivery needs something that makes sure every segment arrives.
        let is_rule =
            |e: &ProfileError| matches!(e, ProfileError::MissingOneOf { micro: Fifo, .. });
        let found = problems(set(&[Fifo]));
        let e = found
            .iter()
            .find(|e| is_rule(e))
            .unwrap_or_else(|| panic!("fifo without reliability: {found:?}"));
        assert!(e.to_string().contains("`arq`, `coded`"), "{e}");
        for reliability in [Arq, Coded] {
            assert!(!problems(set(&[Fifo, reliability])).iter().any(is_rule));
        }
        // The first problem is what `check_micros` reports.
        let broken = set(&[Fifo, NewReno]);
        assert_eq!(check_micros(broken).unwrap_err(), problems(broken)[0]);
    }

    #[test]
    fn every_dependency_is_enforced() {
        for (micro, needs) in DECLS
            .iter()
            .flat_map(|d| d.needs.iter().map(|n| (d.id, n.micro)))
        {
            // A valid builtin holding the microprotocol (adding it when no builtin has it),
            // minus what it needs.
            let base = BUILTIN
                .iter()
                .map(|b| Profile::builtin(b.0).unwrap())
                .map(|p| {
                    // Add the microprotocol and drop the other members of its groups.
                    let rivals = micro.decl().groups.iter().fold(0, |r, g| r | g.members().0);
                    MicroSet((p.micros.0 & !rivals) | MicroSet::of(&[micro]).0)
                })
                .find(|&set| set.has(needs) && check_micros(set).is_ok())
                .unwrap_or_else(|| panic!("no valid composition holds {micro} with {needs}"));
            let set = base.without(needs);
            let err = check_micros(set).unwrap_err();
            // The first failing rule may be another one caused by the same removal, but it
            // must name the removed microprotocol.
            let text = err.to_string();
            assert!(
                text.contains(&format!("`{needs}`")),
                "removing {needs} gave: {text}"
            );
        }
    }

    #[test]
    fn conflicts_and_mandatory_and_delivery_are_enforced() {
        let both = Profile::reliable().micros.with(Unordered);
        assert_eq!(
            check_micros(both),
            Err(ProfileError::Conflict {
                a: Fifo,
                b: Unordered,
                group: Group::Delivery
            })
        );
        let msg = check_micros(both).unwrap_err().to_string();
        assert!(
            msg.contains("`fifo`") && msg.contains("`unordered`"),
            "{msg}"
        );
        assert!(
            msg.contains("exclusive group `delivery`") && msg.contains(Group::Delivery.why()),
            "{msg}"
        );
        assert_eq!(
            check_micros(Profile::datagram().micros.without(Integrity)),
            Err(ProfileError::Mandatory(Integrity))
        );
        assert_eq!(
            check_micros(Profile::datagram().micros.without(Unordered)),
            Err(ProfileError::NoDelivery)
        );
    }

    #[test]
    fn mechanisms_need_one_of_the_policies_and_policies_conflict() {
        for (micro, group) in DECLS
            .iter()
            .flat_map(|d| d.needs_one_of.iter().map(|o| (d.id, o.group)))
        {
            // A valid builtin holding the microprotocol, minus every member of the group.
            let base = BUILTIN
                .iter()
                .map(|b| Profile::builtin(b.0).unwrap().micros)
                .find(|set| set.has(micro))
                .map(|set| MicroSet(set.0 & !group.members().0))
                .unwrap_or_else(|| panic!("no builtin holds {micro}"));
            let found = problems(base);
            let e = found
                .iter()
                .find(|e| matches!(e, ProfileError::MissingOneOf { micro: m, .. } if *m == micro))
                .unwrap_or_else(|| panic!("{micro} without `{group}`: {found:?}"));
            let text = e.to_string();
            assert!(
                group
                    .members()
                    .iter()
                    .all(|o| text.contains(&format!("`{o}`"))),
                "{text}"
            );
        }
        let both = Profile::ctp_video().micros.with(NewReno);
        assert!(matches!(
            check_micros(both),
            Err(ProfileError::Conflict {
                a: NewReno,
                b: Scp,
                ..
            })
        ));
    }

    #[test]
    fn semantic_conflicts_are_warnings_not_errors() {
        let both = MicroSet(
            Profile::ctp_lossy_fifo().micros.0 | Profile::reliable().micros.without(Fifo).0,
        );
        check_micros(both).unwrap();
        assert!(warnings(both)
            .iter()
            .any(|w| w.contains("`lossy-fifo`") && w.contains("`arq`")));
        assert!(warnings(Profile::ctp_minimal().micros)
            .iter()
            .any(|w| w.contains("duplicated")));
        assert!(warnings(Profile::reliable().micros).is_empty());
        let e = check_micros(Profile::reliable().micros.with(LossyFifo)).unwrap_err();
        assert!(
            matches!(
                e,
                ProfileError::Conflict {
                    a: Fifo,
                    b: LossyFifo,
                    ..
                }
            ),
            "{e}"
        );
    }

    fn causal_set() -> MicroSet {
        Profile::reliable().micros.without(Fifo).with(Causal)
    }

    #[test]
    fn causal_is_a_delivery_order_of_its_own() {
        check_micros(causal_set()).unwrap();
        for other in [Fifo, LossyFifo, Unordered] {
            let e = check_micros(causal_set().with(other)).unwrap_err();
            assert!(
                matches!(e, ProfileError::Conflict { a, b: Causal, group: Group::Delivery } if a == other),
                "{e}"
            );
            let text = e.to_string();
            assert!(
                text.contains("`causal`") && text.contains(&format!("`{other}`")),
                "{text}"
            );
        }
    }

    #[test]
    fn causal_needs_sequencing() {
        let set = Profile::ctp_minimal()
            .micros
            .without(Unordered)
            .with(Causal);
        assert!(matches!(
            check_micros(set),
            Err(ProfileError::Missing {
                micro: Causal,
                needs: Sequencing,
                ..
            })
        ));
        check_micros(set.with(Sequencing)).unwrap();
    }

    #[test]
    fn compression_conflicts_with_fec() {
        let audio = Profile::ctp_audio().micros;
        let e = check_micros(audio.with(Compression)).unwrap_err();
        assert!(
            matches!(
                e,
                ProfileError::Conflict {
                    a: Fec,
                    b: Compression,
                    ..
                }
            ),
            "{e}"
        );
        check_micros(Profile::ctp_video().micros.with(Compression)).unwrap();
    }

    #[test]
    fn pmtud_needs_ack_tracking() {
        let set = Profile::ctp_lossy_fifo().micros.with(Pmtud);
        assert!(matches!(
            check_micros(set),
            Err(ProfileError::Missing {
                micro: Pmtud,
                needs: AckTracking,
                ..
            })
        ));
        check_micros(Profile::datagram().micros.with(Pmtud)).unwrap();
    }

    /// The pairs the central conflict table listed before conflicts became exclusive groups
    /// ([`CONFLICTING_PAIRS`]): each is still refused, by a conflict that names both and a group
    /// both declare, with the group's reason.
    #[test]
    fn every_pair_the_old_conflicts_table_listed_is_still_refused() {
        for (x, y) in CONFLICTING_PAIRS {
            let set = MicroSet::of(&[MANDATORY, &[x, y]].concat());
            let e = problems(set)
                .into_iter()
                .find(|e| {
                    matches!(e, ProfileError::Conflict { a, b, .. }
                        if (*a, *b) == (x, y) || (*a, *b) == (y, x))
                })
                .unwrap_or_else(|| panic!("{x} with {y} is not refused"));
            let ProfileError::Conflict { group, .. } = e else {
                unreachable!()
            };
            assert!(x.decl().groups.contains(&group) && y.decl().groups.contains(&group));
            let text = e.to_string();
            for part in [
                format!("`{x}`"),
                format!("`{y}`"),
                format!("exclusive group `{group}`"),
                group.why().to_string(),
            ] {
                assert!(text.contains(&part), "{text}");
            }
        }
        // And nothing else: the groups refuse exactly those pairs.
        let refused = MicroId::ALL
            .iter()
            .flat_map(|&x| MicroId::ALL.iter().map(move |&y| (x, y)))
            .filter(|&(x, y)| x < y)
            .filter(|&(x, y)| {
                problems(MicroSet::of(&[x, y]))
                    .iter()
                    .any(|e| matches!(e, ProfileError::Conflict { .. }))
            })
            .count();
        assert_eq!(refused, CONFLICTING_PAIRS.len());
    }
}
