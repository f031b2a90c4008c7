//! The cluster-safe scheduler against a real redis-server: replicas with skewed clocks, overlaps, stop.

mod support;

use snatch_core::chrono::{DateTime, Utc};
use snatch_core::{CronSchedule, Lease, Locker, LockerConfig, ScheduleOptions, SkipReason, TickEvent, TickHandler};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{redis_url, unique_key};

/// Occurrences run, with the replica that ran each.
type Runs = Arc<Mutex<Vec<(DateTime<Utc>, usize)>>>;

/// Records runs and events; each run takes `work`.
struct Recorder {
    replica: usize,
    work: Duration,
    runs: Runs,
    events: Mutex<Vec<TickEvent>>,
}

impl TickHandler for Recorder {
    fn run(&self, tick: DateTime<Utc>, _lease: Arc<Lease>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        self.runs.lock().unwrap().push((tick, self.replica));
        let work = self.work;
        Box::pin(async move { tokio::time::sleep(work).await })
    }

    fn event(&self, event: TickEvent) {
        self.events.lock().unwrap().push(event);
    }
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
    let runs = Arc::new(Mutex::new(Vec::new()));
    let mut schedules = Vec::new();
    let mut recorders = Vec::new();
    for (replica, offset) in [0i64, 450, -450].into_iter().enumerate() {
        let recorder = Arc::new(Recorder {
            replica,
            work: Duration::from_millis(50),
            runs: runs.clone(),
            events: Mutex::default(),
        });
        let options = ScheduleOptions { clock_offset_ms: offset, ..ScheduleOptions::default() };
        schedules.push((locker(&url), recorder.clone(), options));
        recorders.push(recorder);
    }
    let running: Vec<_> =
        schedules.iter().map(|(l, r, o)| l.schedule(&name, every_second(), o.clone(), r.clone()).unwrap()).collect();
    tokio::time::sleep(Duration::from_millis(4500)).await;
    for s in &running {
        s.stop().await;
    }
    let runs = runs.lock().unwrap().clone();
    let mut ticks: Vec<_> = runs.iter().map(|(t, _)| *t).collect();
    ticks.sort();
    let total = ticks.len();
    ticks.dedup();
    assert_eq!(ticks.len(), total, "an occurrence ran twice: {runs:?}");
    assert!(total >= 3, "too few runs: {runs:?}");
    for r in &recorders {
        for e in r.events.lock().unwrap().iter() {
            assert!(!matches!(e, TickEvent::Error { .. }), "{e:?}");
            if let TickEvent::Ran { lost, .. } = e {
                assert!(!lost);
            }
        }
    }
}

#[tokio::test]
async fn a_run_still_going_at_the_next_occurrence_skips_it_as_an_overlap() {
    let (_server, url) = redis_url();
    let name = unique_key("overlap");
    let runs = Arc::new(Mutex::new(Vec::new()));
    let recorder = Arc::new(Recorder {
        replica: 0,
        work: Duration::from_millis(2200),
        runs: runs.clone(),
        events: Mutex::default(),
    });
    let locker = locker(&url);
    let schedule = locker.schedule(&name, every_second(), ScheduleOptions::default(), recorder.clone()).unwrap();
    tokio::time::sleep(Duration::from_millis(2600)).await;
    schedule.stop().await;
    let events = recorder.events.lock().unwrap().clone();
    assert!(
        events.iter().any(|e| matches!(e, TickEvent::Skip { reason: SkipReason::Overlap, .. })),
        "no overlap skip in {events:?}"
    );
    // stop() waited for the running task to settle.
    assert!(events.iter().any(|e| matches!(e, TickEvent::Ran { .. })), "{events:?}");
    assert_eq!(runs.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn close_stops_schedules() {
    let (_server, url) = redis_url();
    let runs = Arc::new(Mutex::new(Vec::new()));
    let recorder = Arc::new(Recorder {
        replica: 0,
        work: Duration::from_millis(10),
        runs: runs.clone(),
        events: Mutex::default(),
    });
    let locker = locker(&url);
    locker.schedule(&unique_key("close"), every_second(), ScheduleOptions::default(), recorder.clone()).unwrap();
    locker.close().await;
    let count = runs.lock().unwrap().len();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(runs.lock().unwrap().len(), count, "ran after close");
    let err = locker.schedule("again", every_second(), ScheduleOptions::default(), recorder).err().unwrap();
    assert_eq!(err.code(), "ERR_SNATCH_CLOSED");
}
