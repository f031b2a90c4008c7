//! Direct calls (commands the caller carries on a socket of its own) against a real redis-server.

mod support;

use redis::Commands;
use snatch_core::protocol::direct::commands::{DirectCall, DirectCommand};
use snatch_core::protocol::direct::handshake::DIRECT_CLIENT_NAME;
use snatch_core::protocol::direct::session::{DirectSession, NoReply};
use snatch_core::protocol::direct::target::DirectTarget;
use snatch_core::protocol::keys::CLOCK_FLOOR;
use snatch_core::protocol::offers::Offers;
use snatch_core::protocol::resp::Reply;
use snatch_core::{
    open_direct_socket, AcquireSettled, DirectAcquire, DirectRelease, DirectStream, Holder, Lease, LeaseState,
    LockOptions, Locker, LockerConfig, ReleaseSettled,
};
use std::io::ErrorKind;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{compare_and_delete_of, held_by, inspect, redis_url, unique_key, RedisServer};

/// A locker on `urls` with a prefix of its own: its locks' fence counter is new, and no other test counts it up.
fn locker(urls: &[&str]) -> Locker {
    let urls = urls.iter().map(|u| u.to_string()).collect();
    Locker::new(LockerConfig { urls, prefix: format!("{}:", unique_key("direct")), ..LockerConfig::default() }).unwrap()
}

/// The Redis name of `locker`'s lock of `key`.
fn lock_key(locker: &Locker, key: &str) -> String {
    format!("{}{key}", locker.config().prefix)
}

/// The Redis name of the fence counter of `locker`'s locks (its prefix's).
fn counter_key(locker: &Locker) -> String {
    format!("{{{}}}:fence", locker.config().prefix)
}

/// A direct call as this test keeps it until its reply.
enum Call {
    Acquire(Box<DirectAcquire>),
    Release(DirectRelease),
}

impl DirectCall for Call {
    fn command(&self) -> DirectCommand<'_> {
        match self {
            Call::Acquire(attempt) => attempt.command(),
            Call::Release(release) => release.command(),
        }
    }

    fn encoded(&mut self, at: Instant, offers: Offers) {
        match self {
            Call::Acquire(attempt) => attempt.encoded(at),
            Call::Release(release) => release.encoded(offers),
        }
    }
}

/// One attempt on `key` by a direct call.
fn attempt_on(locker: &Locker, key: &str, options: &LockOptions) -> DirectAcquire {
    DirectAcquire::new(locker, key, options).unwrap().expect("a direct call")
}

/// The release of `lease`, held on `locker`, by a direct call.
fn release_of(locker: &Locker, lease: &Arc<Lease>) -> DirectRelease {
    DirectRelease::of(locker, lease).expect("released directly")
}

/// Sends `calls` on `socket` (non-blocking, as the binding has it) through a [`DirectSession`], as the caller of
/// direct calls does: each call with its reply, and what the commands were (see [`commands`]).
fn exchange(socket: &mut DirectStream, calls: Vec<Call>) -> (Vec<(Call, Reply)>, Vec<&'static str>) {
    let offers = socket.offers();
    exchange_in(socket, calls, usize::MAX, offers)
}

/// [`exchange`] as on a server that offers no commands of its own: releases by the release script.
fn exchange_by_scripts(socket: &mut DirectStream, calls: Vec<Call>) -> (Vec<(Call, Reply)>, Vec<&'static str>) {
    exchange_in(socket, calls, usize::MAX, Offers::default())
}

/// [`exchange`], reading at most `chunk` bytes at a time, on a server taken to offer `offers`.
fn exchange_in(
    socket: &mut DirectStream,
    calls: Vec<Call>,
    chunk: usize,
    offers: Offers,
) -> (Vec<(Call, Reply)>, Vec<&'static str>) {
    let count = calls.len();
    let mut session = DirectSession::new(Duration::from_secs(5), true, offers);
    for call in calls {
        assert!(session.push(call), "written at once while no replies are handed out");
    }
    session.encode(Instant::now);
    let written = commands(session.unsent());
    while !session.unsent().is_empty() || socket.wants_write() {
        match socket.write(session.unsent()) {
            Ok(n) => session.sent(n),
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => panic!("write failed: {e}"),
        }
        socket.send_pending().unwrap();
    }
    let mut replies = Vec::new();
    while replies.len() < count {
        let room = session.read_room();
        let len = room.len().min(chunk);
        match socket.read(&mut room[..len]) {
            Ok(n) => {
                assert!(n > 0, "Redis closed the socket");
                session.received(n);
                session.take_replies(&mut replies).unwrap();
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => panic!("read failed: {e}"),
        }
    }
    assert!(session.is_idle());
    assert_eq!(replies.len(), count);
    (replies.into_iter().map(|(call, reply)| (call, reply.expect("a reply"))).collect(), written)
}

/// The commands in `written` that tell calls apart, in order: `SET` for an acquisition, `PEXPIRE` after it when it
/// keeps the fence counter, `EVALSHA` for a script call, `DELIFEQ` or `DELEX` for the server's compare-and-delete.
fn commands(written: &[u8]) -> Vec<&'static str> {
    let names = ["SET", "PEXPIRE", "EVALSHA", "DELIFEQ", "DELEX"]
        .map(|name| (name, format!("\r\n${}\r\n{name}\r\n", name.len())));
    (0..written.len())
        .filter_map(|at| names.iter().find(|(_, line)| written[at..].starts_with(line.as_bytes())).map(|(n, _)| *n))
        .collect()
}

