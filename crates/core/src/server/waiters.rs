//! The waiters of one node, by the channel a release publishes on, and waking them: shared by the waker (woken by
//! its subscriber connection's messages) and the `memory://` store (woken by its own `PUBLISH`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::Notify;

/// Who waits on one channel, in the order they came.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    /// The waiters' notifies, held weakly: a waiter that is gone no longer upgrades.
    pub(crate) waiters: Vec<Weak<Notify>>,
    /// A message wakes only the first waiter still waiting (a lock's or a permit's release: one of this process's
    /// waiters tries, the others stay asleep until the next release); otherwise every one (an announcement: a
    /// schedule's control channel).
    pub(crate) one_at_a_time: bool,
}

/// Waiters by channel.
pub(crate) type WaiterMap = Mutex<HashMap<String, Queue>>;

/// The waiters of one node.
pub(crate) type Waiters = Arc<WaiterMap>;

/// Wakes the waiters on `channel` among `waiters` that a message wakes (see [`Queue::one_at_a_time`]); how many.
pub(crate) fn wake(waiters: &HashMap<String, Queue>, channel: &str) -> usize {
    let Some(queue) = waiters.get(channel) else { return 0 };
    let mut waiting = queue.waiters.iter().filter_map(Weak::upgrade);
    if queue.one_at_a_time {
        usize::from(waiting.next().map(|notify| notify.notify_one()).is_some())
    } else {
        waiting.map(|notify| notify.notify_one()).count()
    }
}

/// Hands a turn on `channel` to the first waiter still waiting there, if its waiters wait in a queue (a waiter that
/// leaves may have been woken and not tried).
pub(crate) fn pass_turn(waiters: &HashMap<String, Queue>, channel: &str) {
    if waiters.get(channel).is_some_and(|queue| queue.one_at_a_time) {
        wake(waiters, channel);
    }
}
