//! Cluster-safe cron that loses no occurrence: every occurrence of a schedule runs on one replica, once, late when no
//! replica could run it at its tick, again when its runner died or (with `retries`) its fn failed.
//!
//! Each attempt of an occurrence is claimed with one atomic acquire of its own key (`name:<attempt id>`, see
//! snatch-protocol's schedule.rs), renewed while fn runs. The winner takes the run lock `name` unless occurrences may
//! overlap (`concurrency`), writes the attempt's record ('running', only if nobody recorded that attempt yet, which
//! also keeps a replica whose clock lags from running it again, and only if the schedule is not suspended), and has
//! the runner (run/) run fn. When fn settled, the record says how it ended before the locks are given back, so that an attempt whose
//! record says 'running' while its claim is gone had a runner that died: any replica then takes it over with the next
//! attempt (higher fence), up to a bound. A failed attempt with retries left is taken over the same way once its
//! retry is due. Every few seconds each replica renews its registration, looks at the open attempts and manual runs,
//! and looks back at the occurrences since the last look: those nobody recorded are recorded missed, but the latest
//! runs late if no later one ran and it is still within `startingDeadline`.

use crate::config::{validate_duration, LockOptions};
use crate::lock::job::Job;
use crate::lock::lease::Lease;
use crate::lock::locker::Locker;
use crate::run::hold::{AttemptEnd, Finished};
use crate::run::input::{post_or_undo, Input, Post};
use crate::schedule::cron::CronSchedule;
use crate::schedule::store::{
    self, Conditions, Control, Found, LookBack, Open, Registration, State, Write, Written, HEARTBEAT, REFRESH_EVERY,
};
use chrono::{DateTime, Utc};
use snatch_protocol::run::{AbortReason, Occurrence, Outcome, SkipReason};
use snatch_protocol::schedule::{
    error_message, max_attempts, retry_delay, Attempt, CatchUp, Record, ScheduleKeys, Status, Why, DEFAULT_HISTORY,
    MAX_HISTORY, MAX_LOOK_BACK,
};
use snatch_protocol::SnatchError;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch, Notify};
use tokio::task::JoinSet;
use tokio::time::{sleep_until, Instant};

/// Longest single sleep while waiting for an occurrence, so that a wall-clock change is noticed.
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// Occurrences younger than this are left to their on-time run (another replica's claim may be on its way), not run
/// late: beyond a little clock skew and latency.
const GRACE: Duration = Duration::from_secs(2);

/// How long a schedule's state and records stay after the last replica that registered it is gone, at least.
const KEEP: Duration = Duration::from_secs(7 * 24 * 3600);

/// The default `startingDeadline`: a deploy or a failover at a tick delays the run, and does not lose it.
pub const DEFAULT_STARTING_DEADLINE: Duration = Duration::from_secs(15 * 60);

/// While an earlier occurrence of the schedule still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Concurrency {
    /// The new one is skipped (recorded missed, reason `overlap`).
    #[default]
    Forbid,
    /// Both run.
    Allow,
    /// The running attempt's signal aborts, and the new one runs once it gave the run lock back.
    Replace,
}

/// Options of a schedule.
#[derive(Debug, Clone)]
pub struct ScheduleOptions {
    /// Lease of each attempt (renewed while the fn runs); `None` takes the locker's ttl.
    pub ttl: Option<Duration>,
    /// Test only: added to this process's wall clock when deciding when occurrences are due, to simulate replicas
    /// with skewed clocks.
    pub clock_offset_ms: i64,
    /// An occurrence no replica ran at its tick runs late if it can start within this of its tick; zero: never.
    pub starting_deadline: Duration,
    /// Further attempts after fn failed.
    pub retries: u32,
    /// Delay before the first retry, doubled for each next one, with jitter.
    pub retry_delay: Duration,
    pub concurrency: Concurrency,
    /// Per attempt: fn's signal aborts then, and the attempt counts as failed.
    pub timeout: Option<Duration>,
    /// How many records Redis keeps.
    pub history: u32,
}

