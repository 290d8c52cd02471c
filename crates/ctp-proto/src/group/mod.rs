//! Group connections (paper 002): one sender, several member connections, and a delivery
//! rule ([`Mode`]) that says when a message is *done* for the group.
//!
//! A group is a set of ordinary connections — each with its own handshake, secure
//! channel, path, congestion and flow control — plus this sans-IO object, which owns the
//! group's message sequence. [`Group::submit`] decides which members a message goes to and
//! queues a copy for each ([`Group::next_copy`]); the caller puts each copy on its member's
//! connection as an ordinary message and reports the id the connection gave it
//! ([`Group::placed`]). Each member retransmits its own copy (the paper: "each copy of the
//! packet is handled by the sender as a separate, different packet for timeout and
//! retransmission"); the group reads each member's done barrier
//! ([`crate::Connection::messages_done_below`]) through [`Group::progress`] and declares a
//! message done when the mode holds — a policy on the core's done barrier, not a second
//! reliability layer. Nothing group-specific goes on the wire: a member sees an ordinary
//! connection.
//!
//! Members join and leave while messages flow. A member whose copies make no progress
//! for [`GroupConfig::fail_after`] (or whose connection closed) is failed with a reason;
//! its copies of messages not yet done move to members that do not hold them when the
//! mode allows, and the group fails, with a reason naming the members, when a message can
//! no longer get the acknowledgements its mode needs. Modes other than `All` leave a
//! member that falls behind (more than [`GroupConfig::member_backlog`] bytes waiting to
//! be queued on it) out of new messages until it catches up.

mod load;
mod mode;

pub use load::{LoadMetric, MemberLoad, ResponseTime};
pub use mode::{Mode, ModeError};

use crate::Instant;
use bytes::Bytes;
use core::time::Duration;
use std::collections::VecDeque;

/// Bytes `Balanced` lets any member hold unacknowledged before its rate is known (and at
/// least ever after): what a connection's start needs to show its rate.
pub const BALANCED_MIN_AHEAD: usize = 64 * 1024;

/// A group's limits.
#[derive(Clone, Copy, Debug)]
pub struct GroupConfig {
    /// A member with copies outstanding and no progress for this long is failed.
    pub fail_after: Duration,
    /// Bytes of messages not yet done for the group that may be held (the group's send
    /// buffer): [`Group::submit`] refuses more with [`GroupError::Blocked`].
    pub buffer: usize,
    /// Bytes of copies waiting to be queued on one member beyond which modes other than
    /// `All` give it no new messages.
    pub member_backlog: usize,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            fail_after: Duration::from_secs(10),
            buffer: 16 << 20,
            member_backlog: 4 << 20,
        }
    }
}

/// Where a member stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberState {
    /// Takes messages.
    Active,
    /// Failed, and why.
    Failed(String),
    /// Removed by the application.
    Removed,
}

/// Why the group did not take a message or a membership change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupError {
    /// The group's buffer is full, or too few members can take a message now: try again
    /// after [`Group::progress`].
    Blocked,
    /// The mode can no longer hold: why.
    Failed(String),
    /// No member has this key, or (adding) one has it already.
    Member(String),
}

impl core::fmt::Display for GroupError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            GroupError::Blocked => f.write_str("the group's buffer is full"),
            GroupError::Failed(why) => write!(f, "the group failed: {why}"),
            GroupError::Member(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for GroupError {}

/// What happened to the group, for the application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupEvent<K> {
    /// A member was failed.
    MemberFailed {
        /// The member.
        member: K,
        /// Why.
        reason: String,
    },
    /// The mode can no longer hold; the group takes no more messages.
    Failed {
        /// Why, naming the members.
        reason: String,
    },
}

/// A member connection's figures, as [`Group::progress`] takes them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemberProgress {
    /// [`crate::Connection::messages_done_below`].
    pub done_below: u64,
    /// Packets the connection sent.
    pub packets_sent: u64,
    /// Packets it declared lost.
    pub packets_lost: u64,
}

/// One member, for reports.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberReport<K> {
    /// The member.
    pub key: K,
    /// Where it stands.
    pub state: MemberState,
    /// Copies given to it.
    pub copies: u64,
    /// Copies it acknowledged.
    pub copies_done: u64,
    /// Bytes of those.
    pub bytes_done: u64,
    /// Its load figures.
    pub load: MemberLoad,
}

/// A copy queued on a member's connection.
#[derive(Debug)]
struct Placed {
    msg: u64,
    member_msg: u64,
    at: Instant,
    len: usize,
}