async fn socket(locker: &Locker) -> DirectStream {
    open_direct_socket(locker, &DirectTarget::Server)
        .await
        .unwrap()
        .expect("a direct socket (direct calls need Redis 7.0 or newer)")
}

type Acquired = AcquireSettled;

/// Settles a call that `exchange` answered, which must be an acquisition.
fn settle_acquire((call, reply): (Call, Reply)) -> Acquired {
    let Call::Acquire(attempt) = call else { panic!("not an acquisition") };
    let attempt = *attempt;
    attempt.settle(Ok(reply))
}

/// Settles a call that `exchange` answered, which must be a release.
fn settle_release((call, reply): (Call, Reply)) -> ReleaseSettled {
    let Call::Release(release) = call else { panic!("not a release") };
    release.settle(Ok(reply))
}

fn acquire(socket: &mut DirectStream, attempt: DirectAcquire) -> Acquired {
    let (mut replies, _) = exchange(socket, vec![Call::Acquire(Box::new(attempt))]);
    settle_acquire(replies.remove(0))
}

/// The lease an acquisition comes to, sending it again on `socket` when it is to go again (commands that took a key
/// whose counter is new: the acquire script raises the counter) and finishing it on the locker's connection when
/// it falls back there, as the binding does.
async fn lease_of(socket: &mut DirectStream, mut settled: Acquired) -> Option<Arc<Lease>> {
    loop {
        settled = match settled {
            AcquireSettled::Done(result) => return result.unwrap(),
            AcquireSettled::Fallback(attempt) => return attempt.fallback().await.unwrap(),
            AcquireSettled::Resend(attempt) => acquire(socket, attempt),
        }
    }
}

/// The lease `attempt` comes to on `socket` (see [`lease_of`]).
async fn take(socket: &mut DirectStream, attempt: DirectAcquire) -> Option<Arc<Lease>> {
    let settled = acquire(socket, attempt);
    lease_of(socket, settled).await
}

/// What `release` comes to on `socket`, sent again by script when the server's compare-and-delete leaves it to the
/// script, as the binding does.
fn release(socket: &mut DirectStream, release: DirectRelease) -> ReleaseSettled {
    let (mut replies, _) = exchange(socket, vec![Call::Release(release)]);
    match settle_release(replies.remove(0)) {
        ReleaseSettled::Resend(release) => self::release(socket, release),
        settled => settled,
    }
}

#[tokio::test]
async fn acquires_and_releases_over_the_callers_socket() {
    let (_server, url) = redis_url();
    let locker = locker(&[&url]);
    let mut socket = socket(&locker).await;
    let key = unique_key("direct");
    let options = LockOptions::default();

    let acquired = acquire(&mut socket, attempt_on(&locker, &key, &options));
    let lease = lease_of(&mut socket, acquired).await.expect("acquired");
    assert!(lease.fence() > 0);
    let held: String = inspect(&url).get(lock_key(&locker, &key)).unwrap();
    assert_eq!(held, held_by(lease.token()));

    let second = acquire(&mut socket, attempt_on(&locker, &key, &options));
    assert!(matches!(second, AcquireSettled::Done(Ok(None))), "{second:?}");

    let release = release_of(&locker, &lease);
    assert_eq!(lease.state(), LeaseState::Released);
    assert!(DirectRelease::of(&locker, &lease).is_none(), "a second release has nothing to send");
    assert!(matches!(self::release(&mut socket, release), ReleaseSettled::Done(Ok(true))));
    let exists: bool = inspect(&url).exists(lock_key(&locker, &key)).unwrap();
    assert!(!exists);
    locker.close().await;
}

