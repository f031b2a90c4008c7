//! Fair waiting (`LockOptions::fair`: waiters served in the order they came, in every process) against a real
//! redis-server, and on `memory://`.

mod support;

use redis::Commands;
use snatch_core::{Holder, Lease, LockOptions, Locker, LockerConfig, SnatchError};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{inspect, locker, options, redis_url, unique_key};
use tokio::sync::mpsc;

/// Options of a fair acquisition of a lease of `ttl_ms` that waits up to `wait_ms`.
fn fair(ttl_ms: u64, wait_ms: u64) -> LockOptions {
    LockOptions { fair: true, ..options(ttl_ms, wait_ms) }
}

/// How many fair waiters queue for `lock` (its queue, `{lock}:queue`).
fn queued(con: &mut redis::Connection, lock: &str) -> usize {
    con.zcard(format!("{{{lock}}}:queue")).unwrap()
}

/// Waits until `n` fair waiters queue for `lock`.
async fn until_queued(con: &mut redis::Connection, lock: &str, n: usize) {
    while queued(con, lock) != n {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// A fair acquisition of `key` by `locker` waiting up to `wait_ms`, started on its own task.
fn wait_fairly(locker: &Locker, key: &str, wait_ms: u64) -> tokio::task::JoinHandle<Result<Arc<Lease>, SnatchError>> {
    let (locker, key) = (locker.clone(), key.to_owned());
    tokio::spawn(async move { locker.lock(&key, &fair(10_000, wait_ms)).await })
}

/// Starts `count` fair waiters of `key` (`holder` of it) one after the other, each once the one before it queues,
/// spread over `lockers`; each sends its number once it holds the key, and releases it.
async fn start_in_order(
    lockers: &[Locker],
    key: &str,
    holder: Option<Holder>,
    count: usize,
    con: &mut redis::Connection,
    already: usize,
) -> mpsc::UnboundedReceiver<usize> {
    let (tx, rx) = mpsc::unbounded_channel();
    for n in 0..count {
        let (locker, name, tx) = (lockers[n % lockers.len()].clone(), key.to_owned(), tx.clone());
        tokio::spawn(async move {
            let lease = match holder {
                Some(holder) => locker.acquire_as(&name, holder, &fair(10_000, 30_000)).await,
                None => locker.lock(&name, &fair(10_000, 30_000)).await,
            }
            .expect("acquired in turn");
            tx.send(n).unwrap();
            assert!(lease.release().await.unwrap());
        });
        until_queued(con, &format!("snatch:{key}"), already + n + 1).await;
    }
    rx
}

#[tokio::test]
async fn fair_waiters_of_four_lockers_get_the_lock_in_the_order_they_came() {
    let (_server, url) = redis_url();
    let lockers: Vec<Locker> = (0..4).map(|_| locker(&url)).collect();
    let (key, mut con) = (unique_key("fair"), inspect(&url));
    let first = lockers[0].try_lock(&key, &options(10_000, 0)).await.unwrap().expect("free");
    let mut order = start_in_order(&lockers, &key, None, 12, &mut con, 0).await;
    assert!(first.release().await.unwrap());
    let mut got = Vec::new();
    while got.len() < 12 {
        got.push(order.recv().await.unwrap());
    }
    assert_eq!(got, (0..12).collect::<Vec<_>>());
    assert_eq!(queued(&mut con, &format!("snatch:{key}")), 0, "each left the queue as it took the lock");
    let places: bool = con.exists(format!("{{snatch:{key}}}:places")).unwrap();
    assert!(!places, "nor a place left behind");
}

#[tokio::test]
async fn a_fair_waiter_does_not_barge_past_the_queue_when_the_lock_is_free() {
    let (_server, url) = redis_url();
    let (a, b) = (locker(&url), locker(&url));
    let (key, mut con) = (unique_key("fair-barge"), inspect(&url));
    let held = a.try_lock(&key, &options(10_000, 0)).await.unwrap().expect("free");
    let mut order = start_in_order(std::slice::from_ref(&a), &key, None, 1, &mut con, 0).await;
    // A fair waiter that gives up at once does not get in ahead of the queue, and leaves it.
    let late = b.lock(&key, &fair(10_000, 0)).await.unwrap_err();
    assert_eq!(late.code(), "ERR_SNATCH_TIMEOUT");
    assert_eq!(queued(&mut con, &format!("snatch:{key}")), 1);
    assert!(held.release().await.unwrap());
    assert_eq!(order.recv().await, Some(0));
}

#[tokio::test]
async fn a_waiter_that_times_out_leaves_the_queue_at_once_and_the_next_one_is_served() {
    let (_server, url) = redis_url();
    let (a, b) = (locker(&url), locker(&url));
    let (key, mut con) = (unique_key("fair-timeout"), inspect(&url));
    let lock = format!("snatch:{key}");
    let held = a.try_lock(&key, &options(10_000, 0)).await.unwrap().expect("free");
    let impatient = wait_fairly(&b, &key, 300);
    until_queued(&mut con, &lock, 1).await;
    let mut order = start_in_order(std::slice::from_ref(&a), &key, None, 1, &mut con, 1).await;
    assert_eq!(impatient.await.unwrap().unwrap_err().code(), "ERR_SNATCH_TIMEOUT");
    assert_eq!(queued(&mut con, &lock), 1, "the one that timed out left");
    assert!(held.release().await.unwrap());
    assert_eq!(order.recv().await, Some(0));
}

#[tokio::test]
async fn a_crashed_waiter_first_in_the_queue_holds_the_others_up_only_until_its_place_lapses() {
    let (_server, url) = redis_url();
    let a = locker(&url);
    let (key, mut con) = (unique_key("fair-crash"), inspect(&url));
    let lock = format!("snatch:{key}");
    // A waiter of another process that died while first in the queue: its place lapses 300 ms from now.
    let (seconds, micros): (u64, u64) = redis::cmd("TIME").query(&mut con).unwrap();
    let now = seconds * 1000 + micros / 1000;
    let _: () = con.zadd(format!("{{{lock}}}:queue"), "0000000000000000:dead", 1).unwrap();
    let _: () = con.zadd(format!("{{{lock}}}:places"), "0000000000000000:dead", now + 300).unwrap();
    let started = Instant::now();
    let lease = a.lock(&key, &fair(10_000, 10_000)).await.expect("in turn once the dead one's place lapsed");
    assert!(started.elapsed() >= Duration::from_millis(200), "it waited for the dead waiter's place to lapse");
    assert_eq!(queued(&mut con, &lock), 0, "the dead waiter was dropped");
    assert!(lease.release().await.unwrap());
}

#[tokio::test]
async fn fair_waiters_of_a_semaphore_take_permits_in_order_and_together_when_several_are_free() {
    let (_server, url) = redis_url();
    let lockers: Vec<Locker> = (0..3).map(|_| locker(&url)).collect();
    let (key, mut con) = (unique_key("fair-sem"), inspect(&url));
    let held: Vec<_> = permits_of(&lockers[0], &key, 2).await;
    let mut order = start_in_order(&lockers, &key, Some(Holder::Permit(2)), 6, &mut con, 0).await;
    // Both permits given back at once: the first two waiters take them (the first wakes the second).
    for permit in held {
        assert!(permit.release().await.unwrap());
    }
    let mut got = Vec::new();
    while got.len() < 6 {
        got.push(order.recv().await.unwrap());
    }
    // Two run at once, so the pairs may report in either order; the pairs come in order.
    let pairs: Vec<Vec<usize>> = got
        .chunks(2)
        .map(|pair| {
            let mut pair = pair.to_vec();
            pair.sort_unstable();
            pair
        })
        .collect();
    assert_eq!(pairs, vec![vec![0, 1], vec![2, 3], vec![4, 5]], "{got:?}");
}

/// `count` permits of semaphore `key` of `count`, taken at once.
async fn permits_of(locker: &Locker, key: &str, count: u32) -> Vec<Arc<Lease>> {
    let mut permits = Vec::new();
    for _ in 0..count {
        let permit = locker.try_acquire_as(key, Holder::Permit(count), &options(10_000, 0)).await.unwrap();
        permits.push(permit.expect("a permit"));
    }
    permits
}

#[tokio::test]
async fn fair_waiting_works_on_memory() {
    let url = format!("memory://{}", unique_key("fair-memory"));
    let (a, b) = (locker(&url), locker(&url));
    let held = a.try_lock("k", &options(10_000, 0)).await.unwrap().expect("free");
    let waiting = wait_fairly(&b, "k", 10_000);
    let impatient = a.lock("k", &fair(10_000, 50)).await.unwrap_err();
    assert_eq!(impatient.code(), "ERR_SNATCH_TIMEOUT");
    assert!(held.release().await.unwrap());
    let lease = waiting.await.unwrap().expect("in turn");
    assert!(lease.fence() > held.fence());
    assert!(lease.release().await.unwrap());
}

#[tokio::test]
async fn fair_waiting_is_refused_on_redlock_and_for_read_write_locks() {
    let servers = [support::RedisServer::start(), support::RedisServer::start(), support::RedisServer::start()];
    let urls = servers.iter().map(|s| s.url()).collect();
    let redlock = Locker::new(LockerConfig { urls, ..LockerConfig::default() }).unwrap();
    let err = redlock.lock("k", &fair(10_000, 100)).await.unwrap_err();
    assert_eq!(err.code(), "ERR_SNATCH_INVALID_ARG");
    assert!(err.to_string().contains("not Redlock"), "{err}");
    let one = locker(&servers[0].url());
    let err = one.acquire_as("k", Holder::Writer, &fair(10_000, 100)).await.unwrap_err();
    assert_eq!(err.code(), "ERR_SNATCH_INVALID_ARG");
    assert!(err.to_string().contains("read-write"), "{err}");
}

#[tokio::test]
async fn a_waiter_whose_locker_closes_leaves_the_queue() {
    let (_server, url) = redis_url();
    let (a, b) = (locker(&url), locker(&url));
    let (key, mut con) = (unique_key("fair-close"), inspect(&url));
    let lock = format!("snatch:{key}");
    let held = a.try_lock(&key, &options(10_000, 0)).await.unwrap().expect("free");
    let waiting = wait_fairly(&b, &key, 30_000);
    until_queued(&mut con, &lock, 1).await;
    b.close().await;
    assert_eq!(waiting.await.unwrap().unwrap_err().code(), "ERR_SNATCH_CLOSED");
    assert_eq!(queued(&mut con, &lock), 0, "it gave its place up before the locker closed its connection");
    assert!(held.release().await.unwrap());
}
