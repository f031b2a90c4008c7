//! Stored schedules' test helpers: lockers named as replicas, and upserts read back as JSON.

use serde_json::Value;
use snatch_core::{Locker, LockerConfig};

/// A locker on `url` whose replica is named `instance`.
pub fn locker(url: &str, instance: &str) -> Locker {
    let config =
        LockerConfig { urls: vec![url.to_owned()], instance_id: instance.to_owned(), ..LockerConfig::default() };
    Locker::new(config).unwrap()
}

/// Upserts stored schedule `id` with `spec` on `locker`: what it is now.
pub async fn upsert(locker: &Locker, id: &str, spec: Value) -> Result<Value, snatch_core::SnatchError> {
    let info = snatch_core::upsert_stored(locker, id, &spec.to_string()).await?;
    Ok(serde_json::from_str(&info).unwrap())
}
