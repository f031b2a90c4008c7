//! Cluster-safe cron that loses no occurrence: every occurrence of a schedule runs on one replica, once, late when no
//! replica could run it at its tick, again when its runner died or (with `retries`) its fn failed.
//!
//! Each attempt of an occurrence is claimed with one atomic acquire of its own key (`name:<attempt id>`, see
//! snatch-protocol's schedule.rs), renewed while fn runs. The winner takes the run lock `name` unless occurrences may
//! overlap (`concurrency`), writes the attempt's record ('running', only if nobody recorded that attempt yet, which
//! also keeps a replica whose clock lags from running it again, and only if the schedule is not suspended), and has
//! the runner (run/) run fn. When fn settled, the record says how it ended before the locks are given back, so that an
//! attempt whose record says 'running' while its claim is gone had a runner that died: any replica then takes it over
//! with the next attempt (higher fence), up to a bound. A failed attempt with retries left is taken over the same way
//! once its retry is due.
//!
//! When each thing happens is decided without I/O: the schedule's loop by snatch-protocol's [`ScheduleLoop`] (ticks,
//! heartbeats, look-backs, sweeps), each attempt by its [`AttemptRun`](snatch_protocol::attempt::AttemptRun)
//! (attempt.rs). The driver here does what they say, and sleeps until the time they ask to be woken.

use crate::config::LockOptions;
use crate::lock::job::Job;
use crate::lock::locker::Locker;
use crate::run::input::{Input, Post};
use crate::schedule::dispatch::{Advance, Dispatch};
use crate::schedule::options::{Cron, ScheduleOptions};
use crate::schedule::store::{self, Registration, Swept};
use chrono::Utc;
use snatch_protocol::attempt::{AbortReason, Now};
use snatch_protocol::run::Outcome;
use snatch_protocol::run::StoredRun;
use snatch_protocol::schedule::{Attempt, Jitter, Limits, ScheduleKeys, Status, Write, Written};
use snatch_protocol::schedule_loop::{Act, LoopPolicy, ScheduleLoop};
use snatch_protocol::SnatchError;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::JoinSet;
use tokio::time::{sleep_until, Instant};

/// How long a schedule's state and records stay after the last replica that registered it is gone, at least.
const KEEP: Duration = Duration::from_secs(7 * 24 * 3600);

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
/// the replicas, its fn through the runner (`post` takes each attempt to it as an [`Input::Attempt`]); the caller
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
    let taken = locker.take_schedule_name(name)?;
    let job = Job::new();
    let registration = Registration {
        instance: locker.config().instance_id.clone(),
        cron: cron.expression.clone(),
        timezone: cron.timezone.clone(),
        limits: Limits {
            timeout: options.timeout,
            max_runtime: options.max_runtime,
            starting_deadline: options.starting_deadline,
            jitter: options.jitter,
        },
        keep: KEEP.max(options.starting_deadline * 2),
    };
    let (work, todo) = mpsc::unbounded_channel();
    let options_jitter = options.jitter;
    let driver = Arc::new(Driver {
        locker: locker.clone(),
        id,
        keys,
        lock,
        options,
        registration,
        post,
        here: Mutex::default(),
        work,
        stored: None,
        dispatched: Mutex::default(),
        jitter: Jitter::new(name, options_jitter),
        stop: job.stop_requests(),
    });
    let handle = job.clone();
    tokio::spawn(async move {
        driver.drive(cron, handle.stop_requests(), todo).await;
        drop(taken);
        handle.ended();
        drop(guard);
    });
    locker.register_job(job.clone());
    Ok(Schedule(job))
}

