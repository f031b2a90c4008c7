//! The lifecycle of everything that holds a lock for the caller, without I/O: a run of the user's fn (snatchTask,
//! withLock, withPermit, withRead, withWrite, withLocks, shared, a schedule's occurrence, a leader's term) goes
//! acquiring → running fn → releasing → ended, and a lock handed to the caller (tryLock, lock, a semaphore's permit)
//! acquiring → held → released or lost. [`Runs`] keeps each by id and says, at
//! every step, what the caller hears ([`Outcome`]) and what must be released. The driver (snatch-core's run/) does
//! the I/O: it sends the acquisitions and releases, by the direct connection or the locker's own, and feeds their
//! results here, with the user's fn settling (`task_done`) and leases lost.
//!
//! The rules, in one place:
//! - fn is called once per run, only once the lock is held and only while its lease is still guaranteed (its process
//!   may stand still between the acquisition and the call): the driver checks it before [`Runs::acquired`] (an
//!   acquisition that lapsed counts as none: given back, not acquired) and before [`Runs::adopt`] (a schedule's
//!   attempt, a leader's term); a lock is handed to the caller on the same terms;
//! - a loss is told once, and only while fn runs (once it settled, the run's end says whether the lease lapsed);
//! - a run ends only once its lock is released (or the release failed: the key then expires with its lease), so the
//!   next run on the key can take it; its end says whether the lease could not be guaranteed for the whole run;
//! - a lock handed to the caller stays until the caller releases it or it is lost;
//! - a call on keys its calling context holds already (it runs inside the fn of a run that holds them) never waits for
//!   itself: [`reentry`] says what it comes to.

use crate::attempt::{AbortReason, Ended, SkipReason};
use crate::error::SnatchError;
use crate::lead::Revoked;
use crate::schedule::{Attempt, Why};
use rustc_hash::FxHashMap;

/// What a held lock tells the lifecycle.
pub trait Held {
    /// The fencing token of its acquisition.
    fn fence(&self) -> i64;
    /// Its owner token.
    fn token(&self) -> &str;
    /// The fences of a set of locks, one per key in order (empty for one lock).
    fn fences(&self) -> Vec<i64> {
        Vec::new()
    }
    /// Whether its lease could not be guaranteed: lost, or held past its validity.
    fn lapsed(&self) -> bool;
    /// Whether its lock was taken by a direct call (the caller's diagnostics say so).
    fn direct(&self) -> bool {
        false
    }
}

/// Ids from here up are those of runs the driver starts itself (a schedule's occurrences); the caller's ids are below.
pub const DRIVER_IDS: u32 = 1 << 31;

/// Whose fn a run calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invoked {
    /// The caller's, of a run it started under one lock (`direct`: taken by a direct call).
    Run { direct: bool },
    /// The caller's, of a run it started under a set of locks: their fences, one per key in order.
    Set(Vec<i64>),
    /// A schedule's, for this occurrence.
    Attempt(ScheduledAttempt),
    /// A leader's, for a term of the caller's campaign with this id.
    Term(u32),
}

/// Which attempt of which of its occurrences a schedule runs, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledAttempt {
    /// The schedule, by the caller's id for it: a code schedule, or the handler of a stored one.
    pub schedule: u32,
    pub attempt: Attempt,
    pub why: Why,
    /// When it was due to start, in epoch ms: its tick plus the schedule's jitter offset for it (a start lag counts
    /// from there).
    pub due: i64,
    /// The stored schedule it is an occurrence of, when it is one.
    pub stored: Option<std::sync::Arc<StoredRun>>,
}

/// The stored schedule an occurrence's handler runs for: its id, and its `data` (JSON), if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRun {
    pub id: String,
    pub data: Option<String>,
}

/// What Redis holds for a key that is locked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    /// The lease left, in ms (with Redlock, the least among the nodes that hold it).
    pub ttl_ms: i64,
    /// The key's fence counter: the last fence given out, the holder's or, once other attempts were made since (each
    /// uses a fence up), above it (with Redlock, the highest among the nodes).
    pub fence: i64,
    /// How many hold it: 1 for a lock.
    pub holders: u32,
    /// The instance that holds it (`instanceId`), when it says (see owner.rs).
    pub holder: Option<String>,
}

