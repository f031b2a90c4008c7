//! The command connection of a locker to one Redis deployment ([`Target`]): a server, the master of a Sentinel
//! deployment, or a whole Redis Cluster. Opened on first use, and again after it dropped (on Sentinel: to whichever
//! server the sentinels name master by then); a cluster connection follows redirections, slot moves and failovers
//! by itself. `close` drops it for good.

use crate::server::dial::{ClusterTlsKey, NodeConnection};
use crate::server::endpoint::{Access, Endpoint};
use crate::server::failure::describe;
use crate::server::memory::Memory;
use crate::server::offered::OfferedCommands;
use crate::server::sentinel::Sentinels;
use futures_util::future::join_all;
use redis::aio::{AsyncPushSender, ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, ErrorKind, Pipeline, ProtocolVersion, RedisError, RedisFuture, RedisResult, ServerErrorKind, Value};
use snatch_protocol::SnatchError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a locker's node connects to.
pub(crate) enum Target {
    /// One server.
    Server(Endpoint),
    /// The master that sentinels name.
    Sentinel(Sentinels),
    /// A Redis Cluster.
    Cluster(Box<Cluster>),
    /// An in-process store (`memory://`): no connection; its node runs the scripts itself.
    Memory(Arc<Memory>),
}

/// Why a memory store has no connection to open.
const NO_CONNECTION: &str = "memory:// has no connection";

/// A Redis Cluster, reached through its seed nodes.
pub(crate) struct Cluster {
    seeds: Vec<String>,
    access: Access,
    /// The client of command connections (RESP2).
    client: redis::cluster::ClusterClient,
    /// Over TLS: the registration of the locker's TLS for the node connections.
    tls: Option<ClusterTlsKey>,
}

impl Cluster {
    /// Master `address` (`host:port`, as `CLUSTER SLOTS` names it), with the locker's credentials, over TLS when the
    /// seeds are.
    pub(crate) fn master(&self, address: &str) -> Result<Endpoint, SnatchError> {
        let invalid = || SnatchError::Redis { cause: format!("the cluster named a master '{address}'") };
        let (host, port) = address.rsplit_once(':').ok_or_else(invalid)?;
        let port = port.parse().map_err(|_| invalid())?;
        let tls = self.seeds.iter().any(|seed| seed.starts_with("rediss://"));
        self.access.discovered(host, port, tls)
    }
}

impl Target {
    /// A cluster reached through `seeds`.
    pub(crate) fn cluster(seeds: Vec<String>, access: Access, timeout: Duration) -> Result<Self, SnatchError> {
        let tls = access.cluster_tls(&seeds, timeout)?;
        let client = access
            .cluster(&seeds, timeout, tls.as_ref())?
            .build()
            .map_err(|e| SnatchError::type_arg(format!("invalid cluster option: {e}")))?;
        Ok(Self::Cluster(Box::new(Cluster { seeds, access, client, tls })))
    }

    /// Opens a command connection, the attempt bounded by `timeout` (the caller bounds it as a whole).
    async fn open(&self, timeout: Duration) -> Result<Link, String> {
        match self {
            Self::Server(endpoint) => endpoint.connect(timeout).await.map(Link::Server).map_err(|e| describe(&e)),
            Self::Sentinel(sentinels) => sentinels.connect_master(timeout).await.map(Link::Server),
            Self::Cluster(cluster) => {
                let connection = cluster.client.get_async_generic_connection::<NodeConnection>().await;
                connection.map(Link::Cluster).map_err(|e| describe(&e))
            }
            Self::Memory(_) => Err(NO_CONNECTION.to_owned()),
        }
    }

    /// Opens a connection for subscriptions (RESP3), whose messages go to `push`.
    pub(crate) async fn subscriber(&self, timeout: Duration, push: impl AsyncPushSender) -> Result<Link, String> {
        match self {
            Self::Server(endpoint) => {
                endpoint.subscriber(timeout, push).await.map(Link::Server).map_err(|e| describe(&e))
            }
            Self::Sentinel(sentinels) => {
                let master = sentinels.master(timeout).await?;
                master.subscriber(timeout, push).await.map(Link::Server).map_err(|e| describe(&e))
            }
            Self::Cluster(cluster) => {
                let client = cluster
                    .access
                    .cluster(&cluster.seeds, timeout, cluster.tls.as_ref())
                    .map_err(|e| e.to_string())?
                    .use_protocol(ProtocolVersion::RESP3)
                    .push_sender(push)
                    .build()
                    .map_err(|e| e.to_string())?;
                let connection = client.get_async_generic_connection::<NodeConnection>().await;
                connection.map(Link::Cluster).map_err(|e| e.to_string())
            }
            // Waiters on a memory store rely on their retries (see waker.rs).
            Self::Memory(_) => Err(NO_CONNECTION.to_owned()),
        }
    }