#[tokio::test]
async fn permits_and_read_write_locks_are_taken_and_given_back_over_the_callers_socket_by_their_scripts() {
    let (_server, url) = redis_url();
    let locker = locker(&[&url]);
    let mut socket = socket(&locker).await;
    let options = LockOptions::default();
    // A semaphore of 2: two permits, then none, then one again once one is given back.
    let sem = unique_key("direct-sem");
    let held = || -> usize { inspect(&url).zcard(lock_key(&locker, &sem)).unwrap() };
    let permit = |locker: &Locker| DirectAcquire::held(locker, &sem, Holder::Permit(2), &options).unwrap().unwrap();
    let (mut replies, commands) = exchange(&mut socket, vec![Call::Acquire(Box::new(permit(&locker)))]);
    assert_eq!(commands, ["EVALSHA"], "a permit's acquisition is its script");
    let _zero = lease_of(&mut socket, settle_acquire(replies.remove(0))).await.expect("a permit");
    let first = take(&mut socket, permit(&locker)).await.expect("a permit");
    assert_eq!(held(), 2);
    assert!(matches!(acquire(&mut socket, permit(&locker)), AcquireSettled::Done(Ok(None))), "both permits held");
    let (mut replies, commands) = exchange(&mut socket, vec![Call::Release(release_of(&locker, &first))]);
    assert_eq!(commands, ["EVALSHA"]);
    let released = settle_release(replies.remove(0));
    assert!(matches!(released, ReleaseSettled::Done(Ok(true))), "{released:?}");
    assert_eq!(held(), 1);
    let again = take(&mut socket, permit(&locker)).await.expect("the permit given back");
    assert!(again.fence() > first.fence());
    // A read-write lock: a reader keeps the writer out; the writer, once the reader is gone, keeps readers out.
    let rw = unique_key("direct-rw");
    let as_holder = |holder| DirectAcquire::held(&locker, &rw, holder, &options).unwrap().unwrap();
    let reader = take(&mut socket, as_holder(Holder::Reader)).await.expect("a read lock");
    assert!(matches!(acquire(&mut socket, as_holder(Holder::Writer)), AcquireSettled::Done(Ok(None))));
    assert!(matches!(release(&mut socket, release_of(&locker, &reader)), ReleaseSettled::Done(Ok(true))));
    let writer = take(&mut socket, as_holder(Holder::Writer)).await.expect("the write lock");
    assert!(matches!(acquire(&mut socket, as_holder(Holder::Reader)), AcquireSettled::Done(Ok(None))));
    assert!(matches!(release(&mut socket, release_of(&locker, &writer)), ReleaseSettled::Done(Ok(true))));
    assert!(take(&mut socket, as_holder(Holder::Reader)).await.is_some());
    locker.close().await;
}

/// The server's clock in µs, by `TIME`.
fn server_micros(url: &str) -> i64 {
    let (seconds, micros): (i64, i64) = redis::cmd("TIME").query(&mut inspect(url)).unwrap();
    seconds * 1_000_000 + micros
}

#[tokio::test]
async fn commands_that_find_a_new_counter_go_again_by_the_acquire_script() {
    let (_server, url) = redis_url();
    let locker = locker(&[&url]);
    let mut socket = socket(&locker).await;
    let key = unique_key("new-counter");
    let options = LockOptions::default();
    let first = acquire(&mut socket, attempt_on(&locker, &key, &options));
    let AcquireSettled::Resend(attempt) = first else { panic!("a new counter needs the script: {first:?}") };
    let (mut replies, commands) = exchange(&mut socket, vec![Call::Acquire(Box::new(attempt))]);
    assert_eq!(commands, ["EVALSHA"]);
    let AcquireSettled::Done(Ok(Some(first))) = settle_acquire(replies.remove(0)) else {
        panic!("acquired by the script")
    };
    assert!(first.fence() >= CLOCK_FLOOR, "{}", first.fence());
    assert!(first.fence() <= server_micros(&url), "from the server's clock, not the future");
    let pttl: i64 = inspect(&url).pttl(counter_key(&locker)).unwrap();
    assert!(pttl > 0, "the counter expires (fenceTtl): {pttl}");
    assert!(first.release().await.unwrap());

    // Raised once: the next acquisition goes through directly, above it.
    let second = acquire(&mut socket, attempt_on(&locker, &key, &options));
    let AcquireSettled::Done(Ok(Some(second))) = second else { panic!("acquired directly: {second:?}") };
    assert!(second.fence() > first.fence());
    locker.close().await;
}

/// Direct acquisitions keep their fence counter (`PEXPIRE` by fenceTtl) only when their locker did not keep it within
/// the last tenth of fenceTtl (snatch-core's direct/kept.rs), so it lives 0.9 to 1 fenceTtl after the last
/// acquisition. A counter gone meanwhile (here deleted) is counted up from nothing without a TTL: that is a new
/// counter, which the acquire script raises to the server's clock and keeps, so fences rise across it.
#[tokio::test]
async fn a_counter_kept_lately_is_not_kept_again_and_one_gone_meanwhile_starts_again_from_the_clock() {
    let (_server, url) = redis_url();
    let locker = locker(&[&url]);
    let mut socket = socket(&locker).await;
    let key = unique_key("kept");
    let cycle = async |socket: &mut DirectStream| {
        let attempt = attempt_on(&locker, &key, &LockOptions::default());
        let (mut replies, commands) = exchange(socket, vec![Call::Acquire(Box::new(attempt))]);
        let lease = lease_of(socket, settle_acquire(replies.remove(0))).await.expect("free");
        assert!(lease.release().await.unwrap());
        (commands, lease.fence())
    };
    let (commands, first) = cycle(&mut socket).await;
    assert_eq!(commands, ["SET", "PEXPIRE"], "never kept");
    let (commands, second) = cycle(&mut socket).await;
    assert_eq!(commands, ["SET"], "kept lately");
    assert!(second > first);
    let pttl: i64 = inspect(&url).pttl(counter_key(&locker)).unwrap();
    assert!(pttl > 0, "kept by the first: {pttl}");

    let () = inspect(&url).del(counter_key(&locker)).unwrap();
    let (commands, third) = cycle(&mut socket).await;
    assert_eq!(commands, ["SET"], "kept lately, as far as the locker knows");
    assert!(third > second, "{third} after {second}");
    let pttl: i64 = inspect(&url).pttl(counter_key(&locker)).unwrap();
    assert!(pttl > 0, "kept by the acquire script, which the new counter took the acquisition to: {pttl}");
    locker.close().await;
}

