//! The locker: acquisition (one attempt or waiting), and the bookkeeping that lets `close` release everything it
//! still holds. Runs of the user's fn under a lock go through the runner (run/).

use crate::config::{LockOptions, LockerConfig, Topology};
use crate::lock::contention::{Contended, Contention};
use crate::lock::job::Job;
use crate::lock::lease::Lease;
use crate::lock::place::Place;
use crate::lock::stall::Stall;
use crate::lock::supervisor::Supervisor;
use crate::redlock::quorum::{Acquire, Extend, Grant, Nodes};
use crate::server::node::{Mark, Node, PLACE_LEASE};
use crate::server::waker::Watch;
use snatch_protocol::acquisition::Acquired;
use snatch_protocol::direct::kept::KeptCounters;
use snatch_protocol::keys::{self, Kind, LockKeys};
use snatch_protocol::owner;
use snatch_protocol::run::Inspection;
use snatch_protocol::SnatchError;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{watch, Notify, OnceCell};
use tokio::time::{sleep, Instant};

/// Two locks taken in one call ([`Locker::acquire_pair`]): the first, and the second when it was tried.
pub(crate) type Pair = (Result<Option<Arc<Lease>>, SnatchError>, Option<Result<Option<Arc<Lease>>, SnatchError>>);

/// Bounds of the jittered delay between two attempts of a waiting acquisition.
const RETRY_DELAY_MS: std::ops::RangeInclusive<u64> = 50..=150;

/// Bounds of the random delay before another round after split votes: short, as the contenders have released
/// what they got, and random, so that one of them comes first.
const SPLIT_RETRY_DELAY_MS: std::ops::RangeInclusive<u64> = 2..=30;

/// Rounds of split votes past the end of its wait (for a single attempt: in all) before an acquisition gives up
/// with a quorum error.
const SPLIT_ROUNDS: u32 = 8;

/// Most keys one set of locks (`lock_all`) may name.
pub const MAX_SET_KEYS: usize = 1024;

/// Acquires and releases locks on one Redis or on a Redlock set of independent masters. Cloning gives another
/// handle to the same locker.
#[derive(Clone)]
pub struct Locker {
    shared: Arc<Shared>,
}

struct Shared {
    config: LockerConfig,
    nodes: Arc<Nodes>,
    /// Where direct calls go, if anywhere (see [`Locker::direct_route`]).
    direct: Option<DirectRoute>,
    /// When direct acquisitions last kept the prefix's fence counters; `None` when they keep them every time (no
    /// direct calls, or a cluster prefix whose locks keep counters of their own).
    kept_counters: Option<KeptCounters>,
    /// Renews the leases not yet ended, or declares them lost; `close` releases those still held.
    supervisor: Supervisor,
    /// The caller's beats: leases are renewed only while its loop turns.
    stall: Arc<Stall>,
    closed: AtomicBool,
    /// Woken when `close` is called: acquisitions that wait for a lock give up.
    closing: Notify,
    /// Set once the time the closing locker gives its running fns is over (see [`Locker::cut`]).
    cut: watch::Sender<bool>,
    /// Number of calls under way; `close` waits for zero.
    busy: AtomicUsize,
    /// Woken when `busy` drops to zero once closing.
    idle: Notify,
    close_done: OnceCell<()>,
    /// Background work (schedules) started on this locker, stopped by `close`.
    jobs: Mutex<Vec<Job>>,
    /// The names of the schedules running on this locker: each runs once here.
    schedule_names: Mutex<HashSet<String>>,
    /// The keys the caller's acquisitions waited for most.
    contention: Contention,
}

/// Where a locker's direct calls go: sockets of the caller's own (the Node binding's, polled by node's event loop)
/// for one-attempt acquisitions and releases, instead of the locker's connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirectRoute {
    /// To the locker's one server.
    Server,
    /// To the master of each key's slot of the locker's Redis Cluster.
    Cluster,
}

/// Counts one call under way for as long as it lives (see [`Locker::enter`]).
pub struct Busy(Arc<Shared>);

impl Drop for Busy {
    fn drop(&mut self) {
        // After the count (SeqCst both): a `close` that saw the count above zero set `closed` before, so this sees it.
        if self.0.busy.fetch_sub(1, Ordering::SeqCst) == 1 && self.0.closed.load(Ordering::SeqCst) {
            self.0.idle.notify_waiters();
        }
    }
}

