//! Release notifications: a subscriber connection (RESP3) per node, opened when the first waiter appears, that wakes
//! the waiters of a lock as soon as its holder releases it (the release script publishes on the lock's channel). On
//! a cluster of Redis 7 or newer the channel is sharded: the scripts `SPUBLISH` and the waiters `SSUBSCRIBE` on the
//! node that owns the lock's slot, so that a wake-up reaches only that shard, where `PUBLISH` reaches every node of
//! the cluster (Redis 6.2 keeps `PUBLISH`, which one subscription on any node hears). Waiting never depends on it: a
//! waiter also retries after a jittered delay, which covers expiries, lost messages and a subscriber connection
//! that cannot be opened.

use crate::server::connection::{Connection, Link, Target};
use crate::server::waiters::{pass_turn, wake, Waiter, Waiters};
use redis::{PushInfo, PushKind, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// The release notifications of one node.
pub(crate) struct Waker {
    /// The node's command connection: what it connects to, and the command timeout.
    connection: Arc<Connection>,
    /// The open subscriber connection; `None` until needed, or once it broke or the waker closed.
    subscriber: tokio::sync::Mutex<Option<Subscriber>>,
    waiters: Waiters,
    /// Whether channels are sharded: on a cluster, until a node answers that it does not know `SSUBSCRIBE` (Redis
    /// 6.2) or that the user may not run it (an ACL from before sharded wake-ups): the scripts then publish with
    /// `PUBLISH` (wake.lua).
    sharded: AtomicBool,
    closed: AtomicBool,
}

/// An open subscriber connection.
struct Subscriber {
    link: Link,
    /// Set when the connection dropped: its subscriptions are gone.
    broken: Arc<AtomicBool>,
}

/// A waiter's registration on one channel; unregisters (and unsubscribes the last one) when dropped. A waiter in a
/// queue (a lock's release channel) that is dropped before it [`took its turn`](Watch::took_turn) hands its turn on:
/// it may have been woken by a release and not tried, so the next waiter in the queue is woken.
pub(crate) struct Watch {
    waker: Arc<Waker>,
    channel: String,
    took_turn: bool,
}

impl Waker {
    pub(crate) fn new(connection: Arc<Connection>) -> Self {
        let waiters = Waiters::default();
        if let Target::Memory(memory) = connection.target() {
            // A memory store's PUBLISH wakes the waiters itself: no subscriber connection.
            memory.listen(Arc::downgrade(&waiters));
        }
        let sharded = AtomicBool::new(connection.target().is_cluster());
        Self { connection, subscriber: tokio::sync::Mutex::new(None), waiters, sharded, closed: AtomicBool::new(false) }
    }

    /// Registers `notify` (held weakly: the waiter keeps it) to be woken when `channel` is published on: with
    /// `one_at_a_time`, in a queue whose first waiter alone a message wakes, else with every waiter on it; a `fair`
    /// waiter, by a message that names it. `None` when the subscriber connection cannot be opened or the
    /// subscription fails within the command timeout (the waiter then relies on its retries).
    pub(crate) async fn watch(
        self: &Arc<Self>,
        channel: &str,
        notify: &Arc<Notify>,
        one_at_a_time: bool,
        fair: Option<&str>,
    ) -> Option<Watch> {
        let mut subscriber = self.subscriber.lock().await;
        if self.closed.load(Ordering::SeqCst) {
            *subscriber = None;
            return None;
        }
        if subscriber.as_ref().is_some_and(|s| s.broken.load(Ordering::SeqCst)) {
            *subscriber = None;
        }
        let first = {
            let mut waiters = self.waiters.lock().expect("waiters poisoned");
            let queue = waiters.entry(channel.to_owned()).or_default();
            queue.waiters.retain(|w| w.notify.strong_count() > 0);
            queue.waiters.push(Waiter { notify: Arc::downgrade(notify), fair: fair.map(str::to_owned) });
            queue.one_at_a_time = one_at_a_time;
            queue.waiters.len() == 1
        };
        let watch = Watch { waker: self.clone(), channel: channel.to_owned(), took_turn: false };
        if matches!(self.connection.target(), Target::Memory(_)) {
            return Some(watch);
        }
        if first || subscriber.is_none() {
            let subscribed = tokio::time::timeout(self.connection.timeout(), async {
                if subscriber.is_none() {
                    *subscriber = Some(self.open().await?);
                }
                let link = &mut subscriber.as_mut().expect("just opened").link;
                match link.subscribe(channel, self.sharded.load(Ordering::SeqCst)).await {
                    Err(e) if self.sharded.load(Ordering::SeqCst) && no_sharded_pubsub(&e) => {
                        self.sharded.store(false, Ordering::SeqCst);
                        link.subscribe(channel, false).await
                    }
                    subscribed => subscribed,
                }
                .map_err(|e| e.to_string())
            })
            .await;
            // Closed meanwhile: `close` could not take the connection while this held it.
            if !matches!(subscribed, Ok(Ok(()))) || self.closed.load(Ordering::SeqCst) {
                *subscriber = None;
                return None;
            }
        }
        Some(watch)
    }

    /// Opens the subscriber connection, its messages dispatched to the waiters. Once it drops, its subscriptions
    /// are gone: the waiters are forgotten, and the next one subscribes on a new connection.
    async fn open(&self) -> Result<Subscriber, String> {
        let waiters = Arc::downgrade(&self.waiters);
        let broken = Arc::new(AtomicBool::new(false));
        let dropped = broken.clone();
        let push = move |message: PushInfo| -> Result<(), redis::aio::SendError> {
            let Some(waiters) = waiters.upgrade() else { return Ok(()) };
            let mut waiters = waiters.lock().expect("waiters poisoned");
            match (message.kind, message.data.as_slice()) {
                (PushKind::Message | PushKind::SMessage, [Value::BulkString(channel), sent, ..]) => {
                    let sent = match sent {
                        Value::BulkString(sent) => std::str::from_utf8(sent).unwrap_or_default(),
                        _ => "",
                    };
                    wake(&waiters, std::str::from_utf8(channel).unwrap_or_default(), sent);
                }
                (PushKind::Disconnection, _) => {
                    dropped.store(true, Ordering::SeqCst);
                    waiters.clear();
                }
                _ => {}
            }
            Ok(())
        };
        let link = self.connection.target().subscriber(self.connection.timeout(), push).await?;
        Ok(Subscriber { link, broken })
    }

    /// How many waiters on `channel` that are not fair still wait.
    pub(crate) fn waiting(&self, channel: &str) -> usize {
        let waiters = self.waiters.lock().expect("waiters poisoned");
        let waiting = |w: &&Waiter| w.fair.is_none() && w.notify.strong_count() > 0;
        waiters.get(channel).map_or(0, |queue| queue.waiters.iter().filter(waiting).count())
    }

    /// Closes the subscriber connection, if open (or once the subscription or unsubscription under way is done); no
    /// more are opened.
    pub(crate) fn close(self: &Arc<Self>) {
        self.closed.store(true, Ordering::SeqCst);
        match self.subscriber.try_lock() {
            Ok(mut subscriber) => drop(subscriber.take()),
            // A waiter's watch or forget holds it: dropped once that lets go (a forget would not drop it itself).
            Err(_) => {
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    let waker = self.clone();
                    runtime.spawn(async move { drop(waker.subscriber.lock().await.take()) });
                }
            }
        }
    }

    /// Unsubscribes `channel` if nobody waits on it any more.
    async fn forget(&self, channel: String) {
        let mut subscriber = self.subscriber.lock().await;
        let idle = {
            let mut waiters = self.waiters.lock().expect("waiters poisoned");
            let queue = waiters.entry(channel.clone()).or_default();
            queue.waiters.retain(|w| w.notify.strong_count() > 0);
            let idle = queue.waiters.is_empty();
            if idle {
                waiters.remove(&channel);
            }
            idle
        };
        if let (true, Some(s)) = (idle, subscriber.as_mut()) {
            if !matches!(
                tokio::time::timeout(
                    self.connection.timeout(),
                    s.link.unsubscribe(&channel, self.sharded.load(Ordering::SeqCst))
                )
                .await,
                Ok(Ok(()))
            ) {
                *subscriber = None;
            }
        }
    }
}

/// Whether `error` is a server's answer that it does not know the command (Redis 6.2) or that the user may not run it
/// (`NOPERM`).
fn no_sharded_pubsub(error: &redis::RedisError) -> bool {
    let message = error.to_string().to_ascii_lowercase();
    message.contains("unknown command") || message.contains("noperm")
}

impl Watch {
    /// The waiter got what it waited for: dropped, it hands no turn on.
    pub(crate) fn took_turn(&mut self) {
        self.took_turn = true;
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if !self.took_turn {
            // The waiter let go of its notify first (see Nodes::watch), so that the next one is woken.
            pass_turn(&self.waker.waiters.lock().expect("waiters poisoned"), &self.channel);
        }
        // `forget` runs later, when the waiter has let go of its notify too.
        let (waker, channel) = (self.waker.clone(), std::mem::take(&mut self.channel));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { waker.forget(channel).await });
        }
    }
}
