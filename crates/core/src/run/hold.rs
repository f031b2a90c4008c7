//! A lock the runner holds: for a run of the caller's or a lock it handed out, or for an attempt of a schedule's
//! occurrence.

use crate::lock::lease::Lease;
use crate::lock::locker::Busy;
use snatch_protocol::run::Held;
use snatch_protocol::schedule::Attempt;
use std::sync::Arc;
use tokio::sync::oneshot;

/// A lock the runner holds.
pub enum Hold {
    /// A lease; `busy` counts a run on the locker (`close` waits for it) while it lasts; none for a lock the caller
    /// holds (`close` releases it). `direct`: taken by a direct call.
    Lease { lease: Arc<Lease>, busy: Option<Busy>, direct: bool },
    /// An attempt of a schedule's occurrence.
    Occurrence(Box<OccurrenceHold>),
}

/// What an attempt of a schedule's occurrence holds while its fn runs (its scheduler holds them too, and gives them
/// back once it recorded how the attempt ended).
pub struct OccurrenceHold {
    /// The schedule, by the caller's id for it, and the attempt.
    pub(crate) schedule: u32,
    pub(crate) attempt: Attempt,
    /// The run lock (whose fence fn gets), unless the schedule lets occurrences overlap (then the claim's fence).
    pub(crate) run: Option<Arc<Lease>>,
    /// The claim: while it is held, no other replica runs the attempt.
    pub(crate) claim: Arc<Lease>,
    /// Told when fn settled.
    pub(crate) settled: oneshot::Sender<FnSettled>,
}

/// What the runner tells an attempt's scheduler when its fn settled, as run `id`: what fn failed with, and whether
/// either lease lapsed.
#[derive(Debug)]
pub struct FnSettled {
    pub id: u32,
    pub failure: Option<String>,
    pub lost: bool,
}

impl OccurrenceHold {
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
    pub(crate) fn into_settled(self) -> (oneshot::Sender<FnSettled>, Locks) {
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
    /// The lease whose fence and token the caller sees.
    pub(crate) fn lease(&self) -> &Arc<Lease> {
        match self {
            Self::Lease { lease, .. } => lease,
            Self::Occurrence(occurrence) => occurrence.lease(),
        }
    }

    /// Whether the lock was taken by a direct call (a schedule's never is).
    pub(crate) fn direct(&self) -> bool {
        matches!(self, Self::Lease { direct: true, .. })
    }

    /// Whether a renewal was skipped because the caller's loop had stalled (a loss is then told as a stall).
    pub(crate) fn stalled(&self) -> bool {
        match self {
            Self::Lease { lease, .. } => lease.stalled(),
            Self::Occurrence(occurrence) => occurrence.stalled(),
        }
    }
}

impl Held for Hold {
    fn fence(&self) -> i64 {
        self.lease().fence()
    }

    fn token(&self) -> &str {
        self.lease().token()
    }

    /// An occurrence's lapses with either lease: with its claim lost, another replica may run it too.
    fn lapsed(&self) -> bool {
        match self {
            Self::Lease { lease, .. } => lease.lapsed(),
            Self::Occurrence(occurrence) => occurrence.lapsed(),
        }
    }
}
