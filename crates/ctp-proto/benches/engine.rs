//! Composition-engine cost: events dispatched through the binding tables, and whole
//! packets pushed through two composed `reliable` endpoints with no I/O at all.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ctp_proto::engine::event::Event;
use ctp_proto::profile::{compose, Isn};
use ctp_proto::{Endpoint, EndpointConfig, Identity, Instant, Profile};
use std::hint::black_box;
use std::net::SocketAddr;

fn dispatch(c: &mut Criterion) {
    let p = Profile::reliable();
    let mut e = compose(p.micros, &p.params, Isn::default(), Isn::default()).expect("composes");
    let mut g = c.benchmark_group("engine");
    g.throughput(Throughput::Elements(1));
    // CongestionChanged is bound by two mechanisms (window and pacing).
    g.bench_function("dispatch_bound_event", |b| {
        b.iter(|| e.dispatch(black_box(Instant::from_micros(5)), Event::CongestionChanged))
    });
    g.finish();
}

/// Moves `chunk` bytes per iteration from a client to a server endpoint through the full
/// core (segmentation, hold bits, packetiser, CRC, parsing, ack tracking, reassembly).
fn core_throughput(c: &mut Criterion) {
    let a: SocketAddr = "10.0.0.1:1".parse().expect("literal");
    let b_addr: SocketAddr = "10.0.0.2:2".parse().expect("literal");
    let mut scfg = EndpointConfig::new([3; 32], [4; 32]);
    scfg.accept = true;
    let mut client = Endpoint::new(EndpointConfig::new([1; 32], [2; 32]));
    let mut server = Endpoint::new(scfg);
    let mut now = Instant::from_micros(1_000);
    let ch = client
        .connect(now, b_addr, &Profile::reliable())
        .expect("profile");
    let mut buf = Vec::with_capacity(2048);
    let mut sh = None;
    let pump = |client: &mut Endpoint, server: &mut Endpoint, now: Instant, buf: &mut Vec<u8>| {
        let mut moved = true;
        while moved {
            moved = false;
            while let Some(t) = client.poll_transmit(now, buf) {
                server.handle_datagram(now, a, &mut buf[..t.size]);
                moved = true;
            }
            while let Some(t) = server.poll_transmit(now, buf) {
                client.handle_datagram(now, b_addr, &mut buf[..t.size]);
                moved = true;
            }
        }
    };
    for _ in 0..10 {
        now += std::time::Duration::from_millis(1);
        client.handle_timeout(now);
        server.handle_timeout(now);
        pump(&mut client, &mut server, now, &mut buf);
        while let Some(ev) = server.poll_event() {
            if let ctp_proto::EndpointEvent::Incoming(h) = ev {
                sh = Some(h);
            }
        }
    }
    let sh = sh.expect("handshake in the bench");
    let chunk = vec![7u8; 256 * 1024];
    let mut out = vec![0u8; 256 * 1024];
    let mut g = c.benchmark_group("core");
    g.throughput(Throughput::Bytes(chunk.len() as u64));
    g.bench_function("reliable_stream_256KiB", |bch| {
        bch.iter(|| {
            let mut written = 0;
            let mut read = 0;
            while read < chunk.len() {
                now += std::time::Duration::from_micros(50);
                if written < chunk.len() {
                    if let Ok(n) = client
                        .connection_mut(ch)
                        .expect("conn")
                        .stream_write(now, &chunk[written..])
                    {
                        written += n;
                    }
                }
                client.handle_timeout(now);
                server.handle_timeout(now);
                pump(&mut client, &mut server, now, &mut buf);
                while let Ok(n) = server
                    .connection_mut(sh)
                    .expect("conn")
                    .stream_read(now, &mut out)
                {
                    if n == 0 {
                        break;
                    }
                    read += n;
                }
            }
            black_box(read)
        })
    });
    g.finish();
}

/// One whole handshake between two fresh endpoints: INIT, cookie, COOKIE-ECHO, the first
/// short packet — and on a secure channel the Noise messages 1 to 3 (X25519 three times
/// on each side); what a server and a client pay per connection, both on this one core.
/// The endpoints' identities exist beforehand, as a server's does.
fn handshake(c: &mut Criterion) {
    let a: SocketAddr = "10.0.0.1:1".parse().expect("literal");
    let b_addr: SocketAddr = "10.0.0.2:2".parse().expect("literal");
    let (client_id, server_id) = (Identity::generate([5; 32]), Identity::generate([6; 32]));
    let mut buf = Vec::with_capacity(2048);
    let mut g = c.benchmark_group("endpoint");
    g.throughput(Throughput::Elements(1));
    for (name, profile) in [
        ("handshake_reliable", Profile::reliable()),
        (
            "handshake_reliable_insecure",
            Profile::reliable().insecure(),
        ),
    ] {
        g.bench_function(name, |bch| {
            bch.iter(|| {
                let mut scfg = EndpointConfig::new([3; 32], [4; 32]);
                scfg.accept = true;
                scfg.identity = Some(server_id.clone());
                let mut ccfg = EndpointConfig::new([1; 32], [2; 32]);
                ccfg.identity = Some(client_id.clone());
                let mut client = Endpoint::new(ccfg);
                let mut server = Endpoint::new(scfg);
                let now = Instant::from_micros(1_000);
                let ch = client.connect(now, b_addr, &profile).expect("profile");
                let mut accepted = None;
                while accepted.is_none() || !client.connection(ch).expect("conn").is_established() {
                    let mut moved = false;
                    while let Some(t) = client.poll_transmit(now, &mut buf) {
                        server.handle_datagram(now, a, &mut buf[..t.size]);
                        moved = true;
                    }
                    while let Some(t) = server.poll_transmit(now, &mut buf) {
                        client.handle_datagram(now, b_addr, &mut buf[..t.size]);
                        moved = true;
                    }
                    while let Some(ev) = server.poll_event() {
                        if let ctp_proto::EndpointEvent::Incoming(h) = ev {
                            accepted = Some(h);
                        }
                    }
                    assert!(moved, "the handshake stalled");
                }
                black_box(accepted)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, dispatch, core_throughput, handshake);
criterion_main!(benches);
