//! One attempt of a schedule's occurrence, without I/O: claim it, take the run lock as the schedule's concurrency
//! has it, record it running, have fn run, decide how it ended, record that (with the time of a retry), give the
//! locks back. [`AttemptRun`] keeps the attempt's state, once, and says at each step what the driver (snatch-core's
//! scheduler) is to do ([`Do`]); the driver does the I/O, and feeds back what came of it and the time. How an attempt
//! ended is decided here, once ([`Ending`]): its record says it, and the caller hears it as it is.

use crate::error::SnatchError;
use crate::schedule::{
    error_message, max_attempts, retry_delay, Attempt, Conditions, Found, Open, Record, Status, Why, Write, Written,
};
use std::time::{Duration, Instant};

/// Why a running fn's signal aborts before its lease is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbortReason {
    /// Its attempt's `timeout` passed.
    Timeout,
    /// A later occurrence replaces it (`concurrency: 'replace'`).
    Replaced,
    /// The replica shuts down (`close`), and fn did not finish within the time it was given.
    Shutdown,
    /// A leader resigned (`resign()`): its term ends.
    Resigned,
    /// A leader's campaign stopped (`stop()`): its term ends.
    Stopped,
}

/// Why an occurrence did not run here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// Another replica claimed it.
    Taken,
    /// The fn of an earlier occurrence was still running.
    Overlap,
    /// The schedule is suspended (`suspend`).
    Suspended,
}

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
    /// The new one waits for the run lock and runs right after the running one; at most one waits (its buffer slot),
    /// a further one is skipped as with `Forbid`.
    Buffer,
}

impl Concurrency {
    /// Every value, as the caller names them.
    pub const ALL: [Self; 4] = [Self::Forbid, Self::Allow, Self::Replace, Self::Buffer];

    /// Its name, as the caller gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Forbid => "forbid",
            Self::Allow => "allow",
            Self::Replace => "replace",
            Self::Buffer => "buffer",
        }
    }

    /// The value named `name`; an invalid argument naming every value when there is none.
    pub fn parse(name: &str) -> Result<Self, SnatchError> {
        Self::ALL.into_iter().find(|c| c.as_str() == name).ok_or_else(|| {
            let names: Vec<String> = Self::ALL.iter().map(|c| format!("'{}'", c.as_str())).collect();
            SnatchError::type_arg(format!("concurrency must be one of {}, got '{name}'", names.join(", ")))
        })
    }
}

/// What an attempt takes of its schedule's options.
#[derive(Debug, Clone)]
pub struct Policy {
    pub concurrency: Concurrency,
    /// Further attempts after fn failed.
    pub retries: u32,
    /// Delay before the first retry, doubled for each next one.
    pub retry_delay: Duration,
    /// fn's signal aborts after this long, and the attempt counts as timed out.
    pub timeout: Option<Duration>,
    /// The lease of the claim and the run lock: an open attempt is looked at again after it.
    pub lease: Duration,
}

/// Why an attempt's fn was not called once its start was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotCalled {
    /// Its leases lapsed before the call (its process stood still in between, stopped or starved): another replica
    /// may take it over, so fn must not start here.
    Lapsed,
    /// Its replica shuts down (`close`).
    Closing,
}

/// How an attempt that ran ended: decided once, recorded, and told to the caller as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// fn resolved.
    Ok,
    /// fn threw or rejected, with this message.
    Failed(String),
    /// fn did not settle within the attempt's `timeout`: its signal aborted.
    TimedOut,
    /// A later occurrence replaced it (`concurrency: 'replace'`): its signal aborted.
    Replaced,
    /// Its lease could not be guaranteed for the whole run.
    Lost,
    /// Its replica shut down before fn settled (`close`): its signal aborted, and another replica runs the occurrence
    /// again at once.
    Interrupted,
}

impl Ending {
    /// Its name, as the caller hears it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Failed(_) => "failed",
            Self::TimedOut => "timeout",
            Self::Replaced => "replaced",
            Self::Lost => "lost",
            Self::Interrupted => "interrupted",
        }
    }

    /// What its record says: the outcome and the error (a timeout's names `timeout`).
    fn recorded(&self, timeout: Option<Duration>) -> (Status, Option<String>) {
        match self {
            Self::Ok => (Status::Ok, None),
            Self::Failed(message) => (Status::Failed, Some(error_message(message))),
            Self::TimedOut => {
                let ms = timeout.unwrap_or_default().as_millis();
                (Status::Timeout, Some(format!("the attempt timed out after {ms} ms")))
            }
            Self::Replaced => (Status::Failed, Some("a later occurrence replaced it".to_owned())),
            Self::Lost => (Status::Lost, Some("the lease could not be guaranteed for the whole run".to_owned())),
            Self::Interrupted => (Status::Interrupted, Some("its replica shut down before it finished".to_owned())),
        }
    }
}

/// How an attempt's run ended, as the caller hears it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    pub fence: i64,
    pub ending: Ending,
    /// From fn's call to its settling.
    pub duration: Duration,
}

/// The time, as the driver reads it when it feeds a result in.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    /// The wall clock (with a test's offset), in epoch ms: for the records.
    pub wall_ms: i64,
    /// The monotonic clock: for durations.
    pub instant: Instant,
}

