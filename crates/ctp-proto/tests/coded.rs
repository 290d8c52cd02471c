//! The `coded` profile (CTCP) end to end through the deterministic in-memory pair: delivery
//! exactly once and in order under loss, reordering and duplication, without a single
//! retransmission, and redundancy that follows the loss rate.

mod common;

use common::{connect, data, stream_transfer};
use core::time::Duration;
use ctp_proto::pair::{LinkModel, Pair};
use ctp_proto::{ConnectionStats, Profile};

/// One transfer of `len` bytes over a link losing `loss` of the packets each way; the
/// sender's and the receiver's statistics.
fn coded_transfer(seed: u64, len: usize, link: LinkModel) -> (ConnectionStats, ConnectionStats) {
    let mut p = Pair::new(seed);
    p.to_server = link;
    p.to_client = link;
    let (c, s) = connect(&mut p, &Profile::coded());
    let payload = data(len, seed);
    let (got, eof) = stream_transfer(&mut p, c, s, &payload, Duration::from_secs(600));
    assert!(eof, "the stream ended ({} of {} bytes)", got.len(), len);
    assert!(got == payload, "byte-exact: {} of {} bytes", got.len(), len);
    (
        p.client.connection(c).unwrap().stats(),
        p.server.connection(s).unwrap().stats(),
    )
}

#[test]
fn a_lossless_coded_transfer_sends_no_repairs_and_arrives_exactly() {
    let (tx, rx) = coded_transfer(1, 1 << 20, LinkModel::default());
    assert_eq!(tx.retransmissions, 0);
    assert_eq!(rx.coded_recovered, 0);
    assert!(
        tx.coded_repairs_sent * 50 <= tx.segments_sent,
        "at most 2 % repairs without loss: {} for {} segments",
        tx.coded_repairs_sent,
        tx.segments_sent
    );
}

#[test]
fn losses_are_repaired_by_coded_symbols_never_by_retransmission() {
    let link = LinkModel {
        loss: 0.05,
        reorder: 0.1,
        duplicate: 0.02,
        ..LinkModel::default()
    };
    let (tx, rx) = coded_transfer(2, 1 << 20, link);
    assert_eq!(tx.retransmissions, 0, "nothing is ever sent twice");
    assert!(rx.coded_recovered > 0, "lost segments were decoded");
    assert!(tx.coded_repairs_sent > 0);
}

#[test]
fn redundancy_follows_the_loss_rate() {
    let overhead = |loss: f64| {
        let link = LinkModel {
            loss,
            delay: Duration::from_millis(20),
            ..LinkModel::default()
        };
        let (tx, _) = coded_transfer(3, 4 << 20, link);
        tx.coded_repairs_sent as f64 / tx.segments_sent as f64
    };
    let (none, low, high) = (overhead(0.0), overhead(0.01), overhead(0.05));
    assert_eq!(none, 0.0, "no loss, no repair");
    assert!(
        low > 0.01 && low < 0.2,
        "1 % loss: {low:.3} repairs per segment"
    );
    assert!(
        high > 0.05 && high < 0.4,
        "5 % loss: {high:.3} repairs per segment"
    );
    assert!(
        high > 2.0 * low,
        "more loss, more repairs: {low:.3} then {high:.3}"
    );
}
