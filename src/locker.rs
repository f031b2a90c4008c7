//! `NativeLocker`: a core locker's runner for the facade. Every operation starts synchronously (bad input throws)
//! and is heard of through the facade's `deliver` (delivery.rs); the calls every run makes are plain functions
//! (calls.rs).

use crate::delivery::{
    AttemptArgs, AttemptedArgs, Delivery, HeldArgs, LeaderArgs, OutcomeKind, SkippedArgs, StoredArgs, UnclaimedArgs,
};
use crate::direct_sockets::DirectSockets;
use crate::errors::throw;
use crate::errors::NativeError;
use crate::functions::RunFunctions;
use crate::host::Host;
use crate::inbox::Inbox;
use crate::lead::{campaign_options, NativeCampaign, NativeObserver};
use crate::limits::Limits;
use crate::options::{lock_options, millis, FleetQuestion, LockInit, LockerInit, ReenterInit, ScheduleInit};
use crate::schedule::{NativeHandler, NativeSchedule};
use napi::bindgen_prelude::{within_runtime_if_available, BigInt, Buffer, Either12, FnArgs, Function};
use napi::Env;
use napi_derive::napi;
use snatch_core::limits::DEFAULT_CONTENTION_LIMIT;
use snatch_core::protocol::run::Outcome;
use snatch_core::{Cron, FleetRequest, Holder, Input, Locker, LockerConfig, Runner, SnatchError};
use std::cell::OnceCell;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::Duration;

/// A key waited for: its waits, the time they waited in all (ms), and those that timed out.
#[napi(object)]
pub struct ContendedKey {
    pub key: String,
    pub waits: f64,
    pub wait_ms: f64,
    pub timeouts: f64,
}

/// A locker; the facade's `Locker` wraps it.
#[napi]
pub struct NativeLocker {
    host: Rc<Host>,
}

#[napi]
impl NativeLocker {
    /// Validates the options. `deliver(kind, id, fence, extra)` hears every outcome (kinds and their arguments:
    /// delivery.rs, `OutcomeKind`).
    #[napi(constructor)]
    #[allow(clippy::type_complexity, reason = "spelled out: binding.d.ts is generated from it (it is `DeliverArgs`)")]
    pub fn new(
        env: Env,
        init: LockerInit,
        deliver: Function<
            FnArgs<(
                OutcomeKind,
                u32,
                Option<BigInt>,
                Option<
                    Either12<
                        bool,
                        String,
                        AttemptArgs,
                        HeldArgs,
                        NativeError,
                        SkippedArgs,
                        UnclaimedArgs,
                        AttemptedArgs,
                        StoredArgs,
                        Vec<BigInt>,
                        u32,
                        LeaderArgs,
                    >,
                >,
            )>,
            (),
        >,
    ) -> napi::Result<Self> {
        let locker = LockerConfig::try_from(init).and_then(Locker::new).map_err(|e| throw(&env, e))?;
        // At process exit the runtime is shut down first: spawning on its handle then drops the task, where napi's
        // `spawn` would panic.
        let runtime = within_runtime_if_available(tokio::runtime::Handle::current);
        let delivery = Delivery::new(&env, deliver.create_ref()?)?;
        // The inbox takes its batches to the host, made below (hence the cell).
        let host_of_inbox: Rc<OnceCell<Weak<Host>>> = Rc::default();
        let (taker, closer, undo_runtime) = (host_of_inbox.clone(), host_of_inbox.clone(), runtime.clone());
        let inbox = Inbox::new(
            &env,
            move |inputs| {
                if let Some(host) = taker.get().and_then(Weak::upgrade) {
                    let mut inputs = inputs.into_iter();
                    while host.step(|runner, out| runner.handle_until_started(&mut inputs, out)) {}
                }
            },
            // Once JS is gone (a worker thread terminated, say), nothing can use this locker: what the inbox still
            // held is given back, and so is every lock held for JS; the locker closes, stopping its schedules,
            // instead of renewing locks and claiming occurrences for nobody.
            move |left| {
                let _runtime = undo_runtime.enter();
                left.into_iter().for_each(Input::undo);
                if let Some(host) = closer.get().and_then(Weak::upgrade) {
                    host.runner.borrow_mut().abandon();
                }
            },
        )?;
        let runner = Runner::new(locker.clone(), Arc::new(inbox), runtime.clone());
        let stale = runner.stale().clone();
        let host = Rc::new_cyclic(|host: &Weak<Host>| {
            let host = host.clone();
            let handler = Box::new(move |replies| {
                if let Some(host) = host.upgrade() {
                    host.step(|runner, out| runner.settle(replies, out));
                }
            });
            let sockets = DirectSockets::new(env, &locker, runtime, handler, stale);
            Host::new(runner, sockets, delivery)
        });
        let _ = host_of_inbox.set(Rc::downgrade(&host));
        Ok(Self { host })
    }

