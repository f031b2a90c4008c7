//! The runner of one locker: the caller's operations (runs, locks, releases, extensions, inspections, close) and
//! the results that come back from the direct connection and the runtime go through the run lifecycle
//! (snatch-protocol's run.rs), which says what the caller hears. The runner does what each step takes: an acquisition
//! or a release by a direct call when one can go, or on the locker's own connection otherwise, a lost lease's notice,
//! a lock given back when nobody expects it any more. It lives on the caller's thread: its methods are called there
//! and leave in an [`Output`] what the caller is to do now (tell outcomes, send direct calls on its sockets); what
//! finishes on the runtime is posted back as an [`Input`] for [`Runner::handle`].

use crate::config::{validate_ttl, LockOptions};
use crate::direct::calls::{AcquireSettled, DirectAcquire, DirectRelease, ReleaseSettled};
use crate::lock::lease::Lease;
use crate::lock::locker::{check_handle, not_acquired, Busy, Holder, Locker};
use crate::lock::shared::Turn;
use crate::run::call::Call;
use crate::run::hold::{AttemptHold, FnSettled, Hold, TermHold};
use crate::run::input::{post_or_undo, Input, Post};
use crate::run::rounds::{timed_out, Caller, RoundEnd, Rounds};
use rustc_hash::FxHashMap;
use snatch_protocol::attempt::{Ended, Ending};
use snatch_protocol::direct::session::{CallReply, NoReply};
use snatch_protocol::keys::Kind;
use snatch_protocol::lead::Revoked;
use snatch_protocol::run::{reentry, Held, Invoked, Outcome, Purpose, Reentry, Runs};
use snatch_protocol::schedule::Attempt;
use snatch_protocol::shared::Entry;
use snatch_protocol::SnatchError;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;
use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// What the caller is to hear now, by id.
pub type Told = Vec<(u32, Outcome)>;

/// What the runner's caller is to do now.
#[derive(Default)]
pub struct Output {
    /// Tell these outcomes.
    pub told: Told,
    /// Send these direct calls, each on the socket of its slot; one that cannot go now goes back to
    /// [`Runner::unsent`].
    pub calls: Vec<Call>,
}

/// A call made inside the fn of runs of the caller's (its calling context), for [`Runner::reenter`].
#[derive(Debug, Clone)]
pub struct Reentering {
    /// Its keys, in the call's order.
    pub keys: Vec<String>,
    /// A run of fn (snatchTask, withLock; withLocks: `set`), or a lock handed to the caller (tryLock, lock).
    pub purpose: Purpose,
    pub set: bool,
    /// A waiting call (withLock, lock, withLocks).
    pub waits: bool,
    /// The caller asks to run under held locks.
    pub reentrant: bool,
    /// The runs whose fn the call runs inside, by id (the facade finds them; ids that are no runs of fn are ignored).
    pub within: Vec<u32>,
}

/// The runs and locks of one locker, and how they go.
pub struct Runner {
    locker: Locker,
    runs: Runs<Hold>,
    /// The runs of schedules' attempts, by schedule (and stored schedule id) and attempt (for their aborts).
    attempts: FxHashMap<(u32, Option<String>, Attempt), u32>,
    /// The runs of leaders' terms, by campaign (for their aborts).
    terms: FxHashMap<u32, u32>,
    /// This process's rounds of shared results.
    rounds: Rounds,
    /// The runs nested in each run that holds their keys, by its id ([`Reentry::Nested`]).
    nested: FxHashMap<u32, Vec<u32>>,
    /// The locks of runs whose fn settled while runs nested in them still run: given back once the last ended.
    parked: FxHashMap<u32, Hold>,
    post: Arc<dyn Post>,
    runtime: Handle,
    /// Set when a direct call had to go over the locker's own connection: on a cluster, the slot map may be out of
    /// date.
    stale: Arc<AtomicBool>,
}

impl Runner {
    /// The runner of `locker`, whose work on the runtime (`runtime`) comes back through `post`.
    pub fn new(locker: Locker, post: Arc<dyn Post>, runtime: Handle) -> Self {
        Self {
            locker,
            runs: Runs::default(),
            attempts: FxHashMap::default(),
            terms: FxHashMap::default(),
            rounds: Rounds::default(),
            nested: FxHashMap::default(),
            parked: FxHashMap::default(),
            post,
            runtime,
            stale: Arc::default(),
        }
    }

    /// The locker.
    pub fn locker(&self) -> &Locker {
        &self.locker
    }

    /// What brings results from the runtime back to the runner (for a schedule's occurrences).
    pub fn post(&self) -> Arc<dyn Post> {
        self.post.clone()
    }

    /// Set when a direct call had to go over the locker's own connection (the caller's sockets may refresh what they
    /// know of a cluster, and clear it).
    pub fn stale(&self) -> &Arc<AtomicBool> {
        &self.stale
    }

    /// Starts run `id` of the caller's fn under `key`: acquire (waiting up to `options.wait`), have the caller call
    /// fn ([`Outcome::Invoke`]), and once it settled ([`Runner::task_done`]) give the lock back and end
    /// ([`Outcome::Ran`]). Without the lock it ends with [`Outcome::NotAcquired`], or a timeout error when `required`.
    /// Bad input is an error at once, and nothing starts.
    pub fn run(
        &mut self,
        id: u32,
        key: &str,
        options: &LockOptions,
        required: bool,
        out: &mut Output,
    ) -> Result<(), SnatchError> {
        self.acquire(id, key, options, Purpose::Run, required, out)
    }

