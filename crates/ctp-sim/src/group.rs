//! Group flows (paper 002): one sender's messages to several receivers under a delivery
//! [`Mode`], the group policy of [`ctp_proto::group`] driving ordinary member connections.
//!
//! A group is a set of flows of kind [`crate::app::FlowKind::Group`], its *members*: each
//! has a receiver of its own, behind a path of its own (the scenario's `path`), and an
//! ordinary connection to it. The sending side is one [`GroupApp`] holding the policy
//! object ([`Group`]): it submits the group's messages, puts each copy the policy places on
//! its member's connection, reads each member's done barrier, and closes the members once
//! the group is done (gracefully where the member holds every copy it was given, with an
//! abort and a reason where it is not needed any more) or failed (every member aborted with
//! the group's reason). In the simulator each member's connection starts from a sender
//! node of its own: the members share the group's policy and messages, not an interface.
//!
//! What is checked, at every receiver: every message delivered is intact (its id and a
//! content derived from it, [`crate::payload::message`]), none twice, and under `All` in
//! the group's order; for the group: every message the policy declared done was delivered
//! by as many receivers as the mode needs (a message done too early is a violation).

use crate::app::FlowApp;
use crate::payload;
use bytes::Bytes;
use core::time::Duration;
use ctp_proto::connection::Connection;
use ctp_proto::group::{Group, GroupConfig, GroupEvent, MemberProgress, MemberState, Mode};
use ctp_proto::Instant;
use serde::Serialize;

/// What a group does: its mode, how much it sends and when.
#[derive(Clone, Debug)]
pub struct GroupSpec {
    /// The delivery rule.
    pub mode: Mode,
    /// Bytes of messages the group sends, then the members close.
    pub bytes: u64,
    /// Bytes per message (at least 8: a message carries its id).
    pub message_size: usize,
    /// When the group starts (its members connect then).
    pub start: Duration,
    /// A member whose copies make no progress for this long is failed.
    pub fail_after: Duration,
}

/// One member of a group, as the run ends.
#[derive(Clone, Debug, Default, Serialize)]
pub struct GroupMemberResult {
    /// The member's flow.
    pub flow: usize,
    /// `active`, `removed`, or `failed: REASON`.
    pub state: String,
    /// Copies the policy gave the member.
    pub copies: u64,
    /// Copies its connection acknowledged.
    pub copies_done: u64,
    /// Messages its receiver delivered (each checked).
    pub delivered: u64,
}

/// The outcome of a group.
#[derive(Clone, Debug, Default, Serialize)]
pub struct GroupResult {
    /// The mode, as written.
    pub mode: String,
    /// Messages the group sends in all.
    pub messages: u64,
    /// Messages submitted to the group.
    pub submitted: u64,
    /// Messages done for the group.
    pub done: u64,
    /// Every message was done for the group.
    pub completed: bool,
    /// Virtual time from the group's start to its last message done, µs.
    pub completion_us: Option<u64>,
    /// Why the group failed, if it did.
    pub failure: Option<String>,
    /// Per member.
    pub members: Vec<GroupMemberResult>,
    /// Violations of the group's invariants (empty when all is well).
    pub violations: Vec<String>,
}

/// Violations recorded per group at most.
const MAX_VIOLATIONS: usize = 8;

/// The receiving side of one member: which messages it delivered.
#[derive(Default)]
struct MemberRx {
    seen: payload::Delivered,
    last: Option<u64>,
    delivered: u64,
}

/// The running state of one group: the policy, what was submitted, what each receiver
/// delivered.
pub(crate) struct GroupApp {
    spec: GroupSpec,
    key: u64,
    /// The member flows, in the order they joined.
    pub members: Vec<usize>,
    policy: Group<usize>,
    started: bool,
    /// Messages the group sends in all.
    total: u64,
    /// Per message id: receivers that delivered it.
    deliveries: Vec<u8>,
    rx: Vec<MemberRx>,
    /// Members whose connections were closed or aborted by the group.
    closed: Vec<bool>,
    done_at: Option<Instant>,
    res: GroupResult,
}

impl GroupApp {
    pub fn new(spec: GroupSpec, key: u64, members: Vec<usize>) -> Self {
        let cfg = GroupConfig {
            fail_after: spec.fail_after,
            ..GroupConfig::default()
        };
        let size = spec.message_size.max(8) as u64;
        let total = spec.bytes.div_ceil(size);
        let n = members.len();
        GroupApp {
            policy: Group::new(spec.mode, cfg),
            res: GroupResult {
                mode: spec.mode.to_string(),
                messages: total,
                ..GroupResult::default()
            },
            spec,
            key,
            started: false,
            total,
            deliveries: Vec::new(),
            rx: (0..n).map(|_| MemberRx::default()).collect(),
            closed: vec![false; n],
            done_at: None,
            members,
        }
    }

