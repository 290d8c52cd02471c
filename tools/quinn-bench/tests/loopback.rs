//! quinn-bench end to end on loopback: the receiver counts exactly what the sender sent, and
//! a receiver stopped by SIGTERM still reports what it read. (Also makes `cargo test` build
//! the binary, where `ctp bench` finds it beside `ctp`.)

use std::net::UdpSocket;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_quinn-bench");

/// Kills the child when dropped, so a failing test leaves no process behind.
struct Guard(Option<Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Guard {
    fn spawn(args: &[&str]) -> Guard {
        Guard(Some(
            Command::new(BIN)
                .args(args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        ))
    }

    /// Waits at most `limit` for the child to exit and returns its output.
    fn output(mut self, limit: Duration) -> Output {
        let start = Instant::now();
        let c = self.0.as_mut().unwrap();
        while c.try_wait().unwrap().is_none() {
            assert!(
                start.elapsed() < limit,
                "quinn-bench did not exit in {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        self.0.take().unwrap().wait_with_output().unwrap()
    }
}

fn addr() -> String {
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("127.0.0.1:{port}")
}

fn field(out: &Output, key: &str) -> u64 {
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .find_map(|w| w.strip_prefix(key))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {text:?}"))
}

#[test]
fn the_receiver_counts_every_byte_sent() {
    let a = addr();
    let recv = Guard::spawn(&["recv", &a]);
    std::thread::sleep(Duration::from_millis(300));
    let send = Guard::spawn(&["send", &a, "3000000"]).output(Duration::from_secs(30));
    assert!(
        send.status.success(),
        "{}",
        String::from_utf8_lossy(&send.stderr)
    );
    let recv = recv.output(Duration::from_secs(10));
    assert!(
        recv.status.success(),
        "{}",
        String::from_utf8_lossy(&recv.stderr)
    );
    assert_eq!(field(&recv, "bytes="), 3_000_000);
}

/// User plus system CPU time of process `pid`, in clock ticks.
fn cpu_ticks(pid: &str) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) closed by ')': utime and stime
    // are the 12th and 13th of them.
    stat.rsplit_once(')')
        .map(|(_, rest)| {
            rest.split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|v| v.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn a_stopped_receiver_reports_what_it_read() {
    let a = addr();
    let recv = Guard::spawn(&["recv", &a]);
    std::thread::sleep(Duration::from_millis(300));
    let _send = Guard::spawn(&["send", &a, "100000000000"]);
    let pid = recv.0.as_ref().unwrap().id().to_string();
    // Stopped once it is receiving, however long the machine takes to get there: an idle
    // receiver burns no CPU, one that reads packets does (at most 30 s).
    let start = std::time::Instant::now();
    while cpu_ticks(&pid) < 10 && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let recv = recv.output(Duration::from_secs(10));
    assert!(field(&recv, "bytes=") > 0);
}

#[test]
fn bad_arguments_are_usage_errors() {
    for args in [
        &["send"][..],
        &["recv", "nowhere"],
        &["send", "127.0.0.1:9", "lots"],
    ] {
        let o = Guard::spawn(args).output(Duration::from_secs(10));
        assert_eq!(o.status.code(), Some(2), "{args:?}");
    }
}
