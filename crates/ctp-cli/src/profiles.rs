//! `ctp profiles`: the built-in profiles and their microprotocols, `--explain` for one
//! composition, and resolving a `--profile` argument (a built-in name or a TOML file).

use crate::failure::Failure;
use crate::output::outln;
use ctp_proto::profile::{every_builtin, explain, file, warnings, Profile};
use serde::Serialize;
use std::path::Path;

/// `profile` with its congestion control replaced by the algorithm called `name` (as
/// `ctp send --cc NAME`); an unknown name or a profile that cannot take one is a usage error.
pub fn with_cc(profile: Profile, name: &str) -> Result<Profile, Failure> {
    let kind = ctp_proto::cc::CcKind::from_name(name).ok_or_else(|| {
        Failure::Usage(format!(
            "--cc: {}",
            ctp_proto::cc::UnknownCc { name: name.into() }
        ))
    })?;
    profile
        .with_cc(kind)
        .map_err(|e| Failure::Usage(format!("--cc {name}: {e}")))
}

/// The congestion control `ctp send` and `ctp perf` run on the built-in `reliable` profile
/// when `--cc` names none: chosen by measurement (`docs/decisions.md`, "The file-transfer
/// default: bbr-fair"): BBR's speed on long lossy paths, a fair share beside Reno and CUBIC.
pub const SENDER_CC: &str = "bbr-fair";

/// `profile` (as `--profile` named it: `profile_arg`) with the sender's congestion control:
/// the one `cc` names, else [`SENDER_CC`] for the built-in `reliable`; other profiles keep
/// their own.
pub fn sender_cc(
    profile: Profile,
    profile_arg: &str,
    cc: Option<&str>,
) -> Result<Profile, Failure> {
    match cc {
        Some(name) => with_cc(profile, name),
        None if profile_arg == "reliable" => with_cc(profile, SENDER_CC),
        None => Ok(profile),
    }
}

/// A built-in profile by name, or a profile file (a path ending in `.toml` or an existing
/// file). Semantic warnings about the composition go to stderr.
pub fn resolve(arg: &str) -> Result<Profile, Failure> {
    let path = Path::new(arg);
    let profile = if arg.ends_with(".toml") || path.is_file() {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Failure::Usage(format!("cannot read profile file {arg}: {e}")))?;
        file::parse(&text, arg).map_err(|e| Failure::Usage(e.to_string()))?
    } else {
        Profile::builtin(arg)
            .map_err(|e| Failure::Usage(format!("{e}; or give a profile file (NAME.toml)")))?
    };
    for w in warnings(profile.micros) {
        eprintln!("ctp: warning: profile `{}`: {w}", profile.name);
    }
    Ok(profile)
}

#[derive(Serialize)]
struct Explanation {
    name: String,
    microprotocols: Vec<ExplainedMicro>,
}

#[derive(Serialize)]
struct ExplainedMicro {
    name: &'static str,
    description: &'static str,
    events: Vec<String>,
    writes_frames: bool,
}

/// Prints the composition of one profile and the events each microprotocol binds.
pub fn explain_one(arg: &str, json: bool) -> Result<(), Failure> {
    let p = resolve(arg)?;
    let parts = explain(&p)
        .map_err(|e| Failure::Usage(format!("profile `{}` does not compose: {e}", p.name)))?;
    let x = Explanation {
        name: p.name.clone(),
        microprotocols: parts
            .into_iter()
            .map(|e| ExplainedMicro {
                name: e.id.name(),
                description: e.id.describe(),
                events: e.events.iter().map(|k| format!("{k:?}")).collect(),
                writes_frames: e.writes_frames,
            })
            .collect(),
    };
    if json {
        outln!("{}", serde_json::to_string_pretty(&x).unwrap_or_default());
        return Ok(());
    }
    outln!(
        "{} — {} microprotocols (parameters: {:?})
",
        x.name,
        x.microprotocols.len(),
        p.params
    );
    for m in x.microprotocols {
        outln!("{:<14} {}", m.name, m.description);
        if m.events.is_empty() {
            outln!("{:<14} built into the endpoint and packet path", "");
        } else {
            outln!("{:<14} binds: {}", "", m.events.join(", "));
        }
        if m.writes_frames {
            outln!("{:<14} writes frames into packets", "");
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct MicroInfo {
    name: &'static str,
    description: &'static str,
}

#[derive(Serialize)]
struct ProfileInfo {
    name: &'static str,
    description: &'static str,
    reliable: bool,
    microprotocols: Vec<MicroInfo>,
}

fn infos() -> Vec<ProfileInfo> {
    every_builtin()
        .filter_map(|&(name, description)| {
            let p = Profile::builtin(name).ok()?;
            Some(ProfileInfo {
                name,
                description,
                reliable: p.is_reliable(),
                microprotocols: p
                    .micros
                    .iter()
                    .map(|m| MicroInfo {
                        name: m.name(),
                        description: m.describe(),
                    })
                    .collect(),
            })
        })
        .collect()
}

/// Prints the profiles.
pub fn run(json: bool) {
    let infos = infos();
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&infos).unwrap_or_default()
        );
        return;
    }
    for p in infos {
        outln!("{} — {}", p.name, p.description);
        for m in p.microprotocols {
            outln!("    {:<14} {}", m.name, m.description);
        }
        outln!();
    }
    outln!("congestion control (`ctp send --cc NAME`, or `cc = \"NAME\"` in a profile file):");
    for k in ctp_proto::cc::CcKind::ALL {
        outln!("    {:<14} {}", k.name(), k.describe());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctp_proto::cc::CcKind;

    #[test]
    fn a_sender_runs_bbr_fair_on_reliable_unless_told_otherwise() {
        let cc = |arg: &str, cc: Option<&str>| {
            sender_cc(resolve(arg).expect("a profile"), arg, cc)
                .expect("composes")
                .params
                .cc
        };
        assert_eq!(cc("reliable", None), CcKind::BbrFair);
        assert_eq!(cc("reliable", Some("cubic")), CcKind::Cubic);
        assert_eq!(cc("reliable", Some("newreno")), CcKind::NewReno);
        // Another profile keeps its own.
        let bulk = resolve("ctp-bulk").unwrap();
        assert_eq!(cc("ctp-bulk", None), bulk.params.cc);
        assert!(matches!(
            sender_cc(Profile::reliable(), "reliable", Some("reno9")),
            Err(Failure::Usage(m)) if m.contains("reno9")
        ));
    }
}
