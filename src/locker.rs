//! `NativeLocker`: the core locker for the facade. Operations start synchronously and end as completions (see
//! completions.rs); a run's task is called through the same completions.

use crate::completions::{Completion, Completions};
use crate::direct_calls::{Context, DirectCalls, EventArgs, Running};
use crate::errors::to_napi;
use crate::options::{lock_options, millis, LockInit, LockerInit, ScheduleInit};
use crate::run_calls;
use crate::schedule::{JsTickHandler, NativeSchedule, ScheduleEvent, TickTask};
use napi::bindgen_prelude::{spawn, within_runtime_if_available, BigInt, Function, Unknown};
use napi::Env;
use napi_derive::napi;
use rustc_hash::FxHashMap;
use snatch_core::{CronSchedule, Lease, Locker, LockerConfig, SnatchError};
use std::future::Future;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Runs waiting for their task to settle, by run id. The facade reports a settled task with `taskDone(id)`:
/// awaiting the task's promise from Rust would cost a persistent reference per call.
pub(crate) type Settling = Arc<Mutex<FxHashMap<u32, oneshot::Sender<()>>>>;

/// Held locks handed to JS, by acquisition id.
pub(crate) type Leases = Arc<Mutex<FxHashMap<u32, Arc<Lease>>>>;

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
        let config = LockerConfig::try_from(init).map_err(to_napi)?;
        let locker = Locker::new(config).map_err(to_napi)?;
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

    /// `{ run, taskDone }`, the functions that start a run and report its task settled (see run_calls.rs).
    #[napi(
        ts_return_type = "{ run(id: number, key: string, required: boolean, ttl?: number, minHold?: number, autoExtend?: boolean, wait?: number): void; taskDone(id: number): void }"
    )]
    pub fn run_calls(&self, env: Env) -> napi::Result<Unknown<'_>> {
        let calls = run_calls::create(env.raw(), &self.direct)?;
        // SAFETY: a value just made in this environment.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), calls) })
    }

    /// Starts acquisition `id` of `key`: one attempt, or waiting up to `options.wait` when `wait`. Completes with
    /// the fence and token when acquired (then a lost notice follows if the lease is lost); without them when not;
    /// with a timeout error when waiting ran out.
    #[napi]
    pub fn acquire(&self, id: u32, key: String, options: Option<LockInit>, wait: bool) -> napi::Result<()> {
        let options = lock_options(options, false).map_err(to_napi)?;
        if !wait && self.direct.try_lock(id, &key, &options)? {
            return Ok(());
        }
        let (locker, leases, completions) = (self.locker.clone(), self.leases.clone(), self.completions.clone());
        spawn(async move {
            let lease =
                if wait { locker.lock(&key, &options).await.map(Some) } else { locker.try_lock(&key, &options).await };
            acquired(id, lease, &leases, &completions);
        });
        Ok(())
    }

    /// Starts operation `id`: extend lock `lock` to `ttl` ms (default: its acquisition's ttl). Completes with
    /// whether it was still ours.
    #[napi]
    pub fn extend(&self, id: u32, lock: u32, ttl: Option<f64>) -> napi::Result<()> {
        let ttl = ttl.map(|v| millis("ttl", v)).transpose().map_err(to_napi)?;
        // Checked here too so that a bad ttl is an error whether or not the lock is still held.
        ttl.map(snatch_core::validate_ttl).transpose().map_err(to_napi)?;
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

    /// Starts operation `id`: release lock `lock` (subject to minHold). Completes with whether it was still ours.
    #[napi]
    pub fn release(&self, id: u32, lock: u32) {
        let lease = self.leases.lock().expect("leases poisoned").remove(&lock);
        if lease.as_ref().is_some_and(|lease| self.direct.release(id, lease)) {
            return;
        }
        self.start(id, async move {
            let ok = match lease {
                Some(lease) => lease.release().await?,
                None => false,
            };
            Ok(Completion { ok: Some(ok), ..Completion::done(id) })
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
        name: String,
        cron: String,
        options: ScheduleInit,
        task: TickTask,
        on_event: Function<ScheduleEvent, ()>,
    ) -> napi::Result<NativeSchedule> {
        let zone = options.timezone.clone().unwrap_or_else(|| "UTC".to_owned());
        let cron = CronSchedule::new(&cron, &zone).map_err(to_napi)?;
        let options = options.try_into().map_err(to_napi)?;
        let sink = on_event.build_threadsafe_function().callee_handled::<false>().build()?;
        let handler = Arc::new(JsTickHandler { task: Arc::new(task), sink: Arc::new(sink) });
        let schedule = within_runtime_if_available(|| self.locker.schedule(&name, cron, options, handler));
        schedule.map(NativeSchedule::new).map_err(to_napi)
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

/// Runs `op` on the runtime and queues its completion (or its error) for operation `id` on `completions`.
pub(crate) fn start_op(
    completions: &Arc<Completions>,
    id: u32,
    op: impl Future<Output = Result<Completion, SnatchError>> + Send + 'static,
) {
    let completions = completions.clone();
    spawn(async move {
        completions.push(op.await.unwrap_or_else(|e| Completion::failed(id, &e)));
    });
}

/// The task of run `id` under `lease`, on the runtime: has the facade call it and waits for it to settle, telling
/// the facade if the lease is lost meanwhile.
pub(crate) async fn task_under(id: u32, lease: Arc<Lease>, completions: Arc<Completions>, settling: Settling) {
    let (settled, on_settled) = oneshot::channel();
    settling.lock().expect("settling poisoned").insert(id, settled);
    if !completions.push(Completion::task(id, lease.fence())) {
        // Not called (the JS environment is gone): the run ends at once.
        settling.lock().expect("settling poisoned").remove(&id);
        return;
    }
    tokio::pin!(on_settled);
    tokio::select! {
        _ = &mut on_settled => return,
        lost = lease.ended() => if lost { completions.push(Completion::lost_notice(id)); },
    }
    let _ = on_settled.await;
}

/// The end of run `id`, whose task ran under the lease with `fence`; `lost` if the lease lapsed meanwhile.
pub(crate) fn ran_completion(id: u32, fence: i64, lost: bool) -> Completion {
    Completion { fence: Some(BigInt::from(fence)), lost: Some(lost), ..Completion::done(id) }
}

/// Queues the completion of acquisition `id` from its `result` and, when it got a lease, keeps that as lock `id`.
pub(crate) fn acquired(
    id: u32,
    result: Result<Option<Arc<Lease>>, SnatchError>,
    leases: &Leases,
    completions: &Arc<Completions>,
) {
    match result {
        Ok(Some(lease)) => keep_lock(id, &lease, leases, completions, || {
            completions.push(locked(id, &lease));
        }),
        Ok(None) => {
            completions.push(Completion::done(id));
        }
        Err(e) => {
            completions.push(Completion::failed(id, &e));
        }
    }
}

/// The completion of acquisition `id`, which got `lease`.
pub(crate) fn locked(id: u32, lease: &Lease) -> Completion {
    Completion {
        fence: Some(BigInt::from(lease.fence())),
        token: Some(lease.token().to_owned()),
        ..Completion::done(id)
    }
}

/// Keeps `lease` as lock `id` for `release`, `extend` and `remainingMs`, until it is released or lost, with
/// `announce` telling the facade of the lock in between: the lease is kept before the facade can use the lock, and
/// a loss is told to the facade after the lock.
pub(crate) fn keep_lock(
    id: u32,
    lease: &Arc<Lease>,
    leases: &Leases,
    completions: &Arc<Completions>,
    announce: impl FnOnce(),
) {
    leases.lock().expect("leases poisoned").insert(id, lease.clone());
    announce();
    let (leases, completions) = (leases.clone(), completions.clone());
    lease.on_lost(move || {
        leases.lock().expect("leases poisoned").remove(&id);
        completions.push(Completion::lost_notice(id));
    });
}
