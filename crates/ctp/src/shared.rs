//! State shared between the user-facing handles and the driver task.
//!
//! One `std::sync::Mutex` guards the sans-IO endpoint and the wakers of every task waiting
//! on it; a flag and the driver's waker wake the driver after any application operation,
//! because operations on a proto connection produce datagrams to send without raising an
//! event. Operations made before the driver's next round starts all count as one wake.

use ctp_proto::{CloseReason, ConnectionHandle, ConnectionState};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::sync::Notify;

/// Everything the handles and the driver share.
pub(crate) struct Shared {
    state: Mutex<State>,
    /// An application operation asked the driver to run since its round began.
    driver_wanted: AtomicBool,
    /// The driver task's waker while it waits.
    driver_waker: Mutex<Option<Waker>>,
    /// The moment `ctp_proto::Instant::ZERO` stands for.
    epoch: tokio::time::Instant,
    /// The socket's bound address.
    pub(crate) local_addr: SocketAddr,
    /// The driver has stopped (after telling every peer it aborted).
    stopped: std::sync::atomic::AtomicBool,
    /// Wakes whoever waits for the driver to stop.
    stopped_notify: Notify,
}

impl Shared {
    pub(crate) fn new(state: State, local_addr: SocketAddr) -> Self {
        Shared {
            state: Mutex::new(state),
            driver_wanted: AtomicBool::new(false),
            driver_waker: Mutex::new(None),
            epoch: tokio::time::Instant::now(),
            local_addr,
            stopped: std::sync::atomic::AtomicBool::new(false),
            stopped_notify: Notify::new(),
        }
    }

