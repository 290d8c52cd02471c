//! Group connections over real UDP sockets on 127.0.0.1: one sender, three destinations,
//! each mode's delivery rule, a slow and a dead destination, load balancing, and members
//! joining and leaving while messages flow.
//!
//! Every test is bounded by `tokio::time::timeout`; the slow destinations are slower than
//! the others by orders of magnitude, so no assertion rests on a close race.

use bytes::Bytes;
use ctp::{
    Endpoint, EndpointOptions, Group, GroupConfig, GroupError, GroupEvent, MemberState, Mode,
    Profile,
};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::timeout;

/// A destination: an endpoint that accepts connections and reads their messages, waiting
/// `pause` after each; what it read, in order, and how many. A slow one (a pause) has a
/// small receive buffer, so that its slowness reaches the sender soon.
struct Destination {
    addr: SocketAddr,
    ep: Endpoint,
    read: Arc<AtomicU64>,
    got: tokio::task::JoinHandle<Vec<Bytes>>,
}

async fn destination(pause: Duration) -> Destination {
    let mut params = ctp::Params::default();
    if !pause.is_zero() {
        params.recv_buffer = 256 << 10;
    }
    let ep = Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        EndpointOptions {
            accept: true,
            params,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let addr = ep.local_addr().unwrap();
    let read = Arc::new(AtomicU64::new(0));
    let (server, count) = (ep.clone(), read.clone());
    let got = tokio::spawn(async move {
        let mut got = Vec::new();
        let Some(c) = server.accept().await else {
            return got;
        };
        while let Ok(m) = c.recv_msg().await {
            got.push(m);
            count.fetch_add(1, Ordering::SeqCst);
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
        }
        got
    });
    Destination {
        addr,
        ep,
        read,
        got,
    }
}

/// Three destinations that read as fast as messages come.
async fn quick_destinations() -> [Destination; 3] {
    [
        destination(Duration::ZERO).await,
        destination(Duration::ZERO).await,
        destination(Duration::ZERO).await,
    ]
}

/// A group from `ep` to `addrs` (reliable profile).
async fn group_with(ep: &Endpoint, addrs: &[SocketAddr], mode: Mode, cfg: GroupConfig) -> Group {
    Group::connect(ep, addrs, &Profile::reliable(), mode, cfg)
        .await
        .expect("every destination reachable")
}

async fn group(ep: &Endpoint, addrs: &[SocketAddr], mode: Mode) -> Group {
    group_with(ep, addrs, mode, GroupConfig::default()).await
}

async fn sender() -> Endpoint {
    Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointOptions::default())
        .await
        .unwrap()
}

fn msg(i: u32, len: usize) -> Bytes {
    let mut v = vec![(i % 251) as u8; len.max(4)];
    v[..4].copy_from_slice(&i.to_be_bytes());
    Bytes::from(v)
}

