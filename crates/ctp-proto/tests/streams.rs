//! Streams in the in-memory pair: opened without a round trip, ordered each on its own,
//! served by priority (equal priorities in turn), and small when idle. The heap is counted
//! for real in this test binary.

mod common;

use common::heap::{live, Counting, SERIAL};
use common::{connect, data};
use core::time::Duration;
use ctp_proto::pair::Pair;
use ctp_proto::{ConnectionHandle, Profile, ReadError, StreamId, StreamKind, WriteError};
use std::collections::HashMap;

#[global_allocator]
static ALLOC: Counting = Counting;

/// Reads everything `stream` has on the server; true at its end.
fn drain(p: &mut Pair, s: ConnectionHandle, stream: StreamId, got: &mut Vec<u8>) -> bool {
    let now = p.now;
    let conn = p.server.connection_mut(s).expect("server connection");
    let mut buf = [0u8; 4096];
    loop {
        match conn.read_on(now, stream, &mut buf) {
            Ok(0) => return true,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(ReadError::Blocked) => return false,
            Err(e) => panic!("stream {stream}: {e}"),
        }
    }
}

#[test]
fn streams_open_without_a_round_trip_and_arrive_whole_each_on_its_own() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    streams_arrive_whole_each_on_its_own(&Profile::reliable());
}

#[test]
fn coded_streams_arrive_whole_each_on_its_own() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    streams_arrive_whole_each_on_its_own(&Profile::coded());
}

/// Five streams at once over a link losing 2 % each way, each arriving whole; the
/// responder's streams, unidirectional ones, stream 0.
fn streams_arrive_whole_each_on_its_own(profile: &Profile) {
    let mut p = Pair::new(7);
    p.to_server.loss = 0.02;
    p.to_client.loss = 0.02;
    let (c, s) = connect(&mut p, profile);
    let now = p.now;
    let conn = p.client.connection_mut(c).expect("client");
    let ids: Vec<StreamId> = (0..5)
        .map(|_| {
            conn.open_stream(StreamKind::Bidirectional, 1)
                .expect("opens")
        })
        .collect();
    assert_eq!(
        ids,
        vec![4, 8, 12, 16, 20],
        "the initiator's bidirectional streams after 0"
    );
    let payloads: Vec<Vec<u8>> = (0..5)
        .map(|i| data(100_000 + i * 7_777, i as u64))
        .collect();
    let mut written = [0usize; 5];
    let mut got: HashMap<StreamId, Vec<u8>> = HashMap::new();
    let mut ended: Vec<StreamId> = Vec::new();
    let ok = p.run_until(Duration::from_secs(60), |p| {
        let now = p.now;
        let conn = p.client.connection_mut(c).expect("client");
        for (i, &id) in ids.iter().enumerate() {
            let left = &payloads[i][written[i]..];
            if !left.is_empty() {
                written[i] += conn.write_on(now, id, left).unwrap_or(0);
                if written[i] == payloads[i].len() {
                    conn.finish_on(now, id).expect("finishes");
                }
            }
        }
        let server = p.server.connection_mut(s).expect("server");
        while let Some(id) = server.accept_stream() {
            got.insert(id, Vec::new());
        }
        for (&id, buf) in got.iter_mut() {
            if !ended.contains(&id) && drain(p, s, id, buf) {
                ended.push(id);
            }
        }
        ended.len() == ids.len()
    });
    assert!(
        ok,
        "ended: {ended:?} client {:?} server {:?}",
        p.client.connection(c).unwrap().stats(),
        p.server.connection(s).unwrap().stats()
    );
    for (i, id) in ids.iter().enumerate() {
        assert!(got[id] == payloads[i], "stream {id} arrived changed");
    }
    // A stream nobody opened is refused, with the reason; so is writing on the peer's
    // unidirectional stream. The responder's streams have odd ids.
    let conn = p.client.connection_mut(c).expect("client");
    let err = conn.write_on(now, 24, b"x").expect_err("not opened");
    assert!(
        matches!(err, WriteError::NoStream(ref r) if r.contains("stream 24")),
        "{err}"
    );
    let server = p.server.connection_mut(s).expect("server");
    assert_eq!(
        server
            .open_stream(StreamKind::Bidirectional, 0)
            .expect("opens"),
        1
    );
    let uni = server
        .open_stream(StreamKind::Unidirectional, 0)
        .expect("opens");
    assert_eq!(uni, 3);
    server
        .write_on(now, uni, b"one way")
        .expect("the opener writes");
    let mut got = Vec::new();
    let ok = p.run_until(Duration::from_secs(10), |p| {
        let now = p.now;
        let conn = p.client.connection_mut(c).expect("client");
        if let Some(id) = conn.accept_stream() {
            assert_eq!(id, uni);
        }
        let mut buf = [0u8; 64];
        if let Ok(n) = conn.read_on(now, uni, &mut buf) {
            got.extend_from_slice(&buf[..n]);
        }
        got == b"one way"
    });
    assert!(ok, "{got:?}");
    let conn = p.client.connection_mut(c).expect("client");
    let err = conn
        .write_on(p.now, uni, b"back")
        .expect_err("one way only");
    assert!(err.to_string().contains("unidirectional"), "{err}");
    // Stream 0 is both sides' own: the responder writes on it as on its byte stream.
    let server = p.server.connection_mut(s).expect("server");
    assert_eq!(server.write_on(p.now, 0, b"zero").ok(), Some(4));
}