#[tokio::test]
async fn an_acquire_script_the_server_lost_is_finished_on_the_lockers_connection() {
    let (_server, url) = redis_url();
    let locker = locker(&[&url]);
    let mut socket = socket(&locker).await;
    let first = acquire(&mut socket, attempt_on(&locker, &unique_key("unloaded"), &LockOptions::default()));
    let AcquireSettled::Resend(attempt) = first else { panic!("a new counter needs the script: {first:?}") };
    // The script unloaded (a server that restarted): NOSCRIPT, and the locker's connection loads it.
    let () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut inspect(&url)).unwrap();
    let (mut replies, commands) = exchange(&mut socket, vec![Call::Acquire(Box::new(attempt))]);
    assert_eq!(commands, ["EVALSHA"]);
    let AcquireSettled::Fallback(attempt) = settle_acquire(replies.remove(0)) else { panic!("NOSCRIPT falls back") };
    let lease = attempt.fallback().await.unwrap().expect("the key is ours: asked again with its token");
    assert!(lease.fence() >= CLOCK_FLOOR);
    locker.close().await;
}

/// Lockers that share a prefix share its fence counter, and may keep it for different times (`fenceTtl`). A counter
/// that one of them let expire soon after its last fence starts again from the server's clock (the acquire script's
/// `TIME`), above that fence, whichever locker starts it and however long it keeps counters.
#[tokio::test]
async fn fences_rise_across_a_counter_that_a_locker_with_a_shorter_fence_ttl_let_expire() {
    let (_server, url) = redis_url();
    let prefix = format!("{}:", unique_key("mixed-ttl"));
    let config = |fence_ttl| LockerConfig {
        urls: vec![url.clone()],
        prefix: prefix.clone(),
        fence_ttl,
        ..LockerConfig::default()
    };
    let short = Locker::new(config(Duration::from_millis(20))).unwrap();
    let long = Locker::new(config(LockerConfig::default().fence_ttl)).unwrap();
    let mut socket = socket(&long).await;
    let key = unique_key("mixed-ttl");
    let mut last = 0;
    for round in 0..3 {
        let lease = short.try_lock(&key, &LockOptions::default()).await.unwrap().expect("free");
        assert!(lease.fence() > last, "round {round}: the short locker's fence {} after {last}", lease.fence());
        last = lease.fence();
        assert!(lease.release().await.unwrap());
        // The short locker kept the counter 20 ms from its fence: wait until it is gone.
        let given_up = Instant::now() + Duration::from_secs(10);
        while inspect(&url).exists::<_, bool>(counter_key(&short)).unwrap() {
            assert!(Instant::now() < given_up, "round {round}: the counter did not expire");
            std::thread::sleep(Duration::from_millis(1));
        }
        let settled = acquire(&mut socket, attempt_on(&long, &key, &LockOptions::default()));
        let lease = lease_of(&mut socket, settled).await.expect("free");
        assert!(lease.fence() > last, "round {round}: the long locker's fence {} after {last}", lease.fence());
        last = lease.fence();
        assert!(lease.release().await.unwrap());
    }
    short.close().await;
    long.close().await;
}

#[tokio::test]
async fn consecutive_releases_share_one_command_and_each_call_gets_its_own_outcome() {
    let (_server, url) = redis_url();
    let locker = locker(&[&url]);
    let mut socket = socket(&locker).await;
    let options = LockOptions::default();
    let [first, wrong_type, third] = [0, 1, 2].map(|n| unique_key(&format!("batch{n}")));
    let () = inspect(&url).hset(lock_key(&locker, &wrong_type), "field", "value").unwrap();
    let attempt = |key: &str| Call::Acquire(Box::new(attempt_on(&locker, key, &options)));

    let (replies, commands) = exchange(&mut socket, vec![attempt(&first), attempt(&wrong_type), attempt(&third)]);
    assert_eq!(commands, ["SET", "PEXPIRE"].repeat(3), "the counter kept by each: none answered yet");
    let [first_lease, wrong, third_lease] = <[_; 3]>::try_from(replies).ok().unwrap().map(settle_acquire);
    let (first_lease, third_lease) =
        (lease_of(&mut socket, first_lease).await, lease_of(&mut socket, third_lease).await);
    let (Some(first_lease), Some(third_lease)) = (first_lease, third_lease) else {
        panic!("the two free keys are acquired")
    };
    let AcquireSettled::Done(Err(e)) = wrong else { panic!("a key of another type fails: {wrong:?}") };
    assert!(e.to_string().contains("WRONGTYPE"), "{e}");
    assert_eq!(e.code(), "ERR_SNATCH_REDIS");
    let held: String = inspect(&url).get(lock_key(&locker, &third)).unwrap();
    assert_eq!(held, held_by(third_lease.token()), "the lock after the failed one is taken all the same");

    // Two releases, then the first key again: a script call and the acquisition's commands, in order, so the key is
    // free when it is asked for; the counter was kept lately, so not again.
    let calls = vec![
        Call::Release(release_of(&locker, &first_lease)),
        Call::Release(release_of(&locker, &third_lease)),
        attempt(&first),
    ];
    let (mut replies, commands) = exchange_by_scripts(&mut socket, calls);
    assert_eq!(commands, ["EVALSHA", "SET"]);
    let again = settle_acquire(replies.pop().unwrap());
    let AcquireSettled::Done(Ok(Some(again))) = again else { panic!("acquired after its release: {again:?}") };
    assert!(again.fence() > first_lease.fence());
    for released in replies {
        assert!(matches!(settle_release(released), ReleaseSettled::Done(Ok(true))));
    }
    let exists: bool = inspect(&url).exists(lock_key(&locker, &third)).unwrap();
    assert!(!exists);
    locker.close().await;
}

