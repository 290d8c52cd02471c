//! Writes the seed corpus from real traffic: run with
//! `cargo test --manifest-path fuzz/Cargo.toml --test seeds -- --ignored`.
//! Deterministic (virtual time, fixed seeds): rerunning rewrites the same files.

use ctp_fuzz::net::{Net, TO_SERVER};
use ctp_fuzz::transfer::header::{Hello, Plan, Reply, FLAG_RESUME};
use ctp_fuzz::transfer::manifest::{Entry, Kind, Manifest, Mtime};
use ctp_proto::protection::crc32c;
use ctp_proto::udt::packet::{ControlBody, Packet};
use ctp_proto::udt::WireFormat;
use ctp_proto::wire::header::{Header, LongType, NoState};
use ctp_proto::wire::Reader;
use ctp_proto::Profile;
use std::path::Path;

fn put(target: &str, name: &str, data: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    std::fs::create_dir_all(&dir).expect("corpus directory");
    std::fs::write(dir.join(name), data).expect("seed written");
}

/// Runs a short transfer over `net` and returns every datagram sent, with its direction.
fn traffic(mut net: Net, profile: &Profile) -> Vec<(usize, Vec<u8>)> {
    assert!(net.connect(profile), "handshake");
    let c = net.client_conn.expect("client");
    let s = net.server_conn.expect("server");
    let payload: Vec<u8> = (0..6000u32).map(|i| (i * 7) as u8).collect();
    let now = net.now;
    let conn = net.client.connection_mut(c).expect("conn");
    let n = conn.stream_write(now, &payload).expect("room");
    assert_eq!(n, payload.len());
    let _ = conn.stream_finish(now);
    net.collect();
    // Lose one datagram so that the seeds hold a loss report and a retransmission.
    net.queue[TO_SERVER].remove(1);
    net.settle(20);
    let mut buf = vec![0u8; 8192];
    let got = net
        .server
        .connection_mut(s)
        .expect("server conn")
        .stream_read(net.now, &mut buf)
        .unwrap_or(0);
    assert!(got > 0, "nothing arrived");
    net.fresh
}