#[test]
fn a_high_priority_stream_is_served_before_any_later_bulk_data() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 99 bulk streams at priority 0 with 64 KiB each queued at once, and one stream at
    // priority 9 that writes a 1 KiB message every 2 ms. Every message of the urgent
    // stream must reach the receiver before any bulk data cut after it was written: at
    // the instant it is read, no more bulk bytes had been read before than had been cut
    // when it was written. And the bulk streams take turns: when the first of them ends, every
    // other has delivered at least half.
    let mut p = Pair::new(8);
    let (c, s) = connect(&mut p, &Profile::reliable());
    const BULK: usize = 64 * 1024;
    const MSG: usize = 1024;
    let conn = p.client.connection_mut(c).expect("client");
    let urgent = conn
        .open_stream(StreamKind::Bidirectional, 9)
        .expect("opens");
    let bulk: Vec<StreamId> = (0..99)
        .map(|_| {
            conn.open_stream(StreamKind::Bidirectional, 0)
                .expect("opens")
        })
        .collect();
    let now = p.now;
    // Each bulk stream in four writes, four chunks: the turns equal priorities take.
    for quarter in 0..4 {
        for &id in &bulk {
            let d = data(BULK, id);
            let part = &d[quarter * BULK / 4..(quarter + 1) * BULK / 4];
            let n = conn.write_on(now, id, part).expect("queued");
            assert_eq!(n, BULK / 4, "the send buffer takes it all");
        }
    }
    for &id in &bulk {
        conn.finish_on(now, id).expect("finishes");
    }
    let mut got: HashMap<StreamId, Vec<u8>> = HashMap::new();
    let mut bulk_read = 0usize;
    let mut written_msgs = 0usize;
    let mut next_write = p.now;
    // For each urgent message: bulk bytes cut (sent for the first time) when it was written.
    let mut cut_at_write: Vec<usize> = Vec::new();
    let mut checked = 0usize;
    // Bulk bytes read at instants before the current one (a burst of packets arrives at
    // one instant on the pair's link, so order within an instant is not observable).
    let (mut instant, mut bulk_read_before) = (p.now, 0usize);
    let mut first_end_share: Option<usize> = None;
    let mut ended = 0usize;
    let mut ended_set = std::collections::HashSet::new();
    let ok = p.run_until(Duration::from_secs(60), |p| {
        let now = p.now;
        if now > instant {
            (instant, bulk_read_before) = (now, bulk_read);
        }
        let conn = p.client.connection_mut(c).expect("client");
        if written_msgs < 10 && now >= next_write {
            let cut = conn.stats().app_bytes_sent as usize - written_msgs * MSG;
            assert_eq!(
                conn.write_on(now, urgent, &[written_msgs as u8; MSG]).ok(),
                Some(MSG)
            );
            cut_at_write.push(cut);
            written_msgs += 1;
            next_write = now + Duration::from_millis(2);
        }
        let server = p.server.connection_mut(s).expect("server");
        while let Some(id) = server.accept_stream() {
            got.insert(id, Vec::new());
        }
        let ids: Vec<StreamId> = got.keys().copied().collect();
        for id in ids {
            let buf = got.get_mut(&id).expect("known");
            let before = buf.len();
            let end = drain(p, s, id, buf);
            if id != urgent {
                bulk_read += buf.len() - before;
                if end && ended_set.insert(id) {
                    assert_eq!(buf.len(), BULK, "bulk stream {id}");
                    ended += 1;
                    if first_end_share.is_none() {
                        first_end_share = bulk.iter().map(|b| got.get(b).map_or(0, Vec::len)).min();
                    }
                }
            }
        }
        let urgent_read = got.get(&urgent).map_or(0, Vec::len) / MSG;
        while checked < urgent_read {
            // `cut_at_write` counts every earlier urgent message as cut; on a paced path
            // the segmenter cuts only a few segments ahead, so the one before may still be
            // partly uncut when the next is written: its rest (less than a message) is
            // counted as bulk.
            assert!(
                bulk_read_before <= cut_at_write[checked] + MSG,
                "urgent message {checked}: {bulk_read_before} bulk bytes read before it, only \
                 {} cut when it was written",
                cut_at_write[checked]
            );
            checked += 1;
        }
        ended == bulk.len() && checked == 10
    });
    assert!(
        ok,
        "{ended} bulk streams ended, {checked} urgent messages read"
    );
    assert!(
        cut_at_write[9] < 99 * BULK,
        "the last urgent message was written while bulk data was still queued"
    );
    let share = first_end_share.expect("a bulk stream ended");
    assert!(
        share >= BULK / 4,
        "a bulk stream had {share} bytes when the first ended"
    );
    for (i, chunk) in got[&urgent].chunks(MSG).enumerate() {
        assert!(
            chunk.iter().all(|&b| b == i as u8),
            "urgent message {i} changed"
        );
    }
}

