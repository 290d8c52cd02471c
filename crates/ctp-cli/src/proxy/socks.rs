//! SOCKS version 5 (RFC 1928), the part a local gateway needs: no authentication, the
//! CONNECT command, IPv4, IPv6 and domain-name targets; and the header a proxy stream
//! starts with on the ctp connection (the target in SOCKS's own address encoding), with the
//! server's answer (a SOCKS reply code and a reason).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The protocol version byte of every SOCKS 5 message.
const VERSION: u8 = 5;
/// Method: no authentication required.
const NO_AUTH: u8 = 0x00;
/// Method: none of the offered methods is acceptable.
const NO_ACCEPTABLE_METHOD: u8 = 0xff;
/// Command: connect to the target over TCP.
const CMD_CONNECT: u8 = 0x01;
/// Address types.
const ATYP_IPV4: u8 = 0x01;
const ATYP_DOMAIN: u8 = 0x03;
const ATYP_IPV6: u8 = 0x04;
/// The version byte of a proxy stream's header (the first byte the gateway writes on it),
/// and of the greeting that opens a gateway's connection.
pub const STREAM_VERSION: u8 = 1;

/// A SOCKS reply code (RFC 1928 §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Reply {
    /// Succeeded.
    Succeeded = 0x00,
    /// General SOCKS server failure.
    GeneralFailure = 0x01,
    /// Network unreachable.
    NetworkUnreachable = 0x03,
    /// Host unreachable (also: the name did not resolve, the connection attempt timed out).
    HostUnreachable = 0x04,
    /// Connection refused.
    ConnectionRefused = 0x05,
    /// Command not supported.
    CommandNotSupported = 0x07,
    /// Address type not supported.
    AddressTypeNotSupported = 0x08,
}

impl Reply {
    /// The code read from the wire (an unknown one is a general failure).
    pub fn from_code(code: u8) -> Reply {
        match code {
            0x00 => Reply::Succeeded,
            0x03 => Reply::NetworkUnreachable,
            0x04 => Reply::HostUnreachable,
            0x05 => Reply::ConnectionRefused,
            0x07 => Reply::CommandNotSupported,
            0x08 => Reply::AddressTypeNotSupported,
            _ => Reply::GeneralFailure,
        }
    }

    /// The reply for a failed TCP connection attempt.
    pub fn for_connect_error(e: &std::io::Error) -> Reply {
        use std::io::ErrorKind as K;
        match e.kind() {
            K::ConnectionRefused => Reply::ConnectionRefused,
            K::NetworkUnreachable => Reply::NetworkUnreachable,
            K::HostUnreachable | K::TimedOut | K::NotFound => Reply::HostUnreachable,
            _ => Reply::GeneralFailure,
        }
    }
}

/// Where a proxied connection goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// An address.
    Addr(SocketAddr),
    /// A host name (resolved by the proxy server, as `curl --socks5-hostname` asks) and a
    /// port.
    Domain(String, u16),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Addr(a) => write!(f, "{a}"),
            Target::Domain(h, p) => write!(f, "{h}:{p}"),
        }
    }
}

impl Target {
    /// Appends the target in SOCKS's encoding: address type, address, port.
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Target::Addr(SocketAddr::V4(a)) => {
                out.push(ATYP_IPV4);
                out.extend_from_slice(&a.ip().octets());
            }
            Target::Addr(SocketAddr::V6(a)) => {
                out.push(ATYP_IPV6);
                out.extend_from_slice(&a.ip().octets());
            }
            Target::Domain(h, _) => {
                out.push(ATYP_DOMAIN);
                out.push(h.len() as u8);
                out.extend_from_slice(h.as_bytes());
            }
        }
        let port = match self {
            Target::Addr(a) => a.port(),
            Target::Domain(_, p) => *p,
        };
        out.extend_from_slice(&port.to_be_bytes());
    }

    /// Reads a target in SOCKS's encoding; `Err(reply)` for an address type SOCKS does not
    /// define or a name that is empty or not UTF-8.
    async fn decode<R: AsyncRead + Unpin>(r: &mut R) -> Result<Target, Error> {
        let atyp = r.read_u8().await?;
        let target = match atyp {
            ATYP_IPV4 => {
                let mut ip = [0u8; 4];
                r.read_exact(&mut ip).await?;
                let port = r.read_u16().await?;
                Target::Addr(SocketAddr::from((Ipv4Addr::from(ip), port)))
            }
            ATYP_IPV6 => {
                let mut ip = [0u8; 16];
                r.read_exact(&mut ip).await?;
                let port = r.read_u16().await?;
                Target::Addr(SocketAddr::from((Ipv6Addr::from(ip), port)))
            }
            ATYP_DOMAIN => {
                let len = r.read_u8().await? as usize;
                let mut name = vec![0u8; len];
                r.read_exact(&mut name).await?;
                let port = r.read_u16().await?;
                match String::from_utf8(name) {
                    Ok(n) if !n.is_empty() => Target::Domain(n, port),
                    _ => {
                        return Err(Error::Refused(
                            Reply::AddressTypeNotSupported,
                            "the host name is empty or not UTF-8".into(),
                        ))
                    }
                }
            }
            other => {
                return Err(Error::Refused(
                    Reply::AddressTypeNotSupported,
                    format!("address type {other:#04x} is not SOCKS 5's"),
                ))
            }
        };
        Ok(target)
    }
}

