//! A lock the runner holds: for a run of the caller's (under one lock or a set) or a lock it handed out, for an
//! attempt of a schedule's occurrence, or for a leader's term.

use crate::lock::lease::Lease;
use crate::lock::locker::Busy;
use snatch_protocol::keys::Kind;
use snatch_protocol::run::Held;
use snatch_protocol::schedule::Attempt;
use std::sync::Arc;
use tokio::sync::oneshot;

/// A lock the runner holds.
pub enum Hold {
    /// A lease; `busy` counts a run on the locker (`close` waits for it) while it lasts; none for a lock the caller
    /// holds (`close` releases it). `direct`: taken by a direct call.
    Lease { lease: Arc<Lease>, busy: Option<Busy>, direct: bool },
    /// The locks of a set, one per key in order (a run of withLocks); `busy` counts the run.
    Set { leases: Vec<Arc<Lease>>, busy: Option<Busy> },
    /// An attempt of a schedule's occurrence.
    Attempt(Box<AttemptHold>),
    /// A leader's term.
    Term(Box<TermHold>),
    /// A run nested in runs of its calling context that hold its keys (`reentrant`): each key's lease and the run
    /// that holds it (the outermost: a run nested in a nested one is the outer's too), in the call's order; `set`
    /// for a withLocks. Nothing of it is released: those runs give their locks back once it ended.
    Nested { held: Vec<(u32, Arc<Lease>)>, set: bool },
}

/// What a leader's term holds while its fn runs: the lock, and its campaign's ear (which gives the lock back once fn
/// settled).
pub struct TermHold {
    /// The campaign, by the caller's id for it.
    pub(crate) campaign: u32,
    pub(crate) lease: Arc<Lease>,
    /// Told when fn settled.
    pub(crate) settled: oneshot::Sender<FnSettled>,
}

/// What an attempt of a schedule's occurrence holds while its fn runs (its scheduler holds them too, and gives them
/// back once it recorded how the attempt ended).
pub struct AttemptHold {
    /// The schedule, by the caller's id for it, and the attempt.
    pub(crate) schedule: u32,
    pub(crate) attempt: Attempt,
    /// The stored schedule's id, for an occurrence of one.
    pub(crate) stored: Option<String>,
    /// The run lock (whose fence fn gets), unless the schedule lets occurrences overlap (then the claim's fence).
    pub(crate) run: Option<Arc<Lease>>,
    /// The claim: while it is held, no other replica runs the attempt.
    pub(crate) claim: Arc<Lease>,
    /// Told when fn settled; `None` when fn was not called, its leases having lapsed before the call.
    pub(crate) settled: oneshot::Sender<Option<FnSettled>>,
}

/// What the runner tells an attempt's scheduler when its fn settled, as run `id`: what fn failed with, and whether
/// either lease lapsed.
#[derive(Debug)]
pub struct FnSettled {
    pub id: u32,
    pub failure: Option<String>,
    pub lost: bool,
}

impl AttemptHold {
    /// The lease whose fence fn gets.
    pub(crate) fn lease(&self) -> &Arc<Lease> {
        self.run.as_ref().unwrap_or(&self.claim)
    }

    /// Whether a renewal of either lease was skipped because the caller's loop had stalled.
    pub(crate) fn stalled(&self) -> bool {
        self.claim.stalled() || self.run.as_ref().is_some_and(|run| run.stalled())
    }

    /// Whether either lease lapsed: with its claim lost, another replica may run the attempt too.
    pub(crate) fn lapsed(&self) -> bool {
        self.claim.lapsed() || self.run.as_ref().is_some_and(|run| run.lapsed())
    }

    /// Its scheduler's ear, and the locks without it.
    pub(crate) fn into_settled(self) -> (oneshot::Sender<Option<FnSettled>>, Locks) {
        (self.settled, Locks { run: self.run, claim: self.claim })
    }

