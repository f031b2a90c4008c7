//! The cluster-safe scheduler against a real redis-server: replicas with skewed clocks, overlaps, stop, records,
//! retries, a dead runner's attempt taken over, suspend, trigger, late runs. Each replica's occurrences run through
//! its runner, as the binding's do.

mod support;

use snatch_core::protocol::attempt::{Concurrency, Ending, SkipReason};
use snatch_core::protocol::run::{Outcome, ScheduledAttempt};
use snatch_core::protocol::schedule::{Attempt, Jitter, Record, ScheduleKeys, Status, Why};
use snatch_core::{ask_fleet, Cron, FleetRequest, Input, Locker, LockerConfig, Post, Schedule, ScheduleOptions};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::caller::{Caller, Occurrences};
use support::{redis_url, take_buffer_slot, unique_key};

/// Attempts run, with the replica that ran each.
type Runs = Arc<Mutex<Vec<(ScheduledAttempt, usize)>>>;

/// A schedule's fn that records its attempt as run by `replica`, then takes `work`.
fn recorder(replica: usize, work: Duration, runs: &Runs) -> Occurrences {
    let runs = runs.clone();
    Box::new(move |occurrence| {
        runs.lock().unwrap().push((occurrence, replica));
        Box::pin(async move {
            tokio::time::sleep(work).await;
            None
        })
    })
}

fn every_second() -> Cron {
    Cron::new("*/1 * * * * *", "UTC").unwrap()
}

fn locker(url: &str, instance: &str) -> Locker {
    let config =
        LockerConfig { urls: vec![url.to_owned()], instance_id: instance.to_owned(), ..LockerConfig::default() };
    Locker::new(config).unwrap()
}

/// Stops `schedule` once two of its attempts began (stop() waits for them to settle).
async fn stop_after_two_runs(runs: &Runs, schedule: &Schedule) {
    while runs.lock().unwrap().len() < 2 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    schedule.stop().await;
}