    /// Whether the target is a Redis Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }
}

/// An open connection (cheap to clone: what is sent through clones shares the same sockets).
#[derive(Clone)]
pub(crate) enum Link {
    /// To one server.
    Server(MultiplexedConnection),
    /// To a cluster: one connection per node, commands routed by their keys.
    Cluster(ClusterConnection<NodeConnection>),
}

impl Link {
    /// Sends the commands of `pipe` (which ignores errors: an error reply is that command's result): as one
    /// pipeline to a server; on a cluster, each to the node of its key's slot, all at once.
    pub(crate) async fn send_each(&mut self, pipe: &Pipeline) -> RedisResult<Vec<RedisResult<Value>>> {
        match self {
            Self::Server(conn) => pipe.query_async(conn).await,
            Self::Cluster(conn) => Ok(join_all(pipe.cmd_iter().map(|cmd| {
                let mut conn = conn.clone();
                // An error reply comes back as a value here: made the command's error, as in a pipeline.
                async move { conn.req_packed_command(cmd).await.and_then(Value::extract_error) }
            }))
            .await),
        }
    }

    /// `WAIT replicas timeout_ms` on the connection (and, on a cluster, the node) that wrote `key`: how many replicas
    /// acknowledged every write sent on it so far.
    pub(crate) async fn wait_replicas(&mut self, key: &str, replicas: u32, timeout_ms: u64) -> RedisResult<i64> {
        let mut wait = redis::cmd("WAIT");
        wait.arg(replicas).arg(timeout_ms);
        match self {
            Self::Server(conn) => wait.query_async(conn).await,
            Self::Cluster(conn) => {
                let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::with_key(
                    key,
                    SlotAddr::Master,
                )));
                redis::from_redis_value(conn.route_command(wait, route).await?)
                    .map_err(|e| RedisError::from((ErrorKind::Client, "unexpected WAIT reply", e.to_string())))
            }
        }
    }

    /// `PING` (on a cluster, to any node).
    pub(crate) async fn ping(&mut self) -> RedisResult<()> {
        self.any_node(redis::cmd("PING")).await.map(drop)
    }

    /// `INFO server` (on a cluster, of any node).
    pub(crate) async fn info_server(&mut self) -> RedisResult<String> {
        let mut info = redis::cmd("INFO");
        info.arg("server");
        redis::from_redis_value(self.any_node(info).await?)
            .map_err(|e| RedisError::from((ErrorKind::Client, "unexpected INFO reply", e.to_string())))
    }

    /// `command`'s reply, on a cluster from any node.
    async fn any_node(&mut self, command: Cmd) -> RedisResult<Value> {
        match self {
            Self::Server(conn) => command.query_async(conn).await,
            Self::Cluster(conn) => {
                conn.route_command(command, RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random)).await
            }
        }
    }

    /// `CLUSTER SLOTS` of a cluster, asked of any node.
    pub(crate) async fn cluster_slots(&mut self) -> RedisResult<Value> {
        let mut slots = redis::cmd("CLUSTER");
        slots.arg("SLOTS");
        self.any_node(slots).await
    }

    /// Subscribes to `channel` (its messages go to the push sender the connection was opened with); with `sharded`,
    /// on a cluster, to the sharded channel (`SSUBSCRIBE`, Redis 7 or newer), on the node that owns its slot.
    pub(crate) async fn subscribe(&mut self, channel: &str, sharded: bool) -> RedisResult<()> {
        match self {
            Self::Server(conn) => conn.subscribe(channel).await,
            Self::Cluster(conn) if sharded => conn.ssubscribe(channel).await,
            Self::Cluster(conn) => conn.subscribe(channel).await,
        }
    }

    /// Unsubscribes from `channel` (the sharded one with `sharded`, on a cluster).
    pub(crate) async fn unsubscribe(&mut self, channel: &str, sharded: bool) -> RedisResult<()> {
        match self {
            Self::Server(conn) => conn.unsubscribe(channel).await,
            Self::Cluster(conn) if sharded => conn.sunsubscribe(channel).await,
            Self::Cluster(conn) => conn.unsubscribe(channel).await,
        }
    }
}

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Server(conn) => conn.req_packed_command(cmd),
            Self::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Server(conn) => conn.req_packed_commands(pipeline, offset, count),
            Self::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Server(conn) => conn.get_db(),
            Self::Cluster(conn) => conn.get_db(),
        }
    }
}