    /// Gives both locks back.
    pub(crate) async fn release(self) {
        self.into_settled().1.release().await
    }
}

/// An attempt's locks.
pub(crate) struct Locks {
    run: Option<Arc<Lease>>,
    claim: Arc<Lease>,
}

impl Locks {
    /// Gives both back.
    pub(crate) async fn release(self) {
        if let Some(run) = self.run {
            let _ = run.release().await;
        }
        let _ = self.claim.release().await;
    }
}

impl Hold {
    /// The lease whose fence and token the caller sees (a set's first).
    pub(crate) fn lease(&self) -> &Arc<Lease> {
        match self {
            Self::Lease { lease, .. } => lease,
            Self::Set { leases, .. } => &leases[0],
            Self::Attempt(attempt) => attempt.lease(),
            Self::Term(term) => &term.lease,
            Self::Nested { held, .. } => &held[0].1,
        }
    }

    /// The lease of `key` (a lock's, not a semaphore's nor a read-write lock's) that this hold of a run holds, and
    /// the run that holds it: `id`'s own, or the outer one for a nested run.
    pub(crate) fn lock_of(&self, id: u32, key: &str) -> Option<(u32, Arc<Lease>)> {
        let is_key = |lease: &Arc<Lease>| lease.keys().kind == Kind::Lock && lease.keys().key == key;
        match self {
            Self::Lease { lease, .. } => is_key(lease).then(|| (id, lease.clone())),
            Self::Set { leases, .. } => leases.iter().find(|lease| is_key(lease)).map(|lease| (id, lease.clone())),
            Self::Nested { held, .. } => held.iter().find(|(_, lease)| is_key(lease)).cloned(),
            Self::Attempt(_) | Self::Term(_) => None,
        }
    }

    /// Whether a renewal was skipped because the caller's loop had stalled (a loss is then told as a stall).
    pub(crate) fn stalled(&self) -> bool {
        match self {
            Self::Lease { lease, .. } => lease.stalled(),
            Self::Set { leases, .. } => leases.iter().any(|lease| lease.stalled()),
            Self::Attempt(attempt) => attempt.stalled(),
            Self::Term(term) => term.lease.stalled(),
            Self::Nested { held, .. } => held.iter().any(|(_, lease)| lease.stalled()),
        }
    }

    /// How long it is still guaranteed: a set's soonest lease's.
    pub(crate) fn remaining(&self) -> std::time::Duration {
        match self {
            Self::Set { leases, .. } => leases.iter().map(|lease| lease.remaining()).min().unwrap_or_default(),
            Self::Nested { held, .. } => held.iter().map(|(_, lease)| lease.remaining()).min().unwrap_or_default(),
            _ => self.lease().remaining(),
        }
    }
}

impl Held for Hold {
    /// Whether the lock was taken by a direct call (a schedule's never is).
    fn direct(&self) -> bool {
        matches!(self, Self::Lease { direct: true, .. })
    }

    fn fence(&self) -> i64 {
        self.lease().fence()
    }

    fn token(&self) -> &str {
        self.lease().token()
    }

    fn fences(&self) -> Vec<i64> {
        match self {
            Self::Set { leases, .. } => leases.iter().map(|lease| lease.fence()).collect(),
            Self::Nested { held, set: true } => held.iter().map(|(_, lease)| lease.fence()).collect(),
            _ => Vec::new(),
        }
    }

    /// A set's lapses with any of its leases; an attempt's with either lease: with its claim lost, another replica may
    /// run it too.
    fn lapsed(&self) -> bool {
        match self {
            Self::Lease { lease, .. } => lease.lapsed(),
            Self::Set { leases, .. } => leases.iter().any(|lease| lease.lapsed()),
            Self::Attempt(attempt) => attempt.lapsed(),
            Self::Term(term) => term.lease.lapsed(),
            Self::Nested { held, .. } => held.iter().any(|(_, lease)| lease.lapsed()),
        }
    }
}
