//! Every way fn runs under a lock is a run of the one lifecycle, driven by the runner as the binding drives it, against
//! a real redis-server: under a permit, a read or the write lock, a set of keys, for a shared result (the callers of a
//! process sharing one round), and a leader's terms, which observers hear of as they change.

mod support;

use snatch_core::protocol::lead::{LeaderKeys, Revoked};
use snatch_core::protocol::run::{Invoked, Outcome, Purpose};
use snatch_core::{
    campaign, observe, CampaignOptions, Holder, Input, Lease, LockOptions, Locker, LockerConfig, Reentering,
    SnatchError, Told, Turn,
};
use std::collections::HashSet;
use std::time::Duration;
use support::caller::Caller;
use support::{options, redis_url, unique_key};

fn locker(url: &str, instance: &str) -> Locker {
    let config =
        LockerConfig { urls: vec![url.to_owned()], instance_id: instance.to_owned(), ..LockerConfig::default() };
    Locker::new(config).unwrap()
}

/// Renewed, waiting up to `wait_ms`.
fn waiting(wait_ms: u64) -> LockOptions {
    LockOptions { auto_extend: true, ..options(10_000, wait_ms) }
}

#[tokio::test]
async fn a_permit_or_a_read_or_write_lock_is_a_run_called_once_held_and_ended_once_given_back() {
    let (_server, url) = redis_url();
    let locker = locker(&url, "a");
    let mut caller = Caller::new(&locker);
    for holder in [Holder::Permit(2), Holder::Reader, Holder::Writer] {
        let key = unique_key("held-as");
        let run = caller
            .run_by(
                |runner, id, out| runner.run_as(id, &key, holder, &waiting(0), out),
                |task| async move { task.fence },
            )
            .await;
        let run = run.unwrap();
        let fence = run.output.expect("fn was called");
        assert_eq!(run.end, Outcome::Ran { fence, lost: false }, "{holder:?}");
    }
    // A write lock held elsewhere: the run waits its `wait` and fails with a timeout, fn not called.
    let key = unique_key("held-as-busy");
    let held = locker.acquire_as(&key, Holder::Writer, &waiting(0)).await.unwrap();
    let run = caller
        .run_by(|runner, id, out| runner.run_as(id, &key, Holder::Writer, &waiting(100), out), |_| async {})
        .await;
    let run = run.unwrap();
    assert!(run.output.is_none());
    assert!(matches!(run.end, Outcome::Failed(SnatchError::Timeout { .. })), "{:?}", run.end);
    held.release().await.unwrap();
    locker.close().await;
}

#[tokio::test]
async fn a_set_s_run_calls_fn_with_every_key_s_fence_and_a_loss_of_any_lease_is_the_run_s() {
    let (_server, url) = redis_url();
    let locker = locker(&url, "a");
    let mut caller = Caller::new(&locker);
    let keys = vec![unique_key("set-b"), unique_key("set-a")];
    let run =
        caller.run_by(|runner, id, _| runner.run_all(id, keys.clone(), &waiting(0)), |task| async move { task.fence });
    let run = run.await.unwrap();
    assert_eq!(run.end, Outcome::Ran { fence: run.output.unwrap(), lost: false });
    // The call says every fence; a lease taken away is told as the run's loss.
    let id = 900;
    let mut out = snatch_core::Output::default();
    caller.runner().run_all(id, keys.clone(), &waiting(0)).unwrap();
    let told = caller.told().await;
    let Some((_, Outcome::Invoke { invoked: Invoked::Set(fences), fence })) =
        told.iter().find(|(of, _)| *of == id).cloned()
    else {
        panic!("{told:?}")
    };
    assert_eq!((fences.len(), fences[0]), (2, fence));
    assert!(locker.force_release(&keys[1]).await.unwrap());
    let lost = caller.told().await;
    assert!(lost.contains(&(id, Outcome::Lost { stalled: false })), "{lost:?}");
    caller.runner().task_done(id, None, &mut out);
    assert!(out.told.is_empty());
    assert_eq!(caller.told().await, vec![(id, Outcome::Ran { fence, lost: true })]);
    locker.close().await;
}

