//! The single-Redis lock against a real redis-server.

mod support;

use redis::Commands;
use snatch_core::protocol::keys::CLOCK_FLOOR;
use snatch_core::protocol::run::Outcome;
use snatch_core::{LeaseState, LockOptions, Locker, LockerConfig, SnatchError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::caller::Caller;
use support::{held_by, inspect, locker, redis_url, unique_key, RedisServer};

fn ttl(ms: u64) -> LockOptions {
    LockOptions { ttl: Some(Duration::from_millis(ms)), ..LockOptions::default() }
}

#[tokio::test]
async fn one_of_many_concurrent_attempts_wins() {
    let (_server, url) = redis_url();
    let locker = Arc::new(locker(&url));
    let key = unique_key("race");
    let ran = Arc::new(AtomicUsize::new(0));
    let attempts = (0..20).map(|_| {
        let (locker, key, ran) = (locker.clone(), key.clone(), ran.clone());
        tokio::spawn(async move {
            let run = Caller::new(&locker)
                .run(&key, &LockOptions::default(), |_| async {
                    ran.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                })
                .await
                .unwrap();
            matches!(run.end, Outcome::Ran { .. })
        })
    });
    let won = futures_util::future::join_all(attempts).await.into_iter().filter(|r| *r.as_ref().unwrap()).count();
    assert_eq!(won, 1);
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn fences_strictly_increase_and_release_deletes_the_key() {
    let (_server, url) = redis_url();
    let locker = locker(&url);
    let key = unique_key("fence");
    let mut last = 0;
    for _ in 0..100 {
        let lease = locker.try_lock(&key, &LockOptions::default()).await.unwrap().expect("free key");
        assert!(lease.fence() > last, "fence {} after {last}", lease.fence());
        last = lease.fence();
        assert_eq!(lease.token().len(), 32);
        assert!(lease.release().await.unwrap());
    }
    let exists: bool = inspect(&url).exists(format!("snatch:{key}")).unwrap();
    assert!(!exists);
}

#[tokio::test]
async fn a_held_key_is_not_acquired_and_the_holder_is_untouched() {
    let (_server, url) = redis_url();
    let (a, b) = (locker(&url), locker(&url));
    let key = unique_key("held");
    let held = a.try_lock(&key, &LockOptions::default()).await.unwrap().unwrap();
    assert!(b.try_lock(&key, &LockOptions::default()).await.unwrap().is_none());
    let owner: String = inspect(&url).get(format!("snatch:{key}")).unwrap();
    assert_eq!(owner, held_by(held.token()));
}

#[tokio::test]
async fn an_expired_holder_cannot_release_or_extend_the_next_owner() {
    let (_server, url) = redis_url();
    let locker = locker(&url);
    let key = unique_key("expired");
    let stale = locker.try_lock(&key, &ttl(50)).await.unwrap().unwrap();
    assert!(stale.ended().await, "the supervisor declares the lease lost when it runs out");
    let owner = loop {
        if let Some(lease) = locker.try_lock(&key, &LockOptions::default()).await.unwrap() {
            break lease;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert!(!stale.extend(None).await.unwrap());
    assert!(!stale.release().await.unwrap());
    let token: String = inspect(&url).get(format!("snatch:{key}")).unwrap();
    assert_eq!(token, held_by(owner.token()));
    assert!(owner.fence() > stale.fence());
}

#[tokio::test]
async fn the_lost_hook_is_called_once_on_loss_at_once_when_set_late_and_never_after_a_release() {
    let (_server, url) = redis_url();
    let locker = locker(&url);
    let key = unique_key("hook");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let lease = locker.try_lock(&key, &ttl(50)).await.unwrap().unwrap();
    let on_loss = tx.clone();
    lease.on_lost(move || on_loss.send("lost").unwrap());
    let first = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
    assert_eq!(first, Ok(Some("lost")), "called when the supervisor declares the lease lost");
    assert!(!lease.extend(None).await.unwrap());
    let late = tx.clone();
    lease.on_lost(move || late.send("late").unwrap());
    assert_eq!(rx.try_recv(), Ok("late"), "set after the loss: called at once");

    let released = locker.try_lock(&unique_key("hook-released"), &ttl(50)).await.unwrap().unwrap();
    let after_release = tx.clone();
    released.on_lost(move || after_release.send("released").unwrap());
    assert!(released.release().await.unwrap());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        rx.try_recv().is_err(),
        "no call once released, past the released lease's ttl, nor a second one for the loss"
    );
}

#[tokio::test]
async fn min_hold_keeps_the_key_for_the_rest_of_the_hold() {
    let (_server, url) = redis_url();
    let locker = locker(&url);
    let key = unique_key("minhold");
    let opts = LockOptions { min_hold: Duration::from_millis(400), ..LockOptions::default() };
    let lease = locker.try_lock(&key, &opts).await.unwrap().unwrap();
    assert!(lease.release().await.unwrap());
    let pttl: i64 = inspect(&url).pttl(format!("snatch:{key}")).unwrap();
    assert!(pttl > 0 && pttl <= 400, "pttl {pttl}");
    assert!(locker.try_lock(&key, &LockOptions::default()).await.unwrap().is_none());
    tokio::time::sleep(Duration::from_millis(pttl as u64 + 20)).await;
    assert!(locker.try_lock(&key, &LockOptions::default()).await.unwrap().is_some());
}

#[tokio::test]
async fn auto_extension_outlives_the_ttl_and_deletion_is_detected_as_lost() {
    let (_server, url) = redis_url();
    let locker = locker(&url);
    let key = unique_key("renew");
    let opts = LockOptions { auto_extend: true, ..ttl(150) };
    let lease = locker.try_lock(&key, &opts).await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(matches!(lease.state(), LeaseState::Held { .. }));
    assert!(locker.try_lock(&key, &LockOptions::default()).await.unwrap().is_none());
    let _: () = inspect(&url).del(format!("snatch:{key}")).unwrap();
    assert!(lease.ended().await);
    assert_eq!(lease.state(), LeaseState::Lost);
}

#[tokio::test]
async fn a_short_lease_taken_while_the_supervisor_sleeps_on_a_long_one_is_renewed_in_time() {
    let (_server, url) = redis_url();
    let locker = locker(&url);
    let auto = |ms| LockOptions { auto_extend: true, ..ttl(ms) };
    // The supervisor now sleeps until its idle tick (the long lease's renewal is 10 s away)...
    let long = locker.try_lock(&unique_key("long"), &auto(30_000)).await.unwrap().unwrap();
    tokio::task::yield_now().await;
    // ...and must be woken for this one: renewed every 50 ms, lost if not renewed within about 130 ms.
    let key = unique_key("short");
    let short = locker.try_lock(&key, &auto(150)).await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(matches!(short.state(), LeaseState::Held { .. }), "renewed past 4× its ttl: {:?}", short.state());
    let pttl: i64 = inspect(&url).pttl(format!("snatch:{key}")).unwrap();
    assert!(pttl > 0, "the key is still there, with a lease ({pttl} ms)");
    assert!(matches!(long.state(), LeaseState::Held { .. }));
}

#[tokio::test]
async fn reasking_with_the_same_token_refreshes_the_lease_with_a_higher_fence_and_another_token_hears_the_pttl() {
    let (_server, url) = redis_url();
    // A prefix of its own: no other test counts its fence counter up.
    let prefix = format!("{}:", unique_key("reenter"));
    let locker =
        Locker::new(LockerConfig { urls: vec![url.clone()], prefix: prefix.clone(), ..LockerConfig::default() })
            .unwrap();
    let key = "k";
    let lease = locker.try_lock(key, &ttl(10_000)).await.unwrap().unwrap();
    let mut con = inspect(&url);
    let acquire = |token: &str, con: &mut redis::Connection| -> i64 {
        redis::cmd("EVAL")
            .arg(snatch_core::protocol::scripts::ACQUIRE.source())
            .arg(2)
            .arg(format!("{prefix}{key}"))
            .arg(format!("{{{prefix}}}:fence"))
            .arg(token)
            .arg(60_000)
            .arg(600_000)
            .query(con)
            .unwrap()
    };
    // The acquire script, asked again with the holder's token (as a call made again after its reply was lost is),
    // keeps the lock ours, refreshes the lease and answers a fence above the first: every call counts the fence up.
    assert_eq!(acquire(&held_by(lease.token()), &mut con), lease.fence() + 1);
    let pttl: i64 = con.pttl(format!("{prefix}{key}")).unwrap();
    assert!(pttl > 10_000);
    let holder: String = con.get(format!("{prefix}{key}")).unwrap();
    assert_eq!(holder, held_by(lease.token()));
    // Another token is refused with -2 - the holder's pttl.
    let refused = acquire("someone-else", &mut con);
    assert!((-2 - 60_000..-2 - 10_000).contains(&refused), "refused with {refused}");
}

/// How many PUBLISH commands `url`'s server has run (scripts' included).
fn publishes(url: &str) -> u64 {
    let stats: String = redis::cmd("INFO").arg("commandstats").query(&mut inspect(url)).unwrap();
    stats
        .lines()
        .find_map(|line| line.strip_prefix("cmdstat_publish:calls="))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

#[tokio::test]
async fn a_release_wakes_waiters_only_when_someone_waits() {
    // Its own server: the test counts the server's PUBLISH commands.
    let server = RedisServer::start();
    let url = server.url();
    let locker = Arc::new(locker(&url));
    let key = unique_key("waited");
    let first = locker.try_lock(&key, &LockOptions::default()).await.unwrap().unwrap();
    assert!(first.release().await.unwrap());
    assert_eq!(publishes(&url), 0, "no one waited");

    let holder = locker.try_lock(&key, &LockOptions::default()).await.unwrap().unwrap();
    let waiter = {
        let (locker, key) = (locker.clone(), key.clone());
        tokio::spawn(async move {
            let wait = LockOptions { wait: Duration::from_secs(30), ..LockOptions::default() };
            locker.lock(&key, &wait).await
        })
    };
    // The waiter marks the lock once it is subscribed to its releases.
    let (marked, since) = (format!("{}*", held_by(holder.token())), Instant::now());
    while inspect(&url).get::<_, String>(format!("snatch:{key}")).unwrap() != marked {
        assert!(since.elapsed() < Duration::from_secs(10), "the waiter never marked the lock");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(holder.extend(None).await.unwrap(), "the holder still owns a marked lock");
    let pttl: i64 = inspect(&url).pttl(format!("snatch:{key}")).unwrap();
    assert!(pttl > 29_000, "extended: {pttl} ms");
    // The release script names the channel itself: it must be the one waiters subscribe to (keys.rs).
    let mut listener = inspect(&url);
    listener.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut listener = listener.as_pubsub();
    listener.subscribe(format!("{{snatch:{key}}}:released")).unwrap();
    assert!(holder.release().await.unwrap());
    let message = listener.get_message().expect("the release published on the waiters' channel");
    assert_eq!(message.get_channel_name(), format!("{{snatch:{key}}}:released"));
    let next = waiter.await.unwrap().unwrap();
    assert_eq!(publishes(&url), 1, "the release woke the waiter");
    assert!(next.fence() > holder.fence());
    assert!(next.release().await.unwrap());
    assert_eq!(publishes(&url), 1, "no one waits any more");
}

#[tokio::test]
async fn waiting_acquires_after_release_and_times_out_otherwise() {
    let (_server, url) = redis_url();
    let locker = Arc::new(locker(&url));
    let key = unique_key("wait");
    let held = locker.try_lock(&key, &LockOptions::default()).await.unwrap().unwrap();
    let wait = LockOptions { wait: Duration::from_millis(300), ..LockOptions::default() };
    let started = Instant::now();
    let err = locker.lock(&key, &wait).await.unwrap_err();
    assert_eq!(err.code(), "ERR_SNATCH_TIMEOUT");
    assert!(started.elapsed() >= Duration::from_millis(300));

    let waiter = {
        let (locker, key) = (locker.clone(), key.clone());
        tokio::spawn(async move {
            let wait = LockOptions { wait: Duration::from_secs(10), ..LockOptions::default() };
            locker.lock(&key, &wait).await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(held.release().await.unwrap());
    let next = waiter.await.unwrap().unwrap();
    assert!(next.fence() > held.fence());
}

#[tokio::test]
async fn an_unreachable_redis_fails_within_the_command_timeout_and_skips_the_task() {
    let mut server = RedisServer::start();
    let url = server.url();
    server.kill();
    let timeout = Duration::from_millis(300);
    let locker =
        Locker::new(LockerConfig { urls: vec![url], command_timeout: timeout, ..LockerConfig::default() }).unwrap();
    let started = Instant::now();
    let run = Caller::new(&locker).run("down", &LockOptions::default(), |_| async {}).await.unwrap();
    let Outcome::Failed(err) = run.end else { panic!("expected a failure: {run:?}") };
    assert!(matches!(err, SnatchError::Redis { .. }), "{err}");
    assert!(run.output.is_none(), "the task did not run");
    assert!(started.elapsed() < timeout * 2, "took {:?}", started.elapsed());
}

#[tokio::test]
async fn a_paused_redis_fails_within_the_command_timeout() {
    let server = RedisServer::start();
    let timeout = Duration::from_millis(200);
    let locker =
        Locker::new(LockerConfig { urls: vec![server.url()], command_timeout: timeout, ..LockerConfig::default() })
            .unwrap();
    assert!(locker.try_lock("p", &LockOptions::default()).await.unwrap().is_some());
    server.pause();
    let started = Instant::now();
    let err = locker.try_lock("q", &LockOptions::default()).await.unwrap_err();
    server.resume();
    assert_eq!(err.code(), "ERR_SNATCH_REDIS");
    assert!(started.elapsed() < timeout * 2, "took {:?}", started.elapsed());
}

#[tokio::test]
async fn an_acquisition_redis_grants_after_its_validity_is_an_error_and_is_given_back() {
    let server = RedisServer::start();
    let url = server.url();
    let config =
        LockerConfig { urls: vec![url.clone()], command_timeout: Duration::from_secs(5), ..LockerConfig::default() };
    let locker = Arc::new(Locker::new(config).unwrap());
    assert!(locker.try_lock("warm", &LockOptions::default()).await.unwrap().is_some()); // the connection is open
    server.pause();
    // ttl 1 s leaves about 988 ms of validity; Redis answers only after the 1.2 s pause, within the 5 s timeout, and
    // its key would then live 1 s more: only the release can have removed it at the check below.
    let attempt = tokio::spawn({
        let locker = locker.clone();
        async move { locker.try_lock("late", &ttl(1000)).await }
    });
    tokio::time::sleep(Duration::from_millis(1200)).await;
    server.resume();
    let err = attempt.await.unwrap().unwrap_err();
    assert_eq!(err.code(), "ERR_SNATCH_REDIS");
    assert!(err.to_string().ends_with("the lease's validity elapsed before Redis answered"), "{err}");
    locker.close().await; // waits for the background release of the late grant
    let exists: bool = inspect(&url).exists("snatch:late").unwrap();
    assert!(!exists, "the late grant was given back");
}

#[tokio::test]
async fn the_next_call_after_a_restart_works() {
    let mut server = RedisServer::start();
    let locker = locker(&server.url());
    assert!(locker.try_lock("before", &LockOptions::default()).await.unwrap().is_some());
    server.restart();
    let lease = locker.try_lock("after", &LockOptions::default()).await.unwrap().expect("fresh server");
    assert!(lease.fence() >= CLOCK_FLOOR, "a new counter starts from the server's clock: {}", lease.fence());
}

#[tokio::test]
async fn close_releases_held_locks_and_refuses_later_calls() {
    let (_server, url) = redis_url();
    let locker = locker(&url);
    let key = unique_key("close");
    let lease = locker.try_lock(&key, &LockOptions { auto_extend: true, ..LockOptions::default() }).await.unwrap();
    assert!(lease.is_some());
    locker.close().await;
    locker.close().await;
    let exists: bool = inspect(&url).exists(format!("snatch:{key}")).unwrap();
    assert!(!exists);
    let err = locker.try_lock(&key, &LockOptions::default()).await.unwrap_err();
    assert_eq!(err, SnatchError::Closed);
}

#[tokio::test]
async fn close_waits_for_the_runs_under_way() {
    let (_server, url) = redis_url();
    let locker = Arc::new(locker(&url));
    let key = unique_key("close-waits");
    let (started, mut has_started) = tokio::sync::mpsc::unbounded_channel();
    let (finish, finished) = tokio::sync::oneshot::channel::<()>();
    let run = {
        let (locker, key) = (locker.clone(), key.clone());
        tokio::spawn(async move {
            Caller::new(&locker)
                .run(&key, &LockOptions::default(), |_| async move {
                    started.send(()).unwrap();
                    finished.await.unwrap();
                })
                .await
        })
    };
    has_started.recv().await.unwrap();
    let close = tokio::spawn({
        let locker = locker.clone();
        async move { locker.close().await }
    });
    // Several turns of the runtime and some time for close to get past the wait if it did not wait.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!close.is_finished(), "close returned while a run was under way");
    let exists: bool = inspect(&url).exists(format!("snatch:{key}")).unwrap();
    assert!(exists, "the run's lock is still held");
    finish.send(()).unwrap();
    close.await.unwrap();
    assert!(matches!(run.await.unwrap().unwrap().end, Outcome::Ran { .. }), "the run ended normally");
    let exists: bool = inspect(&url).exists(format!("snatch:{key}")).unwrap();
    assert!(!exists, "released by the run");
}

#[tokio::test]
async fn bad_input_is_rejected_with_invalid_arg() {
    let (_server, url) = redis_url();
    let locker = locker(&url);
    for (key, opts) in [
        (String::new(), LockOptions::default()),
        ("x".repeat(64 * 1024 + 1), LockOptions::default()),
        ("k".to_owned(), ttl(0)),
        ("k".to_owned(), ttl(4)),
        ("k".to_owned(), LockOptions { wait: Duration::from_millis(1 << 31), ..LockOptions::default() }),
    ] {
        let err = locker.lock(&key, &opts).await.unwrap_err();
        assert_eq!(err.code(), "ERR_SNATCH_INVALID_ARG", "{err}");
    }
    for config in [
        LockerConfig { urls: vec!["http://x".into()], ..LockerConfig::default() },
        LockerConfig { urls: vec![url.clone(), url.clone()], ..LockerConfig::default() },
        LockerConfig { ttl: Duration::ZERO, ..LockerConfig::default() },
        LockerConfig { ttl: Duration::from_millis(4), ..LockerConfig::default() },
        LockerConfig { drift_factor: 0.7, ..LockerConfig::default() },
    ] {
        assert_eq!(Locker::new(config).err().unwrap().code(), "ERR_SNATCH_INVALID_ARG");
    }
    // 5 ms is the least ttl: accepted (whether a lease that short is won in time depends on the machine).
    match locker.try_lock("least-ttl", &ttl(5)).await {
        Ok(_) => {}
        Err(err) => assert_ne!(err.code(), "ERR_SNATCH_INVALID_ARG", "{err}"),
    }
}

/// Polls `PUBSUB NUMSUB channel` until it equals `want` (bounded: fails after 5 s).
async fn await_subscribers(url: &str, channel: &str, want: i64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, n): (String, i64) = redis::cmd("PUBSUB").arg("NUMSUB").arg(channel).query(&mut inspect(url)).unwrap();
        if n == want {
            return;
        }
        assert!(Instant::now() < deadline, "{channel} has {n} subscribers, expected {want}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn waiters_subscribe_to_release_notifications_and_unsubscribe_after() {
    let (_server, url) = redis_url();
    let locker = Arc::new(locker(&url));
    let key = unique_key("notify");
    let channel = format!("{{snatch:{key}}}:released");
    let held = locker.try_lock(&key, &LockOptions::default()).await.unwrap().unwrap();
    let waiter = {
        let (locker, key) = (locker.clone(), key.clone());
        tokio::spawn(async move {
            locker.lock(&key, &LockOptions { wait: Duration::from_secs(30), ..LockOptions::default() }).await
        })
    };
    await_subscribers(&url, &channel, 1).await;
    assert!(held.release().await.unwrap());
    let next = waiter.await.unwrap().unwrap();
    assert!(next.fence() > held.fence());
    await_subscribers(&url, &channel, 0).await;
}

#[tokio::test]
async fn a_waiter_acquires_after_an_expiry_that_sends_no_notification() {
    let (_server, url) = redis_url();
    let locker = locker(&url);
    let key = unique_key("expiry");
    let held = locker.try_lock(&key, &ttl(200)).await.unwrap().unwrap();
    let wait = LockOptions { wait: Duration::from_secs(10), ..LockOptions::default() };
    let next = locker.lock(&key, &wait).await.unwrap();
    assert!(next.fence() > held.fence());
}

#[tokio::test]
async fn close_closes_the_command_and_pubsub_connections() {
    let server = RedisServer::start();
    let url = server.url();
    let locker = Arc::new(locker(&url));
    let held = locker.try_lock("conns", &LockOptions::default()).await.unwrap().unwrap();
    let waiter = {
        let locker = locker.clone();
        tokio::spawn(async move {
            locker.lock("conns", &LockOptions { wait: Duration::from_secs(30), ..LockOptions::default() }).await
        })
    };
    await_subscribers(&url, "{snatch:conns}:released", 1).await;
    held.release().await.unwrap();
    waiter.await.unwrap().unwrap();
    locker.close().await;
    // Only the inspecting connection itself remains.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let info: String = redis::cmd("INFO").arg("clients").query(&mut inspect(&url)).unwrap();
        if info.contains("connected_clients:1\r") {
            break;
        }
        assert!(Instant::now() < deadline, "connections left open: {info}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn concurrent_calls_on_one_connection_each_get_their_own_reply() {
    let (_server, url) = redis_url();
    let locker = Arc::new(locker(&url));
    let keys: Vec<String> = (0..200).map(|i| unique_key(&format!("batch{i}"))).collect();
    // Every third key held by someone else, for a ttl of its own, so that a reply handed to the wrong caller shows
    // as a lock taken that was held, or refused that was free; fences (of one counter) are each a caller's own.
    let mut redis = inspect(&url);
    let held = |i: usize| i.is_multiple_of(3);
    for (i, key) in keys.iter().enumerate().filter(|(i, _)| held(*i)) {
        let _: () = redis.pset_ex(format!("snatch:{key}"), "someone-else", 60_000 + i as u64).unwrap();
    }
    let calls = keys.iter().cloned().enumerate().map(|(i, key)| {
        let locker = locker.clone();
        tokio::spawn(async move {
            let lease = locker.try_lock(&key, &LockOptions::default()).await.unwrap();
            let Some(lease) = lease else {
                assert!(held(i), "{key} is free, and was refused");
                return None;
            };
            assert!(!held(i), "{key} is held, and was taken");
            assert!(lease.fence() > CLOCK_FLOOR);
            let taken = locker.try_lock(&key, &LockOptions::default()).await.unwrap();
            assert!(taken.is_none(), "{key} acquired twice");
            let fence = lease.fence();
            assert!(lease.release().await.unwrap());
            Some(fence)
        })
    });
    let mut fences: Vec<i64> = Vec::new();
    for call in futures_util::future::join_all(calls).await {
        fences.extend(call.unwrap());
    }
    let taken = fences.len();
    fences.sort_unstable();
    fences.dedup();
    assert_eq!((taken, fences.len()), (133, 133), "each free key taken once, with a fence of its own");
}

#[tokio::test]
async fn calls_after_the_script_cache_was_flushed_load_the_scripts_again() {
    let (_server, url) = redis_url();
    let locker = Arc::new(locker(&url));
    assert!(locker.try_lock(&unique_key("warm"), &LockOptions::default()).await.unwrap().is_some());
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut inspect(&url)).unwrap();
    let calls = (0..20).map(|i| {
        let (locker, key) = (locker.clone(), unique_key(&format!("flushed{i}")));
        tokio::spawn(async move {
            Caller::new(&locker).run(&key, &LockOptions::default(), |task| async move { task.fence }).await
        })
    });
    for call in futures_util::future::join_all(calls).await {
        let run = call.unwrap().unwrap();
        let fence = run.output.expect("free key");
        assert!(fence >= CLOCK_FLOOR, "a new counter starts from the server's clock: {fence}");
        assert_eq!(run.end, Outcome::Ran { fence, lost: false });
    }
}

#[tokio::test]
async fn a_run_is_renewed_while_its_task_lasts_and_reports_a_loss() {
    let (_server, url) = redis_url();
    let locker = Arc::new(locker(&url));
    let opts = LockOptions { auto_extend: true, ..ttl(150) };
    let key = unique_key("run-renew");
    let (other, contender) = (locker.clone(), key.clone());
    let mut caller = Caller::new(&locker);
    let run = caller
        .run(&key, &opts, |_| async move {
            tokio::time::sleep(Duration::from_millis(600)).await;
            other.try_lock(&contender, &LockOptions::default()).await.unwrap().is_none()
        })
        .await
        .unwrap();
    assert_eq!(run.output, Some(true), "the key was not free again during the run");
    assert!(matches!(run.end, Outcome::Ran { lost: false, .. }), "{run:?}");
    assert!(!run.lost_told);

    let key = unique_key("run-lost");
    let deleted = format!("snatch:{key}");
    let run = caller
        .run(&key, &opts, |task| async move {
            let _: () = inspect(&url).del(&deleted).unwrap();
            task.lost().await;
        })
        .await
        .unwrap();
    assert!(run.lost_told, "the loss was told while fn ran");
    assert!(matches!(run.end, Outcome::Ran { lost: true, .. }), "{run:?}");
}

#[tokio::test]
async fn inspect_reports_the_lease_and_fence_and_force_release_deletes_whoever_holds_it() {
    let (_server, url) = redis_url();
    let locker = locker(&url);
    let key = unique_key("inspect");
    assert_eq!(locker.inspect(&key).await.unwrap(), None);
    let held = locker.try_lock(&key, &ttl(30_000)).await.unwrap().expect("acquired");
    let seen = locker.inspect(&key).await.unwrap().expect("held");
    assert_eq!((seen.fence, seen.holders), (held.fence(), 1));
    assert!(seen.ttl_ms > 0 && seen.ttl_ms <= 30_000, "{seen:?}");

    assert!(locker.force_release(&key).await.unwrap());
    assert_eq!(locker.inspect(&key).await.unwrap(), None);
    assert!(!locker.force_release(&key).await.unwrap(), "nothing left to delete");
    assert!(!held.extend(None).await.unwrap(), "the holder's extension is refused");
    assert_eq!(held.state(), LeaseState::Lost);
    assert_eq!(locker.inspect("").await.unwrap_err().code(), "ERR_SNATCH_INVALID_ARG");
    locker.close().await;
}

#[tokio::test]
async fn a_lock_handed_over_is_adopted_once_and_the_original_can_no_longer_release_it() {
    let (_server, url) = redis_url();
    let (original, adopter) = (locker(&url), locker(&url));
    let key = unique_key("handoff");
    let lease = original.try_lock(&key, &ttl(5000)).await.unwrap().expect("free key");
    let (token, fence) = (lease.token().to_owned(), lease.fence());
    assert!(lease.hand_over().is_some_and(|left| left > Duration::ZERO));
    assert_eq!(lease.hand_over(), None, "handed over once");
    let forged = "0".repeat(32);
    assert!(adopter.adopt(&key, &forged, fence, &ttl(5000)).await.unwrap().is_none());
    let adopted = adopter.adopt(&key, &token, fence, &ttl(5000)).await.unwrap().expect("the handle's key");
    assert_eq!(adopted.fence(), fence);
    assert_ne!(adopted.token(), token);
    assert!(!lease.release().await.unwrap());
    assert!(adopter.adopt(&key, &token, fence, &ttl(5000)).await.unwrap().is_none(), "a handle is adopted once");
    assert!(matches!(adopter.adopt(&key, "not hex", fence, &ttl(5000)).await, Err(SnatchError::InvalidArg { .. })));
    assert!(adopted.release().await.unwrap());
}

#[tokio::test]
async fn a_set_of_keys_is_held_whole_or_not_at_all_and_opposite_orders_never_deadlock() {
    let (_server, url) = redis_url();
    let locker = Arc::new(locker(&url));
    let [x, y, z] = ["x", "y", "z"].map(unique_key);
    let held = locker.try_lock(&y, &ttl(10_000)).await.unwrap().expect("free key");
    let wait = LockOptions { wait: Duration::from_millis(50), ..ttl(10_000) };
    let set = [z.clone(), y.clone(), x.clone()];
    match locker.lock_all(&set, &wait).await {
        Err(SnatchError::Timeout { key, .. }) => assert_eq!(key, y),
        other => panic!("expected a timeout naming {y}, got {other:?}"),
    }
    for free in [&x, &z] {
        assert!(locker.inspect(free).await.unwrap().is_none(), "{free} was given back");
    }
    assert!(held.release().await.unwrap());
    let leases = locker.lock_all(&set, &wait).await.unwrap();
    assert_eq!(leases.iter().map(|l| l.key()).collect::<Vec<_>>(), set.iter().map(String::as_str).collect::<Vec<_>>());
    for lease in leases {
        assert!(lease.release().await.unwrap());
    }
    // Two callers naming the same keys in opposite orders, again and again: both always get there.
    let patient = LockOptions { wait: Duration::from_secs(10), ..ttl(10_000) };
    let callers = [vec![x.clone(), y.clone()], vec![y.clone(), x.clone()]].map(|keys| {
        let (locker, patient) = (locker.clone(), patient.clone());
        tokio::spawn(async move {
            for _ in 0..30 {
                let leases = locker.lock_all(&keys, &patient).await.unwrap();
                tokio::time::sleep(Duration::from_millis(2)).await;
                futures_util::future::join_all(leases.iter().map(|l| l.release())).await;
            }
        })
    });
    for caller in callers {
        caller.await.unwrap();
    }
}