impl Default for ScheduleOptions {
    fn default() -> Self {
        Self {
            ttl: None,
            clock_offset_ms: 0,
            starting_deadline: DEFAULT_STARTING_DEADLINE,
            retries: 0,
            retry_delay: Duration::from_secs(1),
            concurrency: Concurrency::Forbid,
            timeout: None,
            history: DEFAULT_HISTORY,
        }
    }
}

impl ScheduleOptions {
    /// Checks the options a caller gave.
    pub fn validate(&self) -> Result<(), SnatchError> {
        if self.history == 0 || self.history > MAX_HISTORY {
            return Err(SnatchError::range_arg(format!("history must be from 1 to {MAX_HISTORY}")));
        }
        if self.retries > 100 {
            return Err(SnatchError::range_arg("retries must be from 0 to 100"));
        }
        if let Some(timeout) = self.timeout {
            validate_duration("timeout", timeout)?;
        }
        validate_duration("retryDelay", self.retry_delay)?;
        validate_duration("startingDeadline", self.starting_deadline)
    }
}

/// A cron expression: parsed, and as written (for the records and `schedules()`).
#[derive(Debug, Clone)]
pub struct Cron {
    pub schedule: CronSchedule,
    pub expression: String,
    pub timezone: String,
}

impl Cron {
    /// Parses `expression` for the IANA zone `timezone`.
    pub fn new(expression: &str, timezone: &str) -> Result<Self, SnatchError> {
        let schedule = CronSchedule::new(expression, timezone, chrono::Utc::now())?;
        Ok(Self { schedule, expression: expression.to_owned(), timezone: timezone.to_owned() })
    }
}

/// A running schedule.
#[derive(Clone)]
pub struct Schedule(Job);

impl Schedule {
    /// Stops taking occurrences and waits for running attempts to settle and be recorded. Idempotent.
    pub async fn stop(&self) {
        self.0.stop().await;
    }
}

/// Starts schedule `id` (the caller's id for it) of `locker` under `name`: every occurrence of `cron` runs once across
/// the replicas, its fn through the runner (`post` takes each attempt to it as an [`Input::Occurrence`]); the caller
/// hears of an on-time occurrence that did not run here as schedule `id`'s [`Outcome::Skipped`] or
/// [`Outcome::Unclaimed`]. Within the Tokio runtime.
pub fn schedule(
    locker: &Locker,
    id: u32,
    name: &str,
    cron: Cron,
    options: ScheduleOptions,
    post: Arc<dyn Post>,
) -> Result<Schedule, SnatchError> {
    options.validate()?;
    let keys = ScheduleKeys::new(&locker.config().prefix, name, locker.one_slot())?;
    let lock = LockOptions { ttl: options.ttl, auto_extend: true, ..LockOptions::default() };
    lock.validate()?;
    let guard = locker.enter()?;
    let job = Job::new();
    let registration = Registration {
        instance: locker.config().instance_id.clone(),
        cron: cron.expression.clone(),
        timezone: cron.timezone.clone(),
        keep: KEEP.max(options.starting_deadline * 2),
    };
    let (work, todo) = mpsc::unbounded_channel();
    let driver = Arc::new(Driver {
        locker: locker.clone(),
        id,
        keys,
        cron: cron.schedule,
        lock,
        options,
        registration,
        post,
        here: Mutex::default(),
        suspended: AtomicBool::new(false),
        sweeping: AtomicBool::new(false),
        work,
    });
    let handle = job.clone();
    tokio::spawn(async move {
        driver.drive(handle.stop_requests(), todo).await;
        handle.ended();
        drop(guard);
    });
    locker.register_job(job.clone());
    Ok(Schedule(job))
}

