//! The set of Redis nodes a locker writes to, and the majority rule over their answers.
//!
//! One URL is the single-node case of the same rule (a majority of one). Several URLs are Redlock: every command
//! goes to all nodes in parallel, and an acquisition or extension holds only when a majority agreed and the lease
//! still has validity left: `ttl − elapsed − (ttl·drift_factor + 2 ms)`, on a monotonic clock started before the
//! first request. A won acquisition's fence, the highest counter of its majority, is then recorded on a majority
//! (a second round), so that fences rise whichever majority grants the next one.

use crate::redlock::cleanup::Cleanups;
use crate::server::node::{Mark, Node};
use crate::server::script_call::ScriptCall;
use crate::server::waker::Watch;
use futures_util::future::join_all;
use snatch_protocol::acquisition::Acquired;
use snatch_protocol::keys::LockKeys;
use snatch_protocol::owner;
use snatch_protocol::run::Inspection;
use snatch_protocol::SnatchError;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Why an acquisition that one Redis granted failed all the same: its answer came too late for the lease to be of
/// use (validity = ttl − elapsed − drift, as for Redlock).
pub(crate) const VALIDITY_ELAPSED_ON_ONE_NODE: &str = "the lease's validity elapsed before Redis answered";

/// A won acquire round.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Grant {
    /// The highest fence of the nodes that granted the lock.
    pub(crate) fence: i64,
    /// When the round started (monotonic).
    pub(crate) started: Instant,
    /// Until when the lease is guaranteed.
    pub(crate) valid_until: Instant,
}

/// The outcome of one acquire round.
#[derive(Debug)]
pub(crate) enum Acquire {
    /// A majority is ours.
    Won(Grant),
    /// Held by someone else; `retry_in` hints when the lease of the holder ends.
    Taken { retry_in: Duration },
    /// Redlock only: no one holds a majority, the nodes' votes having split between competing clients (each
    /// has released what it got). Worth another round after a random delay, even for a single attempt.
    Split,
    /// Redlock only: no majority, with some nodes failing and some held by other clients. The key may just be
    /// taken, so a call that may wait tries again like [`Acquire::Taken`]; `error` is the failure to report when
    /// it may not (the failing nodes may have cost the majority).
    Contended { retry_in: Duration, error: SnatchError },
}

/// The outcome of one extension round.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Extend {
    /// A majority renewed the lease, valid until this instant (in the past when the round took longer than the
    /// validity it bought).
    Renewed { valid_until: Instant },
    /// A majority answered that the key is no longer ours.
    Refused,
}

/// The Redis nodes of a locker.
pub(crate) struct Nodes {
    nodes: Vec<Node>,
    drift_factor: f64,
    /// Releases of tokens a failed or late call may have left, made in the background.
    cleanups: Cleanups,
}

impl Nodes {
    pub(crate) fn new(nodes: Vec<Node>, drift_factor: f64) -> Self {
        Self { nodes, drift_factor, cleanups: Cleanups::default() }
    }

    /// The node, when there is only one.
    pub(crate) fn single(&self) -> Option<&Node> {
        match self.nodes.as_slice() {
            [node] => Some(node),
            _ => None,
        }
    }

    /// Every node.
    pub(crate) fn all(&self) -> &[Node] {
        &self.nodes
    }

    /// How many nodes make a majority.
    pub(crate) fn quorum(&self) -> usize {
        self.nodes.len() / 2 + 1
    }

    /// Runs `call` on the nodes in turn: the answer of the first that answers, or the last error.
    pub(crate) async fn first<T: redis::FromRedisValue>(&self, call: ScriptCall) -> Result<T, SnatchError> {
        let mut error = SnatchError::Closed;
        for node in &self.nodes {
            match node.invoke(call.clone()).await {
                Ok(answer) => return Ok(answer),
                Err(e) => error = e,
            }
        }
        Err(error)
    }