#[derive(Debug)]
struct Member<K> {
    key: K,
    state: MemberState,
    /// Copies assigned and not yet taken by the connection, oldest first.
    waiting: VecDeque<GroupCopy>,
    waiting_bytes: usize,
    /// Copies on the connection, not acknowledged, in the connection's order.
    /// Per lane ([`Group::submit_on`]): the lane's acknowledgements come separately.
    outstanding: Vec<VecDeque<Placed>>,
    outstanding_bytes: usize,
    /// The smallest response time seen: the member's round trip with an empty queue.
    min_response: Option<Duration>,
    /// Smoothed bytes per second the member acknowledges (its delivery rate), and where
    /// its current sample began.
    rate: f64,
    rate_mark: (Instant, u64),
    /// Since when the member's copies made no progress.
    last_progress: Instant,
    response: Option<Duration>,
    loss: f64,
    seen_sent: u64,
    seen_lost: u64,
    copies: u64,
    copies_done: u64,
    bytes_done: u64,
}

impl<K> Member<K> {
    fn is_active(&self) -> bool {
        self.state == MemberState::Active
    }

    fn busy(&self) -> bool {
        !self.waiting.is_empty() || self.outstanding.iter().any(|q| !q.is_empty())
    }

    /// Whether `Balanced` may give the member another message: it holds less than twice
    /// what it acknowledges in a round trip (its bandwidth-delay product, as BBR sizes its
    /// window), and at least [`BALANCED_MIN_AHEAD`]. A message is placed when a member has
    /// room for it, so a faster member, which frees room sooner, takes more — placement
    /// follows each member's measured rate instead of dealing a burst round-robin before
    /// anything was measured.
    fn has_room(&self) -> bool {
        let rtt = self.min_response.map_or(0.0, |r| r.as_secs_f64());
        let cap = (2.0 * self.rate * rtt).max(BALANCED_MIN_AHEAD as f64);
        ((self.waiting_bytes + self.outstanding_bytes) as f64) < cap
    }

    /// Takes a delivery-rate sample once a round trip (at least a millisecond) has passed
    /// since the last: a rising rate is taken at once, a falling one smoothed.
    fn sample_rate(&mut self, now: Instant) {
        let (at, bytes) = self.rate_mark;
        let since = now.saturating_since(at);
        let round = self
            .min_response
            .unwrap_or(Duration::ZERO)
            .max(Duration::from_millis(1));
        if since < round {
            return;
        }
        let sample = (self.bytes_done - bytes) as f64 / since.as_secs_f64();
        self.rate = if sample > self.rate {
            sample
        } else {
            0.875 * self.rate + 0.125 * sample
        };
        self.rate_mark = (now, self.bytes_done);
    }

    fn load(&self) -> MemberLoad {
        MemberLoad {
            response: self.response,
            loss: self.loss,
            outstanding: self.outstanding.iter().map(VecDeque::len).sum(),
            waiting: self.waiting.len(),
        }
    }
}

/// A copy of a message for one member: what [`Group::next_copy`] hands out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupCopy {
    /// The message's id in the group's sequence.
    pub msg: u64,
    /// Its lane ([`Group::submit_on`]): 0, the members' message stream, or the lane the
    /// application opened (a stream of each member's connection).
    pub lane: u16,
    /// Its bytes.
    pub data: Bytes,
}

/// A message not yet done for the group.
#[derive(Debug)]
struct Message {
    data: Bytes,
    lane: u16,
    len: usize,
    /// Members ever given a copy.
    on: Vec<usize>,
    /// Copies not lost to a failed or removed member.
    live: usize,
    acked: usize,
    needed: usize,
    done: bool,
}

/// The sans-IO state of one group connection; `K` names a member (a connection handle).
#[derive(Debug)]
pub struct Group<K> {
    mode: Mode,
    cfg: GroupConfig,
    metric: Box<dyn LoadMetric>,
    members: Vec<Member<K>>,
    /// Messages from `first_id` on (the done ones at the front are let go).
    msgs: VecDeque<Message>,
    first_id: u64,
    /// Bytes of messages not done.
    buffered: usize,
    /// Where `Spread` starts its next message (and `Balanced` breaks ties).
    turn: usize,
    events: VecDeque<GroupEvent<K>>,
    failed: Option<String>,
}

impl<K: Copy + PartialEq + core::fmt::Debug> Group<K> {
    /// A group without members yet, `Balanced` ranking by [`ResponseTime`].
    pub fn new(mode: Mode, cfg: GroupConfig) -> Self {
        Self::with_metric(mode, cfg, Box::new(ResponseTime))
    }

    /// A group whose `Balanced` mode ranks members by `metric`.
    pub fn with_metric(mode: Mode, cfg: GroupConfig, metric: Box<dyn LoadMetric>) -> Self {
        Group {
            mode,
            cfg,
            metric,
            members: Vec::new(),
            msgs: VecDeque::new(),
            first_id: 0,
            buffered: 0,
            turn: 0,
            events: VecDeque::new(),
            failed: None,
        }
    }