#[test]
fn an_idle_stream_costs_less_than_320_bytes() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut p = Pair::new(9);
    let (c, s) = connect(&mut p, &Profile::reliable());
    // Streams that carried a byte each way's worth (data, acknowledgement) and stay open,
    // idle. Warm up both sides (buffers, tables) before measuring.
    let open_and_read = |p: &mut Pair, n: usize| {
        let now = p.now;
        let conn = p.client.connection_mut(c).expect("client");
        for _ in 0..n {
            let id = conn
                .open_stream(StreamKind::Bidirectional, 0)
                .expect("opens");
            conn.write_on(now, id, b"x").expect("queued");
        }
        let mut ended = 0;
        let mut open: Vec<(StreamId, Vec<u8>)> = Vec::new();
        let ok = p.run_until(Duration::from_secs(60), |p| {
            let server = p.server.connection_mut(s).expect("server");
            while let Some(id) = server.accept_stream() {
                open.push((id, Vec::new()));
            }
            let mut i = 0;
            while i < open.len() {
                let (id, got) = &mut open[i];
                drain(p, s, *id, got);
                if got.len() == 1 {
                    assert_eq!(got, b"x");
                    ended += 1;
                    open.swap_remove(i);
                } else {
                    i += 1;
                }
            }
            ended == n
                && p.client
                    .connection(c)
                    .is_some_and(|x| x.stats().bytes_in_flight == 0)
        });
        assert!(ok, "{ended} of {n} streams read");
    };
    open_and_read(&mut p, 100);
    let before = live();
    const N: usize = 10_000;
    open_and_read(&mut p, N);
    let per_stream = live().saturating_sub(before) / N;
    eprintln!("an idle stream (both sides): {per_stream} bytes of heap");
    // Both sides together, the per-stream barrier (flow control) included: ~300 bytes.
    assert!(per_stream < 320, "{per_stream} bytes per idle stream");
}

