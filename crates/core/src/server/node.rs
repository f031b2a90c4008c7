//! One Redis deployment a lock is written to (a server, a Sentinel master, or a whole Redis Cluster): its command
//! connection (calls batched, see batcher.rs), its release notifications, and the lock scripts run on it.

use crate::config::{is_memory, LockerConfig, Topology};
use crate::server::batcher::{call_alone, Batcher};
use crate::server::connection::{Cluster, Connection, Link, Target};
use crate::server::endpoint::Access;
use crate::server::endpoint::Endpoint;
use crate::server::memory::Memory;
use crate::server::offered::Offered;
use crate::server::script_call::ScriptCall;
use crate::server::sentinel::Sentinels;
use crate::server::waker::{Waker, Watch};
use redis::{FromRedisValue, Value};
use snatch_protocol::acquisition::{self, Acquired};
use snatch_protocol::fleet::{server_version, Server};
use snatch_protocol::keys::{Kind, LockKeys};
use snatch_protocol::offers::{self, CompareAndDelete};
use snatch_protocol::scripts;
use snatch_protocol::SnatchError;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// What one node holds for a lock ([`Node::inspect`]).
#[derive(Debug)]
pub(crate) struct Held {
    /// The lease left in ms (-1 for a key without expiry); `None` when the lock is free.
    pub(crate) lease_ms: Option<i64>,
    /// The fence counter's value, if it has one.
    pub(crate) fence: Option<i64>,
    /// What the lock key holds (snatch-protocol's owner.rs), for a lock.
    pub(crate) owner: Option<String>,
}

/// Which lock an acquisition marks as waited for (the acquire script's fifth argument): a marked lock's release
/// publishes on its channel, waking the waiters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark<'a> {
    /// None: nobody waits.
    None,
    /// The lock, where another holds it: this caller waits for it.
    Held,
    /// That, and the lock once taken: other callers of this process wait behind this one.
    Always,
    /// That, and the lock once taken while others queue: a fair waiter of this id, which takes the lock only in its
    /// turn (scripts/queue.lua).
    Queued(&'a str),
}

impl Mark<'_> {
    /// The acquire script's fifth argument.
    fn arg(self) -> u8 {
        match self {
            Self::None => 0,
            Self::Held | Self::Queued(_) => 1,
            Self::Always => 2,
        }
    }
}

/// How long a fair waiter's place in a queue lasts unless it comes back (scripts/queue.lua): a waiter that crashed or
/// stopped keeps the ones behind it waiting no longer.
pub(crate) const PLACE_LEASE: Duration = Duration::from_secs(2);

/// One Redis deployment.
pub(crate) struct Node {
    connection: Arc<Connection>,
    batcher: Batcher,
    /// Release notifications for waiters.
    waker: Arc<Waker>,
    /// Replicas that must acknowledge an acquisition before it counts (0: none).
    wait_replicas: u32,
    /// How long a fence counter is kept after an acquisition, in ms.
    fence_ttl_ms: u64,
    /// The key under the locker's prefix that asks whether the server runs a compare-and-delete of its own before a
    /// lock's key does; `None` for a prefix that is not ASCII (see [`Node::release`]).
    probe_key: Option<String>,
}

impl Node {
    /// The node of `target`, named `label` in errors, with the locker's command timeout, replicas to wait for and
    /// fence counters' ttl; connects only on first use.
    pub(crate) fn new(label: String, target: Target, config: &LockerConfig) -> Self {
        let connection = Arc::new(Connection::new(label, target, config.command_timeout));
        let waker = Arc::new(Waker::new(connection.clone()));
        let (wait_replicas, fence_ttl_ms) = (config.wait_replicas, config.fence_ttl.as_millis() as u64);
        let probe_key = config.prefix.is_ascii().then(|| [config.prefix.as_str(), "redis-snatch-probe"].concat());
        let batcher = Batcher::new(connection.clone());
        Self { batcher, connection, waker, wait_replicas, fence_ttl_ms, probe_key }
    }

