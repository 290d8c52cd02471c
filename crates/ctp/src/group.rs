//! A group connection: one sender, several destinations, a delivery rule — the async face
//! of [`ctp_proto::group::Group`] over ordinary [`Connection`]s of one endpoint.

use crate::connection::{write_error, Op};
use crate::{ConnectError, Connection, ConnectionError, Endpoint, Profile};
use bytes::Bytes;
use ctp_proto::group::{
    self, GroupConfig, GroupCopy, GroupError, GroupEvent, MemberProgress, MemberReport,
    MemberState, Mode,
};
use ctp_proto::{StreamId, StreamKind, WriteError};
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// One connection to several destinations, with a delivery rule chosen at connect time
/// ([`Mode`]): each message goes to every destination or to `k` of them, and is *done* for
/// the group once as many as the mode names acknowledged it. Each destination is an
/// ordinary connection (its own handshake, secure channel, congestion and flow control);
/// the destinations see ordinary connections and read the messages with
/// [`Connection::recv_msg`]. Destinations may be added and removed while messages flow; one
/// whose copies make no progress for [`GroupConfig::fail_after`], or whose connection
/// closes, is failed with a reason, and the group goes on while its mode can still hold.
///
/// Messages go on each destination's message stream; [`Group::open_stream`] adds more
/// streams per destination (each a stream of every member connection, with a priority of
/// its own), written with [`Group::send_on`] under the same mode.
///
/// A task of the group's own keeps copies moving while the application is elsewhere: it
/// puts copies that did not fit on their connections as room opens, reads the members'
/// acknowledgements and fails the members that stop, whether or not anything awaits the
/// group.
pub struct Group {
    core: Arc<Mutex<Core>>,
    profile: Profile,
    /// The group's own task (see [`Core::run`]); aborted when the group is dropped.
    task: tokio::task::JoinHandle<()>,
}

/// What the application's calls and the group's task share.
struct Core {
    endpoint: Endpoint,
    state: group::Group<SocketAddr>,
    /// The members not removed or failed.
    members: Vec<Member>,
    /// The priority of each stream opened with [`Group::open_stream`] (lane 1 first).
    lanes: Vec<u8>,
    /// The group's timer (failing members that stopped); only the task polls it.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// When the timer is set for.
    armed: Option<ctp_proto::Instant>,
    /// The task, to wake when the application's call needs the timer earlier.
    task: Option<Waker>,
}

/// One destination's connection, and its streams for the group's lanes.
struct Member {
    addr: SocketAddr,
    conn: Connection,
    /// Per lane from 1: the connection's stream for it, once a copy went on it.
    streams: Vec<Option<StreamId>>,
}

/// A stream of every destination's connection, opened with [`Group::open_stream`] and
/// written with [`Group::send_on`]. Each destination reads it as an ordinary stream of its
/// connection ([`Connection::accept_stream`], a unidirectional stream, opened with its
/// first data); what the group sends on it arrives there in order, each write whole. A
/// stream's copies are done by the stream's own acknowledgements, so one stream waiting
/// for a retransmission holds no other back — at the destinations or in the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupStream {
    lane: u16,
}

/// Streams a group may open (the lanes of [`group::Group::submit_on`] after the first).
pub const MAX_GROUP_STREAMS: usize = 1024;

/// Why a group could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum GroupConnectError {
    /// The mode does not fit the destinations.
    #[error("{0}")]
    Mode(#[from] group::ModeError),
    /// A destination was named twice.
    #[error("{0}")]
    Member(String),
    /// A destination could not be reached and the mode needs it.
    #[error("cannot reach {addr}: {error}")]
    Connect {
        /// The destination.
        addr: SocketAddr,
        /// Why.
        error: ConnectError,
    },
}