    /// The delivery rule.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Takes a message: decides the members it goes to and queues a copy for each
    /// ([`Group::next_copy`]); returns its id in the group's sequence.
    pub fn submit(&mut self, now: Instant, data: Bytes) -> Result<u64, GroupError> {
        self.submit_on(now, 0, data)
    }

    /// Takes a message for lane `lane`: as [`Group::submit`], each copy marked with the
    /// lane, so that the caller puts it on that lane's stream of the member's connection
    /// (lane 0 is the members' message stream). Lanes share the group's sequence, modes
    /// and buffer; each lane's copies are acknowledged by the lane's own done barrier
    /// ([`Group::progress_lane`]), so a lane waiting for a retransmission holds no other
    /// back.
    pub fn submit_on(&mut self, now: Instant, lane: u16, data: Bytes) -> Result<u64, GroupError> {
        if let Some(why) = &self.failed {
            return Err(GroupError::Failed(why.clone()));
        }
        if self.buffered > 0 && self.buffered + data.len() > self.cfg.buffer {
            return Err(GroupError::Blocked);
        }
        let backlog = self.cfg.member_backlog;
        let skips = self.mode.may_skip();
        let balanced = matches!(self.mode, Mode::Balanced { .. });
        let active = self.members.iter().filter(|m| m.is_active()).count();
        let mut usable: Vec<usize> = (0..self.members.len())
            .filter(|&j| {
                let m = &self.members[j];
                m.is_active()
                    && !(skips && m.waiting_bytes > backlog)
                    && (!balanced || m.has_room())
            })
            .collect();
        let fan = self.mode.fan_out(usable.len());
        let needed = self.mode.needed(fan);
        if fan == 0 || needed > fan {
            if self.mode.needed(self.mode.fan_out(active)) <= active && active > 0 {
                // Enough members, some of them behind: wait for them.
                return Err(GroupError::Blocked);
            }
            let reason = format!(
                "{} needs {} acknowledgements and {} of the members can take a message ({})",
                self.mode,
                self.mode.needed(self.mode.fan_out(active)).max(1),
                active,
                self.member_states()
            );
            self.fail_group(reason.clone());
            return Err(GroupError::Failed(reason));
        }
        usable.sort_by(|&a, &b| self.rank(a).total_cmp(&self.rank(b)));
        usable.truncate(fan);
        let id = self.first_id + self.msgs.len() as u64;
        self.buffered += data.len();
        self.msgs.push_back(Message {
            len: data.len(),
            data,
            lane,
            on: Vec::with_capacity(fan),
            live: 0,
            acked: 0,
            needed,
            done: false,
        });
        for j in usable {
            self.give(now, id, j);
        }
        self.turn = self.turn.wrapping_add(1);
        Ok(id)
    }

    /// The next copy to queue on member `key`'s connection, oldest first: the group's
    /// message id, its lane and its bytes. Once the connection took it, report it with
    /// [`Group::placed`].
    pub fn next_copy(&self, key: K) -> Option<GroupCopy> {
        let m = &self.members[self.index(key).ok()?];
        m.waiting.front().cloned()
    }

    /// The copy [`Group::next_copy`] gave is on member `key`'s connection as its message
    /// `member_msg` — on lane 0 the id the connection gave the message; on another lane
    /// a position on the lane's stream that its done barrier passes once the copy is
    /// acknowledged (the offset of the copy's last byte).
    pub fn placed(&mut self, now: Instant, key: K, member_msg: u64) {
        let Ok(i) = self.index(key) else {
            return;
        };
        let m = &mut self.members[i];
        if let Some(c) = m.waiting.pop_front() {
            let len = c.data.len();
            m.waiting_bytes -= len;
            m.outstanding_bytes += len;
            let lane = usize::from(c.lane);
            if m.outstanding.len() <= lane {
                m.outstanding.resize_with(lane + 1, VecDeque::new);
            }
            m.outstanding[lane].push_back(Placed {
                msg: c.msg,
                member_msg,
                at: now,
                len,
            });
        }
    }

    /// Member `key`'s connection reports its done barrier and counters: its copies below
    /// `done_below` are acknowledged.
    pub fn progress(&mut self, now: Instant, key: K, p: MemberProgress) {
        let Ok(i) = self.index(key) else {
            return;
        };
        let m = &mut self.members[i];
        let sent = p.packets_sent.saturating_sub(m.seen_sent);
        if sent >= 64 {
            let lost = p.packets_lost.saturating_sub(m.seen_lost);
            m.loss = 0.875 * m.loss + 0.125 * (lost as f64 / sent as f64).min(1.0);
            m.seen_sent = p.packets_sent;
            m.seen_lost = p.packets_lost;
        }
        self.acknowledge(now, i, 0, p.done_below);
    }

