//! A group connection: one sender, several destinations, a delivery rule — the async face
//! of [`ctp_proto::group::Group`] over ordinary [`Connection`]s of one endpoint.

use crate::{ConnectError, Connection, ConnectionError, Endpoint, Profile};
use bytes::Bytes;
use ctp_proto::group::{
    self, GroupConfig, GroupError, GroupEvent, MemberProgress, MemberReport, MemberState, Mode,
};
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

/// One connection to several destinations, with a delivery rule chosen at connect time
/// ([`Mode`]): each message goes to every destination or to `k` of them, and is *done* for
/// the group once as many as the mode names acknowledged it. Each destination is an
/// ordinary connection (its own handshake, secure channel, congestion and flow control);
/// the destinations see ordinary connections and read the messages with
/// [`Connection::recv_msg`]. Destinations may be added and removed while messages flow; one
/// whose copies make no progress for [`GroupConfig::fail_after`], or whose connection
/// closes, is failed with a reason, and the group goes on while its mode can still hold.
pub struct Group {
    endpoint: Endpoint,
    profile: Profile,
    state: group::Group<SocketAddr>,
    /// The connections of the members not removed or failed.
    members: Vec<(SocketAddr, Connection)>,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

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
        let mut g = Group {
            endpoint: endpoint.clone(),
            profile: profile.clone(),
            state: group::Group::new(mode, cfg),
            members: Vec::new(),
            timer: None,
        };
        let mut unreachable = None;
        for (attempt, &addr) in attempts.into_iter().zip(addrs) {
            let joined = attempt.await;
            let now = endpoint.now();
            if let Err(e) = g.state.add_member(now, addr) {
                return Err(GroupConnectError::Member(e.to_string()));
            }
            match joined {
                Ok(c) => g.members.push((addr, c)),
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
            _ => Ok(g),
        }
    }

    /// The delivery rule.
    pub fn mode(&self) -> Mode {
        self.state.mode()
    }

    /// Sends one message to the members the mode chooses, waiting for room in the group's
    /// buffer; returns its id in the group's sequence. Fails once the mode can no longer
    /// hold, with the reason.
    pub async fn send(&mut self, msg: Bytes) -> Result<u64, GroupError> {
        poll_fn(|cx| {
            let now = self.endpoint.now();
            match self.state.submit(now, msg.clone()) {
                Ok(id) => {
                    self.pump(cx);
                    Poll::Ready(Ok(id))
                }
                Err(GroupError::Blocked) => {
                    self.pump(cx);
                    // Progress may have made room.
                    match self.state.submit(self.endpoint.now(), msg.clone()) {
                        Ok(id) => {
                            self.pump(cx);
                            Poll::Ready(Ok(id))
                        }
                        Err(GroupError::Blocked) => Poll::Pending,
                        Err(e) => Poll::Ready(Err(e)),
                    }
                }
                Err(e) => Poll::Ready(Err(e)),
            }
        })
        .await
    }

