//! `NativeLocker`: the core locker for the facade. Operations start synchronously and end as completions (see
//! completions.rs); a run's task is called through the same completions.

use crate::completions::{Completion, Completions};
use crate::direct_calls::{Context, DirectCalls, EventArgs, Running};
use crate::errors::throw;
use crate::options::{lock_options, millis, LockInit, LockerInit, ScheduleInit};
use crate::outcomes::{acquired, start_op, Leases, Settling};
use crate::run_calls;
use crate::schedule::{JsTickHandler, NativeSchedule, ScheduleEvent, TickTask};
use napi::bindgen_prelude::{spawn, within_runtime_if_available, BigInt, Function, Unknown};
use napi::Env;
use napi_derive::napi;
use snatch_core::{CronSchedule, Lease, Locker, LockerConfig, SnatchError};
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;

/// A locker; the facade's `Locker` wraps it.
#[napi]
pub struct NativeLocker {
    locker: Locker,
    completions: Arc<Completions>,
    leases: Leases,
    /// On a single Redis, one-attempt runs and locks, and releases, go by direct calls once its socket is open.
    direct: Rc<DirectCalls>,
}

#[napi]
impl NativeLocker {
    /// Validates the options. `deliver(completions)` receives results, task calls and lost notices;
    /// `deliverEvent(kind, id, fence, extra)` the frequent ones of the direct socket as plain values (kinds in
    /// direct_calls.rs, `Event`).
    #[napi(
        constructor,
        ts_args_type = "init: LockerInit, deliver: (completions: Completion[]) => void, deliverEvent: (kind: number, id: number, fence?: bigint, extra?: boolean | string) => void"
    )]
    pub fn new(
        env: Env,
        init: LockerInit,
        deliver: Function<Vec<Completion>, ()>,
        deliver_event: Function<EventArgs, ()>,
    ) -> napi::Result<Self> {
        let locker = LockerConfig::try_from(init).and_then(Locker::new).map_err(|e| throw(&env, e))?;
        let (settling, running, leases) = (Settling::default(), Running::default(), Leases::default());
        // Once JS is gone (a worker thread terminated, say), nothing can use this locker: the runs waiting for a
        // task that will not report back go on to release, and the locker closes, releasing what it holds and
        // stopping its schedules, instead of renewing locks and claiming occurrences for nobody.
        // At process exit the runtime is shut down first: spawning on its handle then drops the task, where napi's
        // `spawn` would panic.
        let runtime = within_runtime_if_available(tokio::runtime::Handle::current);
        let (direct_deliver, direct_deliver_event) = (deliver.create_ref()?, deliver_event.create_ref()?);
        let (waiting, direct_tasks, closing) = (settling.clone(), running.clone(), locker.clone());
        let completions = Completions::new(deliver, move || {
            waiting.lock().expect("settling poisoned").clear();
            direct_tasks.lock().expect("running poisoned").clear();
            runtime.spawn(async move { closing.close().await });
        })?;
        let completions = Arc::new(completions);
        let context = Context {
            locker: locker.clone(),
            completions: completions.clone(),
            settling,
            running,
            leases: leases.clone(),
            stale: Default::default(),
        };
        let direct = DirectCalls::new(&env, context, direct_deliver, direct_deliver_event)?;
        Ok(Self { locker, completions, leases, direct: Rc::new(direct) })
    }

    /// `{ run, taskDone, tryLock, release }`, the calls every run or one-attempt lock makes (see run_calls.rs).
    #[napi(
        ts_return_type = "{ run(id: number, key: string, required: boolean, ttl?: number, minHold?: number, autoExtend?: boolean, wait?: number): void; taskDone(id: number): void; tryLock(id: number, key: string, ttl?: number, minHold?: number, autoExtend?: boolean): void; release(id: number, lock: number): void }"
    )]
    pub fn run_calls(&self, env: Env) -> napi::Result<Unknown<'_>> {
        let calls = run_calls::create(env.raw(), &self.direct)?;
        // SAFETY: a value just made in this environment.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), calls) })
    }

    /// Starts acquisition `id` of `key`, waiting up to `options.wait` (one attempt is `tryLock` of
    /// [`NativeLocker::run_calls`]). Completes with the fence and token when acquired (then a lost notice follows if
    /// the lease is lost), with a timeout error when waiting ran out.
    #[napi]
    pub fn acquire(&self, env: Env, id: u32, key: String, options: Option<LockInit>) -> napi::Result<()> {
        let options = lock_options(options, false).map_err(|e| throw(&env, e))?;
        let (locker, leases, completions) = (self.locker.clone(), self.leases.clone(), self.completions.clone());
        spawn(async move {
            acquired(id, locker.lock(&key, &options).await.map(Some), &leases, &completions);
        });
        Ok(())
    }

    /// Starts acquisition `id` of a permit of semaphore `key` of `limit` holders: one attempt, or waiting up to
    /// `options.wait` when `wait`. Completes as `acquire` does; the permit is then a lock like the others (extend,
    /// release, remainingMs, lost notices).
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
        let options = lock_options(options, false).map_err(|e| throw(&env, e))?;
        let (locker, leases, completions) = (self.locker.clone(), self.leases.clone(), self.completions.clone());
        spawn(async move {
            let lease = if wait {
                locker.acquire_permit(&key, limit, &options).await.map(Some)
            } else {
                locker.try_acquire_permit(&key, limit, &options).await
            };
            acquired(id, lease, &leases, &completions);
        });
        Ok(())
    }

    /// Starts operation `id`: extend lock `lock` to `ttl` ms (default: its acquisition's ttl). Completes with
    /// whether it was still ours.
    #[napi]
    pub fn extend(&self, env: Env, id: u32, lock: u32, ttl: Option<f64>) -> napi::Result<()> {
        // Checked here too so that a bad ttl is an error whether or not the lock is still held.
        let ttl =
            ttl.map(|v| millis("ttl", v).and_then(|ttl| snatch_core::validate_ttl(ttl).map(|()| ttl))).transpose();
        let ttl = ttl.map_err(|e| throw(&env, e))?;
        let lease = self.lease(lock);
        self.start(id, async move {
            let ok = match lease {
                Some(lease) => lease.extend(ttl).await?,
                None => false,
            };
            Ok(Completion { ok: Some(ok), ..Completion::done(id) })
        });
        Ok(())
    }

    /// Starts operation `id`: what Redis holds for `key`. Completes with its lease left, fence and holders when it
    /// is held, with none of them when it is free.
    #[napi]
    pub fn inspect(&self, id: u32, key: String) {
        let locker = self.locker.clone();
        self.start(id, async move {
            Ok(match locker.inspect(&key).await? {
                Some(held) => Completion {
                    ttl: Some(held.ttl_ms as f64),
                    fence: Some(BigInt::from(held.fence)),
                    holders: Some(held.holders),
                    ..Completion::done(id)
                },
                None => Completion::done(id),
            })
        });
    }

    /// Starts operation `id`: delete `key`'s lock whoever holds it. Completes with whether there was one.
    #[napi]
    pub fn force_release(&self, id: u32, key: String) {
        let locker = self.locker.clone();
        self.start(id, async move {
            let deleted = locker.force_release(&key).await?;
            Ok(Completion { ok: Some(deleted), ..Completion::done(id) })
        });
    }

    /// Milliseconds lock `lock` is still guaranteed; 0 once lost or released.
    #[napi]
    pub fn remaining_ms(&self, lock: u32) -> f64 {
        self.lease(lock).map_or(0.0, |l| l.remaining().as_secs_f64() * 1000.0)
    }

    /// Runs `task(tick, fence)` at every occurrence of `cron` on exactly one replica; `on_event` hears each
    /// occurrence's outcome. Throws on a bad name, expression, zone or ttl.
    #[napi(
        ts_args_type = "name: string, cron: string, options: ScheduleInit, task: (tick: number, fence: bigint) => Promise<void>, onEvent: (event: ScheduleEvent) => void"
    )]
    pub fn schedule(
        &self,
        env: Env,
        name: String,
        cron: String,
        options: ScheduleInit,
        task: TickTask,
        on_event: Function<ScheduleEvent, ()>,
    ) -> napi::Result<NativeSchedule> {
        let zone = options.timezone.clone().unwrap_or_else(|| "UTC".to_owned());
        let cron = CronSchedule::new(&cron, &zone).map_err(|e| throw(&env, e))?;
        let options = options.try_into().map_err(|e| throw(&env, e))?;
        let sink = on_event.build_threadsafe_function().callee_handled::<false>().build()?;
        let handler = Arc::new(JsTickHandler { task: Arc::new(task), sink: Arc::new(sink) });
        let schedule = within_runtime_if_available(|| self.locker.schedule(&name, cron, options, handler));
        schedule.map(NativeSchedule::new).map_err(|e| throw(&env, e))
    }

    /// Starts operation `id`: stop schedules, wait for calls under way, release every lock still held, close the
    /// connections. Idempotent.
    #[napi]
    pub fn close(&self, id: u32) {
        self.direct.close();
        let (locker, leases) = (self.locker.clone(), self.leases.clone());
        self.start(id, async move {
            locker.close().await;
            leases.lock().expect("leases poisoned").clear();
            Ok(Completion::done(id))
        });
    }

    fn lease(&self, lock: u32) -> Option<Arc<Lease>> {
        self.leases.lock().expect("leases poisoned").get(&lock).cloned()
    }

    /// Runs `op` on the runtime and queues its completion (or its error) for operation `id`.
    fn start(&self, id: u32, op: impl Future<Output = Result<Completion, SnatchError>> + Send + 'static) {
        start_op(&self.completions, id, op);
    }
}