#[tokio::test]
async fn releases_sharing_a_command_each_come_to_what_their_key_holds_and_a_waited_for_one_wakes_its_waiters() {
    let (_server, url) = redis_url();
    let locker = locker(&[&url]);
    let mut socket = socket(&locker).await;
    let states = ["ours", "waited for", "taken by another", "gone", "another type", "ours too"];
    let keys = states.map(|state| unique_key(&format!("group {state}")));
    let mut leases = Vec::new();
    for key in &keys {
        leases.push(take(&mut socket, attempt_on(&locker, key, &LockOptions::default())).await.expect("free"));
    }
    let mut redis = inspect(&url);
    let lock = |n: usize| lock_key(&locker, &keys[n]);
    let () = redis.set(lock(1), format!("{}*", held_by(leases[1].token()))).unwrap();
    let () = redis.set(lock(2), "another").unwrap();
    let () = redis.del(lock(3)).unwrap();
    let () = redis.del(lock(4)).unwrap();
    let () = redis.hset(lock(4), "field", "value").unwrap();
    let mut waiter = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
    let mut waiter = waiter.as_pubsub();
    waiter.subscribe(format!("{{{}}}:released", lock(1))).unwrap();

    let calls = leases.iter().map(|lease| Call::Release(release_of(&locker, lease))).collect();
    let (replies, commands) = exchange_by_scripts(&mut socket, calls);
    assert_eq!(commands, ["EVALSHA"], "one command for the six");
    let settled: Vec<_> = replies.into_iter().map(settle_release).collect();
    let outcomes: Vec<_> = settled
        .iter()
        .map(|settled| match settled {
            ReleaseSettled::Done(Ok(ours)) => format!("{ours}"),
            ReleaseSettled::Done(Err(e)) => format!("error {}", e.to_string().contains("WRONGTYPE")),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(outcomes, ["true", "true", "false", "false", "error true", "true"]);
    let exists = |redis: &mut redis::Connection, n: usize| -> bool { redis.exists(lock(n)).unwrap() };
    assert!(!exists(&mut redis, 0) && !exists(&mut redis, 1) && !exists(&mut redis, 5), "ours deleted");
    let other: String = redis.get(lock(2)).unwrap();
    assert_eq!(other, "another", "another owner's lock kept");
    let kind: String = redis::cmd("TYPE").arg(lock(4)).query(&mut redis).unwrap();
    assert_eq!(kind, "hash", "a key of another type kept");
    waiter.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let woken = waiter.get_message().expect("the waited-for lock's release wakes its waiters");
    assert_eq!(woken.get_channel_name(), format!("{{{}}}:released", lock(1)));
    locker.close().await;
}

#[tokio::test]
async fn acquisitions_need_no_script_and_a_release_the_server_cannot_run_goes_to_the_lockers_connection() {
    let (_server, url) = redis_url();
    let locker = locker(&[&url]);
    let mut socket = socket(&locker).await;
    let key = unique_key("noscript");
    let () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut inspect(&url)).unwrap();

    let acquired = acquire(&mut socket, attempt_on(&locker, &key, &LockOptions::default()));
    let lease = lease_of(&mut socket, acquired).await.expect("acquired without the release script");
    let (mut replies, _) = exchange_by_scripts(&mut socket, vec![Call::Release(release_of(&locker, &lease))]);
    let ReleaseSettled::Fallback(release) = settle_release(replies.remove(0)) else { panic!("expected a fallback") };
    assert!(release.fallback().await.unwrap());
    let exists: bool = inspect(&url).exists(lock_key(&locker, &key)).unwrap();
    assert!(!exists);
    locker.close().await;
}

#[tokio::test]
async fn a_group_the_server_cannot_run_sends_each_of_its_calls_back_to_the_lockers_connection() {
    let (_server, url) = redis_url();
    let locker = locker(&[&url]);
    let mut socket = socket(&locker).await;
    let keys = [0, 1, 2].map(|n| unique_key(&format!("group-noscript{n}")));
    let calls = keys.iter().map(|key| Call::Acquire(Box::new(attempt_on(&locker, key, &LockOptions::default()))));
    let (acquired, _) = exchange(&mut socket, calls.collect());
    let mut calls = Vec::new();
    for reply in acquired {
        let lease = lease_of(&mut socket, settle_acquire(reply)).await.expect("acquired");
        calls.push(Call::Release(release_of(&locker, &lease)));
    }
    let () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut inspect(&url)).unwrap();

    let (replies, commands) = exchange_by_scripts(&mut socket, calls);
    assert_eq!(commands, ["EVALSHA"]);
    for (key, reply) in keys.iter().zip(replies) {
        let ReleaseSettled::Fallback(release) = settle_release(reply) else { panic!("expected a fallback for {key}") };
        assert!(release.fallback().await.unwrap(), "{key} released on the locker's connection");
        let exists: bool = inspect(&url).exists(lock_key(&locker, key)).unwrap();
        assert!(!exists, "{key} released");
    }
    locker.close().await;
}