    /// The nodes `config` writes to: each URL a server (one, or a Redlock set), or one node for a whole cluster or
    /// for the master that sentinels name, or a `memory://` store.
    pub(crate) fn all(config: &LockerConfig) -> Result<Vec<Node>, SnatchError> {
        let access = Access::new(config)?;
        let timeout = config.command_timeout;
        let labels = || config.urls.iter().map(|u| crate::redact::redact(u)).collect::<Vec<_>>().join(", ");
        Ok(match &config.topology {
            Topology::Servers if config.urls.iter().any(|url| is_memory(url)) => {
                let memory = Memory::of(&config.urls[0]).map_err(|e| SnatchError::Redis { cause: e })?;
                vec![Self::new(config.urls[0].clone(), Target::Memory(memory), config)]
            }
            Topology::Servers => config
                .urls
                .iter()
                .map(|url| {
                    let endpoint = access.endpoint(url)?;
                    Ok(Self::new(endpoint.label.clone(), Target::Server(endpoint), config))
                })
                .collect::<Result<_, SnatchError>>()?,
            Topology::Cluster => {
                let target = Target::cluster(config.urls.clone(), access, timeout)?;
                vec![Self::new(format!("cluster ({})", labels()), target, config)]
            }
            Topology::Sentinel { master } => {
                // The sentinels' own credentials are in their URLs; the locker's are the master's.
                let bare = access.without_credentials();
                let sentinels = config.urls.iter().map(|url| bare.endpoint(url)).collect::<Result<_, _>>()?;
                let target = Target::Sentinel(Sentinels::new(sentinels, master.clone(), access));
                vec![Self::new(format!("master '{master}' of sentinels ({})", labels()), target, config)]
            }
        })
    }

    /// Runs ACQUIRE (PERMIT_ACQUIRE for a semaphore, READ_ACQUIRE or WRITE_ACQUIRE for a read-write lock) for `keys`
    /// with `token` and a lease of `ttl_ms`; when a lock is taken, the holder's token is read too if `name_holder`;
    /// `mark` says which lock is marked as waited for (its release then wakes the waiters).
    pub(crate) async fn acquire(
        &self,
        keys: &LockKeys,
        token: &str,
        ttl_ms: u64,
        name_holder: bool,
        mark: Mark<'_>,
    ) -> Result<Acquired, SnatchError> {
        // A fair waiter's queue and places, and its id.
        let queued = match mark {
            Mark::Queued(waiter) => Some((keys.queue(self.is_cluster()), waiter)),
            _ => None,
        };
        let place_ms = PLACE_LEASE.as_millis() as u64;
        if keys.kind == Kind::Lock {
            let mut call = ScriptCall::new(&scripts::ACQUIRE, 2 + if queued.is_some() { 2 } else { 0 });
            let values = acquisition::Values {
                lock: &keys.lock,
                fence: &keys.fence,
                token,
                ttl_ms: u128::from(ttl_ms),
                fence_ttl_ms: u128::from(self.fence_ttl_ms),
                keep_counter: true,
            };
            let Some(([queue, places], waiter)) = &queued else {
                // The call the direct connection makes too (snatch-protocol's scripts::acquire_words).
                scripts::acquire_words(&mut call, &values, name_holder, mark.arg());
                return self.acquire_call(keys, token, call).await;
            };
            call.arg(&keys.lock).arg(&keys.fence).arg(queue).arg(places);
            call.arg(token).arg(ttl_ms).arg(self.fence_ttl_ms);
            call.arg(u8::from(name_holder)).arg(mark.arg()).arg(*waiter).arg(place_ms);
            return self.acquire_call(keys, token, call).await;
        }
        // A permit, a read or the write lock: the keys and arguments the direct connection writes too
        // (snatch-protocol's scripts::held_acquire_keys and held_acquire_args); neither names a holder (they are not on
        // Redlock), and every release of a permit wakes a semaphore's waiters.
        let (script, [lock, fence, third]) = scripts::held_acquire_keys(keys, self.is_cluster());
        let mut call = ScriptCall::new(script, 3 + if queued.is_some() { 2 } else { 0 });
        call.arg(&*lock).arg(&*fence).arg(&*third);
        if let Some(([queue, places], _)) = &queued {
            call.arg(queue).arg(places);
        }
        let waits = mark != Mark::None;
        scripts::held_acquire_args(
            &mut call,
            &keys.kind,
            token,
            u128::from(ttl_ms),
            u128::from(self.fence_ttl_ms),
            waits,
        );
        if let Some((_, waiter)) = queued {
            call.arg(waiter).arg(place_ms).arg(if self.is_cluster() { scripts::CLUSTER } else { "0" });
        }
        self.acquire_call(keys, token, call).await
    }

