//! What the `ctp` command's test binaries share: running the binary, bounded in time, and
//! free loopback ports. (Each test binary uses part of it.)
#![allow(dead_code)]

use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The binary under test.
pub const CTP: &str = env!("CARGO_BIN_EXE_ctp");

/// Kills the child when dropped, so a failing test leaves no process behind.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A UDP port on 127.0.0.1 that was free a moment ago.
pub fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_tcp_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs `ctp ARGS` with `config` as its configuration directory to its end; kills it and
/// fails the test after `limit`.
pub fn ctp(config: &Path, args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(CTP)
        .args(args)
        .env("CTP_CONFIG_DIR", config)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ctp {args:?} did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut stderr)
        .unwrap();
    Output {
        status: child.wait().unwrap(),
        stdout,
        stderr,
    }
}

/// Fills `buf` with xorshift64 output continuing from `state` (incompressible test data,
/// the same for the same state).
pub fn fill_pseudo_random(buf: &mut [u8], state: &mut u64) {
    for w in buf.chunks_mut(8) {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        w.copy_from_slice(&state.to_le_bytes()[..w.len()]);
    }
}