    fn violation(&mut self, v: String) {
        if self.res.violations.len() < MAX_VIOLATIONS {
            self.res.violations.push(v);
        }
    }

    fn member(&self, flow: usize) -> usize {
        self.members
            .iter()
            .position(|&m| m == flow)
            .expect("a group member's flow")
    }

    fn size(&self) -> usize {
        self.spec.message_size.max(8)
    }

    /// The group has ended: every message done, or failed.
    pub fn ended(&self) -> bool {
        self.done_at.is_some() || self.policy.failure().is_some()
    }

    /// When the group next needs a step of its own (starting, failing a silent member).
    pub fn next_wake(&self) -> Option<Instant> {
        if !self.started {
            return Some(Instant::ZERO + self.spec.start);
        }
        if self.ended() {
            return None;
        }
        self.policy.poll_timeout()
    }

    /// Adds every member once the group's start is reached, and fails the silent ones
    /// whose time is up.
    fn tick(&mut self, now: Instant) {
        if !self.started && now >= Instant::ZERO + self.spec.start {
            self.started = true;
            for &m in &self.members {
                let _ = self.policy.add_member(now, m);
            }
        }
        // Once the group ended nothing waits for its members any more.
        if !self.ended() && self.policy.poll_timeout().is_some_and(|t| t <= now) {
            self.policy.on_timeout(now);
        }
    }

    /// Submits messages while the group's buffer takes them; true if it took any (every
    /// member may have a new copy).
    fn submit(&mut self, now: Instant) -> bool {
        let mut any = false;
        while self.started && self.res.submitted < self.total && !self.ended() {
            let id = self.policy.next_id();
            let m = Bytes::from(payload::message(self.key, id, self.size()));
            if self.policy.submit(now, m).is_err() {
                break;
            }
            self.res.submitted += 1;
            any = true;
        }
        any
    }

    /// Member `flow`'s connection ended with `reason` (not by the group): the member is
    /// failed.
    pub fn member_closed(&mut self, now: Instant, flow: usize, reason: &str) {
        let i = self.member(flow);
        if !self.closed[i] && self.started {
            let why = format!("connection ended: {reason}");
            let _ = self.policy.fail_member(now, flow, &why);
        }
    }

    /// Runs the sending side for member `flow`: the group's clock, new messages, this
    /// member's copies onto its connection, its done barrier, and its close once the group
    /// ended. Returns true when the other members need a step too (new messages, a member
    /// failed, the group ended).
    pub fn pump(
        &mut self,
        now: Instant,
        flow: usize,
        app: &mut FlowApp,
        conn: Option<&mut Connection>,
    ) -> bool {
        let i = self.member(flow);
        let ended_before = self.ended();
        let failed_before = self.failed_members();
        self.tick(now);
        let mut others = self.submit(now);
        if let Some(c) = conn {
            app.res.peak_sender_buffered = app.res.peak_sender_buffered.max(c.buffered_bytes());
            if c.is_established() && !self.closed[i] {
                while let Some(copy) = self.policy.next_copy(flow) {
                    match c.send_msg_after(now, copy.data, &[]) {
                        Ok(id) => {
                            self.policy.placed(now, flow, id);
                            app.res.msgs_sent += 1;
                            app.res.bytes_sent += self.size() as u64;
                        }
                        Err(_) => break,
                    }
                }
                let s = c.stats();
                let p = MemberProgress {
                    done_below: c.messages_done_below().unwrap_or(0),
                    packets_sent: s.packets_sent,
                    packets_lost: s.packets_lost,
                };
                self.policy.progress(now, flow, p);
                // Acknowledgements free the buffer: more messages.
                others |= self.submit(now);
            }
            if self.done_at.is_none() && self.policy.done_below() >= self.total {
                self.done_at = Some(now);
                self.res.completed = true;
            }
            self.close_if_ended(now, i, app, c);
        }
        while let Some(e) = self.policy.poll_event() {
            if let GroupEvent::Failed { reason } = e {
                self.res.failure.get_or_insert(reason);
            }
        }
        others || self.ended() != ended_before || self.failed_members() != failed_before
    }

