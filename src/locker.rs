//! `NativeLocker`: the core locker, with the user's task called through a ThreadsafeFunction.

use crate::errors::to_napi;
use crate::lock::NativeLock;
use crate::options::{LockInit, LockerInit, ScheduleInit};
use crate::schedule::{JsTickHandler, NativeSchedule, ScheduleEvent, TickTask};
use napi::bindgen_prelude::{within_runtime_if_available, BigInt, Function, Promise};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use napi_derive::napi;
use snatch_core::{CronSchedule, Lease, Locker, LockerConfig};
use std::sync::Arc;

/// The facade's wrapper around the user's function: called with the fence, it runs the function and keeps its
/// value or error on the JS side, so its promise always resolves.
type Task = ThreadsafeFunction<BigInt, Promise<()>, BigInt, Status, false>;

/// Tells the facade that the lease of the acquisition with this id was lost. Weak: it never keeps the process
/// alive by itself.
type LostNotifier = ThreadsafeFunction<u32, (), u32, Status, false, true>;

/// How a `run` ended when the lock was acquired.
#[napi(object)]
pub struct RunOutcome {
    pub fence: BigInt,
    /// The lease could not be guaranteed for the whole run.
    pub lost: bool,
}

/// A locker; the facade's `Locker` wraps it.
#[napi]
pub struct NativeLocker {
    locker: Arc<Locker>,
    on_lost: Arc<LostNotifier>,
}

#[napi]
impl NativeLocker {
    /// Validates the options; `on_lost(id)` is called when the lease of acquisition `id` is lost.
    #[napi(constructor)]
    pub fn new(init: LockerInit, on_lost: Function<u32, ()>) -> napi::Result<Self> {
        let config = LockerConfig::try_from(init).map_err(to_napi)?;
        let locker = Locker::new(config).map_err(to_napi)?;
        let on_lost = on_lost.build_threadsafe_function().weak::<true>().callee_handled::<false>().build()?;
        Ok(Self { locker: Arc::new(locker), on_lost: Arc::new(on_lost) })
    }

    /// Acquires `key` (waiting up to `options.wait`), calls `task(fence)` and awaits it, releases. When the lock is
    /// not acquired: `null`, or a timeout error if `required`.
    #[napi(
        ts_args_type = "key: string, id: number, options: LockInit, required: boolean, task: (fence: bigint) => Promise<void>"
    )]
    pub async fn run(
        &self,
        key: String,
        id: u32,
        options: LockInit,
        required: bool,
        task: Task,
    ) -> napi::Result<Option<RunOutcome>> {
        let options: snatch_core::LockOptions = options.try_into().map_err(to_napi)?;
        let ran = self
            .locker
            .run(&key, &options, |lease| async move {
                self.watch(&lease, id);
                task.call_async_catch(BigInt::from(lease.fence())).await?.await
            })
            .await
            .map_err(to_napi)?;
        match ran {
            None if required => Err(to_napi(snatch_core::not_acquired(&key, options.wait))),
            None => Ok(None),
            Some(ran) => {
                ran.output?;
                Ok(Some(RunOutcome { fence: BigInt::from(ran.fence), lost: ran.lost }))
            }
        }
    }

    /// One attempt at `key`; `null` when held elsewhere.
    #[napi]
    pub async fn try_lock(&self, key: String, id: u32, options: LockInit) -> napi::Result<Option<NativeLock>> {
        let options = options.try_into().map_err(to_napi)?;
        let lease = self.locker.try_lock(&key, &options).await.map_err(to_napi)?;
        Ok(lease.map(|lease| {
            self.watch(&lease, id);
            NativeLock::new(lease)
        }))
    }

    /// Waits up to `options.wait` for `key`; rejects with a timeout error.
    #[napi]
    pub async fn lock(&self, key: String, id: u32, options: LockInit) -> napi::Result<NativeLock> {
        let options = options.try_into().map_err(to_napi)?;
        let lease = self.locker.lock(&key, &options).await.map_err(to_napi)?;
        self.watch(&lease, id);
        Ok(NativeLock::new(lease))
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

    /// Waits for calls under way, releases every lock still held, closes the connections. Idempotent.
    #[napi]
    pub async fn close(&self) {
        self.locker.close().await;
    }

    /// Calls `on_lost(id)` if the lease ends by being lost.
    fn watch(&self, lease: &Arc<Lease>, id: u32) {
        let lease = lease.clone();
        let on_lost = self.on_lost.clone();
        tokio::spawn(async move {
            if lease.ended().await {
                on_lost.call(id, ThreadsafeFunctionCallMode::NonBlocking);
            }
        });
    }
}