/// One schedule on this replica: what it is, and the attempts running here.
struct Driver {
    locker: Locker,
    /// The caller's id for the schedule.
    id: u32,
    keys: ScheduleKeys,
    cron: CronSchedule,
    /// The leases of claims and of the run lock.
    lock: LockOptions,
    options: ScheduleOptions,
    registration: Registration,
    post: Arc<dyn Post>,
    /// The attempts whose fn runs here.
    here: Mutex<HashSet<Attempt>>,
    /// Whether the schedule was suspended when last heard.
    suspended: AtomicBool,
    /// A look at the open attempts is under way.
    sweeping: AtomicBool,
    /// Work for the driver's loop, from the attempts and looks under way.
    work: mpsc::UnboundedSender<Work>,
}

/// Work for the driver's loop.
enum Work {
    /// An attempt to start.
    Start(Start),
    /// A look at the open attempts is due then (a retry's time).
    SweepAt(Instant),
}

/// What the heartbeats of a schedule carry from one to the next.
#[derive(Default)]
struct Beats {
    /// The ticks up to this were looked back at (none before the first heartbeat).
    looked: Option<i64>,
    /// The replace last heard of.
    replace: Option<i64>,
    /// Heartbeats so far.
    count: u32,
    /// The first tick after a look back's start, while that start stays.
    first_after: Option<(i64, Option<i64>)>,
}

/// Why an attempt starts, and what it takes over.
struct Start {
    attempt: Attempt,
    why: Why,
    /// The record of the attempt it follows (crashed, or failed with a retry due), as read.
    follows: Option<Found>,
}

impl Driver {
    /// This process's wall clock, with the test offset.
    fn now(&self) -> DateTime<Utc> {
        Utc::now() + chrono::Duration::milliseconds(self.options.clock_offset_ms)
    }

    /// Runs the schedule until stopped, then waits for the attempts under way and takes its registration away.
    async fn drive(self: Arc<Self>, mut stop: watch::Receiver<bool>, mut todo: mpsc::UnboundedReceiver<Work>) {
        let mut attempts = JoinSet::new();
        let control = Arc::new(Notify::new());
        let mut watches = Vec::new();
        for node in self.locker.nodes().all() {
            watches.extend(node.watch_channel(&self.keys.control, &control).await);
        }
        let mut beats = Beats::default();
        let mut beat = self.clone().heartbeat(&mut attempts, &mut beats).await;
        let mut next = self.cron.next_after(self.now());
        let mut wake: Option<Instant> = None;
        while !*stop.borrow() {
            let Some(tick) = next else { break };
            let until_tick = (tick - self.now()).to_std().unwrap_or(Duration::ZERO);
            let tick_at = Instant::now() + until_tick.min(MAX_SLEEP);
            tokio::select! {
                _ = stop.changed() => break,
                () = sleep_until(tick_at) => {
                    if self.now() >= tick {
                        let attempt = Attempt::first(tick.timestamp_millis());
                        attempts.spawn(self.clone().run(Start { attempt, why: Why::OnTime, follows: None }));
                        next = self.cron.next_after(tick.max(self.now()));
                    }
                }
                () = sleep_until(beat) => beat = self.clone().heartbeat(&mut attempts, &mut beats).await,
                () = control.notified() => beat = self.clone().heartbeat(&mut attempts, &mut beats).await,
                () = sleep_until(wake.unwrap_or(beat)), if wake.is_some() => {
                    wake = None;
                    self.clone().sweep(&mut attempts);
                }
                Some(work) = todo.recv() => match work {
                    Work::Start(start) => drop(attempts.spawn(self.clone().run(start))),
                    Work::SweepAt(at) => wake = Some(wake.map_or(at, |w| w.min(at))),
                },
                Some(_) = attempts.join_next(), if !attempts.is_empty() => {}
            }
        }
        drop(watches);
        while attempts.join_next().await.is_some() {}
        // The fleet sees this replica gone at once (a replica that dies leaves it to lapse); Redis unreachable, it
        // lapses too.
        let _ = store::leave(&self.locker, &self.keys, &self.registration.instance).await;
    }

