//! The waiters of one node, by the channel a release publishes on, and waking them: shared by the waker (woken by
//! its subscriber connection's messages) and the `memory://` store (woken by its own `PUBLISH`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::Notify;

/// Waiters by channel.
pub(crate) type WaiterMap = Mutex<HashMap<String, Vec<Weak<Notify>>>>;

/// The waiters of one node.
pub(crate) type Waiters = Arc<WaiterMap>;

/// Wakes the waiters on `channel` among `waiters`; how many there were.
pub(crate) fn wake(waiters: &HashMap<String, Vec<Weak<Notify>>>, channel: &str) -> usize {
    let woken = waiters.get(channel).into_iter().flatten().filter_map(Weak::upgrade);
    woken.map(|notify| notify.notify_one()).count()
}
