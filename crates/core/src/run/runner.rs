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
use crate::run::hold::{FnSettled, Hold, OccurrenceHold};
use crate::run::input::{post_or_undo, Input, Post};
use rustc_hash::FxHashMap;
use snatch_protocol::attempt::{Ended, Ending};
use snatch_protocol::direct::session::{CallReply, NoReply};
use snatch_protocol::keys::Kind;
use snatch_protocol::run::{Outcome, Purpose, Runs};
use snatch_protocol::schedule::Attempt;
use snatch_protocol::SnatchError;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Handle;

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

/// The runs and locks of one locker, and how they go.
pub struct Runner {
    locker: Locker,
    runs: Runs<Hold>,
    /// The runs of schedules' attempts, by schedule and attempt (for their aborts).
    attempts: FxHashMap<(u32, Attempt), u32>,
    post: Arc<dyn Post>,
    runtime: Handle,
    /// Set when a direct call had to go over the locker's own connection: on a cluster, the slot map may be out of
    /// date.
    stale: Arc<AtomicBool>,
}

impl Runner {
    /// The runner of `locker`, whose work on the runtime (`runtime`) comes back through `post`.
    pub fn new(locker: Locker, post: Arc<dyn Post>, runtime: Handle) -> Self {
        Self { locker, runs: Runs::default(), attempts: FxHashMap::default(), post, runtime, stale: Arc::default() }
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
    /// fn ([`Outcome::Call`]), and once it settled ([`Runner::task_done`]) give the lock back and end
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
        self.acquire_on_runtime(id, Purpose::Lock, busy, async move { locker.lock(&key, &options).await.map(Some) });
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
    ) -> Result<(), SnatchError> {
        options.validate()?;
        let busy = self.locker.enter()?;
        self.runs.start(id, Purpose::Lock);
        let (locker, key, options) = (self.locker.clone(), key.to_owned(), options.clone());
        self.acquire_on_runtime(id, Purpose::Lock, busy, async move {
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
        match hold {
            Hold::Lease { lease, busy, direct } => match DirectRelease::of(&self.locker, &lease) {
                Some(release) => out.calls.push(Call::Release { id, purpose: Purpose::Run, release, busy }),
                // minHold keeps the key, or a permit: the lease's own release does it.
                None => self.give_back(id, Hold::Lease { lease, busy, direct }),
            },
            Hold::Occurrence(occurrence) => {
                self.attempts.remove(&(occurrence.schedule, occurrence.attempt));
                let lost = occurrence.lapsed();
                let fence = occurrence.lease().fence();
                let (settled, occurrence) = occurrence.into_settled();
                if let Err(FnSettled { failure, .. }) = settled.send(FnSettled { id, failure, lost }) {
                    // Its scheduler is gone (the locker is closing): the locks go back here, and the run ends as fn did.
                    let ending = match (lost, failure) {
                        (true, _) => Ending::Lost,
                        (false, Some(failure)) => Ending::Failed(failure),
                        (false, None) => Ending::Ok,
                    };
                    let ended = Ended { fence, ending, duration: Duration::ZERO };
                    let post = self.post.clone();
                    self.runtime.spawn(async move {
                        occurrence.release().await;
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

    /// Starts turn `id` at the shared result of `key` ([`Locker::shared_turn`]): [`Outcome::Stored`], or the lock to
    /// compute it under, held by the caller as lock `id` ([`Outcome::Locked`]). Bad input is an error at once.
    pub fn shared(&mut self, id: u32, key: &str, options: &LockOptions, store_errors: bool) -> Result<(), SnatchError> {
        let busy = self.enter(key, options)?;
        self.runs.start(id, Purpose::Lock);
        let (locker, key, options, post) = (self.locker.clone(), key.to_owned(), options.clone(), self.post.clone());
        self.runtime.spawn(async move {
            let turn = locker.shared_turn(&key, &options, store_errors).await;
            post_or_undo(&*post, Input::Shared { id, turn, busy });
        });
        Ok(())
    }

    /// Starts operation `id`: stores what the round of lock `lock` came to (`error`: fn's error) for `ttl`, while the
    /// lock is still ours. Answers whether it was.
    pub fn store_shared(&mut self, id: u32, lock: u32, error: bool, payload: Vec<u8>, ttl: Duration) {
        let (locker, lease) = (self.locker.clone(), self.runs.lock(lock).map(|hold| hold.lease().clone()));
        self.answer(id, async move {
            Ok(Outcome::Done(match lease {
                Some(lease) => locker.store_shared(&lease, error, payload, ttl).await?,
                None => false,
            }))
        });
    }

    /// The caller hands lock `lock` over to another owner ([`Lease::hand_off`]): it is no longer held, renewed nor
    /// released here. The validity left; `None` when it was no longer held. Only a lock can be handed over, not a
    /// semaphore's permit nor a read-write lock's.
    pub fn hand_off(&mut self, lock: u32) -> Result<Option<Duration>, SnatchError> {
        let Some(hold) = self.runs.lock(lock) else { return Ok(None) };
        if hold.lease().keys().kind != Kind::Lock {
            return Err(SnatchError::type_arg(
                "only a lock can be handed over, not a semaphore's permit or a read-write lock's",
            ));
        }
        Ok(self.runs.release_lock(lock).and_then(|hold| hold.lease().hand_off()))
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
        self.acquire_on_runtime(
            id,
            Purpose::Lock,
            busy,
            async move { locker.adopt(&key, &token, fence, &options).await },
        );
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
        self.runs.held(id).is_some_and(Hold::direct)
    }

    /// How long the lock of run `id` (while its fn runs) or lock `id` (while held) is still guaranteed; zero once
    /// lost or released.
    pub fn remaining(&self, id: u32) -> Duration {
        self.runs.held(id).map_or(Duration::ZERO, |hold| hold.lease().remaining())
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

    /// Takes a result from the runtime: its step of the lifecycle.
    pub fn handle(&mut self, input: Input, out: &mut Output) {
        let _runtime = self.runtime.enter();
        let told = &mut out.told;
        match input {
            Input::Acquired { id, purpose, result, busy } => {
                self.acquired(id, purpose, result, Some(busy), false, told)
            }
            Input::AcquiredAll { ids, result, busy } => {
                match result {
                    Ok(leases) => ids.into_iter().zip(leases).for_each(|(id, lease)| {
                        self.acquired(id, Purpose::Lock, Ok(Some(lease)), None, false, told);
                    }),
                    Err(error) => ids.into_iter().for_each(|id| {
                        self.acquired(id, Purpose::Lock, Err(error.clone()), None, false, told);
                    }),
                }
                drop(busy);
            }
            Input::Shared { id, turn, busy } => match turn {
                Ok(Turn::Stored(entry)) => {
                    // The turn ends without the lock.
                    let _ = self.runs.acquired(id, Ok(None));
                    told.push((id, Outcome::Stored { error: entry.error, bytes: entry.payload }));
                    drop(busy);
                }
                Ok(Turn::Run(lease)) => self.acquired(id, Purpose::Lock, Ok(Some(lease)), Some(busy), false, told),
                Err(error) => self.acquired(id, Purpose::Lock, Err(error), Some(busy), false, told),
            },
            Input::Lost(id) => {
                let stalled = self.runs.held(id).is_some_and(Hold::stalled);
                told.extend(self.runs.lost(id, stalled).map(|outcome| (id, outcome)));
            }
            Input::Released(id) => told.extend(self.runs.released(id).map(|outcome| (id, outcome))),
            Input::Tell(id, outcome) => told.push((id, outcome)),
            Input::Closed(id) => {
                self.runs.closed();
                told.push((id, Outcome::Done(true)));
            }
            Input::Cut => told.extend(self.runs.cut()),
            Input::Occurrence { occurrence, run, claim, settled } => {
                let (watched, claimed) = (run.clone(), claim.clone());
                let (schedule, attempt) = (occurrence.schedule, occurrence.attempt);
                let hold = OccurrenceHold { schedule, attempt, run, claim, settled };
                let (id, call) = self.runs.adopt(Hold::Occurrence(Box::new(hold)), occurrence);
                self.attempts.insert((schedule, attempt), id);
                // Either lease lost means another replica may run the occurrence: the fn's signal aborts.
                if let Some(run) = &watched {
                    self.watch(id, run);
                }
                self.watch(id, &claimed);
                told.push((id, call));
            }
            Input::Abort { schedule, attempt, reason } => {
                let Some(&id) = self.attempts.get(&(schedule, attempt)) else { return };
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
        for hold in self.runs.abandon() {
            release_in_background(hold);
        }
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
        self.acquire_on_runtime(id, purpose, busy, async move {
            if required {
                locker.lock(&key, &options).await.map(Some)
            } else {
                locker.try_lock(&key, &options).await
            }
        });
        Ok(())
    }

    /// Runs `acquisition` of run or lock `id` (started) on the runtime; its result comes back as an input.
    fn acquire_on_runtime(
        &self,
        id: u32,
        purpose: Purpose,
        busy: Busy,
        acquisition: impl Future<Output = Result<Option<Arc<Lease>>, SnatchError>> + Send + 'static,
    ) {
        let post = self.post.clone();
        self.runtime.spawn(async move {
            let result = acquisition.await;
            post_or_undo(&*post, Input::Acquired { id, purpose, result, busy });
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
                        self.acquired(id, purpose, required_lock(result, key), Some(busy), true, told)
                    }
                    AcquireSettled::Resend(attempt) => {
                        out.calls.push(Call::Acquire { id, purpose, required, attempt, busy })
                    }
                    AcquireSettled::Fallback(attempt) => {
                        self.stale.store(true, Ordering::SeqCst);
                        self.acquire_on_runtime(id, purpose, busy, async move {
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

    /// Acquisition `id` for `purpose` came to `result` (by a direct call when `direct`; `busy` counted it): the step
    /// of the lifecycle, with the lease watched for loss.
    fn acquired(
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
            release_in_background(hold);
        }
        told.extend(step.outcome.map(|outcome| (id, outcome)));
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
        Hold::Occurrence(occurrence) => occurrence.release().await,
    }
}

/// Gives `hold` back in the background, for nobody. Within the Tokio runtime.
fn release_in_background(hold: Hold) {
    tokio::spawn(release(hold));
}
