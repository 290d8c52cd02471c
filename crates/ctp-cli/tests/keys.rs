//! `ctp keygen` and the key flags of the transfer commands, end to end. Every run has its
//! own configuration directory (`CTP_CONFIG_DIR`), is bounded in time and sends nothing
//! off this machine.

mod common;

use common::{ctp, free_udp_port, CTP};
use std::io::Read;
use std::net::UdpSocket;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const QUICK: Duration = Duration::from_secs(10);

#[test]
fn keygen_creates_a_key_once_shows_it_and_replaces_it_only_with_force() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("ctp");
    let private = config.join("id_x25519");

    let o = ctp(&config, &["keygen"], QUICK);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let key = text(&o.stdout).trim().to_string();
    assert_eq!(key.len(), 44, "the public key alone on stdout: {key:?}");
    assert_eq!(text(&o.stdout), format!("{key}\n"));
    assert!(text(&o.stderr).contains(&private.display().to_string()));
    let mode = std::fs::metadata(&private).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(
        std::fs::read_to_string(config.join("id_x25519.pub")).unwrap(),
        format!("{key}\n")
    );
    let secret = std::fs::read(&private).unwrap();

    // A second run keeps the key and says where it is and how to replace it.
    let o = ctp(&config, &["keygen"], QUICK);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.contains("already exists") && err.contains("--force"),
        "{err}"
    );
    assert!(err.contains(&private.display().to_string()), "{err}");
    assert!(o.stdout.is_empty());
    assert_eq!(std::fs::read(&private).unwrap(), secret);

    // --show prints the same key, and nothing else on stdout.
    let o = ctp(&config, &["keygen", "--show"], QUICK);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), format!("{key}\n"));
    let o = ctp(&config, &["keygen", "--show", "--json"], QUICK);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["public_key"], key.as_str());
    assert_eq!(v["path"], private.display().to_string());
    assert_eq!(v["created"], false);

    // --force makes another.
    let o = ctp(&config, &["keygen", "--force", "--json"], QUICK);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["created"], true);
    let new_key = v["public_key"].as_str().unwrap();
    assert_ne!(new_key, key);
    let o = ctp(&config, &["keygen", "--show"], QUICK);
    assert_eq!(text(&o.stdout).trim(), new_key);
    let mode = std::fs::metadata(&private).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn keygen_show_creates_no_key_and_dir_puts_one_elsewhere() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("ctp");
    let o = ctp(&config, &["keygen", "--show"], QUICK);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("ctp keygen"),
        "{}",
        text(&o.stderr)
    );
    assert!(!config.exists(), "--show created nothing");

    let elsewhere = tmp.path().join("other");
    let o = ctp(
        &config,
        &["keygen", "--dir", elsewhere.to_str().unwrap()],
        QUICK,
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(elsewhere.join("id_x25519").is_file() && !config.exists());
    let o = ctp(&config, &["keygen", "--force", "--show"], QUICK);
    assert_eq!(o.status.code(), Some(2), "--force and --show conflict");
}