    /// Renews the registration and acts on what it read: suspension, a replace asked for, manual runs waiting, open
    /// attempts due for a look, and the occurrences no replica recorded since the last look back. When the next
    /// heartbeat is due.
    async fn heartbeat(self: Arc<Self>, attempts: &mut JoinSet<()>, beats: &mut Beats) -> Instant {
        // A little jitter, so that the schedules of a replica do not renew all at once.
        let next = Instant::now() + HEARTBEAT.mul_f64(rand::random_range(0.9..1.1));
        let first = beats.looked.is_none();
        let mut look = match beats.looked {
            Some(from) if self.ticked_since(from, &mut beats.first_after) => self.look_back(from),
            _ => LookBack::default(),
        };
        let refresh = beats.count.is_multiple_of(REFRESH_EVERY);
        beats.count += 1;
        let Ok(mut state) = self.register(&look, refresh).await else { return next };
        if first {
            // Now that it is known since when, the first look back.
            look = self.look_back(state.last.unwrap_or(i64::MIN).max(state.since));
            if !look.ticks.is_empty() {
                let Ok(looked) = self.register(&look, false).await else { return next };
                state = looked;
            }
        }
        beats.looked = Some(state.last.unwrap_or(i64::MIN).max(state.since).max(look.settled.unwrap_or(i64::MIN)));
        self.suspended.store(state.suspended, Ordering::SeqCst);
        // A replace asked for before this replica started concerns attempts of others.
        if !first && state.replace > beats.replace {
            self.give_way(state.replace);
        }
        beats.replace = state.replace;
        if state.triggers > 0 {
            attempts.spawn(self.clone().take_triggers());
        }
        if state.due > 0 {
            self.clone().sweep(attempts);
        }
        self.catch_up(&look, &state, attempts).await;
        // An occurrence nobody recorded yet is looked at again once its grace is over.
        let settled = look.settled.unwrap_or(i64::MIN);
        let unsettled = look.ticks.iter().zip(&state.recorded).find(|&(&tick, &recorded)| tick > settled && !recorded);
        let again = unsettled.and_then(|(&tick, _)| {
            let wait = tick + GRACE.as_millis() as i64 + 50 - self.now().timestamp_millis();
            Some(Instant::now() + Duration::from_millis(u64::try_from(wait).ok()?))
        });
        again.map_or(next, |again| again.min(next))
    }

    /// Renews the registration (with `refresh`, the schedule's expression and keys' TTLs too), looking back at
    /// `look`'s ticks.
    async fn register(&self, look: &LookBack, refresh: bool) -> Result<State, SnatchError> {
        store::register(&self.locker, &self.keys, &self.registration, look, refresh).await
    }

    /// Whether a tick came after `from` (the first one after it is kept in `first_after` while `from` stays).
    fn ticked_since(&self, from: i64, first_after: &mut Option<(i64, Option<i64>)>) -> bool {
        let first = match *first_after {
            Some((after, first)) if after == from => first,
            _ => {
                let first = DateTime::from_timestamp_millis(from).and_then(|at| self.cron.next_after(at));
                let first = first.map(|tick| tick.timestamp_millis());
                *first_after = Some((from, first));
                first
            }
        };
        first.is_some_and(|tick| tick <= self.now().timestamp_millis())
    }

    /// The ticks after `from` up to now (the newest [`MAX_LOOK_BACK`] of them), and the newest of them older than the
    /// grace.
    fn look_back(&self, from: i64) -> LookBack {
        let now = self.now();
        let mut ticks = Vec::new();
        let mut before = now + chrono::Duration::milliseconds(1);
        while let Some(tick) = self.cron.previous_before(before).filter(|t| t.timestamp_millis() > from) {
            ticks.push(tick.timestamp_millis());
            if ticks.len() == MAX_LOOK_BACK {
                break;
            }
            before = tick;
        }
        ticks.reverse();
        let settled_before = (now - chrono::Duration::from_std(GRACE).unwrap_or_default()).timestamp_millis();
        let settled = ticks.iter().copied().filter(|&tick| tick <= settled_before).max();
        LookBack { ticks, settled }
    }

