//! The server's own compare-and-delete and compare-and-set (snatch-protocol's offers.rs) on the locker's connection,
//! against a real redis-server: used for plain leases where the server offers them, the scripts otherwise; a refusal
//! (an older server, or an ACL without the command) is learned once per connection.

mod support;

use snatch_core::{LockOptions, Locker, LockerConfig};
use std::time::Duration;
use support::{compare_and_delete_of, inspect, options, unique_key, RedisServer};

/// How many times the server ran `command`, and how many of those it failed or refused (`INFO commandstats`).
fn counts(url: &str, command: &str) -> (u64, u64) {
    let info: String = redis::cmd("INFO").arg("commandstats").query(&mut inspect(url)).unwrap();
    let Some(line) = info.lines().find_map(|line| line.strip_prefix(&format!("cmdstat_{command}:"))) else {
        return (0, 0);
    };
    let field =
        |name: &str| -> u64 { line.split(',').find_map(|part| part.strip_prefix(name)?.parse().ok()).unwrap_or(0) };
    (field("calls="), field("failed_calls=") + field("rejected_calls="))
}

fn locker_at(url: &str) -> Locker {
    let prefix = format!("{}:", unique_key("offers"));
    Locker::new(LockerConfig { urls: vec![url.to_owned()], prefix, ..LockerConfig::default() }).unwrap()
}

/// Takes, extends and releases a plain lease (one attempt, no wait) `n` times on `locker`: each extended and released.
async fn cycles(locker: &Locker, n: usize) {
    for _ in 0..n {
        let lease = locker.try_lock(&unique_key("plain"), &options(10_000, 0)).await.unwrap().expect("free");
        assert!(lease.extend(Some(Duration::from_secs(20))).await.unwrap(), "extended");
        assert!(lease.remaining() > Duration::from_secs(10));
        assert!(lease.release().await.unwrap(), "released");
    }
}

#[tokio::test]
async fn plain_leases_are_extended_and_released_by_the_servers_commands_where_it_offers_them() {
    // A server of its own: no other test's commands in its counts.
    let server = RedisServer::start();
    let url = server.url();
    let locker = locker_at(&url);
    // The connection and its scripts, ready; what the server refuses, learned.
    cycles(&locker, 1).await;
    // Its compare-and-delete (DELIFEQ, DELEX), and with it SET's IFEQ (Valkey 9.0, Redis 8.4), or neither.
    let offered = compare_and_delete_of(&url);
    let name = offered.map_or("delifeq", |command| command.name());
    let (deleted, _) = counts(&url, name);
    let ((evalsha, _), (_, set_failed)) = (counts(&url, "evalsha"), counts(&url, "set"));
    cycles(&locker, 3).await;
    let (deleted_after, _) = counts(&url, name);
    let ((evalsha_after, _), (_, set_failed_after)) = (counts(&url, "evalsha"), counts(&url, "set"));
    if offered.is_some() {
        assert_eq!(deleted_after - deleted, 3, "each release by {name}");
        assert_eq!(evalsha_after - evalsha, 3, "the acquisitions alone by script");
    } else {
        assert_eq!(deleted_after, 0);
        assert_eq!(evalsha_after - evalsha, 9, "acquisitions, extensions and releases by script");
    }
    // An older server refuses SET's IFEQ as a syntax error (a failed SET): learned on the first cycle.
    assert_eq!(set_failed_after, set_failed, "a refusal is learned once");

    // A lease of a caller that waited goes to the scripts at once.
    let lease = locker.lock(&unique_key("waited"), &options(10_000, 1_000)).await.unwrap();
    assert!(lease.extend(None).await.unwrap());
    assert!(lease.release().await.unwrap());
    assert_eq!(counts(&url, name).0, deleted_after);
    locker.close().await;
}

#[tokio::test]
async fn a_user_whose_acl_denies_the_command_gets_the_script_after_one_refusal() {
    let server = RedisServer::start();
    let url = server.url();
    let Some(offered) = compare_and_delete_of(&url) else {
        eprintln!("skipped: the server offers no compare-and-delete (Valkey 9 and Redis 8.4 do)");
        return;
    };
    let user = unique_key("no-compare-and-delete").replace(|c: char| !c.is_ascii_alphanumeric(), "-");
    let denied = format!("-{}", offered.name());
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", &user, "on", ">secret", "~*", "&*", "+@all", &denied][..])
        .query(&mut inspect(&url))
        .unwrap();
    let limited = url.replacen("redis://", &format!("redis://{user}:secret@"), 1);
    let locker = locker_at(&limited);
    cycles(&locker, 3).await;
    let (calls, refusals) = counts(&url, offered.name());
    assert_eq!(calls, 0, "denied, never run");
    assert_eq!(refusals, 1, "one denial, remembered on the connection");
    locker.close().await;
}

#[tokio::test]
async fn a_lease_not_ours_any_more_is_neither_extended_nor_released_by_them() {
    let server = RedisServer::start();
    let url = server.url();
    let locker = locker_at(&url);
    let key = unique_key("taken");
    let lease = locker.try_lock(&key, &LockOptions::default()).await.unwrap().expect("free");
    let name = format!("{}{key}", locker.config().prefix);
    let _: () = redis::cmd("SET").arg(&[&name, "someone else"][..]).query(&mut inspect(&url)).unwrap();
    assert!(!lease.extend(None).await.unwrap(), "not ours: refused");
    assert!(!lease.release().await.unwrap(), "not ours: nothing released");
    let held: String = redis::cmd("GET").arg(&name).query(&mut inspect(&url)).unwrap();
    assert_eq!(held, "someone else");
    locker.close().await;
}

#[tokio::test]
async fn a_key_of_emoji_is_released_on_a_server_without_a_compare_and_delete_too() {
    // A server without the command quotes the first bytes of its arguments in its refusal; cut inside an emoji, they
    // are not UTF-8, which the redis crate cannot read (it dropped the connection, and the release failed).
    let server = RedisServer::start();
    let url = server.url();
    let locker = locker_at(&url);
    let key = "😀".repeat(16 * 1024);
    let lease = locker.try_lock(&key, &options(10_000, 0)).await.unwrap().expect("free");
    assert!(lease.extend(None).await.unwrap());
    assert!(lease.release().await.unwrap(), "released");
    let name = format!("{}{key}", locker.config().prefix);
    assert!(!redis::cmd("EXISTS").arg(&name).query::<bool>(&mut inspect(&url)).unwrap());
    locker.close().await;
}
