//! Redlock over 3 and 5 real redis-server processes: majority rule, cleanup, node failures, slow nodes.

mod support;

use redis::Commands;
use snatch_core::protocol::run::Outcome;
use snatch_core::{LeaseState, LockOptions, Locker, LockerConfig, SnatchError};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::caller::Caller;
use support::{held_by, inspect, unique_key, RedisServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn start(n: usize) -> Vec<RedisServer> {
    (0..n).map(|_| RedisServer::start()).collect()
}

fn redlock(urls: Vec<String>, command_timeout: Duration) -> Locker {
    Locker::new(LockerConfig { urls, command_timeout, ..LockerConfig::default() }).unwrap()
}

fn urls(servers: &[RedisServer]) -> Vec<String> {
    servers.iter().map(RedisServer::url).collect()
}

fn once() -> LockOptions {
    LockOptions::default()
}

#[tokio::test]
async fn every_subset_of_foreign_holders_n3_and_n5() {
    for n in [3usize, 5] {
        let servers = start(n);
        let locker = redlock(urls(&servers), Duration::from_secs(1));
        let mut cons: Vec<_> = servers.iter().map(|s| inspect(&s.url())).collect();
        for mask in 0u32..(1 << n) {
            let key = unique_key("mask");
            let lock_key = format!("snatch:{key}");
            for (i, con) in cons.iter_mut().enumerate() {
                if mask & (1 << i) != 0 {
                    let _: () = con.set_ex(&lock_key, "foreign", 60).unwrap();
                }
            }
            let free = n - mask.count_ones() as usize;
            let lease = locker.try_lock(&key, &once()).await.unwrap();
            assert_eq!(lease.is_some(), free > n / 2, "n={n} mask={mask:b}");
            for (i, con) in cons.iter_mut().enumerate() {
                let value: Option<String> = con.get(&lock_key).unwrap();
                let expected = if mask & (1 << i) != 0 {
                    Some("foreign".to_owned())
                } else {
                    lease.as_ref().map(|l| held_by(l.token()))
                };
                assert_eq!(value, expected, "n={n} mask={mask:b} node={i}");
            }
            if let Some(lease) = lease {
                assert!(lease.release().await.unwrap());
            }
        }
    }
}

#[tokio::test]
async fn fences_are_the_majority_maximum_and_increase() {
    let servers = start(3);
    let locker = redlock(urls(&servers), Duration::from_secs(1));
    let key = unique_key("fence");
    // Node 2 has seen more acquisitions than the others.
    let _: () = inspect(&servers[2].url()).set("{snatch:}:fence".to_owned(), 41).unwrap();
    let mut last = 0;
    for _ in 0..10 {
        let lease = locker.try_lock(&key, &once()).await.unwrap().unwrap();
        assert!(lease.fence() > last.max(41));
        last = lease.fence();
        lease.release().await.unwrap();
    }
}

#[tokio::test]
async fn one_node_down_before_and_during_a_held_lock() {
    let mut servers = start(3);
    servers[0].kill();
    let locker = redlock(urls(&servers), Duration::from_millis(300));
    let key = unique_key("onedown");
    let lease = locker.try_lock(&key, &once()).await.unwrap().expect("2 of 3 is a majority");
    assert!(lease.extend(None).await.unwrap());
    servers[1].kill();
    servers[0].restart();
    // Node 0 is back empty and refuses, node 2 confirms, node 1 is down: no majority either way, a quorum error.
    assert_eq!(lease.extend(None).await.unwrap_err().code(), "ERR_SNATCH_QUORUM");
    assert!(matches!(lease.state(), LeaseState::Held { .. }), "still valid until its lease runs out");
    // Once node 1 is back empty too, a majority refuses: the lease is lost.
    servers[1].restart();
    assert!(!lease.extend(None).await.unwrap());
    assert_eq!(lease.state(), LeaseState::Lost);

    let key = unique_key("during");
    let lease = locker.try_lock(&key, &LockOptions { auto_extend: true, ..once() }).await.unwrap().unwrap();
    servers[0].kill();
    servers[1].restart();
    let _ = locker.try_lock(&unique_key("reconnect"), &once()).await; // lets the manager see node 1's restart
                                                                      // Node 1 came back empty and node 0 is gone: only node 2 still holds the lock.
    assert!(!lease.release().await.unwrap());

    let key = unique_key("survive");
    servers[0].restart();
    let lease = locker.try_lock(&key, &once()).await.unwrap().unwrap();
    servers[2].kill();
    assert!(lease.extend(None).await.unwrap(), "nodes 0 and 1 still confirm");
    assert!(lease.release().await.unwrap());
}

#[tokio::test]
async fn two_of_three_down_is_a_quorum_error_in_bounded_time_and_the_task_does_not_run() {
    let mut servers = start(3);
    servers[0].kill();
    servers[1].kill();
    let timeout = Duration::from_millis(300);
    let locker = redlock(urls(&servers), timeout);
    let started = Instant::now();
    let run = Caller::new(&locker).run(&unique_key("quorum"), &once(), |_| async {}).await.unwrap();
    assert!(run.output.is_none(), "the task did not run");
    let Outcome::Failed(err) = run.end else { panic!("expected a failure: {run:?}") };
    let SnatchError::Quorum { failures } = &err else { panic!("expected a quorum error, got {err}") };
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(failures[0].contains(&servers[0].port.to_string()), "{failures:?}");
    assert_eq!(err.code(), "ERR_SNATCH_QUORUM");
    assert!(started.elapsed() < timeout * 2, "took {:?}", started.elapsed());
}

#[tokio::test]
async fn a_node_restarted_empty_does_not_break_exclusion_while_a_majority_holds() {
    let mut servers = start(3);
    let (a, b) = (redlock(urls(&servers), Duration::from_secs(1)), redlock(urls(&servers), Duration::from_secs(1)));
    let key = unique_key("restart");
    let held = a.try_lock(&key, &once()).await.unwrap().unwrap();
    servers[0].restart();
    assert!(b.try_lock(&key, &once()).await.unwrap().is_none(), "B only gets the restarted node");
    let value: Option<String> = inspect(&servers[0].url()).get(format!("snatch:{key}")).unwrap();
    assert_eq!(value, None, "B's token was removed from the restarted node");
    assert!(held.release().await.unwrap(), "A still owns a majority (nodes 1 and 2)");
}

/// A TCP proxy to `upstream` that delays every chunk in both directions by `latency`.
async fn slow_proxy(upstream: u16, latency: Duration) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let server = TcpStream::connect(("127.0.0.1", upstream)).await.unwrap();
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            tokio::spawn(pipe(cr, sw, latency));
            tokio::spawn(pipe(sr, cw, latency));
        }
    });
    port
}

