//! Scale: what idle secure channels and idle streams cost in heap, on each side.
//!
//! Two sans-IO [`Endpoint`]s joined by a lossless, instant link on a virtual clock: the
//! client opens `connections` connections of a profile (`reliable`: encrypted, Noise XX) to
//! the server, in batches the server's stateless handshake queue takes, and both sides go
//! idle; then `stream_connections` of them open `streams_per_connection` streams each, send
//! one small message on each (read by the server), and go idle again. The heap each side
//! holds is counted by [`SideCounting`], an allocator that charges every allocation and
//! free to the side whose code runs ([`with_side`]): a binary or test measuring installs it
//! (`#[global_allocator] static A: SideCounting = SideCounting;`); without it the figures
//! read zero (see [`counting`]).
//!
//! An allocation freed by the other side's code would be charged wrongly; the endpoints
//! share nothing (a datagram is the driver's buffer, copied or opened in place), so none is.

use core::time::Duration;
use ctp_proto::{
    ConnectionHandle, Endpoint, EndpointConfig, EndpointEvent, Instant, Profile, StreamId,
    StreamKind,
};
use serde::Serialize;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};

/// Whose code runs: the heap it allocates is charged to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The endpoint that connects.
    Client = 1,
    /// The endpoint that accepts.
    Server = 2,
}

static LIVE: [AtomicIsize; 3] = [
    AtomicIsize::new(0),
    AtomicIsize::new(0),
    AtomicIsize::new(0),
];

thread_local! {
    /// The side charged on this thread (0: nobody; nothing is counted).
    static CHARGED: Cell<u8> = const { Cell::new(0) };
}

fn charge(delta: isize) {
    let side = CHARGED.try_with(Cell::get).unwrap_or(0);
    if side != 0 {
        LIVE[side as usize].fetch_add(delta, Relaxed);
    }
}

/// The system allocator, counting the bytes live per [`Side`] while [`with_side`] runs (and
/// nothing otherwise: outside a measurement it costs a thread-local read per call).
pub struct SideCounting;

// SAFETY: every call forwards to `System` unchanged; counting touches no memory it returns.
unsafe impl GlobalAlloc for SideCounting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        charge(l.size() as isize);
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        charge(l.size() as isize);
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        charge(-(l.size() as isize));
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        charge(new as isize - l.size() as isize);
        unsafe { System.realloc(p, l, new) }
    }
}

/// Runs `f` with its heap charged to `side`.
pub fn with_side<R>(side: Side, f: impl FnOnce() -> R) -> R {
    let before = CHARGED.with(|c| c.replace(side as u8));
    let r = f();
    CHARGED.with(|c| c.set(before));
    r
}

/// Bytes live on the heap charged to `side` (since the process started).
pub fn live(side: Side) -> isize {
    LIVE[side as usize].load(Relaxed)
}

/// True if [`SideCounting`] is the global allocator (an allocation is seen).
pub fn counting() -> bool {
    let before = live(Side::Client);
    let b = with_side(Side::Client, || std::hint::black_box(Box::new([0u8; 64])));
    let seen = live(Side::Client) != before;
    drop(b);
    seen
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct ScaleConfig {
    /// Connections the client opens.
    pub connections: usize,
    /// Connections of those that open streams.
    pub stream_connections: usize,
    /// Streams each of those opens (one small message each).
    pub streams_per_connection: usize,
    /// Bytes of each stream's message.
    pub message: usize,
    /// The profile (default `reliable`: a secure channel).
    pub profile: Profile,
}

impl Default for ScaleConfig {
    fn default() -> Self {
        ScaleConfig {
            connections: 10_000,
            stream_connections: 100,
            streams_per_connection: 100,
            message: 32,
            profile: Profile::reliable(),
        }
    }
}

/// What idle connections and streams cost.
#[derive(Clone, Debug, Serialize)]
pub struct ScaleReport {
    /// Profile.
    pub profile: String,
    /// Connections established (both sides).
    pub connections: usize,
    /// Encrypted channels (the profile runs `secure`).
    pub secure: bool,
    /// Heap per idle connection, client side, bytes.
    pub client_per_connection: f64,
    /// Heap per idle connection, server side, bytes.
    pub server_per_connection: f64,
    /// Streams opened, each with one message sent and read.
    pub streams: usize,
    /// Heap per idle stream, client side (the opener, which sent), bytes.
    pub client_per_stream: f64,
    /// Heap per idle stream, server side (which read), bytes.
    pub server_per_stream: f64,
    /// Wall-clock seconds of the whole measurement.
    pub wall_secs: f64,
}

const CLIENT: SocketAddr = SocketAddr::new(
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1)),
    1000,
);
const SERVER: SocketAddr = SocketAddr::new(
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2)),
    2000,
);

