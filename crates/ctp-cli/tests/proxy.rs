//! `ctp proxy` end to end on loopback: unmodified TCP clients (curl, and a SOCKS 5 client
//! written here) reach a local HTTP server through `ctp proxy client` → ctp → `ctp proxy
//! server`. Every process has its own configuration directory, is killed when its test
//! ends, and every wait is bounded.

mod common;

use common::{ctp, fill_pseudo_random, free_tcp_port, free_udp_port, Guard, CTP};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Starts `ctp ARGS` with `config` as its configuration directory and its stdout going to
/// the file `stdout`; killed when the guard drops.
fn start(config: &Path, stdout: &Path, args: &[&str]) -> Guard {
    Guard(
        Command::new(CTP)
            .args(args)
            .env("CTP_CONFIG_DIR", config)
            .stdin(Stdio::null())
            .stdout(File::create(stdout).unwrap())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    )
}

/// Starts `ctp proxy server --listen LISTEN --open EXTRA…` (see [`start`]).
fn proxy_server(config: &Path, stdout: &Path, listen: &str, extra: &[&str]) -> Guard {
    let mut args = vec!["proxy", "server", "--listen", listen, "--open"];
    args.extend_from_slice(extra);
    start(config, stdout, &args)
}

/// Starts `ctp proxy client --listen LISTEN --server SERVER EXTRA…` and waits until it
/// accepts TCP connections.
fn proxy_client(
    config: &Path,
    stdout: &Path,
    listen: SocketAddr,
    server: &str,
    extra: &[&str],
) -> Guard {
    let listen_text = listen.to_string();
    let mut args = vec![
        "proxy",
        "client",
        "--listen",
        &listen_text,
        "--server",
        server,
    ];
    args.extend_from_slice(extra);
    let guard = start(config, stdout, &args);
    wait_listening(listen);
    guard
}

/// Runs `ctp ARGS` to its end (at most 20 s); returns its status and standard error.
fn run(config: &Path, args: &[&str]) -> (Option<i32>, String) {
    let o = ctp(config, args, Duration::from_secs(20));
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Waits (at most 15 s) until something accepts TCP connections on `addr`.
fn wait_listening(addr: SocketAddr) {
    let start = Instant::now();
    while TcpStream::connect(addr).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "nothing listens on {addr}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A minimal HTTP server on a thread: every request gets `body` (then the connection
/// closes). It lives as long as the test process.
fn http_server(body: Arc<Vec<u8>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let body = body.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                // The request line and headers, up to the empty line.
                while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                    line.clear();
                }
                let mut conn = conn;
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(head.as_bytes());
                let _ = conn.write_all(&body);
            });
        }
    });
    addr
}

/// A SOCKS 5 CONNECT through `proxy` to `target` with `command` (1 = CONNECT); returns the
/// connection and the reply code.
fn socks(proxy: SocketAddr, target: SocketAddr, command: u8) -> (TcpStream, u8) {
    let mut s = TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(&[5, 1, 0]).unwrap();
    let mut method = [0u8; 2];
    s.read_exact(&mut method).unwrap();
    assert_eq!(method, [5, 0], "no authentication");
    let SocketAddr::V4(t) = target else {
        panic!("IPv4 targets only here")
    };
    let mut req = vec![5, command, 0, 1];
    req.extend_from_slice(&t.ip().octets());
    req.extend_from_slice(&t.port().to_be_bytes());
    s.write_all(&req).unwrap();
    let mut reply = [0u8; 10];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(reply[0], 5);
    (s, reply[1])
}

/// GET through the proxy with the SOCKS client above; returns the body.
fn get(proxy: SocketAddr, http: SocketAddr) -> Vec<u8> {
    let (mut s, code) = socks(proxy, http, 1);
    assert_eq!(code, 0, "CONNECT succeeded");
    s.write_all(b"GET /file HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let at = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP response");
    all.split_off(at + 4)
}

fn body(len: usize) -> Arc<Vec<u8>> {
    let mut data = vec![0u8; len];
    fill_pseudo_random(&mut data, &mut 0x9e37_79b9_7f4a_7c15);
    Arc::new(data)
}

