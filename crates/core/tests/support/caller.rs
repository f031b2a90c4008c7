//! The runner driven the way the Node binding drives it: the tests' closures play the user's fn, results from the
//! runtime come back through a channel and are handled on the test's task, and no direct socket is ever open (every
//! direct call goes back to the runner unsent and takes the locker's own connection; tests/direct.rs covers direct
//! calls).

use futures_util::stream::{FuturesUnordered, StreamExt};
use snatch_core::protocol::run::{Invoked, Outcome, ScheduledAttempt};
use snatch_core::{Cron, Input, LockOptions, Locker, Output, Post, Runner, Schedule, ScheduleOptions};

use snatch_core::{SnatchError, Told};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::Notify;

/// Results posted from the runtime, to the test's channel.
struct Poster(UnboundedSender<Input>);

impl Post for Poster {
    fn post(&self, input: Input) -> Result<(), Input> {
        self.0.send(input).map_err(|unsent| unsent.0)
    }
}

/// What the test's fn gets: the fence of its lease, and the news of its loss.
pub struct Task {
    pub fence: i64,
    lost: Arc<Notify>,
}

impl Task {
    /// Resolves once the run hears its lease was lost.
    pub async fn lost(&self) {
        self.lost.notified().await;
    }
}

/// What a run came to: fn's output when it was called, the run's last outcome, and whether a loss was told meanwhile.
#[derive(Debug)]
pub struct Run<T> {
    pub output: Option<T>,
    pub end: Outcome,
    pub lost_told: bool,
}

/// A schedule's fn, as [`Caller::serve`] calls it: with the attempt of the occurrence it runs, a future to await, which
/// comes to fn's failure, if it failed.
pub type Occurrences = Box<dyn FnMut(ScheduledAttempt) -> Pin<Box<dyn Future<Output = Option<String>> + Send>> + Send>;

/// A locker's runner, and what it told that the test has not taken yet.
pub struct Caller {
    runner: Runner,
    inputs: UnboundedReceiver<Input>,
    next_id: u32,
    told: Told,
}

impl Caller {
    /// The runner of `locker`. Within the Tokio runtime.
    pub fn new(locker: &Locker) -> Self {
        let (post, inputs) = unbounded_channel();
        let runner = Runner::new(locker.clone(), Arc::new(Poster(post)), tokio::runtime::Handle::current());
        Self { runner, inputs, next_id: 1, told: Vec::new() }
    }

    /// A snatchTask: `task` runs under `key` if this attempt (waiting up to `options.wait`) gets it. Bad input is an
    /// error at once.
    pub async fn run<T, Fut: Future<Output = T>>(
        &mut self,
        key: &str,
        options: &LockOptions,
        task: impl FnOnce(Task) -> Fut,
    ) -> Result<Run<T>, SnatchError> {
        self.run_with(key, options, false, task).await
    }

    /// A run, as [`Caller::run`]; with `required` (withLock), not getting the lock is a timeout error.
    pub async fn run_with<T, Fut: Future<Output = T>>(
        &mut self,
        key: &str,
        options: &LockOptions,
        required: bool,
        task: impl FnOnce(Task) -> Fut,
    ) -> Result<Run<T>, SnatchError> {
        self.run_by(|runner, id, out| runner.run(id, key, options, required, out), task).await
    }

    /// A run that `start(runner, id, out)` starts (any of the runner's ways to run fn), driven as [`Caller::run`]
    /// drives one.
    pub async fn run_by<T, Fut: Future<Output = T>>(
        &mut self,
        start: impl FnOnce(&mut Runner, u32, &mut Output) -> Result<(), SnatchError>,
        task: impl FnOnce(Task) -> Fut,
    ) -> Result<Run<T>, SnatchError> {
        let id = self.next_id();
        let mut out = Output::default();
        start(&mut self.runner, id, &mut out)?;
        self.done(out);
        let mut lost_told = false;
        let fence = match self.take(id, &mut lost_told).await {
            Outcome::Invoke { fence, .. } => fence,
            end => return Ok(Run { output: None, end, lost_told }),
        };
        let lost = Arc::new(Notify::new());
        let task = task(Task { fence, lost: lost.clone() });
        tokio::pin!(task);
        let output = loop {
            tokio::select! {
                output = &mut task => break output,
                Some(input) = self.inputs.recv() => {
                    let mut out = Output::default();
                    self.runner.handle(input, &mut out);
                    for (of, outcome) in out.told {
                        if of == id && matches!(outcome, Outcome::Lost { .. }) {
                            lost_told = true;
                            lost.notify_one();
                        } else {
                            self.told.push((of, outcome));
                        }
                    }
                }
            }
        };
        let mut out = Output::default();
        self.runner.task_done(id, None, &mut out);
        self.done(out);
        let end = self.take(id, &mut lost_told).await;
        Ok(Run { output: Some(output), end, lost_told })
    }

