//! End-to-end behaviour of the catalogue's causal ordering, path MTU discovery and
//! compression microprotocols through the deterministic in-memory pair.

mod common;

use bytes::Bytes;
use common::{connect, data, stream_transfer};
use core::time::Duration;
use ctp_proto::pair::{LinkModel, Pair};
use ctp_proto::{MicroId, MicroSet, Profile, WriteError};

fn with(base: Profile, add: &[MicroId], remove: &[MicroId], name: &str) -> Profile {
    let mut set = base.micros.union(MicroSet::of(add));
    for &m in remove {
        set = set.without(m);
    }
    let p = Profile {
        name: name.into(),
        micros: set,
        params: base.params,
    };
    p.check().expect("valid composition");
    p
}

fn causal_reliable() -> Profile {
    with(
        Profile::reliable(),
        &[MicroId::Causal],
        &[MicroId::Fifo],
        "causal",
    )
}

#[test]
fn causal_delivers_every_message_after_the_ones_it_names_over_a_lossy_path() {
    let mut p = Pair::new(41);
    let bad = LinkModel {
        loss: 0.05,
        reorder: 0.2,
        ..LinkModel::default()
    };
    p.to_server = bad;
    p.to_client = bad;
    let (c, s) = connect(&mut p, &causal_reliable());
    // Message i names i-3 and i-7 when they exist: chains that interleave.
    let n = 300usize;
    let mut ids: Vec<u64> = Vec::new();
    let mut deps: Vec<Vec<u64>> = Vec::new();
    let mut got: Vec<Bytes> = Vec::new();
    let ok = p.run_until(Duration::from_secs(120), |p| {
        let now = p.now;
        let conn = p.client.connection_mut(c).unwrap();
        while ids.len() < n {
            let i = ids.len();
            let after: Vec<u64> = [3usize, 7]
                .iter()
                .filter(|&&k| i >= k)
                .map(|&k| ids[i - k])
                .collect();
            let body = [
                (i as u32).to_be_bytes().to_vec(),
                data(200 + i * 13, i as u64),
            ]
            .concat();
            match conn.send_msg_after(now, Bytes::from(body), &after) {
                Ok(id) => {
                    ids.push(id);
                    deps.push(after);
                }
                Err(_) => break,
            }
        }
        let conn = p.server.connection_mut(s).unwrap();
        while let Ok(m) = conn.recv_msg(now) {
            got.push(m);
        }
        got.len() == n
    });
    assert!(ok, "only {} of {n} messages arrived", got.len());
    let mut position = vec![usize::MAX; n];
    for (pos, m) in got.iter().enumerate() {
        let i = u32::from_be_bytes(m[..4].try_into().unwrap()) as usize;
        assert!(
            m[4..] == data(200 + i * 13, i as u64)[..],
            "message {i} differs"
        );
        position[i] = pos;
    }
    for i in 0..n {
        for &d in &deps[i] {
            let k = ids.iter().position(|&x| x == d).unwrap();
            assert!(position[k] < position[i], "{i} delivered before {k}");
        }
    }
    let st = p.server.connection(s).unwrap().stats();
    assert_eq!(st.causal_released_early, 0, "{st:?}");
    // Ids are consecutive and a bad predecessor list is refused.
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1));
    let conn = p.client.connection_mut(c).unwrap();
    let now = p.now;
    let next = ids[n - 1] + 1;
    for after in [vec![next], vec![ids[0] - 1], vec![ids[0]; 17]] {
        assert!(
            matches!(
                conn.send_msg_after(now, Bytes::from_static(b"x"), &after),
                Err(WriteError::BadDependency(_))
            ),
            "{after:?}"
        );
    }
}

#[test]
fn causal_keeps_the_byte_stream_in_order() {
    let mut p = Pair::new(42);
    p.to_server.loss = 0.03;
    p.to_server.reorder = 0.2;
    let (c, s) = connect(&mut p, &causal_reliable());
    let payload = data(400_000, 3);
    let (got, eof) = stream_transfer(&mut p, c, s, &payload, Duration::from_secs(120));
    assert!(eof);
    assert!(got == payload, "bytes differ");
}

fn compressed_reliable() -> Profile {
    with(
        Profile::reliable(),
        &[MicroId::Compression],
        &[],
        "compressed",
    )
}

#[test]
fn compression_shrinks_the_wire_for_compressible_data_and_keeps_it_exact() {
    let text: Vec<u8> = (0..20_000u32)
        .flat_map(|i| {
            format!(
                "{{\"id\":{i},\"name\":\"sensor-{}\",\"ok\":true}}\n",
                i % 50
            )
            .into_bytes()
        })
        .collect();
    let mut wire = Vec::new();
    for profile in [Profile::reliable(), compressed_reliable()] {
        let mut p = Pair::new(43);
        p.to_server.loss = 0.02;
        let (c, s) = connect(&mut p, &profile);
        let (got, eof) = stream_transfer(&mut p, c, s, &text, Duration::from_secs(120));
        assert!(eof && got == text, "{}: bytes differ", profile.name);
        let st = p.client.connection(c).unwrap().stats();
        wire.push((st.bytes_sent, st.segments_compressed));
    }
    let (plain, compressed) = (wire[0], wire[1]);
    assert_eq!(plain.1, 0);
    assert!(compressed.1 > 0);
    assert!(
        compressed.0 * 2 < plain.0,
        "{} bytes on the wire compressed vs {} plain",
        compressed.0,
        plain.0
    );
}

