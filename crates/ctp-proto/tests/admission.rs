//! Fair admission: one peer address cannot take every connection slot.

mod common;

use common::connect;
use core::time::Duration;
use ctp_proto::pair::Pair;
use ctp_proto::{CloseReason, ConnectionState, EndpointConfig, Profile};

#[test]
fn one_address_gets_at_most_its_share_of_connections() {
    let client = EndpointConfig::new([1; 32], [2; 32]);
    let mut server = EndpointConfig::new([3; 32], [4; 32]);
    server.accept = true;
    server.max_connections_per_address = 3;
    let mut p = Pair::with_configs(5, client, server);
    for _ in 0..3 {
        connect(&mut p, &Profile::reliable());
    }
    // The fourth from the same address (another port would not help: the limit is per
    // address) is refused, and the initiator learns why.
    let c = p
        .client
        .connect(p.now, p.server_addr, &Profile::reliable())
        .unwrap();
    assert!(p.run_until(Duration::from_secs(20), |p| {
        matches!(
            p.client.connection(c).map(|x| x.state()),
            Some(ConnectionState::Closed(_))
        )
    }));
    match p.client.connection(c).unwrap().state() {
        ConnectionState::Closed(CloseReason::Handshake(r)) => {
            assert!(r.contains("too many connections from your address"), "{r}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(p.server.connection_count(), 3);
    // Another host still gets in.
    p.client_addr = "10.0.0.77:1000".parse().unwrap();
    connect(&mut p, &Profile::reliable());
    assert_eq!(p.server.connection_count(), 4);
}