    /// Runs `call` on every node: the answers of those that answered, or the error of the first when none did.
    pub(crate) async fn every<T: redis::FromRedisValue>(&self, call: ScriptCall) -> Result<Vec<T>, SnatchError> {
        let (answered, failed): (Vec<_>, Vec<_>) =
            join_all(self.nodes.iter().map(|node| node.invoke::<T>(call.clone())))
                .await
                .into_iter()
                .partition(Result::is_ok);
        if answered.is_empty() {
            return Err(failed.into_iter().find_map(Result::err).unwrap_or(SnatchError::Closed));
        }
        Ok(answered.into_iter().filter_map(Result::ok).collect())
    }

    /// When a lease of `ttl` requested at `start` stops being guaranteed: `start + ttl − drift`.
    pub(crate) fn valid_until(&self, start: Instant, ttl: Duration) -> Instant {
        let drift = ttl.mul_f64(self.drift_factor) + Duration::from_millis(2);
        start + ttl.saturating_sub(drift)
    }

    /// Tries to acquire on every node, marking the lock as waited for as `mark` says (see protocol/scripts.rs). On a failed round, our token is removed from every node again (in the background when some
    /// node failed to answer).
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        keys: &LockKeys,
        token: &str,
        ttl: Duration,
        mark: Mark<'_>,
    ) -> Result<Acquire, SnatchError> {
        let start = Instant::now();
        let ttl_ms = ttl.as_millis() as u64;
        // With several nodes, a refusal names the holder, to tell a key held by a majority from split votes.
        let name_holder = self.nodes.len() > 1;
        let answers = join_all(self.nodes.iter().map(|n| n.acquire(keys, token, ttl_ms, name_holder, mark))).await;
        let valid_until = self.valid_until(start, ttl);

        let mut won = 0;
        let mut fence = 0;
        // The fence each granting node gave, by the node's index.
        let mut granted = Vec::new();
        let mut retry_in = Duration::MAX;
        let mut holders = Vec::new();
        let mut failures = Vec::new();
        for (index, answer) in answers.into_iter().enumerate() {
            match answer {
                Ok(Acquired::Won { fence: f }) => {
                    won += 1;
                    fence = fence.max(f);
                    granted.push((index, f));
                }
                Ok(Acquired::Taken { pttl_ms, holder }) => {
                    retry_in = retry_in.min(Duration::from_millis(pttl_ms.max(0) as u64));
                    holders.extend(holder);
                }
                // The acquire script raises a new counter itself: a fence below the floor is no fence.
                Ok(Acquired::NewCounter) => failures.push(self.nodes[index].failure("a fence below the clock floor")),
                Err(e) => failures.push(e),
            }
        }
        if won >= self.quorum() && Instant::now() < valid_until {
            let grant = Grant { fence, started: start, valid_until };
            // The fence is the highest counter of the majority: the granting nodes whose counter is lower are raised
            // to it, so that any later majority (which shares a node with this one) gives a higher fence, however
            // far apart the counters were (a node restarted empty starts its counter from its clock). Counters in
            // step, the usual case, cost no second round.
            let behind: Vec<&Node> = granted.iter().filter(|(_, f)| *f < fence).map(|(i, _)| &self.nodes[*i]).collect();
            if behind.is_empty() {
                return Ok(Acquire::Won(grant));
            }
            let raised = join_all(behind.iter().map(|n| n.raise_fence(keys, fence))).await;
            let failed: Vec<SnatchError> = raised.into_iter().filter_map(Result::err).collect();
            if won - failed.len() >= self.quorum() && Instant::now() < valid_until {
                return Ok(Acquire::Won(grant));
            }
            self.release_later(keys, token, Instant::now(), false);
            return Err(self.failure(failed, "the validity window elapsed before the fence was recorded"));
        }
        if !failures.is_empty() {
            // A node that failed may still have set our token: remove it everywhere, without making the caller
            // wait for nodes that do not answer. A node's release follows its acquisition on one connection.
            self.release_later(keys, token, Instant::now(), false);
        } else if won > 0 {
            self.release(keys, token).await;
        }
        if won + failures.len() < self.quorum() {
            // Even the failed nodes could not have made us a majority. Without failures, and with no other client
            // holding a majority either, the votes split between contenders: none of them holds the key.
            if failures.is_empty() && name_holder && !self.majority_among(holders) {
                return Ok(Acquire::Split);
            }
            return Ok(Acquire::Taken { retry_in });
        }
        let error = self.failure(failures, "the validity window elapsed before a majority answered");
        if self.nodes.len() > 1 && !holders.is_empty() {
            return Ok(Acquire::Contended { retry_in, error });
        }
        Err(error)
    }

    /// Whether one token appears at least a majority of times among `holders`.
    fn majority_among(&self, mut holders: Vec<String>) -> bool {
        holders.sort_unstable();
        holders.chunk_by(|a, b| a == b).any(|same| same.len() >= self.quorum())
    }

    /// Sets the lease of our key to `ttl` on every node (a `plain` lease's by the server's own command where it has
    /// it: [`Node::extend`]).
    pub(crate) async fn extend(
        &self,
        keys: &LockKeys,
        token: &str,
        ttl: Duration,
        plain: bool,
    ) -> Result<Extend, SnatchError> {
        let start = Instant::now();
        let ttl_ms = ttl.as_millis() as u64;
        let answers = join_all(self.nodes.iter().map(|n| n.extend(keys, token, ttl_ms, plain))).await;
        self.count_renewals(answers, self.valid_until(start, ttl))
    }

    /// Makes the lock handed over with `token` `owner`'s on every node, for `ttl`: a majority must, as for an extension;
    /// when none did, those that did give it back.
    pub(crate) async fn adopt(
        self: &Arc<Self>,
        keys: &LockKeys,
        token: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<Extend, SnatchError> {
        let start = Instant::now();
        let ttl_ms = ttl.as_millis() as u64;
        let answers = join_all(self.nodes.iter().map(|n| n.adopt(keys, token, owner, ttl_ms))).await;
        let adopted = self.count_renewals(answers, self.valid_until(start, ttl));
        // Some node may have made it ours (one that failed to answer, too).
        if !matches!(adopted, Ok(Extend::Renewed { .. })) && (self.nodes.len() > 1 || adopted.is_err()) {
            self.release_later(keys, owner, Instant::now(), false);
        }
        adopted
    }

    /// A round of extensions (or adoptions), from each node's answer: whether the key was ours there.
    fn count_renewals(
        &self,
        answers: Vec<Result<bool, SnatchError>>,
        valid_until: Instant,
    ) -> Result<Extend, SnatchError> {
        let mut renewed = 0;
        let mut failures = Vec::new();
        for answer in answers {
            match answer {
                Ok(true) => renewed += 1,
                Ok(false) => {}
                Err(e) => failures.push(e),
            }
        }
        if renewed >= self.quorum() {
            return Ok(Extend::Renewed { valid_until });
        }
        if renewed + failures.len() < self.quorum() {
            return Ok(Extend::Refused);
        }
        Err(self.failure(failures, "no majority answered"))
    }

    /// Deletes our key on every node. With one node, true when it was ours and a failure is an error; with
    /// several, true when a majority confirmed, and nodes that are down are ignored.
    pub(crate) async fn release(&self, keys: &LockKeys, token: &str) -> bool {
        self.try_release(keys, token, false).await.unwrap_or(false)
    }

    /// Like [`Nodes::release`], but a single node's failure is reported; a `plain` lease's by the server's own
    /// command where it has it ([`Node::release`]).
    pub(crate) async fn try_release(&self, keys: &LockKeys, token: &str, plain: bool) -> Result<bool, SnatchError> {
        let answers = join_all(self.nodes.iter().map(|n| n.release(keys, token, plain))).await;
        if let [single] = answers.as_slice() {
            return single.clone();
        }
        Ok(answers.iter().filter(|a| matches!(a, Ok(true))).count() >= self.quorum())
    }

    /// What the nodes hold for the lock of `keys`: `None` when it is free (held on fewer than a majority of nodes),
    /// else the least lease left among the nodes that hold it (ms; -1 for a key without expiry), the highest fence
    /// counter, and the holder's instance (the one a majority names). An error when fewer than a majority answered
    /// (with one node, its error).
    pub(crate) async fn inspect(&self, keys: &LockKeys) -> Result<Option<Inspection>, SnatchError> {
        let answers = self.majority(join_all(self.nodes.iter().map(|n| n.inspect(keys))).await)?;
        let fence = answers.iter().filter_map(|held| held.fence).max().unwrap_or(0);
        let leases: Vec<i64> = answers.iter().filter_map(|held| held.lease_ms).collect();
        if leases.len() < self.quorum() {
            return Ok(None);
        }
        let mut owners: Vec<&str> = answers.iter().filter_map(|held| held.owner.as_deref()).collect();
        owners.sort_unstable();
        let holder = owners
            .chunk_by(|a, b| a == b)
            .find(|same| same.len() >= self.quorum())
            .and_then(|same| owner::holder(same[0]))
            .map(str::to_owned);
        Ok(leases.into_iter().min().map(|ttl_ms| Inspection { ttl_ms, fence, holders: 1, holder }))
    }

    /// Deletes the lock of `keys` on every node, whoever holds it; true when some node had it. An error when fewer
    /// than a majority answered (with one node, its error).
    pub(crate) async fn force_release(&self, keys: &LockKeys) -> Result<bool, SnatchError> {
        let answers = self.majority(join_all(self.nodes.iter().map(|n| n.force_release(keys))).await)?;
        Ok(answers.contains(&true))
    }

    /// The answers of the nodes that answered, when a majority did; else the error for the round.
    fn majority<T>(&self, answers: Vec<Result<T, SnatchError>>) -> Result<Vec<T>, SnatchError> {
        let (answered, failures): (Vec<_>, Vec<_>) = answers.into_iter().partition(Result::is_ok);
        if answered.len() < self.quorum() {
            return Err(self.failure(failures.into_iter().filter_map(Result::err).collect(), "no majority answered"));
        }
        Ok(answered.into_iter().filter_map(Result::ok).collect())
    }

    /// How many of this locker's waiters on the lock of `keys` still wait (on its first node: each waiter watches
    /// every node).
    pub(crate) fn waiting(&self, keys: &LockKeys) -> usize {
        self.nodes.first().map_or(0, |node| node.waiting(keys))
    }

    /// Arranges for the returned notify to be woken when the lock of `keys` is released on any node (for a `fair`
    /// waiter, a release that names it). The watches keep that arranged until dropped; nodes where it cannot be
    /// arranged are left out.
    pub(crate) async fn watch(&self, keys: &LockKeys, fair: Option<&str>) -> (Arc<Notify>, Vec<Watch>) {
        let notify = Arc::new(Notify::new());
        let watches = join_all(self.nodes.iter().map(|n| n.watch(keys, &notify, fair))).await;
        (notify, watches.into_iter().flatten().collect())
    }

    /// Deletes our key on every node in the background (owner-checked) once `at` has come; `close` waits for it
    /// (and does it at once). With `again`, once more a little later if the key was not found ours: for a command
    /// Redis may apply after this release (sent on another connection, or on one since reset). Must be called
    /// within the Tokio runtime.
    pub(crate) fn release_later(self: &Arc<Self>, keys: &LockKeys, token: &str, at: Instant, again: bool) {
        let (nodes, keys, token) = (self.clone(), keys.clone(), token.to_owned());
        self.cleanups.release(at, again, move || {
            let (nodes, keys, token) = (nodes.clone(), keys.clone(), token.clone());
            async move { nodes.release(&keys, &token).await }
        });
    }

    /// Waits for the background releases, then drops every connection.
    pub(crate) async fn close(&self) {
        self.cleanups.close().await;
        self.nodes.iter().for_each(Node::close);
    }

    /// The error for a round that failed because nodes did not answer in time: with one node, that node's own
    /// error (or, when it answered too late, [`VALIDITY_ELAPSED_ON_ONE_NODE`]); with several, a quorum error naming
    /// each failed node (or `none_failed`).
    fn failure(&self, failures: Vec<SnatchError>, none_failed: &str) -> SnatchError {
        if self.nodes.len() == 1 {
            if let Some(e) = failures.into_iter().next() {
                return e;
            }
            return self.nodes[0].failure(VALIDITY_ELAPSED_ON_ONE_NODE);
        }
        let mut lines: Vec<String> = failures.iter().map(SnatchError::to_string).collect();
        if lines.is_empty() {
            lines.push(none_failed.to_owned());
        }
        SnatchError::Quorum { failures: lines }
    }
}
