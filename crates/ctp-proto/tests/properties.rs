//! Property tests: whatever the network does (loss up to 30%, reordering, duplication,
//! corruption), `reliable` delivers exactly the bytes sent, in order, once; `datagram`
//! never delivers a corrupted or duplicated message.

mod common;

use common::{connect, data, stream_transfer};
use core::time::Duration;
use ctp_proto::pair::{LinkModel, Pair};
use ctp_proto::Profile;
use proptest::prelude::*;

fn link() -> impl Strategy<Value = LinkModel> {
    (
        0.0..=0.30f64,
        0.0..=0.2f64,
        0.0..=0.5f64,
        1u64..=40,
        0u64..=30,
        0.0..=0.05f64,
    )
        .prop_map(
            |(loss, duplicate, reorder, delay_ms, extra_ms, corrupt)| LinkModel {
                delay: Duration::from_millis(delay_ms),
                loss,
                duplicate,
                reorder,
                reorder_extra: Duration::from_millis(extra_ms),
                corrupt,
                max_datagram: None,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn reliable_delivers_exactly_the_bytes_sent(seed in any::<u64>(), up in link(), down in link(), len in 0usize..200_000) {
        let mut p = Pair::with_handshake_timeout(seed, Duration::from_secs(600));
        p.to_server = up;
        p.to_client = down;
        let mut prof = Profile::reliable();
        // A long idle timeout: at 30% loss in both directions, silence can last a while.
        prof.params.idle_timeout_ms = 600_000;
        let (c, s) = connect(&mut p, &prof);
        let payload = data(len, seed);
        let (got, eof) = stream_transfer(&mut p, c, s, &payload, Duration::from_secs(3_000));
        prop_assert!(eof, "no end of stream; got {} of {} bytes", got.len(), len);
        prop_assert!(got == payload, "delivered bytes differ ({} vs {})", got.len(), len);
    }

    #[test]
    fn datagram_never_corrupts_or_duplicates(seed in any::<u64>(), up in link(), count in 1usize..300) {
        let mut p = Pair::with_handshake_timeout(seed, Duration::from_secs(600));
        p.to_server = up;
        let (c, s) = connect(&mut p, &Profile::datagram());
        let msgs: Vec<Vec<u8>> = (0..count).map(|i| {
            let mut m = (i as u32).to_be_bytes().to_vec();
            m.extend(data((i * 131) % 4000, seed ^ i as u64));
            m
        }).collect();
        let mut next = 0;
        let mut got = Vec::new();
        p.run_until(Duration::from_secs(30), |p| {
            let now = p.now;
            let conn = p.client.connection_mut(c).unwrap();
            while next < msgs.len() && conn.send_msg(now, bytes::Bytes::from(msgs[next].clone())).is_ok() {
                next += 1;
            }
            let conn = p.server.connection_mut(s).unwrap();
            while let Ok(m) = conn.recv_msg(now) {
                got.push(m);
            }
            false
        });
        let mut seen = std::collections::HashSet::new();
        for m in &got {
            prop_assert!(m.len() >= 4);
            let id = u32::from_be_bytes(m[..4].try_into().unwrap()) as usize;
            prop_assert!(id < count);
            prop_assert!(m[..] == msgs[id][..], "message {} corrupted", id);
            prop_assert!(seen.insert(id), "message {} delivered twice", id);
        }
        if up.loss == 0.0 && up.corrupt == 0.0 {
            prop_assert_eq!(got.len(), count, "a lossless link must deliver everything");
        }
    }
}
