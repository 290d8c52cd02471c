//! `ctp relay`: a user-space UDP impairment relay (this kernel has no netem).
//!
//! Each client (a source address on `--listen`) gets an upstream socket of its own, as a NAT
//! gives it a mapping: its datagrams go to `--to` from that socket, and what `--to` answers
//! there goes back to that client. All clients share one bottleneck per direction (one
//! [`model::Direction`] each way: same impairments, different seeds), so flows through the
//! relay compete as they would on one path. A release queue (binary heap) holds datagrams
//! until their time; the loop sleeps until the earliest.

pub mod model;

use crate::cli::RelayArgs;
use crate::failure::Failure;
use crate::output::outln;
use anyhow::Context;
use model::{Counters, Direction, Impairments, Verdict};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::time::Instant;

/// Bytes a relayed datagram may have.
const MAX_DATAGRAM: usize = 65_536;
/// Datagrams waiting for release at most (beyond, new ones are dropped and counted).
const MAX_PENDING: usize = 100_000;

/// Clients served at once at most; datagrams from more are dropped and counted.
pub const MAX_CLIENTS: usize = 1024;

/// A datagram waiting for release: time (µs), tie-break sequence, upstream?, client, bytes.
type Pending = (u64, u64, bool, usize, Vec<u8>);

/// What the relay reports when it stops.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Client → server direction.
    pub upstream: Counters,
    /// Server → client direction.
    pub downstream: Counters,
    /// Clients served (source addresses seen on `--listen`).
    pub clients: usize,
    /// Datagrams dropped because [`MAX_CLIENTS`] clients were already served.
    pub refused_clients: u64,
    /// Seconds the relay ran.
    pub seconds: f64,
}

/// Impairments from the command line.
pub fn impairments(a: &RelayArgs) -> Result<Impairments, Failure> {
    let usage = |e: String| Failure::Usage(e);
    Ok(Impairments {
        delay_us: crate::units::duration_us(&a.delay)
            .map_err(|e| usage(format!("--delay: {e}")))?,
        jitter_us: crate::units::duration_us(&a.jitter)
            .map_err(|e| usage(format!("--jitter: {e}")))?,
        rate_bps: a
            .rate
            .as_deref()
            .map(crate::units::rate_bps)
            .transpose()
            .map_err(|e| usage(format!("--rate: {e}")))?,
        queue_limit: a.queue,
        loss: crate::units::loss(a.loss.as_deref(), a.ge_loss.as_deref()).map_err(usage)?,
        reorder: crate::units::probability(&a.reorder)
            .map_err(|e| usage(format!("--reorder: {e}")))?,
        reorder_extra_us: crate::units::duration_us(&a.reorder_extra)
            .map_err(|e| usage(format!("--reorder-extra: {e}")))?,
        duplicate: crate::units::probability(&a.duplicate)
            .map_err(|e| usage(format!("--duplicate: {e}")))?,
    })
}

/// Asks for socket buffers as large as an endpoint's ([`ctp::DEFAULT_SOCKET_BUFFER`]).
/// With the kernel's default (about 200 KiB, some 90 datagrams) a sender's burst overflows
/// the receive buffer before the relay reads it: losses the relay neither emulates nor
/// counts, in front of the queue it does emulate. Best effort (capped by
/// `net.core.rmem_max` / `wmem_max`).
fn large_buffers(socket: &UdpSocket) {
    ctp::set_socket_buffers(socket, ctp::DEFAULT_SOCKET_BUFFER);
}

/// One client and the upstream socket that carries its datagrams.
struct Client {
    addr: SocketAddr,
    back: std::sync::Arc<UdpSocket>,
    reader: tokio::task::JoinHandle<()>,
}

/// A running relay's sockets and state.
pub struct Relay {
    front: UdpSocket,
    to: SocketAddr,
    clients: Vec<Client>,
    by_addr: std::collections::HashMap<SocketAddr, usize>,
    refused_clients: u64,
    /// Datagrams the upstream sockets received from `--to`: (client, bytes).
    answers: tokio::sync::mpsc::Sender<(usize, Vec<u8>)>,
    answered: tokio::sync::mpsc::Receiver<(usize, Vec<u8>)>,
    up: Direction,
    down: Direction,
    pending: BinaryHeap<Reverse<Pending>>,
    seq: u64,
    epoch: Instant,
}

impl Relay {
    /// Binds the relay's listening socket (upstream sockets are opened per client).
    pub async fn bind(
        listen: SocketAddr,
        to: SocketAddr,
        imp: Impairments,
        seed: u64,
    ) -> anyhow::Result<Relay> {
        let front = UdpSocket::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        large_buffers(&front);
        let (answers, answered) = tokio::sync::mpsc::channel(4096);
        Ok(Relay {
            front,
            to,
            clients: Vec::new(),
            by_addr: std::collections::HashMap::new(),
            refused_clients: 0,
            answers,
            answered,
            up: Direction::new(imp, seed),
            down: Direction::new(imp, seed ^ 0x9e37_79b9_7f4a_7c15),
            pending: BinaryHeap::new(),
            seq: 0,
            epoch: Instant::now(),
        })
    }