/// Why a SOCKS exchange did not produce a target.
#[derive(Debug)]
pub enum Error {
    /// Reading or writing failed (the client went away).
    Io(std::io::Error),
    /// The request was refused; the client was (or is to be) told with this reply.
    Refused(Reply, String),
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "{e}"),
            Error::Refused(_, why) => f.write_str(why),
        }
    }
}

/// The server side of a SOCKS 5 handshake with a local application: method negotiation
/// (no authentication), then its request. Returns the CONNECT target; the caller answers
/// with [`reply`]. A client that offers no acceptable method is told so here; other
/// refusals come back as [`Error::Refused`] for the caller to answer.
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) -> Result<Target, Error> {
    let version = s.read_u8().await?;
    if version != VERSION {
        return Err(Error::Refused(
            Reply::GeneralFailure,
            format!("SOCKS version {version} is not 5 (is the application set to SOCKS 5?)"),
        ));
    }
    let n = s.read_u8().await? as usize;
    let mut methods = vec![0u8; n];
    s.read_exact(&mut methods).await?;
    if !methods.contains(&NO_AUTH) {
        s.write_all(&[VERSION, NO_ACCEPTABLE_METHOD]).await?;
        return Err(Error::Io(std::io::Error::other(
            "the application offered no SOCKS method without authentication",
        )));
    }
    s.write_all(&[VERSION, NO_AUTH]).await?;
    let mut head = [0u8; 3];
    s.read_exact(&mut head).await?;
    let [version, command, _reserved] = head;
    if version != VERSION {
        return Err(Error::Refused(
            Reply::GeneralFailure,
            format!("SOCKS request version {version} is not 5"),
        ));
    }
    let target = Target::decode(s).await?;
    if command != CMD_CONNECT {
        return Err(Error::Refused(
            Reply::CommandNotSupported,
            format!("SOCKS command {command:#04x} is not supported (only CONNECT)"),
        ));
    }
    Ok(target)
}

/// Answers a SOCKS request with `code` (the bound address is reported as unspecified: the
/// connection is made by the proxy server, elsewhere).
pub async fn reply<W: AsyncWrite + Unpin>(w: &mut W, code: Reply) -> std::io::Result<()> {
    w.write_all(&[VERSION, code as u8, 0, ATYP_IPV4, 0, 0, 0, 0, 0, 0])
        .await
}

/// Writes a proxy stream's header: the version and the target.
pub async fn write_request<W: AsyncWrite + Unpin>(
    w: &mut W,
    target: &Target,
) -> std::io::Result<()> {
    let mut out = vec![STREAM_VERSION];
    target.encode(&mut out);
    w.write_all(&out).await
}

/// Reads a proxy stream's header (the server side).
pub async fn read_request<R: AsyncRead + Unpin>(r: &mut R) -> Result<Target, Error> {
    let version = r.read_u8().await?;
    if version != STREAM_VERSION {
        return Err(Error::Refused(
            Reply::GeneralFailure,
            format!("proxy stream version {version} is not {STREAM_VERSION} (update both sides)"),
        ));
    }
    Target::decode(r).await
}

/// Longest reason carried in a proxy stream's answer.
const MAX_REASON: usize = 255;

/// Writes the server's answer on a proxy stream: the SOCKS reply code, then a reason
/// (empty on success) for the gateway to log.
pub async fn write_answer<W: AsyncWrite + Unpin>(
    w: &mut W,
    code: Reply,
    reason: &str,
) -> std::io::Result<()> {
    let mut end = reason.len().min(MAX_REASON);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = vec![code as u8, end as u8];
    out.extend_from_slice(&reason.as_bytes()[..end]);
    w.write_all(&out).await
}

