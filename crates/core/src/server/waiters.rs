//! The waiters of one node, by the channel a release publishes on, and waking them: shared by the waker (woken by
//! its subscriber connection's messages) and the `memory://` store (woken by its own `PUBLISH`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::Notify;

/// Who waits on one channel, in the order they came.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    pub(crate) waiters: Vec<Waiter>,
    /// A message wakes only the first waiter still waiting (a lock's or a permit's release: one of this process's
    /// waiters tries, the others stay asleep until the next release); otherwise every one (an announcement: a
    /// schedule's control channel). Fair waiters are woken by their id alone.
    pub(crate) one_at_a_time: bool,
}

/// One waiter on a channel.
#[derive(Debug)]
pub(crate) struct Waiter {
    /// Its notify, held weakly: a waiter that is gone no longer upgrades.
    pub(crate) notify: Weak<Notify>,
    /// A fair waiter's id (keys.rs, `LockKeys::queue`): a release's message that names it wakes it, and no message
    /// wakes it otherwise.
    pub(crate) fair: Option<String>,
}

/// Waiters by channel.
pub(crate) type WaiterMap = Mutex<HashMap<String, Queue>>;

/// The waiters of one node.
pub(crate) type Waiters = Arc<WaiterMap>;

/// Wakes the waiters on `channel` among `waiters` that `message` wakes: the fair waiter it names, and the first
/// other waiter still waiting, or every other one (see [`Queue::one_at_a_time`]); how many.
pub(crate) fn wake(waiters: &HashMap<String, Queue>, channel: &str, message: &str) -> usize {
    let Some(queue) = waiters.get(channel) else { return 0 };
    let mut others = if queue.one_at_a_time { 1 } else { usize::MAX };
    let mut woken = 0;
    for waiter in &queue.waiters {
        let Some(notify) = waiter.notify.upgrade() else { continue };
        let wakes = match &waiter.fair {
            Some(id) => id == message,
            None if others > 0 => {
                others -= 1;
                true
            }
            None => false,
        };
        if wakes {
            notify.notify_one();
            woken += 1;
        }
    }
    woken
}

/// Hands a turn on `channel` to the first waiter still waiting there that is not fair, if its waiters wait in a
/// queue (a waiter that leaves may have been woken and not tried; a fair one's turn is handed on in Redis).
pub(crate) fn pass_turn(waiters: &HashMap<String, Queue>, channel: &str) {
    if waiters.get(channel).is_some_and(|queue| queue.one_at_a_time) {
        wake(waiters, channel, "");
    }
}