impl Group {
    /// Connects to every address in `addrs` with `profile`, at once, and makes them one
    /// group with delivery rule `mode`. Destinations that cannot be reached are members
    /// failed with the reason; the group is refused when the mode cannot hold without
    /// them.
    pub async fn connect(
        endpoint: &Endpoint,
        addrs: &[SocketAddr],
        profile: &Profile,
        mode: Mode,
        cfg: GroupConfig,
    ) -> Result<Group, GroupConnectError> {
        mode.check(addrs.len())?;
        let attempts: Vec<_> = addrs
            .iter()
            .map(|&a| endpoint.connect(a, profile))
            .collect();
        let mut g = Core {
            endpoint: endpoint.clone(),
            state: group::Group::new(mode, cfg),
            members: Vec::new(),
            lanes: Vec::new(),
            timer: None,
            armed: None,
            task: None,
        };
        let mut unreachable = None;
        for (attempt, &addr) in attempts.into_iter().zip(addrs) {
            let joined = attempt.await;
            let now = endpoint.now();
            if let Err(e) = g.state.add_member(now, addr) {
                return Err(GroupConnectError::Member(e.to_string()));
            }
            match joined {
                Ok(conn) => g.members.push(Member::new(addr, conn)),
                Err(error) => {
                    let _ = g
                        .state
                        .fail_member(now, addr, &format!("cannot connect: {error}"));
                    unreachable.get_or_insert(GroupConnectError::Connect { addr, error });
                }
            }
        }
        let reachable = g.members.len();
        match unreachable {
            // `All` needs every destination it was given; the others as many as they name.
            Some(e) if mode == Mode::All || mode.check(reachable).is_err() => Err(e),
            _ => {
                let core = Arc::new(Mutex::new(g));
                let task = tokio::spawn(Core::run(core.clone()));
                Ok(Group {
                    core,
                    profile: profile.clone(),
                    task,
                })
            }
        }
    }

