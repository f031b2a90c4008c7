//! Semaphores (permits of a key that at most `limit` hold at once) against a real redis-server.

mod support;

use redis::Commands;
use snatch_core::{Holder, LeaseState, LockOptions, Locker, LockerConfig};
use support::{inspect, options, redis_url, unique_key};

fn locker(urls: &[&str]) -> Locker {
    let urls = urls.iter().map(|u| u.to_string()).collect();
    Locker::new(LockerConfig { urls, ..LockerConfig::default() }).unwrap()
}

#[tokio::test]
async fn at_most_limit_permits_are_held_each_with_its_own_rising_fence() {
    let (_server, url) = redis_url();
    let locker = locker(&[&url]);
    let key = unique_key("sem");
    let mut permits = Vec::new();
    for _ in 0..3 {
        permits.push(
            locker.try_acquire_as(&key, Holder::Permit(3), &options(10_000, 0)).await.unwrap().expect("a permit"),
        );
    }
    let fences: Vec<i64> = permits.iter().map(|p| p.fence()).collect();
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");
    assert!(locker.try_acquire_as(&key, Holder::Permit(3), &options(10_000, 0)).await.unwrap().is_none(), "all 3 held");

    assert!(permits.remove(0).release().await.unwrap());
    let fourth =
        locker.try_acquire_as(&key, Holder::Permit(3), &options(10_000, 0)).await.unwrap().expect("one was given back");
    assert!(fourth.fence() > fences[2]);
    let holders: usize = inspect(&url).zcard(format!("snatch:{key}")).unwrap();
    assert_eq!(holders, 3);
    locker.close().await;
}

#[tokio::test]
async fn a_permit_not_renewed_expires_on_the_servers_clock_and_a_waiter_gets_it() {
    let (_server, url) = redis_url();
    let locker = locker(&[&url]);
    let key = unique_key("sem-expiry");
    let held = locker.try_acquire_as(&key, Holder::Permit(1), &options(300, 0)).await.unwrap().expect("a permit");
    let waited = locker.acquire_as(&key, Holder::Permit(1), &options(10_000, 5_000)).await.expect("the lapsed permit");
    assert!(waited.fence() > held.fence());
    assert!(!held.release().await.unwrap(), "expired: no longer ours");
    assert!(matches!(waited.state(), LeaseState::Held { .. }));
    locker.close().await;
}

#[tokio::test]
async fn a_waiter_times_out_while_every_permit_is_renewed() {
    let (_server, url) = redis_url();
    let locker = locker(&[&url]);
    let key = unique_key("sem-timeout");
    let renewed = LockOptions { auto_extend: true, ..options(200, 0) };
    let _held = locker.try_acquire_as(&key, Holder::Permit(1), &renewed).await.unwrap().expect("a permit");
    let err = locker.acquire_as(&key, Holder::Permit(1), &options(1_000, 600)).await.unwrap_err();
    assert_eq!(err.code(), "ERR_SNATCH_TIMEOUT");
    locker.close().await;
}

#[tokio::test]
async fn a_permit_whose_semaphore_was_deleted_is_lost_at_its_next_renewal() {
    let (_server, url) = redis_url();
    let locker = locker(&[&url]);
    let key = unique_key("sem-lost");
    let renewed = LockOptions { auto_extend: true, ..options(300, 0) };
    let permit = locker.try_acquire_as(&key, Holder::Permit(2), &renewed).await.unwrap().expect("a permit");
    let () = inspect(&url).del(format!("snatch:{key}")).unwrap();
    assert!(permit.ended().await, "lost, not released");
    assert!(!permit.release().await.unwrap());
    locker.close().await;
}

#[tokio::test]
async fn a_bad_limit_and_redlock_are_refused() {
    let (_server, url) = redis_url();
    let single = locker(&[&url]);
    let err = single.try_acquire_as("k", Holder::Permit(0), &LockOptions::default()).await.unwrap_err();
    assert_eq!(err.code(), "ERR_SNATCH_INVALID_ARG");
    single.close().await;
    let redlock = locker(&[&url, &url, &url]);
    let err = redlock.try_acquire_as("k", Holder::Permit(2), &LockOptions::default()).await.unwrap_err();
    assert_eq!(err.code(), "ERR_SNATCH_INVALID_ARG");
    assert!(err.to_string().contains("Redlock"), "{err}");
    redlock.close().await;
}
