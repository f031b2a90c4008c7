//! A fair waiter's place in the queue of a lock or a semaphore (snatch-protocol's scripts/queue.lua): the waiter's
//! id, which its acquisitions give, and giving the place up when it stops waiting without the lock.

use crate::redlock::quorum::Nodes;
use snatch_protocol::keys::LockKeys;
use std::sync::Arc;

/// The place of one fair acquisition. Dropped while still queued (its acquisition dropped, say by the runtime's
/// shutdown), it is given up in the background; one that cannot be given up lapses (`PLACE_LEASE`, server/node.rs).
pub(crate) struct Place {
    waiter: String,
    keys: LockKeys,
    nodes: Arc<Nodes>,
    /// Whether the place may still be in the queue.
    queued: bool,
}

impl Place {
    /// The place of fair waiter `waiter` (snatch-protocol's `owner::waiter`) for the lock of `keys` on `nodes` (one
    /// deployment: fair waiting is not on Redlock).
    pub(crate) fn new(waiter: String, keys: LockKeys, nodes: Arc<Nodes>) -> Self {
        Self { waiter, keys, nodes, queued: true }
    }

    /// The waiter's id.
    pub(crate) fn waiter(&self) -> &str {
        &self.waiter
    }

    /// The waiter got the lock: the acquisition left the queue as it took it.
    pub(crate) fn taken(mut self) {
        self.queued = false;
    }

    /// The waiter stops waiting: it leaves the queue, and the next one is woken if it was first. A place that cannot
    /// be given up now lapses.
    pub(crate) async fn leave(mut self) {
        self.queued = false;
        leave(&self.nodes, &self.keys, &self.waiter).await;
    }
}

async fn leave(nodes: &Nodes, keys: &LockKeys, waiter: &str) {
    if let Some(node) = nodes.single() {
        let _ = node.leave_queue(keys, waiter).await;
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if !self.queued {
            return;
        }
        let (nodes, keys, waiter) = (self.nodes.clone(), self.keys.clone(), std::mem::take(&mut self.waiter));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { leave(&nodes, &keys, &waiter).await });
        }
    }
}