/// Reads the server's answer on a proxy stream: the reply code and the reason.
pub async fn read_answer<R: AsyncRead + Unpin>(r: &mut R) -> std::io::Result<(Reply, String)> {
    let code = Reply::from_code(r.read_u8().await?);
    let len = r.read_u8().await? as usize;
    let mut reason = vec![0u8; len];
    r.read_exact(&mut reason).await?;
    Ok((code, String::from_utf8_lossy(&reason).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::duplex;

    /// Runs `accept` against a client that writes `client_bytes`; returns its result and
    /// what the server wrote back.
    async fn handshake(client_bytes: &[u8]) -> (Result<Target, Error>, Vec<u8>) {
        let (mut app, mut gw) = duplex(1024);
        app.write_all(client_bytes).await.unwrap();
        // The application sends nothing more: a short request ends in end-of-file.
        app.shutdown().await.unwrap();
        let r = accept(&mut gw).await;
        drop(gw);
        let mut back = Vec::new();
        app.read_to_end(&mut back).await.unwrap();
        (r, back)
    }

    #[tokio::test]
    async fn connect_requests_of_every_address_type_are_read() {
        let cases: [(&[u8], Target); 3] = [
            (
                &[5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1, 0x1f, 0x90],
                Target::Addr("127.0.0.1:8080".parse().unwrap()),
            ),
            (
                &[
                    5, 2, 2, 0, 5, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 80,
                ],
                Target::Addr("[::1]:80".parse().unwrap()),
            ),
            (
                &[
                    5, 1, 0, 5, 1, 0, 3, 9, b'l', b'o', b'c', b'a', b'l', b'h', b'o', b's', b't',
                    1, 187,
                ],
                Target::Domain("localhost".into(), 443),
            ),
        ];
        for (bytes, want) in cases {
            let (r, back) = handshake(bytes).await;
            assert_eq!(r.unwrap(), want);
            assert_eq!(back, [5, 0], "no authentication chosen");
        }
    }

    #[tokio::test]
    async fn a_client_without_the_no_auth_method_is_told_none_is_acceptable() {
        let (r, back) = handshake(&[5, 1, 2]).await;
        assert!(matches!(r, Err(Error::Io(_))));
        assert_eq!(back, [5, 0xff]);
    }

    #[tokio::test]
    async fn bind_and_unknown_address_types_are_refused_with_their_codes() {
        let (r, _) = handshake(&[5, 1, 0, 5, 2, 0, 1, 10, 0, 0, 1, 0, 80]).await;
        assert!(matches!(
            r,
            Err(Error::Refused(Reply::CommandNotSupported, _))
        ));
        let (r, _) = handshake(&[5, 1, 0, 5, 1, 0, 9, 1, 2, 3, 4]).await;
        assert!(matches!(
            r,
            Err(Error::Refused(Reply::AddressTypeNotSupported, _))
        ));
        let (r, _) = handshake(&[4, 1, 0, 80]).await;
        assert!(
            matches!(r, Err(Error::Refused(Reply::GeneralFailure, m)) if m.contains("SOCKS 5"))
        );
    }

    #[tokio::test]
    async fn a_truncated_request_is_an_io_error_not_a_panic() {
        for cut in 0..13 {
            let full = [5u8, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1, 0x1f, 0x90];
            let (r, _) = handshake(&full[..cut]).await;
            assert!(matches!(r, Err(Error::Io(_))), "cut at {cut}");
        }
    }

    #[tokio::test]
    async fn the_stream_header_and_answer_round_trip() {
        for target in [
            Target::Addr("10.1.2.3:22".parse().unwrap()),
            Target::Addr("[2001:db8::7]:8443".parse().unwrap()),
            Target::Domain("example.org".into(), 80),
        ] {
            let (mut a, mut b) = duplex(1024);
            write_request(&mut a, &target).await.unwrap();
            assert_eq!(read_request(&mut b).await.unwrap(), target);
        }
        let (mut a, mut b) = duplex(1024);
        let long = "é".repeat(200);
        write_answer(&mut a, Reply::ConnectionRefused, &long)
            .await
            .unwrap();
        let (code, reason) = read_answer(&mut b).await.unwrap();
        assert_eq!(code, Reply::ConnectionRefused);
        assert!(reason.len() <= MAX_REASON && long.starts_with(&reason));
        let (mut a, mut b) = duplex(16);
        a.write_all(&[9, 1, 1, 2, 3, 4, 0, 80]).await.unwrap();
        assert!(
            matches!(read_request(&mut b).await, Err(Error::Refused(_, m)) if m.contains("version 9"))
        );
    }
}