    /// The address clients send to.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.front.local_addr()
    }

    fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    /// The index of client `from`, given an upstream socket (and a task reading the
    /// answers on it) the first time; `None` when [`MAX_CLIENTS`] are served already.
    async fn client(&mut self, from: SocketAddr) -> anyhow::Result<Option<usize>> {
        if let Some(&i) = self.by_addr.get(&from) {
            return Ok(Some(i));
        }
        if self.clients.len() >= MAX_CLIENTS {
            self.refused_clients += 1;
            return Ok(None);
        }
        let any: SocketAddr = if self.to.is_ipv4() {
            "0.0.0.0:0"
        } else {
            "[::]:0"
        }
        .parse()
        .expect("literal");
        let back = UdpSocket::bind(any)
            .await
            .context("cannot open an upstream socket for a new client")?;
        large_buffers(&back);
        let back = std::sync::Arc::new(back);
        let i = self.clients.len();
        let (socket, to, answers) = (back.clone(), self.to, self.answers.clone());
        let reader = tokio::spawn(async move {
            let mut buf = vec![0u8; MAX_DATAGRAM];
            while let Ok((n, src)) = socket.recv_from(&mut buf).await {
                // Only the server's answers go back (anyone else's is ignored, as a NAT
                // with port-restricted mappings does).
                if src == to && answers.send((i, buf[..n].to_vec())).await.is_err() {
                    break;
                }
            }
        });
        self.clients.push(Client {
            addr: from,
            back,
            reader,
        });
        self.by_addr.insert(from, i);
        Ok(Some(i))
    }

    /// Queues `data` for release at the times its direction's impairments give (none when
    /// lost, two when duplicated); a duplicate is the only copy made.
    fn schedule(&mut self, upstream: bool, client: usize, data: Vec<u8>) {
        let now = self.now_us();
        let dir = if upstream {
            &mut self.up
        } else {
            &mut self.down
        };
        if let Verdict::Forward(times) = dir.admit(now, data.len()) {
            let last = times.len().saturating_sub(1);
            let mut data = Some(data);
            for (i, at) in times.into_iter().enumerate() {
                if self.pending.len() >= MAX_PENDING {
                    dir.counters.dropped_queue += 1;
                    continue;
                }
                let copy = if i == last { data.take() } else { data.clone() };
                self.seq += 1;
                self.pending.push(Reverse((
                    at,
                    self.seq,
                    upstream,
                    client,
                    copy.unwrap_or_default(),
                )));
            }
        }
    }

    async fn release_due(&mut self) {
        let now = self.now_us();
        while let Some(Reverse((at, ..))) = self.pending.peek() {
            if *at > now {
                break;
            }
            let Some(Reverse((_, _, upstream, client, data))) = self.pending.pop() else {
                break;
            };
            let c = &self.clients[client];
            // A send error (the peer is gone) is like a loss on the wire; keep relaying.
            if upstream {
                let _ = c.back.send_to(&data, self.to).await;
            } else {
                let _ = self.front.send_to(&data, c.addr).await;
            }
        }
    }

    /// Relays until `stop` resolves; returns the counters.
    pub async fn run(mut self, stop: impl std::future::Future<Output = ()>) -> Report {
        let started = Instant::now();
        let mut a = vec![0u8; MAX_DATAGRAM];
        tokio::pin!(stop);
        loop {
            let next = self
                .pending
                .peek()
                .map(|Reverse((at, ..))| self.epoch + Duration::from_micros(*at));
            let sleep = async {
                match next {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = &mut stop => break,
                r = self.front.recv_from(&mut a) => {
                    if let Ok((n, from)) = r {
                        match self.client(from).await {
                            Ok(Some(c)) => self.schedule(true, c, a[..n].to_vec()),
                            Ok(None) => {}
                            // No socket for it (descriptors exhausted): like a loss.
                            Err(e) => tracing::warn!("relay: {e:#}"),
                        }
                    }
                }
                Some((c, data)) = self.answered.recv() => self.schedule(false, c, data),
                _ = sleep => {}
            }
            self.release_due().await;
        }
        for c in &self.clients {
            c.reader.abort();
        }
        Report {
            upstream: self.up.counters,
            downstream: self.down.counters,
            clients: self.clients.len(),
            refused_clients: self.refused_clients,
            seconds: started.elapsed().as_secs_f64(),
        }
    }
}

/// Runs `ctp relay`.
pub async fn run(a: RelayArgs) -> Result<(), Failure> {
    let imp = impairments(&a)?;
    if a.duration.is_some_and(|d| !(d.is_finite() && d > 0.0)) {
        return Err(Failure::Usage(
            "--duration must be a positive number of seconds".into(),
        ));
    }
    if a.queue == 0 {
        return Err(Failure::Usage(
            "--queue must hold at least one datagram".into(),
        ));
    }
    let relay = Relay::bind(a.listen, a.to, imp, a.seed).await?;
    if !a.json {
        eprintln!(
            "ctp relay: {} ⇄ {} (delay {} ± {}, rate {}, loss {}, reorder {}, duplicate {}); Ctrl-C to stop",
            relay.local_addr().map(|x| x.to_string()).unwrap_or_default(),
            a.to,
            a.delay,
            a.jitter,
            a.rate.as_deref().unwrap_or("unlimited"),
            a.ge_loss.as_deref().or(a.loss.as_deref()).unwrap_or("0"),
            a.reorder,
            a.duplicate
        );
    }
    let duration = a.duration;
    let stop = async move {
        match duration {
            Some(s) => {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs_f64(s)) => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            None => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    };
    let report = relay.run(stop).await;
    if a.json {
        outln!("{}", serde_json::to_string(&report).unwrap_or_default());
    } else {
        outln!(
            "clients: {}{}",
            report.clients,
            if report.refused_clients > 0 {
                format!(
                    " ({} datagrams of further clients refused)",
                    report.refused_clients
                )
            } else {
                String::new()
            }
        );
        for (name, c) in [
            ("client → server", report.upstream),
            ("server → client", report.downstream),
        ] {
            outln!(
                "{name}: in {} datagrams ({} B), out {} ({} B), lost {}, queue drops {}, duplicated {}, reordered {}",
                c.in_datagrams, c.in_bytes, c.out_datagrams, c.out_bytes, c.dropped_loss, c.dropped_queue, c.duplicated, c.reordered
            );
        }
    }
    Ok(())
}