    /// Aborts the signal of the attempts running here of occurrences before `replace` (a later one replaces them).
    fn give_way(&self, replace: Option<i64>) {
        let Some(replace) = replace else { return };
        for &attempt in self.here.lock().expect("attempts poisoned").iter().filter(|a| a.tick < replace) {
            let abort = Input::Abort { schedule: self.id, attempt, reason: AbortReason::Replaced };
            let _ = self.post.post(abort);
        }
    }

    /// Takes the manual runs waiting, each to run here.
    async fn take_triggers(self: Arc<Self>) {
        while let Ok(Some(tick)) = store::take_trigger(&self.locker, &self.keys).await {
            let attempt = Attempt { tick, manual: true, attempt: 1 };
            let _ = self.work.send(Work::Start(Start { attempt, why: Why::Manual, follows: None }));
        }
    }

    /// Looks at the open attempts, in the background: each that needs another (its runner died, or its retry is
    /// due) gets it, here, unless another replica takes it first.
    fn sweep(self: Arc<Self>, attempts: &mut JoinSet<()>) {
        if self.sweeping.swap(true, Ordering::SeqCst) {
            return;
        }
        attempts.spawn(async move {
            let found = store::sweep(&self.locker, &self.keys).await;
            self.sweeping.store(false, Ordering::SeqCst);
            for found in found.unwrap_or_default() {
                let record = &found.record;
                let crashed = record.outcome == Status::Running;
                let attempt = record.attempt();
                if crashed && attempt.attempt >= max_attempts(self.options.retries) {
                    // A poison job: its runner keeps dying. It stops here, recorded failed.
                    let mut last = record.clone();
                    last.outcome = Status::Failed;
                    last.error =
                        Some(format!("the runner of attempt {} died, and no attempt is left", attempt.attempt));
                    let conditions = Conditions { only_running: true, ..Conditions::default() };
                    let write = Write { record: &last, conditions, open: Open::Closed, takes_over: None };
                    let _ = self.record(&write).await;
                    continue;
                }
                let start = Start { attempt: attempt.next(), why: Why::Retry, follows: Some(found) };
                let _ = self.work.send(Work::Start(start));
            }
        });
    }

    /// Records the occurrences the look back found that no replica ran, and runs the latest late when no later one
    /// ran and it can still start within `startingDeadline` (see snatch-protocol's `CatchUp`).
    async fn catch_up(self: &Arc<Self>, look: &LookBack, state: &State, attempts: &mut JoinSet<()>) {
        // Not the ticks from before the schedule's registration: with a state that is gone (Redis restarted empty, or
        // everything expired) their records are gone too, and what ran then is not known.
        let ticks: Vec<(i64, bool)> = look.ticks.iter().copied().zip(state.recorded.iter().copied()).collect();
        let ticks: Vec<(i64, bool)> = ticks.into_iter().filter(|&(tick, _)| tick > state.since).collect();
        let plan = CatchUp::plan(&ticks, self.now().timestamp_millis(), GRACE, self.options.starting_deadline);
        for (tick, reason) in plan.missed {
            let record = Record::missed(Attempt::first(tick), Why::OnTime, reason);
            let conditions = Conditions { only_new: true, ..Conditions::default() };
            let write = Write { record: &record, conditions, open: Open::Unchanged, takes_over: None };
            if self.record(&write).await.is_err() {
                return;
            }
        }
        if let Some(tick) = plan.late {
            attempts.spawn(self.clone().run(Start { attempt: Attempt::first(tick), why: Why::Late, follows: None }));
        }
    }

