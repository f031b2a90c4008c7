//! Stored schedules and code schedules share one namespace, against a real redis-server: an upsert of a name whose
//! code schedule registered is refused, and a code schedule whose name a stored schedule has does not run.

mod support;

use serde_json::json;
use snatch_core::protocol::schedule::ScheduleKeys;
use snatch_core::{Cron, ScheduleOptions};
use std::time::Duration;
use support::caller::Caller;
use support::stored::{locker, upsert};
use support::{inspect, unique_key, RedisServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_ids_and_code_schedule_names_are_one_namespace() {
    let server = RedisServer::start();
    let url = server.url();
    let admin = locker(&url, "admin");
    // A code schedule's name: refused to upsertSchedule once its registration is in Redis. (Upserting before that, in
    // a loop, stored a schedule of the name now and then just before the code schedule's first registration, which
    // then rightly stopped it for good.)
    let code = unique_key("code");
    let code_locker = locker(&url, "code");
    let state = ScheduleKeys::new(&code_locker.config().prefix, &code, false).unwrap().state;
    let mut caller = Caller::new(&code_locker);
    let cron = Cron::new("0 0 0 1 1 *", "UTC").unwrap();
    let schedule = caller.schedule(&code, cron.clone(), ScheduleOptions::default()).unwrap();
    let mut redis = inspect(&url);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while redis::cmd("HGET").arg(&state).arg("cron").query::<Option<String>>(&mut redis).unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "the code schedule never registered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let error = upsert(&admin, &code, json!({ "handler": "h", "every": 5000 })).await.unwrap_err();
    assert!(error.to_string().contains("code schedule"), "{error}");
    schedule.stop().await;
    // A stored schedule's id: the code schedule says so on its events (its first registration) and does not run.
    let stored = unique_key("stored");
    upsert(&admin, &stored, json!({ "handler": "h", "every": 5000 })).await.unwrap();
    let schedule = caller.schedule(&stored, cron, ScheduleOptions::default()).unwrap();
    let told = caller.told().await;
    let said = format!("{told:?}");
    assert!(said.contains("stored schedule") && said.contains("ERR_SNATCH") || said.contains("namespace"), "{said}");
    schedule.stop().await;
}