    /// Runs ACQUIRE_PAIR: one attempt at the lock of `first` (keys, token), then, when it was taken, one at `second`'s,
    /// each for `ttl_ms`, keeping their fence counters when `keep_counter`; what each came to (the second's `None`
    /// when not tried). `None` when this node cannot take both in one call (a Redis Cluster, whose keys may be on two
    /// masters, or a locker that waits for replicas' acknowledgements): the caller takes them one by one.
    pub(crate) async fn acquire_pair(
        &self,
        (first, first_token): (&LockKeys, &str),
        (second, second_token): (&LockKeys, &str),
        ttl_ms: u64,
        keep_counter: bool,
    ) -> Option<Result<(Acquired, Option<Acquired>), SnatchError>> {
        if self.is_cluster() || self.wait_replicas > 0 || first.kind != Kind::Lock || second.kind != Kind::Lock {
            return None;
        }
        let mut call = ScriptCall::new(&scripts::ACQUIRE_PAIR, 4);
        call.arg(&first.lock).arg(&first.fence).arg(&second.lock).arg(&second.fence);
        call.arg(first_token).arg(second_token).arg(ttl_ms).arg(self.fence_ttl_ms);
        call.arg(if keep_counter { "1" } else { "0" });
        Some(self.invoke::<Vec<i64>>(call).await.map(|answers| {
            let of = |answer: i64| Acquired::of(answer, None);
            (of(answers.first().copied().unwrap_or(-1)), answers.get(1).copied().map(of))
        }))
    }

    /// Runs the acquisition `call` of `keys` with `token`, with the replicas' acknowledgement when the locker waits
    /// for it.
    async fn acquire_call(&self, keys: &LockKeys, token: &str, call: ScriptCall) -> Result<Acquired, SnatchError> {
        if self.wait_replicas > 0 {
            return self.acquire_confirmed(keys, token, call).await;
        }
        let reply = self.call(call).await?;
        self.acquire_reply(reply)
    }

    /// An acquire script's reply, read ([`Acquired::of`]): an integer, or with the holder named `{integer, holder}`.
    fn acquire_reply(&self, reply: Value) -> Result<Acquired, SnatchError> {
        let (reply, holder) = match reply {
            Value::Int(reply) => (reply, None),
            table => {
                let (reply, holder) = redis::from_redis_value(table).map_err(|e| self.connection.failure(e))?;
                (reply, Some(holder))
            }
        };
        Ok(Acquired::of(reply, holder))
    }

    /// Runs the acquisition `call` on its own, then has Redis wait (`WAIT`, on the same connection) until
    /// `wait_replicas` replicas acknowledged it. When fewer did within the command timeout, the key is given back and
    /// the acquisition fails.
    async fn acquire_confirmed(&self, keys: &LockKeys, token: &str, call: ScriptCall) -> Result<Acquired, SnatchError> {
        let (reply, mut link) = call_alone(&self.connection, call).await?;
        let acquired = self.acquire_reply(reply)?;
        if !matches!(acquired, Acquired::Won { .. }) {
            return Ok(acquired);
        }
        let (wanted, timeout) = (self.wait_replicas, self.timeout());
        let timeout_ms = timeout.as_millis() as u64;
        // WAIT answers by its own timeout; the bound here covers a connection that stopped answering.
        let acked = tokio::time::timeout(timeout * 2, link.wait_replicas(&keys.lock, wanted, timeout_ms)).await;
        let shortfall = match acked {
            Ok(Ok(acked)) if acked >= i64::from(wanted) => return Ok(acquired),
            Ok(Ok(acked)) => {
                format!("only {acked} of {wanted} replicas acknowledged the acquisition within {timeout_ms} ms")
            }
            Ok(Err(e)) => format!("waiting for {wanted} replicas to acknowledge the acquisition failed: {e}"),
            Err(_) => format!("waiting for {wanted} replicas to acknowledge the acquisition timed out"),
        };
        let _ = self.release(keys, token, false).await;
        Err(self.failure(format!("{shortfall}; the lock was released")))
    }