async fn pipe(mut from: tokio::net::tcp::OwnedReadHalf, mut to: tokio::net::tcp::OwnedWriteHalf, latency: Duration) {
    let mut buf = vec![0u8; 16 * 1024];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0 {
            break;
        }
        tokio::time::sleep(latency).await;
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
}

#[tokio::test]
async fn slow_nodes_beyond_the_validity_fail_the_acquisition_and_are_cleaned_up() {
    let servers = start(3);
    let latency = Duration::from_millis(150);
    let slow = [slow_proxy(servers[1].port, latency).await, slow_proxy(servers[2].port, latency).await];
    let urls =
        vec![servers[0].url(), format!("redis://127.0.0.1:{}", slow[0]), format!("redis://127.0.0.1:{}", slow[1])];
    let locker = Arc::new(redlock(urls, Duration::from_secs(2)));
    let key = unique_key("slow");
    let opts = LockOptions { ttl: Some(Duration::from_millis(100)), ..once() };
    let err = locker.try_lock(&key, &opts).await.unwrap_err();
    assert_eq!(err.code(), "ERR_SNATCH_QUORUM", "{err}");
    for server in &servers {
        let exists: bool = inspect(&server.url()).exists(format!("snatch:{key}")).unwrap();
        assert!(!exists, "our token was left on {}", server.url());
    }
    // With a ttl the latency fits in, the same nodes grant the lock.
    let lease = locker.try_lock(&key, &LockOptions { ttl: Some(Duration::from_secs(5)), ..once() }).await.unwrap();
    assert!(lease.is_some());
}