/// What the driver is to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Do {
    /// Acquire the attempt's claim, in one attempt; then [`AttemptRun::claimed`]. Unless occurrences may overlap, the
    /// run lock is asked for next: the driver may take it in the same call, once the claim is taken, and answer
    /// [`Do::TakeRunLock`] with what came of it.
    Claim,
    /// Acquire the run lock, in one attempt; then [`AttemptRun::run_lock`].
    TakeRunLock,
    /// Ask the running attempts of earlier occurrences to give way (`replace`); then [`AttemptRun::asked`].
    AskToGiveWay,
    /// Acquire the run lock, waiting up to the lease; then [`AttemptRun::run_lock`].
    WaitForRunLock,
    /// Acquire the schedule's buffer slot (`buffer`: the one occurrence that may wait), in one attempt; then
    /// [`AttemptRun::buffer_slot`].
    TakeBufferSlot,
    /// Acquire the run lock, waiting as long as it is held, the claim and the buffer slot renewed meanwhile; until the
    /// schedule stops here or a renewal fails (then `Ok(None)`); then [`AttemptRun::run_lock`].
    AwaitRunLock,
    /// Give the buffer slot back: the attempt holds the run lock and its record, and the next occurrence may wait.
    LeaveBufferSlot,
    /// Write this record; then [`AttemptRun::recorded`].
    Record(Box<Write>),
    /// Write this record of the attempt's end, then give its locks back as [`Do::Release`] does, whether it was
    /// written or not (in one call where the driver can); then [`AttemptRun::recorded`].
    RecordEnd(Box<Write>),
    /// Have fn run under `fence` (the run lock's, or the claim's when occurrences may overlap); then
    /// [`AttemptRun::settled`] once it settled.
    Run { fence: i64 },
    /// fn's signal is to abort, for this.
    Abort(AbortReason),
    /// Give the claim back, and the run lock when held.
    Release,
    /// Tell the caller that the on-time occurrence did not run here, for this.
    Skipped(SkipReason),
    /// Tell the caller that the on-time occurrence could not be claimed or recorded, for this: it did not run here.
    Unclaimed(SnatchError),
    /// Look at the open attempts again after this long: a retry is due then.
    LookAgainIn(Duration),
    /// Wake the other replicas of the schedule: the attempt was interrupted, and its next is due now, on one of them.
    HandOver,
    /// The run ended so: the caller hears it (its locks given back).
    End(Ended),
}

/// Why an attempt starts, and what it takes over.
#[derive(Debug, Clone, PartialEq)]
pub struct Start {
    pub attempt: Attempt,
    pub why: Why,
    /// The record of the attempt it follows (its runner died, or it failed with a retry due), as found.
    pub follows: Option<Found>,
}

/// What comes after an open attempt that needs another (found by a look at the open attempts: its runner died, or
/// its retry is due).
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Its next attempt, which takes it over.
    Attempt(Attempt),
    /// None: its runner kept dying (a poison job), and no attempt is left; its record is closed failed so.
    GiveUp(Box<Write>),
}

impl Next {
    /// What comes after `found`, of a schedule with `retries`.
    pub fn after(found: &Found, retries: u32) -> Self {
        let record = &found.record;
        let attempt = record.attempt();
        if record.outcome != Status::Running || attempt.attempt < max_attempts(retries) {
            return Self::Attempt(attempt.next());
        }
        let failed = Record {
            outcome: Status::Failed,
            error: Some(format!("the runner of attempt {} died, and no attempt is left", attempt.attempt)),
            ..record.clone()
        };
        let conditions = Conditions { only_running: true, ..Conditions::default() };
        Self::GiveUp(Box::new(Write { record: failed, conditions, open: Open::Closed, takes_over: None }))
    }
}

/// Where an attempt stands.
#[derive(Debug, Clone, PartialEq)]
enum Stage {
    Claiming,
    TakingRunLock,
    GivingWay,
    WaitingForRunLock,
    TakingBufferSlot,
    /// It holds the buffer slot and waits for the run lock.
    Buffered,
    /// Its record 'running' is being written, under `fence`.
    Recording {
        fence: i64,
        record: Record,
    },
    /// fn runs under `fence`, since `started`; `record` says so.
    Running {
        fence: i64,
        record: Record,
        started: Instant,
    },
    /// How it ended is being recorded; then a look again for a retry, when there is one.
    RecordingEnd {
        ended: Ended,
        retry: Option<Duration>,
    },
    /// Nothing more (the driver may still write a missed record, whose answer changes nothing).
    Over,
}

/// One attempt of a schedule's occurrence, run here.
#[derive(Debug)]
pub struct AttemptRun {
    attempt: Attempt,
    why: Why,
    /// The record of the attempt it takes over (its runner died, or its retry is due), as found.
    follows: Option<Found>,
    policy: Policy,
    /// This replica, as records name it.
    instance: String,
    /// The schedule was suspended when the replica last heard.
    suspended: bool,
    /// Why fn's signal aborted before it settled, if it did.
    aborted: Option<AbortReason>,
    /// It waited in the buffer slot: a look back may meanwhile have recorded it missed, which its record replaces.
    buffered: bool,
    stage: Stage,
}

impl AttemptRun {
    /// `attempt` of an occurrence, which runs for `why` (taking over `follows`), by replica `instance`; `suspended`:
    /// as the replica last heard. The first thing to do: claim it.
    pub fn new(
        attempt: Attempt,
        why: Why,
        follows: Option<Found>,
        policy: Policy,
        instance: String,
        suspended: bool,
    ) -> (Self, Do) {
        let run = Self {
            attempt,
            why,
            follows,
            policy,
            instance,
            suspended,
            aborted: None,
            buffered: false,
            stage: Stage::Claiming,
        };
        (run, Do::Claim)
    }

    /// The attempt.
    pub fn attempt(&self) -> Attempt {
        self.attempt
    }

    /// Why it runs.
    pub fn why(&self) -> Why {
        self.why
    }

    /// Whether nothing more is to be done.
    pub fn is_over(&self) -> bool {
        self.stage == Stage::Over
    }