/// Reads stream `id` on `side`'s connection `h` to what it has; `Ok(true)` at its end.
fn read_all(
    conn: &mut ctp_proto::connection::Connection,
    now: ctp_proto::Instant,
    id: StreamId,
    got: &mut Vec<u8>,
) -> Result<bool, ReadError> {
    let mut buf = [0u8; 4096];
    loop {
        match conn.read_on(now, id, &mut buf) {
            Ok(0) => return Ok(true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(ReadError::Blocked) => return Ok(false),
            Err(e) => return Err(e),
        }
    }
}

#[test]
fn a_stream_opened_written_and_finished_at_once_travels_in_one_packet_and_names_its_service() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut p = Pair::new(21);
    let (c, s) = connect(&mut p, &Profile::reliable());
    // Let the handshake's last acknowledgements go first.
    let quiet = p.now + Duration::from_millis(500);
    p.run_until(Duration::from_secs(1), |p| p.now >= quiet);
    let now = p.now;
    let conn = p.client.connection_mut(c).expect("client");
    let sent_before = conn.stats().packets_sent;
    // A request to service 7 that asks for its answer on service 9.
    let id = conn
        .open_stream_for(StreamKind::Unidirectional, 0, 7)
        .expect("opens");
    assert_eq!(
        conn.write_last_on(now, id, b"reply to 9").expect("queued"),
        10
    );
    assert!(matches!(
        conn.write_on(now, id, b"more"),
        Err(WriteError::Finished)
    ));
    let mut request = Vec::new();
    let mut sent_by_then = 0;
    let ok = p.run_until(Duration::from_secs(10), |p| {
        let now = p.now;
        let server = p.server.connection_mut(s).expect("server");
        if let Some(got) = server.accept_stream() {
            assert_eq!(got, id);
            assert_eq!(server.stream_service(id), Some(7));
        }
        let end = read_all(server, now, id, &mut request).expect("no reset");
        if end {
            sent_by_then = p.client.connection(c).expect("client").stats().packets_sent;
        }
        end
    });
    assert!(ok && request == b"reply to 9", "{request:?}");
    assert_eq!(
        sent_by_then - sent_before,
        1,
        "opening, data and end took more than one packet"
    );
    // The answer goes back on a stream of the responder's, for the service asked.
    let now = p.now;
    let server = p.server.connection_mut(s).expect("server");
    let back = server
        .open_stream_for(StreamKind::Unidirectional, 0, 9)
        .expect("opens");
    server.write_last_on(now, back, b"answer").expect("queued");
    let mut answer = Vec::new();
    let ok = p.run_until(Duration::from_secs(10), |p| {
        let now = p.now;
        let client = p.client.connection_mut(c).expect("client");
        if let Some(got) = client.accept_stream() {
            assert_eq!((got, client.stream_service(got)), (back, Some(9)));
        }
        read_all(client, now, back, &mut answer).expect("no reset")
    });
    assert!(ok && answer == b"answer");
    for h in [(&p.client, c), (&p.server, s)] {
        let st = h.0.connection(h.1).expect("open").stats();
        assert_eq!(st.streams_with_state, 0, "ended streams keep no state");
    }
}

#[test]
fn a_connection_carries_more_streams_over_its_life_than_it_holds_at_once() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut p = Pair::new(22);
    p.to_server.loss = 0.02;
    p.to_client.loss = 0.02;
    let (c, s) = connect(&mut p, &Profile::reliable());
    // More streams than may be open at once, one small request each, in waves; lost
    // packets are retransmitted whole, opening and all.
    let total = ctp_proto::MAX_STREAMS + 4_000;
    const WAVE: usize = 2_000;
    let mut opened = 0;
    let mut finished = 0;
    let mut expected: HashMap<StreamId, u32> = HashMap::new();
    let mut seen = std::collections::HashSet::new();
    let ok = p.run_until(Duration::from_secs(600), |p| {
        let now = p.now;
        let conn = p.client.connection_mut(c).expect("client");
        if opened == finished {
            for _ in 0..WAVE.min(total - opened) {
                let id = conn
                    .open_stream(StreamKind::Unidirectional, 0)
                    .expect("opens");
                let n = opened as u32;
                assert_eq!(conn.write_last_on(now, id, &n.to_le_bytes()).unwrap(), 4);
                expected.insert(id, n);
                opened += 1;
            }
        }
        let server = p.server.connection_mut(s).expect("server");
        while let Some(id) = server.accept_stream() {
            assert!(seen.insert(id), "stream {id} opened twice");
            let mut got = Vec::new();
            assert!(read_all(server, now, id, &mut got).expect("no reset"));
            let want = expected.remove(&id).expect("a stream the client opened");
            assert_eq!(got, want.to_le_bytes());
            finished += 1;
        }
        finished == total
    });
    assert!(ok, "{finished} of {total} streams");
    assert!(expected.is_empty());
    let server = p.server.connection(s).expect("server").stats();
    assert_eq!(server.streams_with_state, 0);
    let client = p.client.connection(c).expect("client").stats();
    assert_eq!(client.streams_with_state, 0);
    assert!(client.retransmissions > 0, "the loss was exercised");
}