    /// Call `id` inside the fn of runs of the caller's ([`Reentering`]): when its calling context holds some of its
    /// keys, what it comes to ([`reentry`]) is told, and true: refused ([`SnatchError::Reentrant`], nothing waits), not
    /// acquired, or fn invoked under the held locks as a nested run (its end told once fn settled, nothing released;
    /// the runs that hold the locks give them back once it ended). False when the context holds none of them: the
    /// call is to start as any.
    pub fn reenter(&mut self, id: u32, call: &Reentering, out: &mut Output) -> bool {
        let found: Vec<_> = call.keys.iter().map(|key| self.held_within(&call.within, key)).collect();
        let held: Vec<bool> = found.iter().map(Option::is_some).collect();
        match reentry(&held, call.purpose, call.waits, call.reentrant) {
            Reentry::Acquire => return false,
            Reentry::Refused { index, mixed } => {
                let key = call.keys[index].clone();
                out.told.push((id, Outcome::Failed(SnatchError::Reentrant { key, mixed })));
            }
            Reentry::NotAcquired => out.told.push((id, Outcome::NotAcquired)),
            Reentry::Nested => {
                let held: Vec<_> = found.into_iter().flatten().collect();
                for (root, _) in &held {
                    let inner = self.nested.entry(*root).or_default();
                    if !inner.contains(&id) {
                        inner.push(id);
                    }
                }
                self.runs.start(id, Purpose::Run);
                let step = self.runs.acquired(id, Ok(Some(Hold::Nested { held, set: call.set })));
                out.told.extend(step.outcome.map(|outcome| (id, outcome)));
            }
        }
        true
    }

    /// The lock of `key` held by one of the runs `within` while its fn runs, and the run that holds it.
    fn held_within(&self, within: &[u32], key: &str) -> Option<(u32, Arc<Lease>)> {
        within.iter().find_map(|&id| self.runs.running(id)?.lock_of(id, key))
    }

    /// Starts run `id` of the caller's fn as `holder` of `key` (a semaphore's permit, a read or the write lock of a
    /// read-write lock), waiting up to `options.wait` (a timeout error when it ran out); then as [`Runner::run`].
    pub fn run_as(
        &mut self,
        id: u32,
        key: &str,
        holder: Holder,
        options: &LockOptions,
        out: &mut Output,
    ) -> Result<(), SnatchError> {
        options.validate()?;
        if let Some(attempt) = DirectAcquire::held(&self.locker, key, holder, options)? {
            let busy = self.locker.enter()?;
            self.runs.start(id, Purpose::Run);
            out.calls.push(Call::Acquire { id, purpose: Purpose::Run, required: true, attempt, busy });
            return Ok(());
        }
        let busy = self.locker.enter()?;
        self.runs.start(id, Purpose::Run);
        let (locker, key, options) = (self.locker.clone(), key.to_owned(), options.clone());
        self.acquire_on_runtime(id, Purpose::Run, true, busy, async move {
            locker.acquire_as(&key, holder, &options).await.map(Some)
        });
        Ok(())
    }

    /// Starts run `id` of the caller's fn under every key of `keys` or none ([`Locker::lock_all`], waiting up to
    /// `options.wait` in all): fn is called with the fence of each ([`Invoked::Set`]); a loss of any lease is the run's.
    pub fn run_all(&mut self, id: u32, keys: Vec<String>, options: &LockOptions) -> Result<(), SnatchError> {
        self.locker.checked_set(&keys, options)?;
        let busy = self.locker.enter()?;
        self.runs.start(id, Purpose::Run);
        let (locker, options, post) = (self.locker.clone(), options.clone(), self.post.clone());
        self.runtime.spawn(async move {
            let result = locker.lock_all(&keys, &options).await;
            post_or_undo(&*post, Input::AcquiredSet { id, result, busy });
        });
        Ok(())
    }

    /// Starts run `id` of the caller's fn for the shared result of `key` (`locker.shared`): the callers of this process
    /// share one turn at a time ([`Rounds`]); a turn finds the result stored ([`Outcome::Stored`], fn is not called),
    /// or takes the lock and calls fn, whose result [`Runner::shared_done`] stores. Waits up to `options.wait` for a
    /// round under way (a timeout error then). `store_errors`: a stored error of any round is taken.
    pub fn run_shared(
        &mut self,
        id: u32,
        key: &str,
        options: &LockOptions,
        store_errors: bool,
    ) -> Result<(), SnatchError> {
        self.locker.checked_keys(key, options)?;
        self.locker.check_shared()?;
        let caller = Caller { id, deadline: Instant::now() + options.wait, options: options.clone(), store_errors };
        if self.locker.is_closed() {
            return Err(SnatchError::Closed);
        }
        self.runs.start(id, Purpose::Run);
        if self.rounds.join(key, caller.clone()) {
            let (post, wait) = (self.post.clone(), options.wait);
            self.runtime.spawn(async move {
                tokio::time::sleep(wait).await;
                let _ = post.post(Input::SharedWaited(id));
            });
            return Ok(());
        }
        let mut told = Vec::new();
        self.turn(key.to_owned(), caller, &mut told);
        debug_assert!(told.is_empty(), "a first turn starts or throws");
        Ok(())
    }

