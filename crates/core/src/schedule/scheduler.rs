//! Cluster-safe cron: every occurrence of a schedule runs on exactly one replica.
//!
//! Occurrence `t` of schedule `name` is claimed with one atomic acquire of the key `name:<t in epoch ms>`. The
//! claim is renewed while the task runs and kept for one more period after it ends, so a replica whose clock lags
//! by less than a period still finds it. The winner of the claim then takes the run lock `name` (also renewed
//! while the task runs): if the previous occurrence's task still holds it, the occurrence is skipped as an
//! overlap, on every replica. The timer never drifts: each next occurrence comes from the cron schedule.

use crate::config::LockOptions;
use crate::lock::job::Job;
use crate::lock::lease::Lease;
use crate::lock::locker::Locker;
use crate::schedule::cron::CronSchedule;
use chrono::{DateTime, Utc};
use snatch_protocol::keys::LockKeys;
use snatch_protocol::SnatchError;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// Longest single sleep while waiting for an occurrence, so that a wall-clock change is noticed.
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// Why an occurrence did not run here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// Another replica claimed it.
    Taken,
    /// The task of an earlier occurrence was still running.
    Overlap,
}

/// What happened to one occurrence, as the schedule's handler hears it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TickEvent {
    /// The occurrence did not run here.
    Skip { tick: DateTime<Utc>, reason: SkipReason },
    /// Claiming the occurrence failed (Redis unreachable, no quorum); it did not run here.
    Error { tick: DateTime<Utc>, error: SnatchError },
    /// The task ran and settled; `lost` when its lease could not be guaranteed for the whole run.
    Ran { tick: DateTime<Utc>, fence: i64, lost: bool, duration: Duration },
}

/// Runs a schedule's task and hears its events. Dropped once the schedule has stopped and its last run ended.
pub trait TickHandler: Send + Sync + 'static {
    /// Runs the task of occurrence `tick` under `lease` (the run lock, renewed while this future runs).
    fn run(&self, tick: DateTime<Utc>, lease: Arc<Lease>) -> Pin<Box<dyn Future<Output = ()> + Send>>;
    /// Hears what happened to an occurrence.
    fn event(&self, event: TickEvent);
}

/// Options of a schedule.
#[derive(Debug, Clone, Default)]
pub struct ScheduleOptions {
    /// Lease of each run (renewed while the task runs); `None` takes the locker's ttl.
    pub ttl: Option<Duration>,
    /// Test only: added to this process's wall clock when deciding when occurrences are due, to simulate replicas
    /// with skewed clocks.
    pub clock_offset_ms: i64,
}

/// A running schedule.
#[derive(Clone)]
pub struct Schedule(Job);

impl Schedule {
    /// Stops taking occurrences and waits for a running task to settle. Idempotent.
    pub async fn stop(&self) {
        self.0.stop().await;
    }
}

impl Locker {
    /// Starts running `handler` at every occurrence of `cron`, on exactly one replica per occurrence. Must be
    /// called inside a Tokio runtime.
    pub fn schedule(
        &self,
        name: &str,
        cron: CronSchedule,
        options: ScheduleOptions,
        handler: Arc<dyn TickHandler>,
    ) -> Result<Schedule, SnatchError> {
        let run_keys = LockKeys::new(&self.config().prefix, name, self.one_slot())?;
        let lock = LockOptions { ttl: options.ttl, auto_extend: true, ..LockOptions::default() };
        lock.validate()?;
        let guard = self.enter()?;
        let job = Job::new();
        let driver = Driver { locker: self.clone(), run_keys, cron, lock, offset: options.clock_offset_ms, handler };
        let handle = job.clone();
        tokio::spawn(async move {
            driver.drive(handle.stop_requests()).await;
            handle.ended();
            drop(guard);
        });
        self.register_job(job.clone());
        Ok(Schedule(job))
    }
}

struct Driver {
    locker: Locker,
    run_keys: LockKeys,
    cron: CronSchedule,
    lock: LockOptions,
    offset: i64,
    handler: Arc<dyn TickHandler>,
}

impl Driver {
    fn now(&self) -> DateTime<Utc> {
        Utc::now() + chrono::Duration::milliseconds(self.offset)
    }

    /// Waits for each occurrence in turn and handles it, until stopped; then waits for the last run.
    async fn drive(self, mut stop: watch::Receiver<bool>) {
        let me = Arc::new(self);
        let mut last: Option<DateTime<Utc>> = None;
        let mut running: Option<tokio::task::JoinHandle<()>> = None;
        'occurrences: while !*stop.borrow() {
            let after = last.map_or_else(|| me.now(), |l| l.max(me.now()));
            let Some(tick) = me.cron.next_after(after) else { break };
            while let Ok(wait) = (tick - me.now()).to_std() {
                if wait.is_zero() {
                    break;
                }
                tokio::select! {
                    () = tokio::time::sleep(wait.min(MAX_SLEEP)) => {}
                    _ = stop.changed() => break 'occurrences,
                }
            }
            last = Some(tick);
            if let Some(run) = me.clone().occurrence(tick).await {
                running = Some(run);
            }
        }
        if let Some(run) = running {
            let _ = run.await;
        }
    }

    /// Claims `tick` and, when this replica wins it and the run lock is free, starts its run.
    async fn occurrence(self: Arc<Self>, tick: DateTime<Utc>) -> Option<tokio::task::JoinHandle<()>> {
        let period = self.cron.next_after(tick).and_then(|n| (n - tick).to_std().ok()).unwrap_or(Duration::ZERO);
        let claim_keys = LockKeys::occurrence(&self.run_keys, tick.timestamp_millis(), self.locker.one_slot());
        let claim = match self.locker.acquire_keys(claim_keys, &self.lock).await {
            Ok(Some(claim)) => claim,
            Ok(None) => return self.skip(tick, SkipReason::Taken),
            Err(error) => return self.fail(tick, error),
        };
        let run = match self.locker.acquire_keys(self.run_keys.clone(), &self.lock).await {
            Ok(Some(run)) => run,
            Ok(None) => {
                let _ = claim.release_keeping(period).await;
                return self.skip(tick, SkipReason::Overlap);
            }
            Err(error) => {
                let _ = claim.release_keeping(period).await;
                return self.fail(tick, error);
            }
        };
        let busy = self.locker.enter().ok()?;
        Some(tokio::spawn(async move {
            let started = Instant::now();
            self.handler.run(tick, run.clone()).await;
            let duration = started.elapsed();
            let lost = run.lapsed() || claim.lapsed();
            let _ = run.release().await;
            let _ = claim.release_keeping(period).await;
            self.handler.event(TickEvent::Ran { tick, fence: run.fence(), lost, duration });
            drop(busy);
        }))
    }

    fn skip<T>(&self, tick: DateTime<Utc>, reason: SkipReason) -> Option<T> {
        self.handler.event(TickEvent::Skip { tick, reason });
        None
    }

    fn fail<T>(&self, tick: DateTime<Utc>, error: SnatchError) -> Option<T> {
        self.handler.event(TickEvent::Error { tick, error });
        None
    }
}