/// Connections started at once: the server's queue of stateless handshake replies holds
/// 1024.
const BATCH: usize = 500;

struct Bench {
    now: Instant,
    client: Endpoint,
    server: Endpoint,
    buf: Vec<u8>,
    established: usize,
    incoming: Vec<ConnectionHandle>,
    closed: usize,
}

impl Bench {
    /// Moves every datagram either side has to the other until both are quiet.
    fn pump(&mut self) {
        loop {
            let mut moved = false;
            for from_client in [true, false] {
                loop {
                    let now = self.now;
                    let buf = &mut self.buf;
                    let t = if from_client {
                        with_side(Side::Client, || self.client.poll_transmit(now, buf))
                    } else {
                        with_side(Side::Server, || self.server.poll_transmit(now, buf))
                    };
                    let Some(t) = t else { break };
                    moved = true;
                    let data = &mut self.buf[..t.size];
                    if from_client {
                        with_side(Side::Server, || {
                            self.server.handle_datagram(now, CLIENT, data)
                        });
                    } else {
                        with_side(Side::Client, || {
                            self.client.handle_datagram(now, SERVER, data)
                        });
                    }
                }
            }
            self.events();
            if !moved {
                return;
            }
        }
    }

    fn events(&mut self) {
        while let Some(e) = with_side(Side::Client, || self.client.poll_event()) {
            match e {
                EndpointEvent::Connected(_) => self.established += 1,
                EndpointEvent::Closed(..) => self.closed += 1,
                _ => {}
            }
        }
        while let Some(e) = with_side(Side::Server, || self.server.poll_event()) {
            match e {
                EndpointEvent::Incoming(h) => self.incoming.push(h),
                EndpointEvent::Closed(..) => self.closed += 1,
                _ => {}
            }
        }
    }

    /// Runs until `done` or `max` of virtual time passed; true if `done`.
    fn run_until(&mut self, max: Duration, mut done: impl FnMut(&mut Bench) -> bool) -> bool {
        let end = self.now + max;
        loop {
            self.pump();
            if done(self) {
                return true;
            }
            let next = [
                with_side(Side::Client, || self.client.poll_timeout()),
                with_side(Side::Server, || self.server.poll_timeout()),
            ]
            .into_iter()
            .flatten()
            .min();
            // Time moves at least a millisecond a step: a deadline that firing does not move
            // cannot hold it still.
            let next = next.map_or(end, |t| t.max(self.now + Duration::from_millis(1)));
            if next > end {
                self.now = end;
                return done(self);
            }
            self.now = next;
            let now = self.now;
            with_side(Side::Client, || self.client.handle_timeout(now));
            with_side(Side::Server, || self.server.handle_timeout(now));
        }
    }

    /// Lets both sides settle: acknowledgements out, nothing in flight.
    fn idle(&mut self, clients: &[ConnectionHandle]) {
        self.run_until(Duration::from_secs(5), |b| {
            clients.iter().all(|&h| {
                b.client
                    .connection(h)
                    .is_some_and(|c| c.stats().bytes_in_flight == 0)
            })
        });
        let quiet = self.now + Duration::from_millis(200);
        self.run_until(Duration::from_secs(1), |b| b.now >= quiet);
    }
}

