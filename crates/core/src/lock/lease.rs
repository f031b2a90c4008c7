//! A held lock: its identity and the state of its lease (supervised by the locker's supervisor.rs).

use crate::redlock::quorum::{Extend, Grant, Nodes};
use snatch_protocol::keys::LockKeys;
use snatch_protocol::owner;
use snatch_protocol::SnatchError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Where a lease stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseState {
    /// Ours and guaranteed until `valid_until` (monotonic).
    Held { valid_until: Instant },
    /// No longer guaranteed: an extension was refused, or the validity ran out before a renewal got through.
    Lost,
    /// Given back by its owner.
    Released,
}

/// What runs when a lease is lost (see [`Lease::on_lost`]), or when it ends either way (the supervisor's).
type Hook = Box<dyn FnOnce() + Send>;

/// One acquisition of a lock. Shared by its owner and the locker's supervisor.
pub struct Lease {
    keys: LockKeys,
    /// What the key holds: the token and this locker's instance (snatch-protocol's owner.rs).
    owner: String,
    fence: i64,
    acquired_at: Instant,
    ttl: Duration,
    min_hold: Duration,
    nodes: Arc<Nodes>,
    /// Taken in one attempt by a caller that did not wait, not fair: its key is expected to hold its owner alone
    /// (snatch-protocol's offers.rs), so it is released and extended by the server's own commands where they exist.
    plain: bool,
    /// The state and the hooks, under one lock: a short lease takes it a few times in all.
    inner: Mutex<Inner>,
    /// Woken when the lease ends (see [`Lease::ended`]), once anyone has waited for that (`awaited`).
    end: Notify,
    awaited: AtomicBool,
    /// A renewal was skipped because the caller's loop had stalled (see lock/stall.rs): a loss is told as a stall.
    stalled: AtomicBool,
}

/// What [`Lease::inner`] guards.
struct Inner {
    state: LeaseState,
    on_lost: Option<Hook>,
    on_end: Option<Hook>,
    /// An extension was sent: Redis may apply it after the lease was declared lost (its answer late, or never
    /// seen), so a lost lease's key is then released.
    extension_sent: bool,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease").field("key", &self.keys.key).field("fence", &self.fence).finish()
    }
}

impl Lease {
    pub(crate) fn new(
        keys: LockKeys,
        owner: String,
        grant: Grant,
        ttl: Duration,
        min_hold: Duration,
        nodes: Arc<Nodes>,
        plain: bool,
    ) -> Self {
        let state = LeaseState::Held { valid_until: grant.valid_until };
        let inner = Mutex::new(Inner { state, on_lost: None, on_end: None, extension_sent: false });
        let (fence, acquired_at, end, awaited) = (grant.fence, grant.started, Notify::new(), AtomicBool::new(false));
        let stalled = AtomicBool::new(false);
        Self { keys, owner, fence, acquired_at, ttl, min_hold, nodes, plain, inner, end, awaited, stalled }
    }

    /// A renewal was skipped: the caller's loop has stalled.
    pub(crate) fn mark_stalled(&self) {
        self.stalled.store(true, Ordering::Relaxed);
    }

    /// Whether a renewal was skipped because the caller's loop had stalled.
    pub fn stalled(&self) -> bool {
        self.stalled.load(Ordering::Relaxed)
    }

    /// The key as the user gave it.
    pub fn key(&self) -> &str {
        &self.keys.key
    }

    /// The owner's random token (128 bits, hex).
    pub fn token(&self) -> &str {
        owner::token(&self.owner)
    }

    /// What the key holds: the token and this locker's instance.
    pub(crate) fn owner(&self) -> &str {
        &self.owner
    }

    /// The fencing token: strictly increasing per key across all holders.
    pub fn fence(&self) -> i64 {
        self.fence
    }

    /// The cluster slot of the lock (which master of a cluster its release goes to).
    pub fn slot(&self) -> u16 {
        self.keys.slot()
    }

