//! Every congestion controller under the same end-to-end test (quiche's "every test under
//! every controller"): a byte-exact stream transfer through the deterministic pair with loss
//! and reordering in both directions, for each algorithm the cc library knows. A new
//! algorithm added to `CcKind::ALL` is tested here for free.

mod common;

use common::{connect, data, stream_transfer};
use core::time::Duration;
use ctp_proto::cc::CcKind;
use ctp_proto::pair::{LinkModel, Pair};
use ctp_proto::{MicroId, Profile};

fn lossy_transfer(kind: CcKind, seed: u64) {
    let mut p = Pair::new(seed);
    let link = LinkModel {
        loss: 0.02,
        reorder: 0.05,
        ..LinkModel::default()
    };
    p.to_server = link;
    p.to_client = link;
    let profile = Profile::reliable()
        .with_cc(kind)
        .expect("reliable takes any cc");
    let (c, s) = connect(&mut p, &profile);
    // Both sides agree on the algorithm.
    for conn in [
        p.client.connection(c).unwrap(),
        p.server.connection(s).unwrap(),
    ] {
        assert!(conn.micros().has(MicroId::Cc), "{kind:?}");
        assert_eq!(conn.params().cc, kind);
    }
    let payload = data(400_000, seed);
    let (got, eof) = stream_transfer(&mut p, c, s, &payload, Duration::from_secs(600));
    let st = p.client.connection(c).unwrap().stats();
    eprintln!(
        "{:>10}: {:.2} s virtual, {} packets, {} lost, cwnd {}",
        kind.name(),
        p.now.as_micros() as f64 / 1e6,
        st.packets_sent,
        st.packets_lost,
        st.cwnd
    );
    assert!(eof, "{}: end of stream not seen: {st:?}", kind.name());
    assert_eq!(got.len(), payload.len(), "{}", kind.name());
    assert!(got == payload, "{}: bytes differ", kind.name());
    assert!(
        st.packets_lost > 0 && st.retransmissions > 0,
        "{}: the link should have lost something: {st:?}",
        kind.name()
    );
}

#[test]
fn every_controller_completes_a_lossy_transfer_byte_exact() {
    for (i, &kind) in CcKind::ALL.iter().enumerate() {
        lossy_transfer(kind, 100 + i as u64);
    }
}
