//! Profiles as data: TOML files naming microprotocols and parameters.
//!
//! ```toml
//! name = "bulk-small-window"
//! base = "reliable"             # a built-in profile to start from (optional)
//! add = ["keepalive"]           # microprotocols to add to the base (optional)
//! remove = ["pacing"]           # microprotocols to remove from the base (optional)
//! # microprotocols = ["demux", "integrity", …]   # or the whole list, instead of base/add/remove
//!
//! cc = "cubic"                  # congestion control from the cc library (optional)
//!
//! [params]                      # any subset of the parameters
//! flow_window = 4096
//! idle_timeout_ms = 10000
//! ```
//! Unknown keys, unknown microprotocol names and out-of-range values are errors that name the
//! key and the line; the resulting composition is checked like any profile.

use super::{MicroId, MicroSet, Params, Profile, ProfileError};
use ctp_cc::CcKind;
use serde::Deserialize;

/// A profile file that could not be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{origin}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ProfileFileError {
    /// Where the text came from (a path, usually).
    pub origin: String,
    /// 1-based line of the offending key, when known.
    pub line: Option<usize>,
    /// What is wrong and how to fix it.
    pub message: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileProfile {
    name: String,
    base: Option<String>,
    microprotocols: Option<Vec<String>>,
    #[serde(default)]
    add: Vec<String>,
    #[serde(default)]
    remove: Vec<String>,
    cc: Option<String>,
    #[serde(default)]
    params: FileParams,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileParams {
    max_udp_payload: Option<u16>,
    flow_window: Option<u32>,
    max_message: Option<u32>,
    idle_timeout_ms: Option<u32>,
    keepalive_ms: Option<u32>,
    min_rto_us: Option<u32>,
    max_ack_delay_us: Option<u32>,
    initial_window: Option<u32>,
    send_buffer: Option<u32>,
    recv_buffer: Option<u32>,
    fifo_deadline_ms: Option<u32>,
    fec_k: Option<u8>,
    fec_m: Option<u8>,
    fec_flush_ms: Option<u32>,
    coded_k: Option<u16>,
    coded_blocks: Option<u16>,
    jitter_interval_us: Option<u32>,
    playout_delay_ms: Option<u32>,
    cc_rate_kbps: Option<u32>,
    causal_deadline_ms: Option<u32>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())]
        .bytes()
        .filter(|&b| b == b'\n')
        .count()
        + 1
}

/// The line where `key` is assigned (first occurrence at the start of a line).
fn key_line(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let t = l.trim_start();
            t.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|i| i + 1)
}

fn micro(name: &str) -> Result<MicroId, String> {
    MicroId::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = MicroId::ALL.iter().map(|m| m.name()).collect();
        format!(
            "unknown microprotocol `{name}`; known: {}",
            known.join(", ")
        )
    })
}