    /// Whether the lease is plain (see [`Lease::plain`]'s field): a lock's, taken without waiting, not fair.
    pub(crate) fn plain(&self) -> bool {
        self.plain
    }

    /// The Redis names of the lock.
    pub(crate) fn keys(&self) -> &LockKeys {
        &self.keys
    }

    /// The nodes the lock is on.
    pub(crate) fn nodes(&self) -> &Arc<Nodes> {
        &self.nodes
    }

    /// How much longer minHold keeps the key after a release now (zero without it, or once it has passed).
    pub(crate) fn hold_left(&self) -> Duration {
        if self.min_hold.is_zero() {
            return Duration::ZERO;
        }
        self.min_hold.saturating_sub(self.acquired_at.elapsed())
    }

    /// The lease's ttl, which renewals set it to again.
    pub(crate) fn ttl(&self) -> Duration {
        self.ttl
    }

    /// When the acquisition started (monotonic): its validity, and its renewals, count from there.
    pub(crate) fn acquired_at(&self) -> Instant {
        self.acquired_at
    }

    /// The current state.
    pub fn state(&self) -> LeaseState {
        self.inner().state
    }

    /// The state and the hooks, locked.
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("lease state poisoned")
    }

    /// How long the lease is still guaranteed; zero once lost or released.
    pub fn remaining(&self) -> Duration {
        match self.state() {
            LeaseState::Held { valid_until } => valid_until.saturating_duration_since(Instant::now()),
            _ => Duration::ZERO,
        }
    }

    /// Resolves when the lease ends: true if it was lost, false if it was released.
    pub async fn ended(&self) -> bool {
        // Before the state is read (under the lock), so that an end after that read sees it and notifies.
        self.awaited.store(true, Ordering::SeqCst);
        loop {
            let ended = self.end.notified();
            tokio::pin!(ended);
            // Registered before the state is read, so that an end in between still wakes it.
            ended.as_mut().enable();
            match self.state() {
                LeaseState::Held { .. } => ended.await,
                state => return state == LeaseState::Lost,
            }
        }
    }

    /// Calls `hook` once when the lease is lost, at once if it already is; never if it is released first. For an
    /// owner that must hear of a loss without a task of its own waiting on [`Lease::ended`]. Replaces an earlier
    /// hook not yet called.
    pub fn on_lost(&self, hook: impl FnOnce() + Send + 'static) {
        let mut inner = self.inner();
        if inner.state == LeaseState::Lost {
            drop(inner);
            hook();
        } else {
            inner.on_lost = Some(Box::new(hook));
        }
    }

    /// Calls `hook` once when the lease ends, lost or released, at once if it already has. For the supervisor.
    pub(crate) fn on_end(&self, hook: impl FnOnce() + Send + 'static) {
        let mut inner = self.inner();
        if matches!(inner.state, LeaseState::Held { .. }) {
            inner.on_end = Some(Box::new(hook));
        } else {
            drop(inner);
            hook();
        }
    }

    /// Sets the lease to `ttl` from now (owner-checked). False, and the lease counts as lost, when the key is no
    /// longer ours or was already declared lost; an extension Redis applied too late is undone in the background.
    /// Must be called within the Tokio runtime.
    pub async fn extend(&self, ttl: Option<Duration>) -> Result<bool, SnatchError> {
        let ttl = ttl.unwrap_or(self.ttl);
        crate::config::validate_ttl(ttl)?;
        if !matches!(self.state(), LeaseState::Held { .. }) {
            return Ok(false);
        }
        self.inner().extension_sent = true;
        let renewed = match self.nodes.extend(&self.keys, &self.owner, ttl, self.plain).await? {
            Extend::Renewed { valid_until } if valid_until > Instant::now() => match &mut self.inner().state {
                LeaseState::Held { valid_until: v } => {
                    *v = valid_until;
                    return Ok(true);
                }
                LeaseState::Released => return Ok(false),
                LeaseState::Lost => true,
            },
            Extend::Renewed { .. } => true,
            Extend::Refused => false,
        };
        self.mark_lost();
        if renewed {
            // Redis extended a lease already declared lost (or too late to be guaranteed): nobody holds the key
            // now, so it must not stay locked for the new ttl.
            self.nodes.release_later(&self.keys, &self.owner, Instant::now(), false);
        }
        Ok(false)
    }

    /// Gives the lock back (owner-checked); the key stays for the rest of `min_hold` if that has not passed yet.
    /// Returns whether the key was still ours in Redis; false without a round trip when already released.
    pub async fn release(&self) -> Result<bool, SnatchError> {
        let hold = self.hold_left();
        if !hold.is_zero() {
            return self.release_keeping(hold).await;
        }
        self.give_up().await
    }

    /// Gives the lock back at once (owner-checked), minHold or not: also for a lease that lapsed before its holder
    /// could use it. Returns whether the key was still ours in Redis; false without a round trip when already released.
    pub(crate) async fn give_up(&self) -> Result<bool, SnatchError> {
        if !self.end_released() {
            return Ok(false);
        }
        self.nodes.try_release(&self.keys, &self.owner, self.plain).await
    }

    /// Hands the lock over to another owner ([`crate::Locker::adopt`]): no longer renewed nor released here, it keeps
    /// its key for the validity left, which is returned; `None`, and nothing changes, once it lapsed or ended.
    pub fn hand_over(&self) -> Option<Duration> {
        let left = self.remaining();
        if left.is_zero() || !self.end_released() {
            return None;
        }
        Some(left)
    }

    /// Gives the lock back but keeps the key (owner-checked) for `hold` more, so nobody acquires it before then.
    /// Returns whether the key was still ours in Redis; false without a round trip when already released.
    pub async fn release_keeping(&self, hold: Duration) -> Result<bool, SnatchError> {
        if !self.end_released() {
            return Ok(false);
        }
        let hold = hold.max(Duration::from_millis(1));
        Ok(matches!(self.nodes.extend(&self.keys, &self.owner, hold, false).await?, Extend::Renewed { .. }))
    }

    /// Whether the lease failed to stay guaranteed: lost, or held past its validity. False once released.
    pub fn lapsed(&self) -> bool {
        match self.state() {
            LeaseState::Held { valid_until } => valid_until <= Instant::now(),
            LeaseState::Lost => true,
            LeaseState::Released => false,
        }
    }

    /// Declares the lease lost if it is still held, calling the hooks. Must be called within the Tokio runtime.
    pub(crate) fn mark_lost(&self) {
        let (hooks, extension_sent) = {
            let mut inner = self.inner();
            let LeaseState::Held { valid_until } = inner.state else { return };
            inner.state = LeaseState::Lost;
            ((inner.on_end.take(), inner.on_lost.take()), inner.extension_sent.then_some(valid_until))
        };
        if let Some(valid_until) = extension_sent {
            // An extension Redis applies late (its answer not in yet, or lost) would keep the key locked with
            // nobody holding it: release it once the lease's guarantee has ended (not sooner: the owner was told of
            // the loss ahead of that), at once when the locker closes.
            self.nodes.release_later(&self.keys, &self.owner, valid_until, true);
        }
        self.notify_end();
        hooks.0.into_iter().chain(hooks.1).for_each(|hook| hook());
    }

    /// Sets the state to released; false if it already was. Calls the end hook when it was not.
    pub(crate) fn end_released(&self) -> bool {
        // A loss can no longer be: its hook goes now (outside the lock) rather than with the lease.
        let (on_end, _on_lost) = {
            let mut inner = self.inner();
            if std::mem::replace(&mut inner.state, LeaseState::Released) == LeaseState::Released {
                return false;
            }
            (inner.on_end.take(), inner.on_lost.take())
        };
        self.notify_end();
        if let Some(hook) = on_end {
            hook();
        }
        true
    }

    /// Wakes the tasks in [`Lease::ended`], if any ever waited.
    fn notify_end(&self) {
        if self.awaited.load(Ordering::SeqCst) {
            self.end.notify_waiters();
        }
    }
}
