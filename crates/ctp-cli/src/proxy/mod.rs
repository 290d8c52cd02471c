//! `ctp proxy`: unmodified TCP applications over a ctp connection.
//!
//! ```text
//!  curl ──TCP──▶ ctp proxy client ═══ one ctp connection ═══▶ ctp proxy server ──TCP──▶ target
//!       SOCKS 5    (127.0.0.1:1080)     a stream per TCP          (resolves, connects)
//!                                       connection
//! ```
//!
//! The client side is a SOCKS 5 server for local applications; each connection an
//! application makes becomes one bidirectional ctp stream (service [`SERVICE`]) on a single
//! connection to the server side, so a slow or lossy connection holds up no other and they
//! share one congestion controller. The stream starts with the target
//! ([`socks::write_request`]); the server connects to it and answers with a SOCKS reply code
//! and a reason, which the client passes to the application. Then bytes flow both ways; a
//! half-close on either TCP side finishes the stream's direction, a reset resets the stream.
//!
//! The server makes TCP connections on its clients' behalf, so it serves only clients whose
//! key is in `--allow`, unless started with `--open`.

pub mod socks;

use crate::cli::{ProxyArgs, ProxyClientArgs, ProxyServerArgs, ProxySide, TransportArgs};
use crate::connect::{endpoint_options, reliable_profile};
use crate::failure::Failure;
use crate::output::outln;
use crate::profiles;
use anyhow::{anyhow, Context};
use ctp::{Connection, Endpoint, Stream, StreamKind};
use serde::Serialize;
use socks::{Reply, Target};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;

/// The stream service of a proxied TCP connection (SOCKS's port, as a reminder).
pub const SERVICE: u64 = 1080;
/// The stream service of the greeting a gateway opens its connection with: the version
/// byte each way, so that a gateway the server refuses (its key not allowed) learns it
/// before it takes applications.
pub const GREETING: u64 = 1081;
/// How long the server tries to reach a target.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes copied at a time between a TCP connection and its stream, each way: every write
/// into the stream takes the connection's lock, so tokio's 8-KiB default would take it
/// eight times as often.
const SPLICE_BUFFER: usize = 64 * 1024;
/// Stream reset code: the TCP connection on the other side failed (reset or error).
const RESET_TCP_FAILED: u64 = 1;
/// Stream reset code: the stream is for a service the proxy server does not offer.
const RESET_UNKNOWN_SERVICE: u64 = 2;

/// Runs the client or the server side.
pub async fn run(a: ProxyArgs) -> Result<(), Failure> {
    match a.side {
        ProxySide::Client(c) => client(c).await,
        ProxySide::Server(s) => server(s).await,
    }
}

/// The profile both sides run: reliable and ordered, with the sender's congestion control
/// (both sides send).
fn proxy_profile(t: &TransportArgs, cc: Option<&str>) -> Result<ctp::Profile, Failure> {
    if t.raw {
        return Err(Failure::Usage(
            "--raw does not apply to `ctp proxy`: it carries TCP connections as streams".into(),
        ));
    }
    let p = reliable_profile(t)?;
    profiles::sender_cc(p, &t.profile, cc)
}

/// One proxied TCP connection, as `--json` reports it when it ends.
#[derive(Debug, Serialize)]
struct ConnectionReport {
    side: &'static str,
    application: SocketAddr,
    target: String,
    /// Bytes from the application towards the target.
    bytes_up: u64,
    /// Bytes from the target back to the application.
    bytes_down: u64,
    seconds: f64,
    /// `ok`, or why the connection failed.
    outcome: String,
    #[serde(skip)]
    started: Instant,
}

impl ConnectionReport {
    /// The report of a connection that starts now, from `application` (seen from `side`).
    fn new(side: &'static str, application: SocketAddr) -> Self {
        ConnectionReport {
            side,
            application,
            target: String::new(),
            bytes_up: 0,
            bytes_down: 0,
            seconds: 0.0,
            outcome: "ok".into(),
            started: Instant::now(),
        }
    }