#[test]
#[ignore = "writes the seed corpus"]
fn write_seed_corpus() {
    // Native datagrams: the handshake and the first data and acknowledgement packets.
    let native = traffic(Net::new(WireFormat::Ctp), &Profile::reliable());
    for (i, (_, d)) in native.iter().take(12).enumerate() {
        put("wire", &format!("reliable-{i:02}"), d);
    }
    let audio = traffic(
        Net::new(WireFormat::Ctp),
        &Profile::builtin("ctp-audio").unwrap(),
    );
    for (i, (_, d)) in audio.iter().take(8).enumerate() {
        put("wire", &format!("audio-{i:02}"), d);
    }
    // A NOSTATE (a transfer without a restart sends none).
    let n = NoState {
        cid: 0x0102_0304,
        echo: core::array::from_fn(|i| i as u8 * 17),
    };
    put("wire", "nostate", &ctp_proto::packet::nostate_packet(&n));
    // Handshake bodies, behind the mode byte the target reads first.
    for (_, d) in &native {
        let Ok(packet) = crc32c::open_long(d) else {
            continue; // a short packet
        };
        let mut r = Reader::new(packet);
        let Ok(Header::Long { ty, .. }) = Header::parse(&mut r) else {
            continue;
        };
        let body = r.rest();
        let body = &body[..body.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1)];
        let with = |mode: u8| [&[mode][..], body].concat();
        match ty {
            LongType::Init => {
                put("handshake", "offer", &with(0));
                put("handshake", "init", &with(2));
            }
            LongType::InitAck => {
                put("handshake", "init-ack", &with(3));
                // The cookie inside, without its MAC: the target recomputes one.
                let mut r = Reader::new(body);
                ctp_proto::profile::decode_offer(&mut r, &Default::default()).expect("offer");
                let cookie = r.length_prefixed(256, "cookie").expect("cookie");
                put(
                    "handshake",
                    "cookie",
                    &[&[1][..], &cookie[..cookie.len() - 32]].concat(),
                );
            }
            LongType::CookieEcho => put("handshake", "cookie-echo", &with(5)),
            LongType::Handshake => put("handshake", "noise", &with(6)),
            // (Not in a transfer without a restart; the wire seed above.)
            LongType::NoState => {}
            LongType::Refuse => {}
        }
    }
    put("handshake", "refuse", b"\x04\x0bnot today.");
    // UDT4 packets: one of each kind seen.
    let udt = traffic(Net::new(WireFormat::Udt4), &Profile::udt());
    let mut kinds = std::collections::BTreeSet::new();
    for (_, d) in &udt {
        let kind = match Packet::parse(d).expect("udt packet") {
            Packet::Data(..) => "data".to_string(),
            Packet::Control(c) => match c.body {
                ControlBody::Handshake(h) => format!("handshake{}", h.req_type),
                b => format!("control{}", b.type_code()),
            },
        };
        if kinds.insert(kind.clone()) {
            put("udt_packet", &kind, d);
        }
    }
    // Profile files.
    put(
        "profile_toml",
        "base-add-remove.toml",
        b"name = \"bulk-small-window\"\nbase = \"reliable\"\nadd = [\"keepalive\"]\nremove = [\"pacing\"]\ncc = \"cubic\"\n\n[params]\nflow_window = 4096\nidle_timeout_ms = 10000\n",
    );
    put(
        "profile_toml",
        "audio-fec.toml",
        b"name = \"audio-fec\"\nbase = \"ctp-audio\"\n\n[params]\nfec_k = 8\nfec_m = 2\nfec_flush_ms = 20\nplayout_delay_ms = 60\n",
    );
    put(
        "profile_toml",
        "list.toml",
        b"name = \"minimal-list\"\nmicroprotocols = [\"demux\", \"integrity\", \"setup\", \"fragmentation\", \"unordered\"]\n[params]\nmax_udp_payload = 1200\n",
    );
    // Scenario files: the repository's own.
    let scen = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    for e in std::fs::read_dir(scen).expect("scenarios/").flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "toml") {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            put("scenario_toml", &name, &std::fs::read(&p).unwrap());
        }
    }
    // File-transfer openings (manifests), answers and replies.
    let entry = |path: &str, kind, size| Entry {
        path: path.to_string(),
        kind,
        size,
        mode: 0o644,
        mtime: Mtime {
            secs: 1_700_000_000,
            nanos: 5,
        },
    };
    for (i, entries) in [
        vec![entry("big.iso", Kind::File, 1 << 40)],
        vec![
            entry("tree", Kind::Dir, 0),
            entry("tree/empty", Kind::Dir, 0),
            entry("tree/été.pdf", Kind::File, 12345),
        ],
    ]
    .into_iter()
    .enumerate()
    {
        let h = Hello {
            flags: FLAG_RESUME,
            manifest: Manifest { entries },
        };
        put("transfer_header", &format!("opening-{i}"), &h.encode());
    }
    // A version-1 opening, which a receiver refuses with the reason.
    put(
        "transfer_header",
        "opening-v1",
        b"CTPF\x01\x00\x07big.iso\x00\x00\x00\x00\x00\x00\x00\x05",
    );
    put(
        "transfer_header",
        "answer-go",
        &Plan::Go(vec![vec![[1; 32], [2; 32]], vec![], vec![[3; 32]]]).encode(),
    );
    put("transfer_header", "reply-ok", &Reply::Ok([7; 32]).encode());
    put(
        "transfer_header",
        "reply-err",
        &Reply::Err("disk full".into()).encode(),
    );
    // The stateful targets read operations with `arbitrary`: a few deterministic byte
    // strings to start from (the fuzzer's own finds are added after a run, minimised).
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut bytes = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    };
    for (i, n) in [64, 256, 1024].into_iter().enumerate() {
        put("pair", &format!("random-{i}"), &bytes(n));
        put("udt_conn", &format!("random-{i}"), &bytes(n));
    }
}
