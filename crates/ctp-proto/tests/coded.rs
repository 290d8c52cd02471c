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
    // Whole bursts arrive before the receiver's next packet leaves: its acknowledgement
    // must still name every packet, or the sender counts the older ones lost.
    assert_eq!(
        tx.packets_lost, 0,
        "no packet counted lost on a lossless link"
    );
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

/// A receiver that does not read for a while: repairs are not decoded into a full receive
/// buffer, nothing breaks the receiver's memory bound (which would close the connection
/// as a protocol violation), and everything arrives once the reader wakes up — over a
/// lossy link, so that repairs are in play throughout.
#[test]
fn a_slow_reader_bounds_what_the_receiver_holds() {
    let client = ctp_proto::EndpointConfig::new([1; 32], [2; 32]);
    let mut server = ctp_proto::EndpointConfig::new([3; 32], [4; 32]);
    server.accept = true;
    server.params.recv_buffer = 256 << 10;
    let mut p = Pair::with_configs(40, client, server);
    let link = LinkModel {
        loss: 0.05,
        delay: Duration::from_millis(5),
        ..LinkModel::default()
    };
    p.to_server = link;
    p.to_client = link;
    let (c, s) = connect(&mut p, &Profile::coded());
    let payload = data(2 << 20, 11);
    let mut written = 0;
    let start = p.now;
    // Five virtual seconds without a read.
    p.run_until(Duration::from_secs(5), |p| {
        if let Some(conn) = p.client.connection_mut(c) {
            while written < payload.len() {
                match conn.stream_write(p.now, &payload[written..]) {
                    Ok(n) => written += n,
                    Err(_) => break,
                }
            }
        }
        false
    });
    assert!(p.now >= start + Duration::from_secs(5));
    let rx = p.server.connection(s).unwrap().stats();
    assert_eq!(rx.protocol_violations, 0);
    assert!(
        rx.app_bytes_delivered <= 256 << 10,
        "{} bytes delivered to a reader that never read",
        rx.app_bytes_delivered
    );
    let (got, eof) = stream_transfer(&mut p, c, s, &payload[written..], Duration::from_secs(300));
    let tx = p.client.connection(c).map(|c| (c.state(), c.stats()));
    let rx2 = p.server.connection(s).map(|c| (c.state(), c.stats()));
    assert!(
        eof,
        "the stream ended: {} of {} bytes; sender {tx:?}; receiver {rx2:?}",
        got.len(),
        payload.len()
    );
    assert!(
        got == payload,
        "byte-exact after the reader woke up: {} of {}",
        got.len(),
        payload.len()
    );
    assert_eq!(
        p.server.connection(s).unwrap().stats().protocol_violations,
        0
    );
}
