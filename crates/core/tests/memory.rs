//! `memory://`: the lock and the semaphore on an in-process store, no Redis; and the same operations on a real
//! Redis and on a memory store come to the same outcomes.

mod support;

use snatch_core::protocol::keys::CLOCK_FLOOR;
use snatch_core::{Holder, Lease, LeaseState, LockOptions, Locker, LockerConfig};
use std::sync::Arc;
use std::time::Duration;
use support::{locker, options, redis_url, unique_key};

#[tokio::test]
async fn two_lockers_on_one_memory_url_share_its_locks_and_fences_rise() {
    let (a, b) = (locker("memory://shared"), locker("memory://shared"));
    let first = a.try_lock("k", &options(10_000, 0)).await.unwrap().expect("free");
    assert!(first.fence() >= CLOCK_FLOOR, "a new counter starts from the clock, as on Redis");
    assert!(b.try_lock("k", &options(10_000, 0)).await.unwrap().is_none(), "held by the other locker");
    assert!(first.release().await.unwrap());
    let second = b.try_lock("k", &options(10_000, 0)).await.unwrap().expect("released");
    assert!(second.fence() > first.fence());
    assert!(!first.release().await.unwrap());
    let other_store = locker("memory://other");
    assert!(other_store.try_lock("k", &options(10_000, 0)).await.unwrap().is_some(), "another URL, another store");
    for l in [a, b, other_store] {
        l.close().await;
    }
}

#[tokio::test]
async fn a_lease_expires_a_waiter_gets_the_key_and_a_force_released_holder_is_lost() {
    let locker = locker("memory://expiry");
    let short = locker.try_lock("k", &options(200, 0)).await.unwrap().expect("free");
    let waited = locker.lock("k", &options(10_000, 5_000)).await.expect("the lapsed lease's key");
    assert!(waited.fence() > short.fence(), "{} then {}, {:?}", short.fence(), waited.fence(), short.state());
    assert!(!short.release().await.unwrap(), "expired");
    let err = locker.lock("k", &options(1_000, 200)).await.unwrap_err();
    assert_eq!(err.code(), "ERR_SNATCH_TIMEOUT");

    let renewed = LockOptions { auto_extend: true, ..options(300, 0) };
    let held = locker.try_lock("renewed", &renewed).await.unwrap().expect("free");
    assert!(locker.force_release("renewed").await.unwrap());
    assert!(held.ended().await, "lost at its next renewal");
    assert_eq!(held.state(), LeaseState::Lost);
    locker.close().await;
}

#[tokio::test]
async fn semaphores_and_inspect_work_in_memory() {
    let locker = locker("memory://sem");
    let permits = [
        locker.try_acquire_as("s", Holder::Permit(2), &options(10_000, 0)).await.unwrap().expect("one"),
        locker.try_acquire_as("s", Holder::Permit(2), &options(10_000, 0)).await.unwrap().expect("two"),
    ];
    assert!(permits[1].fence() > permits[0].fence());
    assert!(locker.try_acquire_as("s", Holder::Permit(2), &options(10_000, 0)).await.unwrap().is_none());
    assert!(permits[0].release().await.unwrap());
    assert!(locker.try_acquire_as("s", Holder::Permit(2), &options(10_000, 0)).await.unwrap().is_some());

    let lock = locker.try_lock("i", &options(10_000, 0)).await.unwrap().expect("free");
    let inspected = locker.inspect("i").await.unwrap().expect("held");
    assert_eq!(inspected.fence, lock.fence());
    assert!(inspected.ttl_ms > 0 && inspected.ttl_ms <= 10_000);
    assert!(lock.release().await.unwrap());
    assert!(locker.inspect("i").await.unwrap().is_none());
    locker.close().await;
    assert_eq!(locker.try_lock("k", &LockOptions::default()).await.unwrap_err().code(), "ERR_SNATCH_CLOSED");
}

#[test]
fn memory_is_the_only_url_of_its_locker() {
    let config = LockerConfig {
        urls: vec!["memory://".into(), "redis://127.0.0.1:1".into(), "redis://127.0.0.1:2".into()],
        ..LockerConfig::default()
    };
    assert_eq!(Locker::new(config).err().unwrap().code(), "ERR_SNATCH_INVALID_ARG");
}

/// The outcomes of a fixed pseudo-random sequence of operations on a few keys (locks and semaphores of limit 2):
/// whether each acquisition got its key, each extension and release found it ours, and what inspect saw.
async fn outcomes(locker: &Locker, prefix: &str) -> Vec<String> {
    let mut seed: u64 = 0x5eed;
    let mut next = |n: u64| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut held: Vec<Arc<Lease>> = Vec::new();
    let mut seen = Vec::new();
    for _ in 0..400 {
        let key = format!("{prefix}{}", next(3));
        let outcome = match next(7) {
            0 | 1 => match locker.try_lock(&format!("{key}:lock"), &options(10_000, 0)).await.unwrap() {
                Some(lease) => {
                    held.push(lease);
                    "locked".to_owned()
                }
                None => "taken".to_owned(),
            },
            2 | 3 => match locker
                .try_acquire_as(&format!("{key}:sem"), Holder::Permit(2), &options(10_000, 0))
                .await
                .unwrap()
            {
                Some(lease) => {
                    held.push(lease);
                    "permit".to_owned()
                }
                None => "full".to_owned(),
            },
            4 if !held.is_empty() => {
                let lease = held.remove(next(held.len() as u64) as usize);
                format!("released {}", lease.release().await.unwrap())
            }
            5 if !held.is_empty() => {
                let lease = &held[next(held.len() as u64) as usize];
                format!("extended {}", lease.extend(Some(Duration::from_millis(5_000))).await.unwrap())
            }
            6 => {
                let force = next(4) == 0;
                let lock = format!("{key}:lock");
                if force {
                    format!("forced {}", locker.force_release(&lock).await.unwrap())
                } else {
                    format!("inspected {:?}", locker.inspect(&lock).await.unwrap().map(|i| i.holders))
                }
            }
            _ => "nothing".to_owned(),
        };
        seen.push(outcome);
    }
    seen
}

#[tokio::test]
async fn the_same_operations_come_to_the_same_outcomes_on_redis_and_in_memory() {
    let (_server, url) = redis_url();
    let (redis, memory) = (locker(&url), locker("memory://agree"));
    let prefix = unique_key("agree");
    let on_redis = outcomes(&redis, &prefix).await;
    let in_memory = outcomes(&memory, &prefix).await;
    assert!(on_redis.iter().any(|o| o == "taken") && on_redis.iter().any(|o| o == "full"), "{on_redis:?}");
    assert!(on_redis.iter().any(|o| o == "forced true"), "{on_redis:?}");
    assert_eq!(in_memory, on_redis);
    redis.close().await;
    memory.close().await;
}