#[tokio::test]
async fn acquisitions_the_server_refuses_fail_each_with_the_reason() {
    let server = RedisServer::start();
    let url = server.url();
    let locker = locker(&[&url]);
    let mut socket = socket(&locker).await;
    let () = redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg(1).query(&mut inspect(&url)).unwrap();
    let calls =
        ["full0", "full1"].map(|key| Call::Acquire(Box::new(attempt_on(&locker, key, &LockOptions::default()))));

    let (replies, commands) = exchange(&mut socket, calls.into());
    assert_eq!(commands, ["SET", "PEXPIRE"].repeat(2));
    for reply in replies {
        let AcquireSettled::Done(Err(e)) = settle_acquire(reply) else { panic!("expected an error") };
        assert_eq!(e.code(), "ERR_SNATCH_REDIS");
        assert!(e.to_string().contains("OOM"), "the refusal: {e}");
    }
    locker.close().await;
}

#[tokio::test]
async fn the_socket_is_authenticated_and_on_the_urls_database() {
    let server = RedisServer::start();
    let () =
        redis::cmd("CONFIG").arg("SET").arg("requirepass").arg("s3cret").query(&mut inspect(&server.url())).unwrap();
    let url = format!("redis://:s3cret@127.0.0.1:{}/3", server.port);
    let authed = locker(&[&url]);
    let mut socket = socket(&authed).await;
    let key = unique_key("db3");
    let acquired = acquire(&mut socket, attempt_on(&authed, &key, &LockOptions::default()));
    assert!(lease_of(&mut socket, acquired).await.is_some());
    let exists: bool = inspect(&url).exists(lock_key(&authed, &key)).unwrap();
    assert!(exists, "the key is in database 3");
    let clients: String = redis::cmd("CLIENT").arg("LIST").query(&mut inspect(&url)).unwrap();
    assert!(clients.contains(&format!("name={DIRECT_CLIENT_NAME} ")), "{clients}");

    let wrong = locker(&[&format!("redis://:wrong@127.0.0.1:{}", server.port)]);
    let err = open_direct_socket(&wrong, &DirectTarget::Server).await.unwrap_err();
    assert_eq!(err.code(), "ERR_SNATCH_REDIS");
    authed.close().await;
}

#[tokio::test]
async fn a_server_that_refuses_the_probe_gets_no_direct_calls() {
    // Redis before 7.0 refuses `SET ... NX ... GET`; a server without MULTI refuses the probe the same way.
    let server = RedisServer::start_with(&["--rename-command", "MULTI", "multi-renamed-away"]);
    let locker = locker(&[&server.url()]);
    assert!(open_direct_socket(&locker, &DirectTarget::Server).await.unwrap().is_none());
    // Closed on our side at once; the server drops it from its list once it has read the close (within 2 s here).
    let mut clients = String::new();
    for _ in 0..100 {
        clients = redis::cmd("CLIENT").arg("LIST").query(&mut inspect(&server.url())).unwrap();
        if !clients.contains(DIRECT_CLIENT_NAME) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!clients.contains(DIRECT_CLIENT_NAME), "the probing socket is closed: {clients}");
    // One attempt on the locker's own connection, by the acquire script, works on it.
    let key = unique_key("no-multi");
    let lease = locker.try_lock(&key, &LockOptions::default()).await.unwrap().expect("acquired");
    assert!(lease.release().await.unwrap());
    locker.close().await;
}

#[tokio::test]
async fn the_probe_of_the_handshake_leaves_nothing_behind() {
    let (_server, url) = redis_url();
    let locker = locker(&[&url]);
    let mut socket = socket(&locker).await;
    let probe = lock_key(&locker, "redis-snatch-probe");
    let left: usize = inspect(&url).exists(&[probe.clone(), format!("{probe}:fence")]).unwrap();
    assert_eq!(left, 0, "the probe deleted its key and its fence counter");
    // The socket is out of the probe's transaction: an acquisition on it is answered at once.
    let acquired = acquire(&mut socket, attempt_on(&locker, &unique_key("after-probe"), &LockOptions::default()));
    assert!(lease_of(&mut socket, acquired).await.is_some());
    locker.close().await;
}