    /// The connection ended with `result`: its time and outcome, printed.
    fn finish(mut self, result: anyhow::Result<()>, json: bool) {
        if let Err(e) = result {
            self.outcome = format!("{e:#}");
        }
        self.seconds = self.started.elapsed().as_secs_f64();
        self.print(json);
    }

    fn print(&self, json: bool) {
        if json {
            outln!(
                "{}",
                serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
            );
        } else {
            tracing::info!(
                "{} {} → {}: {} B up, {} B down in {:.2} s: {}",
                self.side,
                self.application,
                self.target,
                self.bytes_up,
                self.bytes_down,
                self.seconds,
                self.outcome
            );
        }
    }
}

/// Copies both ways between a TCP connection and a stream until both directions ended;
/// returns the bytes (TCP → stream, stream → TCP). A failure on either side resets the
/// stream so that the other end learns at once.
async fn splice(tcp: &mut TcpStream, stream: &mut Stream) -> anyhow::Result<(u64, u64)> {
    match tokio::io::copy_bidirectional_with_sizes(tcp, stream, SPLICE_BUFFER, SPLICE_BUFFER).await
    {
        Ok(n) => Ok(n),
        Err(e) => {
            let _ = stream.reset(RESET_TCP_FAILED);
            Err(e.into())
        }
    }
}

// --- client side -------------------------------------------------------------------------

/// The client side's one connection to the server, made again (from the same endpoint,
/// with the same keys) when it ended.
struct Upstream {
    a: ProxyClientArgs,
    profile: ctp::Profile,
    ep: Endpoint,
    conn: Mutex<Option<Connection>>,
}

impl Upstream {
    /// The live connection to the server, connecting (again) if there is none.
    async fn connection(&self) -> Result<Connection, Failure> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = slot.as_ref() {
            if c.close_reason().is_none() {
                return Ok(c.clone());
            }
            tracing::info!("the connection to the proxy server ended; connecting again");
        }
        let (server, routes) = (self.a.server.resolved, &self.a.routes.routes);
        let conn =
            crate::connect::open_connection(&self.ep, server, false, &self.profile, routes).await?;
        greet(&conn).await?;
        *slot = Some(conn.clone());
        Ok(conn)
    }
}

/// The gateway's greeting: its version on a [`GREETING`] stream, and the server's in reply.
/// A server that refuses this gateway closes the connection instead, with the reason.
async fn greet(conn: &Connection) -> Result<(), Failure> {
    let exchange = async {
        let mut s = conn.open_stream_for(StreamKind::Bidirectional, 0, GREETING)?;
        s.write_all(&[socks::STREAM_VERSION]).await?;
        s.shutdown().await?;
        let mut version = [0u8; 1];
        s.read_exact(&mut version).await?;
        anyhow::Ok(version[0])
    };
    match exchange.await {
        Ok(socks::STREAM_VERSION) => Ok(()),
        Ok(v) => Err(Failure::Usage(format!(
            "the proxy server speaks version {v}, this gateway {}: update both sides",
            socks::STREAM_VERSION
        ))),
        Err(e) => Err(match conn.close_reason() {
            Some(why) => anyhow!("the proxy server ended the connection: {why}"),
            None => e.context("greeting the proxy server"),
        }
        .into()),
    }
}