    /// Waits until every message sent is done for the group (or the group fails).
    pub async fn flush(&mut self) -> Result<(), GroupError> {
        poll_fn(|cx| {
            self.pump(cx);
            if let Some(why) = self.state.failure() {
                return Poll::Ready(Err(GroupError::Failed(why.to_string())));
            }
            if self.state.done_below() == self.state.next_id() {
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
            self.pump(cx);
            if self.state.is_settled() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }

    /// Adds a destination while messages flow: it takes the messages sent from now on.
    pub async fn add(&mut self, addr: SocketAddr) -> Result<(), GroupConnectError> {
        if self.state.member_keys().contains(&addr) {
            return Err(GroupConnectError::Member(format!(
                "{addr} is in the group already"
            )));
        }
        let c = self
            .endpoint
            .connect(addr, &self.profile)
            .await
            .map_err(|error| GroupConnectError::Connect { addr, error })?;
        self.state
            .add_member(self.endpoint.now(), addr)
            .map_err(|e| GroupConnectError::Member(e.to_string()))?;
        self.members.push((addr, c));
        Ok(())
    }

    /// Removes destination `addr`: its connection is closed (what it was sent is still
    /// delivered) and its copies no longer count.
    pub fn remove(&mut self, addr: SocketAddr) -> Result<(), GroupError> {
        self.state.remove_member(self.endpoint.now(), addr)?;
        self.members.retain(|(a, _)| *a != addr);
        Ok(())
    }

    /// What happened to the group since the last call: members failed (with the reason)
    /// and the group's own failure.
    pub fn events(&mut self) -> Vec<GroupEvent<SocketAddr>> {
        std::iter::from_fn(|| self.state.poll_event()).collect()
    }

    /// Every destination ever in the group with its figures (copies given, acknowledged,
    /// load).
    pub fn members(&self) -> Vec<MemberReport<SocketAddr>> {
        self.state.members()
    }

    /// Why the group failed, once it did.
    pub fn failure(&self) -> Option<&str> {
        self.state.failure()
    }

    /// Waits for every message to be done for the group and every destination to have
    /// its copies (or be failed), then closes every member connection gracefully.
    pub async fn close(mut self) -> Result<(), GroupError> {
        let flushed = self.flush().await;
        self.settled().await;
        for (_, c) in &self.members {
            let _ = c.close().await;
        }
        flushed
    }

    /// Puts waiting copies on their members' connections, takes each member's progress,
    /// fails the members that stopped, and registers `cx` to be woken by any of it.
    fn pump(&mut self, cx: &mut Context<'_>) {
        for i in 0..self.members.len() {
            let (addr, c) = (self.members[i].0, self.members[i].1.clone());
            if let Err(e) = self.pump_member(cx, addr, &c) {
                let why = format!("connection ended: {e}");
                let _ = self.state.fail_member(self.endpoint.now(), addr, &why);
            }
        }
        let now = self.endpoint.now();
        if self.state.poll_timeout().is_some_and(|t| t <= now) {
            self.state.on_timeout(now);
        }
        let state = &self.state;
        self.members.retain(|(addr, c)| {
            let failed = matches!(state.member_state(*addr), Some(MemberState::Failed(_)));
            if failed {
                c.abort("failed by its group");
            }
            !failed
        });
        self.arm_timer(cx);
    }

    fn pump_member(
        &mut self,
        cx: &mut Context<'_>,
        addr: SocketAddr,
        c: &Connection,
    ) -> Result<(), ConnectionError> {
        while let Some((_, data)) = self.state.next_copy(addr) {
            match c.poll_send(cx, |pc, now| pc.send_msg_after(now, data.clone(), &[])) {
                Poll::Ready(Ok(id)) => self.state.placed(self.endpoint.now(), addr, id),
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => break,
            }
        }
        let p = c.poll_group_progress(cx)?;
        self.state.progress(self.endpoint.now(), addr, p);
        Ok(())
    }

    fn arm_timer(&mut self, cx: &mut Context<'_>) {
        let Some(at) = self.state.poll_timeout() else {
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

impl Connection {
    /// The connection's done barrier and counters for its group, registering `cx` to be
    /// woken by the connection's next activity.
    pub(crate) fn poll_group_progress(
        &self,
        cx: &mut Context<'_>,
    ) -> Result<MemberProgress, ConnectionError> {
        match self.with(Some(cx), |c, _, _| {
            let s = c.stats();
            let p = MemberProgress {
                done_below: c.messages_done_below().unwrap_or(0),
                packets_sent: s.packets_sent,
                packets_lost: s.packets_lost,
            };
            crate::connection::Op::Watch(p)
        }) {
            Poll::Ready(r) => r,
            // A reading never waits.
            Poll::Pending => Ok(MemberProgress::default()),
        }
    }
}