/// What the caller hears of a run, a lock, an operation or a schedule, by its id: the one outcome type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Call the user's fn of run `id` under the lease with `fence`: the caller's, a schedule's or a leader's.
    Invoke { fence: i64, invoked: Invoked },
    /// The lease of run or lock `id` was lost: its signal aborts. `stalled`: it lapsed because the caller's event loop
    /// had not turned within `maxStall`, so it was not renewed.
    Lost { stalled: bool },
    /// Run `id`'s fn is to stop: its signal aborts, for `reason`.
    Aborted { reason: AbortReason },
    /// Run `id` ended: fn ran under `fence` and settled, and the lock was given back; `lost` when its lease could not
    /// be guaranteed for the whole run.
    Ran { fence: i64, lost: bool },
    /// Run `id`, a schedule's attempt, ended so: its end recorded, its locks given back.
    Attempted(Ended),
    /// Run or acquisition `id` ended without the lock: it was held.
    NotAcquired,
    /// Acquisition `id` got the lock, which the caller holds from now on as lock `id`.
    Locked { fence: i64, token: String },
    /// Operation `id` answered: a release or an extension (whether the lock was still ours), a forced release
    /// (whether there was a lock), `close` (true).
    Done(bool),
    /// Operation `id`, a question to the fleet, answered with this JSON (see fleet.rs).
    Answered(String),
    /// Turn `id` of a shared result found it stored: the value's bytes, or (`error`) its runner's error's.
    Stored { error: bool, bytes: Vec<u8> },
    /// Operation `id`, an inspection, found this (`None`: the key is free).
    Inspected(Option<Inspection>),
    /// Run, acquisition or operation `id` failed.
    Failed(SnatchError),
    /// Schedule `id` did not run occurrence `tick` here.
    Skipped { tick: i64, reason: SkipReason },
    /// Schedule `id` could not claim occurrence `tick` (Redis unreachable, no quorum): it did not run here.
    Unclaimed { tick: i64, error: SnatchError },
    /// Schedule `id` recorded occurrence `tick` missed, for `reason` (`deadline`, `superseded`, `overlap`, `suspended`).
    Missed { tick: i64, reason: String },
    /// Run `id`, a leader's term under `fence`, ended so: its lock given back.
    Revoked { fence: i64, reason: Revoked },
    /// Campaign or observer `id` sees this leader (`None`: none), in its term (when known).
    Leader(Option<(Option<String>, Option<i64>)>),
    /// Campaign or observer `id` met this error (Redis unreachable, say); it goes on.
    Erred(SnatchError),
}

/// What a call on keys comes to when its calling context (the runs whose fn it runs inside, in this process, of this
/// locker) holds some of them already: decided here once, for every way a caller locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reentry {
    /// The calling context holds none of its keys: it acquires them as any call does.
    Acquire,
    /// fn runs under the held locks, as a run of its own: their fences, the outer leases (their ttl, renewal and
    /// minHold) govern, nothing is acquired nor released; the outer runs give their locks back only once it ended.
    Nested,
    /// One attempt: not acquired, as when anyone else holds the key.
    NotAcquired,
    /// Refused ([`SnatchError::Reentrant`]): the key at `index` is held by the calling context, and waiting for it
    /// would wait for itself; `mixed`, a reentrant set holding some of its keys and not others, which could deadlock
    /// (its free keys would be taken while one is held out of the set's order).
    Refused { index: usize, mixed: bool },
}

/// What a call on keys comes to, `held[i]` saying whether the calling context holds its i-th key: a run of fn
/// (`Purpose::Run`: snatchTask, withLock, withLocks) or a lock handed to the caller (`Purpose::Lock`: tryLock, lock),
/// `waits` for a waiting call (withLock, lock, withLocks), `reentrant` when the caller asked to run under held locks.
/// - none held: [`Reentry::Acquire`];
/// - a run with `reentrant`: [`Reentry::Nested`] when every key is held, refused when only some are (`mixed`);
/// - otherwise a waiting call is refused on its first held key, and a one-attempt call is not acquired (a lock handed to
///   the caller is never reentrant: its release would give back the outer run's lock).
pub fn reentry(held: &[bool], purpose: Purpose, waits: bool, reentrant: bool) -> Reentry {
    let Some(index) = held.iter().position(|&h| h) else { return Reentry::Acquire };
    if reentrant && purpose == Purpose::Run {
        return match held.iter().position(|&h| !h) {
            None => Reentry::Nested,
            Some(_) => Reentry::Refused { index, mixed: true },
        };
    }
    if waits {
        Reentry::Refused { index, mixed: false }
    } else {
        Reentry::NotAcquired
    }
}