    /// Starts schedule `name` (the runner's schedule 0) on this caller's locker.
    pub fn schedule(&self, name: &str, cron: Cron, options: ScheduleOptions) -> Result<Schedule, SnatchError> {
        snatch_core::schedule(self.runner.locker(), 0, name, cron, options, self.runner.post())
    }

    /// Makes this caller's locker a runner of stored schedules' handler `name` (the runner's schedule 0).
    pub fn handle(&self, name: &str, max_running: Option<u32>) -> Result<snatch_core::Handler, SnatchError> {
        snatch_core::handle(self.runner.locker(), 0, name, max_running, self.runner.post())
    }

    /// Serves the schedule's occurrences with `fn` until `until` resolves: every outcome told meanwhile, in order
    /// (the calls, the runs' ends, the schedule's skips), with those of the results posted by then.
    pub async fn serve(&mut self, mut r#fn: Occurrences, until: impl Future<Output = ()>) -> Told {
        let mut seen = Vec::new();
        let mut running = FuturesUnordered::new();
        tokio::pin!(until);
        loop {
            tokio::select! {
                () = &mut until => {
                    // What was posted before `until` resolved (a run's end, before the schedule's stop resolves).
                    while let Ok(input) = self.inputs.try_recv() {
                        let mut out = Output::default();
                        self.runner.handle(input, &mut out);
                        seen.extend(self.sent(out));
                    }
                    return seen;
                }
                Some((id, failure)) = running.next(), if !running.is_empty() => {
                    let mut out = Output::default();
                    self.runner.task_done(id, failure, &mut out);
                    seen.extend(self.sent(out));
                }
                Some(input) = self.inputs.recv() => {
                    let mut out = Output::default();
                    self.runner.handle(input, &mut out);
                    for (id, outcome) in self.sent(out) {
                        if let Outcome::Invoke { invoked: Invoked::Attempt(scheduled), .. } = &outcome {
                            let work = r#fn(scheduled.clone());
                            running.push(async move { (id, work.await) });
                        }
                        seen.push((id, outcome));
                    }
                }
            }
        }
    }

    /// The next result from the runtime, not handled: the test hands it to the runner when it will ([`Caller::step`]),
    /// as a caller whose loop stood still meanwhile would.
    pub async fn input(&mut self) -> Input {
        self.inputs.recv().await.expect("the runner's channel is open")
    }

    /// What the runner told that the test has not taken yet.
    pub fn take_told(&mut self) -> Told {
        std::mem::take(&mut self.told)
    }

    /// The runner (for its locker).
    pub fn runner(&mut self) -> &mut Runner {
        &mut self.runner
    }

    /// Has `step(runner, out)` made (a start, a fn settled), and does what its output says; what `step` returned.
    pub fn step<T>(&mut self, step: impl FnOnce(&mut Runner, &mut Output) -> T) -> T {
        let mut out = Output::default();
        let result = step(&mut self.runner, &mut out);
        self.done(out);
        result
    }

    /// What the runner tells next: the outcomes kept so far, or those of the next result from the runtime.
    pub async fn told(&mut self) -> Told {
        while self.told.is_empty() {
            let input = tokio::time::timeout(Duration::from_secs(30), self.inputs.recv())
                .await
                .expect("an outcome within 30 s")
                .expect("the runner's channel is open");
            let mut out = Output::default();
            self.runner.handle(input, &mut out);
            self.done(out);
        }
        std::mem::take(&mut self.told)
    }

    /// Takes back the calls of `out`, which no socket sends; its outcomes, to tell.
    fn sent(&mut self, mut out: Output) -> Told {
        for call in std::mem::take(&mut out.calls) {
            self.runner.unsent(call, &mut out);
        }
        out.told
    }

    /// Does what `out` says: its calls back to the runner, its outcomes kept to be taken.
    fn done(&mut self, out: Output) {
        let told = self.sent(out);
        self.told.extend(told);
    }

    fn next_id(&mut self) -> u32 {
        self.next_id += 1;
        self.next_id
    }

    /// The next outcome told for `id`, handling results from the runtime until there is one; a loss told meanwhile
    /// sets `lost_told`.
    async fn take(&mut self, id: u32, lost_told: &mut bool) -> Outcome {
        loop {
            while let Some(at) = self.told.iter().position(|(of, _)| *of == id) {
                match self.told.remove(at).1 {
                    Outcome::Lost { .. } => *lost_told = true,
                    outcome => return outcome,
                }
            }
            let input = tokio::time::timeout(Duration::from_secs(30), self.inputs.recv())
                .await
                .expect("an outcome within 30 s")
                .expect("the runner's channel is open");
            let mut out = Output::default();
            self.runner.handle(input, &mut out);
            self.done(out);
        }
    }
}