#[test]
fn a_reset_stream_ends_the_peers_reads_with_its_code_and_holds_up_no_other() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut p = Pair::new(23);
    p.to_server.loss = 0.02;
    p.to_client.loss = 0.02;
    let (c, s) = connect(&mut p, &Profile::reliable());
    let now = p.now;
    let conn = p.client.connection_mut(c).expect("client");
    let doomed = conn
        .open_stream(StreamKind::Unidirectional, 0)
        .expect("opens");
    let kept = conn
        .open_stream(StreamKind::Unidirectional, 0)
        .expect("opens");
    let big = data(3 << 20, 5);
    let small = data(200_000, 6);
    let (mut wd, mut wk) = (0, 0);
    let (mut got_doomed, mut got_kept) = (Vec::new(), Vec::new());
    let (mut reset_seen, mut kept_end) = (None, false);
    let mut reset_sent = false;
    let ok = p.run_until(Duration::from_secs(120), |p| {
        let now = p.now;
        let conn = p.client.connection_mut(c).expect("client");
        if !reset_sent {
            wd += conn.write_on(now, doomed, &big[wd..]).unwrap_or(0);
            if wd > 1 << 20 {
                conn.reset_on(now, doomed, 42).expect("resets");
                assert!(matches!(
                    conn.write_on(now, doomed, b"x"),
                    Err(WriteError::Finished)
                ));
                reset_sent = true;
            }
        }
        if wk < small.len() {
            wk += conn.write_on(now, kept, &small[wk..]).unwrap_or(0);
            if wk == small.len() {
                conn.finish_on(now, kept).expect("finishes");
            }
        }
        let server = p.server.connection_mut(s).expect("server");
        while server.accept_stream().is_some() {}
        if reset_seen.is_none() {
            match read_all(server, now, doomed, &mut got_doomed) {
                Err(ReadError::Reset(code)) => reset_seen = Some(code),
                Ok(end) => assert!(!end, "the reset stream ended normally"),
                Err(e) => panic!("{e}"),
            }
        }
        if !kept_end {
            kept_end = read_all(server, now, kept, &mut got_kept).expect("no reset");
        }
        reset_seen.is_some() && kept_end
    });
    assert!(ok, "reset {reset_seen:?}, kept stream ended {kept_end}");
    assert_eq!(reset_seen, Some(42));
    assert!(got_kept == small, "the other stream arrived changed");
    assert!(got_doomed.len() < big.len() && big.starts_with(&got_doomed));
    // Reading the reset stream again finds its end; it holds no state on either side.
    let server = p.server.connection_mut(s).expect("server");
    assert_eq!(server.read_on(now, doomed, &mut [0u8; 16]), Ok(0));
    let drained = p.run_until(Duration::from_secs(30), |p| {
        p.client
            .connection(c)
            .is_some_and(|x| x.stats().bytes_in_flight == 0)
    });
    assert!(drained);
    assert_eq!(
        p.server
            .connection(s)
            .expect("server")
            .stats()
            .streams_with_state,
        0
    );
    assert_eq!(
        p.client
            .connection(c)
            .expect("client")
            .stats()
            .streams_with_state,
        0
    );
}

#[test]
fn a_stream_nobody_reads_holds_a_barrier_of_data_and_stalls_no_other() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut p = Pair::new(24);
    p.to_server.loss = 0.01;
    p.to_client.loss = 0.01;
    let (c, s) = connect(&mut p, &Profile::reliable());
    let conn = p.client.connection_mut(c).expect("client");
    let unread = conn
        .open_stream(StreamKind::Unidirectional, 0)
        .expect("opens");
    let read = conn
        .open_stream(StreamKind::Unidirectional, 0)
        .expect("opens");
    let (a, b) = (data(4 << 20, 8), data(2 << 20, 9));
    let (mut wa, mut wb) = (0, 0);
    let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
    let mut b_done = false;
    let mut most_held = 0u64;
    // Phase 1: the application reads one stream and leaves the other alone.
    let ok = p.run_until(Duration::from_secs(120), |p| {
        let now = p.now;
        let conn = p.client.connection_mut(c).expect("client");
        wa += conn.write_on(now, unread, &a[wa..]).unwrap_or(0);
        if wb < b.len() {
            wb += conn.write_on(now, read, &b[wb..]).unwrap_or(0);
            if wb == b.len() {
                conn.finish_on(now, read).expect("finishes");
            }
        }
        let server = p.server.connection_mut(s).expect("server");
        while server.accept_stream().is_some() {}
        if !b_done {
            b_done = read_all(server, now, read, &mut got_b).expect("no reset");
        }
        most_held = most_held.max(server.buffered_bytes());
        b_done
    });
    assert!(ok && got_b == b, "the stream that was read stalled");
    // What the unread stream holds at the receiver: its barrier, and at most the chunk
    // that started below it.
    let limit = ctp_proto::MIN_BARRIER + ctp_proto::connection::STREAM_CHUNK as u64;
    let held = p.server.connection(s).expect("server").buffered_bytes();
    assert!(
        held <= limit,
        "{held} bytes of an unread stream held (at most {limit})"
    );
    // Phase 2: the application reads it after all; its barrier follows and it completes.
    let ok = p.run_until(Duration::from_secs(300), |p| {
        let now = p.now;
        let conn = p.client.connection_mut(c).expect("client");
        wa += conn.write_on(now, unread, &a[wa..]).unwrap_or(0);
        if wa == a.len() {
            conn.finish_on(now, unread).expect("finishes");
        }
        let server = p.server.connection_mut(s).expect("server");
        read_all(server, now, unread, &mut got_a).expect("no reset")
    });
    assert!(ok && got_a == a, "{} of {} bytes", got_a.len(), a.len());
}

