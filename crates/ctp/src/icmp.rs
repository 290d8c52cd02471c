//! What the network said about the datagrams an endpoint sent: ICMP and ICMPv6
//! destination-unreachable messages, read from the socket's error queue.
//!
//! An unconnected UDP socket hears of them only with `IP_RECVERR` / `IPV6_RECVERR` set
//! (Linux): the kernel then queues each one, with the destination of the datagram that
//! caused it (`msg_name`) and a `sock_extended_err`, and reports the socket in error until
//! the queue is read with `recvmsg(MSG_ERRQUEUE)`. A pending error also fails the next
//! receive or send once (`ECONNREFUSED`, `EHOSTUNREACH`); the driver then drains the queue.
//! Elsewhere nothing is enabled and nothing is ever read: connection attempts to a closed
//! port wait for their handshake timeout, as before.
//!
//! What a report does to a connection is the sans-IO core's decision
//! ([`ctp_proto::Endpoint::on_unreachable`]).

use ctp_proto::Unreachable;
use std::io;
use std::net::SocketAddr;
use tokio::net::UdpSocket;

/// One entry of the error queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) struct Report {
    /// Where the datagram that drew the error was going.
    pub dest: SocketAddr,
    /// What the error says about it (`None`: not a destination-unreachable message, e.g. a
    /// packet-too-big one or a local error, which the driver ignores).
    pub kind: Option<Unreachable>,
}

/// Asks the kernel to queue ICMP errors for `socket` (best effort: a socket without it only
/// misses the early end of attempts to closed ports).
pub(crate) fn enable(socket: &UdpSocket, udp: &quinn_udp::UdpSocketState) {
    if let Err(e) = udp.enable_transport_errors(socket.into()) {
        tracing::debug!("ICMP errors not enabled on the socket: {e}");
    }
}

/// Reads one entry of `socket`'s error queue; `Ok(None)` when it is empty (or, off Linux,
/// always).
#[cfg(target_os = "linux")]
pub(crate) fn recv(socket: &UdpSocket) -> io::Result<Option<Report>> {
    use std::os::fd::AsRawFd;
    // SAFETY: every pointer handed to recvmsg points into a local of the size given, the
    // control messages are walked with the kernel's own macros within `msg_controllen`, and
    // the extended error is read unaligned from inside its control message, whose length
    // was checked first.
    unsafe {
        let mut name: libc::sockaddr_storage = std::mem::zeroed();
        // u64s: aligned for cmsghdr.
        let mut control = [0u64; 64];
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: byte.len(),
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_name = (&mut name as *mut libc::sockaddr_storage).cast();
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        let flags = libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT;
        if libc::recvmsg(socket.as_raw_fd(), &mut msg, flags) < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock => Ok(None),
                _ => Err(e),
            };
        }
        let Some(dest) = socket_addr(&name) else {
            return Ok(None);
        };
        let mut kind = None;
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            let c = &*cmsg;
            let recverr = (c.cmsg_level == libc::SOL_IP && c.cmsg_type == libc::IP_RECVERR)
                || (c.cmsg_level == libc::SOL_IPV6 && c.cmsg_type == libc::IPV6_RECVERR);
            let len = libc::CMSG_LEN(std::mem::size_of::<libc::sock_extended_err>() as u32);
            if recverr && c.cmsg_len as usize >= len as usize {
                let ee: libc::sock_extended_err =
                    std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                kind = classify(ee.ee_origin, ee.ee_type, ee.ee_code);
                break;
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        Ok(Some(Report { dest, kind }))
    }
}

/// Off Linux the error queue does not exist.
#[cfg(not(target_os = "linux"))]
pub(crate) fn recv(_socket: &UdpSocket) -> io::Result<Option<Report>> {
    Ok(None)
}

/// The destination in a `sockaddr_storage` the kernel filled (an IPv4-mapped IPv6 address
/// as plain IPv4, as the driver files peers).
#[cfg(target_os = "linux")]
fn socket_addr(name: &libc::sockaddr_storage) -> Option<SocketAddr> {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};
    // SAFETY: the family says which of the two layouts the storage holds; both fit in it.
    let addr = unsafe {
        match name.ss_family as libc::c_int {
            libc::AF_INET => {
                let a = &*(name as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>();
                SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                    u16::from_be(a.sin_port),
                ))
            }
            libc::AF_INET6 => {
                let a = &*(name as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>();
                SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(a.sin6_addr.s6_addr),
                    u16::from_be(a.sin6_port),
                    a.sin6_flowinfo,
                    a.sin6_scope_id,
                ))
            }
            _ => return None,
        }
    };
    Some(crate::mapped::normalize(addr))
}

/// What an extended error's origin, ICMP type and code say about the destination.
#[cfg(target_os = "linux")]
fn classify(origin: u8, icmp_type: u8, code: u8) -> Option<Unreachable> {
    match (origin, icmp_type, code) {
        // ICMP destination unreachable (RFC 792, RFC 1812 §5.2.7.1).
        (libc::SO_EE_ORIGIN_ICMP, 3, 3) => Some(Unreachable::Port),
        (libc::SO_EE_ORIGIN_ICMP, 3, 0 | 6 | 11) => Some(Unreachable::Network),
        (libc::SO_EE_ORIGIN_ICMP, 3, 1 | 7 | 12) => Some(Unreachable::Host),
        (libc::SO_EE_ORIGIN_ICMP, 3, 9 | 10 | 13) => Some(Unreachable::Prohibited),
        // ICMPv6 destination unreachable (RFC 4443 §3.1).
        (libc::SO_EE_ORIGIN_ICMP6, 1, 4) => Some(Unreachable::Port),
        (libc::SO_EE_ORIGIN_ICMP6, 1, 0) => Some(Unreachable::Network),
        (libc::SO_EE_ORIGIN_ICMP6, 1, 3) => Some(Unreachable::Host),
        (libc::SO_EE_ORIGIN_ICMP6, 1, 1 | 5 | 6) => Some(Unreachable::Prohibited),
        // Packet too big, fragmentation needed, protocol unreachable, local errors: not
        // about the peer being there.
        _ => None,
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn icmp_codes_map_to_what_they_say_and_mtu_messages_are_not_unreachable() {
        let v4 = libc::SO_EE_ORIGIN_ICMP;
        let v6 = libc::SO_EE_ORIGIN_ICMP6;
        assert_eq!(classify(v4, 3, 3), Some(Unreachable::Port));
        assert_eq!(classify(v6, 1, 4), Some(Unreachable::Port));
        assert_eq!(classify(v4, 3, 1), Some(Unreachable::Host));
        assert_eq!(classify(v6, 1, 3), Some(Unreachable::Host));
        assert_eq!(classify(v4, 3, 0), Some(Unreachable::Network));
        assert_eq!(classify(v4, 3, 13), Some(Unreachable::Prohibited));
        assert_eq!(classify(v4, 3, 4), None, "fragmentation needed");
        assert_eq!(classify(v6, 2, 0), None, "packet too big");
        assert_eq!(classify(libc::SO_EE_ORIGIN_LOCAL, 0, 0), None);
    }
}
