//! Acquisitions and releases on a single Redis whose commands the caller carries on a socket of its own (the Node
//! binding sends them on a socket that node's event loop polls, saving the hops between threads of the locker's
//! connection), and doing what their replies come to (decided by snatch-protocol's direct/answer.rs). A call whose
//! reply the caller could not get because its socket failed, or that the server could not run there (see
//! [`Answer::Fallback`]), is finished on the locker's own connection by `fallback`, with the same token (an acquisition
//! or release made again with its token is safe: the acquire script finds the key ours and keeps it); one that timed
//! out fails, as it would on the locker's connection.

use crate::config::LockOptions;
use crate::lock::lease::Lease;
use crate::lock::locker::{Holder, Locker};
use crate::redlock::quorum::{Grant, Nodes, VALIDITY_ELAPSED_ON_ONE_NODE};
use crate::server::node::Node;
use snatch_protocol::acquisition;
use snatch_protocol::direct::answer::{Acquisition, Answer, Release, Way};
use snatch_protocol::direct::commands::DirectCommand;
use snatch_protocol::direct::kept::KeptCounters;
use snatch_protocol::direct::session::CallReply;
use snatch_protocol::keys::{Kind, LockKeys};
use snatch_protocol::offers::{CompareAndDelete, Offers};
use snatch_protocol::SnatchError;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// What an acquisition's reply comes to, done.
#[derive(Debug)]
pub enum AcquireSettled {
    /// The acquisition's outcome: the lease, `None` when the key is held by someone else, or an error.
    Done(Result<Option<Arc<Lease>>, SnatchError>),
    /// Finish it on the locker's own connection ([`DirectAcquire::fallback`]).
    Fallback(DirectAcquire),
    /// Send it again, directly: its command changed (the acquire script).
    Resend(DirectAcquire),
}

/// What a release's reply comes to, done.
#[derive(Debug)]
pub enum ReleaseSettled {
    /// Whether the key was still ours, or an error.
    Done(Result<bool, SnatchError>),
    /// Finish it on the locker's own connection ([`DirectRelease::fallback`]).
    Fallback(DirectRelease),
    /// Send it again, directly: by the release script (the server's compare-and-delete left it to the script).
    Resend(DirectRelease),
}

/// One attempt to acquire a key on a single Redis, its command sent by the caller.
pub struct DirectAcquire {
    locker: Locker,
    keys: LockKeys,
    /// What the key is to hold (snatch-protocol's owner.rs).
    owner: String,
    ttl: Duration,
    options: LockOptions,
    started: Instant,
    /// How the lock is taken: which command (see [`Way`]).
    way: Way,
    /// Whether its command was encoded once already.
    sent: bool,
    /// Whether its commands keep the fence counter (`PEXPIRE`), decided when first encoded ([`KeptCounters`]).
    keep_counter: bool,
}

impl std::fmt::Debug for DirectAcquire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectAcquire").field("key", &self.keys.key).finish()
    }
}

impl DirectAcquire {
    /// One attempt to acquire `key` with `options` whose command the caller sends, or `None` when it goes by the
    /// locker's own connection: direct calls do not apply to the locker ([`Locker::direct_node`]), or `options` wait
    /// (waiting acquisitions stay on the locker's connection). The caller counts the call with [`Locker::enter`].
    pub fn new(locker: &Locker, key: &str, options: &LockOptions) -> Result<Option<Self>, SnatchError> {
        let keys = locker.checked_keys(key, options)?;
        Ok(Self::of(locker, keys, options, Way::Commands))
    }

    /// One attempt to hold `key` as `holder` (a semaphore's permit, a read or the write lock of a read-write lock)
    /// whose command (its script) the caller sends, or `None` when it goes by the locker's own connection, as
    /// [`DirectAcquire::new`].
    pub fn held(
        locker: &Locker,
        key: &str,
        holder: Holder,
        options: &LockOptions,
    ) -> Result<Option<Self>, SnatchError> {
        let keys = locker.holder_keys(key, holder, options)?;
        Ok(Self::of(locker, keys, options, Way::Script))
    }

