//! Cluster-safe cron: every occurrence of a schedule runs on exactly one replica.
//!
//! Occurrence `t` of schedule `name` is claimed with one atomic acquire of the key `name:<t in epoch ms>`. The
//! claim is renewed while the fn runs and kept for one more period after it ends, so a replica whose clock lags
//! by less than a period still finds it. The winner of the claim then takes the run lock `name` (also renewed
//! while the fn runs): if the previous occurrence's fn still holds it, the occurrence is skipped as an overlap, on
//! every replica. The fn itself runs through the runner (run/), as every run does. The timer never drifts: each
//! next occurrence comes from the cron schedule.

use crate::config::LockOptions;
use crate::lock::job::Job;
use crate::lock::locker::Locker;
use crate::run::input::{post_or_undo, Input, Post};
use crate::schedule::cron::CronSchedule;
use chrono::{DateTime, Utc};
use snatch_protocol::keys::LockKeys;
use snatch_protocol::run::{Occurrence, Outcome, SkipReason};
use snatch_protocol::SnatchError;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, watch};

/// Longest single sleep while waiting for an occurrence, so that a wall-clock change is noticed.
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// Options of a schedule.
#[derive(Debug, Clone, Default)]
pub struct ScheduleOptions {
    /// Lease of each run (renewed while the fn runs); `None` takes the locker's ttl.
    pub ttl: Option<Duration>,
    /// Test only: added to this process's wall clock when deciding when occurrences are due, to simulate replicas
    /// with skewed clocks.
    pub clock_offset_ms: i64,
}

/// A running schedule.
#[derive(Clone)]
pub struct Schedule(Job);

impl Schedule {
    /// Stops taking occurrences and waits for a running fn to settle. Idempotent.
    pub async fn stop(&self) {
        self.0.stop().await;
    }
}

/// Starts schedule `id` (the caller's id for it) of `locker`: at every occurrence of `cron`, on exactly one replica,
/// its fn runs through the runner (`post` takes the occurrence to it, as an [`Input::Occurrence`]); the caller hears
/// of an occurrence that did not run here as schedule `id`'s [`Outcome::Skipped`] or [`Outcome::Unclaimed`]. Within
/// the Tokio runtime.
pub fn schedule(
    locker: &Locker,
    id: u32,
    name: &str,
    cron: CronSchedule,
    options: ScheduleOptions,
    post: Arc<dyn Post>,
) -> Result<Schedule, SnatchError> {
    let run_keys = LockKeys::new(&locker.config().prefix, name, locker.one_slot())?;
    let lock = LockOptions { ttl: options.ttl, auto_extend: true, ..LockOptions::default() };
    lock.validate()?;
    let guard = locker.enter()?;
    let job = Job::new();
    let driver = Driver { locker: locker.clone(), id, run_keys, cron, lock, offset: options.clock_offset_ms, post };
    let handle = job.clone();
    tokio::spawn(async move {
        driver.drive(handle.stop_requests()).await;
        handle.ended();
        drop(guard);
    });
    locker.register_job(job.clone());
    Ok(Schedule(job))
}

struct Driver {
    locker: Locker,
    /// The caller's id for the schedule.
    id: u32,
    run_keys: LockKeys,
    cron: CronSchedule,
    lock: LockOptions,
    offset: i64,
    post: Arc<dyn Post>,
}

impl Driver {
    fn now(&self) -> DateTime<Utc> {
        Utc::now() + chrono::Duration::milliseconds(self.offset)
    }

    /// Waits for each occurrence in turn and handles it, until stopped; then waits for the last run.
    async fn drive(self, mut stop: watch::Receiver<bool>) {
        let me = Arc::new(self);
        let mut last: Option<DateTime<Utc>> = None;
        let mut running: Option<oneshot::Receiver<()>> = None;
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
        if let Some(end) = running {
            let _ = end.await;
        }
    }

    /// Claims `tick` and, when this replica wins it and the run lock is free, has the runner run its fn; the run's
    /// end, to wait for.
    async fn occurrence(self: Arc<Self>, tick: DateTime<Utc>) -> Option<oneshot::Receiver<()>> {
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
        let Ok(busy) = self.locker.enter() else {
            let _ = run.release().await;
            let _ = claim.release_keeping(period).await;
            return None;
        };
        let (ended, end) = oneshot::channel();
        let occurrence = Occurrence { schedule: self.id, tick: tick.timestamp_millis() };
        post_or_undo(&*self.post, Input::Occurrence { occurrence, run, claim, period, ended, busy });
        Some(end)
    }

    fn skip<T>(&self, tick: DateTime<Utc>, reason: SkipReason) -> Option<T> {
        self.tell(Outcome::Skipped { tick: tick.timestamp_millis(), reason });
        None
    }

    fn fail<T>(&self, tick: DateTime<Utc>, error: SnatchError) -> Option<T> {
        self.tell(Outcome::Unclaimed { tick: tick.timestamp_millis(), error });
        None
    }

    /// Tells the caller `outcome` of the schedule.
    fn tell(&self, outcome: Outcome) {
        let _ = self.post.post(Input::Tell(self.id, outcome));
    }
}
