//! The cluster-safe scheduler against a real redis-server: replicas with skewed clocks, overlaps, stop. Each replica's
//! occurrences run through its runner, as the binding's do.

mod support;

use snatch_core::protocol::run::{Outcome, SkipReason};
use snatch_core::{CronSchedule, Locker, LockerConfig, ScheduleOptions};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::caller::{Caller, Occurrences};
use support::{redis_url, unique_key};

/// Occurrences run, with the replica that ran each.
type Runs = Arc<Mutex<Vec<(i64, usize)>>>;

/// A schedule's fn that records its occurrence as run by `replica`, then takes `work`.
fn recorder(replica: usize, work: Duration, runs: &Runs) -> Occurrences {
    let runs = runs.clone();
    Box::new(move |tick| {
        runs.lock().unwrap().push((tick, replica));
        Box::pin(tokio::time::sleep(work))
    })
}

fn every_second() -> CronSchedule {
    CronSchedule::new("*/1 * * * * *", "UTC").unwrap()
}

fn locker(url: &str) -> Locker {
    Locker::new(LockerConfig { urls: vec![url.to_owned()], ..LockerConfig::default() }).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skewed_replicas_run_each_occurrence_once() {
    let (_server, url) = redis_url();
    let name = unique_key("skew");
    let runs: Runs = Arc::default();
    let replicas = [0i64, 450, -450].into_iter().enumerate().map(|(replica, offset)| {
        let (name, url, runs) = (name.clone(), url.clone(), runs.clone());
        tokio::spawn(async move {
            let mut caller = Caller::new(&locker(&url));
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
    let mut ticks: Vec<_> = runs.iter().map(|(t, _)| *t).collect();
    ticks.sort();
    let total = ticks.len();
    ticks.dedup();
    assert_eq!(ticks.len(), total, "an occurrence ran twice: {runs:?}");
    assert!(total >= 3, "too few runs: {runs:?}");
    for told in told {
        for (_, outcome) in told.unwrap() {
            assert!(!matches!(outcome, Outcome::Unclaimed { .. } | Outcome::Failed(_)), "{outcome:?}");
            assert!(!matches!(outcome, Outcome::Ran { lost: true, .. }), "{outcome:?}");
        }
    }
}

#[tokio::test]
async fn a_run_still_going_at_the_next_occurrence_skips_it_as_an_overlap() {
    let (_server, url) = redis_url();
    let name = unique_key("overlap");
    let runs: Runs = Arc::default();
    let mut caller = Caller::new(&locker(&url));
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
    assert!(told.iter().any(|(_, o)| matches!(o, Outcome::Ran { .. })), "{told:?}");
    assert_eq!(runs.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn close_stops_schedules() {
    let (_server, url) = redis_url();
    let runs: Runs = Arc::default();
    let locker = locker(&url);
    let mut caller = Caller::new(&locker);
    caller.schedule(&unique_key("close"), every_second(), ScheduleOptions::default()).unwrap();
    caller.serve(recorder(0, Duration::from_millis(10), &runs), locker.close()).await;
    let count = runs.lock().unwrap().len();
    caller.serve(recorder(0, Duration::from_millis(10), &runs), tokio::time::sleep(Duration::from_millis(1200))).await;
    assert_eq!(runs.lock().unwrap().len(), count, "ran after close");
    let err = caller.schedule("again", every_second(), ScheduleOptions::default()).err().unwrap();
    assert_eq!(err.code(), "ERR_SNATCH_CLOSED");
}
