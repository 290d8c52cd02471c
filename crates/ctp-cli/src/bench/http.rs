//! The HTTP contenders: `curl` fetching the bench's file from an HTTP server on the
//! sender's side of the path (so that the file crosses the path's data direction), over
//! kernel TCP directly (`curl`) or through `ctp proxy` with the `coded` profile
//! (`curl-proxy`: the SOCKS gateway beside curl, the proxy server beside the HTTP server) —
//! an unmodified TCP application carried by ctp, beside the same application without it.
//!
//! Each side is a bash script that starts its helpers and stops them when it ends: the
//! server side (Python's `http.server`, and the proxy server) serves until the bench stops
//! it once curl has exited; the client side (the proxy gateway and curl) is timed to
//! curl's exit. Their CPU is the whole tree's.

use super::paths::Place;
use super::programs::which;
use std::path::Path;
use tokio::process::Command;

/// The peer names.
pub const CURL: &str = "curl";
/// curl through `ctp proxy` (`coded`).
pub const CURL_PROXY: &str = "curl-proxy";

/// The two commands of an HTTP contender: (server side, client side).
pub struct HttpCommands {
    /// Runs on the sender's side and serves until stopped.
    pub server: Command,
    /// Runs on the receiver's side; exits once the file is fetched (non-zero if not).
    pub client: Command,
}

/// Ports of one run: HTTP, the proxy server's UDP port, the gateway's SOCKS port.
pub struct Ports {
    /// The HTTP server's.
    pub http: u16,
    /// The proxy server's.
    pub proxy: u16,
    /// The SOCKS gateway's (on the receiver side's loopback).
    pub socks: u16,
}

/// The commands fetching `source` into `out`, with curl alone or through `ctp` (`proxied`).
pub fn commands(
    place: Place<'_>,
    ctp: &Path,
    keys: &Path,
    source: &Path,
    out: &Path,
    ports: &Ports,
    proxied: bool,
) -> Result<HttpCommands, String> {
    let missing = |tool: &str, package: &str| {
        format!("missing: {tool} not installed (apt-get install {package})")
    };
    let bash = which("bash").ok_or_else(|| missing("bash", "bash"))?;
    which("curl").ok_or_else(|| missing("curl", "curl"))?;
    which("python3").ok_or_else(|| missing("python3", "python3"))?;
    let (dir, name) = match (source.parent(), source.file_name()) {
        (Some(d), Some(n)) => (d.display().to_string(), n.to_string_lossy().to_string()),
        _ => return Err(format!("failed: no directory for {}", source.display())),
    };
    let ip = place.sender_ip();
    let ctp = ctp.display();
    let url = format!("http://{ip}:{}/{name}", ports.http);
    let proxy = format!(
        "{ctp} proxy server --listen {ip}:{} --open --insecure --profile coded",
        ports.proxy
    );
    let gateway = format!(
        "{ctp} proxy client --listen 127.0.0.1:{} --server {ip}:{} --insecure --profile coded",
        ports.socks, ports.proxy
    );
    // Helpers stopped with the script, however it ends.
    let server = format!(
        "python3 -m http.server --bind {ip} --directory {dir} {http} >/dev/null 2>&1 & \
         pids=$!; {proxy_start} trap 'kill $pids 2>/dev/null; wait' EXIT TERM INT; wait",
        http = ports.http,
        proxy_start = if proxied {
            format!("{proxy} >/dev/null 2>&1 & pids=\"$pids $!\";")
        } else {
            String::new()
        },
    );
    // Waits (at most 5 s) for a TCP port to take connections.
    let ready = |host: &str, port: u16| {
        format!(
            "for i in $(seq 500); do (exec 3<>/dev/tcp/{host}/{port}) 2>/dev/null && break; \
             sleep 0.01; done;"
        )
    };
    let out = out.display();
    let client = if proxied {
        format!(
            "{gateway} >/dev/null 2>&1 & gw=$!; trap 'kill $gw 2>/dev/null; wait' EXIT; \
             {wait} curl -sS --fail --socks5-hostname 127.0.0.1:{socks} -o {out} {url}",
            wait = ready("127.0.0.1", ports.socks),
            socks = ports.socks,
        )
    } else {
        format!(
            "{wait} curl -sS --fail -o {out} {url}",
            wait = ready(ip, ports.http)
        )
    };
    let mut server_cmd = place.command(true, &bash);
    server_cmd.args(["-c", &server]).env("CTP_CONFIG_DIR", keys);
    let mut client_cmd = place.command(false, &bash);
    client_cmd.args(["-c", &client]).env("CTP_CONFIG_DIR", keys);
    Ok(HttpCommands {
        server: server_cmd,
        client: client_cmd,
    })
}
