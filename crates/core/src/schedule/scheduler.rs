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
use crate::lock::locker::{Busy, Locker};
use crate::run::hold::FnSettled;
use crate::run::input::{post_or_undo, Input, Post};
use crate::schedule::cron::CronSchedule;
use crate::schedule::store::{self, Control, LookBack, Registration, HEARTBEAT, REFRESH_EVERY};
use chrono::{DateTime, Utc};
use snatch_protocol::attempt::{AbortReason, AttemptRun, Concurrency, Do, Next, Now, Policy, SkipReason};
use snatch_protocol::run::{Occurrence, Outcome};
use snatch_protocol::schedule::{
    Attempt, CatchUp, Found, Limits, Registered, ScheduleKeys, Status, Why, Write, Written, DEFAULT_HISTORY,
    MAX_HISTORY, MAX_LOOK_BACK,
};
use snatch_protocol::SnatchError;
use std::collections::{HashMap, VecDeque};
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

/// Why an attempt's fn did not run.
enum NotRun {
    /// The locker is closing.
    Closing,
    /// The runner is gone (its JS environment torn down), or the attempt holds no claim.
    Gone,
}

/// How long after an open attempt is due (or its claim would lapse) a replica looks at it: the server's expiry of a
/// key is exact to the millisecond.
const LOOK_SLACK: Duration = Duration::from_millis(20);