async fn client(a: ProxyClientArgs) -> Result<(), Failure> {
    let mut profile = proxy_profile(&a.transport, a.cc.as_deref())?;
    let security = crate::connect::security(a.security.for_peer(&a.server), &mut profile)?;
    let listener = TcpListener::bind(a.listen)
        .await
        .with_context(|| format!("cannot listen on {} for SOCKS clients", a.listen))?;
    let json = a.transport.json;
    let addr = a.server.resolved;
    let ep =
        crate::connect::client_endpoint(addr, None, &a.transport, &profile, security.channel())
            .await?;
    let upstream = Arc::new(Upstream {
        profile,
        ep,
        conn: Mutex::new(None),
        a,
    });
    // Connect before taking applications: a wrong address or key fails here, once, with
    // the reason, instead of in every application's connection.
    upstream.connection().await?;
    if !json {
        eprintln!(
            "ctp: proxy listening on {} (SOCKS 5), carrying connections to {} (profile {})",
            listener
                .local_addr()
                .map(|x| x.to_string())
                .unwrap_or_default(),
            upstream.a.server.typed,
            upstream.a.transport.profile
        );
    }
    loop {
        let (tcp, from) = listener
            .accept()
            .await
            .context("accepting a SOCKS client")?;
        let up = upstream.clone();
        tokio::spawn(async move {
            let mut report = ConnectionReport::new("client", from);
            let result = client_connection(tcp, &up, &mut report).await;
            report.finish(result, json);
        });
    }
}

/// One application's connection: SOCKS, a stream to the server, its answer, then bytes.
async fn client_connection(
    mut tcp: TcpStream,
    up: &Upstream,
    report: &mut ConnectionReport,
) -> anyhow::Result<()> {
    let target = match socks::accept(&mut tcp).await {
        Ok(t) => t,
        Err(socks::Error::Refused(code, why)) => {
            let _ = socks::reply(&mut tcp, code).await;
            return Err(anyhow!("refused the application's request: {why}"));
        }
        Err(socks::Error::Io(e)) => return Err(anyhow!("SOCKS handshake failed: {e}")),
    };
    report.target = target.to_string();
    let mut stream = match open_proxy_stream(up).await {
        Ok(s) => s,
        Err(e) => {
            let _ = socks::reply(&mut tcp, Reply::GeneralFailure).await;
            return Err(e);
        }
    };
    socks::write_request(&mut stream, &target).await?;
    let (code, reason) = socks::read_answer(&mut stream)
        .await
        .context("the proxy server did not answer")?;
    socks::reply(&mut tcp, code).await?;
    if code != Reply::Succeeded {
        return Err(anyhow!("the proxy server could not connect: {reason}"));
    }
    let (upb, downb) = splice(&mut tcp, &mut stream).await?;
    (report.bytes_up, report.bytes_down) = (upb, downb);
    Ok(())
}

/// A new proxy stream on the connection to the server (connecting again once if the
/// connection had ended).
async fn open_proxy_stream(up: &Upstream) -> anyhow::Result<Stream> {
    let open = |c: &Connection| c.open_stream_for(StreamKind::Bidirectional, 0, SERVICE);
    let conn = up.connection().await.map_err(failure_text)?;
    match open(&conn) {
        Ok(s) => Ok(s),
        Err(_) if conn.close_reason().is_some() => {
            let conn = up.connection().await.map_err(failure_text)?;
            Ok(open(&conn)?)
        }
        Err(e) => Err(anyhow!("cannot open a stream to the proxy server: {e}")),
    }
}

fn failure_text(f: Failure) -> anyhow::Error {
    match f {
        Failure::Usage(m) => anyhow!(m),
        Failure::Transfer(e) => e,
        Failure::Interrupted => anyhow!("interrupted"),
    }
}

// --- server side -------------------------------------------------------------------------

async fn server(a: ProxyServerArgs) -> Result<(), Failure> {
    if a.security.allow.is_none() && !a.open {
        return Err(Failure::Usage(
            "a proxy server connects anywhere for its clients: give --allow FILE (the clients' \
             public keys), or --open to serve any client"
                .into(),
        ));
    }
    let mut profile = proxy_profile(&a.transport, a.cc.as_deref())?;
    let security = crate::connect::security(a.security.for_listener(), &mut profile)?;
    let note = crate::connect::key_note(&security);
    let t = &a.transport;
    let opts =
        crate::connect::with_channel(endpoint_options(t, &profile, true)?, security.channel());
    let ep = Endpoint::bind(a.listen, opts)
        .await
        .with_context(|| format!("cannot listen on {}", a.listen))?;
    crate::connect::announce_listening(&ep, "proxy server ", t, &note);
    let json = t.json;
    while let Some(conn) = ep.accept().await {
        tokio::spawn(serve_connection(conn, json));
    }
    Err(anyhow!("the endpoint closed").into())
}