    /// The claim came to `claimed` (its fence when acquired).
    pub fn claimed(&mut self, claimed: Result<Option<i64>, SnatchError>, now: Now) -> Vec<Do> {
        if self.stage != Stage::Claiming {
            return vec![];
        }
        match claimed {
            Ok(Some(fence)) => {
                if self.policy.concurrency == Concurrency::Allow {
                    return self.record_start(fence, now);
                }
                self.stage = Stage::TakingRunLock;
                vec![Do::TakeRunLock]
            }
            Ok(None) => {
                let reason = if self.suspended { SkipReason::Suspended } else { SkipReason::Taken };
                self.over(self.skip(reason))
            }
            Err(error) => self.over(self.fail(error)),
        }
    }

    /// Taking the run lock came to `taken` (its fence when acquired).
    pub fn run_lock(&mut self, taken: Result<Option<i64>, SnatchError>, now: Now) -> Vec<Do> {
        let waited = match self.stage {
            Stage::TakingRunLock => false,
            Stage::WaitingForRunLock => true,
            Stage::Buffered => return self.buffered_run_lock(taken, now),
            _ => return vec![],
        };
        match taken {
            Ok(Some(fence)) => self.record_start(fence, now),
            Ok(None) if !waited && self.buffers() => {
                self.stage = Stage::TakingBufferSlot;
                vec![Do::TakeBufferSlot]
            }
            Ok(None) if !waited && self.waits() => {
                if self.policy.concurrency == Concurrency::Replace && self.why != Why::Retry && !self.attempt.manual {
                    self.stage = Stage::GivingWay;
                    vec![Do::AskToGiveWay]
                } else {
                    self.stage = Stage::WaitingForRunLock;
                    vec![Do::WaitForRunLock]
                }
            }
            // Still held after a lease (another occurrence runs): a retry is taken over later, once it is free.
            Ok(None) if self.why == Why::Retry => self.over(vec![Do::Release]),
            Ok(None) => self.skipped_for_overlap(),
            Err(error) => self.released_failing(error),
        }
    }

    /// Taking the buffer slot came to `taken` (its fence when acquired): the attempt waits for the run lock in it, or,
    /// another occurrence waiting already, is skipped (`overlap`).
    pub fn buffer_slot(&mut self, taken: Result<Option<i64>, SnatchError>) -> Vec<Do> {
        if self.stage != Stage::TakingBufferSlot {
            return vec![];
        }
        match taken {
            Ok(Some(_)) => {
                self.buffered = true;
                self.stage = Stage::Buffered;
                vec![Do::AwaitRunLock]
            }
            Ok(None) => self.skipped_for_overlap(),
            Err(error) => self.released_failing(error),
        }
    }

    /// The wait in the buffer slot came to `taken`: the attempt records its start, only while it still holds its claim
    /// and the slot (else it is recorded missed, `superseded`), then leaves the slot and runs; not taken (the schedule stopped here, or a lease could not be
    /// renewed), it gives its locks back unrecorded, for a look back to find (late within `startingDeadline`, on
    /// another replica).
    fn buffered_run_lock(&mut self, taken: Result<Option<i64>, SnatchError>, now: Now) -> Vec<Do> {
        match taken {
            Ok(Some(fence)) => self.record_start(fence, now),
            Ok(None) => self.over(vec![Do::Release]),
            Err(error) => self.released_failing(error),
        }
    }

    /// Asking the running attempts to give way came to `asked`.
    pub fn asked(&mut self, asked: Result<(), SnatchError>) -> Vec<Do> {
        if self.stage != Stage::GivingWay {
            return vec![];
        }
        match asked {
            Ok(()) => {
                self.stage = Stage::WaitingForRunLock;
                vec![Do::WaitForRunLock]
            }
            Err(error) => self.released_failing(error),
        }
    }

    /// The last record written came to `written`.
    pub fn recorded(&mut self, written: Result<Written, SnatchError>, now: Now) -> Vec<Do> {
        match std::mem::replace(&mut self.stage, Stage::Over) {
            Stage::Recording { fence, record } => match written {
                Ok(Written::Yes) => {
                    self.stage = Stage::Running { fence, record, started: now.instant };
                    if self.buffered {
                        vec![Do::LeaveBufferSlot, Do::Run { fence }]
                    } else {
                        vec![Do::Run { fence }]
                    }
                }
                Ok(Written::Suspended) => {
                    let mut steps =
                        vec![Do::Release, Do::Record(Box::new(Write::missed(self.attempt, self.why, "suspended")))];
                    steps.extend(self.skip(SkipReason::Suspended));
                    steps
                }
                // A waiter in the buffer slot whose claim or slot lapsed meanwhile (its process stopped): a later
                // occurrence took its place; recorded missed so, unless another replica recorded it.
                Ok(Written::Refused) if self.buffered => {
                    let missed = Write::missed(self.attempt, self.why, "superseded");
                    [vec![Do::Release, Do::Record(Box::new(missed))], self.skip(SkipReason::Taken)].concat()
                }
                // Recorded by another replica.
                Ok(Written::Refused) => [vec![Do::Release], self.skip(SkipReason::Taken)].concat(),
                Err(error) => [vec![Do::Release], self.fail(error)].concat(),
            },
            Stage::RecordingEnd { ended, retry } => {
                let mut steps = Vec::new();
                if let (Ok(Written::Yes), Some(delay)) = (written, retry) {
                    steps.push(if ended.ending == Ending::Interrupted { Do::HandOver } else { Do::LookAgainIn(delay) });
                }
                steps.push(Do::End(ended));
                steps
            }
            other => {
                self.stage = other;
                vec![]
            }
        }
    }