/// Schedule `name`'s newest records, asked of the fleet.
async fn history(locker: &Locker, name: &str) -> Vec<Record> {
    let request = FleetRequest::History { name: name.to_owned(), limit: 100 };
    serde_json::from_str(&ask_fleet(locker, request).await.unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skewed_replicas_run_each_occurrence_once_and_record_it() {
    let (_server, url) = redis_url();
    let name = unique_key("skew");
    let runs: Runs = Arc::default();
    let replicas = [0i64, 450, -450].into_iter().enumerate().map(|(replica, offset)| {
        let (name, url, runs) = (name.clone(), url.clone(), runs.clone());
        tokio::spawn(async move {
            let mut caller = Caller::new(&locker(&url, &format!("replica-{replica}")));
            let options = ScheduleOptions { clock_offset_ms: offset, ..ScheduleOptions::default() };
            let schedule = caller.schedule(&name, every_second(), options).unwrap();
            let until = async {
                tokio::time::sleep(Duration::from_millis(4500)).await;
                schedule.stop().await;
            };
            caller.serve(recorder(replica, Duration::from_millis(50), &runs), until).await
        })
    });
    let told = futures_util::future::join_all(replicas).await;
    let runs = runs.lock().unwrap().clone();
    let mut ticks: Vec<_> = runs.iter().map(|(o, _)| o.attempt.tick).collect();
    ticks.sort();
    let total = ticks.len();
    ticks.dedup();
    assert_eq!(ticks.len(), total, "an occurrence ran twice: {runs:?}");
    assert!(total >= 3, "too few runs: {runs:?}");
    assert!(runs.iter().all(|(o, _)| o.why == Why::OnTime && o.attempt.attempt == 1), "{runs:?}");
    for told in told {
        for (_, outcome) in told.unwrap() {
            assert!(!matches!(outcome, Outcome::Unclaimed { .. } | Outcome::Failed(_)), "{outcome:?}");
            if let Outcome::Attempted(ended) = outcome {
                assert_eq!(ended.ending, Ending::Ok, "{ended:?}");
            }
        }
    }
    let records = history(&locker(&url, "reader"), &name).await;
    for (occurrence, replica) in &runs {
        let record = records.iter().find(|r| r.attempt() == occurrence.attempt).expect("a record of each run");
        assert_eq!(record.outcome, Status::Ok, "{record:?}");
        assert_eq!(record.instance.as_deref(), Some(format!("replica-{replica}").as_str()));
        assert!(record.fence.is_some() && record.duration_ms.is_some(), "{record:?}");
    }
}

#[tokio::test]
async fn a_run_still_going_at_the_next_occurrence_skips_it_as_an_overlap() {
    let (_server, url) = redis_url();
    let name = unique_key("overlap");
    let runs: Runs = Arc::default();
    let locker = locker(&url, "one");
    let mut caller = Caller::new(&locker);
    let schedule = caller.schedule(&name, every_second(), ScheduleOptions::default()).unwrap();
    let until = async {
        tokio::time::sleep(Duration::from_millis(2600)).await;
        schedule.stop().await;
    };
    let told = caller.serve(recorder(0, Duration::from_millis(2200), &runs), until).await;
    assert!(
        told.iter().any(|(_, o)| matches!(o, Outcome::Skipped { reason: SkipReason::Overlap, .. })),
        "no overlap skip in {told:?}"
    );
    // stop() waited for the running fn to settle and its locks to be given back.
    assert!(told.iter().any(|(_, o)| matches!(o, Outcome::Attempted(_))), "{told:?}");
    assert_eq!(runs.lock().unwrap().len(), 1);
    let records = history(&locker, &name).await;
    assert!(
        records.iter().any(|r| r.outcome == Status::Missed && r.reason.as_deref() == Some("overlap")),
        "{records:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_occurrence_claimed_elsewhere_is_skipped_and_its_run_lock_left_free() {
    // The claim and the run lock are taken in one call: the run lock only once the claim is.
    let (_server, url) = redis_url();
    let name = unique_key("claimed");
    let keys = ScheduleKeys::new("snatch:", &name, false).unwrap();
    let mut redis = support::inspect(&url);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let first = (now / 1000 + 1) * 1000;
    // Claims for every tick of the test's 3.6 s (at least three of them come while it waits).
    for tick in (0..6).map(|n| first + n * 1000) {
        let claim = keys.claim(&Attempt::first(tick)).lock;
        redis::cmd("SET").arg(&claim).arg("another").arg("PX").arg(60_000).query::<()>(&mut redis).unwrap();
    }
    let runs: Runs = Arc::default();
    let locker = locker(&url, "one");
    let mut caller = Caller::new(&locker);
    let schedule = caller.schedule(&name, every_second(), ScheduleOptions::default()).unwrap();
    let run_lock = keys.run.lock.clone();
    let until = async {
        tokio::time::sleep(Duration::from_millis(3600)).await;
        let held: Option<String> = redis::cmd("GET").arg(&run_lock).query(&mut redis).unwrap();
        assert_eq!(held, None, "the run lock was taken though the claim was not");
        schedule.stop().await;
    };
    let told = caller.serve(recorder(0, Duration::ZERO, &runs), until).await;
    assert!(runs.lock().unwrap().is_empty());
    let taken = told.iter().filter(|(_, o)| matches!(o, Outcome::Skipped { reason: SkipReason::Taken, .. })).count();
    assert!(taken >= 2, "{told:?}");
}

#[tokio::test]
async fn with_buffer_the_next_occurrence_waits_and_runs_right_after_and_a_third_is_skipped() {
    let (_server, url) = redis_url();
    let name = unique_key("buffer");
    let runs: Runs = Arc::default();
    let locker = locker(&url, "one");
    let mut caller = Caller::new(&locker);
    let options = ScheduleOptions { concurrency: Concurrency::Buffer, ..ScheduleOptions::default() };
    let schedule = caller.schedule(&name, every_second(), options).unwrap();
    // Stopped once the waiting occurrence runs (stop() then waits for it).
    let until = stop_after_two_runs(&runs, &schedule);
    let told = caller.serve(recorder(0, Duration::from_millis(2200), &runs), until).await;
    let ticks: Vec<i64> = runs.lock().unwrap().iter().map(|(o, _)| o.attempt.tick).collect();
    assert_eq!(ticks.len(), 2, "{ticks:?}");
    assert_eq!(ticks[1], ticks[0] + 1000, "the next occurrence waited and ran: {ticks:?}");
    let skipped: Vec<i64> = told
        .iter()
        .filter_map(|(_, o)| match o {
            Outcome::Skipped { tick, reason: SkipReason::Overlap } => Some(*tick),
            _ => None,
        })
        .collect();
    assert_eq!(skipped, vec![ticks[0] + 2000], "one waits at most: the third is skipped");
    let records = history(&locker, &name).await;
    let of = |tick| records.iter().find(|r| r.tick == tick).map(|r| (r.outcome, r.reason.clone()));
    assert_eq!(of(ticks[1]), Some((Status::Ok, None)), "{records:?}");
    assert_eq!(of(ticks[0] + 2000), Some((Status::Missed, Some("overlap".to_owned()))), "{records:?}");
}

#[tokio::test]
async fn with_buffer_an_occurrence_waiting_past_its_grace_runs_though_a_look_back_took_it_for_missed() {
    let (_server, url) = redis_url();
    let name = unique_key("buffer-long");
    let runs: Runs = Arc::default();
    let locker = locker(&url, "one");
    let mut caller = Caller::new(&locker);
    let options = ScheduleOptions { concurrency: Concurrency::Buffer, ..ScheduleOptions::default() };
    let schedule = caller.schedule(&name, every_second(), options).unwrap();
    let until = stop_after_two_runs(&runs, &schedule);
    // Each run takes 7 s: the next occurrence waits 6 s, past a heartbeat (5 s) and the look back's grace of 2 s.
    let told = caller.serve(recorder(0, Duration::from_millis(7000), &runs), until).await;
    let ticks: Vec<i64> = runs.lock().unwrap().iter().map(|(o, _)| o.attempt.tick).collect();
    assert_eq!(ticks[1], ticks[0] + 1000, "{ticks:?}");
    assert!(
        told.iter().any(|(_, o)| matches!(o, Outcome::Missed { tick, .. } if *tick == ticks[1])),
        "a look back recorded the waiting occurrence missed meanwhile: {told:?}"
    );
    let records = history(&locker, &name).await;
    let waited: Vec<_> = records.iter().filter(|r| r.tick == ticks[1]).collect();
    assert_eq!(waited.len(), 1, "{records:?}");
    assert_eq!(waited[0].outcome, Status::Ok, "its record replaced the missed one: {records:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_buffer_a_waiter_whose_slot_was_taken_meanwhile_does_not_run() {
    let (_server, url) = redis_url();
    let name = unique_key("buffer-taken");
    let runs: Runs = Arc::default();
    let locker = locker(&url, "one");
    let slot = ScheduleKeys::new(&locker.config().prefix, &name, false).unwrap().buffer().lock;
    let mut caller = Caller::new(&locker);
    // A long lease: the waiter waits for the run lock in rounds of a third of it, so it renews nothing between losing
    // its slot and getting the run lock, as a waiter stopped past the slot's lease does not.
    let ttl = Some(Duration::from_secs(30));
    let options = ScheduleOptions { concurrency: Concurrency::Buffer, ttl, ..ScheduleOptions::default() };
    let schedule = caller.schedule(&name, every_second(), options).unwrap();
    let seen = runs.clone();
    let until = async {
        let ran = |from: i64| seen.lock().unwrap().iter().any(|(o, _)| o.attempt.tick >= from);
        while !ran(0) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let first = seen.lock().unwrap()[0].0.attempt.tick;
        // The next occurrence waits in the slot; then the slot is another's (its lease lapsed while its process was
        // stopped, and a later occurrence took it).
        take_buffer_slot(&url, &slot).await;
        // Until the waiter ran, or a later occurrence did after the first run ended.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !ran(first + 1000) && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        schedule.stop().await;
    };
    caller.serve(recorder(0, Duration::from_millis(2500), &runs), until).await;
    let ticks: Vec<i64> = runs.lock().unwrap().iter().map(|(o, _)| o.attempt.tick).collect();
    assert!(ticks.len() >= 2, "a later occurrence ran after the first: {ticks:?}");
    assert!(!ticks.contains(&(ticks[0] + 1000)), "the waiter ran though its slot was another's: {ticks:?}");
    let records = history(&locker, &name).await;
    let waiter: Vec<_> =
        records.iter().filter(|r| r.tick == ticks[0] + 1000).map(|r| (r.outcome, r.reason.as_deref())).collect();
    assert_eq!(waiter, vec![(Status::Missed, Some("superseded"))], "recorded, as another took its place: {records:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_jitter_each_occurrence_starts_at_its_offset_the_same_on_every_replica_and_runs_once() {
    let (_server, url) = redis_url();
    let name = unique_key("jitter");
    let jitter = Duration::from_millis(900);
    let starts: Arc<Mutex<Vec<(i64, i64)>>> = Arc::default();
    let replicas = (0..3).map(|replica| {
        let (name, url, starts) = (name.clone(), url.clone(), starts.clone());
        tokio::spawn(async move {
            let mut caller = Caller::new(&locker(&url, &format!("replica-{replica}")));
            let options = ScheduleOptions { jitter, ..ScheduleOptions::default() };
            let schedule = caller.schedule(&name, every_second(), options).unwrap();
            let until = async {
                tokio::time::sleep(Duration::from_millis(4500)).await;
                schedule.stop().await;
            };
            let r#fn: Occurrences = Box::new(move |occurrence| {
                starts.lock().unwrap().push((occurrence.attempt.tick, chrono::Utc::now().timestamp_millis()));
                Box::pin(async { None })
            });
            caller.serve(r#fn, until).await
        })
    });
    futures_util::future::join_all(replicas).await;
    let starts = starts.lock().unwrap().clone();
    let mut ticks: Vec<i64> = starts.iter().map(|&(tick, _)| tick).collect();
    ticks.sort();
    ticks.dedup();
    assert_eq!(ticks.len(), starts.len(), "an occurrence ran twice: {starts:?}");
    assert!(starts.len() >= 3, "{starts:?}");
    let planned = Jitter::new(&name, jitter);
    for &(tick, started) in &starts {
        assert_eq!(tick % 1000, 0, "the occurrence stays its tick");
        assert!(started >= planned.start(tick), "started before its offset: {tick} at {started}");
    }
}

#[tokio::test]
async fn a_second_schedule_of_a_name_on_one_locker_is_refused_until_the_first_stopped() {
    let (_server, url) = redis_url();
    let name = unique_key("twice");
    let locker = locker(&url, "one");
    let caller = Caller::new(&locker);
    let first = caller.schedule(&name, every_second(), ScheduleOptions::default()).unwrap();
    let err = caller.schedule(&name, every_second(), ScheduleOptions::default()).err().unwrap();
    assert_eq!(err.code(), "ERR_SNATCH_INVALID_ARG");
    assert!(err.to_string().contains("already scheduled"), "{err}");
    assert!(locker.is_scheduled(&name));
    // Another replica (another locker, as in another process) schedules it as every replica does.
    let other = self::locker(&url, "two");
    let replica = Caller::new(&other).schedule(&name, every_second(), ScheduleOptions::default()).unwrap();
    first.stop().await;
    assert!(!locker.is_scheduled(&name));
    let again = caller.schedule(&name, every_second(), ScheduleOptions::default()).unwrap();
    again.stop().await;
    replica.stop().await;
}

#[tokio::test]
async fn close_stops_schedules() {
    let (_server, url) = redis_url();
    let runs: Runs = Arc::default();
    let locker = locker(&url, "one");
    let mut caller = Caller::new(&locker);
    caller.schedule(&unique_key("close"), every_second(), ScheduleOptions::default()).unwrap();
    caller.serve(recorder(0, Duration::from_millis(10), &runs), locker.close()).await;
    let count = runs.lock().unwrap().len();
    caller.serve(recorder(0, Duration::from_millis(10), &runs), tokio::time::sleep(Duration::from_millis(1200))).await;
    assert_eq!(runs.lock().unwrap().len(), count, "ran after close");
    let err = caller.schedule("again", every_second(), ScheduleOptions::default()).err().unwrap();
    assert_eq!(err.code(), "ERR_SNATCH_CLOSED");
}

#[tokio::test]
async fn a_failed_attempt_is_retried_and_every_attempt_recorded() {
    let (_server, url) = redis_url();
    let name = unique_key("retry");
    let locker = locker(&url, "one");
    let mut caller = Caller::new(&locker);
    // One occurrence a minute, half a minute away: the retries below are of the manual run only.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let cron = Cron::new(&format!("{} * * * * *", (now + 30) % 60), "UTC").unwrap();
    let options = ScheduleOptions { retries: 2, retry_delay: Duration::from_millis(100), ..ScheduleOptions::default() };
    let schedule = caller.schedule(&name, cron, options).unwrap();
    let attempts: Arc<Mutex<Vec<ScheduledAttempt>>> = Arc::default();
    let seen = attempts.clone();
    let (done, ended) = tokio::sync::oneshot::channel();
    let mut done = Some(done);
    let fail_twice: Occurrences = Box::new(move |occurrence| {
        seen.lock().unwrap().push(occurrence.clone());
        let attempt = occurrence.attempt.attempt;
        if attempt == 3 {
            let _ = done.take().map(|done| done.send(()));
        }
        Box::pin(async move { (attempt < 3).then(|| format!("attempt {attempt} failed")) })
    });
    let trigger = FleetRequest::Trigger(name.clone());
    let until = async {
        // A manual run, so as not to wait for the minute; once registered.
        tokio::time::sleep(Duration::from_millis(200)).await;
        ask_fleet(&locker, trigger).await.unwrap();
        let _ = tokio::time::timeout(Duration::from_secs(30), ended).await;
        schedule.stop().await;
    };
    caller.serve(fail_twice, until).await;
    let attempts = attempts.lock().unwrap().clone();
    assert_eq!(attempts.iter().map(|o| o.attempt.attempt).collect::<Vec<_>>(), [1, 2, 3], "{attempts:?}");
    assert_eq!(attempts.iter().map(|o| o.why).collect::<Vec<_>>(), [Why::Manual, Why::Retry, Why::Retry]);
    let records = history(&locker, &name).await;
    let outcomes: Vec<_> = records.iter().map(|r| (r.attempt, r.outcome, r.error.clone())).collect();
    assert_eq!(
        outcomes,
        [
            (3, Status::Ok, None),
            (2, Status::Failed, Some("attempt 2 failed".to_owned())),
            (1, Status::Failed, Some("attempt 1 failed".to_owned())),
        ]
    );
    let fences: Vec<i64> = records.iter().map(|r| r.fence.as_ref().unwrap().parse().unwrap()).collect();
    assert!(fences[0] > fences[1] && fences[1] > fences[2], "fences rise: {fences:?}");
}

/// A runner that is gone: every occurrence posted to it is undone, as when a process dies with its fn running.
struct Gone;

impl Post for Gone {
    fn post(&self, input: Input) -> Result<(), Input> {
        Err(input)
    }
}

#[tokio::test]
async fn a_dead_runners_attempt_is_taken_over_with_a_higher_fence() {
    let (_server, url) = redis_url();
    let name = unique_key("crash");
    let ttl = Duration::from_millis(500);
    let options = ScheduleOptions { ttl: Some(ttl), ..ScheduleOptions::default() };
    let cron = || Cron::new("0 0 0 1 1 *", "UTC").unwrap();
    // The dead replica takes a manual run, and never runs it: its record says running, its claim lapses.
    let dead = locker(&url, "dead");
    let schedule = snatch_core::schedule(&dead, 0, &name, cron(), options.clone(), Arc::new(Gone)).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    ask_fleet(&dead, FleetRequest::Trigger(name.clone())).await.unwrap();
    let running = loop {
        let records = history(&dead, &name).await;
        if let Some(record) = records.into_iter().find(|r| r.outcome == Status::Running) {
            break record;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    schedule.stop().await;
    dead.close().await;
    assert_eq!(running.instance.as_deref(), Some("dead"));

    let runs: Runs = Arc::default();
    let alive = locker(&url, "alive");
    let mut caller = Caller::new(&alive);
    let schedule = caller.schedule(&name, cron(), options).unwrap();
    let waiting = runs.clone();
    let until = async {
        while waiting.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        schedule.stop().await;
    };
    tokio::time::timeout(Duration::from_secs(30), caller.serve(recorder(0, Duration::ZERO, &runs), until))
        .await
        .expect("the dead runner's attempt is taken over within a heartbeat or two");
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!((runs[0].0.attempt.attempt, runs[0].0.why), (2, Why::Retry));
    let records = history(&alive, &name).await;
    let first = records.iter().find(|r| r.attempt == 1).unwrap();
    let second = records.iter().find(|r| r.attempt == 2).unwrap();
    assert_eq!(first.outcome, Status::Crashed, "{records:?}");
    assert_eq!((second.outcome, second.instance.as_deref()), (Status::Ok, Some("alive")));
    let fence = |r: &Record| r.fence.as_ref().unwrap().parse::<i64>().unwrap();
    assert!(fence(second) > fence(first));
}

#[tokio::test]
async fn a_runner_that_keeps_dying_stops_after_three_attempts_recorded_failed() {
    let (_server, url) = redis_url();
    let name = unique_key("poison");
    let options = ScheduleOptions { ttl: Some(Duration::from_millis(300)), ..ScheduleOptions::default() };
    let dead = locker(&url, "dead");
    let cron = Cron::new("0 0 0 1 1 *", "UTC").unwrap();
    let schedule = snatch_core::schedule(&dead, 0, &name, cron, options, Arc::new(Gone)).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    ask_fleet(&dead, FleetRequest::Trigger(name.clone())).await.unwrap();
    let records = loop {
        let records = history(&dead, &name).await;
        if records.iter().any(|r| r.attempt == 3 && r.outcome != Status::Running) {
            break records;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    schedule.stop().await;
    let outcomes: Vec<_> = records.iter().map(|r| (r.attempt, r.outcome)).collect();
    assert_eq!(outcomes, [(3, Status::Failed), (2, Status::Crashed), (1, Status::Crashed)], "{records:?}");
    assert_eq!(records[0].error.as_deref(), Some("the runner of attempt 3 died, and no attempt is left"));
}

#[tokio::test]
async fn suspended_schedules_skip_on_every_replica_until_resumed() {
    let (_server, url) = redis_url();
    let name = unique_key("suspend");
    let operator = locker(&url, "operator");
    ask_fleet(&operator, FleetRequest::Suspend(name.clone())).await.unwrap();
    let runs: Runs = Arc::default();
    let mut caller = Caller::new(&locker(&url, "one"));
    let schedule = caller.schedule(&name, every_second(), ScheduleOptions::default()).unwrap();
    let told = caller.serve(recorder(0, Duration::ZERO, &runs), tokio::time::sleep(Duration::from_millis(2200))).await;
    assert!(runs.lock().unwrap().is_empty(), "ran while suspended");
    assert!(told.iter().any(|(_, o)| matches!(o, Outcome::Skipped { reason: SkipReason::Suspended, .. })), "{told:?}");
    let records = history(&operator, &name).await;
    assert!(records.iter().all(|r| r.reason.as_deref() == Some("suspended")), "{records:?}");

    ask_fleet(&operator, FleetRequest::Resume(name.clone())).await.unwrap();
    let until = async {
        tokio::time::sleep(Duration::from_millis(2200)).await;
        schedule.stop().await;
    };
    caller.serve(recorder(0, Duration::ZERO, &runs), until).await;
    assert!(!runs.lock().unwrap().is_empty(), "resumed");
}

#[tokio::test]
async fn an_occurrence_missed_by_every_replica_runs_late_once() {
    let (_server, url) = redis_url();
    let name = unique_key("late");
    let locker = locker(&url, "one");
    // A daily expression whose one occurrence today is about 2 s from now.
    let tick = (chrono::Utc::now() + chrono::Duration::milliseconds(2500)).timestamp() * 1000;
    let at = chrono::DateTime::from_timestamp_millis(tick).unwrap();
    let expression = at.format("%S %M %H * * *").to_string();
    let cron = || Cron::new(&expression, "UTC").unwrap();
    // Registered (so the occurrence counts), then gone across it.
    let options = ScheduleOptions { starting_deadline: Duration::from_secs(30), ..ScheduleOptions::default() };
    let schedule = snatch_core::schedule(&locker, 0, &name, cron(), options.clone(), Arc::new(Gone)).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    schedule.stop().await;
    let wait = tick + 300 - chrono::Utc::now().timestamp_millis();
    tokio::time::sleep(Duration::from_millis(wait.max(0) as u64)).await;

    let runs: Runs = Arc::default();
    let mut caller = Caller::new(&locker);
    let schedule = caller.schedule(&name, cron(), options).unwrap();
    let ran = runs.clone();
    let until = async {
        while ran.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        schedule.stop().await;
    };
    tokio::time::timeout(Duration::from_secs(20), caller.serve(recorder(0, Duration::ZERO, &runs), until))
        .await
        .expect("the late run, once the occurrence's grace is over");
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!((runs[0].0.attempt, runs[0].0.why), (Attempt::first(tick), Why::Late));
    let records = history(&locker, &name).await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!((records[0].why, records[0].outcome), (Why::Late, Status::Ok));
}