    /// Member `key`'s connection reports the done barrier of lane `lane`'s stream (see
    /// [`Group::placed`]): its copies on the lane below `done_below` are acknowledged.
    pub fn progress_lane(&mut self, now: Instant, key: K, lane: u16, done_below: u64) {
        if let Ok(i) = self.index(key) {
            self.acknowledge(now, i, usize::from(lane), done_below);
        }
    }

    /// Member `i`'s copies on `lane` below `done_below` are acknowledged.
    fn acknowledge(&mut self, now: Instant, i: usize, lane: usize, done_below: u64) {
        let m = &mut self.members[i];
        let mut acked = Vec::new();
        while let Some(q) = m.outstanding.get_mut(lane) {
            if q.front().is_none_or(|c| c.member_msg >= done_below) {
                break;
            }
            let Some(c) = q.pop_front() else {
                break;
            };
            let sample = now.saturating_since(c.at);
            m.response = Some(match m.response {
                None => sample,
                Some(r) => (r * 7 + sample) / 8,
            });
            m.min_response = Some(m.min_response.map_or(sample, |r| r.min(sample)));
            m.copies_done += 1;
            m.bytes_done += c.len as u64;
            m.outstanding_bytes -= c.len;
            acked.push(c.msg);
        }
        m.sample_rate(now);
        if !acked.is_empty() || !m.busy() {
            m.last_progress = now;
        }
        for id in acked {
            if let Some(msg) = self.message_mut(id) {
                msg.acked += 1;
            }
            self.settle(now, id);
        }
    }