    /// When the attempt's `timeout` passes, while fn runs and its signal has not aborted: the driver then calls
    /// [`AttemptRun::handle_timeout`].
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (&self.stage, self.policy.timeout, self.aborted) {
            (Stage::Running { started, .. }, Some(timeout), None) => Some(*started + timeout),
            _ => None,
        }
    }

    /// The time is `now`: fn's signal aborts if the attempt's `timeout` has passed.
    pub fn handle_timeout(&mut self, now: Instant) -> Vec<Do> {
        match self.poll_timeout() {
            Some(due) if now >= due => self.abort(AbortReason::Timeout),
            _ => vec![],
        }
    }

    /// fn's signal is to abort for `reason` (the attempt's timeout passed, or a later occurrence replaces it): once,
    /// and only while fn runs.
    pub fn abort(&mut self, reason: AbortReason) -> Vec<Do> {
        if !matches!(self.stage, Stage::Running { .. }) || self.aborted.is_some() {
            return vec![];
        }
        self.aborted = Some(reason);
        vec![Do::Abort(reason)]
    }

    /// fn settled (`failure`: what it threw or rejected with), its lease `lost` or not: how the attempt ended is
    /// decided, and recorded, with the time of the next attempt when it failed and has retries left (`jitter`: a
    /// factor from 0.8 to 1.2 that spreads retries).
    pub fn settled(&mut self, failure: Option<String>, lost: bool, now: Now, jitter: f64) -> Vec<Do> {
        let Stage::Running { fence, record, started } = std::mem::replace(&mut self.stage, Stage::Over) else {
            return vec![];
        };
        let ending = match (lost, self.aborted, failure) {
            (true, ..) => Ending::Lost,
            (_, Some(AbortReason::Timeout), _) => Ending::TimedOut,
            (_, Some(AbortReason::Replaced), _) => Ending::Replaced,
            // Its fn finished all the same (between the abort and its settling): done, not to run again.
            // (A leader's reasons, which an attempt never hears, as a shutdown's.)
            (_, Some(AbortReason::Shutdown | AbortReason::Resigned | AbortReason::Stopped), None) => Ending::Ok,
            (_, Some(AbortReason::Shutdown | AbortReason::Resigned | AbortReason::Stopped), Some(_)) => {
                Ending::Interrupted
            }
            (_, None, Some(failure)) => Ending::Failed(failure),
            (_, None, None) => Ending::Ok,
        };
        let duration = now.instant.saturating_duration_since(started);
        let retries = ending != Ending::Ok && ending != Ending::Replaced && self.attempt.attempt <= self.policy.retries;
        // An interrupted attempt is handed over at once, retries or not: nothing of it went wrong.
        let retry = if ending == Ending::Interrupted {
            Some(Duration::ZERO)
        } else {
            retries.then(|| retry_delay(self.policy.retry_delay, self.attempt.attempt + 1, jitter))
        };
        let (outcome, error) = ending.recorded(self.policy.timeout);
        let ended_record = Record {
            duration_ms: Some(duration.as_secs_f64() * 1000.0),
            outcome,
            error,
            retry_at: retry.map(|delay| now.wall_ms + delay.as_millis() as i64),
            ..record
        };
        let conditions = Conditions { only_running: true, ..Conditions::default() };
        let open = retry.map_or(Open::Closed, Open::LookIn);
        let write = Write { record: ended_record, conditions, open, takes_over: None };
        self.stage = Stage::RecordingEnd { ended: Ended { fence, ending, duration }, retry };
        vec![Do::RecordEnd(Box::new(write))]
    }

    /// fn was not called, for `why`: nothing of the attempt ran, so it is recorded interrupted and handed over at once,
    /// retries or not, unless another replica took it over meanwhile (its record then no longer says 'running').
    pub fn not_called(&mut self, why: NotCalled, now: Now) -> Vec<Do> {
        if !matches!(self.stage, Stage::Running { .. }) {
            return vec![];
        }
        let Stage::Running { fence, record, .. } = std::mem::replace(&mut self.stage, Stage::Over) else {
            unreachable!("matched above")
        };
        let error = match why {
            NotCalled::Lapsed => "its lease lapsed before fn was called (its process stood still): fn did not run",
            NotCalled::Closing => "its replica shut down before fn was called: fn did not run",
        };
        let not_run = Record {
            duration_ms: Some(0.0),
            outcome: Status::Interrupted,
            error: Some(error.to_owned()),
            retry_at: Some(now.wall_ms),
            ..record
        };
        let conditions = Conditions { only_running: true, ..Conditions::default() };
        let write = Write { record: not_run, conditions, open: Open::LookIn(Duration::ZERO), takes_over: None };
        let ended = Ended { fence, ending: Ending::Interrupted, duration: Duration::ZERO };
        self.stage = Stage::RecordingEnd { ended, retry: Some(Duration::ZERO) };
        vec![Do::RecordEnd(Box::new(write))]
    }

    /// Whether the run lock is waited for when it is held: by a manual run; by a retry, which takes over an attempt
    /// whose runner may have died holding it (its lease then lapses within the wait); with `replace` by an on-time or
    /// late one (after asking the running attempt to give way).
    fn waits(&self) -> bool {
        matches!(self.why, Why::Manual | Why::Retry) || self.policy.concurrency == Concurrency::Replace
    }

    /// Whether the run lock held, the attempt waits in the buffer slot: an on-time or late one with `buffer`.
    fn buffers(&self) -> bool {
        self.policy.concurrency == Concurrency::Buffer && matches!(self.why, Why::OnTime | Why::Late)
    }

    /// Records the attempt running (only if nobody recorded it yet, and unless the schedule is suspended, for all but
    /// a manual run), under `fence`, taking over the attempt it follows.
    fn record_start(&mut self, fence: i64, now: Now) -> Vec<Do> {
        let record = self.running_record(fence, now);
        let takes_over = self.follows.clone().map(|found| {
            let mut crashed = found.record.clone();
            if crashed.outcome == Status::Running {
                crashed.outcome = Status::Crashed;
            }
            (found, crashed)
        });
        let conditions = Conditions {
            unless_suspended: self.why != Why::Manual,
            only_new: true,
            over_missed: self.buffered,
            only_running: false,
            holds_buffer: self.buffered,
        };
        self.stage = Stage::Recording { fence, record: record.clone() };
        vec![Do::Record(Box::new(Write { record, conditions, open: Open::LookIn(self.policy.lease), takes_over }))]
    }

    /// The attempt's record while it runs, under `fence`.
    fn running_record(&self, fence: i64, now: Now) -> Record {
        Record {
            tick: self.attempt.tick,
            manual: self.attempt.manual,
            attempt: self.attempt.attempt,
            why: self.why,
            instance: Some(self.instance.clone()),
            fence: Some(fence.to_string()),
            started: Some(now.wall_ms),
            duration_ms: None,
            outcome: Status::Running,
            error: None,
            reason: None,
            retry_at: None,
        }
    }

    /// Gives the locks back and fails with `error`: nothing more is to be done.
    fn released_failing(&mut self, error: SnatchError) -> Vec<Do> {
        let mut steps = vec![Do::Release];
        steps.extend(self.fail(error));
        self.over(steps)
    }

    /// Another occurrence runs or waits: gives the locks back, records this one missed (`overlap`) and skips it.
    fn skipped_for_overlap(&mut self) -> Vec<Do> {
        let mut steps = vec![Do::Release, Do::Record(Box::new(Write::missed(self.attempt, self.why, "overlap")))];
        steps.extend(self.skip(SkipReason::Overlap));
        self.over(steps)
    }

    /// `steps`, after which nothing more is to be done.
    fn over(&mut self, steps: Vec<Do>) -> Vec<Do> {
        self.stage = Stage::Over;
        steps
    }

    /// Tells the caller that the occurrence did not run here, for `reason`: only an on-time one (the others are the
    /// scheduler's own business, and in the records).
    fn skip(&self, reason: SkipReason) -> Vec<Do> {
        if self.why == Why::OnTime {
            vec![Do::Skipped(reason)]
        } else {
            vec![]
        }
    }

    /// Tells the caller that an on-time attempt could not be claimed or recorded: it did not run here (and runs late
    /// once Redis answers again, within `startingDeadline`).
    fn fail(&self, error: SnatchError) -> Vec<Do> {
        if self.why == Why::OnTime {
            vec![Do::Unclaimed(error)]
        } else {
            vec![]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(30);

    fn policy(concurrency: Concurrency, retries: u32) -> Policy {
        Policy {
            concurrency,
            retries,
            retry_delay: Duration::from_secs(1),
            timeout: Some(Duration::from_secs(5)),
            lease: LEASE,
        }
    }

    fn now(ms: u64) -> Now {
        thread_local! { static START: Instant = Instant::now(); }
        Now { wall_ms: 1_000_000 + ms as i64, instant: START.with(|start| *start + Duration::from_millis(ms)) }
    }

    fn start(why: Why, concurrency: Concurrency, retries: u32) -> AttemptRun {
        let (run, first) =
            AttemptRun::new(Attempt::first(1000), why, None, policy(concurrency, retries), "me".into(), false);
        assert_eq!(first, Do::Claim);
        run
    }

    /// Claims `run` and its run lock (fence 7), writes its record, and has fn run at 100 ms.
    fn running(run: &mut AttemptRun) {
        assert_eq!(run.claimed(Ok(Some(6)), now(0)), vec![Do::TakeRunLock]);
        let steps = run.run_lock(Ok(Some(7)), now(0));
        let [Do::Record(write)] = steps.as_slice() else { panic!("{steps:?}") };
        assert_eq!(write.record.outcome, Status::Running);
        assert_eq!(write.record.fence.as_deref(), Some("7"));
        assert_eq!(write.record.started, Some(1_000_000));
        assert_eq!(write.open, Open::LookIn(LEASE));
        let conditions = Conditions { unless_suspended: true, only_new: true, ..Conditions::default() };
        assert_eq!(write.conditions, conditions);
        assert_eq!(run.recorded(Ok(Written::Yes), now(100)), vec![Do::Run { fence: 7 }]);
    }

    /// The record of `run`'s end (and a look again, when it says so): `run` is then over.
    fn end(run: &mut AttemptRun, steps: Vec<Do>) -> (Record, Open, Vec<Do>) {
        let [Do::RecordEnd(write)] = steps.as_slice() else { panic!("{steps:?}") };
        assert_eq!(write.conditions, Conditions { only_running: true, ..Conditions::default() });
        let after = run.recorded(Ok(Written::Yes), now(2000));
        assert!(run.is_over());
        (write.record.clone(), write.open, after)
    }

    #[test]
    fn an_attempt_claims_locks_records_runs_and_records_how_it_ended() {
        let mut run = start(Why::OnTime, Concurrency::Forbid, 0);
        running(&mut run);
        let settled = run.settled(None, false, now(350), 1.0);
        let (record, open, after) = end(&mut run, settled);
        assert_eq!((record.outcome, record.duration_ms, record.started), (Status::Ok, Some(250.0), Some(1_000_000)));
        assert_eq!(open, Open::Closed);
        let ended = Ended { fence: 7, ending: Ending::Ok, duration: Duration::from_millis(250) };
        assert_eq!(after, vec![Do::End(ended)], "its locks went with the end record");
    }

    #[test]
    fn a_failure_with_retries_left_is_recorded_with_the_next_attempt_s_time_and_looked_at_again() {
        let mut run = start(Why::OnTime, Concurrency::Forbid, 1);
        running(&mut run);
        let settled = run.settled(Some("boom".into()), false, now(300), 1.0);
        let (record, open, after) = end(&mut run, settled);
        assert_eq!((record.outcome, record.error.as_deref()), (Status::Failed, Some("boom")));
        assert_eq!((record.retry_at, open), (Some(1_000_300 + 1000), Open::LookIn(Duration::from_secs(1))));
        assert_eq!(after[0], Do::LookAgainIn(Duration::from_secs(1)));
        assert!(matches!(&after[1], Do::End(Ended { ending: Ending::Failed(m), .. }) if m == "boom"));
    }

    #[test]
    fn the_timeout_is_a_timer_of_the_attempt_armed_while_fn_runs() {
        let mut run = start(Why::OnTime, Concurrency::Forbid, 0);
        assert_eq!(run.poll_timeout(), None, "fn does not run yet");
        running(&mut run);
        assert_eq!(run.poll_timeout(), Some(now(5100).instant), "5 s after fn's call");
        assert_eq!(run.handle_timeout(now(5099).instant), vec![]);
        assert_eq!(run.handle_timeout(now(5100).instant), vec![Do::Abort(AbortReason::Timeout)]);
        assert_eq!(run.poll_timeout(), None, "told once");
        let settled = run.settled(Some("AbortError".into()), false, now(5200), 1.0);
        let (record, _, _) = end(&mut run, settled);
        assert_eq!(record.outcome, Status::Timeout);
    }

    #[test]
    fn a_lost_lease_decides_over_an_abort_and_a_replaced_attempt_is_not_retried() {
        for (aborted, lost, ending, status, retried) in [
            (Some(AbortReason::Timeout), true, Ending::Lost, Status::Lost, true),
            (Some(AbortReason::Timeout), false, Ending::TimedOut, Status::Timeout, true),
            (Some(AbortReason::Replaced), false, Ending::Replaced, Status::Failed, false),
        ] {
            let mut run = start(Why::OnTime, Concurrency::Forbid, 2);
            running(&mut run);
            if let Some(reason) = aborted {
                assert_eq!(run.abort(reason), vec![Do::Abort(reason)]);
                assert_eq!(run.abort(AbortReason::Timeout), vec![], "an abort is told once");
            }
            let settled = run.settled(Some("x".into()), lost, now(300), 1.0);
            let (record, _, after) = end(&mut run, settled);
            assert_eq!(record.outcome, status);
            assert_eq!(record.retry_at.is_some(), retried);
            assert!(matches!(after.last(), Some(Do::End(Ended { ending: e, .. })) if *e == ending));
        }
    }

    #[test]
    fn an_attempt_cut_by_shutdown_is_recorded_interrupted_and_handed_over_at_once_retries_or_not() {
        let mut run = start(Why::OnTime, Concurrency::Forbid, 0);
        running(&mut run);
        assert_eq!(run.abort(AbortReason::Shutdown), vec![Do::Abort(AbortReason::Shutdown)]);
        let settled = run.settled(Some("AbortError".into()), false, now(300), 1.0);
        let (record, open, after) = end(&mut run, settled);
        assert_eq!(record.outcome, Status::Interrupted);
        assert_eq!((record.retry_at, open), (Some(1_000_300), Open::LookIn(Duration::ZERO)));
        assert_eq!(after[0], Do::HandOver);
        assert!(matches!(after.last(), Some(Do::End(Ended { ending: Ending::Interrupted, .. }))));

        // One whose fn finished all the same, between the abort and its settling, is done: not run again.
        let mut finished = start(Why::OnTime, Concurrency::Forbid, 0);
        running(&mut finished);
        finished.abort(AbortReason::Shutdown);
        let settled = finished.settled(None, false, now(300), 1.0);
        let (record, _, after) = end(&mut finished, settled);
        assert_eq!((record.outcome, record.retry_at), (Status::Ok, None));
        assert!(!after.contains(&Do::HandOver));
    }

    #[test]
    fn an_attempt_whose_fn_was_not_called_is_recorded_interrupted_and_handed_over_never_ok() {
        for (why, says) in [(NotCalled::Lapsed, "lease lapsed before fn was called"), (NotCalled::Closing, "shut down")]
        {
            let mut run = start(Why::OnTime, Concurrency::Forbid, 0);
            running(&mut run);
            let steps = run.not_called(why, now(300));
            let (record, open, after) = end(&mut run, steps);
            assert_eq!((record.outcome, record.fence.as_deref()), (Status::Interrupted, Some("7")));
            assert!(
                record.error.as_deref().is_some_and(|e| e.contains(says) && e.contains("fn did not run")),
                "{record:?}"
            );
            assert_eq!((record.retry_at, open), (Some(1_000_300), Open::LookIn(Duration::ZERO)));
            assert_eq!(after[0], Do::HandOver);
            let ended = Ended { fence: 7, ending: Ending::Interrupted, duration: Duration::ZERO };
            assert_eq!(after.last(), Some(&Do::End(ended)));
        }
        // Only while it runs: before its start is recorded, or once fn settled, it changes nothing.
        let mut run = start(Why::OnTime, Concurrency::Forbid, 0);
        assert_eq!(run.not_called(NotCalled::Lapsed, now(0)), vec![]);
        let mut run = start(Why::OnTime, Concurrency::Forbid, 0);
        running(&mut run);
        let settled = run.settled(None, false, now(300), 1.0);
        assert_eq!(run.not_called(NotCalled::Lapsed, now(300)), vec![]);
        assert_eq!(end(&mut run, settled).0.outcome, Status::Ok);
    }

    #[test]
    fn not_claimed_it_is_skipped_on_time_only_and_a_failed_claim_is_told() {
        let mut run = start(Why::OnTime, Concurrency::Forbid, 0);
        assert_eq!(run.claimed(Ok(None), now(0)), vec![Do::Skipped(SkipReason::Taken)]);
        assert!(run.is_over());
        let mut late = start(Why::Late, Concurrency::Forbid, 0);
        assert_eq!(late.claimed(Ok(None), now(0)), vec![]);
        let mut failed = start(Why::OnTime, Concurrency::Forbid, 0);
        assert_eq!(failed.claimed(Err(SnatchError::Closed), now(0)), vec![Do::Unclaimed(SnatchError::Closed)]);
        let (mut suspended, _) =
            AttemptRun::new(Attempt::first(1), Why::OnTime, None, policy(Concurrency::Forbid, 0), "me".into(), true);
        assert_eq!(suspended.claimed(Ok(None), now(0)), vec![Do::Skipped(SkipReason::Suspended)]);
    }

    #[test]
    fn the_run_lock_as_concurrency_has_it() {
        // allow: none; fn gets the claim's fence.
        let mut allow = start(Why::OnTime, Concurrency::Allow, 0);
        let steps = allow.claimed(Ok(Some(6)), now(0));
        assert!(matches!(steps.as_slice(), [Do::Record(w)] if w.record.fence.as_deref() == Some("6")));
        // forbid, held: recorded missed (overlap), skipped; a retry waits for a later look.
        let mut forbid = start(Why::OnTime, Concurrency::Forbid, 0);
        forbid.claimed(Ok(Some(6)), now(0));
        let steps = forbid.run_lock(Ok(None), now(0));
        assert_eq!(steps[0], Do::Release);
        assert!(matches!(&steps[1], Do::Record(w) if w.record.reason.as_deref() == Some("overlap")));
        assert_eq!(steps[2], Do::Skipped(SkipReason::Overlap));
        let mut retry = start(Why::Retry, Concurrency::Forbid, 0);
        retry.claimed(Ok(Some(6)), now(0));
        assert_eq!(retry.run_lock(Ok(None), now(0)), vec![Do::WaitForRunLock], "a dead runner's lock lapses meanwhile");
        assert_eq!(retry.run_lock(Ok(None), now(0)), vec![Do::Release], "held by a live one: a later look");
        let mut replacing = start(Why::Retry, Concurrency::Replace, 0);
        replacing.claimed(Ok(Some(6)), now(0));
        assert_eq!(replacing.run_lock(Ok(None), now(0)), vec![Do::WaitForRunLock], "a retry replaces nothing");
        // replace: the running one is asked to give way, then the lock waited for; a manual run waits at once.
        let mut replace = start(Why::OnTime, Concurrency::Replace, 0);
        replace.claimed(Ok(Some(6)), now(0));
        assert_eq!(replace.run_lock(Ok(None), now(0)), vec![Do::AskToGiveWay]);
        assert_eq!(replace.asked(Ok(())), vec![Do::WaitForRunLock]);
        assert_eq!(replace.run_lock(Ok(None), now(0))[0], Do::Release, "still held after waiting: overlap");
        let mut manual = start(Why::Manual, Concurrency::Forbid, 0);
        manual.claimed(Ok(Some(6)), now(0));
        assert_eq!(manual.run_lock(Ok(None), now(0)), vec![Do::WaitForRunLock]);
        let steps = manual.run_lock(Ok(Some(8)), now(0));
        assert!(
            matches!(steps.as_slice(), [Do::Record(w)] if !w.conditions.unless_suspended),
            "a manual run runs suspended"
        );
    }

    #[test]
    fn with_buffer_one_occurrence_waits_in_the_slot_and_runs_right_after_the_running_one() {
        // The run lock held: the attempt takes the buffer slot and waits for the run lock as long as it is held.
        let mut waiting = start(Why::OnTime, Concurrency::Buffer, 0);
        assert_eq!(waiting.claimed(Ok(Some(6)), now(0)), vec![Do::TakeRunLock]);
        assert_eq!(waiting.run_lock(Ok(None), now(0)), vec![Do::TakeBufferSlot]);
        assert_eq!(waiting.buffer_slot(Ok(Some(7))), vec![Do::AwaitRunLock]);
        let steps = waiting.run_lock(Ok(Some(8)), now(500));
        let [Do::Record(write)] = steps.as_slice() else { panic!("{steps:?}") };
        assert_eq!(write.record.fence.as_deref(), Some("8"));
        assert!(write.conditions.only_new && write.conditions.over_missed, "a look back may have taken it for missed");
        assert!(write.conditions.holds_buffer, "recorded only while its claim and the slot are still its own");
        let steps = waiting.recorded(Ok(Written::Yes), now(500));
        assert_eq!(steps, vec![Do::LeaveBufferSlot, Do::Run { fence: 8 }], "the next occurrence may wait now");

        // Its claim or slot lapsed while it waited (its process stopped), and another took the slot: it does not run.
        let mut lapsed = start(Why::OnTime, Concurrency::Buffer, 0);
        lapsed.claimed(Ok(Some(6)), now(0));
        lapsed.run_lock(Ok(None), now(0));
        lapsed.buffer_slot(Ok(Some(7)));
        lapsed.run_lock(Ok(Some(8)), now(5000));
        let steps = lapsed.recorded(Ok(Written::Refused), now(5000));
        assert_eq!(steps[0], Do::Release);
        assert!(
            matches!(&steps[1], Do::Record(w) if w.record.reason.as_deref() == Some("superseded") && w.conditions.only_new)
        );
        assert_eq!(steps[2], Do::Skipped(SkipReason::Taken));
        assert!(lapsed.is_over());

        // Another one waits already: skipped, as forbid skips.
        let mut third = start(Why::OnTime, Concurrency::Buffer, 0);
        third.claimed(Ok(Some(9)), now(0));
        third.run_lock(Ok(None), now(0));
        let steps = third.buffer_slot(Ok(None));
        assert_eq!(steps[0], Do::Release);
        assert!(matches!(&steps[1], Do::Record(w) if w.record.reason.as_deref() == Some("overlap")));
        assert_eq!(steps[2], Do::Skipped(SkipReason::Overlap));
        assert!(third.is_over());

        // The wait given up (stopped here, a renewal failed): the locks go back, unrecorded, for a look back.
        let mut stopped = start(Why::Late, Concurrency::Buffer, 0);
        stopped.claimed(Ok(Some(6)), now(0));
        assert_eq!(stopped.run_lock(Ok(None), now(0)), vec![Do::TakeBufferSlot], "a late one waits too");
        stopped.buffer_slot(Ok(Some(7)));
        assert_eq!(stopped.run_lock(Ok(None), now(0)), vec![Do::Release]);
        assert!(stopped.is_over());

        // Free at once: no slot; a manual run or a retry waits as with forbid.
        let mut free = start(Why::OnTime, Concurrency::Buffer, 0);
        free.claimed(Ok(Some(6)), now(0));
        let steps = free.run_lock(Ok(Some(7)), now(0));
        assert!(matches!(steps.as_slice(), [Do::Record(w)] if !w.conditions.over_missed && !w.conditions.holds_buffer));
        let mut manual = start(Why::Manual, Concurrency::Buffer, 0);
        manual.claimed(Ok(Some(6)), now(0));
        assert_eq!(manual.run_lock(Ok(None), now(0)), vec![Do::WaitForRunLock]);
    }

    #[test]
    fn concurrency_is_named_once() {
        for concurrency in Concurrency::ALL {
            assert_eq!(Concurrency::parse(concurrency.as_str()), Ok(concurrency));
        }
        let Err(SnatchError::InvalidArg { message, .. }) = Concurrency::parse("queue") else { panic!() };
        assert_eq!(message, "concurrency must be one of 'forbid', 'allow', 'replace', 'buffer', got 'queue'");
    }

    #[test]
    fn a_record_refused_suspended_or_failed_gives_the_locks_back() {
        for (written, told) in [
            (Ok(Written::Suspended), Some(Do::Skipped(SkipReason::Suspended))),
            (Ok(Written::Refused), Some(Do::Skipped(SkipReason::Taken))),
            (Err(SnatchError::Closed), Some(Do::Unclaimed(SnatchError::Closed))),
        ] {
            let mut run = start(Why::OnTime, Concurrency::Forbid, 0);
            run.claimed(Ok(Some(6)), now(0));
            run.run_lock(Ok(Some(7)), now(0));
            let steps = run.recorded(written, now(0));
            assert_eq!(steps[0], Do::Release);
            assert_eq!(steps.last().cloned(), told);
            assert!(run.is_over());
        }
    }

    #[test]
    fn a_takeover_records_the_dead_runner_s_attempt_crashed() {
        let mut dead = Record::missed(Attempt::first(1000), Why::OnTime, "x");
        dead.outcome = Status::Running;
        let found = Found { json: dead.to_json(), record: dead };
        let attempt = Attempt::first(1000).next();
        let (mut run, _) = AttemptRun::new(
            attempt,
            Why::Retry,
            Some(found.clone()),
            policy(Concurrency::Forbid, 0),
            "me".into(),
            false,
        );
        run.claimed(Ok(Some(6)), now(0));
        let steps = run.run_lock(Ok(Some(7)), now(0));
        let [Do::Record(write)] = steps.as_slice() else { panic!("{steps:?}") };
        let (was, becomes) = write.takes_over.as_ref().expect("takes over");
        assert_eq!((was, becomes.outcome), (&found, Status::Crashed));
    }

    #[test]
    fn an_attempt_whose_runner_died_is_taken_over_until_none_is_left() {
        let found = |outcome, attempt| {
            let mut record = Record::missed(Attempt { attempt, ..Attempt::first(1000) }, Why::OnTime, "x");
            record.outcome = outcome;
            Found { json: record.to_json(), record }
        };
        let second = Attempt { attempt: 2, ..Attempt::first(1000) };
        assert_eq!(Next::after(&found(Status::Running, 1), 0), Next::Attempt(second));
        assert_eq!(
            Next::after(&found(Status::Failed, 5), 0),
            Next::Attempt(Attempt { attempt: 6, ..second }),
            "a retry"
        );
        let Next::GiveUp(write) = Next::after(&found(Status::Running, 3), 0) else { panic!("a poison job") };
        assert_eq!((write.record.outcome, write.open), (Status::Failed, Open::Closed));
        assert!(write.conditions.only_running);
    }

    #[test]
    fn nothing_happens_out_of_turn() {
        let mut run = start(Why::OnTime, Concurrency::Forbid, 0);
        assert_eq!(run.abort(AbortReason::Timeout), vec![], "no fn runs yet");
        assert_eq!(run.settled(None, false, now(0), 1.0), vec![]);
        assert_eq!(run.run_lock(Ok(Some(7)), now(0)), vec![], "not claimed yet");
        assert_eq!(run.recorded(Ok(Written::Yes), now(0)), vec![]);
    }
}