fn index(m: &Bytes) -> u32 {
    u32::from_be_bytes(m[..4].try_into().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_delivers_every_message_to_every_destination_exactly_once_in_order() {
    timeout(Duration::from_secs(60), async {
        let dests = quick_destinations().await;
        let addrs: Vec<_> = dests.iter().map(|d| d.addr).collect();
        let ep = sender().await;
        let mut g = group(&ep, &addrs, Mode::All).await;
        for i in 0..2000 {
            assert_eq!(g.send(msg(i, 1000)).await.unwrap(), u64::from(i));
        }
        g.close().await.unwrap();
        for d in dests {
            let got = d.got.await.unwrap();
            let order: Vec<u32> = got.iter().map(index).collect();
            assert_eq!(order, (0..2000).collect::<Vec<_>>(), "{}", d.addr);
            assert!(got
                .iter()
                .enumerate()
                .all(|(i, m)| *m == msg(i as u32, 1000)));
        }
    })
    .await
    .expect("bounded");
}

/// Sends `n` messages of 16 KiB to two quick destinations and one that reads one message
/// every 10 ms under `mode`; how many messages the slow one had read when the group had
/// every message done.
async fn slow_one_read_when_done(mode: Mode, n: u32) -> u64 {
    let dests = [
        destination(Duration::ZERO).await,
        destination(Duration::ZERO).await,
        destination(Duration::from_millis(10)).await,
    ];
    let addrs: Vec<_> = dests.iter().map(|d| d.addr).collect();
    let ep = sender().await;
    let mut g = group(&ep, &addrs, mode).await;
    for i in 0..n {
        g.send(msg(i, 16 << 10)).await.unwrap();
    }
    g.flush().await.unwrap();
    let slow_read = dests[2].read.load(Ordering::SeqCst);
    assert!(g.events().is_empty(), "nobody failed");
    for d in &dests {
        d.ep.close();
    }
    slow_read
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_destination_holds_all_back_but_not_any_or_two_of_three() {
    timeout(Duration::from_secs(120), async {
        // 400 messages of 16 KiB (6.4 MB): far more than the slow destination's receive
        // buffer (256 KiB), which it drains at 100 messages a second.
        let n = 400;
        let all = slow_one_read_when_done(Mode::All, n).await;
        let any = slow_one_read_when_done(Mode::Any, n).await;
        let two = slow_one_read_when_done(Mode::AtLeast(2), n).await;
        // Under All the slow one acknowledged every message, so it read all but what its
        // buffer holds; under the others the group was done long before.
        assert!(
            all > u64::from(n) * 3 / 4,
            "all: the slow one had read {all}"
        );
        assert!(any < u64::from(n) / 4, "any: the slow one had read {any}");
        assert!(
            two < u64::from(n) / 4,
            "at-least=2: the slow one had read {two}"
        );
    })
    .await
    .expect("bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_destination_fails_all_with_a_reason_and_leaves_two_of_three_running() {
    timeout(Duration::from_secs(60), async {
        for mode in [Mode::All, Mode::AtLeast(2)] {
            let dests = quick_destinations().await;
            let addrs: Vec<_> = dests.iter().map(|d| d.addr).collect();
            let ep = sender().await;
            let cfg = GroupConfig {
                fail_after: Duration::from_secs(2),
                ..GroupConfig::default()
            };
            let mut g = group_with(&ep, &addrs, mode, cfg).await;
            for i in 0..100 {
                g.send(msg(i, 1000)).await.unwrap();
            }
            g.flush().await.unwrap();
            // The third destination's machine dies: it stops answering at all.
            dests[2].ep.close_with("machine off");
            let mut outcome = Ok(());
            for i in 100..400 {
                if let Err(e) = g.send(msg(i, 1000)).await {
                    outcome = Err(e);
                    break;
                }
            }
            if outcome.is_ok() {
                outcome = g.flush().await;
                // The group is done with every message; the dead destination's copies
                // are still out until it is failed.
                g.settled().await;
            }
            let events = g.events();
            assert!(
                events.iter().any(
                    |e| matches!(e, GroupEvent::MemberFailed { member, .. } if *member == addrs[2])
                ),
                "{mode}: {events:?}"
            );
            match mode {
                Mode::All => {
                    let Err(GroupError::Failed(why)) = outcome else {
                        panic!("all goes on without a destination: {outcome:?}");
                    };
                    assert!(why.contains(&addrs[2].to_string()), "{why}");
                }
                _ => {
                    outcome.unwrap();
                    let r = g.members();
                    assert!(matches!(r[2].state, MemberState::Failed(_)), "{r:?}");
                    assert_eq!((r[0].copies_done, r[1].copies_done), (400, 400));
                }
            }
        }
    })
    .await
    .expect("bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balanced_sends_more_to_the_faster_destination() {
    timeout(Duration::from_secs(60), async {
        let dests = [
            destination(Duration::ZERO).await,
            destination(Duration::from_millis(5)).await,
            destination(Duration::from_millis(5)).await,
        ];
        let addrs: Vec<_> = dests.iter().map(|d| d.addr).collect();
        let ep = sender().await;
        let mode = Mode::Balanced { k: 1, p: 1 };
        let mut g = group(&ep, &addrs, mode).await;
        let n = 3000;
        for i in 0..n {
            g.send(msg(i, 8 << 10)).await.unwrap();
        }
        g.flush().await.unwrap();
        let shares: Vec<u64> = g.members().iter().map(|r| r.copies_done).collect();
        assert_eq!(shares.iter().sum::<u64>(), u64::from(n), "one copy each");
        assert!(
            shares[0] > shares[1] + shares[2],
            "the quick destination took most: {shares:?}"
        );
        assert!(
            shares[1] > 0 && shares[2] > 0,
            "every destination was used: {shares:?}"
        );
    })
    .await
    .expect("bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destinations_join_and_leave_while_messages_flow() {
    timeout(Duration::from_secs(60), async {
        let dests = quick_destinations().await;
        let a: Vec<_> = dests.iter().map(|d| d.addr).collect();
        let ep = sender().await;
        let mut g = group(&ep, &a[..2], Mode::All).await;
        for i in 0..100 {
            g.send(msg(i, 500)).await.unwrap();
        }
        g.add(a[2]).await.unwrap();
        assert!(g.add(a[2]).await.is_err(), "a destination twice");
        for i in 100..200 {
            g.send(msg(i, 500)).await.unwrap();
        }
        g.flush().await.unwrap();
        g.remove(a[0]).unwrap();
        for i in 200..300 {
            g.send(msg(i, 500)).await.unwrap();
        }
        g.close().await.unwrap();
        let mut got = Vec::new();
        for d in dests {
            got.push(d.got.await.unwrap().iter().map(index).collect::<Vec<_>>());
        }
        assert_eq!(got[0], (0..200).collect::<Vec<_>>(), "left after 200");
        assert_eq!(got[1], (0..300).collect::<Vec<_>>(), "there throughout");
        assert_eq!(got[2], (100..300).collect::<Vec<_>>(), "joined at 100");
    })
    .await
    .expect("bounded");
}

/// A destination that reads its connection's messages and every stream the group opens on
/// it, each to its end: the messages, and per stream (by id) its bytes.
async fn stream_destination() -> (
    SocketAddr,
    Endpoint,
    tokio::task::JoinHandle<(Vec<Bytes>, Vec<Vec<u8>>)>,
) {
    let ep = Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        EndpointOptions {
            accept: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let addr = ep.local_addr().unwrap();
    let server = ep.clone();
    let got = tokio::spawn(async move {
        let c = server.accept().await.expect("the group connects");
        let reader = c.clone();
        let messages = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Ok(m) = reader.recv_msg().await {
                got.push(m);
            }
            got
        });
        let mut streams = Vec::new();
        let mut readers = Vec::new();
        while let Ok(s) = c.accept_stream().await {
            readers.push(tokio::spawn(async move {
                let mut s = s;
                let mut buf = Vec::new();
                tokio::io::AsyncReadExt::read_to_end(&mut s, &mut buf)
                    .await
                    .expect("the stream ends cleanly");
                (s.id(), buf)
            }));
            if readers.len() == 2 {
                break;
            }
        }
        for r in readers {
            streams.push(r.await.unwrap());
        }
        streams.sort();
        let messages = messages.await.unwrap();
        (messages, streams.into_iter().map(|(_, b)| b).collect())
    });
    (addr, ep, got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_streams_per_destination_each_arrive_whole_beside_the_messages() {
    timeout(Duration::from_secs(60), async {
        let mut dests = Vec::new();
        for _ in 0..2 {
            dests.push(stream_destination().await);
        }
        let addrs: Vec<_> = dests.iter().map(|d| d.0).collect();
        let ep = sender().await;
        let mut g = group(&ep, &addrs, Mode::All).await;
        let bulk = g.open_stream(0).expect("a stream");
        let urgent = g.open_stream(7).expect("another");
        assert_ne!(bulk, urgent);
        // Interleaved: messages, a bulk stream of 64 KiB records, a small stream.
        let record = |i: u32| Bytes::from(vec![(i % 249) as u8; 65_536]);
        for i in 0..64u32 {
            g.send(msg(i, 1000)).await.unwrap();
            g.send_on(&bulk, record(i)).await.unwrap();
            if i % 8 == 0 {
                g.send_on(&urgent, Bytes::from(format!("note {i};")))
                    .await
                    .unwrap();
            }
        }
        // Done for the group means acknowledged on every stream of every destination.
        g.flush().await.unwrap();
        let reports = g.members();
        assert!(
            reports
                .iter()
                .all(|r| r.copies_done == r.copies && r.copies == 64 + 64 + 8),
            "{reports:?}"
        );
        g.close().await.unwrap();
        let want_bulk: Vec<u8> = (0..64u32).flat_map(|i| record(i).to_vec()).collect();
        let want_notes: Vec<u8> = (0..64u32)
            .step_by(8)
            .flat_map(|i| format!("note {i};").into_bytes())
            .collect();
        for (addr, _ep, got) in dests {
            let (messages, streams) = got.await.unwrap();
            let order: Vec<u32> = messages.iter().map(index).collect();
            assert_eq!(order, (0..64).collect::<Vec<_>>(), "{addr}");
            assert_eq!(streams.len(), 2, "{addr}: two streams besides the messages");
            assert!(
                streams[0] == want_bulk,
                "{addr}: the bulk stream arrived whole"
            );
            assert_eq!(streams[1], want_notes, "{addr}: the small stream");
        }
    })
    .await
    .expect("bounded");
}

/// The group's own task keeps copies moving while the application does something else:
/// with a small send buffer most copies wait in the group when the sends return, and they
/// all reach the destinations while the application sleeps, not at its next call; a
/// destination that stops reading (its buffer full, no progress) is failed by the group's
/// timer meanwhile, without any call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_group_moves_copies_and_fails_members_while_the_application_is_elsewhere() {
    timeout(Duration::from_secs(60), async {
        let dests = [
            destination(Duration::ZERO).await,
            destination(Duration::ZERO).await,
            // Reads one message, then nothing for as long as the test lasts.
            destination(Duration::from_secs(1000)).await,
        ];
        let addrs: Vec<_> = dests.iter().map(|d| d.addr).collect();
        let mut profile = Profile::reliable();
        profile.params.send_buffer = 64 << 10;
        let cfg = GroupConfig {
            fail_after: Duration::from_secs(1),
            ..GroupConfig::default()
        };
        let ep = sender().await;
        let mut g = Group::connect(&ep, &addrs, &profile, Mode::AtLeast(2), cfg)
            .await
            .expect("every destination reachable");
        let n = 200u32;
        for i in 0..n {
            g.send(msg(i, 16_000)).await.unwrap();
        }
        let read = |d: &Destination| d.read.load(Ordering::SeqCst);
        assert!(
            dests.iter().all(|d| read(d) < u64::from(n) / 2),
            "most copies were still waiting when the sends returned"
        );
        // The application is elsewhere; nothing awaits the group.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let failed = matches!(g.members()[2].state, MemberState::Failed(_));
            if failed && dests[..2].iter().all(|d| read(d) == u64::from(n)) {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "copies stopped moving: read {:?}, {:?}",
                dests.iter().map(read).collect::<Vec<_>>(),
                g.members()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        g.close().await.unwrap();
    })
    .await
    .expect("bounded");
}
