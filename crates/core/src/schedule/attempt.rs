//! One attempt of a schedule's occurrence, done: each step snatch-protocol's [`AttemptRun`] says (claim, run lock,
//! record, run fn through the runner, release) done on the runtime, and what came of it fed back with the time, until
//! it is over. The attempt's timeout is the machine's timer, armed here.

use crate::config::LockOptions;
use crate::lock::lease::Lease;
use crate::lock::locker::{Busy, Locker};
use crate::run::hold::FnSettled;
use crate::run::input::{post_or_undo, Input};
use crate::schedule::dispatch;
use crate::schedule::scheduler::{Driver, Work};
use crate::schedule::store::{self, Control};
use snatch_protocol::attempt::{AttemptRun, Concurrency, Do, NotCalled, Policy, SkipReason, Start};
use snatch_protocol::keys::Kind;
use snatch_protocol::run::{Outcome, ScheduledAttempt};
use snatch_protocol::schedule::{Write, Written};
use snatch_protocol::schedule_loop::LOOK_SLACK;
use snatch_protocol::SnatchError;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{sleep_until, Instant};

/// How soon the end of an attempt is written again when Redis could not be reached.
const END_RECORD_RETRY: Duration = Duration::from_millis(100);

/// How long, at least, the end of an attempt is written again while Redis cannot be reached (a lease, if longer).
const END_RECORD_FOR: Duration = Duration::from_secs(5);

/// Why an attempt's fn did not run.
enum NotRun {
    /// The locker is closing.
    Closing,
    /// The runner is gone (its JS environment torn down), or the attempt holds no claim.
    Gone,
    /// Its leases lapsed before fn could be called (the runner would not call it).
    Lapsed,
}

/// What an attempt holds while it is under way.
#[derive(Default)]
struct Locks {
    claim: Option<Arc<Lease>>,
    /// The run lock, unless occurrences may overlap.
    run: Option<Arc<Lease>>,
    /// The buffer slot, while the attempt waits in it (`buffer`).
    buffer: Option<Arc<Lease>>,
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

    /// The locks to give back with the end record, as (key, owner), each ended here (no longer renewed): all of them,
    /// where one Redis holds them and none keeps its key for a minHold; else `None`, and nothing changes.
    fn end_together(&self, locker: &Locker) -> Option<Vec<(String, String)>> {
        locker.nodes().single()?;
        let leases = [&self.buffer, &self.run, &self.claim].into_iter().flatten();
        if leases.clone().any(|lease| !lease.hold_left().is_zero() || lease.keys().kind != Kind::Lock) {
            return None;
        }
        let ended = leases.filter(|lease| lease.end_released());
        Some(ended.map(|lease| (lease.keys().lock.clone(), lease.owner().to_owned())).collect())
    }

