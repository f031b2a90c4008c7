//! A stored schedule's state in Redis: its spec cut into fields of at most 64 bytes (scripts/stored_spec.lua), so that
//! on a default server the state stays a listpack; the spec read back whole, fewer fields left after a shorter one,
//! all gone with the schedule.

mod support;

use redis::Commands;
use serde_json::{json, Value};
use support::stored::{locker, upsert};
use support::{inspect, redis_url, unique_key};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spec_is_kept_in_fields_of_at_most_64_bytes_and_read_back_whole() {
    let (_server, url) = redis_url();
    let admin = locker(&url, "admin");
    let id = unique_key("layout");
    let state = format!("{{snatch:{id}}}:state");
    let mut redis = inspect(&url);
    let long = "é".repeat(150);
    let info = upsert(&admin, &id, json!({ "handler": "h", "every": 60_000, "data": { "text": long } })).await.unwrap();
    assert_eq!(info["data"], json!({ "text": long }));
    let fields: Vec<(String, Vec<u8>)> = redis.hgetall(&state).unwrap();
    assert!(fields.iter().all(|(_, value)| value.len() <= 64), "{fields:?}");
    assert!(fields.iter().any(|(name, _)| name == "spec5"), "a 300-byte data needs more than four fields");
    let encoding: String = redis::cmd("OBJECT").arg("ENCODING").arg(&state).query(&mut redis).unwrap();
    assert_eq!(encoding, "listpack");
    let got: Value = serde_json::from_str(&snatch_core::get_stored(&admin, &id).await.unwrap()).unwrap();
    assert_eq!(got["data"], json!({ "text": long }), "multi-byte characters cut between fields come back whole");
    // A shorter spec leaves none of the longer one's fields behind.
    upsert(&admin, &id, json!({ "handler": "h", "every": 60_000, "data": 1 })).await.unwrap();
    let names: Vec<String> = redis.hkeys(&state).unwrap();
    assert_eq!(names.iter().filter(|name| name.starts_with("spec")).count(), 1, "{names:?}");
    let got: Value = serde_json::from_str(&snatch_core::get_stored(&admin, &id).await.unwrap()).unwrap();
    assert_eq!(got["data"], json!(1));
    assert!(snatch_core::remove_stored(&admin, &id).await.unwrap());
    let exists: bool = redis.exists(&state).unwrap();
    assert!(!exists, "the state goes with the schedule");
    admin.close().await;
}