/// What an acquisition is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A run of the user's fn under the lock.
    Run,
    /// A lock handed to the caller.
    Lock,
}

/// Where one run or lock stands.
#[derive(Debug)]
enum Entry<H> {
    /// Its acquisition is under way.
    Acquiring(Purpose),
    /// fn runs under `held`; `aborted` once the caller heard its signal abort (a loss, or an abort).
    Running { held: H, aborted: bool },
    /// fn settled; its lock is being released. The end of the run says `fence` and `lost`.
    Releasing { fence: i64, lost: bool },
    /// A lock the caller holds.
    Holding(H),
}

/// A step of the lifecycle: what the caller hears now, and a lock the driver must give back (one acquired for a
/// run or a lock no longer expected: its caller is gone).
#[derive(Debug)]
pub struct Step<H> {
    pub outcome: Option<Outcome>,
    pub release: Option<H>,
}

impl<H> Step<H> {
    fn tell(outcome: Outcome) -> Self {
        Self { outcome: Some(outcome), release: None }
    }
}

/// The runs and locks of one locker, by id.
#[derive(Debug)]
pub struct Runs<H> {
    entries: FxHashMap<u32, Entry<H>>,
    /// The id of the next run the driver starts.
    next_driver_id: u32,
}

impl<H> Default for Runs<H> {
    fn default() -> Self {
        Self { entries: FxHashMap::default(), next_driver_id: DRIVER_IDS }
    }
}

impl<H: Held> Runs<H> {
    /// The acquisition of run or lock `id` (a caller's id, below [`DRIVER_IDS`]) is under way.
    pub fn start(&mut self, id: u32, purpose: Purpose) {
        self.entries.insert(id, Entry::Acquiring(purpose));
    }

    /// The acquisition of `id` came to `acquired`: a run calls its fn, a lock is held; without the lock, or failed,
    /// either ends. A lock acquired for an id no longer expected is to be released.
    pub fn acquired(&mut self, id: u32, acquired: Result<Option<H>, SnatchError>) -> Step<H> {
        let Some(Entry::Acquiring(purpose)) = self.entries.remove(&id) else {
            return Step { outcome: None, release: acquired.ok().flatten() };
        };
        let held = match acquired {
            Ok(Some(held)) => held,
            Ok(None) => return Step::tell(Outcome::NotAcquired),
            Err(e) => return Step::tell(Outcome::Failed(e)),
        };
        let (outcome, entry) = match purpose {
            Purpose::Run => {
                let fences = held.fences();
                let invoked =
                    if fences.is_empty() { Invoked::Run { direct: held.direct() } } else { Invoked::Set(fences) };
                (Outcome::Invoke { fence: held.fence(), invoked }, Entry::Running { held, aborted: false })
            }
            Purpose::Lock => {
                (Outcome::Locked { fence: held.fence(), token: held.token().to_owned() }, Entry::Holding(held))
            }
        };
        self.entries.insert(id, entry);
        Step::tell(outcome)
    }

    /// A run the driver starts itself, its lock already held: a schedule's occurrence, or a leader's term
    /// (`invoked`). Its id, and the call of its fn.
    pub fn adopt(&mut self, held: H, invoked: Invoked) -> (u32, Outcome) {
        let id = loop {
            let id = self.next_driver_id;
            self.next_driver_id = self.next_driver_id.checked_add(1).unwrap_or(DRIVER_IDS);
            if !self.entries.contains_key(&id) {
                break id;
            }
        };
        let call = Outcome::Invoke { fence: held.fence(), invoked };
        self.entries.insert(id, Entry::Running { held, aborted: false });
        (id, call)
    }

    /// The lease of run or lock `id` was lost (`stalled`: not renewed while the caller's loop stalled): the caller
    /// hears of it if its fn still runs and its signal has not aborted yet, or if it holds the lock (which it then no
    /// longer does).
    pub fn lost(&mut self, id: u32, stalled: bool) -> Option<Outcome> {
        match self.entries.get_mut(&id)? {
            Entry::Running { aborted, .. } if !*aborted => {
                *aborted = true;
                Some(Outcome::Lost { stalled })
            }
            Entry::Holding(_) => {
                self.entries.remove(&id);
                Some(Outcome::Lost { stalled })
            }
            _ => None,
        }
    }