#[tokio::test]
async fn a_process_s_shared_callers_share_one_round_and_a_round_that_stores_nothing_passes_the_turn() {
    let (_server, url) = redis_url();
    let locker = locker(&url, "a");
    let mut caller = Caller::new(&locker);
    let key = unique_key("shared");
    let runner = caller.runner();
    for id in [1, 2, 3] {
        runner.run_shared(id, &key, &waiting(10_000), false).unwrap();
    }
    let told = caller.told().await;
    let [(1, Outcome::Invoke { fence, .. })] = told.as_slice() else {
        panic!("only the first takes the turn: {told:?}")
    };
    let fence = *fence;
    // Its fn's value is lost (nothing stored: say, its lease lapsed): the next caller takes a turn of its own.
    caller.runner().shared_done(1, None, Duration::from_secs(60));
    let mut told = caller.told().await;
    while !told.iter().any(|(id, _)| *id == 2) {
        told.extend(caller.told().await);
    }
    assert!(told.contains(&(1, Outcome::Ran { fence, lost: false })), "{told:?}");
    let Some((_, Outcome::Invoke { fence: second, .. })) = told.iter().find(|(id, _)| *id == 2).cloned() else {
        panic!("{told:?}")
    };
    assert!(second > fence);
    caller.runner().shared_done(2, Some((false, b"42".to_vec())), Duration::from_secs(60));
    let mut told = caller.told().await;
    while !told.iter().any(|(id, _)| *id == 3) {
        told.extend(caller.told().await);
    }
    assert!(told.contains(&(3, Outcome::Stored { error: false, bytes: b"42".to_vec() })), "{told:?}");
    // A later caller finds it stored, without a turn's lock.
    caller.runner().run_shared(4, &key, &waiting(0), false).unwrap();
    assert_eq!(caller.told().await, vec![(4, Outcome::Stored { error: false, bytes: b"42".to_vec() })]);
    locker.close().await;
}

#[tokio::test]
async fn a_waiter_of_a_round_times_out_within_its_own_wait() {
    let (_server, url) = redis_url();
    let locker = locker(&url, "a");
    let mut caller = Caller::new(&locker);
    let key = unique_key("shared-wait");
    caller.runner().run_shared(1, &key, &waiting(10_000), false).unwrap();
    caller.runner().run_shared(2, &key, &waiting(50), false).unwrap();
    let mut told = caller.told().await;
    while !told.iter().any(|(id, _)| *id == 2) {
        told.extend(caller.told().await);
    }
    let waited = told.iter().find(|(id, _)| *id == 2).map(|(_, outcome)| outcome.clone());
    assert!(matches!(waited, Some(Outcome::Failed(SnatchError::Timeout { .. }))), "{told:?}");
    assert!(matches!(told[0], (1, Outcome::Invoke { .. })), "{told:?}");
    caller.runner().shared_done(1, None, Duration::from_secs(1));
    locker.close().await;
}