#[test]
fn compression_sends_incompressible_data_as_it_is() {
    let payload = data(300_000, 5);
    let mut p = Pair::new(44);
    let (c, s) = connect(&mut p, &compressed_reliable());
    let (got, eof) = stream_transfer(&mut p, c, s, &payload, Duration::from_secs(60));
    assert!(eof && got == payload);
    let st = p.client.connection(c).unwrap().stats();
    assert_eq!(st.segments_compressed, 0, "{st:?}");
    assert!(st.bytes_sent > payload.len() as u64);
}

fn pmtud(base: Profile) -> Profile {
    with(base, &[MicroId::Pmtud], &[], "pmtud")
}

fn pmtu_pair(seed: u64, ceiling: u16) -> Pair {
    use ctp_proto::pair::Pair as P;
    let s = |n: u64, salt: u8| {
        let mut b = [salt; 32];
        b[..8].copy_from_slice(&n.to_le_bytes());
        b
    };
    let client = ctp_proto::EndpointConfig::new(s(seed, 1), s(seed, 2));
    let mut server = ctp_proto::EndpointConfig::new(s(seed, 3), s(seed, 4));
    server.accept = true;
    server.params.max_udp_payload = ceiling;
    P::with_configs(seed, client, server)
}

#[test]
fn pmtud_converges_to_the_path_mtu_without_treating_probe_losses_as_congestion() {
    use ctp_proto::micro::pmtud::SEARCH_STEP;
    for (seed, ceiling, path) in [
        (45u64, 1452u16, 1400usize),
        (46, 9000, 4000),
        (47, 9000, 1200),
    ] {
        let mut p = pmtu_pair(seed, ceiling);
        p.to_server.max_datagram = Some(path);
        p.to_client.max_datagram = Some(path);
        let mut profile = pmtud(Profile::reliable());
        profile.params.max_udp_payload = ceiling;
        let (c, s) = connect(&mut p, &profile);
        let payload = data(1 << 20, seed);
        let (got, eof) = stream_transfer(&mut p, c, s, &payload, Duration::from_secs(120));
        assert!(eof && got == payload, "path {path}: bytes differ");
        // Let the search finish if the transfer was shorter.
        p.run_until(Duration::from_secs(5), |_| false);
        let st = p.client.connection(c).unwrap().stats();
        let found = st.path_mtu as usize;
        assert!(
            (1200..=path).contains(&found) && found + SEARCH_STEP > path,
            "path {path}, ceiling {ceiling}: found {found}: {st:?}"
        );
        assert!(p.dropped_too_big > 0 || path == 1200 || path >= ceiling as usize);
        assert!(st.pmtu_probes_lost >= 3, "{st:?}");
        // Probe losses are not congestion: nothing else was lost, no timer expired.
        assert_eq!((st.packets_lost, st.rto_expiries), (0, 0), "{st:?}");
        assert_eq!(st.retransmissions, 0, "{st:?}");
    }
}

#[test]
fn pmtud_falls_back_to_the_floor_on_a_black_hole_and_searches_again() {
    use ctp_proto::micro::pmtud::SEARCH_STEP;
    let mut p = Pair::new(48);
    p.to_server.max_datagram = Some(1400);
    p.to_client.max_datagram = Some(1400);
    let (c, s) = connect(&mut p, &pmtud(Profile::datagram()));
    p.run_until(Duration::from_secs(2), |_| false);
    let st = p.client.connection(c).unwrap().stats();
    assert!(
        st.path_mtu as usize + SEARCH_STEP > 1400,
        "{st:?} {:?}",
        p.server.connection(s).unwrap().stats()
    );
    // The path shrinks under the application's feet.
    p.to_server.max_datagram = Some(1250);
    p.to_client.max_datagram = Some(1250);
    let mut sent = 0u32;
    let mut got = 0u32;
    let mut last = p.now;
    let ok = p.run_until(Duration::from_secs(30), |p| {
        let now = p.now;
        if sent < 2000 && now.saturating_since(last) >= Duration::from_millis(2) {
            last = now;
            let conn = p.client.connection_mut(c).unwrap();
            if conn.send_msg(now, Bytes::from(vec![7u8; 1300])).is_ok() {
                sent += 1;
            }
        }
        let conn = p.server.connection_mut(s).unwrap();
        while conn.recv_msg(now).is_ok() {
            got += 1;
        }
        sent == 2000
    });
    assert!(ok);
    p.run_until(Duration::from_secs(2), |_| false);
    let st = p.client.connection(c).unwrap().stats();
    assert!(st.pmtu_black_holes >= 1, "{st:?}");
    let found = st.path_mtu as usize;
    assert!(
        (1200..=1250).contains(&found) && found + SEARCH_STEP > 1250,
        "found {found}: {st:?}"
    );
    assert!(
        got > 1900,
        "only {got} of {sent} messages arrived after the fallback"
    );
}