impl Locker {
    /// Validates `config` and parses its URLs. Nothing connects until the first command.
    pub fn new(config: LockerConfig) -> Result<Self, SnatchError> {
        config.validate()?;
        let nodes = Arc::new(Nodes::new(Node::all(&config)?, config.drift_factor));
        let direct = direct_route(&config, &nodes);
        let one_slot = config.topology == Topology::Cluster;
        let kept_counters = (direct.is_some() && keys::prefix_has_counters(&config.prefix, one_slot))
            .then(|| KeptCounters::new(config.fence_ttl, one_slot));
        let stall = Arc::new(Stall::new(config.max_stall));
        Ok(Self {
            shared: Arc::new(Shared {
                config,
                nodes,
                direct,
                kept_counters,
                supervisor: Supervisor::new(stall.clone()),
                stall,
                closed: AtomicBool::new(false),
                closing: Notify::new(),
                cut: watch::Sender::new(false),
                busy: AtomicUsize::new(0),
                idle: Notify::new(),
                close_done: OnceCell::new(),
                jobs: Mutex::new(Vec::new()),
                schedule_names: Mutex::default(),
                contention: Contention::default(),
            }),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &LockerConfig {
        &self.shared.config
    }

    /// Where one-attempt acquisitions and releases may go by direct calls; `None` when they all take the locker's
    /// connection. Decided once, here.
    pub fn direct_route(&self) -> Option<DirectRoute> {
        self.shared.direct
    }

    /// When direct acquisitions last kept the prefix's fence counters (see [`Shared::kept_counters`]), and the place
    /// of `keys`' counter in that record (its slot on a cluster); `None` when the counter is kept every time.
    pub(crate) fn kept_counter(&self, keys: &LockKeys) -> Option<(&KeptCounters, usize)> {
        let index = if self.one_slot() { usize::from(keys.slot()) } else { 0 };
        self.shared.kept_counters.as_ref().map(|kept| (kept, index))
    }

    /// The node direct calls go to, when they apply (see [`Locker::direct_route`]).
    pub(crate) fn direct_node(&self) -> Option<&Node> {
        self.shared.direct.and(self.shared.nodes.single())
    }

    /// One attempt; `None` when someone else holds the key.
    pub async fn try_lock(&self, key: &str, options: &LockOptions) -> Result<Option<Arc<Lease>>, SnatchError> {
        let once = LockOptions { wait: Duration::ZERO, ..options.clone() };
        let _busy = self.enter()?;
        self.acquire(key, &once).await
    }

    /// Keeps trying for `options.wait` (at least one attempt); [`SnatchError::Timeout`] when it elapses.
    pub async fn lock(&self, key: &str, options: &LockOptions) -> Result<Arc<Lease>, SnatchError> {
        let _busy = self.enter()?;
        self.acquire(key, options).await?.ok_or_else(|| not_acquired(key, options.wait))
    }

    /// Holds every key of `keys` or none: each is a lock of its own (its fence, its lease), taken in the byte order of
    /// the keys, waiting for each up to what is left of `options.wait` (with none, one attempt each), so that callers
    /// naming the same keys in any order never deadlock. The leases are renewed together. In the order of `keys`;
    /// [`SnatchError::Timeout`] naming the first key not had in time, once what was taken is given back.
    pub async fn lock_all(&self, keys: &[String], options: &LockOptions) -> Result<Vec<Arc<Lease>>, SnatchError> {
        let names = self.checked_set(keys, options)?;
        let _busy = self.enter()?;
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_unstable_by(|&a, &b| keys[a].cmp(&keys[b]));
        let deadline = Instant::now() + options.wait;
        let mut held: Vec<Option<Arc<Lease>>> = vec![None; keys.len()];
        for i in order {
            let wait = deadline.saturating_duration_since(Instant::now());
            let acquired = self.acquire_waited(names[i].clone(), &LockOptions { wait, ..options.clone() }).await;
            // A lease not renewed (no `auto_extend`) may have lapsed while later keys were waited for: none then.
            let lapsed = held.iter().position(|lease| lease.as_ref().is_some_and(|lease| lease.lapsed()));
            match (acquired, lapsed) {
                (Ok(Some(lease)), None) => held[i] = Some(lease),
                (acquired, lapsed) => {
                    let taken = held.iter().flatten().chain(acquired.as_ref().ok().and_then(Option::as_ref));
                    futures_util::future::join_all(taken.map(|lease| lease.release())).await;
                    return Err(acquired
                        .err()
                        .unwrap_or_else(|| not_acquired(&keys[lapsed.unwrap_or(i)], options.wait)));
                }
            }
        }
        let leases: Vec<Arc<Lease>> = held.into_iter().flatten().collect();
        self.shared.supervisor.align(&leases);
        Ok(leases)
    }

    /// The names of the locks of `keys` once `keys` (1 to [`MAX_SET_KEYS`], no key twice) and `options` are checked.
    pub(crate) fn checked_set(&self, keys: &[String], options: &LockOptions) -> Result<Vec<LockKeys>, SnatchError> {
        if keys.is_empty() || keys.len() > MAX_SET_KEYS {
            return Err(SnatchError::range_arg(format!("keys must hold 1 to {MAX_SET_KEYS} keys, got {}", keys.len())));
        }
        let mut sorted: Vec<&String> = keys.iter().collect();
        sorted.sort_unstable();
        if let Some(twice) = sorted.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(SnatchError::type_arg(format!("keys must not name a key twice, got '{}' twice", twice[0])));
        }
        keys.iter().map(|key| self.checked_keys(key, options)).collect()
    }

    /// One attempt to hold `key` as `holder`: a permit of a semaphore, a read or the write lock of a read-write lock;
    /// `None` when it is taken. Each is a lease like a lock's (renewed with `auto_extend`, declared lost, released
    /// owner-checked), its expiry judged on the server's clock. One Redis, Sentinel or Cluster: not Redlock.
    pub async fn try_acquire_as(
        &self,
        key: &str,
        holder: Holder,
        options: &LockOptions,
    ) -> Result<Option<Arc<Lease>>, SnatchError> {
        let once = LockOptions { wait: Duration::ZERO, ..options.clone() };
        let _busy = self.enter()?;
        self.acquire_keys(self.holder_keys(key, holder, &once)?, &once).await
    }

    /// Keeps trying to hold `key` as `holder` for `options.wait` (woken by releases; at least one attempt);
    /// [`SnatchError::Timeout`] when it elapses. See [`Locker::try_acquire_as`].
    pub async fn acquire_as(
        &self,
        key: &str,
        holder: Holder,
        options: &LockOptions,
    ) -> Result<Arc<Lease>, SnatchError> {
        let _busy = self.enter()?;
        let keys = self.holder_keys(key, holder, options)?;
        self.acquire_waited(keys, options).await?.ok_or_else(|| not_acquired(key, options.wait))
    }

    /// The names `holder` of `key` takes, once `options` and the deployment are checked.
    pub(crate) fn holder_keys(
        &self,
        key: &str,
        holder: Holder,
        options: &LockOptions,
    ) -> Result<LockKeys, SnatchError> {
        self.check(options)?;
        if options.fair && matches!(holder, Holder::Reader | Holder::Writer) {
            return Err(SnatchError::type_arg(
                "fair waiting is for locks and semaphores; a read-write lock's waiting writer goes before new readers",
            ));
        }
        if self.shared.nodes.single().is_none() {
            return Err(SnatchError::type_arg(match holder {
                Holder::Permit(_) => "semaphores need one Redis, a Sentinel master or a Cluster, not Redlock",
                Holder::Reader | Holder::Writer => {
                    "read-write locks need one Redis, a Sentinel master or a Cluster, not Redlock"
                }
            }));
        }
        let (prefix, one_slot) = (&self.shared.config.prefix, self.one_slot());
        match holder {
            Holder::Permit(limit) => LockKeys::semaphore(prefix, key, limit, one_slot),
            Holder::Reader => LockKeys::read_write(prefix, key, false, one_slot),
            Holder::Writer => LockKeys::read_write(prefix, key, true, one_slot),
        }
    }

    /// Stops accepting calls and schedules, waits for the calls and runs under way, releases every lock still held
    /// and closes the connections. Idempotent; concurrent calls all wait for the same close.
    pub async fn close(&self) {
        self.stop_taking();
        let shared = &self.shared;
        shared
            .close_done
            .get_or_init(|| async {
                let jobs = std::mem::take(&mut *shared.jobs.lock().expect("jobs poisoned"));
                futures_util::future::join_all(jobs.iter().map(Job::stop)).await;
                self.idle().await;
                let leases = shared.supervisor.leases();
                futures_util::future::join_all(leases.iter().map(|l| l.release())).await;
                // A lock the caller gave back meanwhile was not among those leases: its release, counted by
                // `releasing`, ends before the connections close.
                self.idle().await;
                shared.supervisor.close();
                shared.nodes.close().await;
            })
            .await;
    }

    /// The time the closing locker gives its running fns to finish is over: the schedules abort the fns of their
    /// attempts running here (which are recorded interrupted and handed over). The caller's own runs are its runner's
    /// to abort. Idempotent.
    pub fn cut(&self) {
        self.shared.cut.send_replace(true);
    }

    /// Tells when [`Locker::cut`] was called.
    pub(crate) fn cut_requests(&self) -> watch::Receiver<bool> {
        self.shared.cut.subscribe()
    }

    /// The first step of [`Locker::close`], at once: new calls are refused ([`SnatchError::Closed`]), and acquisitions
    /// waiting for a lock give up.
    pub fn stop_taking(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.closing.notify_waiters();
    }

    /// Resolves once no call is under way.
    async fn idle(&self) {
        let shared = &self.shared;
        loop {
            let idle = shared.idle.notified();
            tokio::pin!(idle);
            // Registered before the count is read, so that the last call ending in between still wakes it.
            idle.as_mut().enable();
            if shared.busy.load(Ordering::SeqCst) == 0 {
                return;
            }
            idle.await;
        }
    }

    /// The caller's event loop turned now (the caller beats at least every `maxStall`, see lock/stall.rs).
    pub fn beat(&self) {
        self.shared.stall.beat();
    }

    /// Whether the caller's event loop has not turned within `maxStall`: its leases are not renewed, and its
    /// schedules claim nothing.
    pub(crate) fn stalled(&self) -> bool {
        self.shared.stall.stalled()
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::SeqCst)
    }

    /// Counts a call under way until the returned guard drops (`close` waits for it); [`SnatchError::Closed`] once
    /// closing. The locker's own methods do this themselves.
    pub fn enter(&self) -> Result<Busy, SnatchError> {
        self.shared.busy.fetch_add(1, Ordering::SeqCst);
        let busy = Busy(self.shared.clone());
        if self.is_closed() {
            return Err(SnatchError::Closed);
        }
        Ok(busy)
    }

    /// Counts the release of a lock the caller holds until the returned guard drops, also once closing: taken before
    /// the lease ends, so that `close`, which releases the leases not ended, closes the connections only after it.
    pub fn releasing(&self) -> Busy {
        self.shared.busy.fetch_add(1, Ordering::SeqCst);
        Busy(self.shared.clone())
    }

    async fn acquire(&self, key: &str, options: &LockOptions) -> Result<Option<Arc<Lease>>, SnatchError> {
        self.acquire_waited(self.checked_keys(key, options)?, options).await
    }

    /// The `limit` keys the caller's acquisitions waited for most, most first (see contention.rs); with `reset`, the
    /// count starts again.
    pub fn contention(&self, limit: usize, reset: bool) -> Vec<Contended> {
        self.shared.contention.top(limit, reset)
    }

    /// The nodes the locker writes to.
    pub(crate) fn nodes(&self) -> &Arc<Nodes> {
        &self.shared.nodes
    }

    /// The lease an acquisition with `options` asks for.
    pub(crate) fn lease_ttl(&self, options: &LockOptions) -> Duration {
        options.ttl.unwrap_or(self.shared.config.ttl)
    }

    /// A new owner for an acquisition (snatch-protocol's owner.rs): a token of 128 random bits as 32 lowercase hex
    /// digits, then this locker's instance. All 128 bits are random, as the docs promise (a token of ">= 128 random bits"), so
    /// it is not a v4 UUID (122 random bits); the `uuid` crate's encoder writes the hex.
    pub(crate) fn new_owner(&self) -> String {
        let mut digits = [0; uuid::fmt::Simple::LENGTH];
        let token = uuid::Uuid::from_u128(rand::random()).simple().encode_lower(&mut digits);
        owner::owner(token, &self.shared.config.instance_id)
    }

    /// The keys of `key` once `options` and `key` are checked.
    pub(crate) fn checked_keys(&self, key: &str, options: &LockOptions) -> Result<LockKeys, SnatchError> {
        self.check(options)?;
        LockKeys::new(&self.shared.config.prefix, key, self.one_slot())
    }

    /// Checks `options`, and that this locker can wait fairly if they ask for it.
    fn check(&self, options: &LockOptions) -> Result<(), SnatchError> {
        options.validate()?;
        if options.fair && self.shared.nodes.single().is_none() {
            return Err(SnatchError::type_arg(
                "fair waiting needs one Redis, a Sentinel master or a Cluster, not Redlock (several masters)",
            ));
        }
        Ok(())
    }

    /// Whether every name of a lock must hash to one slot (Redis Cluster).
    pub(crate) fn one_slot(&self) -> bool {
        self.shared.config.topology == Topology::Cluster
    }

    /// The lease of a won acquisition, under supervision (renewed, or declared lost) until it ends, and released
    /// by `close` if still held. Must be called within the Tokio runtime.
    pub(crate) fn supervise(
        &self,
        keys: LockKeys,
        token: String,
        grant: Grant,
        ttl: Duration,
        options: &LockOptions,
    ) -> Arc<Lease> {
        let plain = keys.kind == Kind::Lock && options.wait.is_zero() && !options.fair;
        let nodes = self.shared.nodes.clone();
        let lease = Arc::new(Lease::new(keys, token, grant, ttl, options.min_hold, nodes, plain));
        self.shared.supervisor.watch(lease.clone(), options.auto_extend);
        lease
    }

    /// Continues the lock of `key` another owner handed over ([`Lease::hand_over`]) with `token` and `fence`: it is this
    /// locker's from now on (a new owner, for `options.ttl`, renewed with `options.auto_extend`), so that the old
    /// owner can neither extend nor release it and the handle cannot be adopted twice; `None`, and nothing changes,
    /// when the key does not hold that token any more (it expired, was adopted already) or never did.
    pub async fn adopt(
        &self,
        key: &str,
        token: &str,
        fence: i64,
        options: &LockOptions,
    ) -> Result<Option<Arc<Lease>>, SnatchError> {
        check_handle(token, fence)?;
        let keys = self.checked_keys(key, options)?;
        let _busy = self.enter()?;
        let (owner, ttl, started) = (self.new_owner(), self.lease_ttl(options), Instant::now());
        Ok(match self.shared.nodes.adopt(&keys, token, &owner, ttl).await? {
            Extend::Renewed { valid_until } => {
                Some(self.supervise(keys, owner, Grant { fence, started, valid_until }, ttl, options))
            }
            Extend::Refused => None,
        })
    }

    /// One attempt on `keys` with `token`; `None` when not acquired.
    pub(crate) async fn attempt(
        &self,
        keys: LockKeys,
        token: String,
        options: &LockOptions,
    ) -> Result<Option<Arc<Lease>>, SnatchError> {
        let ttl = self.lease_ttl(options);
        Ok(match self.shared.nodes.acquire(&keys, &token, ttl, Mark::None).await? {
            Acquire::Won(grant) => Some(self.supervise(keys, token, grant, ttl, options)),
            Acquire::Taken { .. } | Acquire::Split => None,
            Acquire::Contended { error, .. } => return Err(error),
        })
    }

    /// Acquires `keys` with checked `options` (waiting up to `options.wait`); `None` when not acquired in time. The
    /// lease is supervised (renewed, or declared lost) until it ends, and released by `close` if still held. With
    /// `options.fair`, the acquisition queues behind the fair waiters that came before it, in every process, and
    /// gives its place up when it stops waiting without the lock.
    pub(crate) async fn acquire_keys(
        &self,
        keys: LockKeys,
        options: &LockOptions,
    ) -> Result<Option<Arc<Lease>>, SnatchError> {
        self.take(keys, options, false).await
    }

    /// Two locks of checked `options` that do not wait, in one call where one Redis holds both: `first`, then, once it
    /// is taken, `second` (a schedule's attempt: its claim, then its run lock), each as [`Locker::acquire_keys`] would
    /// give it (the second's `None` when the first was not taken). `None` when they are not taken in one call (several
    /// nodes, a Redis Cluster, options that wait): the caller takes them one by one.
    pub(crate) async fn acquire_pair(&self, first: LockKeys, second: LockKeys, options: &LockOptions) -> Option<Pair> {
        let nodes = &self.shared.nodes;
        let node = nodes.single().filter(|_| options.wait.is_zero() && !options.fair)?;
        let (first_token, second_token) = (self.new_owner(), self.new_owner());
        let ttl = self.lease_ttl(options);
        let started = Instant::now();
        // The counter is kept as direct acquisitions keep it (both locks count on the prefix's one: not a cluster).
        let kept = self.kept_counter(&first);
        let keep_counter = kept.is_none_or(|(kept, index)| kept.due(index, started.into_std()));
        let answers = node
            .acquire_pair((&first, &first_token), (&second, &second_token), ttl.as_millis() as u64, keep_counter)
            .await?;
        let (first_answer, second_answer) = match answers {
            Ok(answers) => {
                if let Some((kept, index)) = kept.filter(|_| keep_counter) {
                    kept.kept(index, started.into_std());
                }
                answers
            }
            Err(error) => {
                // Redis may still apply the call: undo what it may have taken.
                for (keys, token) in [(&first, &first_token), (&second, &second_token)] {
                    nodes.release_later(keys, token, Instant::now(), false);
                }
                return Some((Err(error), None));
            }
        };
        let valid_until = nodes.valid_until(started, ttl);
        let in_time = Instant::now() < valid_until;
        let lease = |answer, keys: &LockKeys, token: &String| match answer {
            Acquired::Won { fence } if in_time => {
                let grant = Grant { fence, started, valid_until };
                Ok(Some(self.supervise(keys.clone(), token.clone(), grant, ttl, options)))
            }
            // Taken too late to be of use (as on one node by `acquire_keys`): given back, and not acquired.
            Acquired::Won { .. } => {
                nodes.release_later(keys, token, Instant::now(), false);
                Ok(None)
            }
            Acquired::NewCounter => Err(node.failure("a fence below the clock floor")),
            Acquired::Taken { .. } => Ok(None),
        };
        let first_lease = lease(first_answer, &first, &first_token);
        let second_lease = second_answer.map(|answer| lease(answer, &second, &second_token));
        Some((first_lease, second_lease))
    }

    /// [`Locker::acquire_keys`] for the caller (a lock, a permit, a read or write lock, a set's key): a wait counts
    /// in [`Locker::contention`] (a schedule's or a campaign's do not: waiting is how they work).
    async fn acquire_waited(&self, keys: LockKeys, options: &LockOptions) -> Result<Option<Arc<Lease>>, SnatchError> {
        self.take(keys, options, true).await
    }

    /// [`Locker::acquire_keys`], its waits `counted` in [`Locker::contention`] or not.
    async fn take(
        &self,
        keys: LockKeys,
        options: &LockOptions,
        counted: bool,
    ) -> Result<Option<Arc<Lease>>, SnatchError> {
        if !options.fair {
            return self.wait_for(keys, options, None, counted).await;
        }
        let waiter = owner::waiter(rand::random(), &self.shared.config.instance_id);
        let place = Place::new(waiter, keys.clone(), self.shared.nodes.clone());
        let acquired = self.wait_for(keys, options, Some(place.waiter()), counted).await;
        match acquired {
            Ok(Some(_)) => place.taken(),
            _ => place.leave().await,
        }
        acquired
    }

    /// [`Locker::acquire_keys`]: as fair waiter `fair`, if given; a wait `counted` in [`Locker::contention`] (one that
    /// found the key held and waited, whether it got it or timed out).
    async fn wait_for(
        &self,
        keys: LockKeys,
        options: &LockOptions,
        fair: Option<&str>,
        counted: bool,
    ) -> Result<Option<Arc<Lease>>, SnatchError> {
        let shared = &self.shared;
        let ttl = self.lease_ttl(options);
        let started = Instant::now();
        let deadline = started + options.wait;
        let mut waited = false;
        let count = |timed_out: bool| {
            if counted {
                shared.contention.record(&keys.key, started.elapsed(), timed_out);
            }
        };
        // Set up once the key is found held and there is time to wait: release notifications from every node. A
        // release wakes the first of this locker's waiters on the key still waiting: a caller that finds others
        // waiting already queues behind them rather than trying first (their turns come in the order they came). A
        // fair waiter's turn comes from the queue in Redis instead, and a release wakes it by its id: it watches
        // before its first attempt, which queues it, so that a release right after cannot pass it by unheard.
        let mut wake = None;
        let mut queue_first = fair.is_none() && !options.wait.is_zero() && shared.nodes.waiting(&keys) > 0;
        if queue_first || (fair.is_some() && !options.wait.is_zero()) {
            wake = Some(shared.nodes.watch(&keys, fair).await);
        }
        let mut late_splits = 0;
        loop {
            let retry_in = if std::mem::take(&mut queue_first) {
                Duration::MAX
            } else {
                let token = self.new_owner();
                // Once subscribed to its releases, an attempt marks the lock as waited for, so that they wake us; and
                // ours once taken when others of this locker wait behind us, so that its release wakes the next.
                let mark = match (&wake, fair) {
                    (_, Some(waiter)) => Mark::Queued(waiter),
                    // A read-write lock's waiter marks from its first attempt: a waiting writer's mark keeps new
                    // readers out, also before it has subscribed.
                    (None, _)
                        if !options.wait.is_zero() && matches!(keys.kind, Kind::Read { .. } | Kind::Write { .. }) =>
                    {
                        Mark::Held
                    }
                    (None, _) => Mark::None,
                    (Some(_), _) if shared.nodes.waiting(&keys) > 1 => Mark::Always,
                    (Some(_), _) => Mark::Held,
                };
                match shared.nodes.acquire(&keys, &token, ttl, mark).await? {
                    Acquire::Won(grant) => {
                        // Its turn taken: the next waiter in this process is woken by the next release.
                        wake.iter_mut().flat_map(|(_, watches)| watches).for_each(Watch::took_turn);
                        if waited {
                            count(false);
                        }
                        return Ok(Some(self.supervise(keys, token, grant, ttl, options)));
                    }
                    Acquire::Contended { error, .. } if Instant::now() >= deadline => return Err(error),
                    // Maybe just taken (with some node failing): wait as for a taken key.
                    Acquire::Taken { retry_in } | Acquire::Contended { retry_in, .. } => retry_in,
                    Acquire::Split => {
                        if Instant::now() >= deadline {
                            late_splits += 1;
                            if late_splits >= SPLIT_ROUNDS {
                                let reason = format!(
                                    "the nodes' votes split between competing clients {SPLIT_ROUNDS} rounds in a row"
                                );
                                return Err(SnatchError::Quorum { failures: vec![reason] });
                            }
                        }
                        sleep(Duration::from_millis(rand::random_range(SPLIT_RETRY_DELAY_MS))).await;
                        continue;
                    }
                }
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                if !options.wait.is_zero() {
                    count(true);
                }
                return Ok(None);
            }
            waited = true;
            let Some((notify, _watches)) = &wake else {
                // Try again right away: the holder may have released before the subscription was made.
                wake = Some(shared.nodes.watch(&keys, fair).await);
                continue;
            };
            // A fair waiter comes back to keep its place; its turn's release wakes it.
            let retry = match fair {
                Some(_) => PLACE_LEASE / 4,
                None => Duration::from_millis(rand::random_range(RETRY_DELAY_MS)),
            };
            self.pause(notify, retry.min(retry_in.saturating_add(Duration::from_millis(1))).min(left)).await?;
        }
    }

    /// A waiter's pause between attempts: `at_most`, or until `woken` (a release it watches) is notified.
    /// [`SnatchError::Closed`] when the locker closes, also before the pause.
    pub(crate) async fn pause(&self, woken: &Notify, at_most: Duration) -> Result<(), SnatchError> {
        let closing = self.shared.closing.notified();
        tokio::pin!(closing);
        // Registered before `closed` is read, so that a `close` in between still wakes it.
        closing.as_mut().enable();
        if self.is_closed() {
            return Err(SnatchError::Closed);
        }
        tokio::select! {
            () = sleep(at_most) => Ok(()),
            () = woken.notified() => Ok(()),
            () = closing => Err(SnatchError::Closed),
        }
    }

    /// What Redis holds for `key` now, for dashboards and debugging: `None` when it is free.
    pub async fn inspect(&self, key: &str) -> Result<Option<Inspection>, SnatchError> {
        self.inspect_keys(&LockKeys::new(&self.shared.config.prefix, key, self.one_slot())?).await
    }

    /// What Redis holds for the lock of `keys` now: `None` when it is free.
    pub(crate) async fn inspect_keys(&self, keys: &LockKeys) -> Result<Option<Inspection>, SnatchError> {
        let _busy = self.enter()?;
        self.shared.nodes.inspect(keys).await
    }

    /// Deletes `key`'s lock whoever holds it (an operator's tool) and wakes its waiters; true when there was one. The
    /// holder's next extension is refused, and its lease declared lost.
    pub async fn force_release(&self, key: &str) -> Result<bool, SnatchError> {
        let keys = LockKeys::new(&self.shared.config.prefix, key, self.one_slot())?;
        let _busy = self.enter()?;
        self.shared.nodes.force_release(&keys).await
    }

    /// Registers background work for `close` to stop.
    pub(crate) fn register_job(&self, job: Job) {
        self.shared.jobs.lock().expect("jobs poisoned").push(job);
    }

    /// Name `name` taken by a schedule of this locker until the returned guard is dropped (its driver ended); an
    /// invalid argument when a schedule of this locker runs under that name already (both fns would run, in turns).
    pub(crate) fn take_schedule_name(&self, name: &str) -> Result<ScheduleName, SnatchError> {
        if !self.shared.schedule_names.lock().expect("names poisoned").insert(name.to_owned()) {
            return Err(SnatchError::type_arg(format!(
                "schedule '{name}' is already scheduled by this locker: stop() it first, or give this one another name"
            )));
        }
        Ok(ScheduleName { shared: self.shared.clone(), name: name.to_owned() })
    }

    /// Whether a schedule of this locker runs under `name`.
    pub fn is_scheduled(&self, name: &str) -> bool {
        self.shared.schedule_names.lock().expect("names poisoned").contains(name)
    }
}

/// A schedule's name taken on its locker (see [`Locker::take_schedule_name`]): free again when dropped.
pub(crate) struct ScheduleName {
    shared: Arc<Shared>,
    name: String,
}

impl Drop for ScheduleName {
    fn drop(&mut self) {
        self.shared.schedule_names.lock().expect("names poisoned").remove(&self.name);
    }
}

/// Who holds a key that more than one may hold at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// A permit of a semaphore of at most this many holders.
    Permit(u32),
    /// A read lock of a read-write lock: many readers at once, while no writer holds it or waits for it.
    Reader,
    /// The write lock of a read-write lock: one writer, and no reader.
    Writer,
}

