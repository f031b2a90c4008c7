//! A held lock: its identity, the state of its lease, and the supervisor that renews it or declares it lost.

use crate::keys::LockKeys;
use crate::quorum::{Extend, Grant, Nodes};
use crate::SnatchError;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::{sleep_until, Instant};

/// The lost notice is given this fraction of the ttl before the validity ends.
const NOTICE_FRACTION: u32 = 10;

/// The lost notice is given at most this long before the validity ends.
const MAX_NOTICE: Duration = Duration::from_secs(1);

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

/// What an owner runs when its lease is lost (see [`Lease::on_lost`]).
type LostHook = Box<dyn FnOnce() + Send>;

/// One acquisition of a lock. Shared by the owner and its supervisor task.
pub struct Lease {
    keys: LockKeys,
    token: String,
    fence: i64,
    acquired_at: Instant,
    ttl: Duration,
    min_hold: Duration,
    nodes: Arc<Nodes>,
    state: watch::Sender<LeaseState>,
    on_lost: Mutex<Option<LostHook>>,
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
        let state = watch::Sender::new(LeaseState::Held { valid_until: grant.valid_until });
        let on_lost = Mutex::new(None);
        Self { keys, token, fence: grant.fence, acquired_at: grant.started, ttl, min_hold, nodes, state, on_lost }
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

    /// The current state.
    pub fn state(&self) -> LeaseState {
        *self.state.borrow()
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
        let mut rx = self.state.subscribe();
        let state = *rx.wait_for(|s| !matches!(s, LeaseState::Held { .. })).await.expect("sender lives in self");
        state == LeaseState::Lost
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
                Ok(self.state.send_if_modified(|s| match s {
                    LeaseState::Held { valid_until: v } => {
                        *v = valid_until;
                        true
                    }
                    _ => false,
                }))
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
        if self.state.send_replace(LeaseState::Released) == LeaseState::Released {
            return Ok(false);
        }
        self.nodes.try_release(&self.keys, &self.token).await
    }

    /// Gives the lock back but keeps the key (owner-checked) for `hold` more, so nobody acquires it before then.
    /// Returns whether the key was still ours in Redis; false without a round trip when already released.
    pub async fn release_keeping(&self, hold: Duration) -> Result<bool, SnatchError> {
        if self.state.send_replace(LeaseState::Released) == LeaseState::Released {
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

    fn mark_lost(&self) {
        let was_held = self.state.send_if_modified(|s| {
            let held = matches!(s, LeaseState::Held { .. });
            if held {
                *s = LeaseState::Lost;
            }
            held
        });
        if was_held {
            self.call_lost_hook();
        }
    }

    /// Calls the lost hook if one is set and not yet called (taken under the lock, called outside it).
    fn call_lost_hook(&self) {
        let hook = self.on_lost.lock().expect("lost hook poisoned").take();
        if let Some(hook) = hook {
            hook();
        }
    }

    /// Watches the lease until it ends: renews it every ttl/3 when `auto_extend`, and declares it lost when its
    /// validity is about to run out without a renewal: [`NOTICE_FRACTION`] of the ttl (at most [`MAX_NOTICE`])
    /// before, so that the owner hears of it while the lease still holds. An extension refused is lost at once.
    pub(crate) async fn supervise(self: Arc<Self>, auto_extend: bool) {
        let mut rx = self.state.subscribe();
        let period = self.ttl / 3;
        let notice = (self.ttl / NOTICE_FRACTION).min(MAX_NOTICE);
        let retry = (self.ttl / 10).clamp(Duration::from_millis(1), Duration::from_millis(250));
        let mut renew_at = self.acquired_at + period;
        loop {
            let lost_at = match *rx.borrow_and_update() {
                LeaseState::Held { valid_until } => valid_until - notice,
                _ => return,
            };
            tokio::select! {
                changed = rx.changed() => if changed.is_err() { return },
                () = sleep_until(lost_at) => { self.mark_lost(); return }
                () = sleep_until(renew_at), if auto_extend => {
                    let started = Instant::now();
                    tokio::select! {
                        result = self.extend(None) => {
                            renew_at = match result {
                                Ok(_) => started + period,
                                Err(_) => Instant::now() + retry,
                            };
                        }
                        () = sleep_until(lost_at) => { self.mark_lost(); return }
                    }
                }
            }
        }
    }
}