/// Takes the proxy streams of one client connection until it ends.
async fn serve_connection(conn: Connection, json: bool) {
    let peer = conn.remote_addr();
    tracing::info!("proxy client {peer} connected");
    while let Ok(mut stream) = conn.accept_stream().await {
        if stream.service() == Some(GREETING) {
            tokio::spawn(async move {
                let mut version = [0u8; 1];
                if stream.read_exact(&mut version).await.is_ok() {
                    let _ = stream.write_all(&[socks::STREAM_VERSION]).await;
                    let _ = stream.shutdown().await;
                }
            });
            continue;
        }
        if stream.service() != Some(SERVICE) {
            tracing::warn!(
                "{peer} opened a stream for service {:?}, not the proxy's: reset",
                stream.service()
            );
            let _ = stream.reset(RESET_UNKNOWN_SERVICE);
            continue;
        }
        tokio::spawn(async move {
            let mut report = ConnectionReport::new("server", peer);
            let result = serve_stream(&mut stream, &mut report).await;
            report.finish(result, json);
        });
    }
    tracing::info!("proxy client {peer}: {:?}", conn.close_reason());
}

/// One proxy stream: its target, the TCP connection to it, the answer, then bytes.
async fn serve_stream(stream: &mut Stream, report: &mut ConnectionReport) -> anyhow::Result<()> {
    let target = match socks::read_request(stream).await {
        Ok(t) => t,
        Err(socks::Error::Refused(code, why)) => {
            answer(stream, code, &why).await;
            return Err(anyhow!("refused: {why}"));
        }
        Err(socks::Error::Io(e)) => return Err(anyhow!("reading the stream's target: {e}")),
    };
    report.target = target.to_string();
    let mut tcp = match connect(&target).await {
        Ok(t) => t,
        Err((code, why)) => {
            answer(stream, code, &why).await;
            return Err(anyhow!(why));
        }
    };
    socks::write_answer(stream, Reply::Succeeded, "").await?;
    let (from_target, to_target) = splice(&mut tcp, stream).await?;
    (report.bytes_up, report.bytes_down) = (to_target, from_target);
    Ok(())
}

/// Answers a stream with a failure and finishes it.
async fn answer<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, code: Reply, why: &str) {
    if socks::write_answer(s, code, why).await.is_ok() {
        let _ = s.shutdown().await;
    }
}

/// Resolves and connects to `target` within [`CONNECT_TIMEOUT`]; on failure the SOCKS reply
/// and the reason.
async fn connect(target: &Target) -> Result<TcpStream, (Reply, String)> {
    let addrs: Vec<SocketAddr> = match target {
        Target::Addr(a) => vec![*a],
        Target::Domain(host, port) => match tokio::net::lookup_host((host.as_str(), *port)).await {
            Ok(a) => a.collect(),
            Err(e) => {
                return Err((
                    Reply::HostUnreachable,
                    format!("cannot resolve {host}: {e}"),
                ))
            }
        },
    };
    let mut last = (
        Reply::HostUnreachable,
        format!("{target} resolved to no address"),
    );
    for addr in addrs {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(tcp)) => {
                let _ = tcp.set_nodelay(true);
                return Ok(tcp);
            }
            Ok(Err(e)) => {
                last = (
                    Reply::for_connect_error(&e),
                    format!("cannot connect to {target} ({addr}): {e}"),
                )
            }
            Err(_) => {
                last = (
                    Reply::HostUnreachable,
                    format!(
                        "cannot connect to {target} ({addr}): no answer in {} s",
                        CONNECT_TIMEOUT.as_secs()
                    ),
                )
            }
        }
    }
    Err(last)
}
