//! One Redis server: a lazily opened, self-reconnecting multiplexed connection and the lock scripts run on it.

use crate::keys::LockKeys;
use crate::scripts;
use crate::waker::{Waker, Watch};
use crate::SnatchError;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, RedisError, ScriptInvocation};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, OnceCell};

/// What one node answered to an acquire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeAcquire {
    /// The lock is ours on this node, with this node's fence.
    Acquired { fence: i64 },
    /// Someone else holds it for about `pttl_ms` more.
    Taken { pttl_ms: i64 },
}

/// One Redis server.
pub(crate) struct Node {
    /// The URL without credentials, for error messages.
    label: String,
    client: Client,
    /// Opened on first use, inside the async runtime; taken out (dropped) by `close`.
    manager: OnceCell<Mutex<Option<ConnectionManager>>>,
    timeout: Duration,
    /// Release notifications for waiters.
    waker: Arc<Waker>,
}

impl Node {
    /// Parses `url`; connects only on first use.
    pub(crate) fn new(url: &str, timeout: Duration) -> Result<Self, SnatchError> {
        let client = Client::open(url)
            .map_err(|e| SnatchError::type_arg(format!("invalid Redis URL '{}': {e}", redact(url))))?;
        let waker = Arc::new(Waker::new(client.clone(), timeout));
        Ok(Self { label: redact(url), client, manager: OnceCell::new(), timeout, waker })
    }

    /// Runs ACQUIRE for `keys` with `token` and a lease of `ttl_ms`.
    pub(crate) async fn acquire(&self, keys: &LockKeys, token: &str, ttl_ms: u64) -> Result<NodeAcquire, SnatchError> {
        let mut call = scripts::ACQUIRE.prepare_invoke();
        call.key(&keys.lock).key(&keys.fence).arg(token).arg(ttl_ms);
        let (won, value): (i64, i64) = self.invoke(&call).await?;
        Ok(if won == 1 { NodeAcquire::Acquired { fence: value } } else { NodeAcquire::Taken { pttl_ms: value } })
    }

    /// Runs EXTEND: sets the lease of a key we own to `ttl_ms`; false when it is not ours.
    pub(crate) async fn extend(&self, keys: &LockKeys, token: &str, ttl_ms: u64) -> Result<bool, SnatchError> {
        let mut call = scripts::EXTEND.prepare_invoke();
        call.key(&keys.lock).arg(token).arg(ttl_ms);
        Ok(self.invoke::<i64>(&call).await? == 1)
    }

    /// Runs RELEASE: deletes a key we own and wakes its waiters; false when it is not ours.
    pub(crate) async fn release(&self, keys: &LockKeys, token: &str) -> Result<bool, SnatchError> {
        let mut call = scripts::RELEASE.prepare_invoke();
        call.key(&keys.lock).arg(token).arg(&keys.channel);
        Ok(self.invoke::<i64>(&call).await? == 1)
    }

    /// Wakes `notify` when the lock of `keys` is released on this node; `None` when that cannot be arranged.
    pub(crate) async fn watch(&self, keys: &LockKeys, notify: &Arc<Notify>) -> Option<Watch> {
        self.waker.watch(&keys.channel, notify).await
    }

    /// Drops the connections; later commands fail with [`SnatchError::Closed`].
    pub(crate) fn close(&self) {
        self.waker.close();
        if let Some(slot) = self.manager.get() {
            slot.lock().expect("connection slot poisoned").take();
        }
    }

    /// Runs a script within the command timeout. A connection found dropped (say, after a Redis restart) is
    /// reopened by the manager; the script is then sent once more if time remains. All three scripts are safe to
    /// repeat with the same token.
    async fn invoke<T: redis::FromRedisValue>(&self, call: &ScriptInvocation<'_>) -> Result<T, SnatchError> {
        let attempts = async {
            let mut conn = self.connection().await?;
            match call.invoke_async(&mut conn).await {
                Err(e) if is_dropped(&e) => {
                    let mut conn = self.connection().await?;
                    call.invoke_async(&mut conn).await.map_err(|e| self.failure(e.to_string()))
                }
                result => result.map_err(|e| self.failure(e.to_string())),
            }
        };
        tokio::time::timeout(self.timeout, attempts)
            .await
            .unwrap_or_else(|_| Err(self.failure(format!("timed out after {} ms", self.timeout.as_millis()))))
    }

    /// The shared connection handle (cheap to clone; commands from many tasks are pipelined on one socket).
    async fn connection(&self) -> Result<ConnectionManager, SnatchError> {
        let slot = self
            .manager
            .get_or_try_init(|| async {
                let config = ConnectionManagerConfig::new()
                    .set_number_of_retries(1)
                    .set_connection_timeout(Some(self.timeout))
                    .set_response_timeout(Some(self.timeout));
                ConnectionManager::new_lazy_with_config(self.client.clone(), config)
                    .map(|m| Mutex::new(Some(m)))
                    .map_err(|e| self.failure(e.to_string()))
            })
            .await?;
        slot.lock().expect("connection slot poisoned").clone().ok_or(SnatchError::Closed)
    }

    fn failure(&self, cause: String) -> SnatchError {
        SnatchError::Redis { cause: format!("{}: {cause}", self.label) }
    }
}

/// True for errors after which the manager reconnects and a resend may succeed.
fn is_dropped(e: &RedisError) -> bool {
    e.is_connection_dropped() || e.is_unrecoverable_error()
}

/// `url` with any password replaced by `***`.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &url[scheme_end + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{user}:***{}", &url[..scheme_end + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords() {
        assert_eq!(redact("redis://u:secret@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact("redis://:secret@h:1"), "redis://:***@h:1");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
    }

    #[test]
    fn rejects_bad_urls() {
        let err = Node::new("http://nope", Duration::from_secs(1)).err().unwrap();
        assert_eq!(err.code(), "ERR_SNATCH_INVALID_ARG");
    }
}
