//! Stored schedules against a real redis-server: runners of a handler in several lockers and an admin locker that runs
//! none upserting, changing and removing schedules; each occurrence once, fenced; a one-off `at` missed while no
//! runner was up runs late once; a dead runner's occurrence taken over; bad input refused with nothing stored (one
//! namespace with code schedules: stored_namespace.rs).

mod support;

use serde_json::{json, Value};
use snatch_core::protocol::run::{Outcome, ScheduledAttempt};
use snatch_core::protocol::schedule::{Record, ScheduleKeys, Status, Why};
use snatch_core::{ask_fleet, FleetRequest, Handler, Input, Locker, LockerConfig, Post};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::caller::{Caller, Occurrences};
use support::stored::{locker, upsert};
use support::{redis_url, take_buffer_slot, unique_key};

/// Occurrences run: the attempt, the replica, and when fn was called (epoch ms).
type Runs = Arc<Mutex<Vec<(ScheduledAttempt, usize, i64)>>>;

fn recorder(replica: usize, runs: &Runs) -> Occurrences {
    let runs = runs.clone();
    Box::new(move |occurrence| {
        runs.lock().unwrap().push((occurrence, replica, chrono::Utc::now().timestamp_millis()));
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            None
        })
    })
}

/// Stops `handling` once an attempt ran, 300 ms later: a second run of the occurrence, were there one, has time to
/// show in the runs.
async fn stop_after_a_run(runs: &Runs, handling: &Handler) {
    while runs.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    handling.stop().await;
}

/// Runs handler `handler` on a runner named `instance` until an attempt ran there (`within` at most, else the test
/// fails saying `why`), and 300 ms more: the runs seen.
async fn run_until_a_run(
    url: &str,
    instance: &str,
    handler: &str,
    within: Duration,
    why: &str,
) -> Vec<(ScheduledAttempt, usize, i64)> {
    let runs: Runs = Arc::default();
    let mut caller = Caller::new(&locker(url, instance));
    let handling = caller.handle(handler, None).unwrap();
    let until = stop_after_a_run(&runs, &handling);
    tokio::time::timeout(within, caller.serve(recorder(0, &runs), until)).await.unwrap_or_else(|_| panic!("{why}"));
    let runs = runs.lock().unwrap().clone();
    runs
}

async fn get(locker: &Locker, id: &str) -> Value {
    serde_json::from_str(&snatch_core::get_stored(locker, id).await.unwrap()).unwrap()
}

async fn history(locker: &Locker, id: &str) -> Vec<Record> {
    let request = FleetRequest::History { name: id.to_owned(), limit: 100 };
    serde_json::from_str(&ask_fleet(locker, request).await.unwrap()).unwrap()
}

fn now() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// A runner that is gone: every occurrence posted to it is undone, as when a process dies with its fn running.
struct Gone;

