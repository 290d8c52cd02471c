//! Socket addresses as the sans-IO endpoint knows them.

use std::net::{IpAddr, SocketAddr};

/// An IPv4-mapped IPv6 source as plain IPv4, so it matches the address a connection was
/// opened to.
pub(crate) fn normalize(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), v6.port()),
            None => a,
        },
        a => a,
    }
}