/// A mistake in a key, a key file or an allow list fails at once, with status 2 and the
/// reason, before anything is bound or sent.
#[test]
fn bad_keys_and_allow_lists_fail_before_anything_is_sent() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("ctp");
    let src = tmp.path().join("a.txt");
    std::fs::write(&src, b"hello").unwrap();
    let src = src.to_str().unwrap();
    // A receiver that must hear nothing.
    let quiet = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = quiet.local_addr().unwrap().to_string();

    let bad_list = tmp.path().join("allowed");
    let good_key = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    std::fs::write(&bad_list, format!("# ours\n{good_key} alice\nbob\n")).unwrap();
    let open_key = tmp.path().join("open_key");
    std::fs::write(&open_key, format!("{good_key}\n")).unwrap();
    std::fs::set_permissions(&open_key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (bad_list, open_key) = (bad_list.to_str().unwrap(), open_key.to_str().unwrap());

    let cases: &[(&[&str], &str)] = &[
        (
            &["send", src, &to, "--peer-key", "garbage"],
            "`garbage` is not a ctp public key: it has 7 characters; expected 44 characters of \
             base64 (as printed by `ctp keygen` or by `ctp recv`)",
        ),
        (
            &["perf", &to, "--peer-key", &good_key[..43]],
            "is not a ctp public key",
        ),
        (
            &["send", src, &to, "--peer-key", good_key, "--insecure"],
            "cannot be used with",
        ),
        (
            &["send", src, &to, "--key", open_key],
            &format!("too open: others than its owner may read it, so it is refused; run `chmod 600 {open_key}`"),
        ),
        (
            &["send", src, &to, "--key", "/definitely/not/here"],
            "no identity in /definitely/not/here",
        ),
        (
            &["send", src, &to, "-p", "udt", "--peer-key", good_key],
            "--peer-key does not apply to a profile on the UDT4 wire",
        ),
        (
            &["recv", "-l", "127.0.0.1:0", "-o", ".", "--allow", bad_list],
            &format!("{bad_list} line 3: `bob` is not a ctp public key"),
        ),
        (
            &["recv", "-l", "127.0.0.1:0", "-o", ".", "--allow", "/no/such/list"],
            "cannot read allow list /no/such/list",
        ),
        (
            &["perf", "--listen", "127.0.0.1:0", "--allow", bad_list],
            "line 3",
        ),
        (&["perf", &to, "--allow", bad_list], "use it with --listen"),
    ];
    for (args, needle) in cases {
        let o = ctp(&config, args, QUICK);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(needle),
            "{args:?}: expected {needle:?} in {err}"
        );
    }
    quiet.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 2048];
    assert!(quiet.recv_from(&mut buf).is_err(), "a datagram was sent");
    assert!(
        !config.exists(),
        "no identity was created by a failed command"
    );

    // With --json the reason is JSON on stdout too, as for other usage errors.
    let o = ctp(
        &config,
        &[
            "recv",
            "-l",
            "127.0.0.1:0",
            "-o",
            ".",
            "--allow",
            bad_list,
            "--json",
        ],
        QUICK,
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    assert_eq!(v["kind"], "usage");
    assert!(v["error"].as_str().unwrap().contains("line 3"), "{v}");
}

/// A receiver proves the identity of its configuration directory (created on first use)
/// and prints its public key as it starts listening.
#[test]
fn a_listener_prints_its_public_key_and_an_insecure_one_has_none() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("ctp");
    let o = ctp(&config, &["keygen"], QUICK);
    let key = text(&o.stdout).trim().to_string();
    for (args, keyed) in [
        (&["recv", "-l", "127.0.0.1:0", "-o", "."] as &[&str], true),
        (&["perf", "--listen", "127.0.0.1:0"], true),
        (
            &["recv", "-l", "127.0.0.1:0", "-o", ".", "--insecure"],
            false,
        ),
    ] {
        let mut child = Command::new(CTP)
            .args(args)
            .env("CTP_CONFIG_DIR", &config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = Vec::new();
        let mut stderr = child.stderr.take().unwrap();
        let mut byte = [0u8];
        while stderr.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
            line.push(byte[0]);
        }
        let _ = child.kill();
        let _ = child.wait();
        let line = text(&line);
        assert!(line.contains("listening on"), "{args:?}: {line}");
        assert_eq!(
            line.contains(&format!("public key {key}")),
            keyed,
            "{args:?}: {line}"
        );
    }
}