    fn failed_members(&self) -> usize {
        self.members
            .iter()
            .filter(|&&m| matches!(self.policy.member_state(m), Some(MemberState::Failed(_))))
            .count()
    }

    /// Once the group ended, or this member failed, closes member `i`'s connection: a
    /// graceful close where the group is done and the member holds every copy it was given,
    /// an abort with the reason otherwise.
    fn close_if_ended(&mut self, now: Instant, i: usize, app: &mut FlowApp, c: &mut Connection) {
        if self.closed[i] {
            return;
        }
        let flow = self.members[i];
        let member_failed = match self.policy.member_state(flow) {
            Some(MemberState::Failed(why)) => Some(why.clone()),
            _ => None,
        };
        if let Some(why) = member_failed {
            c.abort(now, &format!("failed by its group: {why}"));
        } else if let Some(why) = self.policy.failure() {
            c.abort(now, &format!("the group failed: {why}"));
        } else if self.done_at.is_some() {
            let settled = self
                .policy
                .members()
                .iter()
                .find(|m| m.key == flow)
                .is_some_and(|m| m.copies_done == m.copies);
            if settled {
                c.close(now);
            } else {
                c.abort(now, "not needed: the group is done");
            }
        } else {
            return;
        }
        self.closed[i] = true;
        app.closing = true;
    }

    /// Reads what member `flow`'s receiver delivered and checks it; returns the bytes.
    pub fn receive(
        &mut self,
        now: Instant,
        flow: usize,
        app: &mut FlowApp,
        c: &mut Connection,
    ) -> u64 {
        let i = self.member(flow);
        let size = self.size();
        let mut got = 0u64;
        while let Ok(m) = c.recv_msg(now) {
            let Some(id) =
                payload::check_message(self.key, size, &m).filter(|&id| id < self.res.submitted)
            else {
                self.violation(format!("flow {flow}: corrupt or unknown message delivered"));
                continue;
            };
            if !self.rx[i].seen.first_time(id) {
                self.violation(format!("flow {flow}: message {id} delivered twice"));
                continue;
            }
            if self.spec.mode == Mode::All && id != self.rx[i].last.map_or(0, |l| l + 1) {
                self.violation(format!(
                    "flow {flow}: message {id} delivered after {:?} under `all`",
                    self.rx[i].last
                ));
            }
            self.rx[i].last = Some(id);
            self.rx[i].delivered += 1;
            let slot = id as usize;
            if self.deliveries.len() <= slot {
                self.deliveries.resize(slot + 1, 0);
            }
            self.deliveries[slot] = self.deliveries[slot].saturating_add(1);
            got += m.len() as u64;
        }
        app.res.msgs_delivered = self.rx[i].delivered;
        app.res.bytes_delivered += got;
        app.interval_bytes += got;
        if self.done_at.is_some() && app.done_at.is_none() {
            app.done_at = self.done_at;
        }
        got
    }

    /// The group's outcome; checks that every message done was delivered by as many
    /// receivers as the mode needs.
    pub fn finish(mut self) -> GroupResult {
        let needed = self.spec.mode.needed(self.members.len()).min(255) as u8;
        let done = self.policy.done_below();
        if let Some(id) =
            (0..done).find(|&id| self.deliveries.get(id as usize).copied().unwrap_or(0) < needed)
        {
            let had = self.deliveries.get(id as usize).copied().unwrap_or(0);
            self.violation(format!(
                "message {id} was done for the group after {had} deliveries; {} needs {needed}",
                self.spec.mode
            ));
        }
        self.res.done = done;
        self.res.completion_us = self.done_at.map(|d| {
            d.as_micros()
                .saturating_sub(self.spec.start.as_micros() as u64)
        });
        if self.res.failure.is_none() {
            self.res.failure = self.policy.failure().map(str::to_string);
        }
        let reports = self.policy.members();
        self.res.members = self
            .members
            .iter()
            .enumerate()
            .map(|(i, &flow)| {
                let r = reports.iter().find(|r| r.key == flow);
                GroupMemberResult {
                    flow,
                    state: match r.map(|r| &r.state) {
                        Some(MemberState::Failed(why)) => format!("failed: {why}"),
                        Some(MemberState::Removed) => "removed".into(),
                        _ => "active".into(),
                    },
                    copies: r.map_or(0, |r| r.copies),
                    copies_done: r.map_or(0, |r| r.copies_done),
                    delivered: self.rx[i].delivered,
                }
            })
            .collect();
        self.res
    }
}