    /// Runs RAISE_FENCE: the fence counter of `keys` is at least `fence` from now on.
    pub(crate) async fn raise_fence(&self, keys: &LockKeys, fence: i64) -> Result<(), SnatchError> {
        let mut call = ScriptCall::new(&scripts::RAISE_FENCE, 1);
        call.arg(&keys.fence).arg(fence).arg(self.fence_ttl_ms);
        self.invoke::<i64>(call).await.map(|_| ())
    }

    /// Runs EXTEND (PERMIT_EXTEND for a semaphore's permit or a read lock): sets the lease of a key we own to `ttl_ms`;
    /// false when it is not ours. A `plain` lease's (see [`crate::Lease`]) by the server's `SET … IFEQ … PX` first,
    /// where it offers it.
    pub(crate) async fn extend(
        &self,
        keys: &LockKeys,
        token: &str,
        ttl_ms: u64,
        plain: bool,
    ) -> Result<bool, SnatchError> {
        if plain {
            let offered = &self.connection.offers().compare_and_set;
            let ttl = ttl_ms.to_string();
            let mut words = offers::compare_and_set(&keys.lock, token).to_vec();
            words.push(&ttl);
            // A server without IFEQ answers a syntax error, which quotes nothing: no need to ask first.
            if let Some(true) = self.own_command(offered, None, &words, |reply| matches!(reply, Value::Okay)).await? {
                return Ok(true);
            }
        }
        let mut call =
            ScriptCall::new(if keys.kind.in_a_set() { &scripts::PERMIT_EXTEND } else { &scripts::EXTEND }, 1);
        call.arg(&keys.lock).arg(token).arg(ttl_ms);
        Ok(self.invoke::<i64>(call).await? == 1)
    }

    /// Runs ADOPT: the lock of `keys`, handed over with `token`, is `owner`'s from now on, for `ttl_ms`; false when it
    /// does not hold that token.
    pub(crate) async fn adopt(
        &self,
        keys: &LockKeys,
        token: &str,
        owner: &str,
        ttl_ms: u64,
    ) -> Result<bool, SnatchError> {
        let mut call = ScriptCall::new(&scripts::ADOPT, 1);
        call.arg(&keys.lock).arg(token).arg(owner).arg(ttl_ms);
        Ok(self.invoke::<i64>(call).await? == 1)
    }

    /// Runs SHARED_READ: what the shared result of `keys` holds, if anything.
    pub(crate) async fn read_shared(&self, keys: &LockKeys) -> Result<Option<Vec<u8>>, SnatchError> {
        let mut call = ScriptCall::new(&scripts::SHARED_READ, 1);
        call.arg(keys.companion("result", self.is_cluster()));
        self.invoke(call).await
    }

    /// Runs SHARED_STORE: `entry` is the shared result of `keys` for `ttl_ms`, while the lock is `owner`'s; false (and
    /// nothing stored) when it is not.
    pub(crate) async fn store_shared(
        &self,
        keys: &LockKeys,
        owner: &str,
        entry: &[u8],
        ttl_ms: u64,
    ) -> Result<bool, SnatchError> {
        let mut call = ScriptCall::new(&scripts::SHARED_STORE, 2);
        call.arg(&keys.lock).arg(keys.companion("result", self.is_cluster())).arg(owner).arg(entry).arg(ttl_ms);
        Ok(self.invoke::<i64>(call).await? == 1)
    }

    /// Runs RELEASE (PERMIT_RELEASE for a semaphore's permit or a read lock): deletes a key we own and wakes its
    /// waiters; false when it is not ours.
    pub(crate) async fn release(&self, keys: &LockKeys, token: &str, plain: bool) -> Result<bool, SnatchError> {
        // A server without the command quotes the first bytes of its arguments in its refusal, which the redis crate
        // cannot read when they end inside a character (a key of emoji), and drops the connection: each is asked on a
        // key of ASCII first. A prefix that is not ASCII leaves them unused.
        if let Some(probe_key) = self.probe_key.as_deref().filter(|_| plain) {
            for command in CompareAndDelete::ALL {
                let offered = self.connection.offers().compare_and_delete(command);
                let (words, probe) = (command.words(&keys.lock, token), command.words(probe_key, "-"));
                match self.own_command(offered, Some(&probe), &words, |reply| matches!(reply, Value::Int(1))).await? {
                    Some(true) => return Ok(true),
                    // It ran: the lock did not hold its owner alone, which the script sorts out.
                    Some(false) => break,
                    None => {}
                }
            }
        }
        self.release_by_script(keys, token).await
    }