    /// The fn of run `id` is to stop, for `reason`: the caller hears of it if it still runs and its signal has not
    /// aborted yet.
    pub fn abort(&mut self, id: u32, reason: AbortReason) -> Option<Outcome> {
        match self.entries.get_mut(&id)? {
            Entry::Running { aborted, .. } if !*aborted => {
                *aborted = true;
                Some(Outcome::Aborted { reason })
            }
            _ => None,
        }
    }

    /// The locker closes and its runs' time to finish is over: the signal of every fn of the caller's that still runs
    /// aborts (once), for [`AbortReason::Shutdown`]. A schedule's occurrences are aborted by their attempts' machines
    /// (which record them interrupted), not here.
    pub fn cut(&mut self) -> Vec<(u32, Outcome)> {
        let mut told = Vec::new();
        for (&id, entry) in &mut self.entries {
            if let Entry::Running { aborted, .. } = entry {
                if id < DRIVER_IDS && !*aborted {
                    *aborted = true;
                    told.push((id, Outcome::Aborted { reason: AbortReason::Shutdown }));
                }
            }
        }
        told
    }

    /// The fn of run `id` settled: its lock, to release now; the run ends once it is released ([`Runs::released`]).
    pub fn task_done(&mut self, id: u32) -> Option<H> {
        let entry = self.entries.get_mut(&id)?;
        let Entry::Running { held, .. } = entry else { return None };
        let (fence, lost) = (held.fence(), held.lapsed());
        let Entry::Running { held, .. } = std::mem::replace(entry, Entry::Releasing { fence, lost }) else {
            unreachable!("matched above")
        };
        Some(held)
    }

    /// The lock of run `id` was given back (or giving it back failed: the key then expires with its lease): the run
    /// ends.
    pub fn released(&mut self, id: u32) -> Option<Outcome> {
        match self.entries.remove(&id)? {
            Entry::Releasing { fence, lost } => Some(Outcome::Ran { fence, lost }),
            other => {
                self.entries.insert(id, other);
                None
            }
        }
    }

    /// The lock of run `id` while its fn runs.
    pub fn running(&self, id: u32) -> Option<&H> {
        match self.entries.get(&id)? {
            Entry::Running { held, .. } => Some(held),
            _ => None,
        }
    }

    /// The lock of run `id` while its fn runs, or lock `id`, which the caller holds.
    pub fn held(&self, id: u32) -> Option<&H> {
        match self.entries.get(&id)? {
            Entry::Running { held, .. } | Entry::Holding(held) => Some(held),
            _ => None,
        }
    }

    /// Lock `id`, which the caller holds.
    pub fn lock(&self, id: u32) -> Option<&H> {
        match self.entries.get(&id)? {
            Entry::Holding(held) => Some(held),
            _ => None,
        }
    }

    /// The caller gives lock `id` back: it is no longer held here; the driver releases it.
    pub fn release_lock(&mut self, id: u32) -> Option<H> {
        match self.entries.remove(&id)? {
            Entry::Holding(held) => Some(held),
            other => {
                self.entries.insert(id, other);
                None
            }
        }
    }

    /// The locker closed, which released every lock still held: the caller holds none any more.
    pub fn closed(&mut self) {
        self.entries.retain(|_, entry| !matches!(entry, Entry::Holding(_)));
    }

    /// The caller is gone (say, its JS environment was torn down): nothing is told any more, and every lock held for
    /// it is to be released, those of running fns and those it held.
    pub fn abandon(&mut self) -> Vec<H> {
        self.entries
            .drain()
            .filter_map(|(_, entry)| match entry {
                Entry::Running { held, .. } | Entry::Holding(held) => Some(held),
                Entry::Acquiring(_) | Entry::Releasing { .. } => None,
            })
            .collect()
    }