/// The default `startingDeadline`: a deploy or a failover at a tick delays the run, and does not lose it.
pub const DEFAULT_STARTING_DEADLINE: Duration = Duration::from_secs(15 * 60);

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
    /// An attempt running longer makes the schedule's health `stuck` (it is not aborted).
    pub max_runtime: Option<Duration>,
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
            max_runtime: None,
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
        if let Some(max_runtime) = self.max_runtime {
            validate_duration("maxRuntime", max_runtime)?;
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
        limits: Limits {
            timeout: options.timeout,
            max_runtime: options.max_runtime,
            starting_deadline: options.starting_deadline,
        },
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
    /// The attempts whose fn runs here, each with the way to abort its signal.
    here: Mutex<HashMap<Attempt, mpsc::UnboundedSender<AbortReason>>>,
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

/// What an attempt holds while it is under way.
#[derive(Default)]
struct Locks {
    claim: Option<Arc<Lease>>,
    /// The run lock, unless occurrences may overlap.
    run: Option<Arc<Lease>>,
    /// The runner's id of the run of fn, once it ran.
    run_id: Option<u32>,
    /// Counts the run on the locker, from fn's call until the locks are given back.
    busy: Option<Busy>,
}

impl Locks {
    /// Keeps the lease of `acquired` in `slot`: its fence.
    fn take(
        slot: &mut Option<Arc<Lease>>,
        acquired: Result<Option<Arc<Lease>>, SnatchError>,
    ) -> Result<Option<i64>, SnatchError> {
        let lease = acquired?;
        let fence = lease.as_ref().map(|lease| lease.fence());
        *slot = lease;
        Ok(fence)
    }

    /// Gives back the run lock, then the claim.
    async fn release(self) {
        if let Some(run) = self.run {
            let _ = run.release().await;
        }
        if let Some(claim) = self.claim {
            let _ = claim.release().await;
        }
        drop(self.busy);
    }
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
        // The attempts under way finish, unless the closing locker's time for them runs out first: their fns then stop,
        // and they are handed over.
        let mut cut = self.locker.cut_requests();
        let cutting = async {
            if cut.wait_for(|&cut| cut).await.is_ok() {
                self.abort_here(|_| true, AbortReason::Shutdown);
            }
            std::future::pending::<()>().await
        };
        tokio::pin!(cutting);
        loop {
            tokio::select! {
                joined = attempts.join_next() => if joined.is_none() { break },
                () = &mut cutting => {}
            }
        }
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
        // The next open attempt is looked at when it is due (its lease over, its retry due), not at a later beat.
        if let Some(due_in) = state.due_in.and_then(|ms| u64::try_from(ms).ok()) {
            let _ = self.work.send(Work::SweepAt(Instant::now() + Duration::from_millis(due_in) + LOOK_SLACK));
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
    async fn register(&self, look: &LookBack, refresh: bool) -> Result<Registered, SnatchError> {
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
        self.abort_here(|attempt| attempt.tick < replace, AbortReason::Replaced);
    }

    /// Aborts, for `reason`, the signal of the attempts running here that `which` picks.
    fn abort_here(&self, which: impl Fn(&Attempt) -> bool, reason: AbortReason) {
        for (_, abort) in self.here.lock().expect("attempts poisoned").iter().filter(|(a, _)| which(a)) {
            let _ = abort.send(reason);
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
            let swept = store::sweep(&self.locker, &self.keys).await.unwrap_or_default();
            self.sweeping.store(false, Ordering::SeqCst);
            // A running attempt's claim, renewed by its runner, is looked at again when it would lapse: a runner that
            // died is taken over then.
            if let Some(again) = swept.again {
                let _ = self.work.send(Work::SweepAt(Instant::now() + again + LOOK_SLACK));
            }
            for found in swept.found {
                match Next::after(&found, self.options.retries) {
                    Next::Attempt(attempt) => {
                        let start = Start { attempt, why: Why::Retry, follows: Some(found) };
                        let _ = self.work.send(Work::Start(start));
                    }
                    Next::GiveUp(write) => drop(self.record(&write).await),
                }
            }
        });
    }

    /// Records the occurrences the look back found that no replica ran, and runs the latest late when no later one
    /// ran and it can still start within `startingDeadline` (see snatch-protocol's `CatchUp`).
    async fn catch_up(self: &Arc<Self>, look: &LookBack, state: &Registered, attempts: &mut JoinSet<()>) {
        // Not the ticks from before the schedule's registration: with a state that is gone (Redis restarted empty, or
        // everything expired) their records are gone too, and what ran then is not known.
        let ticks: Vec<(i64, bool)> = look.ticks.iter().copied().zip(state.recorded.iter().copied()).collect();
        let ticks: Vec<(i64, bool)> = ticks.into_iter().filter(|&(tick, _)| tick > state.since).collect();
        let plan = CatchUp::plan(&ticks, self.now().timestamp_millis(), GRACE, self.options.starting_deadline);
        for (tick, reason) in plan.missed {
            if self.record(&Write::missed(Attempt::first(tick), Why::OnTime, reason)).await.is_err() {
                return;
            }
        }
        if let Some(tick) = plan.late {
            attempts.spawn(self.clone().run(Start { attempt: Attempt::first(tick), why: Why::Late, follows: None }));
        }
    }

    /// One attempt, as snatch-protocol's [`AttemptRun`] says: each of its steps done here, and what came of it fed
    /// back, until it is over.
    async fn run(self: Arc<Self>, start: Start) {
        let Start { attempt, why, follows } = start;
        if self.locker.stalled() {
            // The caller's loop has not turned within maxStall: its fn would not run. Another replica claims it (or it
            // runs late, or is taken over, once this one turns again).
            return;
        }
        let policy = Policy {
            concurrency: self.options.concurrency,
            retries: self.options.retries,
            retry_delay: self.options.retry_delay,
            timeout: self.options.timeout,
            lease: self.locker.lease_ttl(&self.lock),
        };
        let instance = self.registration.instance.clone();
        let suspended = self.suspended.load(Ordering::SeqCst);
        let lease = policy.lease;
        let (mut machine, first) = AttemptRun::new(attempt, why, follows, policy, instance, suspended);
        let mut locks = Locks::default();
        let mut todo = VecDeque::from([first]);
        while let Some(step) = todo.pop_front() {
            let next = match step {
                Do::Claim => {
                    let claimed = self.locker.acquire_keys(self.keys.claim(&attempt), &self.lock).await;
                    machine.claimed(Locks::take(&mut locks.claim, claimed), self.clock())
                }
                Do::TakeRunLock => {
                    let taken = self.locker.acquire_keys(self.keys.run.clone(), &self.lock).await;
                    machine.run_lock(Locks::take(&mut locks.run, taken), self.clock())
                }
                Do::WaitForRunLock => {
                    let wait = LockOptions { wait: self.locker.lease_ttl(&self.lock), ..self.lock.clone() };
                    let taken = self.locker.acquire_keys(self.keys.run.clone(), &wait).await;
                    machine.run_lock(Locks::take(&mut locks.run, taken), self.clock())
                }
                Do::AskToGiveWay => {
                    let replace = Control::Replace(attempt.tick);
                    machine.asked(
                        store::control(&self.locker, &self.keys, replace, self.registration.keep).await.map(drop),
                    )
                }
                Do::Record(write) => {
                    let written = self.record(&write).await;
                    machine.recorded(written, self.clock())
                }
                Do::Run { .. } => match self.run_fn(&mut machine, why, &mut locks).await {
                    Ok(next) => next,
                    Err(NotRun::Closing) => {
                        // The locker closed before fn could run: interrupted, the attempt is handed over at once.
                        machine.abort(AbortReason::Shutdown);
                        machine.settled(None, false, self.clock(), 1.0)
                    }
                    Err(NotRun::Gone) => {
                        // The runner is gone (its JS environment torn down) with what it held: the record stays
                        // 'running' and, once the claim lapses, another replica takes the attempt over.
                        locks.release().await;
                        return;
                    }
                },
                Do::Abort(reason) => {
                    let _ = self.post.post(Input::Abort { schedule: self.id, attempt, reason });
                    vec![]
                }
                Do::Release => {
                    let run_id = locks.run_id;
                    std::mem::take(&mut locks).release().await;
                    locks.run_id = run_id;
                    vec![]
                }
                Do::Skipped(reason) => {
                    if reason == SkipReason::Taken {
                        // Another replica runs it: looked at once its lease would lapse, should that replica die.
                        let at = Instant::now() + lease + LOOK_SLACK;
                        let _ = self.work.send(Work::SweepAt(at));
                    }
                    self.tell(Outcome::Skipped { tick: attempt.tick, reason });
                    vec![]
                }
                Do::Unclaimed(error) => {
                    self.tell(Outcome::Unclaimed { tick: attempt.tick, error });
                    vec![]
                }
                Do::LookAgainIn(delay) => {
                    let _ = self.work.send(Work::SweepAt(Instant::now() + delay));
                    vec![]
                }
                Do::HandOver => {
                    let _ = store::control(&self.locker, &self.keys, Control::HandOver, self.registration.keep).await;
                    vec![]
                }
                Do::End(ended) => {
                    if let Some(id) = locks.run_id {
                        let _ = self.post.post(Input::Ended { id, ended });
                    }
                    vec![]
                }
            };
            todo.extend(next);
        }
    }

    /// Has the runner run the attempt's fn under `locks`, aborting its signal as `machine` says (the attempt's
    /// timeout, a later occurrence replacing it, the locker's close); what `machine` says once fn settled, or why fn
    /// did not run.
    async fn run_fn(&self, machine: &mut AttemptRun, why: Why, locks: &mut Locks) -> Result<Vec<Do>, NotRun> {
        let attempt = machine.attempt();
        let claim = locks.claim.clone().ok_or(NotRun::Gone)?;
        // The run counts on the locker (`close` waits for it) until its locks are given back.
        locks.busy = Some(self.locker.enter().map_err(|_| NotRun::Closing)?);
        let (settled, fn_settled) = oneshot::channel();
        let (abort, mut aborts) = mpsc::unbounded_channel();
        self.here.lock().expect("attempts poisoned").insert(attempt, abort.clone());
        let occurrence = Occurrence { schedule: self.id, attempt, why };
        post_or_undo(&*self.post, Input::Occurrence { occurrence, run: locks.run.clone(), claim, settled });
        if let Some(timeout) = self.options.timeout {
            tokio::spawn(async move {
                tokio::time::sleep(timeout).await;
                let _ = abort.send(AbortReason::Timeout);
            });
        }
        tokio::pin!(fn_settled);
        let settled = loop {
            tokio::select! {
                settled = &mut fn_settled => break settled,
                Some(reason) = aborts.recv() => {
                    for step in machine.abort(reason) {
                        if let Do::Abort(reason) = step {
                            let _ = self.post.post(Input::Abort { schedule: self.id, attempt, reason });
                        }
                    }
                }
            }
        };
        self.here.lock().expect("attempts poisoned").remove(&attempt);
        let FnSettled { id, failure, lost } = settled.map_err(|_| NotRun::Gone)?;
        locks.run_id = Some(id);
        Ok(machine.settled(failure, lost, self.clock(), rand::random_range(0.8..1.2)))
    }

    /// This replica's time, for an attempt.
    fn clock(&self) -> Now {
        Now { wall_ms: self.now().timestamp_millis(), instant: std::time::Instant::now() }
    }

    /// Writes a record of the schedule; the caller hears of an occurrence recorded missed here.
    async fn record(&self, write: &Write) -> Result<Written, SnatchError> {
        let written =
            store::record(&self.locker, &self.keys, write, self.options.history, self.registration.keep).await;
        if written == Ok(Written::Yes) && write.record.outcome == Status::Missed {
            let reason = write.record.reason.clone().unwrap_or_default();
            self.tell(Outcome::Missed { tick: write.record.tick, reason });
        }
        written
    }

    /// Tells the caller `outcome` of the schedule.
    fn tell(&self, outcome: Outcome) {
        let _ = self.post.post(Input::Tell(self.id, outcome));
    }
}
