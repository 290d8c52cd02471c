//! The MTU the kernel knows for the route to a peer, the way TCP picks its MSS: a
//! connected throw-away UDP socket asked for `IP_MTU` / `IPV6_MTU` (Linux). It knows the
//! outgoing interface's MTU (a tunnel's, a PPPoE link's, jumbo frames) and any smaller path
//! MTU learnt from ICMP; it cannot know a narrower link further on, which only probing
//! (the `pmtud` microprotocol) finds.

use ctp_proto::Profile;
use std::net::SocketAddr;

/// IPv4 + UDP header bytes.
const IPV4_UDP: u32 = 20 + 8;
/// IPv6 + UDP header bytes.
const IPV6_UDP: u32 = 40 + 8;

/// `profile` with its UDP payload limited to what the route to `peer` carries in one IP
/// packet (never below the 1200-byte floor every path must carry). Unchanged when the
/// kernel does not say.
pub(crate) fn fit_to_route(profile: &Profile, peer: SocketAddr) -> Profile {
    let mut p = profile.clone();
    if let Some(payload) = route_udp_payload(peer) {
        // Never above the profile's limit; never below the floor (an invalid profile is
        // left for `connect` to refuse).
        let fitted = payload
            .max(ctp_proto::profile::MIN_UDP_PAYLOAD.into())
            .min(p.params.max_udp_payload.into());
        if fitted < u32::from(p.params.max_udp_payload) {
            tracing::debug!(%peer, payload = fitted, "UDP payload limited by the route's MTU");
        }
        p.params.max_udp_payload = fitted as u16;
    }
    p
}

/// The largest UDP payload one IP packet on the route to `peer` carries, if the kernel says.
fn route_udp_payload(peer: SocketAddr) -> Option<u32> {
    let mapped_v4 = match peer.ip() {
        std::net::IpAddr::V6(a) => a.to_ipv4_mapped().is_some(),
        std::net::IpAddr::V4(_) => true,
    };
    let mtu = route_mtu(peer)?;
    let headers = if mapped_v4 { IPV4_UDP } else { IPV6_UDP };
    mtu.checked_sub(headers)
}

#[cfg(target_os = "linux")]
fn route_mtu(peer: SocketAddr) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let domain = socket2::Domain::for_address(peer);
    let s = socket2::Socket::new(domain, socket2::Type::DGRAM, None).ok()?;
    s.connect(&peer.into()).ok()?;
    let (level, name) = if peer.is_ipv4() {
        (libc::IPPROTO_IP, libc::IP_MTU)
    } else {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU)
    };
    let mut mtu: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `mtu` and `len` are valid for writes of the sizes given; the descriptor is
    // open for the duration of the call.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            level,
            name,
            (&mut mtu as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (rc == 0 && mtu > 0).then_some(mtu as u32)
}

#[cfg(not(target_os = "linux"))]
fn route_mtu(_peer: SocketAddr) -> Option<u32> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loopback's MTU (65536 on Linux) is larger than any profile's limit: nothing changes.
    #[test]
    fn a_wide_route_leaves_the_profile_alone() {
        let p = Profile::reliable();
        let fitted = fit_to_route(&p, "127.0.0.1:9".parse().unwrap());
        assert_eq!(fitted.params.max_udp_payload, p.params.max_udp_payload);
    }

    /// The kernel reports loopback's MTU and the headers come off it.
    #[cfg(target_os = "linux")]
    #[test]
    fn loopback_route_mtu_is_known() {
        let payload = route_udp_payload("127.0.0.1:9".parse().unwrap()).unwrap();
        let mtu = route_mtu("127.0.0.1:9".parse().unwrap()).unwrap();
        assert_eq!(payload + IPV4_UDP, mtu);
        assert!(mtu >= 1500, "loopback MTU {mtu}");
    }
}