/// One deployment's command connection.
pub(crate) struct Connection {
    /// The deployment as errors name it (URLs without passwords).
    label: String,
    target: Target,
    /// The open connection; `None` before the first use and after it failed.
    link: Mutex<Option<Link>>,
    /// Held while a connection is being opened, so that concurrent callers wait for that one.
    opening: tokio::sync::Mutex<()>,
    closed: AtomicBool,
    /// The command timeout: a connection attempt, and a batch of commands, must finish within it.
    timeout: Duration,
    /// The server's own commands, as learned on this connection.
    offers: OfferedCommands,
}

impl Connection {
    pub(crate) fn new(label: String, target: Target, timeout: Duration) -> Self {
        Self {
            label,
            target,
            link: Mutex::new(None),
            opening: tokio::sync::Mutex::new(()),
            closed: AtomicBool::new(false),
            timeout,
            offers: OfferedCommands::default(),
        }
    }

    /// The command timeout.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// What the connection is called in errors: its URL, redacted.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// The server's own commands, as learned on this connection.
    pub(crate) fn offers(&self) -> &OfferedCommands {
        &self.offers
    }

    /// What the connection goes to.
    pub(crate) fn target(&self) -> &Target {
        &self.target
    }

    /// The open connection, opened first if need be (within the command timeout). [`SnatchError::Closed`] after
    /// `close`.
    pub(crate) async fn get(&self) -> Result<Link, SnatchError> {
        if let Some(link) = self.current()? {
            return Ok(link);
        }
        let _opening = self.opening.lock().await;
        if let Some(link) = self.current()? {
            return Ok(link);
        }
        let link = tokio::time::timeout(self.timeout, self.target.open(self.timeout))
            .await
            .map_err(|_| self.timed_out())?
            .map_err(|cause| self.failure(cause))?;
        let mut slot = self.link.lock().expect("connection slot poisoned");
        if self.closed.load(Ordering::SeqCst) {
            return Err(SnatchError::Closed);
        }
        *slot = Some(link.clone());
        Ok(link)
    }

    fn current(&self) -> Result<Option<Link>, SnatchError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(SnatchError::Closed);
        }
        Ok(self.link.lock().expect("connection slot poisoned").clone())
    }

    /// Drops the connection after it failed, so that the next `get` opens another (on Sentinel, to the master
    /// named then). A cluster connection reconnects by itself, and is kept.
    pub(crate) fn reset(&self) {
        self.offers.forget();
        if !self.target.is_cluster() {
            self.link.lock().expect("connection slot poisoned").take();
        }
    }

    /// Whether [`Connection::close`] was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Drops the connection; later commands fail with [`SnatchError::Closed`].
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.link.lock().expect("connection slot poisoned").take();
    }

    /// The error of a command (or connection attempt) that did not finish within the command timeout.
    pub(crate) fn timed_out(&self) -> SnatchError {
        self.failure(format!("timed out after {} ms", self.timeout.as_millis()))
    }

    /// A Redis error on this deployment.
    pub(crate) fn failure(&self, cause: impl std::fmt::Display) -> SnatchError {
        SnatchError::Redis { cause: format!("{}: {cause}", self.label) }
    }

    /// The error of a command or connection attempt on this deployment that failed with `e`, worded by [`describe`].
    pub(crate) fn failed(&self, e: &RedisError) -> SnatchError {
        self.failure(describe(e))
    }
}

/// True for errors after which the connection is gone and a resend on another may succeed.
pub(crate) fn is_dropped(e: &RedisError) -> bool {
    e.is_connection_dropped() || e.is_unrecoverable_error()
}

/// True for a write refused by a replica: the server was a master that a failover demoted.
pub(crate) fn is_read_only(result: &RedisResult<Value>) -> bool {
    matches!(result, Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly))
}
