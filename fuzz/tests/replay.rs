//! Replays every saved input (`corpus/<target>/` and `regressions/<target>/`) through the
//! function its fuzz target calls, on stable Rust: a crash the fuzzer once found, or an
//! input that covers a path, stays a test.

use std::path::{Path, PathBuf};

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

#[test]
fn every_saved_input_replays_without_a_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut failed = Vec::new();
    let mut count = 0;
    for &(name, run) in ctp_fuzz::TARGETS {
        for kind in ["corpus", "regressions"] {
            for path in inputs(&root.join(kind).join(name)) {
                let data = std::fs::read(&path).expect("readable input");
                count += 1;
                if std::panic::catch_unwind(|| run(&data)).is_err() {
                    failed.push(path.display().to_string());
                }
            }
        }
    }
    assert!(failed.is_empty(), "inputs that panic: {failed:#?}");
    eprintln!("replayed {count} inputs");
}

#[test]
fn every_target_has_a_binary_and_a_seed_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for &(name, _) in ctp_fuzz::TARGETS {
        assert!(
            root.join("fuzz_targets")
                .join(format!("{name}.rs"))
                .is_file(),
            "fuzz_targets/{name}.rs missing"
        );
        assert!(
            !inputs(&root.join("corpus").join(name)).is_empty(),
            "corpus/{name}/ is empty"
        );
    }
}

#[test]
fn the_stateful_targets_start_from_an_established_connection() {
    use ctp_fuzz::net::Net;
    use ctp_proto::udt::WireFormat;
    use ctp_proto::Profile;
    for name in [
        "reliable",
        "ctp-bulk",
        "datagram",
        "ctp-minimal",
        "ctp-lossy-fifo",
        "ctp-video",
        "ctp-audio",
    ] {
        let mut net = Net::new(WireFormat::Ctp);
        assert!(net.connect(&Profile::builtin(name).unwrap()), "{name}");
    }
    for p in [Profile::udt(), Profile::udt_dgram()] {
        let mut net = Net::new(WireFormat::Udt4);
        assert!(net.connect(&p), "{}", p.name);
    }
}

/// The hand-written and repository seeds (not the fuzzer's finds, named `fuzz-*`).
fn seeds(dir: &Path) -> Vec<PathBuf> {
    inputs(dir)
        .into_iter()
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("fuzz-"))
        })
        .collect()
}

#[test]
fn the_seed_files_parse() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    for p in seeds(&root.join("profile_toml")) {
        let text = std::fs::read_to_string(&p).unwrap();
        ctp_proto::profile::file::parse(&text, "seed").unwrap();
    }
    for p in seeds(&root.join("scenario_toml")) {
        let text = std::fs::read_to_string(&p).unwrap();
        ctp_sim::scenario::Scenario::parse(&text, "seed").unwrap();
    }
}

/// The handshake target's Noise mode holds for genuine-looking and random messages alike:
/// message-sized bodies of every byte, and truncations of both, never break the real
/// handshake that runs after them (the target asserts it completes).
#[test]
fn forged_noise_messages_never_break_a_genuine_handshake() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for len in [0usize, 1, 31, 32, 33, 64, 95, 96, 97, 200, 300] {
        let mut body = vec![6u8];
        body.extend((0..len).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        }));
        ctp_fuzz::handshake(&body);
    }
}
