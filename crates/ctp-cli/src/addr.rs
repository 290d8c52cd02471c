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
    fn a_target_keeps_the_text_as_typed() {
        let t = parse_target("LocalHost:9000").unwrap();
        assert_eq!(t.typed, "LocalHost:9000");
        assert!(t.resolved.ip().is_loopback() && t.resolved.port() == 9000);
        assert!(parse_target("localhost").is_err());
    }
}