#[tokio::test]
async fn direct_calls_are_for_a_single_node_and_one_attempt() {
    let locker = locker(&["redis://127.0.0.1:1", "redis://127.0.0.1:2", "redis://127.0.0.1:3"]);
    assert!(open_direct_socket(&locker, &DirectTarget::Server).await.unwrap().is_none());
    assert!(DirectAcquire::new(&locker, "k", &LockOptions::default()).unwrap().is_none());
    assert_eq!(locker.direct_route(), None);

    let single = Locker::new(LockerConfig::default()).unwrap();
    assert_eq!(single.direct_route(), Some(snatch_core::DirectRoute::Server));
    let waiting = LockOptions { wait: std::time::Duration::from_millis(10), ..LockOptions::default() };
    assert!(DirectAcquire::new(&single, "k", &waiting).unwrap().is_none());
    let err = DirectAcquire::new(&single, "", &LockOptions::default()).err().unwrap();
    assert_eq!(err.code(), "ERR_SNATCH_INVALID_ARG");
    for config in [
        LockerConfig { direct: false, ..LockerConfig::default() },
        LockerConfig { wait_replicas: 1, ..LockerConfig::default() },
        LockerConfig { urls: vec!["memory://".into()], ..LockerConfig::default() },
        LockerConfig { urls: vec!["redis+unix:///tmp/redis.sock".into()], ..LockerConfig::default() },
    ] {
        assert_eq!(Locker::new(config.clone()).unwrap().direct_route(), None, "{config:?}");
    }
}

#[tokio::test]
async fn a_missing_reply_is_made_again_when_the_socket_dropped_and_fails_when_it_timed_out() {
    let locker = locker(&["redis://127.0.0.1:1"]);
    let attempt = || attempt_on(&locker, "k", &LockOptions::default());
    assert!(matches!(attempt().settle(Err(NoReply::Dropped)), AcquireSettled::Fallback(_)));
    let AcquireSettled::Done(Err(e)) = attempt().settle(Err(NoReply::TimedOut)) else { panic!("expected an error") };
    assert_eq!(e.code(), "ERR_SNATCH_REDIS");
    assert!(e.to_string().contains("timed out after 1000 ms"), "{e}");
}

#[tokio::test]
async fn replies_read_a_byte_at_a_time_are_paired_with_their_calls() {
    let (_server, url) = redis_url();
    let locker = locker(&[&url]);
    let mut socket = socket(&locker).await;
    let options = LockOptions::default();
    let [free, wrong_type] = [0, 1].map(|n| unique_key(&format!("split{n}")));
    let () = inspect(&url).hset(lock_key(&locker, &wrong_type), "field", "value").unwrap();
    let attempt = |key: &str| Call::Acquire(Box::new(attempt_on(&locker, key, &options)));
    // The first acquisition goes again by the script (a new counter), and keeps the counter: the next ones do not.
    let acquired = acquire(&mut socket, attempt_on(&locker, &free, &options));
    let first = lease_of(&mut socket, acquired).await.expect("acquired");

    let calls = vec![Call::Release(release_of(&locker, &first)), attempt(&free), attempt(&wrong_type), attempt(&free)];
    let offers = socket.offers();
    let (replies, commands) = exchange_in(&mut socket, calls, 1, offers);
    let release = offers.compare_and_delete.map_or("EVALSHA", |command| command.words("", "")[0]);
    assert_eq!(commands, [release, "SET", "SET", "SET"]);
    let [released, again, wrong, held] = <[_; 4]>::try_from(replies).ok().unwrap();
    assert!(matches!(settle_release(released), ReleaseSettled::Done(Ok(true))));
    let AcquireSettled::Done(Ok(Some(again))) = settle_acquire(again) else { panic!("acquired after its release") };
    assert!(again.fence() > first.fence());
    assert!(matches!(settle_acquire(wrong), AcquireSettled::Done(Err(_))), "a key of another type fails");
    assert!(matches!(settle_acquire(held), AcquireSettled::Done(Ok(None))), "held by the call before it");
    locker.close().await;
}

/// What an acquisition did to a key that was in one state before it: whether it got the lock (and a fence above the
/// counter's value before), the lock's holder and lease, the counter's expiry, or the error.
#[derive(Debug, PartialEq)]
enum Outcome {
    Acquired { holder_is_token: bool, fence_rose: bool, lease_set: bool, counter_expires: bool },
    Refused { holder_kept: bool },
    Failed { wrong_type: bool },
}

/// Puts `locker`'s `key` (and its fence counter) into `state`; returns the counter's value before.
fn prepare(url: &str, locker: &Locker, key: &str, state: &str) -> i64 {
    let (lock, fence) = (lock_key(locker, key), counter_key(locker));
    let mut redis = inspect(url);
    let counter = CLOCK_FLOOR + 1_000;
    let () = redis.pset_ex(&fence, counter, 60_000).unwrap();
    match state {
        "free" => {}
        "expired" => {
            let () = redis.pset_ex(&lock, "gone", 1).unwrap();
            std::thread::sleep(Duration::from_millis(5));
        }
        "held" => redis.pset_ex(&lock, "other", 10_000).unwrap(),
        "held and waited for" => redis.pset_ex(&lock, "other*", 10_000).unwrap(),
        "another type" => redis.hset(&lock, "f", "v").unwrap(),
        _ => unreachable!("{state}"),
    }
    counter
}