/// A watched stream's done barrier: the offset below which every chunk was acknowledged.
/// It stays behind what was written while the peer's acknowledgements are cut off, reaches
/// every byte written once they flow, and is the same under loss; an unwatched stream
/// counts nothing in its segments (its barrier is only what is still queued).
#[test]
fn a_watched_streams_done_barrier_follows_the_acknowledgements() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut p = Pair::new(11);
    let (c, s) = connect(&mut p, &Profile::reliable());
    let now = p.now;
    let conn = p.client.connection_mut(c).expect("client");
    let id = conn
        .open_stream(StreamKind::Unidirectional, 0)
        .expect("opens");
    conn.watch_stream(id)
        .expect("a reliable stream can be watched");
    assert_eq!(conn.stream_done_below(id), Some(0));
    let payload = data(300_000, 5);
    let mut written = 0;
    // The acknowledgements are cut off: the data goes, nothing is done.
    p.to_client.loss = 1.0;
    let mut got = Vec::new();
    p.run_until(Duration::from_millis(300), |p| {
        let now = p.now;
        let conn = p.client.connection_mut(c).expect("client");
        written += conn.write_on(now, id, &payload[written..]).unwrap_or(0);
        let server = p.server.connection_mut(s).expect("server");
        while server.accept_stream().is_some() {}
        drain(p, s, id, &mut got);
        false
    });
    let conn = p.client.connection(c).expect("client");
    let arrived = p
        .server
        .connection(s)
        .expect("server")
        .stats()
        .packets_received;
    assert!(
        written > 0 && arrived > 0,
        "data went: {written} written, {arrived} packets"
    );
    assert_eq!(conn.stream_written(id), Some(written as u64));
    assert_eq!(
        conn.stream_done_below(id),
        Some(0),
        "nothing acknowledged, nothing done ({arrived} packets arrived)"
    );
    // Acknowledgements flow again, both ways lossy: everything written becomes done.
    p.to_client.loss = 0.03;
    p.to_server.loss = 0.03;
    let mut last = 0;
    let ok = p.run_until(Duration::from_secs(30), |p| {
        let now = p.now;
        let conn = p.client.connection_mut(c).expect("client");
        written += conn.write_on(now, id, &payload[written..]).unwrap_or(0);
        let done = conn.stream_done_below(id).expect("composed");
        assert!(
            done >= last,
            "the barrier never goes back: {done} after {last}"
        );
        assert!(
            done <= written as u64,
            "done {done} beyond written {written}"
        );
        last = done;
        let server = p.server.connection_mut(s).expect("server");
        while server.accept_stream().is_some() {}
        drain(p, s, id, &mut got);
        written == payload.len() && done == written as u64
    });
    assert!(ok, "done {last} of {written}");
    assert!(got == payload, "arrived whole");
    // A stream not watched has no barrier of its own in its segments.
    let conn = p.client.connection_mut(c).expect("client");
    let other = conn
        .open_stream(StreamKind::Unidirectional, 0)
        .expect("opens");
    assert_eq!(conn.write_on(now, other, b"x").ok(), Some(1));
    assert_eq!(conn.stream_written(other), Some(1));
}
