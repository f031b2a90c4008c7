//! A lock the runner holds: for a run of the caller's or a lock it handed out, or for an attempt of a schedule's
//! occurrence.

use crate::lock::lease::Lease;
use crate::lock::locker::Busy;
use snatch_protocol::run::{AbortReason, Held};
use snatch_protocol::schedule::Attempt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// A lock the runner holds.
pub enum Hold {
    /// A lease; `busy` counts a run on the locker (`close` waits for it) while it lasts; none for a lock the caller
    /// holds (`close` releases it). `direct`: taken by a direct call.
    Lease { lease: Arc<Lease>, busy: Option<Busy>, direct: bool },
    /// An attempt of a schedule's occurrence.
    Occurrence(Box<OccurrenceHold>),
}

/// What an attempt of a schedule's occurrence holds while its fn runs, and what its end is to tell the scheduler.
pub struct OccurrenceHold {
    /// The schedule, by the caller's id for it, and the attempt.
    pub(crate) schedule: u32,
    pub(crate) attempt: Attempt,
    /// The run lock (whose fence fn gets), unless the schedule lets occurrences overlap (then the claim's fence).
    pub(crate) run: Option<Arc<Lease>>,
    /// The claim: while it is held, no other replica runs the attempt.
    pub(crate) claim: Arc<Lease>,
    /// Told when fn settled; the locks are given back once the scheduler recorded it.
    pub(crate) ended: oneshot::Sender<Finished>,
    pub(crate) started: Instant,
    /// Why fn's signal aborted before its lease was lost, if it did.
    pub(crate) aborted: Option<AbortReason>,
    /// What fn failed with, if it did.
    pub(crate) failure: Option<String>,
    pub(crate) busy: Busy,
}

/// How an attempt of a schedule's occurrence ended, for the scheduler to record.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptEnd {
    pub fence: i64,
    /// Its lease could not be guaranteed for the whole run.
    pub lost: bool,
    /// Its signal aborted for this before fn settled.
    pub aborted: Option<AbortReason>,
    /// fn threw or rejected, with this message.
    pub failure: Option<String>,
    /// From fn's call to its settling.
    pub duration: Duration,
}

/// An attempt's end, told to its scheduler, which drops `recorded` once it recorded it: the claim stays until then, so
/// that no replica takes the attempt for a dead runner's while its record still says it runs. `released` ends once
/// the locks are given back and the caller was told the run ended.
pub struct Finished {
    pub end: AttemptEnd,
    pub recorded: oneshot::Sender<()>,
    pub released: oneshot::Receiver<()>,
}

impl OccurrenceHold {
    /// The lease whose fence fn gets.
    fn lease(&self) -> &Arc<Lease> {
        self.run.as_ref().unwrap_or(&self.claim)
    }

    /// Whether either lease lapsed: with its claim lost, another replica may run the attempt too.
    fn lapsed(&self) -> bool {
        self.claim.lapsed() || self.run.as_ref().is_some_and(|run| run.lapsed())
    }

    /// Tells the scheduler how the attempt ended, waits until it recorded that, then gives the locks back. What to
    /// drop once the caller is told the run ended.
    pub(crate) async fn finish(self) -> oneshot::Sender<()> {
        let end = AttemptEnd {
            fence: self.lease().fence(),
            lost: self.lapsed(),
            aborted: self.aborted,
            failure: self.failure,
            duration: self.started.elapsed(),
        };
        let (recorded, wait) = oneshot::channel();
        let (told, released) = oneshot::channel();
        if self.ended.send(Finished { end, recorded, released }).is_ok() {
            let _ = wait.await;
        }
        if let Some(run) = self.run {
            let _ = run.release().await;
        }
        let _ = self.claim.release().await;
        drop(self.busy);
        told
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