    /// Gives back the buffer slot, the run lock, then the claim.
    async fn release(self) {
        if let Some(buffer) = self.buffer {
            let _ = buffer.release().await;
        }
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
    /// One attempt (`suspended`: as the schedule was last heard), as snatch-protocol's [`AttemptRun`] says: each of
    /// its steps done here, and what came of it fed back, until it is over.
    pub(crate) async fn attempt(self: Arc<Self>, start: Start, suspended: bool) {
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
        let (attempt, why) = (start.attempt, start.why);
        let instance = self.registration.instance.clone();
        let lease = policy.lease;
        let (mut machine, first) = AttemptRun::new(attempt, why, start.follows, policy, instance, suspended);
        let mut locks = Locks::default();
        // The run lock, when taken with the claim (held in `locks` from then on): what Do::TakeRunLock comes to.
        let mut run_lock = None;
        let mut todo = VecDeque::from([first]);
        while let Some(step) = todo.pop_front() {
            let next = match step {
                Do::Claim => {
                    // The run lock comes next unless occurrences may overlap: taken in the same call where it can be.
                    let claim = self.keys.claim(&attempt);
                    let pair = match self.options.concurrency {
                        Concurrency::Allow => None,
                        _ => self.locker.acquire_pair(claim.clone(), self.keys.run.clone(), &self.lock).await,
                    };
                    let claimed = match pair {
                        Some((claimed, run)) => {
                            run_lock = run.map(|run| Locks::take(&mut locks.run, run));
                            claimed
                        }
                        None => self.locker.acquire_keys(claim, &self.lock).await,
                    };
                    machine.claimed(Locks::take(&mut locks.claim, claimed), self.clock())
                }
                Do::TakeRunLock => {
                    let taken = match run_lock.take() {
                        Some(taken) => taken,
                        None => {
                            let taken = self.locker.acquire_keys(self.keys.run.clone(), &self.lock).await;
                            Locks::take(&mut locks.run, taken)
                        }
                    };
                    machine.run_lock(taken, self.clock())
                }
                Do::WaitForRunLock => {
                    let wait = LockOptions { wait: lease, ..self.lock.clone() };
                    let taken = self.locker.acquire_keys(self.keys.run.clone(), &wait).await;
                    machine.run_lock(Locks::take(&mut locks.run, taken), self.clock())
                }
                Do::TakeBufferSlot => {
                    let taken = self.locker.acquire_keys(self.keys.buffer(), &self.lock).await;
                    machine.buffer_slot(Locks::take(&mut locks.buffer, taken))
                }
                Do::AwaitRunLock => {
                    let taken = self.await_run_lock(&locks, lease).await;
                    machine.run_lock(Locks::take(&mut locks.run, taken), self.clock())
                }
                Do::LeaveBufferSlot => {
                    if let Some(buffer) = locks.buffer.take() {
                        let _ = buffer.release().await;
                    }
                    vec![]
                }
                Do::AskToGiveWay => {
                    let replace = Control::Replace(attempt.tick);
                    let asked = store::control(&self.locker, &self.keys, replace, self.registration.keep, None).await;
                    machine.asked(asked.map(drop))
                }
                Do::Record(write) => {
                    // A waiter in the buffer slot starts only while its claim and the slot are still its own.
                    let holds = if write.conditions.holds_buffer { vec![&locks.claim, &locks.buffer] } else { vec![] };
                    let held: Vec<(&str, &str)> =
                        holds.into_iter().flatten().map(|lease| (lease.keys().lock.as_str(), lease.owner())).collect();
                    // A stored occurrence's next tick goes with its first record, on one Redis (stored schedules need
                    // one): taken from the dispatch only there.
                    let together =
                        self.locker.nodes().single().and_then(|node| Some((node, self.advance_with(attempt)?)));
                    let written = match together {
                        Some((node, advance)) => {
                            let kept = (self.options.history, self.registration.keep);
                            dispatch::first_record(node, &self.keys, &write, &held, kept, &advance).await
                        }
                        None => self.record_holding(&write, &held).await,
                    };
                    self.place(attempt, written.is_ok());
                    machine.recorded(written, self.clock())
                }
                Do::RecordEnd(write) => {
                    let run_id = locks.run_id;
                    let written = self.record_end(&write, std::mem::take(&mut locks), lease).await;
                    locks.run_id = run_id;
                    machine.recorded(written, self.clock())
                }
                Do::Run { .. } => match self.run_fn(&mut machine, &mut locks).await {
                    Ok(next) => next,
                    // fn did not run: the attempt is recorded interrupted and handed over at once.
                    Err(NotRun::Closing) => machine.not_called(NotCalled::Closing, self.clock()),
                    Err(NotRun::Lapsed) => machine.not_called(NotCalled::Lapsed, self.clock()),
                    Err(NotRun::Gone) => {
                        // The runner is gone (its JS environment torn down) with what it held: the record stays
                        // 'running' and, once the claim lapses, another replica takes the attempt over.
                        locks.release().await;
                        return;
                    }
                },
                Do::Abort(reason) => {
                    let _ =
                        self.post.post(Input::Abort { schedule: self.id, stored: self.stored_id(), attempt, reason });
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
                        let _ = self.work.send(Work::LookAt(Instant::now() + lease + LOOK_SLACK));
                    }
                    self.tell(Outcome::Skipped { tick: attempt.tick, reason });
                    vec![]
                }
                Do::Unclaimed(error) => {
                    self.tell(Outcome::Unclaimed { tick: attempt.tick, error });
                    vec![]
                }
                Do::LookAgainIn(delay) => {
                    let _ = self.work.send(Work::LookAt(Instant::now() + delay));
                    vec![]
                }
                Do::HandOver if self.stored.is_some() => {
                    // A stored schedule's runners hear of it through its due index.
                    let _ = self.work.send(Work::LookAt(Instant::now()));
                    vec![]
                }
                Do::HandOver => {
                    let _ =
                        store::control(&self.locker, &self.keys, Control::HandOver, self.registration.keep, None).await;
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
        self.place(attempt, false);
    }

    /// Writes the record of an attempt's end, then gives its `locks` back: in one call where one Redis holds them all
    /// (Locks::end_together). Unrecorded while Redis is unreachable, the end is written again for a while
    /// (END_RECORD_FOR, or a `lease`): a record left 'running' is taken over once the claim lapsed, and the occurrence
    /// run again. The takeover's condition (the record as found) and this one's ('running') keep only one of the two
    /// writes.
    async fn record_end(&self, write: &Write, locks: Locks, lease: Duration) -> Result<Written, SnatchError> {
        let together = locks.end_together(&self.locker);
        let write_once = || async {
            match (&together, self.locker.nodes().single()) {
                (Some(releases), Some(node)) => {
                    let (history, keep) = (self.options.history, self.registration.keep);
                    let stored = self.stored.is_some();
                    store::record_end(node, &self.keys, write, history, keep, stored, releases).await
                }
                _ => self.record(write).await,
            }
        };
        let mut written = write_once().await;
        let until = Instant::now() + lease.max(END_RECORD_FOR);
        while written.is_err() && Instant::now() < until && !self.locker.is_closed() {
            tokio::time::sleep(END_RECORD_RETRY).await;
            written = write_once().await;
        }
        if together.is_none() {
            locks.release().await;
        }
        written
    }

    /// The run lock, waited for as long as it is held (an attempt in the buffer slot): in rounds of a third of the
    /// `lease`, the claim and the slot renewed between them; `None` once the schedule stops here or a renewal fails
    /// (the attempt then gives its locks back, unrecorded).
    async fn await_run_lock(&self, locks: &Locks, lease: Duration) -> Result<Option<Arc<Lease>>, SnatchError> {
        let round = LockOptions { wait: lease / 3, ..self.lock.clone() };
        let mut stop = self.stop.clone();
        loop {
            if *stop.borrow() {
                return Ok(None);
            }
            let taken = tokio::select! {
                taken = self.locker.acquire_keys(self.keys.run.clone(), &round) => taken?,
                _ = stop.wait_for(|&stop| stop) => return Ok(None),
            };
            if taken.is_some() {
                return Ok(taken);
            }
            for held in [&locks.claim, &locks.buffer].into_iter().flatten() {
                if !held.extend(None).await? {
                    return Ok(None);
                }
            }
        }
    }

    /// Has the runner run the attempt's fn under `locks`, aborting its signal as `machine` says (its timeout, a later
    /// occurrence replacing it, the locker's close); what `machine` says once fn settled, or why fn did not run.
    async fn run_fn(&self, machine: &mut AttemptRun, locks: &mut Locks) -> Result<Vec<Do>, NotRun> {
        let attempt = machine.attempt();
        let claim = locks.claim.clone().ok_or(NotRun::Gone)?;
        // The run counts on the locker (`close` waits for it) until its locks are given back.
        locks.busy = Some(self.locker.enter().map_err(|_| NotRun::Closing)?);
        let (settled, fn_settled) = oneshot::channel();
        let (abort, mut aborts) = mpsc::unbounded_channel();
        self.here.lock().expect("attempts poisoned").insert(attempt, abort);
        let due = if attempt.manual { attempt.tick } else { self.jitter.start(attempt.tick) };
        let stored = self.stored.clone();
        let scheduled = ScheduledAttempt { schedule: self.id, attempt, why: machine.why(), due, stored };
        post_or_undo(&*self.post, Input::Attempt { scheduled, run: locks.run.clone(), claim, settled });
        tokio::pin!(fn_settled);
        let settled = loop {
            let timeout = machine.poll_timeout().map(Instant::from_std);
            let steps = tokio::select! {
                settled = &mut fn_settled => break settled,
                Some(reason) = aborts.recv() => machine.abort(reason),
                () = sleep_until(timeout.unwrap_or_else(Instant::now)), if timeout.is_some() => {
                    machine.handle_timeout(std::time::Instant::now())
                }
            };
            for step in steps {
                if let Do::Abort(reason) = step {
                    let _ =
                        self.post.post(Input::Abort { schedule: self.id, stored: self.stored_id(), attempt, reason });
                }
            }
        };
        self.here.lock().expect("attempts poisoned").remove(&attempt);
        let FnSettled { id, failure, lost } = settled.map_err(|_| NotRun::Gone)?.ok_or(NotRun::Lapsed)?;
        locks.run_id = Some(id);
        Ok(machine.settled(failure, lost, self.clock(), rand::random_range(0.8..1.2)))
    }
}