    /// How many runs and locks are under way.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is under way.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    #[test]
    fn a_call_on_keys_its_context_holds_never_waits_for_itself() {
        use Reentry::*;
        let (run, lock) = (Purpose::Run, Purpose::Lock);
        // Nothing held: as any call.
        for (purpose, waits, reentrant) in [(run, true, false), (run, false, true), (lock, true, true)] {
            assert_eq!(reentry(&[false, false], purpose, waits, reentrant), Acquire);
        }
        // withLock, withLocks, lock: refused on the first held key, never waiting.
        assert_eq!(reentry(&[true], run, true, false), Refused { index: 0, mixed: false });
        assert_eq!(reentry(&[false, true], run, true, false), Refused { index: 1, mixed: false });
        assert_eq!(reentry(&[true], lock, true, false), Refused { index: 0, mixed: false });
        // snatchTask, tryLock: their answer when another holds the key.
        assert_eq!(reentry(&[true], run, false, false), NotAcquired);
        assert_eq!(reentry(&[true], lock, false, false), NotAcquired);
        // reentrant: fn runs under the held locks, when all are held; a mixed set is refused.
        assert_eq!(reentry(&[true], run, true, true), Nested);
        assert_eq!(reentry(&[true], run, false, true), Nested);
        assert_eq!(reentry(&[true, true], run, true, true), Nested);
        assert_eq!(reentry(&[false, true], run, true, true), Refused { index: 1, mixed: true });
        // A lock handed to the caller never re-enters.
        assert_eq!(reentry(&[true], lock, true, true), Refused { index: 0, mixed: false });
        assert_eq!(reentry(&[true], lock, false, true), NotAcquired);
    }

    /// A held lock whose lapse the test decides.
    #[derive(Debug, Clone)]
    struct Lease {
        fence: i64,
        lapsed: Rc<Cell<bool>>,
    }

    impl Lease {
        fn new(fence: i64) -> Self {
            Self { fence, lapsed: Rc::default() }
        }
    }

    impl Held for Lease {
        fn fence(&self) -> i64 {
            self.fence
        }

        fn token(&self) -> &str {
            "token"
        }

        fn lapsed(&self) -> bool {
            self.lapsed.get()
        }
    }

    #[test]
    fn a_run_calls_fn_once_it_holds_the_lock_and_ends_once_it_is_released() {
        let mut runs = Runs::default();
        runs.start(1, Purpose::Run);
        assert_eq!(runs.task_done(1).map(|l: Lease| l.fence), None, "fn was not called yet");
        let step = runs.acquired(1, Ok(Some(Lease::new(7))));
        assert_eq!(step.outcome, Some(Outcome::Invoke { fence: 7, invoked: Invoked::Run { direct: false } }));
        assert_eq!(runs.released(1), None, "not released before fn settled");
        assert_eq!(runs.task_done(1).map(|l| l.fence), Some(7), "its lock, to release");
        assert_eq!(runs.task_done(1).map(|l| l.fence), None, "once");
        assert_eq!(runs.lost(1, false), None, "fn has settled: its end tells");
        assert_eq!(runs.released(1), Some(Outcome::Ran { fence: 7, lost: false }));
        assert!(runs.is_empty());
    }

    #[test]
    fn a_loss_is_told_once_while_fn_runs_and_the_end_says_the_lease_lapsed() {
        let mut runs = Runs::default();
        runs.start(1, Purpose::Run);
        let lease = Lease::new(7);
        runs.acquired(1, Ok(Some(lease.clone())));
        lease.lapsed.set(true);
        assert_eq!(runs.lost(1, true), Some(Outcome::Lost { stalled: true }));
        assert_eq!(runs.lost(1, false), None, "told once");
        assert_eq!(runs.abort(1, AbortReason::Timeout), None, "the signal aborted already");
        assert!(runs.task_done(1).is_some());
        assert_eq!(runs.released(1), Some(Outcome::Ran { fence: 7, lost: true }));
    }

    #[test]
    fn without_the_lock_or_failing_a_run_ends_at_once() {
        let mut runs: Runs<Lease> = Runs::default();
        runs.start(1, Purpose::Run);
        runs.start(2, Purpose::Run);
        assert_eq!(runs.acquired(1, Ok(None)).outcome, Some(Outcome::NotAcquired));
        let failed = runs.acquired(2, Err(SnatchError::Closed)).outcome;
        assert_eq!(failed, Some(Outcome::Failed(SnatchError::Closed)));
        assert!(runs.is_empty());
    }

