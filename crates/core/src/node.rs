//! One Redis server: its command connection (calls batched, see batcher.rs), its release notifications, and the
//! lock scripts run on it.

use crate::batcher::Batcher;
use crate::connection::Connection;
use crate::keys::LockKeys;
use crate::scripts::{self, ScriptCall};
use crate::waker::{Waker, Watch};
use crate::SnatchError;
use redis::{Client, FromRedisValue, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// What one node answered to an acquire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NodeAcquire {
    /// The lock is ours on this node, with this node's fence.
    Acquired { fence: i64 },
    /// Someone else holds it for about `pttl_ms` more; `holder` is their token when it was asked for.
    Taken { pttl_ms: i64, holder: Option<String> },
}

/// One Redis server.
pub(crate) struct Node {
    connection: Arc<Connection>,
    batcher: Batcher,
    /// Release notifications for waiters.
    waker: Arc<Waker>,
}

impl Node {
    /// Parses `url`; connects only on first use.
    pub(crate) fn new(url: &str, timeout: Duration) -> Result<Self, SnatchError> {
        let client = Client::open(url)
            .map_err(|e| SnatchError::type_arg(format!("invalid Redis URL '{}': {e}", redact(url))))?;
        let waker = Arc::new(Waker::new(client.clone(), timeout));
        let connection = Arc::new(Connection::new(redact(url), client, timeout));
        Ok(Self { batcher: Batcher::new(connection.clone()), connection, waker })
    }

    /// Runs ACQUIRE for `keys` with `token` and a lease of `ttl_ms`; when taken, the holder's token is read too if
    /// `name_holder`, and the lock marked as waited for (its release then wakes the waiters) if `waiting`.
    pub(crate) async fn acquire(
        &self,
        keys: &LockKeys,
        token: &str,
        ttl_ms: u64,
        name_holder: bool,
        waiting: bool,
    ) -> Result<NodeAcquire, SnatchError> {
        let mut call = ScriptCall::new(&scripts::ACQUIRE, 2);
        call.arg(&keys.lock).arg(&keys.fence).arg(token).arg(ttl_ms);
        if name_holder || waiting {
            call.arg(u8::from(name_holder)).arg(u8::from(waiting));
        }
        let (reply, holder) = match self.invoke::<Value>(call).await? {
            Value::Int(reply) => (reply, None),
            table => {
                let (reply, holder) = redis::from_redis_value(table).map_err(|e| self.connection.failure(e))?;
                (reply, Some(holder))
            }
        };
        Ok(if reply >= 0 {
            NodeAcquire::Acquired { fence: reply }
        } else {
            NodeAcquire::Taken { pttl_ms: -2 - reply, holder }
        })
    }

    /// Runs EXTEND: sets the lease of a key we own to `ttl_ms`; false when it is not ours.
    pub(crate) async fn extend(&self, keys: &LockKeys, token: &str, ttl_ms: u64) -> Result<bool, SnatchError> {
        let mut call = ScriptCall::new(&scripts::EXTEND, 1);
        call.arg(&keys.lock).arg(token).arg(ttl_ms);
        Ok(self.invoke::<i64>(call).await? == 1)
    }

    /// Runs RELEASE: deletes a key we own and wakes its waiters; false when it is not ours.
    pub(crate) async fn release(&self, keys: &LockKeys, token: &str) -> Result<bool, SnatchError> {
        let mut call = ScriptCall::new(&scripts::RELEASE, 1);
        call.arg(&keys.lock).arg(token);
        Ok(self.invoke::<i64>(call).await? == 1)
    }

    /// Wakes `notify` when the lock of `keys` is released on this node; `None` when that cannot be arranged.
    pub(crate) async fn watch(&self, keys: &LockKeys, notify: &Arc<Notify>) -> Option<Watch> {
        self.waker.watch(&keys.channel(), notify).await
    }

    /// Drops the connections; later commands fail with [`SnatchError::Closed`].
    pub(crate) fn close(&self) {
        self.waker.close();
        self.connection.close();
    }

    /// The command timeout.
    pub(crate) fn timeout(&self) -> Duration {
        self.connection.timeout()
    }

    /// The error of a command that did not finish within the command timeout.
    pub(crate) fn timed_out(&self) -> SnatchError {
        self.connection.timed_out()
    }

    /// A Redis error on this server.
    pub(crate) fn failure(&self, cause: impl std::fmt::Display) -> SnatchError {
        self.connection.failure(cause)
    }

    /// Runs a script call (batched with those of other operations) and reads its reply as `T`.
    async fn invoke<T: FromRedisValue>(&self, call: ScriptCall) -> Result<T, SnatchError> {
        let reply = self.batcher.call(call).await?;
        redis::from_redis_value(reply).map_err(|e| self.connection.failure(e))
    }
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