/// Parses a profile from TOML text; `origin` names the source in error messages.
pub fn parse(text: &str, origin: &str) -> Result<Profile, ProfileFileError> {
    let err = |line: Option<usize>, message: String| ProfileFileError {
        origin: origin.to_string(),
        line,
        message,
    };
    let f: FileProfile = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| line_of(text, s.start));
        err(line, e.message().to_string())
    })?;
    if f.microprotocols.is_some() && (f.base.is_some() || !f.add.is_empty() || !f.remove.is_empty())
    {
        return Err(err(
            key_line(text, "microprotocols"),
            "`microprotocols` lists the whole composition; do not combine it with `base`, `add` or `remove`".into(),
        ));
    }
    let (mut set, mut params) = match (&f.microprotocols, &f.base) {
        (Some(list), _) => {
            let mut ids = Vec::new();
            for n in list {
                ids.push(micro(n).map_err(|m| err(key_line(text, "microprotocols"), m))?);
            }
            (MicroSet::of(&ids), Params::default())
        }
        (None, Some(b)) => {
            let p = Profile::builtin(b).map_err(|e| err(key_line(text, "base"), e.to_string()))?;
            (p.micros, p.params)
        }
        (None, None) => {
            return Err(err(
                None,
                "a profile needs `base = \"<built-in>\"` or a `microprotocols = [...]` list".into(),
            ));
        }
    };
    for n in &f.add {
        set = set.with(micro(n).map_err(|m| err(key_line(text, "add"), m))?);
    }
    for n in &f.remove {
        set = set.without(micro(n).map_err(|m| err(key_line(text, "remove"), m))?);
    }
    let p = &f.params;
    macro_rules! apply {
        ($($field:ident),*) => { $( if let Some(v) = p.$field { params.$field = v; } )* };
    }
    apply!(
        max_udp_payload,
        flow_window,
        max_message,
        idle_timeout_ms,
        keepalive_ms,
        min_rto_us,
        max_ack_delay_us,
        initial_window,
        send_buffer,
        recv_buffer,
        fifo_deadline_ms,
        fec_k,
        fec_m,
        fec_flush_ms,
        coded_k,
        coded_blocks,
        jitter_interval_us,
        playout_delay_ms,
        cc_rate_kbps,
        causal_deadline_ms
    );
    let mut profile = Profile {
        name: f.name,
        micros: set,
        params,
    };
    if let Some(name) = &f.cc {
        let line = key_line(text, "cc");
        let kind = CcKind::from_name(name)
            .ok_or_else(|| err(line, ctp_cc::UnknownCc { name: name.clone() }.to_string()))?;
        profile = profile
            .with_cc(kind)
            .map_err(|e| err(line, e.to_string()))?;
    }
    profile.check().map_err(|e| {
        let line = match &e {
            ProfileError::Param { name, .. } => {
                key_line(text, name.split('/').next().unwrap_or(name))
            }
            _ => key_line(text, "microprotocols")
                .or_else(|| key_line(text, "remove"))
                .or_else(|| key_line(text, "add")),
        };
        err(line, e.to_string())
    })?;
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_derived_profile_parses() {
        let p = parse("name = \"x\"\nbase = \"reliable\"\nremove = [\"pacing\"]\n[params]\nflow_window = 64\n", "x.toml").unwrap();
        assert_eq!(p.name, "x");
        assert_eq!(
            p.micros,
            Profile::reliable().micros.without(MicroId::Pacing)
        );
        assert_eq!(p.params.flow_window, 64);
    }

    #[test]
    fn the_catalogue_names_parse() {
        let p = parse(
            "name = \"c\"\nbase = \"reliable\"\nremove = [\"fifo\"]\nadd = [\"causal\", \"pmtud\", \"compression\"]\n[params]\ncausal_deadline_ms = 50\n",
            "c.toml",
        )
        .unwrap();
        for m in [MicroId::Causal, MicroId::Pmtud, MicroId::Compression] {
            assert!(p.micros.has(m), "{m}");
        }
        assert!(!p.micros.has(MicroId::Fifo));
        assert_eq!(p.params.causal_deadline_ms, 50);
    }

    #[test]
    fn a_full_list_parses() {
        let list: Vec<String> = Profile::datagram()
            .micros
            .iter()
            .map(|m| format!("\"{}\"", m.name()))
            .collect();
        let p = parse(
            &format!("name = \"d\"\nmicroprotocols = [{}]\n", list.join(", ")),
            "d.toml",
        )
        .unwrap();
        assert_eq!(p.micros, Profile::datagram().micros);
    }

    #[test]
    fn cc_selects_an_algorithm_and_bad_names_list_the_known_ones() {
        let p = parse(
            "name = \"c\"\nbase = \"reliable\"\ncc = \"cubic\"\n",
            "c.toml",
        )
        .unwrap();
        assert_eq!(p.params.cc, CcKind::Cubic);
        assert!(p.micros.has(MicroId::Cc) && !p.micros.has(MicroId::NewReno));
        assert_eq!(p.congestion_control(), Some("cubic"));
        let p = parse(
            "name = \"b\"\nbase = \"ctp-bulk\"\ncc = \"blast\"\n[params]\ncc_rate_kbps = 8000\n",
            "b.toml",
        )
        .unwrap();
        assert!(
            p.micros.has(MicroId::Pacing),
            "rate-based algorithms get pacing"
        );
        assert_eq!(p.params.cc_rate_kbps, 8000);
        let e = parse(
            "name = \"c\"\nbase = \"reliable\"\n\ncc = \"reno9\"\n",
            "c.toml",
        )
        .unwrap_err();
        assert_eq!(e.line, Some(4));
        assert!(
            e.message.contains("`reno9`") && e.message.contains("bbr"),
            "{e}"
        );
        let e = parse(
            "name = \"m\"\nbase = \"ctp-minimal\"\ncc = \"bbr\"\n",
            "m.toml",
        )
        .unwrap_err();
        assert!(e.message.contains("no congestion control"), "{e}");
        // Without `cc`, the built-ins keep NewReno.
        let p = parse("name = \"r\"\nbase = \"reliable\"\n", "r.toml").unwrap();
        assert_eq!(p.congestion_control(), Some("newreno"));
        assert!(p.micros.has(MicroId::NewReno));
    }

    #[test]
    fn errors_name_the_key_and_the_line() {
        let e = parse(
            "name = \"x\"\nbase = \"reliable\"\n[params]\nflow_windw = 3\n",
            "f.toml",
        )
        .unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");
        assert!(
            e.to_string().starts_with("f.toml:4:") && e.to_string().contains("flow_windw"),
            "{e}"
        );
        let e = parse(
            "name = \"x\"\nbase = \"reliable\"\n\nadd = [\"turbo\"]\n",
            "f.toml",
        )
        .unwrap_err();
        assert_eq!(e.line, Some(4));
        assert!(
            e.message.contains("unknown microprotocol `turbo`") && e.message.contains("newreno"),
            "{e}"
        );
        let e = parse(
            "name = \"x\"\nbase = \"reliable\"\n[params]\n\nflow_window = 1\n",
            "f.toml",
        )
        .unwrap_err();
        assert_eq!(e.line, Some(5));
        assert!(e.message.contains("flow_window"), "{e}");
        let e = parse(
            "name = \"x\"\nbase = \"reliable\"\nremove = [\"ack-tracking\"]\n",
            "f.toml",
        )
        .unwrap_err();
        assert_eq!(e.line, Some(3));
        assert!(e.message.contains("`ack-tracking`"), "{e}");
        let e = parse("name = \"x\"\nbase = \"fast\"\n", "f.toml").unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.message.contains("unknown profile `fast`"), "{e}");
        let e = parse("name = \"x\"\n", "f.toml").unwrap_err();
        assert!(e.message.contains("base"), "{e}");
        let e = parse(
            "name = \"x\"\nbase = \"reliable\"\n[params]\nflow_window = -3\n",
            "f.toml",
        )
        .unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");
    }
}
