//! The command connection to one Redis server: opened lazily, reconnected by redis-rs' connection manager, and
//! dropped for good by `close`.

use crate::SnatchError;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, RedisError};
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::OnceCell;

/// One server's command connection.
pub(crate) struct Connection {
    /// The URL without credentials, for error messages.
    label: String,
    client: Client,
    /// Opened on first use, inside the async runtime; taken out (dropped) by `close`.
    manager: OnceCell<Mutex<Option<ConnectionManager>>>,
    /// The command timeout: a connection attempt, and a batch of commands, must finish within it.
    timeout: Duration,
}

impl Connection {
    pub(crate) fn new(label: String, client: Client, timeout: Duration) -> Self {
        Self { label, client, manager: OnceCell::new(), timeout }
    }

    /// The command timeout.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The shared connection handle (cheap to clone; what is sent through it shares one socket).
    /// [`SnatchError::Closed`] after `close`.
    pub(crate) async fn get(&self) -> Result<ConnectionManager, SnatchError> {
        let slot = self
            .manager
            .get_or_try_init(|| async {
                // No response timeout here: the batcher bounds each batch by the command timeout itself.
                let config = ConnectionManagerConfig::new()
                    .set_number_of_retries(1)
                    .set_connection_timeout(Some(self.timeout))
                    .set_response_timeout(None);
                ConnectionManager::new_lazy_with_config(self.client.clone(), config)
                    .map(|m| Mutex::new(Some(m)))
                    .map_err(|e| self.failure(e.to_string()))
            })
            .await?;
        slot.lock().expect("connection slot poisoned").clone().ok_or(SnatchError::Closed)
    }

    /// Drops the connection; later commands fail with [`SnatchError::Closed`].
    pub(crate) fn close(&self) {
        if let Some(slot) = self.manager.get() {
            slot.lock().expect("connection slot poisoned").take();
        }
    }

    /// The error of a command (or connection attempt) that did not finish within the command timeout.
    pub(crate) fn timed_out(&self) -> SnatchError {
        self.failure(format!("timed out after {} ms", self.timeout.as_millis()))
    }

    /// A Redis error on this server.
    pub(crate) fn failure(&self, cause: impl std::fmt::Display) -> SnatchError {
        SnatchError::Redis { cause: format!("{}: {cause}", self.label) }
    }
}

/// True for errors after which the manager reconnects and a resend may succeed.
pub(crate) fn is_dropped(e: &RedisError) -> bool {
    e.is_connection_dropped() || e.is_unrecoverable_error()
}