/// curl (when installed) and a SOCKS client fetch a file byte-exact through the proxy,
/// eight connections at once share the one ctp connection, and a target that refuses or a
/// command the proxy does not do reach the application as SOCKS's codes; the client side
/// reports each connection as JSON with its bytes and outcome.
#[test]
fn tcp_clients_fetch_byte_exact_through_the_proxy_and_refusals_reach_them() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path();
    let server_addr = format!("127.0.0.1:{}", free_udp_port());
    let socks_addr: SocketAddr = format!("127.0.0.1:{}", free_tcp_port()).parse().unwrap();
    let server_out = dir.path().join("server.json");
    let _server = proxy_server(config, &server_out, &server_addr, &["--json"]);
    std::thread::sleep(Duration::from_millis(300));
    let client_out = dir.path().join("client.json");
    let client = proxy_client(config, &client_out, socks_addr, &server_addr, &["--json"]);
    let data = body(3 << 20);
    let http = http_server(data.clone());

    if Command::new("curl").arg("--version").output().is_ok() {
        let got = dir.path().join("curl.out");
        let o = Command::new("curl")
            .args(["-sS", "--fail", "--max-time", "60", "--socks5-hostname"])
            .arg(socks_addr.to_string())
            .arg(format!("http://localhost:{}/file", http.port()))
            .arg("-o")
            .arg(&got)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(std::fs::read(&got).unwrap() == *data, "curl's copy differs");
    } else {
        assert!(
            std::env::var("CTP_REQUIRE_INTEROP").map_or(true, |v| v != "1"),
            "curl required (CTP_REQUIRE_INTEROP=1) but not installed"
        );
        eprintln!("\n*** SKIPPED curl through ctp proxy: curl not installed ***\n");
    }

    // Eight at once, each byte-exact.
    let fetches: Vec<_> = (0..8)
        .map(|_| std::thread::spawn(move || get(socks_addr, http)))
        .collect();
    for f in fetches {
        assert!(f.join().unwrap() == *data, "a proxied body differs");
    }

    // A closed port: "connection refused" (5); BIND (2): "command not supported" (7).
    let closed: SocketAddr = format!("127.0.0.1:{}", free_tcp_port()).parse().unwrap();
    assert_eq!(socks(socks_addr, closed, 1).1, 5);
    assert_eq!(socks(socks_addr, http, 2).1, 7);

    // The client's reports: the fetches with their bytes, the refusal with its reason.
    std::thread::sleep(Duration::from_millis(300));
    drop(client);
    let reports: Vec<serde_json::Value> = std::fs::read_to_string(&client_out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ok: Vec<_> = reports.iter().filter(|r| r["outcome"] == "ok").collect();
    assert!(ok.len() >= 8, "{reports:?}");
    for r in &ok {
        assert!(
            r["bytes_down"].as_u64().unwrap() >= data.len() as u64,
            "{r}"
        );
        assert!(r["bytes_up"].as_u64().unwrap() > 0, "{r}");
    }
    assert!(
        reports.iter().any(|r| r["target"] == closed.to_string()
            && r["outcome"].as_str().unwrap().contains("refused")),
        "{reports:?}"
    );
}

/// A proxy server will not serve everyone by accident: without `--allow` or `--open` it
/// does not start, and a client whose key is not allowed is told so when it starts.
#[test]
fn a_proxy_server_serves_only_the_clients_it_was_told_to() {
    let dir = tempfile::tempdir().unwrap();
    let (server_cfg, client_cfg) = (dir.path().join("s"), dir.path().join("c"));
    let addr = format!("127.0.0.1:{}", free_udp_port());
    let (code, err) = run(&server_cfg, &["proxy", "server", "--listen", &addr]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--allow FILE") && err.contains("--open"),
        "{err}"
    );

    // An allow list with someone else's key.
    let other = dir.path().join("other");
    let (code, err) = run(&other, &["keygen"]);
    assert_eq!(code, Some(0), "{err}");
    let key = std::fs::read_to_string(other.join("id_x25519.pub")).unwrap();
    let line = key.split_whitespace().next().unwrap();
    let allow = dir.path().join("allow");
    std::fs::write(&allow, format!("{line} someone else\n")).unwrap();
    let _server = start(
        &server_cfg,
        &dir.path().join("server.out"),
        &[
            "proxy",
            "server",
            "--listen",
            &addr,
            "--allow",
            allow.to_str().unwrap(),
        ],
    );
    std::thread::sleep(Duration::from_millis(300));
    let socks_addr = format!("127.0.0.1:{}", free_tcp_port());
    let (code, err) = run(
        &client_cfg,
        &[
            "proxy",
            "client",
            "--listen",
            &socks_addr,
            "--server",
            &addr,
        ],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("not on the receiver's allow list"), "{err}");
}

/// The coded profile carries the proxy over a long lossy path: a relay that delays each
/// direction by 15 ms and drops 3 % of the datagrams each way sits between the two sides,
/// and a fetch arrives byte-exact.
#[test]
fn a_coded_proxy_fetches_byte_exact_over_a_lossy_relay() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path();
    let server_addr = format!("127.0.0.1:{}", free_udp_port());
    let front = format!("127.0.0.1:{}", free_udp_port());
    let socks_addr: SocketAddr = format!("127.0.0.1:{}", free_tcp_port()).parse().unwrap();
    let coded = ["--profile", "coded"];
    let _server = proxy_server(config, &dir.path().join("server.out"), &server_addr, &coded);
    let _relay = start(
        config,
        &dir.path().join("relay.out"),
        &[
            "relay",
            "--listen",
            &front,
            "--to",
            &server_addr,
            "--delay",
            "15ms",
            "--loss",
            "3%",
        ],
    );
    std::thread::sleep(Duration::from_millis(300));
    let client_out = dir.path().join("client.out");
    let _client = proxy_client(config, &client_out, socks_addr, &front, &coded);
    let data = body(4 << 20);
    let http = http_server(data.clone());
    assert!(get(socks_addr, http) == *data, "the proxied body differs");
}