    /// One attempt: claim it, take the run lock, record it running, have fn run, record how it ended.
    async fn run(self: Arc<Self>, start: Start) {
        let Start { attempt, why, follows } = start;
        let claim = match self.locker.acquire_keys(self.keys.claim(&attempt), &self.lock).await {
            Ok(Some(claim)) => claim,
            Ok(None) => return self.skip(attempt, why, self.taken()),
            Err(error) => return self.fail(attempt, why, error),
        };
        let run = match self.run_lock(attempt, why).await {
            Ok(Some(run)) => Some(run),
            Ok(None) if self.options.concurrency == Concurrency::Allow => None,
            Ok(None) => {
                let _ = claim.release().await;
                // A retry is taken over later, once the run lock is free.
                if why != Why::Retry {
                    self.missed(attempt, why, "overlap").await;
                    self.skip(attempt, why, SkipReason::Overlap);
                }
                return;
            }
            Err(error) => {
                let _ = claim.release().await;
                return self.fail(attempt, why, error);
            }
        };
        let fence = run.as_ref().unwrap_or(&claim).fence();
        let running = Record {
            tick: attempt.tick,
            manual: attempt.manual,
            attempt: attempt.attempt,
            why,
            instance: Some(self.registration.instance.clone()),
            fence: Some(fence.to_string()),
            started: Some(self.now().timestamp_millis()),
            duration_ms: None,
            outcome: Status::Running,
            error: None,
            reason: None,
            retry_at: None,
        };
        let crashed = follows.as_ref().map(|seen| {
            let mut crashed = seen.record.clone();
            if crashed.outcome == Status::Running {
                crashed.outcome = Status::Crashed;
            }
            crashed
        });
        let conditions = Conditions { unless_suspended: why != Why::Manual, only_new: true, only_running: false };
        let write = Write {
            record: &running,
            conditions,
            open: Open::LookIn(self.locker.lease_ttl(&self.lock)),
            takes_over: follows.as_ref().zip(crashed.as_ref()),
        };
        let written = self.record(&write).await;
        if written != Ok(Written::Yes) {
            if let Some(run) = &run {
                let _ = run.release().await;
            }
            let _ = claim.release().await;
            match written {
                Ok(Written::Suspended) => {
                    self.missed(attempt, why, "suspended").await;
                    self.skip(attempt, why, SkipReason::Suspended);
                }
                Ok(_) => self.skip(attempt, why, SkipReason::Taken),
                Err(error) => self.fail(attempt, why, error),
            }
            return;
        }
        let Ok(busy) = self.locker.enter() else {
            if let Some(run) = run {
                let _ = run.release().await;
            }
            let _ = claim.release().await;
            return;
        };
        let (ended, end) = oneshot::channel();
        self.here.lock().expect("attempts poisoned").insert(attempt);
        let occurrence = Occurrence { schedule: self.id, attempt, why };
        post_or_undo(&*self.post, Input::Occurrence { occurrence, run, claim, ended, busy });
        let finished = match self.options.timeout {
            None => end.await,
            Some(timeout) => {
                tokio::pin!(end);
                tokio::select! {
                    finished = &mut end => finished,
                    () = tokio::time::sleep(timeout) => {
                        let _ = self.post.post(Input::Abort { schedule: self.id, attempt, reason: AbortReason::Timeout });
                        end.await
                    }
                }
            }
        };
        self.here.lock().expect("attempts poisoned").remove(&attempt);
        // Without an end, nothing ran here (the runner is gone): its record stays 'running' and, once its claim
        // lapses, another replica takes it over.
        if let Ok(Finished { end, recorded, released }) = finished {
            self.ended(running, end).await;
            drop(recorded);
            let _ = released.await;
        }
    }

    /// The run lock for `attempt`, as the concurrency policy has it: none needed (`allow`), one try (`forbid`, and
    /// retries), or, for a manual run, and with `replace` after asking the running attempt to give way, waiting up to
    /// the lease's length.
    async fn run_lock(&self, attempt: Attempt, why: Why) -> Result<Option<Arc<Lease>>, SnatchError> {
        let concurrency = self.options.concurrency;
        if concurrency == Concurrency::Allow {
            return Ok(None);
        }
        let run = self.locker.acquire_keys(self.keys.run.clone(), &self.lock).await?;
        let waits = why == Why::Manual || (concurrency == Concurrency::Replace && why != Why::Retry);
        if run.is_some() || !waits {
            return Ok(run);
        }
        if concurrency == Concurrency::Replace && !attempt.manual {
            store::control(&self.locker, &self.keys, Control::Replace(attempt.tick), self.registration.keep).await?;
        }
        let wait = LockOptions { wait: self.locker.lease_ttl(&self.lock), ..self.lock.clone() };
        self.locker.acquire_keys(self.keys.run.clone(), &wait).await
    }

