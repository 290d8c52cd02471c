//! quinn-bench: a minimal quinn (QUIC) throughput peer for `ctp bench`.
//!
//! ```text
//! quinn-bench recv ADDR          accept one connection, read one stream until it ends
//! quinn-bench send ADDR BYTES    connect, send BYTES of zeros over one unidirectional stream
//! ```
//!
//! Each side prints one line, `bytes=N seconds=S mbps=M`, the format of `tools/udt4/udtperf`;
//! the receiver's line is the measurement (from the stream's arrival to its end); a receiver
//! stopped by SIGTERM or SIGINT prints it for what it read so far (`ctp bench` caps runs in
//! time this way). The
//! receiver's certificate is self-signed and the sender does not check it: this is a
//! throughput peer, not a secure channel. Flow-control windows are raised to 64 MiB so that
//! quinn is limited by its congestion controller (CUBIC, its default) and CPU, not by
//! receive windows sized for the Internet.

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::signal::unix::{signal, SignalKind};

type Error = Box<dyn std::error::Error + Send + Sync>;

const WINDOW: u32 = 64 << 20;
const ALPN: &[u8] = b"ctp-bench";

/// Bytes the receiver has read, and when its stream arrived (read by the stop handler).
static RECEIVED: AtomicU64 = AtomicU64::new(0);
static STARTED: OnceLock<Instant> = OnceLock::new();

fn usage() -> ! {
    eprintln!("usage: quinn-bench recv ADDR | quinn-bench send ADDR BYTES");
    std::process::exit(2)
}

fn transport() -> Arc<quinn::TransportConfig> {
    let mut t = quinn::TransportConfig::default();
    t.stream_receive_window(WINDOW.into())
        .receive_window(WINDOW.into())
        .send_window(u64::from(WINDOW))
        .max_idle_timeout(Some(Duration::from_secs(30).try_into().expect("30 s fits")));
    Arc::new(t)
}

fn report(bytes: u64, since: Instant) {
    let secs = since.elapsed().as_secs_f64();
    println!(
        "bytes={bytes} seconds={secs:.3} mbps={:.1}",
        bytes as f64 * 8.0 / secs / 1e6
    );
}

async fn recv(addr: SocketAddr) -> Result<(), Error> {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()])?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()));
    let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])?
    .with_no_client_auth()
    .with_single_cert(vec![cert.cert.der().clone()], key)?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(tls)?));
    config.transport_config(transport());
    let endpoint = quinn::Endpoint::server(config, addr)?;
    let conn = endpoint
        .accept()
        .await
        .ok_or("the endpoint closed before a connection arrived")?
        .await?;
    let mut stream = conn.accept_uni().await?;
    let t0 = *STARTED.get_or_init(Instant::now);
    let mut buf = vec![0u8; 1 << 20];
    while let Some(n) = stream.read(&mut buf).await? {
        RECEIVED.fetch_add(n as u64, Ordering::Relaxed);
    }
    report(RECEIVED.load(Ordering::Relaxed), t0);
    conn.close(0u32.into(), b"done");
    endpoint.wait_idle().await;
    Ok(())
}

async fn send(addr: SocketAddr, bytes: u64) -> Result<(), Error> {
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])?
    .dangerous()
    .with_custom_certificate_verifier(Arc::new(AcceptAnyCert))
    .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let mut config = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls)?));
    config.transport_config(transport());
    let bind: SocketAddr = if addr.is_ipv4() {
        "0.0.0.0:0".parse()?
    } else {
        "[::]:0".parse()?
    };
    let mut endpoint = quinn::Endpoint::client(bind)?;
    endpoint.set_default_client_config(config);
    let conn = endpoint.connect(addr, "localhost")?.await?;
    let mut stream = conn.open_uni().await?;
    let t0 = Instant::now();
    let buf = vec![0u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        stream.write_all(&buf[..n]).await?;
        left -= n as u64;
    }
    stream.finish()?;
    // The receiver closes the connection once it has read everything.
    let _ = conn.closed().await;
    report(bytes, t0);
    endpoint.wait_idle().await;
    Ok(())
}

/// Accepts any server certificate (the receiver's is self-signed and made per run).
#[derive(Debug)]
struct AcceptAnyCert;

impl ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Reports what was received before a stop request.
fn stopped() -> Result<(), Error> {
    let t0 = STARTED.get().copied().unwrap_or_else(Instant::now);
    report(RECEIVED.load(Ordering::Relaxed), t0);
    Ok(())
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let addr = |s: &str| -> SocketAddr {
        s.parse().unwrap_or_else(|_| {
            eprintln!("quinn-bench: `{s}` is not an address (e.g. 127.0.0.1:9000)");
            std::process::exit(2)
        })
    };
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["recv", a] => {
            let (mut term, mut int) = match (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) {
                (Ok(t), Ok(i)) => (t, i),
                _ => {
                    eprintln!("quinn-bench: cannot install the signal handlers");
                    std::process::exit(1)
                }
            };
            tokio::select! {
                r = recv(addr(a)) => r,
                _ = term.recv() => stopped(),
                _ = int.recv() => stopped(),
            }
        }
        ["send", a, n] => match n.parse() {
            Ok(n) => send(addr(a), n).await,
            Err(_) => {
                eprintln!("quinn-bench: BYTES `{n}` is not a whole number");
                std::process::exit(2)
            }
        },
        _ => usage(),
    };
    if let Err(e) = result {
        eprintln!("quinn-bench: {e}");
        std::process::exit(1);
    }
}
