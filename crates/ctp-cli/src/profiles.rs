//! `ctp profiles`: the built-in profiles and their microprotocols.

use ctp_proto::profile::{Profile, BUILTIN};
use serde::Serialize;

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
    BUILTIN
        .iter()
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
        println!(
            "{}",
            serde_json::to_string_pretty(&infos).unwrap_or_default()
        );
        return;
    }
    for p in infos {
        println!("{} — {}", p.name, p.description);
        for m in p.microprotocols {
            println!("    {:<14} {}", m.name, m.description);
        }
        println!();
    }
}