/// Where `config`'s direct calls go, if anywhere: not when the runtime cannot poll sockets for them
/// (`config.direct`), nor with `wait_replicas` (acquisitions that wait for replicas take the main connection, which
/// sends `WAIT`), nor to several nodes (Redlock), a Sentinel master, a `memory://` store or a Unix socket.
fn direct_route(config: &LockerConfig, nodes: &Nodes) -> Option<DirectRoute> {
    if !config.direct || config.wait_replicas > 0 {
        return None;
    }
    let node = nodes.single()?;
    match (node.server(), node.cluster()) {
        (Some(server), _) => server.connect_host().map(|_| DirectRoute::Server),
        (None, Some(_)) => Some(DirectRoute::Cluster),
        (None, None) => None,
    }
}

/// Checks what a handed-over lock came with (see [`Locker::adopt`]): its token and fence.
pub(crate) fn check_handle(token: &str, fence: i64) -> Result<(), SnatchError> {
    owner::check_token(token).map_err(SnatchError::type_arg)?;
    if fence < 1 {
        return Err(SnatchError::range_arg(format!("a lock's fence is a positive integer, got {fence}")));
    }
    Ok(())
}

/// The error for a lock not acquired within `waited` (for a run that needed it: withLock).
pub fn not_acquired(key: &str, waited: Duration) -> SnatchError {
    SnatchError::Timeout { key: key.to_owned(), waited_ms: waited.as_millis() as u64 }
}
