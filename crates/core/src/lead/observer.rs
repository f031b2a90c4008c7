//! An observer of a leadership (`locker.observe`): it hears of each new leader when the campaigns publish it on the
//! leader channel (no keyspace notifications needed), and of a leader that died when its lease ends, reading who
//! leads then: an idle observer costs one read per leader lease at most, and nothing without a leader.

use crate::lead::leading;
use crate::lock::job::Job;
use crate::lock::locker::Locker;
use crate::run::input::{Input, Post};
use snatch_protocol::lead::LeaderKeys;
use snatch_protocol::run::Outcome;
use snatch_protocol::SnatchError;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

/// How long after a leader's lease would end the observer looks again (the server's expiry is exact to the ms).
const AFTER_LEASE: Duration = Duration::from_millis(20);

/// How long after a failed read the observer reads again.
const AFTER_ERROR: Duration = Duration::from_secs(1);

/// How long the observer waits for the term of a leader it read before its term was noted (the note follows the
/// election at once; a leader that notes none, or whose note failed, is told without its term then).
const FOR_THE_NOTE: Duration = Duration::from_millis(200);

/// An observer under way.
#[derive(Clone)]
pub struct Observer(Job);

impl Observer {
    /// Stops observing. Idempotent.
    pub async fn close(&self) {
        self.0.stop().await;
    }
}

/// Starts observer `id` (the caller's id for it) of `locker` of leadership `name`: the caller hears who leads
/// ([`Outcome::Leader`]) whenever it changes, and an error it met ([`Outcome::Erred`]). Within the Tokio runtime.
pub fn observe(locker: &Locker, id: u32, name: &str, post: Arc<dyn Post>) -> Result<Observer, SnatchError> {
    let keys = LeaderKeys::new(&locker.config().prefix, name, locker.one_slot())?;
    let guard = locker.enter()?;
    let job = Job::new();
    let (owner, handle) = (locker.clone(), job.clone());
    tokio::spawn(async move {
        watch_leader(&owner, id, &keys, handle.stop_requests(), &*post).await;
        handle.ended();
        drop(guard);
    });
    locker.register_job(job.clone());
    Ok(Observer(job))
}

/// Reads who leads now, after each note on the leader channel and when the leader's lease would end, and tells it when
/// it changed; until stopped.
async fn watch_leader(locker: &Locker, id: u32, keys: &LeaderKeys, mut stop: watch::Receiver<bool>, post: &dyn Post) {
    let heard = Arc::new(Notify::new());
    let mut watches = Vec::new();
    for node in locker.nodes().all() {
        watches.extend(node.watch_channel(&keys.channel, &heard).await);
    }
    // When a leader without its term was first read: the reads until FOR_THE_NOTE later (woken by the note, or by
    // an earlier publish on another node) wait for the term instead of telling the leader without it.
    let (mut seen, mut noting) = (None, None::<Instant>);
    while !*stop.borrow() {
        let again = match leading::read(locker, keys).await {
            Ok(read) => {
                let again = read.as_ref().map(|leading| Duration::from_millis(leading.ttl_ms as u64) + AFTER_LEASE);
                let now = read.map(|leading| (leading.leader, leading.term));
                let unnoted = matches!(now, Some((_, None))) && now != seen;
                let left = unnoted
                    .then(|| FOR_THE_NOTE.checked_sub(noting.get_or_insert_with(Instant::now).elapsed()))
                    .flatten();
                if let Some(left) = left {
                    // Read between its election and its note: told with its term, once noted.
                    Some(left)
                } else {
                    noting = None;
                    if now != seen {
                        seen = now.clone();
                        let _ = post.post(Input::Tell(id, Outcome::Leader(now)));
                    }
                    again
                }
            }
            Err(SnatchError::Closed) => break,
            Err(error) => {
                let _ = post.post(Input::Tell(id, Outcome::Erred(error)));
                Some(AFTER_ERROR)
            }
        };
        tokio::select! {
            _ = stop.changed() => {}
            () = heard.notified() => {}
            () = tokio::time::sleep(again.unwrap_or(Duration::MAX)), if again.is_some() => {}
        }
    }
}
