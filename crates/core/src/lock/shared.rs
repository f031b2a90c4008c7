//! Shared results (`locker.shared`): across every process, one caller runs fn under the key's lock and stores what it
//! came to (a value, or its error) for a while; the others wait for it, woken by the lock's release (or, when its
//! runner died, by its lease running out, when one of them takes over), and read it.

use crate::config::LockOptions;
use crate::lock::lease::Lease;
use crate::lock::locker::{not_acquired, Locker};
use crate::redlock::quorum::Acquire;
use crate::server::node::{Mark, Node};
use crate::server::waker::Watch;
use snatch_protocol::keys::LockKeys;
use snatch_protocol::shared::{Entry, Reader};
use snatch_protocol::SnatchError;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How long a shared result is kept by default (`resultTtl`).
pub const DEFAULT_RESULT_TTL: Duration = Duration::from_secs(60);

/// How long a caller waits for a round under way by default (`wait`).
pub const DEFAULT_SHARED_WAIT: Duration = Duration::from_secs(30);

/// The largest result stored by default, in bytes (`maxResultBytes`).
pub const DEFAULT_MAX_RESULT_BYTES: u32 = 1024 * 1024;

/// What a caller's turn comes to.
pub enum Turn {
    /// A round's result, stored.
    Stored(Entry),
    /// No result yet, and the lock is this caller's: it runs fn, stores what it came to, and releases.
    Run(Arc<Lease>),
}

impl Locker {
    /// A caller's turn at the shared result of `key`: a result stored (a value; an error when `store_errors`, or when
    /// it is of the round this caller waited for), or the lock to compute it under. Waits for a round under way up to
    /// `options.wait` ([`SnatchError::Timeout`] then), woken by the lock's release, or when the runner's lease would
    /// lapse. One Redis, a Sentinel master or a Cluster, not Redlock.
    pub async fn shared_turn(&self, key: &str, options: &LockOptions, store_errors: bool) -> Result<Turn, SnatchError> {
        let keys = self.checked_keys(key, options)?;
        let node = self.shared_node()?;
        let _busy = self.enter()?;
        let (ttl, deadline) = (self.lease_ttl(options), Instant::now() + options.wait);
        let mut reader = Reader::new(store_errors);
        let mut wake: Option<(Arc<tokio::sync::Notify>, Vec<Watch>)> = None;
        loop {
            if let Some(entry) = read(node, &keys, &mut reader).await? {
                return Ok(Turn::Stored(entry));
            }
            let owner = self.new_owner();
            let mark = if wake.is_some() { Mark::Held } else { Mark::None };
            let retry_in = match self.nodes().acquire(&keys, &owner, ttl, mark).await? {
                Acquire::Won(grant) => {
                    // Its turn taken: the next waiter in this process is woken by the next release.
                    wake.iter_mut().flat_map(|(_, watches)| watches).for_each(Watch::took_turn);
                    let lease = self.supervise(keys.clone(), owner, grant, ttl, options);
                    // A round that ended between the read and the acquisition stored its result: that is the answer.
                    if let Some(entry) = read(node, &keys, &mut reader).await? {
                        let _ = lease.release().await;
                        return Ok(Turn::Stored(entry));
                    }
                    return Ok(Turn::Run(lease));
                }
                Acquire::Taken { retry_in } | Acquire::Contended { retry_in, .. } => retry_in,
                Acquire::Split => Duration::ZERO,
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(not_acquired(key, options.wait));
            }
            reader.waits();
            let Some((notify, _watches)) = &wake else {
                // Subscribed, then at once again: the round may have ended before the subscription was made.
                wake = Some(self.nodes().watch(&keys, None).await);
                continue;
            };
            self.pause(notify, retry_in.saturating_add(Duration::from_millis(1)).min(left)).await?;
        }
    }

    /// Stores what the round of `lease` came to (`error`: fn's error rather than its value; `payload`: the caller's
    /// bytes) for `ttl`, while the lease's lock is still ours; false, and nothing stored, when it is not.
    pub async fn store_shared(
        &self,
        lease: &Lease,
        error: bool,
        payload: Vec<u8>,
        ttl: Duration,
    ) -> Result<bool, SnatchError> {
        let node = self.shared_node()?;
        let _busy = self.releasing();
        let entry = Entry { error, fence: lease.fence(), payload }.encode();
        node.store_shared(lease.keys(), lease.owner(), &entry, ttl.as_millis() as u64).await
    }

    /// Whether this locker keeps shared results: not with Redlock (an error then).
    pub(crate) fn check_shared(&self) -> Result<(), SnatchError> {
        self.shared_node().map(drop)
    }

    /// The node of shared results: not with Redlock, whose nodes could each hold another round's.
    fn shared_node(&self) -> Result<&Node, SnatchError> {
        self.nodes().single().ok_or_else(|| {
            SnatchError::type_arg("shared results need one Redis, a Sentinel master or a Cluster, not Redlock")
        })
    }
}

/// The entry of `keys` that `reader` takes, if any.
async fn read(node: &Node, keys: &LockKeys, reader: &mut Reader) -> Result<Option<Entry>, SnatchError> {
    let bytes = node.read_shared(keys).await?;
    Ok(bytes.and_then(Entry::decode).and_then(|entry| reader.take(entry)))
}