    /// The shared state, locked (a panic elsewhere while it was held leaves it usable:
    /// every step keeps it consistent).
    fn core(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The delivery rule.
    pub fn mode(&self) -> Mode {
        self.core().state.mode()
    }

    /// Sends one message to the members the mode chooses, waiting for room in the group's
    /// buffer; returns its id in the group's sequence. Fails once the mode can no longer
    /// hold, with the reason.
    pub async fn send(&mut self, msg: Bytes) -> Result<u64, GroupError> {
        self.submit(0, msg).await
    }

    /// Opens one more stream to every destination, with `priority` (higher is served first
    /// on each connection; the message stream of [`Group::send`] has priority 0). Each
    /// destination sees a new unidirectional stream of its connection with the group's
    /// first write on it. Destinations that join later get it too.
    pub fn open_stream(&mut self, priority: u8) -> Result<GroupStream, GroupError> {
        let mut core = self.core();
        if core.lanes.len() >= MAX_GROUP_STREAMS {
            return Err(GroupError::Member(format!(
                "a group opens at most {MAX_GROUP_STREAMS} streams"
            )));
        }
        core.lanes.push(priority);
        Ok(GroupStream {
            lane: core.lanes.len() as u16,
        })
    }

    /// Sends `data` on `stream` to the members the mode chooses, as [`Group::send`] sends
    /// a message: each destination chosen gets it whole, in order after what the group sent
    /// on the stream before (under `spread` and `balanced` each write goes to only some
    /// destinations, so each write should stand on its own, as a record). Returns its id in
    /// the group's sequence.
    pub async fn send_on(&mut self, stream: &GroupStream, data: Bytes) -> Result<u64, GroupError> {
        self.submit(stream.lane, data).await
    }

    /// Submits `msg` on `lane`, waiting for room in the group's buffer.
    async fn submit(&mut self, lane: u16, msg: Bytes) -> Result<u64, GroupError> {
        poll_fn(|cx| {
            let mut core = self.core();
            let now = core.endpoint.now();
            let r = match core.state.submit_on(now, lane, msg.clone()) {
                Ok(id) => Poll::Ready(Ok(id)),
                Err(GroupError::Blocked) => {
                    core.pump(cx);
                    // Progress may have made room.
                    let now = core.endpoint.now();
                    match core.state.submit_on(now, lane, msg.clone()) {
                        Ok(id) => Poll::Ready(Ok(id)),
                        Err(GroupError::Blocked) => Poll::Pending,
                        Err(e) => Poll::Ready(Err(e)),
                    }
                }
                Err(e) => Poll::Ready(Err(e)),
            };
            if r.is_ready() {
                core.pump(cx);
            }
            core.nudge();
            r
        })
        .await
    }

    /// Waits until every message sent is done for the group (or the group fails).
    pub async fn flush(&mut self) -> Result<(), GroupError> {
        poll_fn(|cx| {
            let mut core = self.core();
            core.pump(cx);
            core.nudge();
            if let Some(why) = core.state.failure() {
                return Poll::Ready(Err(GroupError::Failed(why.to_string())));
            }
            if core.state.done_below() == core.state.next_id() {
                Poll::Ready(Ok(()))
            } else {
                Poll::Pending
            }
        })
        .await
    }

    /// Waits until every destination still in the group acknowledged every copy it was
    /// given, or was failed (a message done for the group under `Any` or `AtLeast` may
    /// still be on its way to the others until then).
    pub async fn settled(&mut self) {
        poll_fn(|cx| {
            let mut core = self.core();
            core.pump(cx);
            core.nudge();
            if core.state.is_settled() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }

    /// Adds a destination while messages flow: it takes the messages sent from now on.
    pub async fn add(&mut self, addr: SocketAddr) -> Result<(), GroupConnectError> {
        let endpoint = {
            let core = self.core();
            if core.state.member_keys().contains(&addr) {
                return Err(GroupConnectError::Member(format!(
                    "{addr} is in the group already"
                )));
            }
            core.endpoint.clone()
        };
        let c = endpoint
            .connect(addr, &self.profile)
            .await
            .map_err(|error| GroupConnectError::Connect { addr, error })?;
        let mut core = self.core();
        core.state
            .add_member(endpoint.now(), addr)
            .map_err(|e| GroupConnectError::Member(e.to_string()))?;
        core.members.push(Member::new(addr, c));
        core.nudge();
        Ok(())
    }

    /// Removes destination `addr`: its connection is closed (what it was sent is still
    /// delivered) and its copies no longer count.
    pub fn remove(&mut self, addr: SocketAddr) -> Result<(), GroupError> {
        let mut core = self.core();
        let now = core.endpoint.now();
        core.state.remove_member(now, addr)?;
        core.members.retain(|m| m.addr != addr);
        Ok(())
    }

    /// What happened to the group since the last call: members failed (with the reason)
    /// and the group's own failure.
    pub fn events(&mut self) -> Vec<GroupEvent<SocketAddr>> {
        let mut core = self.core();
        std::iter::from_fn(|| core.state.poll_event()).collect()
    }

    /// Every destination ever in the group with its figures (copies given, acknowledged,
    /// load).
    pub fn members(&self) -> Vec<MemberReport<SocketAddr>> {
        self.core().state.members()
    }

    /// Why the group failed, once it did.
    pub fn failure(&self) -> Option<String> {
        self.core().state.failure().map(str::to_string)
    }

    /// Waits for every message to be done for the group and every destination to have
    /// its copies (or be failed), then ends the group's streams and closes every member
    /// connection gracefully.
    pub async fn close(mut self) -> Result<(), GroupError> {
        let flushed = self.flush().await;
        self.settled().await;
        self.task.abort();
        let members = std::mem::take(&mut self.core().members);
        for m in &members {
            for &id in m.streams.iter().flatten() {
                let _ = poll_fn(|cx| m.conn.poll_send(cx, |pc, now| pc.finish_on(now, id))).await;
            }
            let _ = m.conn.close().await;
        }
        flushed
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Core {
    /// The group's own task: pumps whenever a member connection has news or the timer
    /// fires, until the group is dropped or closed (which abort it).
    async fn run(core: Arc<Mutex<Core>>) {
        poll_fn(|cx| {
            let mut c = core.lock().unwrap_or_else(|e| e.into_inner());
            c.task = Some(cx.waker().clone());
            c.pump(cx);
            c.arm_timer(cx);
            Poll::<()>::Pending
        })
        .await
    }

    /// Wakes the task when the group's timer is due sooner than it is set for (a member
    /// that took a copy while the timer was idle, a member added), so that it re-arms.
    fn nudge(&self) {
        let due = self.state.poll_timeout();
        let sooner = match (due, self.armed) {
            (Some(d), Some(a)) => d < a,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if sooner {
            if let Some(t) = &self.task {
                t.wake_by_ref();
            }
        }
    }

    /// Puts waiting copies on their members' connections, takes each member's progress,
    /// fails the members that stopped, and registers `cx` to be woken by any of it.
    fn pump(&mut self, cx: &mut Context<'_>) {
        for i in 0..self.members.len() {
            if let Err(e) = self.pump_member(cx, i) {
                let why = format!("connection ended: {e}");
                let addr = self.members[i].addr;
                let _ = self.state.fail_member(self.endpoint.now(), addr, &why);
            }
        }
        let now = self.endpoint.now();
        if self.state.poll_timeout().is_some_and(|t| t <= now) {
            self.state.on_timeout(now);
        }
        let state = &self.state;
        self.members.retain(|m| {
            let failed = matches!(state.member_state(m.addr), Some(MemberState::Failed(_)));
            if failed {
                m.conn.abort("failed by its group");
            }
            !failed
        });
    }

    /// Puts member `i`'s waiting copies on its connection (each on its lane's stream) and
    /// takes its done barriers.
    fn pump_member(&mut self, cx: &mut Context<'_>, i: usize) -> Result<(), ConnectionError> {
        let addr = self.members[i].addr;
        while let Some(copy) = self.state.next_copy(addr) {
            let stream = match copy.lane {
                0 => None,
                lane => Some(self.members[i].stream(lane, &self.lanes)?),
            };
            let m = &self.members[i];
            match m
                .conn
                .poll_send(cx, |pc, now| place(pc, now, stream, &copy))
            {
                Poll::Ready(Ok(at)) => self.state.placed(self.endpoint.now(), addr, at),
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => break,
            }
        }
        let m = &self.members[i];
        let mut lanes = Vec::new();
        let p = m.conn.poll_group_progress(cx, &m.streams, &mut lanes)?;
        let now = self.endpoint.now();
        self.state.progress(now, addr, p);
        for (lane, done_below) in lanes {
            self.state.progress_lane(now, addr, lane, done_below);
        }
        Ok(())
    }

    /// Sets the timer for the group's next timeout and registers `cx` (the task's) with it.
    fn arm_timer(&mut self, cx: &mut Context<'_>) {
        self.armed = self.state.poll_timeout();
        let Some(at) = self.armed else {
            self.timer = None;
            return;
        };
        let Some(deadline) = self.endpoint.deadline(at) else {
            return;
        };
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        timer.as_mut().reset(deadline);
        if timer.as_mut().poll(cx).is_ready() {
            cx.waker().wake_by_ref();
        }
    }
}

/// Puts `copy` on connection `pc`: a message (lane 0), or all of it on `stream` (its lane's
/// stream) or nothing. Returns where the copy's done barrier must pass: the message's id,
/// or the offset of the copy's last byte on the stream.
fn place(
    pc: &mut ctp_proto::connection::Connection,
    now: ctp_proto::Instant,
    stream: Option<StreamId>,
    copy: &GroupCopy,
) -> Result<u64, WriteError> {
    let Some(id) = stream else {
        return pc.send_msg_after(now, copy.data.clone(), &[]);
    };
    let len = copy.data.len();
    // All or nothing: a copy is acknowledged by where its last byte lies.
    if pc.send_room() < len {
        return Err(WriteError::Blocked);
    }
    let start = pc.stream_written(id).unwrap_or(0);
    let n = pc.write_on(now, id, &copy.data)?;
    debug_assert_eq!(n, len, "a write with room for it is taken whole");
    Ok((start + n as u64).saturating_sub(1))
}

impl Member {
    fn new(addr: SocketAddr, conn: Connection) -> Member {
        Member {
            addr,
            conn,
            streams: Vec::new(),
        }
    }

    /// The member connection's stream for `lane` (from 1), opened (unidirectional, with
    /// the lane's priority) and watched for its done barrier the first time.
    fn stream(&mut self, lane: u16, priorities: &[u8]) -> Result<StreamId, ConnectionError> {
        let k = usize::from(lane) - 1;
        if self.streams.len() <= k {
            self.streams.resize(k + 1, None);
        }
        if let Some(id) = self.streams[k] {
            return Ok(id);
        }
        let id = self
            .conn
            .open_stream(StreamKind::Unidirectional, priorities[k])?
            .id();
        self.conn.watch_stream(id)?;
        self.streams[k] = Some(id);
        Ok(id)
    }
}

impl Connection {
    /// Has `stream`'s chunks counted for its done barrier (what a lane's copies are
    /// acknowledged by).
    fn watch_stream(&self, stream: StreamId) -> Result<(), ConnectionError> {
        let r = self.with(None, |c, _, closing| match c.watch_stream(stream) {
            Ok(()) => Op::Done(Ok(()), false),
            Err(e) => Op::Done(
                Err(write_error(e, c.state(), closing).unwrap_or(ConnectionError::Closing)),
                false,
            ),
        });
        match r {
            Poll::Ready(r) => r,
            Poll::Pending => unreachable!("watching never waits"),
        }
    }

    /// The connection's done barriers and counters for its group — the message stream's,
    /// and in `lanes` each lane stream's (lane, done below) — registering `cx` to be woken
    /// by the connection's next activity.
    pub(crate) fn poll_group_progress(
        &self,
        cx: &mut Context<'_>,
        streams: &[Option<StreamId>],
        lanes: &mut Vec<(u16, u64)>,
    ) -> Result<MemberProgress, ConnectionError> {
        match self.with(Some(cx), |c, _, _| {
            let s = c.stats();
            let p = MemberProgress {
                done_below: c.messages_done_below().unwrap_or(0),
                packets_sent: s.packets_sent,
                packets_lost: s.packets_lost,
            };
            for (k, id) in streams.iter().enumerate() {
                if let Some(&id) = id.as_ref() {
                    let done = c.stream_done_below(id).unwrap_or(0);
                    lanes.push((k as u16 + 1, done));
                }
            }
            Op::Watch(p)
        }) {
            Poll::Ready(r) => r,
            // A reading never waits.
            Poll::Pending => Ok(MemberProgress::default()),
        }
    }
}