    /// Locks the state. A panic elsewhere while holding the lock does not make the state
    /// unusable: every mutation keeps the proto endpoint consistent on its own.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current time in the core's terms.
    pub(crate) fn now(&self) -> ctp_proto::Instant {
        ctp_proto::Instant::from_micros(
            u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX / 2),
        )
    }

    /// A core deadline as a tokio instant; `None` when it lies beyond what tokio represents.
    pub(crate) fn deadline(&self, t: ctp_proto::Instant) -> Option<tokio::time::Instant> {
        self.epoch.checked_add(Duration::from_micros(t.as_micros()))
    }

    /// Records that the driver stopped and wakes whoever waits for it.
    pub(crate) fn mark_stopped(&self) {
        self.stopped
            .store(true, std::sync::atomic::Ordering::Release);
        self.stopped_notify.notify_waiters();
    }

    /// Resolves once the driver stopped.
    pub(crate) async fn stopped(&self) {
        loop {
            let woken = self.stopped_notify.notified();
            if self.stopped.load(std::sync::atomic::Ordering::Acquire) {
                return;
            }
            woken.await;
        }
    }

    /// Asks the driver to run (poll for datagrams to send, re-arm its timer). Calls made
    /// before the driver's round begins cost one wake-up and one round together.
    pub(crate) fn wake_driver(&self) {
        if self.driver_wanted.swap(true, Ordering::AcqRel) {
            // Already asked: the round that clears the flag has not begun yet, or the
            // driver's wait will find the flag set.
            return;
        }
        let waker = self
            .driver_waker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The driver begins a round: operations from here on ask for another.
    pub(crate) fn begin_driver_round(&self) {
        self.driver_wanted.store(false, Ordering::Release);
    }

    /// Ready when [`Shared::wake_driver`] was called since the driver's round began.
    pub(crate) fn poll_driver_wanted(&self, cx: &mut Context<'_>) -> Poll<()> {
        {
            let mut w = self
                .driver_waker
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *w = Some(cx.waker().clone());
            }
        }
        // Checked after registering: a wake in between finds the waker.
        if self.driver_wanted.load(Ordering::Acquire) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// Per-connection bookkeeping of the runtime, indexed like the proto endpoint's handles.
#[derive(Default)]
pub(crate) struct Slot {
    /// A user `Connection` handle exists (or a `connect` is in progress).
    pub(crate) owned: bool,
    /// Sitting in the accept queue.
    pub(crate) queued: bool,
    /// Tasks waiting for anything on this connection.
    pub(crate) wakers: Vec<Waker>,
    /// The application aborted the connection with this reason.
    pub(crate) aborted: Option<CloseReason>,
    /// The application asked for a graceful close.
    pub(crate) closing: bool,
}

/// The mutable state behind the lock.
pub(crate) struct State {
    /// The sans-IO endpoint.
    pub(crate) ep: ctp_proto::Endpoint,
    /// Runtime bookkeeping per proto connection handle.
    pub(crate) slots: Vec<Option<Slot>>,
    /// Incoming connections not yet accepted.
    pub(crate) accept_queue: VecDeque<ConnectionHandle>,
    /// Tasks waiting in `accept`.
    pub(crate) accept_wakers: Vec<Waker>,
    /// The endpoint accepts incoming connections.
    pub(crate) accepting: bool,
    /// Set once the endpoint is closed (or its driver stopped): the reason every pending
    /// and later operation fails with.
    pub(crate) closed: Option<CloseReason>,
    /// Live user handles (`Endpoint` and `Connection` values, counted once per clone
    /// family). The driver stops when this reaches zero.
    pub(crate) user_refs: usize,
}

/// Most wakers kept per wait list; beyond this the oldest are woken early (spuriously)
/// rather than growing without bound.
const MAX_WAKERS: usize = 64;

/// Adds `w` to a wait list unless a waker for the same task is already there.
pub(crate) fn register(list: &mut Vec<Waker>, w: &Waker) {
    if list.iter().any(|x| x.will_wake(w)) {
        return;
    }
    if list.len() >= MAX_WAKERS {
        for old in list.drain(..MAX_WAKERS / 2) {
            old.wake();
        }
    }
    list.push(w.clone());
}

impl State {
    pub(crate) fn new(ep: ctp_proto::Endpoint, accepting: bool) -> Self {
        State {
            ep,
            slots: Vec::new(),
            accept_queue: VecDeque::new(),
            accept_wakers: Vec::new(),
            accepting,
            closed: None,
            user_refs: 1,
        }
    }

    /// The slot of `h`, created empty if absent.
    pub(crate) fn slot_entry(&mut self, h: ConnectionHandle) -> &mut Slot {
        if self.slots.len() <= h.0 {
            self.slots.resize_with(h.0 + 1, || None);
        }
        self.slots[h.0].get_or_insert_with(Slot::default)
    }

    /// Installs fresh bookkeeping for a new proto connection `h`.
    pub(crate) fn fresh_slot(&mut self, h: ConnectionHandle, slot: Slot) {
        if self.slots.len() <= h.0 {
            self.slots.resize_with(h.0 + 1, || None);
        }
        self.slots[h.0] = Some(slot);
    }

    /// The slot of `h`, if any.
    pub(crate) fn slot(&mut self, h: ConnectionHandle) -> Option<&mut Slot> {
        self.slots.get_mut(h.0)?.as_mut()
    }

    /// Forgets a connection once it is closed and nobody holds or awaits it.
    pub(crate) fn maybe_remove(&mut self, h: ConnectionHandle) {
        let closed = self
            .ep
            .connection(h)
            .is_none_or(|c| matches!(c.state(), ConnectionState::Closed(_)));
        if !closed {
            return;
        }
        if let Some(s) = self.slot(h) {
            if s.owned || s.queued {
                return;
            }
        }
        self.ep.remove(h);
        if let Some(s) = self.slots.get_mut(h.0) {
            *s = None;
        }
    }

    /// Moves every waiting task's waker into `out`.
    pub(crate) fn take_all_wakers(&mut self, out: &mut Vec<Waker>) {
        out.append(&mut self.accept_wakers);
        for s in self.slots.iter_mut().flatten() {
            out.append(&mut s.wakers);
        }
    }
}