    /// When [`Group::on_timeout`] should next run (`None`: no member has copies out).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.members
            .iter()
            .filter(|m| m.is_active() && m.busy())
            .map(|m| m.last_progress + self.cfg.fail_after)
            .min()
    }

    /// Fails the members whose copies made no progress for [`GroupConfig::fail_after`].
    pub fn on_timeout(&mut self, now: Instant) {
        let after = self.cfg.fail_after;
        for i in 0..self.members.len() {
            let m = &self.members[i];
            if m.is_active() && m.busy() && m.last_progress + after <= now {
                let reason = format!(
                    "no acknowledgement for {:.1} s ({} copies waiting)",
                    after.as_secs_f64(),
                    m.load().outstanding + m.waiting.len()
                );
                self.fail(now, i, reason);
            }
        }
    }

    /// The next thing that happened to the group.
    pub fn poll_event(&mut self) -> Option<GroupEvent<K>> {
        self.events.pop_front()
    }

    /// Every message with a smaller id is done for the group.
    pub fn done_below(&self) -> u64 {
        self.first_id
    }

    /// The id the next message gets.
    pub fn next_id(&self) -> u64 {
        self.first_id + self.msgs.len() as u64
    }

    /// Whether message `id` is done for the group.
    pub fn is_done(&self, id: u64) -> bool {
        id < self.first_id
            || self
                .msgs
                .get((id - self.first_id) as usize)
                .is_some_and(|m| m.done)
    }

    /// Every active member acknowledged every copy it was given (the messages done for
    /// the group may still have been on their way to some members until now).
    pub fn is_settled(&self) -> bool {
        !self.members.iter().any(|m| m.is_active() && m.busy())
    }

    /// Why the group failed, once it did.
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// Bytes of messages not done for the group.
    pub fn buffered(&self) -> usize {
        self.buffered
    }

    /// The members still in the group (active or failed), in the order they joined.
    pub fn member_keys(&self) -> Vec<K> {
        self.members
            .iter()
            .filter(|m| m.state != MemberState::Removed)
            .map(|m| m.key)
            .collect()
    }

    /// Where member `key` stands (`None`: not a member, or removed).
    pub fn member_state(&self, key: K) -> Option<&MemberState> {
        Some(&self.members[self.index(key).ok()?].state)
    }

    /// Every member ever added, with its figures.
    pub fn members(&self) -> Vec<MemberReport<K>> {
        self.members
            .iter()
            .map(|m| MemberReport {
                key: m.key,
                state: m.state.clone(),
                copies: m.copies,
                copies_done: m.copies_done,
                bytes_done: m.bytes_done,
                load: m.load(),
            })
            .collect()
    }

    /// Adds a member; it takes the messages submitted from now on.
    pub fn add_member(&mut self, now: Instant, key: K) -> Result<(), GroupError> {
        if self
            .members
            .iter()
            .any(|m| m.key == key && m.state != MemberState::Removed)
        {
            return Err(GroupError::Member(format!("{key:?} is a member already")));
        }
        self.members.push(Member {
            key,
            state: MemberState::Active,
            waiting: VecDeque::new(),
            waiting_bytes: 0,
            outstanding: Vec::new(),
            outstanding_bytes: 0,
            min_response: None,
            rate: 0.0,
            rate_mark: (now, 0),
            last_progress: now,
            response: None,
            loss: 0.0,
            seen_sent: 0,
            seen_lost: 0,
            copies: 0,
            copies_done: 0,
            bytes_done: 0,
        });
        Ok(())
    }

    /// Removes a member: its copies no longer count (under `All` a message then needs the
    /// others it went to), and copies it held move to other members where the mode needs
    /// them.
    pub fn remove_member(&mut self, now: Instant, key: K) -> Result<(), GroupError> {
        let i = self.index(key)?;
        self.members[i].state = MemberState::Removed;
        self.lose_copies(now, i, true);
        Ok(())
    }

    /// Fails a member (its connection closed, or the application gave up on it).
    pub fn fail_member(&mut self, now: Instant, key: K, reason: &str) -> Result<(), GroupError> {
        let i = self.index(key)?;
        if self.members[i].is_active() {
            self.fail(now, i, reason.to_string());
        }
        Ok(())
    }

    fn index(&self, key: K) -> Result<usize, GroupError> {
        self.members
            .iter()
            .position(|m| m.key == key && m.state != MemberState::Removed)
            .ok_or_else(|| GroupError::Member(format!("{key:?} is not a member")))
    }

    /// Fails member `i`; under `All`, which needs every member, the group with it.
    fn fail(&mut self, now: Instant, i: usize, reason: String) {
        let m = &mut self.members[i];
        m.state = MemberState::Failed(reason.clone());
        let key = m.key;
        self.events.push_back(GroupEvent::MemberFailed {
            member: key,
            reason: reason.clone(),
        });
        if self.mode == Mode::All {
            self.fail_group(format!(
                "all needs every destination, and {key:?} failed: {reason} (remove a \
                 destination to go on without it)"
            ));
        }
        self.lose_copies(now, i, false);
    }

    /// Takes member `i`'s copies of messages not done out of their counts, and finds
    /// other members for them where the mode needs more.
    fn lose_copies(&mut self, now: Instant, i: usize, removed: bool) {
        let m = &mut self.members[i];
        let lost: Vec<u64> = m
            .waiting
            .drain(..)
            .map(|c| c.msg)
            .chain(
                m.outstanding
                    .iter_mut()
                    .flat_map(|q| q.drain(..))
                    .map(|p| p.msg),
            )
            .collect();
        m.waiting_bytes = 0;
        m.outstanding_bytes = 0;
        for id in lost {
            let all = self.mode == Mode::All;
            let Some(msg) = self.message_mut(id) else {
                continue;
            };
            msg.live -= 1;
            if removed && all {
                msg.needed -= 1;
            }
            self.settle(now, id);
        }
    }

    /// Marks message `id` done when it has its acknowledgements, and when it can no
    /// longer get them from the copies it has, gives it to members that do not hold it;
    /// fails the group when there are none.
    fn settle(&mut self, now: Instant, id: u64) {
        let Some(msg) = self.message_mut(id) else {
            return;
        };
        if msg.acked >= msg.needed {
            msg.done = true;
            msg.data = Bytes::new();
            self.buffered -= msg.len;
            self.let_go_done();
            return;
        }
        while self.message(id).is_some_and(|m| m.live < m.needed) {
            let on = &self.message(id).map(|m| m.on.clone()).unwrap_or_default();
            let spare = (0..self.members.len())
                .filter(|&j| self.members[j].is_active() && !on.contains(&j))
                .min_by(|&a, &b| self.rank(a).total_cmp(&self.rank(b)));
            match spare {
                Some(j) => self.give(now, id, j),
                None => {
                    let m = self.message(id).map_or((0, 0), |m| (m.needed, m.acked));
                    let reason = format!(
                        "{} cannot hold: message {id} has {} of the {} acknowledgements it \
                         needs and no member is left to take it ({})",
                        self.mode,
                        m.1,
                        m.0,
                        self.member_states()
                    );
                    self.fail_group(reason);
                    return;
                }
            }
        }
    }

    fn fail_group(&mut self, reason: String) {
        if self.failed.is_none() {
            self.failed = Some(reason.clone());
            self.events.push_back(GroupEvent::Failed { reason });
        }
    }

    /// Every member and where it stands, for a reason.
    fn member_states(&self) -> String {
        let state = |m: &Member<K>| match &m.state {
            MemberState::Active => format!("{:?} active", m.key),
            MemberState::Failed(why) => format!("{:?} failed: {why}", m.key),
            MemberState::Removed => format!("{:?} removed", m.key),
        };
        self.members
            .iter()
            .map(state)
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Member `j`'s place for a new copy: its load under `Balanced`, else its distance
    /// from the turn.
    fn rank(&self, j: usize) -> f64 {
        let n = self.members.len().max(1);
        let distance = ((j + n - self.turn % n) % n) as f64;
        match self.mode {
            Mode::Balanced { .. } => {
                let load = self.metric.load(&self.members[j].load());
                // Ties (untried members) in turn order.
                load + distance * 1e-9
            }
            _ => distance,
        }
    }

    fn message(&self, id: u64) -> Option<&Message> {
        let i = usize::try_from(id.checked_sub(self.first_id)?).ok()?;
        self.msgs.get(i).filter(|m| !m.done)
    }

    fn message_mut(&mut self, id: u64) -> Option<&mut Message> {
        let i = usize::try_from(id.checked_sub(self.first_id)?).ok()?;
        self.msgs.get_mut(i).filter(|m| !m.done)
    }

    /// Lets go of the done messages at the front.
    fn let_go_done(&mut self) {
        while self.msgs.front().is_some_and(|m| m.done) {
            self.msgs.pop_front();
            self.first_id += 1;
        }
    }

    /// Queues a copy of message `id` for member `j`.
    fn give(&mut self, now: Instant, id: u64, j: usize) {
        let Some(msg) = self.message_mut(id) else {
            return;
        };
        msg.on.push(j);
        msg.live += 1;
        let copy = GroupCopy {
            msg: id,
            lane: msg.lane,
            data: msg.data.clone(),
        };
        let m = &mut self.members[j];
        if !m.busy() {
            m.last_progress = now;
        }
        m.waiting_bytes += copy.data.len();
        m.waiting.push_back(copy);
        m.copies += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Members that acknowledge up to `rate[i]` copies per millisecond, oldest first (a
    /// rate of 0: dead), driving a group as a runtime would.
    struct Model {
        g: Group<usize>,
        rate: Vec<usize>,
        /// Per member: the connection's next message id, and the ids acknowledged below.
        next: Vec<u64>,
        done_below: Vec<u64>,
        now: Instant,
    }

    impl Model {
        fn new(mode: Mode, rate: &[usize], cfg: GroupConfig) -> Self {
            let now = Instant::from_micros(1_000_000);
            let mut g = Group::new(mode, cfg);
            for i in 0..rate.len() {
                g.add_member(now, i).unwrap();
            }
            Model {
                g,
                rate: rate.to_vec(),
                next: vec![0; rate.len()],
                done_below: vec![0; rate.len()],
                now,
            }
        }

        /// One millisecond: each member acknowledges what its rate allows of the copies
        /// queued before, the group hears of it, every waiting copy is queued, and the
        /// group's timer runs.
        fn tick(&mut self) {
            self.now += Duration::from_millis(1);
            for i in 0..self.rate.len() {
                self.done_below[i] = (self.done_below[i] + self.rate[i] as u64).min(self.next[i]);
                let p = MemberProgress {
                    done_below: self.done_below[i],
                    ..MemberProgress::default()
                };
                self.g.progress(self.now, i, p);
                while self.g.next_copy(i).is_some() {
                    self.g.placed(self.now, i, self.next[i]);
                    self.next[i] += 1;
                }
            }
            if self.g.poll_timeout().is_some_and(|t| t <= self.now) {
                self.g.on_timeout(self.now);
            }
        }

        /// Submits `n` messages of 1000 bytes, one a tick while the group takes them,
        /// within `ticks`; the messages done for the group at the end.
        fn run(&mut self, n: u64, ticks: u32) -> u64 {
            let mut sent = 0;
            for _ in 0..ticks {
                if sent < n {
                    match self.g.submit(self.now, Bytes::from(vec![7; 1000])) {
                        Ok(_) => sent += 1,
                        Err(GroupError::Blocked) | Err(GroupError::Failed(_)) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
                self.tick();
            }
            self.g.done_below()
        }

        fn events(&mut self) -> Vec<GroupEvent<usize>> {
            std::iter::from_fn(|| self.g.poll_event()).collect()
        }
    }

    #[test]
    fn each_mode_waits_for_the_acknowledgements_it_names() {
        let now = Instant::from_micros(1);
        for (mode, done_after) in [
            (Mode::Any, 1),
            (Mode::AtLeast(2), 2),
            (Mode::All, 3),
            (Mode::Spread { k: 3, p: 2 }, 2),
        ] {
            let mut g = Group::new(mode, GroupConfig::default());
            for i in 0..3 {
                g.add_member(now, i).unwrap();
            }
            let id = g.submit(now, Bytes::from_static(b"hello")).unwrap();
            for i in 0..3 {
                assert_eq!(
                    g.next_copy(i).map(|c| c.msg),
                    Some(id),
                    "{mode}: a copy each"
                );
                g.placed(now, i, 40 + i as u64);
            }
            assert!(!g.is_done(id));
            for i in 0..3 {
                let p = MemberProgress {
                    done_below: 41 + i as u64,
                    ..Default::default()
                };
                g.progress(now, i, p);
                let acks = i + 1;
                assert_eq!(g.is_done(id), acks >= done_after, "{mode} after {acks}");
                assert_eq!(g.buffered() == 0, acks >= done_after);
            }
        }
    }

    #[test]
    fn a_slow_member_holds_all_back_but_not_any_or_two_of_three() {
        // Members 0 and 1 acknowledge 4 copies a millisecond, member 2 one every fourth;
        // one message is offered a millisecond for 3 s.
        let cfg = GroupConfig {
            buffer: 200_000,
            member_backlog: 50_000,
            ..GroupConfig::default()
        };
        let slow = |mode| {
            let mut m = Model::new(mode, &[4, 4, 1], cfg);
            // Member 2 takes one copy every fourth millisecond.
            let mut sent = 0;
            for t in 0..3000u32 {
                m.rate[2] = usize::from(t % 4 == 0);
                if sent < 3000 && m.g.submit(m.now, Bytes::from(vec![1; 1000])).is_ok() {
                    sent += 1;
                }
                m.tick();
            }
            (m.g.done_below(), m.events())
        };
        let (all, ev_all) = slow(Mode::All);
        let (any, ev_any) = slow(Mode::Any);
        let (two, ev_two) = slow(Mode::AtLeast(2));
        assert!(ev_all.is_empty() && ev_any.is_empty() && ev_two.is_empty());
        // All moves at the slow member's pace (3000 ms / 4), the others at the offered one.
        assert!((700..=800).contains(&all), "all: {all}");
        assert!(any >= 2990, "any: {any}");
        assert!(two >= 2990, "at-least=2: {two}");
    }

    #[test]
    fn a_dead_member_fails_all_with_a_reason_and_leaves_two_of_three_running() {
        let cfg = GroupConfig {
            fail_after: Duration::from_millis(500),
            ..GroupConfig::default()
        };
        let mut all = Model::new(Mode::All, &[4, 4, 4], cfg);
        all.run(100, 100);
        all.rate[2] = 0; // dies
        let done_then = all.run(1000, 2000);
        let ev = all.events();
        assert!(
            matches!(&ev[0], GroupEvent::MemberFailed { member: 2, reason } if reason.contains("no acknowledgement for 0.5 s")),
            "{ev:?}"
        );
        let GroupEvent::Failed { reason } = &ev[1] else {
            panic!("{ev:?}");
        };
        assert!(
            reason.contains("all needs every destination, and 2 failed: no acknowledgement"),
            "{reason}"
        );
        assert!(matches!(
            all.g.submit(all.now, Bytes::new()),
            Err(GroupError::Failed(_))
        ));
        assert!(done_then < 1100);

        let mut two = Model::new(Mode::AtLeast(2), &[4, 4, 4], cfg);
        two.run(100, 100);
        two.rate[2] = 0;
        assert_eq!(
            two.run(1000, 2000),
            1100,
            "two of three still acknowledge everything"
        );
        let ev = two.events();
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert!(matches!(ev[0], GroupEvent::MemberFailed { member: 2, .. }));
        assert_eq!(two.g.failure(), None);
    }

    #[test]
    fn balanced_sends_more_to_the_faster_member() {
        let cfg = GroupConfig::default();
        let mut m = Model::new(Mode::Balanced { k: 1, p: 1 }, &[8, 2, 1], cfg);
        // Offered 6 messages a millisecond: a third each would be more than the slow two
        // take, all of them less than the three together.
        let mut sent = 0u64;
        for _ in 0..2000 {
            for _ in 0..6 {
                if m.g.submit(m.now, Bytes::from(vec![0; 100])).is_ok() {
                    sent += 1;
                }
            }
            m.tick();
        }
        for _ in 0..200 {
            m.tick();
        }
        assert_eq!(m.g.done_below(), sent);
        let shares: Vec<u64> = m.g.members().iter().map(|r| r.copies_done).collect();
        assert_eq!(shares.iter().sum::<u64>(), sent, "one copy each");
        // Each slow member got about what it can take in the 2 s, the fast one the rest.
        assert!(
            shares[0] > shares[1] && shares[1] > shares[2],
            "shares {shares:?} of {sent}"
        );
        assert!(shares[1] <= 4100 && shares[2] <= 2100, "shares {shares:?}");
    }

    #[test]
    fn balanced_places_a_burst_as_members_free_room_not_round_robin() {
        // Everything offered at once, before any member was measured: 20 KB messages, far
        // more than the members' minimum room, so most are placed as acknowledgements
        // free room — at each member's pace.
        let mut m = Model::new(
            Mode::Balanced { k: 1, p: 1 },
            &[8, 2, 1],
            GroupConfig::default(),
        );
        let n = 1500u64;
        let mut sent = 0u64;
        for _ in 0..3000 {
            while sent < n && m.g.submit(m.now, Bytes::from(vec![0; 20_000])).is_ok() {
                sent += 1;
            }
            m.tick();
        }
        assert_eq!((sent, m.g.done_below()), (n, n));
        let shares: Vec<u64> = m.g.members().iter().map(|r| r.copies_done).collect();
        // Rates 8 : 2 : 1 — the fast member takes more than the other two together.
        assert!(shares[0] > shares[1] + shares[2], "shares {shares:?}");
        assert!(shares[1] > shares[2], "shares {shares:?}");
    }

    #[test]
    fn each_lane_is_acknowledged_by_its_own_barrier() {
        let now = Instant::from_micros(1);
        let mut g = Group::new(Mode::All, GroupConfig::default());
        g.add_member(now, 0).unwrap();
        let a = g.submit(now, Bytes::from_static(b"message")).unwrap();
        let b = g.submit_on(now, 1, Bytes::from_static(b"record")).unwrap();
        let c = g.submit(now, Bytes::from_static(b"later")).unwrap();
        // The copies come with their lanes; lane 1's is placed at the offset of its last
        // byte on its stream, the messages at their ids.
        let lanes: Vec<(u64, u16)> = std::iter::from_fn(|| {
            let copy = g.next_copy(0)?;
            let at = if copy.lane == 0 { copy.msg } else { 5 };
            g.placed(now, 0, at);
            Some((copy.msg, copy.lane))
        })
        .collect();
        assert_eq!(lanes, [(a, 0), (b, 1), (c, 0)]);
        // The message stream acknowledges both its messages; lane 1's stream nothing.
        let p = MemberProgress {
            done_below: c + 1,
            ..MemberProgress::default()
        };
        g.progress(now, 0, p);
        assert!(
            g.is_done(a) && g.is_done(c),
            "lane 0 does not wait for lane 1"
        );
        assert!(!g.is_done(b) && g.done_below() == b);
        // Lane 1's barrier reaches the record's last byte (offset 5) only past it.
        g.progress_lane(now, 0, 1, 5);
        assert!(!g.is_done(b));
        g.progress_lane(now, 0, 1, 6);
        assert!(g.is_done(b) && g.done_below() == c + 1 && g.is_settled());
    }

    #[test]
    fn a_failed_members_share_moves_to_the_others() {
        let cfg = GroupConfig {
            fail_after: Duration::from_millis(100),
            ..GroupConfig::default()
        };
        let mut m = Model::new(Mode::Spread { k: 1, p: 1 }, &[4, 4, 0], cfg);
        let done = m.run(300, 600);
        assert_eq!(done, 300, "copies on the dead member went elsewhere");
        let r = m.g.members();
        assert!(matches!(r[2].state, MemberState::Failed(_)));
        assert_eq!(r[2].copies_done, 0);
        assert_eq!(r[0].copies_done + r[1].copies_done, 300);
    }

    #[test]
    fn members_join_and_leave_while_messages_flow() {
        let cfg = GroupConfig::default();
        let mut m = Model::new(Mode::All, &[4, 4], cfg);
        m.run(50, 50);
        // A third joins: it gets the messages from now on, not the earlier ones.
        m.g.add_member(m.now, 2).unwrap();
        m.rate.push(4);
        m.next.push(0);
        m.done_below.push(0);
        assert!(m.g.add_member(m.now, 2).is_err(), "a member twice");
        m.run(50, 60);
        assert_eq!(m.g.done_below(), 100);
        let r = m.g.members();
        assert_eq!((r[0].copies_done, r[2].copies_done), (100, 50));
        // Member 1 stops acknowledging and is removed: All goes on with the other two, and
        // nothing fails.
        m.rate[1] = 0;
        m.run(20, 20);
        assert_eq!(m.g.done_below(), 100, "all waits for the silent member");
        m.g.remove_member(m.now, 1).unwrap();
        m.run(50, 60);
        assert_eq!(m.g.done_below(), 170);
        assert!(m.events().is_empty());
        assert_eq!(m.g.member_keys(), [0, 2]);
        assert!(m.g.remove_member(m.now, 1).is_err(), "removed already");
    }

    #[test]
    fn the_buffer_bounds_what_is_not_done() {
        let cfg = GroupConfig {
            buffer: 10_000,
            ..GroupConfig::default()
        };
        let mut m = Model::new(Mode::All, &[0, 0], cfg);
        for _ in 0..10 {
            m.g.submit(m.now, Bytes::from(vec![0; 1000])).unwrap();
        }
        assert_eq!(
            m.g.submit(m.now, Bytes::from(vec![0; 1000])),
            Err(GroupError::Blocked)
        );
        m.rate = vec![1, 1];
        m.tick(); // queued on the members' connections
        m.tick(); // the oldest acknowledged
        assert!(m.g.submit(m.now, Bytes::from(vec![0; 1000])).is_ok());
    }
}