/// One schedule on this replica: what it is, and the attempts running here.
pub(crate) struct Driver {
    pub(crate) locker: Locker,
    /// The caller's id for the schedule.
    pub(crate) id: u32,
    pub(crate) keys: ScheduleKeys,
    /// The leases of claims and of the run lock.
    pub(crate) lock: LockOptions,
    pub(crate) options: ScheduleOptions,
    pub(crate) registration: Registration,
    pub(crate) post: Arc<dyn Post>,
    /// The attempts whose fn runs here, each with the way to abort its signal.
    pub(crate) here: Mutex<HashMap<Attempt, mpsc::UnboundedSender<AbortReason>>>,
    /// What the attempts and the looks under way bring back to the driver's loop.
    pub(crate) work: mpsc::UnboundedSender<Work>,
    /// The stored schedule whose occurrences this driver runs for its handler (stored.rs), if it is one.
    pub(crate) stored: Option<Arc<StoredRun>>,
    /// The stored schedule's occurrence being dispatched (stored.rs): told whether its first record was written.
    pub(crate) dispatched: Mutex<Option<Dispatch>>,
    /// When each occurrence starts after its tick.
    pub(crate) jitter: Jitter,
    /// Whether the schedule is asked to stop here (an attempt waiting in the buffer slot gives up then).
    pub(crate) stop: watch::Receiver<bool>,
}

/// What the attempts and the looks under way bring back to the driver's loop.
pub(crate) enum Work {
    /// A look at the open attempts is due then (a retry's time, or when another replica's claim would lapse).
    LookAt(Instant),
    /// A look at the open attempts came to this.
    Swept(Result<Swept, SnatchError>),
    /// Taking a manual run came to this.
    Trigger(Result<Option<i64>, SnatchError>),
}