    /// Runs RELEASE (or PERMIT_RELEASE): see [`Node::release`].
    async fn release_by_script(&self, keys: &LockKeys, token: &str) -> Result<bool, SnatchError> {
        // The calls the direct connection makes too (snatch-protocol's scripts::release_words, held_release_words).
        if keys.kind == Kind::Lock {
            let mut call = ScriptCall::new(&scripts::RELEASE, 1);
            scripts::release_words(&mut call, std::iter::once((keys.lock.as_str(), token)), self.is_cluster());
            return Ok(scripts::released(self.invoke(call).await?));
        }
        let (script, key_count) = scripts::held_release_script(keys);
        let mut call = ScriptCall::new(script, key_count);
        scripts::held_release_words(&mut call, keys, token, self.is_cluster());
        Ok(scripts::released(self.invoke(call).await?))
    }

    /// Runs one of the server's own commands (`words`) where it is `offered` or not known to be (then, with `probe`,
    /// asked by that command first): whether it did it (`done` of its reply), learned on the connection; `None` where it
    /// is not offered (refused: learned), on `memory://`, which runs scripts only, or when it failed otherwise (the
    /// script then finds the failure again and reports it). Either way the script decides when the command did not
    /// do it.
    async fn own_command(
        &self,
        offered: &Offered,
        probe: Option<&[&str]>,
        words: &[&str],
        done: impl FnOnce(&Value) -> bool,
    ) -> Result<Option<bool>, SnatchError> {
        if matches!(self.connection.target(), Target::Memory(_)) || !offered.worth_trying() {
            return Ok(None);
        }
        if let Some(probe) = probe.filter(|_| !offered.known()) {
            if self.command(offered, probe).await?.is_none() {
                return Ok(None);
            }
        }
        Ok(self.command(offered, words).await?.map(|reply| done(&reply)))
    }

