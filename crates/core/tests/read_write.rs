//! Read-write locks (many readers or one writer of a key) against a real redis-server.

mod support;

use redis::Commands;
use snatch_core::{Holder, LockOptions, Locker, LockerConfig};
use std::time::Duration;
use support::{inspect, locker, options, redis_url, unique_key};

#[tokio::test]
async fn readers_hold_at_once_a_writer_alone_and_fences_rise_across_both() {
    let (_server, url) = redis_url();
    let (a, b) = (locker(&url), locker(&url));
    let key = unique_key("rw");
    let first = a.try_acquire_as(&key, Holder::Reader, &options(10_000, 0)).await.unwrap().expect("a reader");
    let second = b.try_acquire_as(&key, Holder::Reader, &options(10_000, 0)).await.unwrap().expect("another");
    assert!(second.fence() > first.fence());
    assert!(b.try_acquire_as(&key, Holder::Writer, &options(10_000, 0)).await.unwrap().is_none(), "readers hold it");
    let readers: usize = inspect(&url).zcard(format!("snatch:{key}")).unwrap();
    assert_eq!(readers, 2);
    assert!(first.release().await.unwrap() && second.release().await.unwrap());
    let writer = b.try_acquire_as(&key, Holder::Writer, &options(10_000, 0)).await.unwrap().expect("the writer");
    assert!(writer.fence() > second.fence());
    let held: String = inspect(&url).get(format!("snatch:{key}:writer")).unwrap();
    assert!(held.starts_with(writer.token()));
    assert!(a.try_acquire_as(&key, Holder::Reader, &options(10_000, 0)).await.unwrap().is_none(), "a writer holds it");
    assert!(a.try_acquire_as(&key, Holder::Writer, &options(10_000, 0)).await.unwrap().is_none(), "one writer");
    assert!(writer.extend(None).await.unwrap());
    assert!(writer.release().await.unwrap());
    let after = a.try_acquire_as(&key, Holder::Reader, &options(10_000, 0)).await.unwrap().expect("free again");
    assert!(after.fence() > writer.fence());
    assert!(after.release().await.unwrap());
}

#[tokio::test]
async fn a_waiting_writer_keeps_new_readers_out_and_gets_in_when_the_readers_leave() {
    let (_server, url) = redis_url();
    let (a, b) = (locker(&url), locker(&url));
    let key = unique_key("rw-wait");
    let reader = a.try_acquire_as(&key, Holder::Reader, &options(10_000, 0)).await.unwrap().expect("a reader");
    let writing = {
        let (b, key) = (b.clone(), key.clone());
        tokio::spawn(async move { b.acquire_as(&key, Holder::Writer, &options(10_000, 10_000)).await })
    };
    // The writer's mark: the writer key holds '' while it waits.
    let mut con = inspect(&url);
    while con.get::<_, Option<String>>(format!("snatch:{key}:writer")).unwrap().is_none() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(a.try_acquire_as(&key, Holder::Reader, &options(10_000, 0)).await.unwrap().is_none(), "marked");
    assert!(reader.release().await.unwrap());
    let writer = writing.await.unwrap().expect("the writer, once the reader left");
    assert!(writer.fence() > reader.fence());
    assert!(writer.release().await.unwrap());
}

#[tokio::test]
async fn redlock_refuses_read_write_locks() {
    let servers = [support::RedisServer::start(), support::RedisServer::start(), support::RedisServer::start()];
    let urls = servers.iter().map(|s| s.url()).collect();
    let redlock = Locker::new(LockerConfig { urls, ..LockerConfig::default() }).unwrap();
    let err = redlock.try_acquire_as("k", Holder::Writer, &LockOptions::default()).await.unwrap_err();
    assert_eq!(err.code(), "ERR_SNATCH_INVALID_ARG");
    assert!(err.to_string().contains("read-write locks"), "{err}");
}