#[tokio::test]
async fn one_campaign_leads_at_a_time_resign_hands_over_and_an_observer_hears_each_term() {
    let (_server, url) = redis_url();
    let name = unique_key("lead");
    let (one, two, watcher) = (locker(&url, "one"), locker(&url, "two"), locker(&url, "watcher"));
    let (mut a, mut b, mut w) = (Caller::new(&one), Caller::new(&two), Caller::new(&watcher));
    let retry = CampaignOptions { ttl: Some(Duration::from_millis(1000)), retry: Duration::from_millis(100) };
    let _observer = observe(&watcher, 7, &name, w.runner().post()).unwrap();
    let first = campaign(&one, 1, &name, retry.clone(), a.runner().post()).unwrap();
    let told = a.told().await;
    let [(term_run, Outcome::Invoke { fence: term, invoked: Invoked::Term(1) })] = told.as_slice() else {
        panic!("{told:?}")
    };
    let (term_run, term) = (*term_run, *term);
    let heard = until(&mut w, |o| matches!(o, Outcome::Leader(Some((_, Some(_)))))).await;
    assert_eq!(heard.last(), Some(&(7, Outcome::Leader(Some((Some("one".into()), Some(term)))))), "its own fence");
    let second = campaign(&two, 2, &name, retry, b.runner().post()).unwrap();
    let told = b.told().await;
    assert_eq!(told, vec![(2, Outcome::Leader(Some((Some("one".into()), Some(term)))))], "not elected: who leads");
    // Resign: fn's signal aborts; once it settled, the lock goes back and the other campaign is elected.
    let resigned = tokio::spawn({
        let first = first.clone();
        async move { first.resign().await }
    });
    let told = a.told().await;
    assert_eq!(
        told,
        vec![(term_run, Outcome::Aborted { reason: snatch_core::protocol::attempt::AbortReason::Resigned })]
    );
    let mut out = snatch_core::Output::default();
    a.runner().task_done(term_run, None, &mut out);
    assert_eq!(a.told().await, vec![(term_run, Outcome::Revoked { fence: term, reason: Revoked::Resigned })]);
    resigned.await.unwrap();
    let mut elected = HashSet::new();
    while elected.is_empty() {
        for (id, outcome) in b.told().await {
            if let Outcome::Invoke { fence, invoked: Invoked::Term(2) } = outcome {
                assert!(fence > term);
                elected.insert((id, fence));
            }
        }
    }
    let (next_run, next_term) = elected.into_iter().next().unwrap();
    let heard = until(&mut w, |o| matches!(o, Outcome::Leader(Some((Some(l), Some(_)))) if l == "two")).await;
    assert_eq!(heard.last(), Some(&(7, Outcome::Leader(Some((Some("two".into()), Some(next_term)))))));
    // The first campaign, which does not lead, stops; then the second, whose term ends 'stopped'.
    first.stop().await;
    let stopping = tokio::spawn(async move { second.stop().await });
    let told = b.told().await;
    assert!(matches!(told.as_slice(), [(id, Outcome::Aborted { .. })] if *id == next_run), "{told:?}");
    b.runner().task_done(next_run, None, &mut out);
    let mut ended = b.told().await;
    while !ended.iter().any(|(id, _)| *id == next_run) {
        ended.extend(b.told().await);
    }
    assert!(ended.contains(&(next_run, Outcome::Revoked { fence: next_term, reason: Revoked::Stopped })));
    stopping.await.unwrap();
    for l in [one, two, watcher] {
        l.close().await;
    }
}

