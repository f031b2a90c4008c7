//! What comes back to the runner from the runtime: acquisitions, releases and operations that finished there,
//! losses, and schedules' occurrences to run.

use crate::lock::lease::Lease;
use crate::lock::locker::Busy;
use crate::lock::shared::Turn;
use crate::run::hold::FnSettled;
use snatch_protocol::attempt::{AbortReason, Ended};
use snatch_protocol::lead::Revoked;
use snatch_protocol::run::{Outcome, Purpose, ScheduledAttempt};
use snatch_protocol::schedule::Attempt;
use snatch_protocol::shared::Entry;
use snatch_protocol::SnatchError;
use std::sync::Arc;
use tokio::sync::oneshot;

/// One result for the runner.
pub enum Input {
    /// The acquisition of run or lock `id` (for `purpose`), made on the locker's connection, came to `result`; `busy`
    /// counted it. `required`: without the lock the call fails with a timeout (it waited), rather than not acquired.
    Acquired { id: u32, purpose: Purpose, required: bool, result: Result<Option<Arc<Lease>>, SnatchError>, busy: Busy },
    /// The acquisition of locks `ids` (one per key of a set, see `Locker::lock_all`) came to `result`: every lease, in
    /// the order of `ids`, or the error each is told; `busy` counted it.
    AcquiredAll { ids: Vec<u32>, result: Result<Vec<Arc<Lease>>, SnatchError>, busy: Busy },
    /// The acquisition of run `id`'s set of locks (see `Locker::lock_all`) came to `result`: every lease, in the order
    /// of its keys; `busy` counted it.
    AcquiredSet { id: u32, result: Result<Vec<Arc<Lease>>, SnatchError>, busy: Busy },
    /// Run `id`'s turn at a shared result came to `turn` (the lock to run fn under, or a stored result); `busy`
    /// counted it.
    Shared { id: u32, turn: Result<Turn, SnatchError>, busy: Busy },
    /// The lock of shared run `id` was given back, what fn came to stored first (`entry`) or not (`None`).
    SharedEnded { id: u32, entry: Option<Entry> },
    /// Shared run `id`, waiting for its process's round of the key, waited as long as it may.
    SharedWaited(u32),
    /// Campaign `campaign` won its lock: its term begins (run its fn, and tell `settled` once it settled).
    Term { campaign: u32, lease: Arc<Lease>, settled: oneshot::Sender<FnSettled> },
    /// The fn of campaign `campaign`'s term, if one runs, is to stop, for `reason`.
    EndTerm { campaign: u32, reason: AbortReason },
    /// Run `id`, a leader's term, ended so: its lock given back.
    Revoked { id: u32, fence: i64, reason: Revoked },
    /// The lease of run or lock `id` was lost.
    Lost(u32),
    /// The lock of run `id` was given back on the locker's connection.
    Released(u32),
    /// Tell the caller `.1` for `.0` as it is: an operation's answer, a schedule's event.
    Tell(u32, Outcome),
    /// The locker closed (operation `.0`), releasing every lock still held.
    Closed(u32),
    /// The closing locker's time for running fns is over: the caller's fns still running are to stop.
    Cut,
    /// An attempt of a schedule's occurrence is claimed (and its run lock taken, unless occurrences may overlap):
    /// run its fn (see `AttemptHold`), and tell `settled` once it settled, or `None` when its leases lapsed before fn
    /// could be called.
    Attempt {
        scheduled: ScheduledAttempt,
        run: Option<Arc<Lease>>,
        claim: Arc<Lease>,
        settled: oneshot::Sender<Option<FnSettled>>,
    },
    /// The fn of `attempt` of schedule `schedule` (of stored schedule `stored`, for a handler), if it runs here, is to
    /// stop, for `reason`.
    Abort { schedule: u32, stored: Option<String>, attempt: Attempt, reason: AbortReason },
    /// Run `id`, a schedule's attempt, ended so (recorded, its locks given back).
    Ended { id: u32, ended: Ended },
}

impl Input {
    /// Gives back, in the background, the locks an input no runner will take holds. Within the Tokio runtime.
    pub fn undo(self) {
        match self {
            Self::Acquired { result: Ok(Some(lease)), busy, .. } => {
                tokio::spawn(async move {
                    let _ = lease.release().await;
                    drop(busy);
                });
            }
            Self::AcquiredAll { result: Ok(leases), busy, .. } => {
                tokio::spawn(async move {
                    futures_util::future::join_all(leases.iter().map(|lease| lease.release())).await;
                    drop(busy);
                });
            }
            Self::AcquiredSet { result: Ok(leases), busy, .. } => {
                tokio::spawn(async move {
                    futures_util::future::join_all(leases.iter().map(|lease| lease.release())).await;
                    drop(busy);
                });
            }
            Self::Term { lease, .. } => {
                // Nothing ran: the term ends at once (the campaign hears of no end, `settled` being dropped).
                tokio::spawn(async move { lease.release().await });
            }
            Self::Shared { turn: Ok(Turn::Run(lease)), busy, .. } => {
                tokio::spawn(async move {
                    let _ = lease.release().await;
                    drop(busy);
                });
            }
            Self::Attempt { run, claim, .. } => {
                // Nothing ran: the claim goes at once, and another replica takes the attempt over, as a dead runner's
                // (the scheduler hears of no end, `settled` being dropped).
                tokio::spawn(async move {
                    if let Some(run) = run {
                        let _ = run.release().await;
                    }
                    let _ = claim.release().await;
                });
            }
            _ => {}
        }
    }
}

/// Takes inputs from the runtime to the runner, on the runner's thread.
pub trait Post: Send + Sync + 'static {
    /// Queues `input` for the runner; hands it back once the runner is gone (say, its JS environment torn down).
    fn post(&self, input: Input) -> Result<(), Input>;
}

/// Posts `input` on `post`; when the runner is gone, gives back what it holds ([`Input::undo`]).
pub(crate) fn post_or_undo(post: &dyn Post, input: Input) {
    if let Err(input) = post.post(input) {
        input.undo();
    }
}
