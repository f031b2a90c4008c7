//! A held lock: its identity and the state of its lease (supervised by the locker's supervisor.rs).

use crate::keys::LockKeys;
use crate::quorum::{Extend, Grant, Nodes};
use crate::SnatchError;
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
    token: String,
    fence: i64,
    acquired_at: Instant,
    ttl: Duration,
    min_hold: Duration,
    nodes: Arc<Nodes>,
    state: Mutex<LeaseState>,
    /// Woken when the lease ends (see [`Lease::ended`]).
    end: Notify,
    on_lost: Mutex<Option<Hook>>,
    on_end: Mutex<Option<Hook>>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease").field("key", &self.keys.key).field("fence", &self.fence).finish()
    }
}

impl Lease {
    pub(crate) fn new(
        keys: LockKeys,
        token: String,
        grant: Grant,
        ttl: Duration,
        min_hold: Duration,
        nodes: Arc<Nodes>,
    ) -> Self {
        let state = Mutex::new(LeaseState::Held { valid_until: grant.valid_until });
        let (on_lost, on_end) = (Mutex::new(None), Mutex::new(None));
        let acquired_at = grant.started;
        let (fence, end) = (grant.fence, Notify::new());
        Self { keys, token, fence, acquired_at, ttl, min_hold, nodes, state, end, on_lost, on_end }
    }

    /// The key as the user gave it.
    pub fn key(&self) -> &str {
        &self.keys.key
    }

    /// The owner's random token (128 bits, hex).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The fencing token: strictly increasing per key across all holders.
    pub fn fence(&self) -> i64 {
        self.fence
    }

    /// The Redis names of the lock.
    pub(crate) fn keys(&self) -> &LockKeys {
        &self.keys
    }

    /// The nodes the lock is on.
    pub(crate) fn nodes(&self) -> &Arc<Nodes> {
        &self.nodes
    }

    /// How long after its acquisition a release keeps the key.
    pub(crate) fn min_hold(&self) -> Duration {
        self.min_hold
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
        *self.state.lock().expect("lease state poisoned")
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
        *self.on_lost.lock().expect("lost hook poisoned") = Some(Box::new(hook));
        if self.state() == LeaseState::Lost {
            self.call_lost_hook();
        }
    }

    /// Calls `hook` once when the lease ends, lost or released, at once if it already has. For the supervisor.
    pub(crate) fn on_end(&self, hook: impl FnOnce() + Send + 'static) {
        *self.on_end.lock().expect("end hook poisoned") = Some(Box::new(hook));
        if !matches!(self.state(), LeaseState::Held { .. }) {
            self.call_end_hook();
        }
    }

    /// Sets the lease to `ttl` from now (owner-checked). False, and the lease counts as lost, when the key is no
    /// longer ours or was already declared lost.
    pub async fn extend(&self, ttl: Option<Duration>) -> Result<bool, SnatchError> {
        let ttl = ttl.unwrap_or(self.ttl);
        crate::config::validate_duration("ttl", ttl, false)?;
        if !matches!(self.state(), LeaseState::Held { .. }) {
            return Ok(false);
        }
        match self.nodes.extend(&self.keys, &self.token, ttl).await? {
            Extend::Renewed { valid_until } if valid_until > Instant::now() => {
                let mut state = self.state.lock().expect("lease state poisoned");
                Ok(match &mut *state {
                    LeaseState::Held { valid_until: v } => {
                        *v = valid_until;
                        true
                    }
                    _ => false,
                })
            }
            Extend::Renewed { .. } | Extend::Refused => {
                self.mark_lost();
                Ok(false)
            }
        }
    }

    /// Gives the lock back (owner-checked); the key stays for the rest of `min_hold` if that has not passed yet.
    /// Returns whether the key was still ours in Redis; false without a round trip when already released.
    pub async fn release(&self) -> Result<bool, SnatchError> {
        let held_for = self.acquired_at.elapsed();
        if held_for < self.min_hold {
            return self.release_keeping(self.min_hold - held_for).await;
        }
        if !self.end_released() {
            return Ok(false);
        }
        self.nodes.try_release(&self.keys, &self.token).await
    }

    /// Gives the lock back but keeps the key (owner-checked) for `hold` more, so nobody acquires it before then.
    /// Returns whether the key was still ours in Redis; false without a round trip when already released.
    pub async fn release_keeping(&self, hold: Duration) -> Result<bool, SnatchError> {
        if !self.end_released() {
            return Ok(false);
        }
        let hold = hold.max(Duration::from_millis(1));
        Ok(matches!(self.nodes.extend(&self.keys, &self.token, hold).await?, Extend::Renewed { .. }))
    }

    /// Whether the lease failed to stay guaranteed: lost, or held past its validity. False once released.
    pub fn lapsed(&self) -> bool {
        match self.state() {
            LeaseState::Held { valid_until } => valid_until <= Instant::now(),
            LeaseState::Lost => true,
            LeaseState::Released => false,
        }
    }

    /// Declares the lease lost if it is still held, calling the hooks.
    pub(crate) fn mark_lost(&self) {
        let was_held = {
            let mut state = self.state.lock().expect("lease state poisoned");
            let held = matches!(*state, LeaseState::Held { .. });
            if held {
                *state = LeaseState::Lost;
            }
            held
        };
        if was_held {
            self.end.notify_waiters();
            self.call_end_hook();
            self.call_lost_hook();
        }
    }

    /// Sets the state to released; false if it already was. Calls the end hook when it was not.
    pub(crate) fn end_released(&self) -> bool {
        let before = std::mem::replace(&mut *self.state.lock().expect("lease state poisoned"), LeaseState::Released);
        let released = before != LeaseState::Released;
        if released {
            self.end.notify_waiters();
            self.call_end_hook();
        }
        released
    }

    fn call_lost_hook(&self) {
        call_once(&self.on_lost);
    }

    fn call_end_hook(&self) {
        call_once(&self.on_end);
    }
}

/// Calls the hook in `slot` if one is set and not yet called (taken under the lock, called outside it).
fn call_once(slot: &Mutex<Option<Hook>>) {
    let hook = slot.lock().expect("lease hook poisoned").take();
    if let Some(hook) = hook {
        hook();
    }
}