#[tokio::test]
async fn an_observer_waits_for_the_term_of_a_leader_read_before_its_note_though_other_publishes_wake_it() {
    let (_server, url) = redis_url();
    let name = unique_key("lead-unnoted");
    let (one, watcher) = (locker(&url, "one"), locker(&url, "watcher"));
    let mut w = Caller::new(&watcher);
    // Elected, its term not yet noted (a campaign notes it right after its election).
    let lease = one.lock(&name, &options(10_000, 0)).await.unwrap();
    let keys = LeaderKeys::new(&one.config().prefix, &name, false).unwrap();
    let _observer = observe(&watcher, 7, &name, w.runner().post()).unwrap();
    let mut redis = support::inspect(&url);
    let subscribers = |redis: &mut redis::Connection| -> i64 {
        let reply: (String, i64) = redis::cmd("PUBSUB").arg("NUMSUB").arg(&keys.channel).query(redis).unwrap();
        reply.1
    };
    while subscribers(&mut redis) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Once subscribed it reads the leader without its term; a publish meant for something else (another node's note
    // on Redlock, an earlier term's end) wakes it before the note. Time is what is tested: the note follows 30 ms
    // later, well within the observer's wait for it (200 ms).
    redis::cmd("PUBLISH").arg(&keys.channel).arg("").query::<i64>(&mut redis).unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    let term = snatch_core::protocol::lead::term(lease.token(), lease.fence());
    redis::cmd("SET").arg(&keys.term).arg(&term).query::<()>(&mut redis).unwrap();
    redis::cmd("PUBLISH").arg(&keys.channel).arg(&term).query::<i64>(&mut redis).unwrap();
    let heard = until(&mut w, |o| matches!(o, Outcome::Leader(_))).await;
    assert_eq!(heard, vec![(7, Outcome::Leader(Some((Some("one".into()), Some(lease.fence())))))]);
    for l in [one, watcher] {
        l.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_term_whose_lease_lapsed_before_its_fn_was_called_does_not_call_it_and_the_campaign_goes_on() {
    let (_server, url) = redis_url();
    let name = unique_key("lead-still");
    let (still, admin) = (locker(&url, "still"), locker(&url, "admin"));
    let mut a = Caller::new(&still);
    let options = CampaignOptions { ttl: Some(Duration::from_millis(1000)), retry: Duration::from_millis(100) };
    let campaigning = campaign(&still, 1, &name, options, a.runner().post()).unwrap();
    // Elected while the caller's loop stands still: the call of fn waits while the lease is lost (taken from Redis
    // here, as another replica may once a stopped process's lease ran out).
    let (lease, settled) = loop {
        match a.input().await {
            Input::Term { lease, settled, .. } => break (lease, settled),
            input => a.step(|runner, out| runner.handle(input, out)),
        }
    };
    let first = lease.fence();
    assert!(admin.force_release(lease.key()).await.unwrap());
    assert!(lease.ended().await, "the lease is lost");
    a.step(|runner, out| runner.handle(Input::Term { campaign: 1, lease, settled }, out));
    let told = a.take_told();
    assert!(!told.iter().any(|(_, outcome)| matches!(outcome, Outcome::Invoke { .. })), "{told:?}");
    // The campaign goes on: its next term's fn is called, under a higher fence.
    let next = until(&mut a, |o| matches!(o, Outcome::Invoke { invoked: Invoked::Term(1), .. })).await;
    let Some((run, Outcome::Invoke { fence, .. })) = next.last() else { panic!("{next:?}") };
    assert!(*fence > first);
    let run = *run;
    let stopping = tokio::spawn(async move { campaigning.stop().await });
    until(&mut a, |o| matches!(o, Outcome::Aborted { .. })).await;
    let mut out = snatch_core::Output::default();
    a.runner().task_done(run, None, &mut out);
    stopping.await.unwrap();
    for l in [still, admin] {
        l.close().await;
    }
}

#[tokio::test]
async fn an_acquisition_whose_lease_lapsed_before_fn_was_called_or_the_lock_handed_over_counts_as_not_acquired() {
    let (_server, url) = redis_url();
    // On the locker's own connection (no direct call), so that the test can hold its results back.
    let config = LockerConfig { urls: vec![url.clone()], direct: false, ..LockerConfig::default() };
    let still = Locker::new(config).unwrap();
    let mut a = Caller::new(&still);
    let short = options(200, 0);
    // snatchTask, one attempt: not acquired, fn not called.
    let key = unique_key("lapsed-task");
    a.step(|runner, out| runner.run(1, &key, &short, false, out)).unwrap();
    assert_eq!(handled_late(&mut a).await, vec![(1, Outcome::NotAcquired)]);
    // withLock, withPermit, withLocks, lock(), shared(): they waited for the lock, and end with a timeout error.
    let key = unique_key("lapsed-with");
    a.step(|runner, out| runner.run(2, &key, &short, true, out)).unwrap();
    assert!(timed_out(&handled_late(&mut a).await, 2));
    a.step(|runner, out| runner.run_as(3, &unique_key("lapsed-permit"), Holder::Permit(2), &short, out)).unwrap();
    assert!(timed_out(&handled_late(&mut a).await, 3));
    let keys = vec![unique_key("lapsed-set"), unique_key("lapsed-set")];
    a.step(|runner, _| runner.run_all(4, keys, &short)).unwrap();
    assert!(timed_out(&handled_late(&mut a).await, 4));
    a.step(|runner, _| runner.lock(5, &unique_key("lapsed-lock"), &short)).unwrap();
    assert!(timed_out(&handled_late(&mut a).await, 5));
    // A shared result's turn: the round's next caller takes a turn, and its fn is called.
    let (key, waits) = (unique_key("lapsed-shared"), options(200, 5000));
    a.step(|runner, _| runner.run_shared(6, &key, &waits, false)).unwrap();
    a.step(|runner, _| runner.run_shared(7, &key, &waits, false)).unwrap();
    assert!(timed_out(&handled_late(&mut a).await, 6));
    let told = until(&mut a, |o| matches!(o, Outcome::Invoke { .. })).await;
    assert!(matches!(told.last(), Some((7, Outcome::Invoke { .. }))), "{told:?}");
    a.runner().shared_done(7, None, Duration::from_secs(1));
    still.close().await;
}

#[tokio::test]
async fn a_batch_of_results_is_taken_up_to_each_one_that_starts_code_so_the_next_is_checked_just_before_its_own() {
    let (_server, url) = redis_url();
    // On the locker's own connection, so that the test can hold both results back and hand them over as one batch.
    let config = LockerConfig { urls: vec![url.clone()], direct: false, ..LockerConfig::default() };
    let still = Locker::new(config).unwrap();
    let mut a = Caller::new(&still);
    let short = options(200, 0);
    a.step(|runner, out| runner.run(1, &unique_key("batch-a"), &short, false, out)).unwrap();
    a.step(|runner, out| runner.run(2, &unique_key("batch-b"), &short, false, out)).unwrap();
    let batch = vec![a.input().await, a.input().await];
    let Input::Acquired { id: second, result: Ok(Some(lease)), .. } = &batch[1] else { panic!("not acquired") };
    let (second, lease) = (*second, lease.clone());
    let mut inputs = batch.into_iter();
    // The first result starts its fn: it is told before the second is taken.
    assert!(a.step(|runner, out| runner.handle_until_started(&mut inputs, out)));
    let told = a.take_told();
    let [(first, Outcome::Invoke { .. })] = told.as_slice() else { panic!("{told:?}") };
    let first = *first;
    // That fn's code stands still past the second lease: the second, checked now, does not start its fn.
    until_lapsed(&lease).await;
    assert!(!a.step(|runner, out| runner.handle_until_started(&mut inputs, out)));
    assert_eq!(a.take_told(), vec![(second, Outcome::NotAcquired)]);
    a.step(|runner, out| runner.task_done(first, None, out));
    still.close().await;
}

/// Whether run or lock `id` was told only a timeout error.
fn timed_out(told: &Told, id: u32) -> bool {
    matches!(told.as_slice(), [(of, Outcome::Failed(SnatchError::Timeout { .. }))] if *of == id)
}

/// Hands the next acquisition's result to `caller`'s runner only once its leases lapsed, as a caller whose loop stood
/// still that long would; what the runner told.
async fn handled_late(caller: &mut Caller) -> Told {
    let input = caller.input().await;
    let leases = match &input {
        Input::Acquired { result: Ok(Some(lease)), .. } => vec![lease.clone()],
        Input::AcquiredSet { result: Ok(leases), .. } => leases.clone(),
        Input::Shared { turn: Ok(Turn::Run(lease)), .. } => vec![lease.clone()],
        _ => panic!("not an acquisition"),
    };
    for lease in &leases {
        until_lapsed(lease).await;
    }
    caller.step(|runner, out| runner.handle(input, out));
    caller.take_told()
}

/// Resolves once `lease` lapsed, as it does for a caller whose loop stood still that long.
async fn until_lapsed(lease: &Lease) {
    while !lease.lapsed() {
        tokio::time::sleep(lease.remaining() + Duration::from_millis(1)).await;
    }
}

/// What `caller` is told until an outcome for which `found` holds (it last).
async fn until(caller: &mut Caller, found: impl Fn(&Outcome) -> bool) -> Vec<(u32, Outcome)> {
    let mut told = Vec::new();
    loop {
        for (id, outcome) in caller.told().await {
            let done = found(&outcome);
            told.push((id, outcome));
            if done {
                return told;
            }
        }
    }
}

/// Waits for what the runner tells `id` (the other outcomes told meanwhile are dropped).
async fn told_to(caller: &mut Caller, id: u32) -> Outcome {
    loop {
        if let Some((_, outcome)) = caller.told().await.into_iter().find(|(of, _)| *of == id) {
            return outcome;
        }
    }
}

#[tokio::test]
async fn a_call_inside_a_run_that_holds_its_key_is_refused_not_acquired_or_nested_and_the_outer_waits_for_it() {
    let (_server, url) = redis_url();
    let locker = locker(&url, "a");
    let mut caller = Caller::new(&locker);
    let (key, other) = (unique_key("reenter"), unique_key("reenter-other"));
    caller.step(|runner, out| runner.run(1, &key, &waiting(0), true, out)).unwrap();
    let Outcome::Invoke { fence, .. } = told_to(&mut caller, 1).await else { panic!("the outer run's fn") };
    let call = |keys: &[&String], waits, reentrant, within: Vec<u32>| Reentering {
        keys: keys.iter().map(|k| k.to_string()).collect(),
        purpose: Purpose::Run,
        set: keys.len() > 1,
        waits,
        reentrant,
        within,
    };
    // Refused at once (withLock), not acquired (snatchTask), nested (reentrant) with the outer's fence.
    assert!(caller.step(|runner, out| runner.reenter(2, &call(&[&key], true, false, vec![1]), out)));
    let refused = told_to(&mut caller, 2).await;
    assert_eq!(refused, Outcome::Failed(SnatchError::Reentrant { key: key.clone(), mixed: false }));
    let Outcome::Failed(error) = refused else { unreachable!() };
    assert_eq!(error.code(), "ERR_SNATCH_REENTRANT");
    assert!(caller.step(|runner, out| runner.reenter(3, &call(&[&key], false, false, vec![1]), out)));
    assert_eq!(told_to(&mut caller, 3).await, Outcome::NotAcquired);
    assert!(caller.step(|runner, out| runner.reenter(4, &call(&[&key], true, true, vec![1]), out)));
    assert_eq!(told_to(&mut caller, 4).await, Outcome::Invoke { fence, invoked: Invoked::Run { direct: false } });
    // A set holding one key and not the other, and a call outside the run (or of a key it does not hold).
    assert!(caller.step(|runner, out| runner.reenter(5, &call(&[&other, &key], true, true, vec![1]), out)));
    assert_eq!(
        told_to(&mut caller, 5).await,
        Outcome::Failed(SnatchError::Reentrant { key: key.clone(), mixed: true })
    );
    assert!(!caller.step(|runner, out| runner.reenter(6, &call(&[&key], true, false, vec![]), out)));
    assert!(!caller.step(|runner, out| runner.reenter(6, &call(&[&other], true, false, vec![1, 4]), out)));
    // The outer fn settles first: its lock stays until the nested run ended, which releases nothing itself.
    caller.step(|runner, out| runner.task_done(1, None, out));
    assert!(locker.inspect(&key).await.unwrap().is_some());
    caller.step(|runner, out| runner.task_done(4, None, out));
    assert_eq!(told_to(&mut caller, 4).await, Outcome::Ran { fence, lost: false });
    assert_eq!(told_to(&mut caller, 1).await, Outcome::Ran { fence, lost: false });
    assert!(locker.inspect(&key).await.unwrap().is_none());
    locker.close().await;
}
