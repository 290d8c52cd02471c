//! Addresses on the command line: `HOST:PORT` with a host name, an IPv4 address or a
//! bracketed IPv6 address, resolved once when the arguments are read.

use std::net::{SocketAddr, ToSocketAddrs};

/// Parses `HOST:PORT` (e.g. `localhost:9000`, `192.0.2.7:9000`, `[::1]:9000`) into an address
/// the name resolves to — an IPv4 one when there are both (a receiver listening on
/// `0.0.0.0` or on a dual-stack `[::]` is reached either way; name `[::1]` or an IPv6-only
/// host for IPv6); the error says what was wrong and what a valid one looks like.
pub fn parse(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    let example = "give HOST:PORT, e.g. localhost:9000, 192.0.2.7:9000 or [::1]:9000";
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(format!("`{s}` has no port: {example}"));
    };
    if host.is_empty() {
        return Err(format!("`{s}` has no host: {example}"));
    }
    if port.parse::<u16>().is_err() {
        return Err(format!("`{port}` is not a port (0–65535): {example}"));
    }
    if host.contains(':') && !host.starts_with('[') {
        return Err(format!(
            "`{s}`: an IPv6 address needs brackets around it: {example}"
        ));
    }
    let found: Vec<SocketAddr> = s
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve `{host}`: {e}"))?
        .collect();
    found
        .iter()
        .find(|a| a.is_ipv4())
        .or(found.first())
        .copied()
        .ok_or_else(|| format!("`{host}` resolves to no address"))
}

/// A `HOST:PORT` as the user typed it and the address it resolved to ([`parse`]): the
/// address is what ctp connects to, the text is what the peer's key is remembered under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The text as typed.
    pub typed: String,
    /// The address it resolved to.
    pub resolved: SocketAddr,
}

/// [`parse`], keeping the text as typed.
pub fn parse_target(s: &str) -> Result<Target, String> {
    parse(s).map(|resolved| Target {
        typed: s.to_string(),
        resolved,
    })
}

/// One `--path LOCAL[=HOST:PORT]`: a route from a local IP address to the peer (at
/// `HOST:PORT`, or at the command's peer address when it names none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The local address packets leave from.
    pub local: std::net::IpAddr,
    /// The peer's address on this route (`None`: the command's).
    pub remote: Option<SocketAddr>,
}

/// Parses `LOCAL[=HOST:PORT]` ([`Route`]).
pub fn parse_route(s: &str) -> Result<Route, String> {
    let (local, remote) = match s.split_once('=') {
        Some((l, r)) => (l, Some(parse(r)?)),
        None => (s, None),
    };
    let local = local.trim_start_matches('[').trim_end_matches(']');
    let local = local.parse().map_err(|_| {
        format!(
            "`{local}` is not a local IP address: give LOCAL or LOCAL=HOST:PORT, e.g. \
             10.0.1.5 or 10.0.1.5=192.0.2.7:9000"
        )
    })?;
    if remote.is_some_and(|r| r.is_ipv4() != std::net::IpAddr::is_ipv4(&local)) {
        return Err(format!(
            "`{s}`: the local and the peer address are of different families"
        ));
    }
    Ok(Route { local, remote })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_addresses_and_host_names_parse() {
        assert_eq!(
            parse("127.0.0.1:9000").unwrap(),
            "127.0.0.1:9000".parse().unwrap()
        );
        assert_eq!(parse("[::1]:9").unwrap(), "[::1]:9".parse().unwrap());
        let local = parse("localhost:9000").unwrap();
        assert!(local.ip().is_loopback() && local.is_ipv4(), "{local}");
        assert_eq!(local.port(), 9000);
    }

    #[test]
    fn bad_addresses_say_what_is_wrong() {
        assert!(parse("localhost").unwrap_err().contains("has no port"));
        assert!(parse(":9000").unwrap_err().contains("has no host"));
        assert!(parse("localhost:99999")
            .unwrap_err()
            .contains("is not a port"));
        assert!(parse("::1:9000").unwrap_err().contains("brackets"));
        // (An unresolvable name is not tested: it would ask a DNS server off this machine.)
    }

    #[test]
    fn routes_name_a_local_address_and_maybe_a_peer_address() {
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        assert_eq!(
            parse_route("10.0.1.5").unwrap(),
            Route {
                local: ip("10.0.1.5"),
                remote: None
            }
        );
        assert_eq!(
            parse_route("10.0.1.5=192.0.2.7:9000").unwrap(),
            Route {
                local: ip("10.0.1.5"),
                remote: Some("192.0.2.7:9000".parse().unwrap())
            }
        );
        assert_eq!(parse_route("[::1]").unwrap().local, ip("::1"));
        for (bad, needle) in [
            ("eth0", "`eth0` is not a local IP address"),
            ("10.0.1.5=nowhere", "has no port"),
            ("10.0.1.5=[::1]:9", "different families"),
        ] {
            let e = parse_route(bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn a_target_keeps_the_text_as_typed() {
        let t = parse_target("LocalHost:9000").unwrap();
        assert_eq!(t.typed, "LocalHost:9000");
        assert!(t.resolved.ip().is_loopback() && t.resolved.port() == 9000);
        assert!(parse_target("localhost").is_err());
    }
}