    /// The core's limits, defaults and names, for the facade (limits.rs).
    #[napi]
    pub fn limits() -> Limits {
        crate::limits::limits()
    }

    /// Checks option `name`'s number `value` (an integer in its range: ms for a duration, a count otherwise); throws
    /// the coded RangeError when it is not.
    #[napi]
    pub fn check_option(env: Env, name: String, value: f64) -> napi::Result<()> {
        crate::limits::check_option(&env, &name, value)
    }

    /// The event loop turned now: leases are renewed while it beats within `maxStall` (the facade beats on a timer).
    #[napi]
    pub fn beat(&self) {
        self.host.runner.borrow().locker().beat();
    }

    /// The calls every run or one-attempt lock makes (calls.rs).
    #[napi]
    pub fn run_functions<'env>(&self, env: &'env Env) -> napi::Result<RunFunctions<'env>> {
        RunFunctions::new(env, &self.host)
    }

    /// Starts acquisition `id` of `key`, waiting up to `options.wait` (one attempt is `tryLock` of
    /// [`NativeLocker::run_functions`]): a lock, or a timeout error when waiting ran out.
    #[napi]
    pub fn acquire(&self, env: Env, id: u32, key: String, options: Option<LockInit>) -> napi::Result<()> {
        let options = lock_options(options, false).map_err(|e| throw(&env, e))?;
        self.step(&env, |runner| runner.lock(id, &key, &options))
    }

    /// The `limit` keys (default: `Limits.defaultContentionLimit`) this locker's acquisitions waited for most, most
    /// first; with `reset`, the count starts again.
    #[napi]
    pub fn contention(&self, limit: Option<u32>, reset: Option<bool>) -> Vec<ContendedKey> {
        let limit = limit.map_or(DEFAULT_CONTENTION_LIMIT, |limit| limit as usize);
        let top = self.host.step(|runner, _| runner.locker().contention(limit, reset.unwrap_or(false)));
        top.into_iter()
            .map(|c| ContendedKey {
                key: c.key,
                waits: c.waits as f64,
                wait_ms: c.wait_ms,
                timeouts: c.timeouts as f64,
            })
            .collect()
    }

    /// Call `id` (a run, or a lock's acquisition) made inside the fn of runs of the facade's: when they hold some of its
    /// keys, it is told what it comes to (`Failed` with a ReentrantError, `NotAcquired`, or `Invoke` under the held
    /// locks and `Ran` once `taskDone` was told), and true; false: the facade starts it as any call.
    #[napi]
    pub fn reenter(&self, id: u32, call: ReenterInit) -> bool {
        self.host.step(|runner, out| runner.reenter(id, &call.into(), out))
    }

    /// Starts acquisition `id` of a permit of semaphore `key` of `limit` holders: one attempt, or waiting up to
    /// `options.wait` when `wait`. The permit is then a lock like the others (extend, release, remainingMs, loss).
    #[napi]
    pub fn acquire_permit(
        &self,
        env: Env,
        id: u32,
        key: String,
        limit: u32,
        options: Option<LockInit>,
        wait: bool,
    ) -> napi::Result<()> {
        self.acquire_as(env, id, key, Holder::Permit(limit), options, wait)
    }

    /// Starts acquisition `id` of the write lock (`write`) or a read lock of read-write lock `key`: one attempt, or
    /// waiting up to `options.wait` when `wait`. Then a lock like the others (extend, release, remainingMs, loss).
    #[napi]
    pub fn acquire_read_write(
        &self,
        env: Env,
        id: u32,
        key: String,
        write: bool,
        options: Option<LockInit>,
        wait: bool,
    ) -> napi::Result<()> {
        self.acquire_as(env, id, key, if write { Holder::Writer } else { Holder::Reader }, options, wait)
    }

    fn acquire_as(
        &self,
        env: Env,
        id: u32,
        key: String,
        holder: Holder,
        options: Option<LockInit>,
        wait: bool,
    ) -> napi::Result<()> {
        let options = lock_options(options, false).map_err(|e| throw(&env, e))?;
        self.host
            .step(|runner, out| runner.acquire_as(id, &key, holder, &options, wait, out))
            .map_err(|e| throw(&env, e))
    }

    /// Starts operation `id`: extend lock `lock` to `ttl` ms (default: its acquisition's). Answers whether it was still
    /// ours.
    #[napi]
    pub fn extend(&self, env: Env, id: u32, lock: u32, ttl: Option<f64>) -> napi::Result<()> {
        let ttl = ttl.map(|v| millis("ttl", v)).transpose().map_err(|e| throw(&env, e))?;
        self.step(&env, |runner| runner.extend(id, lock, ttl))
    }

    /// Starts the acquisition of every key of `keys` or none, as locks `ids` (one per key, in order): each id is told
    /// its lock, or the set's error (a timeout naming the first key not had in time). Waits up to `options.wait`.
    #[napi]
    pub fn lock_all(&self, env: Env, ids: Vec<u32>, keys: Vec<String>, options: Option<LockInit>) -> napi::Result<()> {
        let options = lock_options(options, false).map_err(|e| throw(&env, e))?;
        self.step(&env, |runner| runner.lock_all(ids, keys, &options))
    }

    /// Starts run `id` of the facade's fn as a permit of semaphore `key` of `limit` holders (`holder` 'permit'), or as
    /// the write lock ('write') or a read lock ('read') of read-write lock `key`, waiting up to `options.wait`: `Call`,
    /// then `Ran` once `taskDone` was told; a timeout error when waiting ran out.
    #[napi]
    pub fn run_as(
        &self,
        env: Env,
        id: u32,
        key: String,
        holder: String,
        limit: u32,
        options: Option<LockInit>,
    ) -> napi::Result<()> {
        let holder = match holder.as_str() {
            "permit" => Holder::Permit(limit),
            "read" => Holder::Reader,
            "write" => Holder::Writer,
            _ => return Err(throw(&env, SnatchError::type_arg(format!("no such holder: '{holder}'")))),
        };
        let options = lock_options(options, true).map_err(|e| throw(&env, e))?;
        self.host.step(|runner, out| runner.run_as(id, &key, holder, &options, out)).map_err(|e| throw(&env, e))
    }

    /// Starts run `id` of the facade's fn under every key of `keys` or none, waiting up to `options.wait` in all:
    /// `Call` with the fence of each key, then `Ran` once `taskDone` was told; a timeout error naming the first key
    /// not had in time.
    #[napi]
    pub fn run_all(&self, env: Env, id: u32, keys: Vec<String>, options: Option<LockInit>) -> napi::Result<()> {
        let options = lock_options(options, true).map_err(|e| throw(&env, e))?;
        self.step(&env, |runner| runner.run_all(id, keys, &options))
    }

    /// Starts run `id` of the facade's fn for the shared result of `key`: `Stored` (fn not called), or `Call` and,
    /// once `sharedDone` was told, `Ran`. Waits for a round under way up to `options.wait`. `storeErrors`: a stored
    /// error of any round is taken.
    #[napi]
    pub fn run_shared(
        &self,
        env: Env,
        id: u32,
        key: String,
        options: Option<LockInit>,
        store_errors: bool,
    ) -> napi::Result<()> {
        let options = lock_options(options, true).map_err(|e| throw(&env, e))?;
        self.step(&env, |runner| runner.run_shared(id, &key, &options, store_errors))
    }

    /// The fn of shared run `id` settled: `bytes` (`error`: fn's error rather than its value) are stored for `ttl` ms
    /// while the lock is still ours, unless `bytes` is null; then the lock is given back.
    #[napi]
    pub fn shared_done(&self, env: Env, id: u32, error: bool, bytes: Option<Buffer>, ttl: f64) -> napi::Result<()> {
        let ttl = millis("resultTtl", ttl).map_err(|e| throw(&env, e))?;
        let result = bytes.map(|bytes| (error, bytes.to_vec()));
        self.host.step(|runner, _| runner.shared_done(id, result, ttl));
        Ok(())
    }

    /// The caller of shared run `id` stopped waiting (its signal aborted): true when it is forgotten (nothing more is
    /// told of it); false when it took its turn already (its fn is then still called, for the round's other callers).
    #[napi]
    pub fn stop_waiting(&self, id: u32) -> bool {
        self.host.step(|runner, _| runner.stop_waiting(id))
    }

    /// Starts campaign `id` for leadership of `name` (`ttl`: a term's lease; `retry`: how long it waits for the lock
    /// at a time, and pauses after a term): each term's fn is called as a run's (`Call` with the campaign's id),
    /// ended by `Revoked`; while it does not lead, `Leader` says who does. Throws on a bad name or option.
    #[napi]
    pub fn lead(
        &self,
        env: Env,
        id: u32,
        name: String,
        ttl: Option<f64>,
        retry: Option<f64>,
    ) -> napi::Result<NativeCampaign> {
        let options = campaign_options(ttl, retry).map_err(|e| throw(&env, e))?;
        let runner = self.host.runner.borrow();
        let campaign =
            within_runtime_if_available(|| snatch_core::campaign(runner.locker(), id, &name, options, runner.post()));
        campaign.map(NativeCampaign::new).map_err(|e| throw(&env, e))
    }

    /// Starts observer `id` of leadership `name`: `Leader` whenever the leader changes, `Erred` on an error.
    #[napi]
    pub fn observe(&self, env: Env, id: u32, name: String) -> napi::Result<NativeObserver> {
        let runner = self.host.runner.borrow();
        let observer = within_runtime_if_available(|| snatch_core::observe(runner.locker(), id, &name, runner.post()));
        observer.map(NativeObserver::new).map_err(|e| throw(&env, e))
    }

    /// Hands lock `lock` over to another owner: it is no longer renewed nor released here. The milliseconds of validity
    /// left; `null` when it was no longer held. Throws for a semaphore's permit or a read-write lock's.
    #[napi]
    pub fn hand_over(&self, env: Env, lock: u32) -> napi::Result<Option<f64>> {
        let left = self.host.step(|runner, _| runner.hand_over(lock)).map_err(|e| throw(&env, e))?;
        Ok(left.map(|left| left.as_secs_f64() * 1000.0))
    }

    /// Starts acquisition `id`: continue the lock of `key` handed over with `token` and `fence` (decimal digits), as
    /// a lock of `options` (`ttl`, `autoExtend`); not acquired when the key does not hold that token any more.
    #[napi]
    pub fn adopt(
        &self,
        env: Env,
        id: u32,
        key: String,
        token: String,
        fence: String,
        options: Option<LockInit>,
    ) -> napi::Result<()> {
        let options = lock_options(options, false).map_err(|e| throw(&env, e))?;
        let fence = fence.parse().map_err(|_| {
            throw(&env, SnatchError::range_arg("a lock's fence is a positive integer below 2^63, in decimal digits"))
        })?;
        self.step(&env, |runner| runner.adopt(id, &key, &token, fence, &options))
    }

    /// Starts operation `id`: what Redis holds for `key`.
    #[napi]
    pub fn inspect(&self, id: u32, key: String) {
        self.host.step(|runner, _| runner.inspect(id, &key));
    }

    /// Starts operation `id`: delete `key`'s lock whoever holds it. Answers whether there was one.
    #[napi]
    pub fn force_release(&self, id: u32, key: String) {
        self.host.step(|runner, _| runner.force_release(id, &key));
    }

    /// Whether the lock of run `id` (while its fn runs) or lock `id` (while held) was taken by a direct call: the
    /// `direct` of diagnostics' acquire messages.
    #[napi]
    pub fn went_direct(&self, id: u32) -> bool {
        self.host.runner.borrow().went_direct(id)
    }

    /// Milliseconds the lock of run `id` (while its fn runs) or lock `id` (while held) is still guaranteed; 0 once
    /// lost or released.
    #[napi]
    pub fn remaining_ms(&self, id: u32) -> f64 {
        self.host.runner.borrow().remaining(id).as_secs_f64() * 1000.0
    }

    /// Starts operation `id`: asks the fleet `question`; answers with JSON. Throws on a bad question.
    #[napi]
    pub fn ask(&self, env: Env, id: u32, question: FleetQuestion) -> napi::Result<()> {
        let request = FleetRequest::try_from(question).map_err(|e| throw(&env, e))?;
        self.host.step(|runner, _| {
            let locker = runner.locker().clone();
            runner.answer(id, async move { Ok(Outcome::Answered(snatch_core::ask_fleet(&locker, request).await?)) });
        });
        Ok(())
    }

    /// Starts schedule `id` (the facade's id for it): every occurrence of `cron` runs once across the replicas, its
    /// fn called as a run's (an occurrence's [`crate::delivery::OutcomeKind::Invoke`]); the on-time occurrences it does
    /// not run here are told as the schedule's. Throws on a bad name, expression, zone or option.
    #[napi]
    pub fn schedule(
        &self,
        env: Env,
        id: u32,
        name: String,
        cron: String,
        options: ScheduleInit,
    ) -> napi::Result<NativeSchedule> {
        let zone = options.timezone.clone().unwrap_or_else(|| "UTC".to_owned());
        let cron = Cron::new(&cron, &zone).map_err(|e| throw(&env, e))?;
        let options = options.try_into().map_err(|e| throw(&env, e))?;
        let runner = self.host.runner.borrow();
        let schedule = within_runtime_if_available(|| {
            snatch_core::schedule(runner.locker(), id, &name, cron, options, runner.post())
        });
        schedule.map(NativeSchedule::new).map_err(|e| throw(&env, e))
    }

    /// Makes this replica a runner of stored schedules' handler `name` (the facade's id for it: `id`): their
    /// occurrences' fns are called as a schedule's (an occurrence's [`crate::delivery::OutcomeKind::Invoke`], with the
    /// stored schedule's id and data). Throws on a bad name or on Redlock.
    #[napi]
    pub fn handle(&self, env: Env, id: u32, name: String, max_running: Option<u32>) -> napi::Result<NativeHandler> {
        let runner = self.host.runner.borrow();
        let handler =
            within_runtime_if_available(|| snatch_core::handle(runner.locker(), id, &name, max_running, runner.post()));
        handler.map(NativeHandler::new).map_err(|e| throw(&env, e))
    }

    /// Starts operation `id` on stored schedule `target`: `op` is 'upsert' (from the spec `json`), 'remove' or 'get';
    /// or 'summary' of them all by handler (`target` unused); answers with JSON.
    #[napi]
    pub fn stored(&self, env: Env, id: u32, op: String, target: String, json: Option<String>) -> napi::Result<()> {
        if !matches!(op.as_str(), "upsert" | "remove" | "get" | "summary") {
            return Err(throw(&env, SnatchError::type_arg(format!("no stored schedules' operation '{op}'"))));
        }
        self.host.step(|runner, _| {
            let locker = runner.locker().clone();
            runner.answer(id, async move {
                let json = match op.as_str() {
                    "upsert" => snatch_core::upsert_stored(&locker, &target, json.as_deref().unwrap_or("{}")).await?,
                    "remove" => snatch_core::remove_stored(&locker, &target).await?.to_string(),
                    "summary" => snatch_core::stored_summary(&locker).await?,
                    _ => snatch_core::get_stored(&locker, &target).await?,
                };
                Ok(Outcome::Answered(json))
            });
        });
        Ok(())
    }

    /// Starts operation `id`: one page of the stored schedules (`listSchedules`); answers with JSON.
    #[napi]
    pub fn list_stored(&self, id: u32, options: ListInit) {
        self.host.step(|runner, _| {
            let locker = runner.locker().clone();
            runner.answer(id, async move {
                let ListInit { handler, pattern, limit, cursor } = options;
                let page =
                    snatch_core::list_stored(&locker, handler.as_deref(), pattern.as_deref(), limit, cursor.as_deref());
                Ok(Outcome::Answered(page.await?))
            });
        });
    }

    /// Starts operation `id`: stop schedules, wait for calls under way, release every lock still held, close the
    /// connections. Idempotent. The fns running get `drainMs` to finish (none: all the time they take); then their
    /// signals abort (a schedule's attempts are recorded interrupted and handed over).
    #[napi]
    pub fn close(&self, id: u32, drain_ms: Option<u32>) {
        self.host.sockets.close();
        let drain = drain_ms.map(|ms| Duration::from_millis(ms.into()));
        self.host.step(|runner, _| runner.close(id, drain));
    }

    /// Runs `step` on the runner; an error it returns is thrown.
    fn step(&self, env: &Env, step: impl FnOnce(&mut Runner) -> Result<(), SnatchError>) -> napi::Result<()> {
        self.host.step(|runner, _| step(runner)).map_err(|e| throw(env, e))
    }
}

/// What `listSchedules` asks for.
#[napi(object)]
pub struct ListInit {
    pub handler: Option<String>,
    pub pattern: Option<String>,
    pub limit: u32,
    pub cursor: Option<String>,
}