    /// Records how `running`'s attempt ended (`end`), with the next attempt's time when it failed and has retries
    /// left; unless another replica took it over meanwhile.
    async fn ended(&self, running: Record, end: AttemptEnd) {
        let (outcome, error) = match (end.lost, end.aborted, end.failure) {
            (true, ..) => (Status::Lost, Some("the lease could not be guaranteed for the whole run".to_owned())),
            (_, Some(AbortReason::Timeout), _) => {
                let ms = self.options.timeout.unwrap_or_default().as_millis();
                (Status::Timeout, Some(format!("the attempt timed out after {ms} ms")))
            }
            (_, Some(AbortReason::Replaced), _) => (Status::Failed, Some("a later occurrence replaced it".to_owned())),
            (_, None, Some(failure)) => (Status::Failed, Some(error_message(&failure))),
            (_, None, None) => (Status::Ok, None),
        };
        let attempt = running.attempt();
        let replaced = end.aborted == Some(AbortReason::Replaced);
        let retry = outcome != Status::Ok && !replaced && attempt.attempt <= self.options.retries;
        let delay = retry_delay(self.options.retry_delay, attempt.attempt + 1, rand::random_range(0.8..1.2));
        let record = Record {
            duration_ms: Some(end.duration.as_secs_f64() * 1000.0),
            fence: Some(end.fence.to_string()),
            outcome,
            error,
            retry_at: retry.then(|| self.now().timestamp_millis() + delay.as_millis() as i64),
            ..running
        };
        let conditions = Conditions { only_running: true, ..Conditions::default() };
        let open = if retry { Open::LookIn(delay) } else { Open::Closed };
        let write = Write { record: &record, conditions, open, takes_over: None };
        if self.record(&write).await == Ok(Written::Yes) && retry {
            let _ = self.work.send(Work::SweepAt(Instant::now() + delay));
        }
    }

    /// Records that `attempt` did not run, for `reason` (unless it has a record already).
    async fn missed(&self, attempt: Attempt, why: Why, reason: &str) {
        let record = Record::missed(attempt, why, reason);
        let conditions = Conditions { only_new: true, ..Conditions::default() };
        let _ = self.record(&Write { record: &record, conditions, open: Open::Unchanged, takes_over: None }).await;
    }

    /// Writes a record of the schedule.
    async fn record(&self, write: &Write<'_>) -> Result<Written, SnatchError> {
        store::record(&self.locker, &self.keys, write, self.options.history, self.registration.keep).await
    }

    /// Why another replica has an occurrence this one did not get: taken, or suspended as far as this one knows.
    fn taken(&self) -> SkipReason {
        if self.suspended.load(Ordering::SeqCst) {
            SkipReason::Suspended
        } else {
            SkipReason::Taken
        }
    }

    /// Tells the caller that an occurrence due now did not run here (only on-time ones: the others are the
    /// scheduler's own business, and in the records).
    fn skip(&self, attempt: Attempt, why: Why, reason: SkipReason) {
        if why == Why::OnTime {
            self.tell(Outcome::Skipped { tick: attempt.tick, reason });
        }
    }

    /// Tells the caller that an on-time attempt could not be claimed or recorded: it did not run here (and runs late
    /// once Redis answers again, within `startingDeadline`).
    fn fail(&self, attempt: Attempt, why: Why, error: SnatchError) {
        if why == Why::OnTime {
            self.tell(Outcome::Unclaimed { tick: attempt.tick, error });
        }
    }

    /// Tells the caller `outcome` of the schedule.
    fn tell(&self, outcome: Outcome) {
        let _ = self.post.post(Input::Tell(self.id, outcome));
    }
}