    /// Runs `words`, one of the server's own commands (see [`Node::own_command`]): its reply, or `None` when refused
    /// (learned on the connection) or failed otherwise while the server answers.
    async fn command(&self, offered: &Offered, words: &[&str]) -> Result<Option<Value>, SnatchError> {
        let mut command = redis::cmd(words[0]);
        command.arg(&words[1..]);
        match self.batcher.command(command).await {
            Ok(reply) => {
                offered.learned(true);
                Ok(Some(reply))
            }
            Err(SnatchError::Redis { cause }) if offers::refused(&cause) => {
                offered.learned(false);
                Ok(None)
            }
            Err(SnatchError::Redis { cause }) if !unreachable(&cause) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Tells a script that wakes waiters ([`scripts::CLUSTER`]) that it runs on a Redis Cluster, when it does.
    pub(crate) fn cluster_arg(&self, call: &mut ScriptCall) {
        if self.is_cluster() {
            call.arg(scripts::CLUSTER);
        }
    }

    /// Whether the node is a Redis Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        self.connection.target().is_cluster()
    }

    /// Runs INSPECT: the lease left on the lock of `keys` in ms (`None` when free), its fence counter's value, and
    /// what the lock key holds (its owner, for a lock).
    pub(crate) async fn inspect(&self, keys: &LockKeys) -> Result<Held, SnatchError> {
        let mut call = ScriptCall::new(&scripts::INSPECT, 2);
        call.arg(&keys.lock).arg(&keys.fence);
        let (pttl, fence, owner): (i64, Option<i64>, Option<String>) = self.invoke(call).await?;
        Ok(Held { lease_ms: (pttl != -2).then_some(pttl), fence, owner })
    }

    /// Runs FORCE_RELEASE: deletes the lock of `keys` whoever holds it and wakes its waiters; false when it was free.
    pub(crate) async fn force_release(&self, keys: &LockKeys) -> Result<bool, SnatchError> {
        let mut call = ScriptCall::new(&scripts::FORCE_RELEASE, 1);
        call.arg(&keys.lock);
        self.cluster_arg(&mut call);
        Ok(self.invoke::<i64>(call).await? == 1)
    }

    /// Queues `notify` to be woken by a release of the lock of `keys` on this node, when it is the first of this
    /// locker's waiters on it still waiting (one release, one waiter woken); a read-write lock's waiters are all woken
    /// (readers go in together, and a writer's mark keeps them out while it waits); a `fair` waiter, by a release that
    /// names it (the first in the queue). `None` when that cannot be arranged.
    pub(crate) async fn watch(&self, keys: &LockKeys, notify: &Arc<Notify>, fair: Option<&str>) -> Option<Watch> {
        let one_at_a_time = !matches!(keys.kind, Kind::Read { .. } | Kind::Write { .. });
        self.waker.watch(&keys.channel(self.is_cluster()), notify, one_at_a_time, fair).await
    }

    /// Runs QUEUE_LEAVE: fair waiter `waiter` gives up its place in the queue of `keys`.
    pub(crate) async fn leave_queue(&self, keys: &LockKeys, waiter: &str) -> Result<(), SnatchError> {
        let [queue, places] = keys.queue(self.is_cluster());
        let mut call = ScriptCall::new(&scripts::QUEUE_LEAVE, 3);
        call.arg(queue).arg(places).arg(&keys.lock).arg(waiter);
        self.cluster_arg(&mut call);
        self.invoke::<i64>(call).await.map(|_| ())
    }

    /// How many of this locker's waiters on the lock of `keys` still wait.
    pub(crate) fn waiting(&self, keys: &LockKeys) -> usize {
        self.waker.waiting(&keys.channel(self.is_cluster()))
    }

    /// Wakes `notify` when a message is published on `channel` of this node; `None` when that cannot be arranged.
    pub(crate) async fn watch_channel(&self, channel: &str, notify: &Arc<Notify>) -> Option<Watch> {
        self.waker.watch(channel, notify, false, None).await
    }

    /// Drops the connections; later commands fail with [`SnatchError::Closed`].
    pub(crate) fn close(&self) {
        self.waker.close();
        self.connection.close();
    }

    /// The cluster, when the node is a Redis Cluster.
    pub(crate) fn cluster(&self) -> Option<&Cluster> {
        match self.connection.target() {
            Target::Cluster(cluster) => Some(cluster),
            _ => None,
        }
    }

    /// The server's name (its URL, redacted), version and the round trip of a `PING` (on a cluster, of any node).
    pub(crate) async fn answering_server(&self) -> Result<Server, SnatchError> {
        let command = |mut link: Link| async move {
            let started = std::time::Instant::now();
            link.ping().await?;
            let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
            Ok::<_, redis::RedisError>((latency_ms, link.info_server().await?))
        };
        let link = self.connection.get().await?;
        let (latency_ms, info) = tokio::time::timeout(self.connection.timeout(), command(link))
            .await
            .map_err(|_| self.connection.timed_out())?
            .map_err(|e| self.connection.failed(&e))?;
        Ok(Server { name: self.connection.label().to_owned(), version: server_version(&info), latency_ms })
    }

    /// `CLUSTER SLOTS`, asked of any node of the cluster.
    pub(crate) async fn cluster_slots(&self) -> Result<Value, SnatchError> {
        let mut link = self.connection.get().await?;
        link.cluster_slots().await.map_err(|e| self.connection.failed(&e))
    }

    /// The server, when the node is one server (not a cluster or a Sentinel master).
    pub(crate) fn server(&self) -> Option<&Endpoint> {
        match self.connection.target() {
            Target::Server(endpoint) => Some(endpoint),
            _ => None,
        }
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

    /// Runs a script call: batched with those of other operations, or in the memory store of a `memory://` node.
    pub(crate) async fn call(&self, call: ScriptCall) -> Result<Value, SnatchError> {
        match self.connection.target() {
            Target::Memory(_) if self.connection.is_closed() => Err(SnatchError::Closed),
            Target::Memory(memory) => memory.run(&call).map_err(|e| self.failure(e)),
            _ => self.batcher.call(call).await,
        }
    }

    /// Runs a script call (see [`Node::call`]) and reads its reply as `T`.
    pub(crate) async fn invoke<T: FromRedisValue>(&self, call: ScriptCall) -> Result<T, SnatchError> {
        let reply = self.call(call).await?;
        redis::from_redis_value(reply).map_err(|e| self.connection.failure(e))
    }
}

/// Whether `cause` (a [`SnatchError::Redis`]'s, worded by failure.rs) says the server was not reached or did not answer.
fn unreachable(cause: &str) -> bool {
    ["timed out after", "cannot connect", "connection failed"].iter().any(|part| cause.contains(part))
}
