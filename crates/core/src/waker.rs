//! Release notifications: a pub/sub connection per node, opened when the first waiter appears, that wakes the
//! waiters of a lock as soon as its holder releases it (the release script publishes on the lock's channel).
//! Waiting never depends on it: a waiter also retries after a jittered delay, which covers expiries, lost
//! messages and a pub/sub connection that cannot be opened.

use futures_util::StreamExt;
use redis::aio::PubSubSink;
use redis::Client;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Notify;

/// Waiters by channel.
type Waiters = Arc<Mutex<HashMap<String, Vec<Weak<Notify>>>>>;

/// The release notifications of one node.
pub(crate) struct Waker {
    client: Client,
    timeout: Duration,
    /// The subscribing half of the open pub/sub connection; `None` until needed or after it broke.
    sink: tokio::sync::Mutex<Option<PubSubSink>>,
    /// The task reading the connection's messages; aborting it closes the connection.
    reader: Mutex<Option<tokio::task::AbortHandle>>,
    waiters: Waiters,
}

/// A waiter's registration on one channel; unregisters (and unsubscribes the last one) when dropped.
pub(crate) struct Watch {
    waker: Arc<Waker>,
    channel: String,
}

impl Waker {
    pub(crate) fn new(client: Client, timeout: Duration) -> Self {
        Self {
            client,
            timeout,
            sink: tokio::sync::Mutex::new(None),
            reader: Mutex::new(None),
            waiters: Waiters::default(),
        }
    }

    /// Registers `notify` (held weakly: the waiter keeps it) to be woken when `channel` is published on. `None`
    /// when the pub/sub connection cannot be opened or the subscription fails within the command timeout (the
    /// waiter then relies on its retries).
    pub(crate) async fn watch(self: &Arc<Self>, channel: &str, notify: &Arc<Notify>) -> Option<Watch> {
        let mut sink = self.sink.lock().await;
        let first = {
            let mut waiters = self.waiters.lock().expect("waiters poisoned");
            let list = waiters.entry(channel.to_owned()).or_default();
            list.retain(|w| w.strong_count() > 0);
            list.push(Arc::downgrade(notify));
            list.len() == 1
        };
        let watch = Watch { waker: self.clone(), channel: channel.to_owned() };
        if first {
            let subscribed = tokio::time::timeout(self.timeout, async {
                if sink.is_none() {
                    *sink = Some(self.open().await?);
                }
                sink.as_mut().expect("just opened").subscribe(channel).await
            })
            .await;
            if !matches!(subscribed, Ok(Ok(()))) {
                *sink = None;
                return None;
            }
        }
        Some(watch)
    }

    /// Opens the pub/sub connection and starts the task that dispatches its messages to the waiters.
    async fn open(&self) -> redis::RedisResult<PubSubSink> {
        let (sink, mut stream) = self.client.get_async_pubsub().await?.split();
        let waiters = Arc::downgrade(&self.waiters);
        let reader = tokio::spawn(async move {
            while let Some(message) = stream.next().await {
                let Some(waiters) = waiters.upgrade() else { return };
                let waiters = waiters.lock().expect("waiters poisoned");
                for notify in waiters.get(message.get_channel_name()).into_iter().flatten() {
                    if let Some(notify) = notify.upgrade() {
                        notify.notify_one();
                    }
                }
            }
            // The connection broke: its subscriptions are gone, so the next waiter of each channel subscribes anew.
            if let Some(waiters) = waiters.upgrade() {
                waiters.lock().expect("waiters poisoned").clear();
            }
        });
        if let Some(old) = self.reader.lock().expect("reader poisoned").replace(reader.abort_handle()) {
            old.abort();
        }
        Ok(sink)
    }

    /// Closes the pub/sub connection, if open.
    pub(crate) fn close(&self) {
        if let Some(reader) = self.reader.lock().expect("reader poisoned").take() {
            reader.abort();
        }
    }

    /// Unsubscribes `channel` if nobody waits on it any more.
    async fn forget(&self, channel: String) {
        let mut sink = self.sink.lock().await;
        let idle = {
            let mut waiters = self.waiters.lock().expect("waiters poisoned");
            let list = waiters.entry(channel.clone()).or_default();
            list.retain(|w| w.strong_count() > 0);
            let idle = list.is_empty();
            if idle {
                waiters.remove(&channel);
            }
            idle
        };
        if let (true, Some(s)) = (idle, sink.as_mut()) {
            if !matches!(tokio::time::timeout(self.timeout, s.unsubscribe(&channel)).await, Ok(Ok(()))) {
                *sink = None;
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // `forget` runs later, when the waiter has let go of its notify too.
        let (waker, channel) = (self.waker.clone(), std::mem::take(&mut self.channel));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { waker.forget(channel).await });
        }
    }
}