    /// The fn of shared run `id` settled: what it came to (`result`: an error's bytes or the value's, `None` when
    /// nothing is to be stored) is stored for `ttl` while the lock is still ours (not when the lease lapsed), then the
    /// lock is given back and the run ends; the round's other callers get what was stored.
    pub fn shared_done(&mut self, id: u32, result: Option<(bool, Vec<u8>)>, ttl: Duration) {
        let _runtime = self.runtime.enter();
        let Some(hold) = self.runs.task_done(id) else { return };
        let Hold::Lease { lease, busy, .. } = hold else {
            return self.give_back(id, hold);
        };
        let kept = result.filter(|_| !lease.lapsed());
        let (locker, post) = (self.locker.clone(), self.post.clone());
        self.runtime.spawn(async move {
            let mut entry = None;
            if let Some((error, payload)) = kept {
                if locker.store_shared(&lease, error, payload.clone(), ttl).await == Ok(true) {
                    entry = Some(Entry { error, fence: lease.fence(), payload });
                }
            }
            let _ = lease.release().await;
            drop(busy);
            let _ = post.post(Input::SharedEnded { id, entry });
        });
    }

    /// The caller of shared run `id` stopped waiting for its process's round (its signal aborted): a waiter is
    /// forgotten, and told nothing more (true); a run that took its turn goes on (false): the round is the other
    /// callers' too.
    pub fn stop_waiting(&mut self, id: u32) -> bool {
        let waited = self.rounds.leave(id).is_some();
        if waited {
            let _ = self.runs.acquired(id, Ok(None));
        }
        waited
    }

    /// Starts acquisition `id` of `key` in one attempt, for a lock the caller holds ([`Outcome::Locked`], then a
    /// loss is told as [`Outcome::Lost`]), or [`Outcome::NotAcquired`].
    pub fn try_lock(&mut self, id: u32, key: &str, options: &LockOptions, out: &mut Output) -> Result<(), SnatchError> {
        let once = LockOptions { wait: Duration::ZERO, ..options.clone() };
        self.acquire(id, key, &once, Purpose::Lock, false, out)
    }

    /// Starts acquisition `id` of `key`, waiting up to `options.wait`, for a lock the caller holds; a timeout error
    /// when waiting ran out.
    pub fn lock(&mut self, id: u32, key: &str, options: &LockOptions) -> Result<(), SnatchError> {
        let busy = self.enter(key, options)?;
        self.runs.start(id, Purpose::Lock);
        let (locker, key, options) = (self.locker.clone(), key.to_owned(), options.clone());
        self.acquire_on_runtime(
            id,
            Purpose::Lock,
            true,
            busy,
            async move { locker.lock(&key, &options).await.map(Some) },
        );
        Ok(())
    }

    /// Starts acquisition `id` of `key` as `holder` (a semaphore's permit, a read or the write lock of a read-write
    /// lock), for a lock the caller holds: one attempt, or waiting up to `options.wait` when `wait` (a timeout error
    /// when waiting ran out).
    pub fn acquire_as(
        &mut self,
        id: u32,
        key: &str,
        holder: Holder,
        options: &LockOptions,
        wait: bool,
        out: &mut Output,
    ) -> Result<(), SnatchError> {
        options.validate()?;
        if !wait {
            if let Some(attempt) = DirectAcquire::held(&self.locker, key, holder, options)? {
                let busy = self.locker.enter()?;
                self.runs.start(id, Purpose::Lock);
                out.calls.push(Call::Acquire { id, purpose: Purpose::Lock, required: false, attempt, busy });
                return Ok(());
            }
        }
        let busy = self.locker.enter()?;
        self.runs.start(id, Purpose::Lock);
        let (locker, key, options) = (self.locker.clone(), key.to_owned(), options.clone());
        self.acquire_on_runtime(id, Purpose::Lock, wait, busy, async move {
            if wait {
                locker.acquire_as(&key, holder, &options).await.map(Some)
            } else {
                locker.try_acquire_as(&key, holder, &options).await
            }
        });
        Ok(())
    }

    /// The fn of run `id` settled (`failure`: what it threw or rejected with): its lock is given back, and the run
    /// ends once it is. A schedule's attempt tells its scheduler, which records how it ended, gives the locks back
    /// and tells the runner that it ended ([`Input::Ended`]).
    pub fn task_done(&mut self, id: u32, failure: Option<String>, out: &mut Output) {
        let _runtime = self.runtime.enter();
        let Some(hold) = self.runs.task_done(id) else { return };
        if self.nested.contains_key(&id) {
            // Runs nested in it still run under its lock: given back once the last ended.
            self.parked.insert(id, hold);
            return;
        }
        self.settled(id, hold, failure, out);
    }