/// What `acquired` (for `key`, in the state [`prepare`] left it, with the counter at `before`) came to.
fn outcome(
    url: &str,
    locker: &Locker,
    key: &str,
    before: i64,
    acquired: Result<Option<Arc<Lease>>, snatch_core::SnatchError>,
) -> Outcome {
    let (lock, fence) = (lock_key(locker, key), counter_key(locker));
    let mut redis = inspect(url);
    match acquired {
        Err(e) => Outcome::Failed { wrong_type: e.to_string().contains("WRONGTYPE") },
        Ok(None) => {
            let holder: String = redis.get(&lock).unwrap();
            Outcome::Refused { holder_kept: holder.trim_end_matches('*') == "other" }
        }
        Ok(Some(lease)) => {
            let holder: String = redis.get(&lock).unwrap();
            let (lease_ms, counter_ms): (i64, i64) = (redis.pttl(&lock).unwrap(), redis.pttl(&fence).unwrap());
            Outcome::Acquired {
                holder_is_token: holder == held_by(lease.token()),
                fence_rose: lease.fence() > before,
                lease_set: lease_ms > 0 && lease_ms <= 30_000,
                counter_expires: counter_ms > 0,
            }
        }
    }
}

/// Taking a lock is defined once (protocol/acquisition.rs): the acquire script (the locker's connection) starts with
/// the commands direct acquisitions send. For every state a key can be in, both come to the same outcome, and both
/// count the fence counter up, whether they got the key or not; a key of another type stops the script at its first
/// command, while the direct commands run on.
#[tokio::test]
async fn direct_acquisitions_and_the_acquire_script_agree_on_every_state_of_a_key() {
    let (_server, url) = redis_url();
    let locker = locker(&[&url]);
    let mut socket = socket(&locker).await;
    let options = LockOptions::default();
    for state in ["free", "expired", "held", "held and waited for", "another type"] {
        let (scripted, direct) = (unique_key("agree-script"), unique_key("agree-direct"));
        let before = prepare(&url, &locker, &scripted, state);
        let by_script = outcome(&url, &locker, &scripted, before, locker.try_lock(&scripted, &options).await);
        let counter: i64 = inspect(&url).get(counter_key(&locker)).unwrap();
        let counted = if state == "another type" { before } else { before + 1 };
        assert_eq!(counter, counted, "{state}: the script counts the fence up whatever its SET did");
        let before = prepare(&url, &locker, &direct, state);
        let settled = match acquire(&mut socket, attempt_on(&locker, &direct, &options)) {
            AcquireSettled::Done(result) => result,
            other => panic!("{state}: an existing counter needs no script ({other:?})"),
        };
        let by_commands = outcome(&url, &locker, &direct, before, settled);
        assert_eq!(by_commands, by_script, "{state}");
        let counter: i64 = inspect(&url).get(counter_key(&locker)).unwrap();
        assert_eq!(counter, before + 1, "{state}: the direct commands count the fence up whatever their SET did");
    }
    locker.close().await;
}

#[tokio::test]
async fn a_plain_lease_is_released_by_the_servers_compare_and_delete_and_a_waited_for_one_by_the_script() {
    let (_server, url) = redis_url();
    let locker = locker(&[&url]);
    let mut socket = socket(&locker).await;
    let offered = compare_and_delete_of(&url);
    assert_eq!(socket.offers().compare_and_delete, offered, "the handshake learned what the server offers");
    let options = LockOptions::default();
    let own = offered.map_or("EVALSHA", |command| command.words("", "")[0]);

    // Held by its owner alone: one command, the server's own where it has it.
    let key = unique_key("offers-plain");
    let lease = take(&mut socket, attempt_on(&locker, &key, &options)).await.expect("acquired");
    let (mut replies, commands) = exchange(&mut socket, vec![Call::Release(release_of(&locker, &lease))]);
    assert_eq!(commands, [own]);
    assert!(matches!(settle_release(replies.remove(0)), ReleaseSettled::Done(Ok(true))));
    assert!(!inspect(&url).exists::<_, bool>(lock_key(&locker, &key)).unwrap());

    // Waited for (the key holds the waiter's mark): the script does it, and wakes the waiters.
    let key = unique_key("offers-waited");
    let lease = take(&mut socket, attempt_on(&locker, &key, &options)).await.expect("acquired");
    let marked = format!("{}*", held_by(lease.token()));
    let _: () = inspect(&url).set(lock_key(&locker, &key), &marked).unwrap();
    let (mut replies, commands) = exchange(&mut socket, vec![Call::Release(release_of(&locker, &lease))]);
    assert_eq!(commands, [own]);
    let settled = settle_release(replies.remove(0));
    let settled = if offered.is_some() {
        let ReleaseSettled::Resend(again) = settled else { panic!("sent again by script: {settled:?}") };
        let (mut replies, commands) = exchange(&mut socket, vec![Call::Release(again)]);
        assert_eq!(commands, ["EVALSHA"], "a release sent again goes by the script");
        settle_release(replies.remove(0))
    } else {
        settled
    };
    assert!(matches!(settled, ReleaseSettled::Done(Ok(true))), "{settled:?}");
    assert!(!inspect(&url).exists::<_, bool>(lock_key(&locker, &key)).unwrap());

    // Not ours any more: the script says so.
    let key = unique_key("offers-gone");
    let lease = take(&mut socket, attempt_on(&locker, &key, &options)).await.expect("acquired");
    let _: () = inspect(&url).set(lock_key(&locker, &key), "someone else").unwrap();
    assert!(matches!(release(&mut socket, release_of(&locker, &lease)), ReleaseSettled::Done(Ok(false))));
    let held: String = inspect(&url).get(lock_key(&locker, &key)).unwrap();
    assert_eq!(held, "someone else");
    locker.close().await;
}
