//! Scale: 10 000 idle secure channels between two endpoints, and 10 000 idle streams,
//! with the heap each side holds counted for real (`SideCounting`). Bounds are generous
//! (about four times what was measured): they catch a bad regression of per-connection or
//! per-stream memory, not noise. `CTP_SCALE_CONNECTIONS` changes the count.

use ctp_sim::scale::{counting, measure, ScaleConfig, SideCounting};

#[global_allocator]
static ALLOC: SideCounting = SideCounting;

#[test]
fn idle_channels_and_streams_stay_small() {
    assert!(counting(), "the counting allocator is installed");
    let connections = std::env::var("CTP_SCALE_CONNECTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let cfg = ScaleConfig {
        connections,
        ..ScaleConfig::default()
    };
    let r = measure(&cfg, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{r:?}");
    assert!(r.secure, "the channels are encrypted");
    assert_eq!(r.connections, connections);
    assert_eq!(r.streams, 10_000);
    for (side, conn, stream) in [
        ("client", r.client_per_connection, r.client_per_stream),
        ("server", r.server_per_connection, r.server_per_stream),
    ] {
        assert!(conn > 0.0 && stream > 0.0, "{side}: nothing counted");
        assert!(
            conn <= BOUND_CONNECTION,
            "{side}: {conn:.0} B per idle connection"
        );
        assert!(
            stream <= BOUND_STREAM,
            "{side}: {stream:.0} B per idle stream"
        );
    }
}

const BOUND_CONNECTION: f64 = 64.0 * 1024.0;
const BOUND_STREAM: f64 = 1024.0;