    /// The fn of run `id` settled (with `failure`) and no run nested in it runs: its lock `hold` is given back, and
    /// the run ends once it is; a nested run ends at once, and the run it was nested in gives its lock back if it
    /// waited only for it.
    fn settled(&mut self, id: u32, hold: Hold, failure: Option<String>, out: &mut Output) {
        match hold {
            Hold::Nested { held, .. } => {
                out.told.extend(self.runs.released(id).map(|outcome| (id, outcome)));
                for (root, _) in held {
                    let Some(inner) = self.nested.get_mut(&root) else { continue };
                    inner.retain(|&nested| nested != id);
                    if inner.is_empty() {
                        self.nested.remove(&root);
                        if let Some(hold) = self.parked.remove(&root) {
                            self.settled(root, hold, None, out);
                        }
                    }
                }
            }
            Hold::Lease { lease, busy, direct } => match DirectRelease::of(&self.locker, &lease) {
                Some(release) => out.calls.push(Call::Release { id, purpose: Purpose::Run, release, busy }),
                // minHold keeps the key, or a permit: the lease's own release does it.
                None => self.give_back(id, Hold::Lease { lease, busy, direct }),
            },
            hold @ Hold::Set { .. } => self.give_back(id, hold),
            Hold::Term(term) => {
                self.terms.remove(&term.campaign);
                let lost = term.lease.lapsed();
                let TermHold { lease, settled, .. } = *term;
                if let Err(FnSettled { failure, .. }) = settled.send(FnSettled { id, failure, lost }) {
                    // Its campaign is gone (the locker is closing): the lock goes back here, and the term ends.
                    let (fence, post) = (lease.fence(), self.post.clone());
                    let reason = Revoked::of(lost, failure.is_some(), Some(Revoked::Stopped));
                    self.runtime.spawn(async move {
                        let _ = lease.release().await;
                        let _ = post.post(Input::Revoked { id, fence, reason });
                    });
                }
            }
            Hold::Attempt(attempt) => {
                self.attempts.remove(&(attempt.schedule, attempt.stored.clone(), attempt.attempt));
                let lost = attempt.lapsed();
                let fence = attempt.lease().fence();
                let (settled, locks) = attempt.into_settled();
                if let Err(Some(FnSettled { failure, .. })) = settled.send(Some(FnSettled { id, failure, lost })) {
                    // Its scheduler is gone (the locker is closing): the locks go back here, and the run ends as fn did.
                    let ending = match (lost, failure) {
                        (true, _) => Ending::Lost,
                        (false, Some(failure)) => Ending::Failed(failure),
                        (false, None) => Ending::Ok,
                    };
                    let ended = Ended { fence, ending, duration: Duration::ZERO };
                    let post = self.post.clone();
                    self.runtime.spawn(async move {
                        locks.release().await;
                        let _ = post.post(Input::Ended { id, ended });
                    });
                }
            }
        }
    }

    /// Starts operation `id`: the caller gives lock `lock` back (the key stays for the rest of minHold, if any).
    /// Answers whether it was still ours.
    pub fn release(&mut self, id: u32, lock: u32, out: &mut Output) {
        let _runtime = self.runtime.enter();
        let Some(hold) = self.runs.release_lock(lock) else {
            out.told.push((id, Outcome::Done(false)));
            return;
        };
        let lease = hold.lease().clone();
        let busy = self.locker.releasing();
        match DirectRelease::of(&self.locker, &lease) {
            Some(release) => out.calls.push(Call::Release { id, purpose: Purpose::Lock, release, busy: Some(busy) }),
            None => self.answer(id, async move {
                let released = lease.release().await;
                drop(busy);
                Ok(Outcome::Done(released?))
            }),
        }
    }

    /// Starts acquisition of every key of `keys` or none ([`Locker::lock_all`]), as locks `ids` (one per key, in order)
    /// the caller holds: each is told its lock, or the set's error. Bad input is an error at once, and nothing starts.
    pub fn lock_all(&mut self, ids: Vec<u32>, keys: Vec<String>, options: &LockOptions) -> Result<(), SnatchError> {
        if ids.len() != keys.len() {
            return Err(SnatchError::type_arg("a set of locks needs one id per key"));
        }
        self.locker.checked_set(&keys, options)?;
        let busy = self.locker.enter()?;
        ids.iter().for_each(|&id| self.runs.start(id, Purpose::Lock));
        let (locker, options, post) = (self.locker.clone(), options.clone(), self.post.clone());
        self.runtime.spawn(async move {
            let result = locker.lock_all(&keys, &options).await;
            post_or_undo(&*post, Input::AcquiredAll { ids, result, busy });
        });
        Ok(())
    }

    /// The caller hands lock `lock` over to another owner ([`Lease::hand_over`]): it is no longer held, renewed nor
    /// released here. The validity left; `None` when it was no longer held. Only a lock can be handed over, not a
    /// semaphore's permit nor a read-write lock's.
    pub fn hand_over(&mut self, lock: u32) -> Result<Option<Duration>, SnatchError> {
        let Some(hold) = self.runs.lock(lock) else { return Ok(None) };
        if hold.lease().keys().kind != Kind::Lock {
            return Err(SnatchError::type_arg(
                "only a lock can be handed over, not a semaphore's permit or a read-write lock's",
            ));
        }
        Ok(self.runs.release_lock(lock).and_then(|hold| hold.lease().hand_over()))
    }

    /// Starts acquisition `id`: continue the lock of `key` handed over with `token` and `fence` ([`Locker::adopt`]),
    /// for a lock the caller holds, or [`Outcome::NotAcquired`] when it does not hold that token any more.
    pub fn adopt(
        &mut self,
        id: u32,
        key: &str,
        token: &str,
        fence: i64,
        options: &LockOptions,
    ) -> Result<(), SnatchError> {
        check_handle(token, fence)?;
        let busy = self.enter(key, options)?;
        self.runs.start(id, Purpose::Lock);
        let (locker, key, token, options) = (self.locker.clone(), key.to_owned(), token.to_owned(), options.clone());
        self.acquire_on_runtime(id, Purpose::Lock, false, busy, async move {
            locker.adopt(&key, &token, fence, &options).await
        });
        Ok(())
    }

    /// Starts operation `id`: sets lock `lock`'s lease to `ttl` from now (default: its acquisition's). Answers
    /// whether it was still ours (when not, its loss is told too). A bad `ttl` is an error at once.
    pub fn extend(&mut self, id: u32, lock: u32, ttl: Option<Duration>) -> Result<(), SnatchError> {
        ttl.map(validate_ttl).transpose()?;
        let lease = self.runs.lock(lock).map(|hold| hold.lease().clone());
        self.answer(id, async move {
            Ok(Outcome::Done(match lease {
                Some(lease) => lease.extend(ttl).await?,
                None => false,
            }))
        });
        Ok(())
    }

