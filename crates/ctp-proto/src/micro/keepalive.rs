//! Keep-alive and idle timeout: a PING after `interval` without sending anything the peer
//! must acknowledge, and the connection ends when nothing was heard for `idle`.

use super::decl::{MicroDecl, MicroId};
use crate::engine::event::{Event, EventKind};
use crate::engine::session::CloseReason;
use crate::engine::timer::TimerId;
use crate::engine::{Cx, Microprotocol, Setup, SetupError};
use core::time::Duration;

/// The declaration of [`MicroId::KeepAlive`]: what it needs, excludes and reads.
pub const DECL: MicroDecl = MicroDecl {
    params: &["keepalive_ms", "idle_timeout_ms"],
    ..MicroDecl::new(MicroId::KeepAlive)
};

/// The keep-alive microprotocol.
#[derive(Debug)]
pub struct KeepAlive {
    interval: Duration,
    idle: Duration,
    ping_timer: TimerId,
    idle_timer: TimerId,
    started: bool,
}

impl KeepAlive {
    /// Pings after `interval` of silence; gives up after `idle` without hearing the peer.
    pub fn new(
        setup: &mut Setup<'_>,
        interval: Duration,
        idle: Duration,
    ) -> Result<Self, SetupError> {
        Ok(KeepAlive {
            interval,
            idle,
            ping_timer: setup.timer()?,
            idle_timer: setup.timer()?,
            started: false,
        })
    }
}

impl Microprotocol for KeepAlive {
    fn bindings(&self) -> &'static [EventKind] {
        &[EventKind::PacketReceived, EventKind::PacketSent]
    }

    fn handle<'a>(&mut self, ev: &Event<'a>, cx: &mut Cx<'_, 'a>) {
        match *ev {
            Event::PacketReceived { .. } => {
                cx.set_timer(self.idle_timer, cx.now + self.idle);
                self.started = true;
            }
            Event::PacketSent(p) => {
                if !self.started {
                    cx.set_timer(self.idle_timer, cx.now + self.idle);
                    self.started = true;
                }
                if p.in_flight {
                    cx.set_timer(self.ping_timer, cx.now + self.interval);
                }
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, t: TimerId, cx: &mut Cx<'_, '_>) {
        if t == self.idle_timer {
            if cx.st.session.close.is_none() {
                cx.st.session.close = Some(CloseReason::IdleTimeout(self.idle));
            }
        } else {
            cx.st.session.ping_owed = true;
            cx.set_timer(self.ping_timer, cx.now + self.interval);
        }
    }
}