    #[test]
    fn a_lock_is_held_until_released_or_lost() {
        let mut runs = Runs::default();
        runs.start(1, Purpose::Lock);
        runs.start(2, Purpose::Lock);
        let step = runs.acquired(1, Ok(Some(Lease::new(7))));
        assert_eq!(step.outcome, Some(Outcome::Locked { fence: 7, token: "token".into() }));
        runs.acquired(2, Ok(Some(Lease::new(8))));
        assert_eq!(runs.lock(1).map(|l| l.fence), Some(7));
        assert_eq!(runs.task_done(1).map(|l| l.fence), None, "a lock runs no fn");
        assert_eq!(runs.release_lock(1).map(|l| l.fence), Some(7));
        assert!(runs.lock(1).is_none() && runs.release_lock(1).is_none(), "released once");
        assert_eq!(runs.lost(2, false), Some(Outcome::Lost { stalled: false }));
        assert!(runs.lock(2).is_none(), "a lost lock is no longer held");
    }

    #[test]
    fn a_lock_acquired_for_nobody_is_given_back() {
        let mut runs = Runs::default();
        let step = runs.acquired(9, Ok(Some(Lease::new(7))));
        assert_eq!((step.outcome, step.release.map(|l| l.fence)), (None, Some(7)));
    }

    #[test]
    fn a_cut_aborts_the_caller_s_running_fns_once_and_leaves_occurrences_to_their_attempts() {
        let mut runs = Runs::default();
        runs.start(1, Purpose::Run);
        runs.acquired(1, Ok(Some(Lease::new(7))));
        runs.start(2, Purpose::Run);
        runs.start(3, Purpose::Lock);
        runs.acquired(3, Ok(Some(Lease::new(8))));
        let occurrence =
            ScheduledAttempt { schedule: 5, attempt: Attempt::first(0), why: Why::OnTime, due: 0, stored: None };
        let (driven, _) = runs.adopt(Lease::new(9), Invoked::Attempt(occurrence.clone()));
        assert_eq!(runs.cut(), vec![(1, Outcome::Aborted { reason: AbortReason::Shutdown })]);
        assert_eq!(runs.cut(), vec![], "once");
        assert_eq!(runs.abort(driven, AbortReason::Shutdown), Some(Outcome::Aborted { reason: AbortReason::Shutdown }));
    }

    #[test]
    fn an_abort_is_told_once_while_fn_runs() {
        let mut runs = Runs::default();
        runs.start(1, Purpose::Run);
        assert_eq!(runs.abort(1, AbortReason::Timeout), None, "fn was not called yet");
        runs.acquired(1, Ok(Some(Lease::new(7))));
        assert_eq!(runs.abort(1, AbortReason::Timeout), Some(Outcome::Aborted { reason: AbortReason::Timeout }));
        assert_eq!(runs.abort(1, AbortReason::Replaced), None);
        assert_eq!(runs.lost(1, false), None, "its signal aborted already");
        runs.task_done(1);
        assert_eq!(runs.released(1), Some(Outcome::Ran { fence: 7, lost: false }));
    }

    #[test]
    fn the_driver_starts_occurrences_with_ids_of_its_own() {
        let mut runs = Runs::default();
        let occurrence = ScheduledAttempt {
            schedule: 3,
            attempt: Attempt::first(1_000),
            why: Why::OnTime,
            due: 1_000,
            stored: None,
        };
        let (id, call) = runs.adopt(Lease::new(7), Invoked::Attempt(occurrence.clone()));
        assert!(id >= DRIVER_IDS);
        assert_eq!(call, Outcome::Invoke { fence: 7, invoked: Invoked::Attempt(occurrence) });
        let (next, _) = runs.adopt(Lease::new(8), Invoked::Term(3));
        assert_ne!(next, id);
        assert!(runs.task_done(id).is_some());
        assert_eq!(runs.released(id), Some(Outcome::Ran { fence: 7, lost: false }));
    }

    #[test]
    fn closing_drops_the_callers_locks_and_abandoning_gives_back_every_lock_held() {
        let mut runs = Runs::default();
        for (id, purpose) in [(1, Purpose::Lock), (2, Purpose::Run), (3, Purpose::Run)] {
            runs.start(id, purpose);
            runs.acquired(id, Ok(Some(Lease::new(i64::from(id)))));
        }
        runs.task_done(3);
        runs.closed();
        assert!(runs.lock(1).is_none());
        assert_eq!(runs.len(), 2);
        let mut fences: Vec<i64> = runs.abandon().into_iter().map(|l| l.fence).collect();
        fences.sort();
        assert_eq!(fences, [2], "the running fn's lock; the releasing one is on its way");
        assert!(runs.is_empty());
    }
}