    /// The attempt to take `keys` by `way`, when it can go by a direct call.
    fn of(locker: &Locker, keys: LockKeys, options: &LockOptions, way: Way) -> Option<Self> {
        if locker.direct_node().is_none() || !options.wait.is_zero() || options.fair {
            return None;
        }
        Some(Self {
            locker: locker.clone(),
            keys,
            owner: locker.new_owner(),
            ttl: locker.lease_ttl(options),
            options: options.clone(),
            started: Instant::now(),
            way,
            sent: false,
            keep_counter: true,
        })
    }

    /// The command that takes the lock.
    pub fn command(&self) -> DirectCommand<'_> {
        let values = acquisition::Values {
            lock: &self.keys.lock,
            fence: &self.keys.fence,
            token: &self.owner,
            ttl_ms: self.ttl.as_millis(),
            fence_ttl_ms: self.locker.config().fence_ttl.as_millis(),
            keep_counter: self.keep_counter,
        };
        match (self.way, &self.keys.kind) {
            (Way::Commands, _) => DirectCommand::Acquire(values),
            (Way::Script, Kind::Lock) => DirectCommand::AcquireByScript(values),
            (Way::Script, _) => DirectCommand::AcquireHeld {
                keys: &self.keys,
                token: &self.owner,
                ttl_ms: values.ttl_ms,
                fence_ttl_ms: values.fence_ttl_ms,
                one_slot: self.locker.one_slot(),
            },
        }
    }

    /// The command was encoded at `at`: the lease counts from then, or from the first, when the attempt was sent
    /// again (the key may be ours since then). The first encoding decides whether the commands keep the counter.
    pub fn encoded(&mut self, at: std::time::Instant) {
        if !self.sent {
            self.started = Instant::from_std(at);
            self.sent = true;
            self.keep_counter = self.kept_counters().is_none_or(|(kept, index)| kept.due(index, at));
        }
    }

    /// The locker's record of kept counters, and this lock's counter's place in it ([`Locker::kept_counter`]).
    fn kept_counters(&self) -> Option<(&KeptCounters, usize)> {
        self.locker.kept_counter(&self.keys)
    }

    /// Does what the command's reply, or its absence, comes to (snatch-protocol's [`Acquisition`]): the lease
    /// (supervised like any other), `None` when the key is held by someone else, or an error; or the attempt to send
    /// again, by the acquire script, or to finish on the locker's own connection. Must be called within the Tokio
    /// runtime.
    pub fn settle(self, reply: CallReply) -> AcquireSettled {
        let answer = Answer::of(reply);
        if self.way == Way::Commands && self.keep_counter && matches!(answer, Answer::Int(_)) {
            if let Some((kept, index)) = self.kept_counters() {
                kept.kept(index, self.started.into_std());
            }
        }
        let valid_until = self.locker.nodes().valid_until(self.started, self.ttl);
        let nodes = self.locker.nodes();
        match Acquisition::of(answer, self.way, valid_until.into_std(), Instant::now().into_std()) {
            Acquisition::Won { fence } => {
                let grant = Grant { fence, started: self.started, valid_until };
                AcquireSettled::Done(Ok(Some(self.locker.supervise(
                    self.keys,
                    self.owner,
                    grant,
                    self.ttl,
                    &self.options,
                ))))
            }
            Acquisition::Taken => AcquireSettled::Done(Ok(None)),
            Acquisition::ByScript => AcquireSettled::Resend(DirectAcquire { way: Way::Script, ..self }),
            Acquisition::Fallback => AcquireSettled::Fallback(self),
            Acquisition::Failed { cause } => {
                // Redis may still apply the commands (they timed out: undo them, whether they come before this release
                // or after), or took the key before a later one failed (say, `INCR` refused for want of memory).
                nodes.release_later(&self.keys, &self.owner, Instant::now(), cause.is_none());
                AcquireSettled::Done(Err(failure(single(nodes), cause)))
            }
            Acquisition::Late => {
                // Ours, but too late to be of use: give it back. (Fences rise with the acquisitions used because of
                // this: snatch-protocol's acquisition::COMMANDS.)
                nodes.release_later(&self.keys, &self.owner, Instant::now(), false);
                AcquireSettled::Done(Err(single(nodes).failure(VALIDITY_ELAPSED_ON_ONE_NODE)))
            }
        }
    }

    /// The key as the user gave it.
    pub fn key(&self) -> &str {
        &self.keys.key
    }

    /// The cluster slot of the lock (which master of a cluster the call goes to).
    pub fn slot(&self) -> u16 {
        self.keys.slot()
    }

    /// Makes the attempt on the locker's own connection, with the same token.
    pub async fn fallback(self) -> Result<Option<Arc<Lease>>, SnatchError> {
        self.locker.attempt(self.keys, self.owner, &self.options).await
    }
}

