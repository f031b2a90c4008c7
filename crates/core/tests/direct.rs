//! Direct calls (commands the caller carries on a socket of its own) against a real redis-server.

mod support;

use redis::Commands;
use snatch_core::{
    parse_reply, DirectAcquire, LeaseState, LockOptions, Locker, LockerConfig, NoReply, Reply, Settled,
    DIRECT_CLIENT_NAME,
};
use std::io::{Read, Write};
use std::net::TcpStream;
use support::{inspect, redis_url, unique_key, RedisServer};

fn locker(urls: &[&str]) -> Locker {
    let urls = urls.iter().map(|u| u.to_string()).collect();
    Locker::new(LockerConfig { urls, ..LockerConfig::default() }).unwrap()
}

/// Sends `command` on `socket` and reads its reply, as the caller of direct calls would.
fn call(socket: &mut TcpStream, command: &[u8]) -> Reply {
    socket.write_all(command).unwrap();
    let mut buf = Vec::new();
    loop {
        if let Some((reply, _)) = parse_reply(&buf).unwrap() {
            return reply;
        }
        let mut chunk = [0u8; 256];
        let n = socket.read(&mut chunk).unwrap();
        assert!(n > 0, "Redis closed the socket");
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn socket(locker: &Locker) -> TcpStream {
    let socket = locker.direct_socket().await.unwrap().expect("a direct socket");
    socket.set_nonblocking(false).unwrap();
    socket
}

fn acquire(
    socket: &mut TcpStream,
    mut attempt: DirectAcquire,
) -> Settled<Option<std::sync::Arc<snatch_core::Lease>>, DirectAcquire> {
    let mut command = Vec::new();
    attempt.command(&mut command);
    attempt.settle(Ok(call(socket, &command)))
}

#[tokio::test]
async fn acquires_and_releases_over_the_callers_socket() {
    let (_server, url) = redis_url();
    let locker = locker(&[&url]);
    let mut socket = socket(&locker).await;
    let key = unique_key("direct");
    let options = LockOptions::default();

    let Settled::Done(Ok(Some(lease))) = acquire(&mut socket, locker.direct_acquire(&key, &options).unwrap().unwrap())
    else {
        panic!("not acquired")
    };
    assert!(lease.fence() > 0);
    let held: String = inspect(&url).get(format!("snatch:{key}")).unwrap();
    assert_eq!(held, lease.token());

    let second = acquire(&mut socket, locker.direct_acquire(&key, &options).unwrap().unwrap());
    assert!(matches!(second, Settled::Done(Ok(None))), "{second:?}");

    let release = lease.direct_release().expect("released directly");
    assert_eq!(lease.state(), LeaseState::Released);
    assert!(lease.direct_release().is_none(), "a second release has nothing to send");
    let mut command = Vec::new();
    release.command(&mut command);
    assert!(matches!(release.settle(Ok(call(&mut socket, &command))), Settled::Done(Ok(true))));
    let exists: bool = inspect(&url).exists(format!("snatch:{key}")).unwrap();
    assert!(!exists);
    locker.close().await;
}

#[tokio::test]
async fn a_server_without_the_scripts_sends_the_call_back_to_the_lockers_connection() {
    let (_server, url) = redis_url();
    let locker = locker(&[&url]);
    let mut socket = socket(&locker).await;
    let key = unique_key("noscript");
    let () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut inspect(&url)).unwrap();

    let Settled::Fallback(attempt) =
        acquire(&mut socket, locker.direct_acquire(&key, &LockOptions::default()).unwrap().unwrap())
    else {
        panic!("expected a fallback")
    };
    let lease = attempt.fallback().await.unwrap().expect("acquired on the locker's connection");
    let () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut inspect(&url)).unwrap();
    let Settled::Fallback(release) = ({
        let release = lease.direct_release().unwrap();
        let mut command = Vec::new();
        release.command(&mut command);
        release.settle(Ok(call(&mut socket, &command)))
    }) else {
        panic!("expected a fallback")
    };
    assert!(release.fallback().await.unwrap());
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
    let acquired = acquire(&mut socket, authed.direct_acquire(&key, &LockOptions::default()).unwrap().unwrap());
    assert!(matches!(acquired, Settled::Done(Ok(Some(_)))), "{acquired:?}");
    let exists: bool = inspect(&url).exists(format!("snatch:{key}")).unwrap();
    assert!(exists, "the key is in database 3");
    let clients: String = redis::cmd("CLIENT").arg("LIST").query(&mut inspect(&url)).unwrap();
    assert!(clients.contains(&format!("name={DIRECT_CLIENT_NAME} ")), "{clients}");

    let wrong = locker(&[&format!("redis://:wrong@127.0.0.1:{}", server.port)]);
    let err = wrong.direct_socket().await.unwrap_err();
    assert_eq!(err.code(), "ERR_SNATCH_REDIS");
    authed.close().await;
}

#[tokio::test]
async fn direct_calls_are_for_a_single_node_and_one_attempt() {
    let locker = locker(&["redis://127.0.0.1:1", "redis://127.0.0.1:2", "redis://127.0.0.1:3"]);
    assert!(locker.direct_socket().await.unwrap().is_none());
    assert!(locker.direct_acquire("k", &LockOptions::default()).unwrap().is_none());

    let single = Locker::new(LockerConfig::default()).unwrap();
    let waiting = LockOptions { wait: std::time::Duration::from_millis(10), ..LockOptions::default() };
    assert!(single.direct_acquire("k", &waiting).unwrap().is_none());
    assert_eq!(single.direct_acquire("", &LockOptions::default()).err().unwrap().code(), "ERR_SNATCH_INVALID_ARG");
}

#[tokio::test]
async fn a_missing_reply_is_made_again_when_the_socket_dropped_and_fails_when_it_timed_out() {
    let locker = locker(&["redis://127.0.0.1:1"]);
    let attempt = || locker.direct_acquire("k", &LockOptions::default()).unwrap().unwrap();
    assert!(matches!(attempt().settle(Err(NoReply::Dropped)), Settled::Fallback(_)));
    let Settled::Done(Err(e)) = attempt().settle(Err(NoReply::TimedOut)) else { panic!("expected an error") };
    assert_eq!(e.code(), "ERR_SNATCH_REDIS");
    assert!(e.to_string().contains("timed out after 1000 ms"), "{e}");
}