/// A `ctp recv` in its own configuration directory, on a fresh loopback port; killed when
/// dropped.
struct Receiver {
    child: std::process::Child,
    out: tempfile::TempDir,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Receiver {
    fn start(config: &Path, port: u16, extra: &[&str]) -> Receiver {
        let out = tempfile::tempdir().unwrap();
        let listen = format!("127.0.0.1:{port}");
        let mut args = vec!["recv", "--listen", &listen, "--out"];
        args.push(out.path().to_str().unwrap());
        args.extend_from_slice(extra);
        let child = Command::new(CTP)
            .args(&args)
            .env("CTP_CONFIG_DIR", config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        Receiver { child, out }
    }

    /// The files it stored (hidden temporary ones included).
    fn files(&self) -> Vec<String> {
        std::fs::read_dir(self.out.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }

    /// What it printed on stderr, once stopped.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut err = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        err
    }
}

/// `ctp send FILE localhost:PORT EXTRA…` from configuration directory `config`.
fn send(config: &Path, file: &Path, port: u16, extra: &[&str]) -> Output {
    let to = format!("localhost:{port}");
    let mut args = vec!["send", file.to_str().unwrap(), &to];
    args.extend_from_slice(extra);
    ctp(config, &args, Duration::from_secs(30))
}

/// The public key `ctp keygen` makes (or shows) in `config`.
fn keygen(config: &Path) -> String {
    let o = ctp(config, &["keygen"], QUICK);
    let shown = ctp(config, &["keygen", "--show"], QUICK);
    assert!(shown.status.success(), "{}", text(&o.stderr));
    text(&shown.stdout).trim().to_string()
}

#[test]
fn a_receiver_key_is_trusted_on_first_use_then_a_changed_or_unpinned_one_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (sender, first, second) = (
        tmp.path().join("s"),
        tmp.path().join("r1"),
        tmp.path().join("r2"),
    );
    let file = tmp.path().join("data.bin");
    std::fs::write(&file, vec![7u8; 300_000]).unwrap();
    let (k1, k2) = (keygen(&first), keygen(&second));
    let port = free_udp_port();

    // First contact: trusted, remembered under the address as typed.
    let r = Receiver::start(&first, port, &["--once"]);
    let o = send(&sender, &file, port, &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("first connection to localhost:"),
        "{}",
        text(&o.stderr)
    );
    let known = std::fs::read_to_string(sender.join("known_peers")).unwrap();
    assert!(known.contains(&format!("localhost:{port} {k1}")), "{known}");
    drop(r);

    // Another receiver on that address: refused, with both keys named; nothing stored.
    let r = Receiver::start(&second, port, &[]);
    let o = send(&sender, &file, port, &[]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("has changed") && err.contains(&k1) && err.contains(&k2),
        "{err}"
    );
    assert!(r.files().is_empty(), "{:?}", r.files());

    // A pin decides instead of the memory: the wrong key is refused, the right one taken.
    let o = send(&sender, &file, port, &["--peer-key", &k1]);
    assert!(
        text(&o.stderr).contains("not the one pinned"),
        "{}",
        text(&o.stderr)
    );
    assert!(r.files().is_empty());
    let o = send(&sender, &file, port, &["--peer-key", &k2]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(r.files(), vec!["data.bin".to_string()]);
}

#[test]
fn a_receiver_with_an_allow_list_refuses_other_senders_and_tells_them_why() {
    let tmp = tempfile::tempdir().unwrap();
    let (stranger, friend, receiver) = (
        tmp.path().join("stranger"),
        tmp.path().join("friend"),
        tmp.path().join("r"),
    );
    let file = tmp.path().join("data.bin");
    std::fs::write(&file, vec![9u8; 100_000]).unwrap();
    let friend_key = keygen(&friend);
    let stranger_key = keygen(&stranger);
    let allow = tmp.path().join("allowed");
    std::fs::write(&allow, format!("{friend_key} friend\n")).unwrap();
    let port = free_udp_port();
    let r = Receiver::start(&receiver, port, &["--allow", allow.to_str().unwrap()]);

    let o = send(&stranger, &file, port, &[]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "key {stranger_key} is not on the receiver's allow list"
        )),
        "{err}"
    );
    assert!(r.files().is_empty(), "{:?}", r.files());

    let o = send(&friend, &file, port, &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(r.files(), vec!["data.bin".to_string()]);
    let log = r.stop();
    assert!(
        log.contains("refused a sender") && log.contains(&stranger_key),
        "{log}"
    );
}

#[test]
fn encryption_on_one_side_only_is_refused_with_the_reason_on_the_sender() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, rc) = (tmp.path().join("s"), tmp.path().join("r"));
    let file = tmp.path().join("data.bin");
    std::fs::write(&file, vec![1u8; 10_000]).unwrap();

    let port = free_udp_port();
    let r = Receiver::start(&rc, port, &[]);
    let o = send(&s, &file, port, &["--insecure"]);
    assert!(
        text(&o.stderr).contains("accepts only encrypted connections"),
        "{}",
        text(&o.stderr)
    );
    assert!(r.files().is_empty());
    drop(r);

    let port = free_udp_port();
    let r = Receiver::start(&rc, port, &["--insecure"]);
    let o = send(&s, &file, port, &[]);
    assert!(
        text(&o.stderr).contains("runs without encryption"),
        "{}",
        text(&o.stderr)
    );
    assert!(r.files().is_empty());
    // Both plain: allowed, when both ask for it.
    let o = send(&s, &file, port, &["--insecure"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(r.files(), vec!["data.bin".to_string()]);
}