#[tokio::test]
async fn split_votes_are_tried_again_even_for_one_attempt_and_a_majority_holder_is_not() {
    let servers = start(3);
    let locker = redlock(urls(&servers), Duration::from_secs(1));
    let mut cons: Vec<_> = servers.iter().map(|s| inspect(&s.url())).collect();
    let key = unique_key("split");
    let (lock_key, fence_key) = (format!("snatch:{key}"), "{snatch:}:fence".to_owned());
    let rounds = |con: &mut redis::Connection| con.get::<_, Option<i64>>(&fence_key).unwrap().unwrap_or(0);

    // Two other clients hold one node each: no one holds a majority, so the attempt goes on while that lasts and
    // then reports a quorum error rather than an ordinary "taken".
    let _: () = cons[1].set_ex(&lock_key, "x", 60).unwrap();
    let _: () = cons[2].set_ex(&lock_key, "y", 60).unwrap();
    match locker.try_lock(&key, &once()).await {
        Err(SnatchError::Quorum { failures }) => assert!(failures[0].contains("split"), "{failures:?}"),
        other => panic!("expected a quorum error, got {other:?}"),
    }
    let split_rounds = rounds(&mut cons[0]);
    assert!(split_rounds > 1, "the free node was tried {split_rounds} time(s)");
    assert_eq!(cons[0].get::<_, Option<String>>(&lock_key).unwrap(), None, "each round released the free node");

    // One client holds a majority: an ordinary "taken" after a single round.
    let _: () = cons[2].set_ex(&lock_key, "x", 60).unwrap();
    assert!(locker.try_lock(&key, &once()).await.unwrap().is_none());
    assert_eq!(rounds(&mut cons[0]), split_rounds + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_race_of_single_attempts_from_several_lockers_has_exactly_one_winner() {
    let servers = start(3);
    let lockers: Vec<_> = (0..4).map(|_| redlock(urls(&servers), Duration::from_secs(1))).collect();
    for race in 0..20 {
        let (key, options) = (unique_key("race"), once());
        let attempts = lockers.iter().flat_map(|l| (0..5).map(|_| l.try_lock(&key, &options)));
        let leases: Vec<_> = futures_util::future::join_all(attempts).await;
        let won: Vec<_> = leases.into_iter().filter_map(Result::unwrap).collect();
        assert_eq!(won.len(), 1, "race {race}");
        assert!(won[0].release().await.unwrap());
    }
}

#[tokio::test]
async fn fences_rise_whichever_majority_grants_them_however_far_apart_the_counters_were() {
    // One node far ahead (say, restarted empty: its counter starts from its clock), two behind.
    let mut servers = start(3);
    let locker = redlock(urls(&servers), Duration::from_secs(1));
    let key = unique_key("apart");
    let counter = "{snatch:}:fence".to_owned();
    let ahead = snatch_core::protocol::keys::CLOCK_FLOOR + 1_000_000_000;
    for (server, value) in servers.iter().zip([
        ahead,
        snatch_core::protocol::keys::CLOCK_FLOOR + 100,
        snatch_core::protocol::keys::CLOCK_FLOOR + 100,
    ]) {
        let _: () = inspect(&server.url()).set(&counter, value).unwrap();
    }
    let first = locker.try_lock(&key, &once()).await.unwrap().expect("all three up");
    assert_eq!(first.fence(), ahead + 1, "the highest of the majority");
    assert!(first.release().await.unwrap());
    for server in &servers[1..] {
        let raised: i64 = inspect(&server.url()).get(&counter).unwrap();
        assert_eq!(raised, ahead + 1, "the nodes behind were raised to the fence");
        let ttl: i64 = inspect(&server.url()).pttl(&counter).unwrap();
        assert!(ttl > 0, "and keep their ttl");
    }
    // The node ahead is gone: the other two still give a higher fence.
    servers[0].kill();
    let second = locker.try_lock(&key, &once()).await.unwrap().expect("a majority of two");
    assert!(second.fence() > first.fence(), "{} after {}", second.fence(), first.fence());
    assert!(second.release().await.unwrap());
}

#[tokio::test]
async fn with_a_node_down_a_waiting_call_waits_for_a_key_another_client_holds() {
    let mut servers = start(3);
    servers[0].kill();
    let waiter = redlock(urls(&servers), Duration::from_millis(300));
    let key = unique_key("contended");
    // Another client holds the key on one live node: with the third node failing, a round gets one vote of the two
    // it needs and cannot tell a key held (by a racing client) from a majority lost to the failing node.
    let lock_key = format!("snatch:{key}");
    let _: () = inspect(&servers[1].url()).set_ex(&lock_key, "racing-client", 60).unwrap();
    let err = waiter.try_lock(&key, &once()).await.unwrap_err();
    assert_eq!(err.code(), "ERR_SNATCH_QUORUM", "one attempt reports it");
    let freed = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let _: () = inspect(&servers[1].url()).del(&lock_key).unwrap();
    };
    let wait = LockOptions { wait: Duration::from_secs(3), ..once() };
    let (got, ()) = tokio::join!(waiter.lock(&key, &wait), freed);
    let got = got.expect("a waiting call waits, rather than fail, while a live node is held");
    assert!(got.release().await.unwrap());
}