/// The release of a lease on a single Redis, its command sent by the caller.
#[derive(Debug)]
pub struct DirectRelease {
    lease: Arc<Lease>,
    /// Sent by the server's own compare-and-delete, decided when encoded: a plain lease's, on a server that offers
    /// one, not sent again by script already.
    compare_and_delete: Option<CompareAndDelete>,
    /// Sent again by the release script ([`ReleaseSettled::Resend`]).
    resent: bool,
}

impl DirectRelease {
    /// Starts the release of `lease` (a lock, a semaphore's permit, a read or the write lock), held on `locker`, with a
    /// command the caller sends; the lease counts as released from now on. `None` when direct calls do not apply to the
    /// locker ([`Locker::direct_node`]), while minHold keeps the key, or when it was released already:
    /// [`Lease::release`] then does what is left (the release, one that keeps the key, or nothing).
    pub fn of(locker: &Locker, lease: &Arc<Lease>) -> Option<Self> {
        if locker.direct_node().is_none() || !lease.hold_left().is_zero() || !lease.end_released() {
            return None;
        }
        Some(Self { lease: lease.clone(), compare_and_delete: None, resent: false })
    }

    /// Its command is about to be encoded on a socket whose server offers `offers`: which command it is.
    pub fn encoded(&mut self, offers: Offers) {
        self.compare_and_delete = offers.compare_and_delete.filter(|_| self.lease.plain() && !self.resent);
    }

    /// The command that releases the lock: the server's compare-and-delete ([`DirectRelease::encoded`]); or the
    /// release script, of a lock or the write lock (its key is a lock's), which consecutive releases share; a permit's
    /// or a read lock's own.
    pub fn command(&self) -> DirectCommand<'_> {
        let cluster = single(self.lease.nodes()).is_cluster();
        let (keys, token) = (self.lease.keys(), self.lease.owner());
        if let Some(command) = self.compare_and_delete {
            return DirectCommand::CompareAndDelete { command, lock: &keys.lock, token };
        }
        match keys.kind {
            Kind::Lock | Kind::Write { .. } => DirectCommand::Release { lock: &keys.lock, token, cluster },
            Kind::Semaphore(_) | Kind::Read { .. } => DirectCommand::ReleaseHeld { keys, token, cluster },
        }
    }

    /// Does what the reply, or its absence, comes to (snatch-protocol's [`Release`]): whether the key was still
    /// ours, or an error; or the release to finish on the locker's own connection.
    pub fn settle(self, reply: CallReply) -> ReleaseSettled {
        let answer = Answer::of(reply);
        let release = if self.compare_and_delete.is_some() {
            Release::of_compare_and_delete(answer)
        } else {
            Release::of(answer)
        };
        match release {
            Release::Done(released) => ReleaseSettled::Done(Ok(released)),
            Release::ByScript => ReleaseSettled::Resend(Self { compare_and_delete: None, resent: true, ..self }),
            Release::Fallback => ReleaseSettled::Fallback(self),
            Release::Failed { cause } => ReleaseSettled::Done(Err(failure(single(self.lease.nodes()), cause))),
        }
    }

    /// The cluster slot of the lock (which master of a cluster the call goes to).
    pub fn slot(&self) -> u16 {
        self.lease.slot()
    }

    /// Releases on the locker's own connection.
    pub async fn fallback(self) -> Result<bool, SnatchError> {
        self.lease.nodes().try_release(self.lease.keys(), self.lease.owner(), self.lease.plain()).await
    }
}

/// The error of a direct call that failed on `node` with `cause` (the server's error), or by the command timeout.
fn failure(node: &Node, cause: Option<String>) -> SnatchError {
    cause.map_or_else(|| node.timed_out(), |cause| node.failure(cause))
}

/// The node of a locker that makes direct calls.
fn single(nodes: &Nodes) -> &Node {
    nodes.single().expect("direct calls are for a single node")
}