/// Measures; `progress` hears what is under way.
pub fn measure(cfg: &ScaleConfig, progress: &mut dyn FnMut(&str)) -> Result<ScaleReport, String> {
    let wall = std::time::Instant::now();
    let n = cfg.connections;
    let mut c = EndpointConfig::new([1; 32], [2; 32]);
    c.max_connections = n + 1;
    let mut s = EndpointConfig::new([3; 32], [4; 32]);
    s.accept = true;
    s.max_connections = n + 1;
    s.max_connections_per_address = n + 1;
    s.wire = cfg.profile.wire();
    c.wire = cfg.profile.wire();
    let mut b = Bench {
        now: Instant::ZERO,
        client: with_side(Side::Client, || Endpoint::new(c)),
        server: with_side(Side::Server, || Endpoint::new(s)),
        buf: Vec::with_capacity(65_536),
        established: 0,
        incoming: Vec::with_capacity(n),
        closed: 0,
    };
    let mut clients: Vec<ConnectionHandle> = Vec::with_capacity(n);
    let (c0, s0) = (live(Side::Client), live(Side::Server));
    progress(&format!("opening {n} connections"));
    while clients.len() < n {
        let now = b.now;
        for _ in 0..BATCH.min(n - clients.len()) {
            let h = with_side(Side::Client, || b.client.connect(now, SERVER, &cfg.profile))
                .map_err(|e| format!("connect: {e}"))?;
            clients.push(h);
        }
        let want = clients.len();
        if !b.run_until(Duration::from_secs(30), |b| {
            b.established >= want && b.incoming.len() >= want
        }) {
            return Err(format!(
                "{} of {want} connections established, {} accepted, {} closed",
                b.established,
                b.incoming.len(),
                b.closed
            ));
        }
    }
    progress("idling");
    b.idle(&clients);
    if b.closed > 0 {
        return Err(format!("{} connections closed while idle", b.closed));
    }
    let (c1, s1) = (live(Side::Client), live(Side::Server));
    let secure = b
        .client
        .connection(clients[0])
        .is_some_and(|x| x.peer_key().is_some());

    // Streams: one first on each connection (its stream tables), then the ones measured.
    let m = cfg.stream_connections.min(n);
    let with_streams = &clients[..m];
    let servers: Vec<ConnectionHandle> = b.incoming[..m].to_vec();
    let msg = vec![0x5au8; cfg.message.max(1)];
    let open = |b: &mut Bench, k: usize| -> Result<(), String> {
        let now = b.now;
        let mut want = 0usize;
        for &h in with_streams {
            let conn = b
                .client
                .connection_mut(h)
                .ok_or("a client connection vanished")?;
            for _ in 0..k {
                let id: StreamId = with_side(Side::Client, || {
                    conn.open_stream(StreamKind::Bidirectional, 0)
                })
                .map_err(|e| format!("open_stream: {e}"))?;
                with_side(Side::Client, || conn.write_on(now, id, &msg))
                    .map_err(|e| format!("write_on: {e}"))?;
                want += msg.len();
            }
        }
        let mut got = 0usize;
        let mut readable: Vec<(ConnectionHandle, StreamId)> = Vec::new();
        let mut scratch = vec![0u8; 4096];
        let ok = b.run_until(Duration::from_secs(60), |b| {
            let now = b.now;
            for &h in &servers {
                let Some(conn) = b.server.connection_mut(h) else {
                    continue;
                };
                with_side(Side::Server, || {
                    while let Some(id) = conn.accept_stream() {
                        readable.push((h, id));
                    }
                });
            }
            readable.retain(|&(h, id)| {
                let Some(conn) = b.server.connection_mut(h) else {
                    return false;
                };
                while let Ok(k) = with_side(Side::Server, || conn.read_on(now, id, &mut scratch)) {
                    if k == 0 {
                        return false;
                    }
                    got += k;
                }
                true
            });
            got >= want
        });
        if !ok {
            return Err(format!("{got} of {want} stream bytes read"));
        }
        b.idle(with_streams);
        Ok(())
    };
    progress(&format!("opening streams on {m} connections"));
    open(&mut b, 1)?;
    let (c2, s2) = (live(Side::Client), live(Side::Server));
    let k = cfg.streams_per_connection;
    open(&mut b, k)?;
    let (c3, s3) = (live(Side::Client), live(Side::Server));
    if b.closed > 0 {
        return Err(format!("{} connections closed", b.closed));
    }
    let streams = m * k;
    let per = |d: isize, count: usize| d as f64 / count.max(1) as f64;
    Ok(ScaleReport {
        profile: cfg.profile.name.clone(),
        connections: n,
        secure,
        client_per_connection: per(c1 - c0, n),
        server_per_connection: per(s1 - s0, n),
        streams,
        client_per_stream: per(c3 - c2, streams),
        server_per_stream: per(s3 - s2, streams),
        wall_secs: wall.elapsed().as_secs_f64(),
    })
}