impl Post for Gone {
    fn post(&self, input: Input) -> Result<(), Input> {
        Err(input)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_runners_run_each_occurrence_once_while_another_process_upserts_changes_and_removes() {
    let (_server, url) = redis_url();
    let handler = unique_key("digest");
    let runs: Runs = Arc::default();
    let admin = locker(&url, "admin");
    let ids: Vec<String> = (0..4).map(|n| format!("{handler}:user-{n}")).collect();
    for (n, id) in ids.iter().enumerate() {
        let info =
            upsert(&admin, id, json!({ "handler": handler, "every": 1000, "data": { "user": n } })).await.unwrap();
        assert_eq!(info["health"], "orphaned", "no runner yet: {info}");
        assert_eq!(info["data"], json!({ "user": n }));
    }
    let replicas = (0..3).map(|replica| {
        let (url, handler, runs) = (url.clone(), handler.clone(), runs.clone());
        tokio::spawn(async move {
            let mut caller = Caller::new(&locker(&url, &format!("runner-{replica}")));
            let handling = caller.handle(&handler, None).unwrap();
            let until = async {
                tokio::time::sleep(Duration::from_millis(6500)).await;
                handling.stop().await;
            };
            caller.serve(recorder(replica, &runs), until).await
        })
    });
    let replicas = futures_util::future::join_all(replicas);
    let steer = async {
        tokio::time::sleep(Duration::from_millis(2000)).await;
        // A change: every 2 s from now on, new data.
        upsert(&admin, &ids[1], json!({ "handler": handler, "every": 2000, "data": "changed" })).await.unwrap();
        let changed_at = now();
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert!(snatch_core::remove_stored(&admin, &ids[2]).await.unwrap());
        let removed = now();
        assert!(!snatch_core::remove_stored(&admin, &ids[2]).await.unwrap(), "removed once");
        assert_eq!(get(&admin, &ids[2]).await, Value::Null);
        (changed_at, removed)
    };
    let (_, (changed_at, removed)) = tokio::join!(replicas, steer);
    let runs = runs.lock().unwrap().clone();
    let mut seen: HashMap<(String, i64), usize> = HashMap::new();
    for (occurrence, _, _) in &runs {
        let stored = occurrence.stored.as_ref().expect("a stored occurrence");
        *seen.entry((stored.id.clone(), occurrence.attempt.tick)).or_default() += 1;
    }
    assert!(seen.values().all(|&n| n == 1), "an occurrence ran twice: {seen:?}");
    let replicas: std::collections::HashSet<usize> = runs.iter().map(|r| r.1).collect();
    assert!(replicas.len() >= 2, "spread over the runners: {replicas:?}");
    let of = |id: &str| runs.iter().filter(|r| r.0.stored.as_ref().unwrap().id == id).collect::<Vec<_>>();
    assert!(of(&ids[0]).len() >= 4, "{:?}", of(&ids[0]));
    assert!(of(&ids[0]).iter().all(|r| r.0.stored.as_ref().unwrap().data.as_deref() == Some(r#"{"user":0}"#)));
    assert!(of(&ids[2]).iter().all(|r| r.2 <= removed), "an occurrence started after removeSchedule resolved");
    let changed = of(&ids[1]);
    let after: Vec<_> =
        changed.iter().filter(|r| r.0.stored.as_ref().unwrap().data.as_deref() == Some("\"changed\"")).collect();
    assert!(!after.is_empty(), "the change took effect: {changed:?}");
    for pair in after.windows(2) {
        assert!(pair[1].0.attempt.tick - pair[0].0.attempt.tick >= 2000, "every 2 s after the change: {after:?}");
    }
    // Recorded, fences rising with the ticks; the change records missed (superseded) an occurrence of the old spec
    // whose time had come and that no runner had started yet.
    for id in [&ids[0], &ids[1], &ids[3]] {
        let mut records = history(&admin, id).await;
        let superseded = |r: &Record| {
            r.outcome == Status::Missed && r.reason.as_deref() == Some("superseded") && r.tick < changed_at
        };
        records.retain(|r| !(id == &ids[1] && superseded(r)));
        records.sort_by_key(|r| r.tick);
        assert!(records.iter().all(|r| r.outcome == Status::Ok), "{records:?}");
        let fences: Vec<i64> = records.iter().map(|r| r.fence.as_ref().unwrap().parse().unwrap()).collect();
        assert!(fences.windows(2).all(|f| f[0] < f[1]), "fences rise: {fences:?}");
        assert!(records.len() <= 10, "a stored schedule keeps 10 records by default");
    }
    let info = get(&admin, &ids[0]).await;
    assert_eq!(info["health"], "orphaned", "its runners stopped: {info}");
    assert!(info["runs"].as_u64().unwrap() >= 4, "{info}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_off_at_missed_while_no_runner_was_up_runs_once_late_then_finishes() {
    let (_server, url) = redis_url();
    let handler = unique_key("cleanup");
    let id = format!("{handler}:once");
    let admin = locker(&url, "admin");
    let at = now() + 800;
    let info = upsert(&admin, &id, json!({ "handler": handler, "at": at, "data": [1, 2] })).await.unwrap();
    assert_eq!(info["next"], json!(at));
    // Every runner is down at its time (and past the on-time window).
    tokio::time::sleep(Duration::from_millis(800 + 10_500)).await;
    let runs = run_until_a_run(&url, "late", &handler, Duration::from_secs(30), "the late one-off runs").await;
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!((runs[0].0.attempt.tick, runs[0].0.why), (at, Why::Late));
    let info = get(&admin, &id).await;
    assert_eq!((info["next"].clone(), info["runs"].clone()), (Value::Null, json!(1)), "{info}");
    assert!(info["finished"].is_i64(), "finished, kept for its retention: {info}");
    assert_eq!(info["last"]["outcome"], "ok");
}

/// A spec longer than one field of the state (64 bytes) is read whole by a runner's visit, and an occurrence's first
/// record with the schedule's next tick in one call: a one-off then finishes, its keys kept for the retention (also
/// those its end record wrote).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_off_with_a_long_spec_runs_once_with_its_data_whole_and_finishes() {
    let (_server, url) = redis_url();
    let handler = unique_key("long");
    let id = format!("{handler}:once");
    let admin = locker(&url, "admin");
    let data = "d".repeat(150);
    upsert(&admin, &id, json!({ "handler": handler, "at": now() + 300, "data": data })).await.unwrap();
    let runs = run_until_a_run(&url, "runner", &handler, Duration::from_secs(30), "the one-off runs").await;
    assert_eq!(runs.len(), 1, "{runs:?}");
    let stored = runs[0].0.stored.clone().expect("a stored schedule's occurrence");
    assert_eq!(stored.data, Some(json!(data).to_string()));
    let info = get(&admin, &id).await;
    assert_eq!((info["runs"].clone(), info["data"].clone()), (json!(1), json!(data)), "{info}");
    assert!(info["finished"].is_i64(), "{info}");
    let records = history(&admin, &id).await;
    assert_eq!(records.iter().map(|r| r.outcome).collect::<Vec<_>>(), [Status::Ok]);
    let keys = ScheduleKeys::new("snatch:", &id, false).unwrap();
    let mut redis = support::inspect(&url);
    let ttl = |key: &str, redis: &mut redis::Connection| -> i64 { redis::cmd("PTTL").arg(key).query(redis).unwrap() };
    let retention = snatch_core::protocol::stored::FINISHED_RETENTION.as_millis() as i64;
    assert!((1..=retention).contains(&ttl(&keys.state, &mut redis)), "the state goes after the retention");
    for key in [&keys.history, &keys.records] {
        // With the state: the attempt's end record, written after the finish, does not keep them longer.
        assert!((1..=retention).contains(&ttl(key, &mut redis)), "{key} expires with the state");
    }
}

#[tokio::test]
async fn a_change_records_the_occurrences_whose_time_came_and_that_no_runner_started() {
    let (_server, url) = redis_url();
    let handler = unique_key("nobody");
    let id = format!("{handler}:changed");
    let admin = locker(&url, "admin");
    // At least a second ahead: a tick before the upsert is not the spec's.
    let start = (now() / 1000 + 2) * 1000;
    upsert(&admin, &id, json!({ "handler": handler, "every": 1000, "startAt": start })).await.unwrap();
    // No runner takes them (stopped, killed, or none yet): three ticks come, and the schedule is changed.
    tokio::time::sleep(Duration::from_millis(u64::try_from(start + 2200 - now()).unwrap())).await;
    let info =
        upsert(&admin, &id, json!({ "handler": handler, "every": 2000, "startAt": start + 10_000 })).await.unwrap();
    assert_eq!(info["next"], json!(start + 10_000), "{info}");
    let records = history(&admin, &id).await;
    for tick in [start, start + 1000, start + 2000] {
        let of: Vec<_> = records.iter().filter(|r| r.tick == tick).map(|r| (r.outcome, r.reason.as_deref())).collect();
        assert_eq!(of, vec![(Status::Missed, Some("superseded"))], "{tick}: {records:?}");
    }
    assert_eq!(records.len(), 3, "{records:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_replace_a_later_occurrence_aborts_the_one_running_on_another_replica() {
    let (_server, url) = redis_url();
    let handler = unique_key("replace");
    let id = format!("{handler}:job");
    let admin = locker(&url, "admin");
    let runs: Runs = Arc::default();
    // Each run takes 3 s, past the next ticks, whether its signal aborts or not.
    let slow = |replica: usize, runs: &Runs| -> Occurrences {
        let runs = runs.clone();
        Box::new(move |occurrence| {
            runs.lock().unwrap().push((occurrence, replica, now()));
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(3000)).await;
                None
            })
        })
    };
    // Replica a runs the first occurrence and is then asked to take no more; replica b takes the next ones.
    let mut a = Caller::new(&locker(&url, "a"));
    let handling_a = a.handle(&handler, None).unwrap();
    upsert(&admin, &id, json!({ "handler": handler, "every": 1000, "concurrency": "replace" })).await.unwrap();
    let seen = runs.clone();
    let fn_a = slow(0, &runs);
    let replica_a = tokio::spawn(async move {
        let until = async {
            while seen.lock().unwrap().is_empty() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            handling_a.stop().await;
        };
        a.serve(fn_a, until).await
    });
    while runs.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut b = Caller::new(&locker(&url, "b"));
    let handling_b = b.handle(&handler, None).unwrap();
    let seen = runs.clone();
    let until = async {
        while !seen.lock().unwrap().iter().any(|(_, replica, _)| *replica == 1) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        handling_b.stop().await;
    };
    tokio::time::timeout(Duration::from_secs(30), b.serve(slow(1, &runs), until)).await.expect("b ran one");
    replica_a.await.unwrap();
    let runs = runs.lock().unwrap().clone();
    let first = runs.iter().find(|(_, replica, _)| *replica == 0).unwrap().0.attempt.tick;
    let records = history(&admin, &id).await;
    let record = records.iter().find(|r| r.tick == first && r.attempt == 1).unwrap();
    assert_eq!(record.outcome, Status::Failed, "{records:?}");
    assert_eq!(record.error.as_deref(), Some("a later occurrence replaced it"), "{records:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_buffer_a_waiter_whose_slot_was_taken_meanwhile_does_not_run_and_is_recorded() {
    let (_server, url) = redis_url();
    let handler = unique_key("buffered");
    let id = format!("{handler}:job");
    let admin = locker(&url, "admin");
    let runner = locker(&url, "runner");
    let slot = ScheduleKeys::new(&runner.config().prefix, &id, false).unwrap().buffer().lock;
    let runs: Runs = Arc::default();
    let slow: Occurrences = {
        let runs = runs.clone();
        Box::new(move |occurrence| {
            runs.lock().unwrap().push((occurrence, 0, now()));
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(2500)).await;
                None
            })
        })
    };
    let mut caller = Caller::new(&runner);
    let handling = caller.handle(&handler, None).unwrap();
    // A long lease: the waiter renews nothing between losing its slot and getting the run lock (see schedule.rs).
    let spec = json!({ "handler": handler, "every": 1000, "concurrency": "buffer", "ttl": 30_000 });
    upsert(&admin, &id, spec).await.unwrap();
    let seen = runs.clone();
    let until = async {
        let ran = |from: i64| seen.lock().unwrap().iter().any(|(o, _, _)| o.attempt.tick >= from);
        while !ran(0) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let first = seen.lock().unwrap()[0].0.attempt.tick;
        take_buffer_slot(&url, &slot).await;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !ran(first + 1000) && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        handling.stop().await;
    };
    caller.serve(slow, until).await;
    let ticks: Vec<i64> = runs.lock().unwrap().iter().map(|(o, _, _)| o.attempt.tick).collect();
    assert!(ticks.len() >= 2, "a later occurrence ran after the first: {ticks:?}");
    assert!(!ticks.contains(&(ticks[0] + 1000)), "the waiter ran though its slot was another's: {ticks:?}");
    let records = history(&admin, &id).await;
    let waiter: Vec<_> =
        records.iter().filter(|r| r.tick == ticks[0] + 1000).map(|r| (r.outcome, r.reason.as_deref())).collect();
    assert_eq!(waiter, vec![(Status::Missed, Some("superseded"))], "{records:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_runners_occurrence_is_taken_over_with_a_higher_fence() {
    let (_server, url) = redis_url();
    let handler = unique_key("crash");
    let id = format!("{handler}:job");
    let admin = locker(&url, "admin");
    upsert(&admin, &id, json!({ "handler": handler, "at": now() + 300, "ttl": 500 })).await.unwrap();
    let dead = locker(&url, "dead");
    let dying = snatch_core::handle(&dead, 0, &handler, None, Arc::new(Gone)).unwrap();
    let running = loop {
        if let Some(record) = history(&admin, &id).await.into_iter().find(|r| r.outcome == Status::Running) {
            break record;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    dying.stop().await;
    dead.close().await;
    assert_eq!(running.instance.as_deref(), Some("dead"));
    let taken_over = "the dead runner's occurrence is taken over";
    let runs = run_until_a_run(&url, "alive", &handler, Duration::from_secs(60), taken_over).await;
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!((runs[0].0.attempt.attempt, runs[0].0.why), (2, Why::Retry));
    let records = history(&admin, &id).await;
    let first = records.iter().find(|r| r.attempt == 1).unwrap();
    let second = records.iter().find(|r| r.attempt == 2).unwrap();
    assert_eq!((first.outcome, second.outcome), (Status::Crashed, Status::Ok), "{records:?}");
    let fence = |r: &Record| r.fence.as_ref().unwrap().parse::<i64>().unwrap();
    assert!(fence(second) > fence(first));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_occurrence_whose_lease_lapsed_before_its_fn_was_called_does_not_run_and_is_run_again() {
    let (_server, url) = redis_url();
    let handler = unique_key("stood-still");
    let id = format!("{handler}:job");
    let admin = locker(&url, "admin");
    upsert(&admin, &id, json!({ "handler": handler, "at": now() + 300, "ttl": 1000 })).await.unwrap();
    let mut caller = Caller::new(&locker(&url, "still"));
    let handling = caller.handle(&handler, None).unwrap();
    // The caller's loop stands still once the occurrence is claimed and recorded running: the call of its fn waits
    // while its claim is lost (taken from Redis here, as another replica may once a stopped process's lease ran out).
    let held = loop {
        match caller.input().await {
            Input::Attempt { scheduled, run, claim, settled } => break (scheduled, run, claim, settled),
            input => caller.step(|runner, out| runner.handle(input, out)),
        }
    };
    let (scheduled, run, claim, settled) = held;
    assert_eq!(scheduled.attempt.attempt, 1);
    assert!(admin.force_release(claim.key()).await.unwrap());
    assert!(claim.ended().await, "the claim is lost");
    // The loop turns again: fn is not called under the lapsed lease.
    let first = scheduled.attempt;
    caller.step(|runner, out| runner.handle(Input::Attempt { scheduled, run, claim, settled }, out));
    let told = caller.take_told();
    assert!(!told.iter().any(|(_, outcome)| matches!(outcome, Outcome::Invoke { .. })), "{told:?}");
    // Recorded so, and handed over: the next attempt runs (here, the only runner), under a higher fence.
    let runs: Runs = Arc::default();
    let until = stop_after_a_run(&runs, &handling);
    tokio::time::timeout(Duration::from_secs(30), caller.serve(recorder(0, &runs), until))
        .await
        .expect("the occurrence is run again");
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!((runs[0].0.attempt.tick, runs[0].0.attempt.attempt, runs[0].0.why), (first.tick, 2, Why::Retry));
    let records = history(&admin, &id).await;
    let of = |n: u32| records.iter().find(|r| r.attempt == n).unwrap();
    let (first, second) = (of(1), of(2));
    assert_eq!((first.outcome, second.outcome), (Status::Interrupted, Status::Ok), "{records:?}");
    assert!(first.error.as_deref().unwrap().contains("lease lapsed before fn was called"), "{first:?}");
    let fence = |r: &Record| r.fence.as_ref().unwrap().parse::<i64>().unwrap();
    assert!(fence(second) > fence(first));
}

#[tokio::test]
async fn bad_input_is_refused_with_a_coded_error_and_nothing_stored() {
    let (_server, url) = redis_url();
    let admin = locker(&url, "admin");
    let id = unique_key("bad");
    for (id, spec) in [
        (id.as_str(), json!({ "handler": "h" })),
        (&id, json!({ "handler": "h", "cron": "* * * * *", "at": now() + 1000 })),
        (&id, json!({ "handler": "h", "every": 500 })),
        (&id, json!({ "handler": "h", "at": now() - 3_600_000 })),
        (&id, json!({ "handler": "h", "every": 5000, "data": "x".repeat(9000) })),
        (&id, json!({ "handler": "h", "every": 5000, "retires": 3 })),
        (&id, json!({ "handler": "h", "cron": "0 8 * * *", "timezone": "Mars/Olympus" })),
        ("", json!({ "handler": "h", "every": 5000 })),
        (&"x".repeat(600), json!({ "handler": "h", "every": 5000 })),
    ] {
        let error = upsert(&admin, id, spec.clone()).await.unwrap_err();
        assert_eq!(error.code(), "ERR_SNATCH_INVALID_ARG", "{spec}: {error}");
    }
    assert_eq!(get(&admin, &id).await, Value::Null, "nothing stored");
    let listed: Value =
        serde_json::from_str(&snatch_core::list_stored(&admin, None, None, 100, None).await.unwrap()).unwrap();
    assert_eq!(listed, json!({ "schedules": [], "cursor": null }));
    // Redlock: refused, clearly.
    let (_b, url_b) = redis_url();
    let (_c, url_c) = redis_url();
    let redlock =
        Locker::new(LockerConfig { urls: vec![url.clone(), url_b, url_c], ..LockerConfig::default() }).unwrap();
    let error = upsert(&redlock, &id, json!({ "handler": "h", "every": 5000 })).await.unwrap_err();
    assert!(error.to_string().contains("Redlock"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_runs_stored_schedules_in_one_process_and_lists_them_in_pages() {
    let url = format!("memory://{}", unique_key("stored"));
    let admin = locker(&url, "admin");
    let handler = unique_key("mem");
    for n in 0..25 {
        let id = format!("{handler}:{n:02}");
        upsert(&admin, &id, json!({ "handler": handler, "cron": "0 8 * * *", "timezone": "Asia/Tokyo" }))
            .await
            .unwrap();
    }
    upsert(&admin, "other", json!({ "handler": "other", "every": 60_000 })).await.unwrap();
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let page = snatch_core::list_stored(&admin, Some(&handler), None, 10, cursor.as_deref()).await.unwrap();
        let page: Value = serde_json::from_str(&page).unwrap();
        ids.extend(page["schedules"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap().to_owned()));
        pages += 1;
        match page["cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    ids.sort();
    assert_eq!(ids.len(), 25, "{ids:?}");
    assert!(pages >= 3);
    let all: Value =
        serde_json::from_str(&snatch_core::list_stored(&admin, None, Some("other"), 100, None).await.unwrap()).unwrap();
    assert_eq!(all["schedules"].as_array().unwrap().len(), 1, "{all}");
    // One occurrence, soon, runs here.
    let id = format!("{handler}:soon");
    upsert(&admin, &id, json!({ "handler": handler, "at": now() + 200, "data": { "a": 1 } })).await.unwrap();
    let runs: Runs = Arc::default();
    let mut caller = Caller::new(&admin);
    let handling = caller.handle(&handler, Some(2)).unwrap();
    let waiting = runs.clone();
    let until = async {
        while waiting.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        handling.stop().await;
    };
    tokio::time::timeout(Duration::from_secs(20), caller.serve(recorder(0, &runs), until)).await.unwrap();
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].0.stored.as_ref().unwrap().id, id);
}