impl Driver {
    /// Runs the schedule until stopped (or out of occurrences), then waits for the attempts under way and takes its
    /// registration away.
    async fn drive(
        self: Arc<Self>,
        cron: Cron,
        mut stop: watch::Receiver<bool>,
        mut todo: mpsc::UnboundedReceiver<Work>,
    ) {
        let mut attempts = JoinSet::new();
        let control = Arc::new(Notify::new());
        let mut watches = Vec::new();
        for node in self.locker.nodes().all() {
            watches.extend(node.watch_channel(&self.keys.control, &control).await);
        }
        let policy = LoopPolicy {
            starting_deadline: self.options.starting_deadline,
            retries: self.options.retries,
            jitter: self.jitter,
        };
        let (mut machine, acts) = ScheduleLoop::new(cron, policy, self.clock(), rand::random());
        self.act(&mut machine, acts, &mut attempts).await;
        while !*stop.borrow() && !machine.is_over() {
            let wake = machine.poll_timeout().map(Instant::from_std);
            let acts = tokio::select! {
                _ = stop.changed() => break,
                () = sleep_until(wake.unwrap_or_else(Instant::now)), if wake.is_some() => {
                    machine.handle_timeout(self.clock())
                }
                () = control.notified() => machine.heard(self.clock()),
                Some(work) = todo.recv() => match work {
                    Work::LookAt(at) => {
                        machine.look_at(at.into_std());
                        vec![]
                    }
                    Work::Swept(swept) => machine.swept(swept.map(|s| (s.found, s.again)), self.clock()),
                    Work::Trigger(taken) => machine.trigger_taken(taken),
                },
                Some(_) = attempts.join_next(), if !attempts.is_empty() => vec![],
            };
            self.act(&mut machine, acts, &mut attempts).await;
        }
        machine.stop();
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

    /// Does what the schedule's loop says, and what that comes to: a registration is awaited here (it says what comes
    /// next), looks and manual runs are taken in the background, attempts run beside the loop.
    async fn act(self: &Arc<Self>, machine: &mut ScheduleLoop<Cron>, acts: Vec<Act>, attempts: &mut JoinSet<()>) {
        let mut todo = VecDeque::from(acts);
        while let Some(act) = todo.pop_front() {
            match act {
                Act::Register { look, refresh } => {
                    let registered =
                        store::register(&self.locker, &self.keys, &self.registration, &look, refresh).await;
                    if let Err(SnatchError::Redis { cause }) = &registered {
                        if cause.contains(store::STORED_NAME) {
                            // Ids of stored schedules and names of code schedules are one namespace: this one does
                            // not run, and says why on its 'error' event.
                            let error = SnatchError::type_arg(format!(
                                "schedule '{}' does not run: a stored schedule (upsertSchedule) has this name, and \
                                 code schedules and stored schedules share one namespace",
                                self.keys.run.key
                            ));
                            self.tell(Outcome::Unclaimed { tick: self.clock().wall_ms, error });
                            machine.stop();
                            return;
                        }
                    }
                    todo.extend(machine.registered(registered, &look, self.clock()));
                }
                Act::Sweep => {
                    let (driver, work) = (self.clone(), self.work.clone());
                    attempts.spawn(async move {
                        let _ = work.send(Work::Swept(store::sweep(&driver.locker, &driver.keys).await));
                    });
                }
                Act::TakeTrigger => {
                    let (driver, work) = (self.clone(), self.work.clone());
                    attempts.spawn(async move {
                        let _ = work.send(Work::Trigger(store::take_trigger(&driver.locker, &driver.keys).await));
                    });
                }
                Act::Start(start) => drop(attempts.spawn(self.clone().attempt(start, machine.suspended()))),
                Act::Record(write) => drop(self.record(&write).await),
                Act::GiveWay(tick) => self.abort_here(|attempt| attempt.tick < tick, AbortReason::Replaced),
            }
        }
    }

    /// Aborts, for `reason`, the signal of the attempts running here that `which` picks.
    pub(crate) fn abort_here(&self, which: impl Fn(&Attempt) -> bool, reason: AbortReason) {
        for (_, abort) in self.here.lock().expect("attempts poisoned").iter().filter(|(a, _)| which(a)) {
            let _ = abort.send(reason);
        }
    }

    /// This replica's time (its wall clock with the test offset), for the machines.
    pub(crate) fn clock(&self) -> Now {
        let wall_ms = Utc::now().timestamp_millis() + self.options.clock_offset_ms;
        Now { wall_ms, instant: std::time::Instant::now() }
    }

    /// Writes a record of the schedule; the caller hears of an occurrence recorded missed here.
    pub(crate) async fn record(&self, write: &Write) -> Result<Written, SnatchError> {
        self.record_holding(write, &[]).await
    }

    /// Writes a record of the schedule only while the locks `held` (key, owner) are still held.
    pub(crate) async fn record_holding(&self, write: &Write, held: &[(&str, &str)]) -> Result<Written, SnatchError> {
        let stored = self.stored.is_some();
        let (history, keep) = (self.options.history, self.registration.keep);
        let written = store::record(&self.locker, &self.keys, write, history, keep, stored, held).await;
        if written == Ok(Written::Yes) && write.record.outcome == Status::Missed {
            let reason = write.record.reason.clone().unwrap_or_default();
            self.tell(Outcome::Missed { tick: write.record.tick, reason });
        }
        written
    }

    /// Tells the caller `outcome` of the schedule (a stored schedule's handler hears only of its runs).
    pub(crate) fn tell(&self, outcome: Outcome) {
        if self.stored.is_none() {
            let _ = self.post.post(Input::Tell(self.id, outcome));
        }
    }

    /// Tells the dispatch that waits for it whether `attempt`'s first record was written.
    pub(crate) fn place(&self, attempt: Attempt, written: bool) {
        let mut dispatched = self.dispatched.lock().expect("dispatched poisoned");
        if dispatched.as_ref().is_some_and(|d| d.attempt == attempt) {
            if let Some(dispatch) = dispatched.take() {
                let _ = dispatch.tell.send(written);
            }
        }
    }

    /// The next tick to write with `attempt`'s first record, when it is a stored schedule's dispatched occurrence.
    pub(crate) fn advance_with(&self, attempt: Attempt) -> Option<Advance> {
        let mut dispatched = self.dispatched.lock().expect("dispatched poisoned");
        dispatched.as_mut().filter(|d| d.attempt == attempt).and_then(|d| d.advance.take())
    }

    /// The id of the stored schedule, when this driver runs one.
    pub(crate) fn stored_id(&self) -> Option<String> {
        self.stored.as_ref().map(|run| run.id.clone())
    }
}