    /// Whether the lock of run `id` (while its fn runs) or lock `id` (while the caller holds it) was taken by a direct
    /// call: the package's own word that the direct connection is on (diagnostics).
    pub fn went_direct(&self, id: u32) -> bool {
        self.runs.held(id).is_some_and(Held::direct)
    }

    /// How long the lock of run `id` (while its fn runs) or lock `id` (while held) is still guaranteed; zero once
    /// lost or released.
    pub fn remaining(&self, id: u32) -> Duration {
        self.runs.held(id).map_or(Duration::ZERO, Hold::remaining)
    }

    /// Starts operation `id`: what Redis holds for `key`.
    pub fn inspect(&mut self, id: u32, key: &str) {
        let (locker, key) = (self.locker.clone(), key.to_owned());
        self.answer(id, async move { Ok(Outcome::Inspected(locker.inspect(&key).await?)) });
    }

    /// Starts operation `id`: deletes `key`'s lock whoever holds it. Answers whether there was one.
    pub fn force_release(&mut self, id: u32, key: &str) {
        let (locker, key) = (self.locker.clone(), key.to_owned());
        self.answer(id, async move { Ok(Outcome::Done(locker.force_release(&key).await?)) });
    }

    /// Starts operation `id`: closes the locker (see [`Locker::close`]): the locks the caller held are released. The
    /// fns running get `drain` to finish (`None`: all the time they take); then their signals abort
    /// ([`Locker::cut`], [`Input::Cut`]).
    pub fn close(&mut self, id: u32, drain: Option<Duration>) {
        self.locker.stop_taking();
        let (locker, post) = (self.locker.clone(), self.post.clone());
        self.runtime.spawn(async move {
            let closing = locker.close();
            tokio::pin!(closing);
            let drained = async {
                match drain {
                    Some(drain) => tokio::time::sleep(drain).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = &mut closing => {}
                () = drained => {
                    locker.cut();
                    let _ = post.post(Input::Cut);
                    closing.await;
                }
            }
            let _ = post.post(Input::Closed(id));
        });
    }

    /// Takes the replies of direct calls (or why they have none): each call's step of the lifecycle.
    pub fn settle(&mut self, replies: Vec<(Call, CallReply)>, out: &mut Output) {
        let _runtime = self.runtime.enter();
        for (call, reply) in replies {
            self.settle_call(call, reply, out);
        }
    }

    /// Takes back a direct call that could not be sent (no socket open for it now): it goes on over the locker's
    /// own connection, as a call whose socket failed does.
    pub fn unsent(&mut self, call: Call, out: &mut Output) {
        let _runtime = self.runtime.enter();
        self.settle_call(call, Err(NoReply::Dropped), out);
    }

    /// Takes results from the runtime, each its step of the lifecycle, up to the first that hands the caller's code a
    /// lease (an fn to call, a lock taken): those are to be told before the next is taken, so that each lease is
    /// checked still guaranteed just before its code starts, not before the code started for the ones ahead of it
    /// (a batch may start several schedules' attempts). Whether any are left.
    pub fn handle_until_started(&mut self, inputs: &mut impl Iterator<Item = Input>, out: &mut Output) -> bool {
        for input in inputs {
            let told = out.told.len();
            self.handle(input, out);
            if out.told[told..]
                .iter()
                .any(|(_, outcome)| matches!(outcome, Outcome::Invoke { .. } | Outcome::Locked { .. }))
            {
                return true;
            }
        }
        false
    }

    /// Takes a result from the runtime: its step of the lifecycle.
    pub fn handle(&mut self, input: Input, out: &mut Output) {
        let _runtime = self.runtime.enter();
        let told = &mut out.told;
        match input {
            Input::Acquired { id, purpose, required, result, busy } => {
                self.acquired(id, purpose, required, result, Some(busy), false, told);
            }
            Input::AcquiredAll { ids, result, busy } => {
                match result.and_then(|leases| self.in_time(&leases).map(|()| leases)) {
                    // Checked as a set above: every lock of it, or none.
                    Ok(leases) => ids.into_iter().zip(leases).for_each(|(id, lease)| {
                        self.take(id, Purpose::Lock, Ok(Some(lease)), None, false, told);
                    }),
                    Err(error) => ids.into_iter().for_each(|id| {
                        self.take(id, Purpose::Lock, Err(error.clone()), None, false, told);
                    }),
                }
                drop(busy);
            }
            Input::AcquiredSet { id, result, busy } => {
                let result = result.and_then(|leases| self.in_time(&leases).map(|()| leases));
                if let Ok(leases) = &result {
                    leases.iter().for_each(|lease| self.watch(id, lease));
                }
                let held = result.map(|leases| Some(Hold::Set { leases, busy: Some(busy) }));
                let step = self.runs.acquired(id, held);
                if let Some(hold) = step.release {
                    release_in_background(hold, self.locker.releasing());
                }
                told.extend(step.outcome.map(|outcome| (id, outcome)));
            }
            Input::Shared { id, turn, busy } => match turn {
                Ok(Turn::Stored(entry)) => {
                    // The turn ends without the lock, and without calling fn.
                    let _ = self.runs.acquired(id, Ok(None));
                    told.push((id, Outcome::Stored { error: entry.error, bytes: entry.payload.clone() }));
                    drop(busy);
                    self.round_ended(id, RoundEnd::Stored(entry), told);
                }
                Ok(Turn::Run(lease)) => {
                    if !self.acquired(id, Purpose::Run, true, Ok(Some(lease)), Some(busy), false, told) {
                        // As a turn that did not get the lock in time: the round's next caller takes a turn.
                        self.round_ended(id, RoundEnd::Nothing, told);
                    }
                }
                Err(error) => {
                    let end = match error {
                        SnatchError::Timeout { .. } => RoundEnd::Nothing,
                        _ => RoundEnd::Failed(error.clone()),
                    };
                    self.acquired(id, Purpose::Run, true, Err(error), Some(busy), false, told);
                    self.round_ended(id, end, told);
                }
            },
            Input::SharedEnded { id, entry } => {
                told.extend(self.runs.released(id).map(|outcome| (id, outcome)));
                self.round_ended(id, entry.map_or(RoundEnd::Nothing, RoundEnd::Stored), told);
            }
            Input::SharedWaited(id) => {
                if let Some((key, caller)) = self.rounds.leave(id) {
                    let error = timed_out(&key, &caller);
                    told.extend(self.runs.acquired(id, Err(error)).outcome.map(|outcome| (id, outcome)));
                }
            }
            Input::Term { campaign, lease, settled } => {
                // As an attempt's: fn starts only while the lease is still guaranteed. Not called, the term ends at
                // once (the campaign hears of no end, `settled` being dropped) and the campaign goes on.
                if !lease.lapsed() {
                    self.watch_term(campaign, lease, settled, told);
                }
            }
            Input::EndTerm { campaign, reason } => {
                let Some(&id) = self.terms.get(&campaign) else { return };
                told.extend(self.runs.abort(id, reason).map(|outcome| (id, outcome)));
            }
            Input::Revoked { id, fence, reason } => {
                if self.runs.released(id).is_some() {
                    told.push((id, Outcome::Revoked { fence, reason }));
                }
            }
            Input::Lost(id) => {
                let stalled = self.runs.held(id).is_some_and(Hold::stalled);
                told.extend(self.runs.lost(id, stalled).map(|outcome| (id, outcome)));
                // The runs nested in it ran under that lease too.
                for &inner in self.nested.get(&id).into_iter().flatten() {
                    told.extend(self.runs.lost(inner, stalled).map(|outcome| (inner, outcome)));
                }
            }
            Input::Released(id) => told.extend(self.runs.released(id).map(|outcome| (id, outcome))),
            Input::Tell(id, outcome) => told.push((id, outcome)),
            Input::Closed(id) => {
                self.runs.closed();
                told.push((id, Outcome::Done(true)));
            }
            Input::Cut => told.extend(self.runs.cut()),
            Input::Attempt { scheduled, run, claim, settled } => {
                // fn starts only while both leases are still guaranteed: its process may have stood still (stopped,
                // starved) between the claim and now, and another replica may have taken the attempt over meanwhile.
                if claim.lapsed() || run.as_ref().is_some_and(|run| run.lapsed()) {
                    let _ = settled.send(None);
                    return;
                }
                let (watched, claimed) = (run.clone(), claim.clone());
                let (schedule, attempt) = (scheduled.schedule, scheduled.attempt);
                let stored = scheduled.stored.as_ref().map(|run| run.id.clone());
                let hold = AttemptHold { schedule, attempt, stored: stored.clone(), run, claim, settled };
                let (id, call) = self.runs.adopt(Hold::Attempt(Box::new(hold)), Invoked::Attempt(scheduled));
                self.attempts.insert((schedule, stored, attempt), id);
                // Either lease lost means another replica may run the attempt: the fn's signal aborts.
                if let Some(run) = &watched {
                    self.watch(id, run);
                }
                self.watch(id, &claimed);
                told.push((id, call));
            }
            Input::Abort { schedule, stored, attempt, reason } => {
                let Some(&id) = self.attempts.get(&(schedule, stored, attempt)) else { return };
                told.extend(self.runs.abort(id, reason).map(|outcome| (id, outcome)));
            }
            Input::Ended { id, ended } => {
                if self.runs.released(id).is_some() {
                    told.push((id, Outcome::Attempted(ended)));
                }
            }
        }
    }

    /// The caller is gone (its JS environment torn down): nothing is told any more; every lock held for it is given
    /// back and the locker closes, which stops its schedules.
    pub fn abandon(&mut self) {
        let _runtime = self.runtime.enter();
        for hold in self.runs.abandon().into_iter().chain(self.parked.drain().map(|(_, hold)| hold)) {
            release_in_background(hold, self.locker.releasing());
        }
        self.nested.clear();
        let locker = self.locker.clone();
        self.runtime.spawn(async move { locker.close().await });
    }

    /// The keys of `key` checked with `options`, and the acquisition counted on the locker.
    fn enter(&self, key: &str, options: &LockOptions) -> Result<Busy, SnatchError> {
        self.locker.checked_keys(key, options)?;
        self.locker.enter()
    }

    /// Starts acquisition `id` of `key` for `purpose`: by a direct call when it can go by one, else on the locker's
    /// own connection.
    #[allow(clippy::too_many_arguments)]
    fn acquire(
        &mut self,
        id: u32,
        key: &str,
        options: &LockOptions,
        purpose: Purpose,
        required: bool,
        out: &mut Output,
    ) -> Result<(), SnatchError> {
        if let Some(attempt) = DirectAcquire::new(&self.locker, key, options)? {
            let busy = self.locker.enter()?;
            self.runs.start(id, purpose);
            out.calls.push(Call::Acquire { id, purpose, required, attempt, busy });
            return Ok(());
        }
        let busy = self.enter(key, options)?;
        let (locker, key, options) = (self.locker.clone(), key.to_owned(), options.clone());
        self.runs.start(id, purpose);
        self.acquire_on_runtime(id, purpose, required, busy, async move {
            if required {
                locker.lock(&key, &options).await.map(Some)
            } else {
                locker.try_lock(&key, &options).await
            }
        });
        Ok(())
    }

    /// Shared run `caller` takes a turn at `key`'s result, on the runtime ([`Locker::shared_turn`]), waiting up to its
    /// options' `wait`; its round's waiters wait for what it comes to.
    fn turn(&mut self, key: String, caller: Caller, told: &mut Told) {
        let id = caller.id;
        let busy = match self.locker.enter() {
            Ok(busy) => busy,
            Err(error) => {
                told.extend(self.runs.acquired(id, Err(error.clone())).outcome.map(|outcome| (id, outcome)));
                return self.round_ended(id, RoundEnd::Failed(error), told);
            }
        };
        let (locker, post) = (self.locker.clone(), self.post.clone());
        self.runtime.spawn(async move {
            let turn = locker.shared_turn(&key, &caller.options, caller.store_errors).await;
            post_or_undo(&*post, Input::Shared { id, turn, busy });
        });
    }

    /// The round whose turn shared run `id` took came to `end`: its waiters get the stored result, or its error, or the
    /// next of them takes a turn.
    fn round_ended(&mut self, id: u32, end: RoundEnd, told: &mut Told) {
        let Some(after) = self.rounds.ended(id, &end, Instant::now()) else { return };
        if let RoundEnd::Stored(entry) = &end {
            for waiter in after.stored {
                let _ = self.runs.acquired(waiter, Ok(None));
                told.push((waiter, Outcome::Stored { error: entry.error, bytes: entry.payload.clone() }));
            }
        }
        for (waiter, error) in after.failed {
            told.extend(self.runs.acquired(waiter, Err(error)).outcome.map(|outcome| (waiter, outcome)));
        }
        if let Some((key, next)) = after.next {
            self.turn(key, next, told);
        }
    }

    /// Runs `acquisition` of run or lock `id` (started) on the runtime; its result comes back as an input. `required`:
    /// the call waits for the lock (a timeout error without it).
    fn acquire_on_runtime(
        &self,
        id: u32,
        purpose: Purpose,
        required: bool,
        busy: Busy,
        acquisition: impl Future<Output = Result<Option<Arc<Lease>>, SnatchError>> + Send + 'static,
    ) {
        let post = self.post.clone();
        self.runtime.spawn(async move {
            let result = acquisition.await;
            post_or_undo(&*post, Input::Acquired { id, purpose, required, result, busy });
        });
    }

    /// The step of the lifecycle the reply of `call` (or its absence) comes to: a call to send again goes in `out`.
    fn settle_call(&mut self, call: Call, reply: CallReply, out: &mut Output) {
        let told = &mut out.told;
        match call {
            Call::Acquire { id, purpose, required, attempt, busy } => {
                // For the error of a withLock that did not get the lock (settling consumes the attempt).
                let key = required.then(|| attempt.key().to_owned());
                match attempt.settle(reply) {
                    AcquireSettled::Done(result) => {
                        self.acquired(id, purpose, required, required_lock(result, key), Some(busy), true, told);
                    }
                    AcquireSettled::Resend(attempt) => {
                        out.calls.push(Call::Acquire { id, purpose, required, attempt, busy })
                    }
                    AcquireSettled::Fallback(attempt) => {
                        self.stale.store(true, Ordering::SeqCst);
                        self.acquire_on_runtime(id, purpose, required, busy, async move {
                            required_lock(attempt.fallback().await, key)
                        });
                    }
                }
            }
            Call::Release { id, purpose, release, busy } => match (release.settle(reply), purpose) {
                // As on the locker's connection, a failed release does not fail the run: the key expires with its
                // lease.
                (ReleaseSettled::Done(_), Purpose::Run) => {
                    told.extend(self.runs.released(id).map(|outcome| (id, outcome)));
                    drop(busy);
                }
                (ReleaseSettled::Done(released), Purpose::Lock) => {
                    told.push((id, answered(released.map(Outcome::Done))))
                }
                (ReleaseSettled::Resend(release), purpose) => {
                    out.calls.push(Call::Release { id, purpose, release, busy })
                }
                (ReleaseSettled::Fallback(release), purpose) => {
                    self.stale.store(true, Ordering::SeqCst);
                    let post = self.post.clone();
                    self.runtime.spawn(async move {
                        let released = release.fallback().await;
                        let input = match purpose {
                            Purpose::Run => Input::Released(id),
                            Purpose::Lock => Input::Tell(id, answered(released.map(Outcome::Done))),
                        };
                        let _ = post.post(input);
                        drop(busy);
                    });
                }
            },
        }
    }

    /// Acquisition `id` for `purpose` came to `result` (by a direct call when `direct`; `busy` counted it): taken
    /// ([`Runner::take`]), but a lease that lapsed meanwhile counts as none (`in_time`): a timeout error when
    /// `required`, else not acquired; false then.
    #[allow(clippy::too_many_arguments)]
    fn acquired(
        &mut self,
        id: u32,
        purpose: Purpose,
        required: bool,
        result: Result<Option<Arc<Lease>>, SnatchError>,
        busy: Option<Busy>,
        direct: bool,
        told: &mut Told,
    ) -> bool {
        let (result, in_time) = match result {
            Ok(Some(lease)) => match self.in_time(std::slice::from_ref(&lease)) {
                Ok(()) => (Ok(Some(lease)), true),
                Err(error) if required => (Err(error), false),
                Err(_) => (Ok(None), false),
            },
            result => (result, true),
        };
        self.take(id, purpose, result, busy, direct, told);
        in_time
    }

    /// Run or lock `id` for `purpose` takes `result`, its leases already checked in time: the step of the lifecycle,
    /// with the lease watched for loss.
    fn take(
        &mut self,
        id: u32,
        purpose: Purpose,
        result: Result<Option<Arc<Lease>>, SnatchError>,
        busy: Option<Busy>,
        direct: bool,
        told: &mut Told,
    ) {
        if let Ok(Some(lease)) = &result {
            self.watch(id, lease);
        }
        // A run counts on the locker until its lock is given back; a lock the caller holds does not (`close` releases
        // it).
        let busy = busy.filter(|_| purpose == Purpose::Run);
        let step = self.runs.acquired(id, result.map(|lease| lease.map(|lease| Hold::Lease { lease, busy, direct })));
        if let Some(hold) = step.release {
            release_in_background(hold, self.locker.releasing());
        }
        told.extend(step.outcome.map(|outcome| (id, outcome)));
    }

    /// Whether `leases`, just acquired for one call, are each still guaranteed. The caller's process may have stood
    /// still (stopped, starved) between the acquisition and now, long enough for a lease to lapse and another owner to
    /// take the key: then fn must not be called, nor the lock handed over. Each is given back at once (owner-checked,
    /// minHold or not), and the call did not get its locks in time (a timeout error).
    fn in_time(&self, leases: &[Arc<Lease>]) -> Result<(), SnatchError> {
        let Some(late) = leases.iter().find(|lease| lease.lapsed()) else { return Ok(()) };
        let error = not_acquired(late.key(), late.acquired_at().elapsed());
        let (leases, releasing) = (leases.to_vec(), self.locker.releasing());
        self.runtime.spawn(async move {
            futures_util::future::join_all(leases.iter().map(|lease| lease.give_up())).await;
            drop(releasing);
        });
        Err(error)
    }

    /// Campaign `campaign`'s term under `lease` begins: a run of its fn, which tells `settled` once fn settled.
    fn watch_term(&mut self, campaign: u32, lease: Arc<Lease>, settled: oneshot::Sender<FnSettled>, told: &mut Told) {
        let hold = TermHold { campaign, lease: lease.clone(), settled };
        let (id, call) = self.runs.adopt(Hold::Term(Box::new(hold)), Invoked::Term(campaign));
        self.terms.insert(campaign, id);
        self.watch(id, &lease);
        told.push((id, call));
    }

    /// Has the loss of `lease` told to run or lock `id` (through the runtime: a loss is noticed there).
    fn watch(&self, id: u32, lease: &Lease) {
        let post = self.post.clone();
        lease.on_lost(move || {
            let _ = post.post(Input::Lost(id));
        });
    }

    /// Gives back the lock of run `id` on the runtime; the run ends once it is.
    fn give_back(&self, id: u32, hold: Hold) {
        let post = self.post.clone();
        self.runtime.spawn(async move {
            release(hold).await;
            let _ = post.post(Input::Released(id));
        });
    }

    /// Runs `op` on the runtime: the caller hears its answer, or its error, as operation `id`'s.
    pub fn answer(&self, id: u32, op: impl Future<Output = Result<Outcome, SnatchError>> + Send + 'static) {
        let post = self.post.clone();
        self.runtime.spawn(async move {
            let outcome = answered(op.await);
            let _ = post.post(Input::Tell(id, outcome));
        });
    }
}

/// What a run that needed the lock comes to without it: a timeout error, when `key` is the required run's key.
fn required_lock(
    result: Result<Option<Arc<Lease>>, SnatchError>,
    key: Option<String>,
) -> Result<Option<Arc<Lease>>, SnatchError> {
    match (result, key) {
        (Ok(None), Some(key)) => Err(not_acquired(&key, Duration::ZERO)),
        (result, _) => result,
    }
}

/// An operation's answer, or its error.
fn answered(result: Result<Outcome, SnatchError>) -> Outcome {
    result.unwrap_or_else(Outcome::Failed)
}

/// Gives `hold` back (its busy count goes with it).
async fn release(hold: Hold) {
    match hold {
        Hold::Lease { lease, busy, .. } => {
            let _ = lease.release().await;
            drop(busy);
        }
        Hold::Set { leases, busy } => {
            futures_util::future::join_all(leases.iter().map(|lease| lease.release())).await;
            drop(busy);
        }
        Hold::Attempt(attempt) => attempt.release().await,
        Hold::Term(term) => drop(term.lease.release().await),
        // The runs it is nested in give their locks back.
        Hold::Nested { .. } => {}
    }
}

/// Gives `hold` back in the background, for nobody, counted on the locker by `releasing` (a closing locker closes its
/// connections only after it: a release may take two commands, see `Node::release`). Within the Tokio runtime.
fn release_in_background(hold: Hold, releasing: Busy) {
    tokio::spawn(async move {
        release(hold).await;
        drop(releasing);
    });
}
