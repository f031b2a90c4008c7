//! Acquisitions and releases on a single Redis whose commands the caller carries on a socket of its own (the Node
//! binding sends them on a socket that node's event loop polls, saving the thread hand-offs of the locker's
//! connection). This module opens that socket, writes the commands and turns the replies into leases; a call whose
//! reply the caller could not get because its socket failed, or that the server could not run for want of the
//! release script, is finished on the locker's own connection by `fallback`, with the same token (an acquisition or
//! release made again with its token is safe: the acquire script finds the key ours and keeps it); one that timed out
//! fails, as it would on the locker's connection.

use crate::config::LockOptions;
use crate::direct::awaited::AwaitedReplies;
use crate::direct::stream::DirectStream;
use crate::lock::keys::LockKeys;
use crate::lock::lease::Lease;
use crate::lock::locker::Locker;
use crate::protocol::acquisition;
use crate::protocol::resp::{self, Reply};
use crate::protocol::scripts;
use crate::redlock::quorum::{Grant, Nodes, VALIDITY_ELAPSED_ON_ONE_NODE};
use crate::server::node::Node;
use crate::SnatchError;
use redis::ConnectionAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// The client name of a socket for direct calls, as `CLIENT LIST` shows it.
pub const DIRECT_CLIENT_NAME: &str = "redis-snatch-direct";

/// What a socket for direct calls connects to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirectTarget {
    /// The locker's one server.
    Server,
    /// One master of the locker's Redis Cluster: `host:port` as [`ClusterMap`] names it, and a slot it serves.
    Master { address: String, slot: u16 },
}

/// Which master of a Redis Cluster serves each slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterMap {
    /// The masters, `host:port`.
    pub masters: Vec<String>,
    /// For each slot, the index of its master in `masters`; [`ClusterMap::UNSERVED`] for a slot no master serves.
    owners: Vec<u16>,
}

impl ClusterMap {
    /// The owner of a slot no master serves.
    const UNSERVED: u16 = u16::MAX;

    /// The map of a `CLUSTER SLOTS` reply: `[start, end, [host, port, …], replicas…]` for each range.
    fn new(reply: &redis::Value) -> Self {
        let mut map = Self { masters: Vec::new(), owners: vec![Self::UNSERVED; usize::from(crate::lock::keys::SLOTS)] };
        let redis::Value::Array(ranges) = reply else { return map };
        for range in ranges {
            let redis::Value::Array(fields) = range else { continue };
            let (Some(start), Some(end), Some(redis::Value::Array(master))) =
                (int(fields.first()), int(fields.get(1)), fields.get(2))
            else {
                continue;
            };
            let (Some(redis::Value::BulkString(host)), Some(port)) = (master.first(), int(master.get(1))) else {
                continue;
            };
            let address = format!("{}:{port}", String::from_utf8_lossy(host));
            let index = map.masters.iter().position(|m| *m == address).unwrap_or_else(|| {
                map.masters.push(address);
                map.masters.len() - 1
            });
            let (start, end) = (start.clamp(0, 16383) as usize, end.clamp(0, 16383) as usize);
            for owner in &mut map.owners[start..=end.max(start)] {
                *owner = index as u16;
            }
        }
        map
    }

    /// The index in `masters` of the master that serves `slot`, if any.
    pub fn master_of(&self, slot: u16) -> Option<usize> {
        self.owners.get(usize::from(slot)).copied().filter(|&o| o != Self::UNSERVED).map(usize::from)
    }

    /// What a socket to master `index` connects to.
    pub fn target(&self, index: usize) -> DirectTarget {
        let slot = self.owners.iter().position(|&o| usize::from(o) == index).unwrap_or(0) as u16;
        DirectTarget::Master { address: self.masters[index].clone(), slot }
    }
}

/// An integer field of a reply.
fn int(value: Option<&redis::Value>) -> Option<i64> {
    match value? {
        redis::Value::Int(n) => Some(*n),
        _ => None,
    }
}

/// Why a direct call got no reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoReply {
    /// The socket failed first: whether Redis ran the call is not known, so it is made again on the locker's own
    /// connection with the same token (see the module's documentation).
    Dropped,
    /// The command timeout passed: the call fails and is not made again, as on the locker's own connection.
    TimedOut,
}

/// What a reply comes to.
#[derive(Debug)]
pub enum Settled<T, C> {
    /// The call's outcome.
    Done(Result<T, SnatchError>),
    /// The reply does not settle the call: finish it with its `fallback`.
    Fallback(C),
}

/// One attempt to acquire a key on a single Redis, its command sent by the caller.
pub struct DirectAcquire {
    locker: Locker,
    keys: LockKeys,
    token: String,
    ttl: Duration,
    options: LockOptions,
    started: Instant,
}

impl std::fmt::Debug for DirectAcquire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectAcquire").field("key", &self.keys.key).finish()
    }
}

/// The release of a lease on a single Redis, its command sent by the caller.
#[derive(Debug)]
pub struct DirectRelease {
    lease: Arc<Lease>,
}

impl Locker {
    /// Opens a socket for direct calls to `target`: connected (over TLS for a `rediss://` URL or a TLS cluster, with
    /// the locker's TLS settings), authenticated, on the URL's database, named [`DIRECT_CLIENT_NAME`], with the
    /// release script loaded, in non-blocking mode. `None` when direct calls do not apply: several nodes (Redlock), a
    /// Sentinel deployment, `wait_replicas`, a Unix socket URL, `target` not of the locker's kind, or a server that
    /// refuses the commands of direct acquisitions (see [`acquisition_probe`]). Bounded by the command timeout.
    pub async fn direct_socket(&self, target: &DirectTarget) -> Result<Option<DirectStream>, SnatchError> {
        let Some(node) = self.nodes().single().filter(|_| self.config().wait_replicas == 0) else { return Ok(None) };
        // Not for a Sentinel master, nor when acquisitions wait for replicas (which the main connection does).
        let master;
        let endpoint = match (target, node.server(), node.cluster()) {
            (DirectTarget::Server, Some(server), _) => server,
            (DirectTarget::Master { address, .. }, _, Some(cluster)) => {
                master = cluster.master(address)?;
                &master
            }
            _ => return Ok(None),
        };
        let info = endpoint.info();
        let (Some(host), ConnectionAddr::Tcp(_, port) | ConnectionAddr::TcpTls { port, .. }) =
            (endpoint.connect_host(), info.addr())
        else {
            return Ok(None);
        };
        let settings = info.redis_settings();
        let mut handshake: Vec<Vec<&str>> = Vec::new();
        if let Some(password) = settings.password() {
            handshake.push(["AUTH"].into_iter().chain(settings.username()).chain([password]).collect());
        }
        let db = settings.db().to_string();
        if settings.db() != 0 {
            handshake.push(vec!["SELECT", &db]);
        }
        handshake.push(vec!["CLIENT", "SETNAME", DIRECT_CLIENT_NAME]);
        handshake.push(vec!["SCRIPT", "LOAD", scripts::RELEASE.source()]);
        // On a cluster master, a key of a slot it serves (another would be answered MOVED).
        let probe_key = match target {
            DirectTarget::Server => [self.config().prefix.as_str(), "redis-snatch-probe"].concat(),
            DirectTarget::Master { slot, .. } => {
                let tag =
                    (0u32..).map(|n| n.to_string()).find(|tag| crate::lock::keys::slot(tag) == *slot).expect("a tag");
                [self.config().prefix.as_str(), "redis-snatch-probe{", &tag, "}"].concat()
            }
        };
        let probe = acquisition_probe(&probe_key);
        let open = async {
            let tcp = TcpStream::connect((host, *port)).await.map_err(|e| node.failure(e))?;
            tcp.set_nodelay(true).map_err(|e| node.failure(e))?;
            let opened = match &endpoint.direct_tls {
                None => {
                    let mut tcp = tcp;
                    let accepted = greet(&mut tcp, &handshake, probe).await.map_err(|e| node.failure(e))?;
                    (accepted, tcp.into_std(), None)
                }
                Some(tls) => {
                    let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
                    let mut stream = connector.connect(tls.name.clone(), tcp).await.map_err(|e| node.failure(e))?;
                    let accepted = greet(&mut stream, &handshake, probe).await.map_err(|e| node.failure(e))?;
                    let (tcp, session) = stream.into_inner();
                    (accepted, tcp.into_std(), Some(session))
                }
            };
            match opened {
                (Err(e), ..) => Err(node.failure(e)),
                (Ok(false), ..) => Ok(None),
                (Ok(true), tcp, session) => Ok(Some(DirectStream::new(tcp.map_err(|e| node.failure(e))?, session))),
            }
        };
        tokio::time::timeout(node.timeout(), open).await.unwrap_or_else(|_| Err(node.timed_out()))
    }

    /// Which master serves each slot of the locker's Redis Cluster (`CLUSTER SLOTS` on any node), for direct calls
    /// to go to; `None` when the locker is not on a cluster, or direct calls do not apply (`wait_replicas`). Bounded
    /// by the command timeout.
    pub async fn direct_cluster_map(&self) -> Result<Option<ClusterMap>, SnatchError> {
        let Some(node) = self.nodes().single().filter(|_| self.config().wait_replicas == 0) else { return Ok(None) };
        if node.cluster().is_none() {
            return Ok(None);
        }
        let slots = tokio::time::timeout(node.timeout(), node.cluster_slots())
            .await
            .unwrap_or_else(|_| Err(node.timed_out()))?;
        Ok(Some(ClusterMap::new(&slots)))
    }

    /// Starts one attempt to acquire `key` whose command the caller sends. `None` when direct calls do not apply:
    /// several nodes (Redlock), or `options.wait` (waiting acquisitions stay on the locker's connection). The
    /// caller counts the call with [`Locker::enter`].
    pub fn direct_acquire(&self, key: &str, options: &LockOptions) -> Result<Option<DirectAcquire>, SnatchError> {
        let keys = self.checked_keys(key, options)?;
        if self.nodes().single().is_none() || !options.wait.is_zero() {
            return Ok(None);
        }
        Ok(Some(DirectAcquire {
            locker: self.clone(),
            keys,
            token: Locker::new_token(),
            ttl: self.lease_ttl(options),
            options: options.clone(),
            started: Instant::now(),
        }))
    }
}

impl DirectAcquire {
    /// What the command's reply, or its absence, comes to: the lease (supervised like any other), `None` when the
    /// key is held by someone else, or an error. Must be called within the Tokio runtime.
    pub fn settle(self, reply: Result<Reply, NoReply>) -> Settled<Option<Arc<Lease>>, Self> {
        let timed_out = reply == Err(NoReply::TimedOut);
        let fence = match answer(single(self.locker.nodes()), reply) {
            Answer::Int(fence) => fence,
            Answer::Again => return Settled::Fallback(self),
            Answer::Failed(e) => {
                if timed_out {
                    // Redis may still apply the command: undo it, whether it comes before this release or after.
                    self.locker.nodes().release_later(&self.keys, &self.token, Instant::now(), true);
                }
                return Settled::Done(Err(e));
            }
        };
        if fence < 0 {
            return Settled::Done(Ok(None));
        }
        if fence < crate::lock::keys::CLOCK_FLOOR {
            // Ours, but the counter was new (or from before counters expired): the acquire script, asked again with
            // our token, raises it to the server's clock and gives that as the fence.
            return Settled::Fallback(self);
        }
        let valid_until = self.locker.nodes().valid_until(self.started, self.ttl);
        if Instant::now() >= valid_until {
            // Ours, but too late to be of use: give it back.
            let nodes = self.locker.nodes();
            nodes.release_later(&self.keys, &self.token, Instant::now(), false);
            return Settled::Done(Err(single(nodes).failure(VALIDITY_ELAPSED_ON_ONE_NODE)));
        }
        let grant = Grant { fence, started: self.started, valid_until };
        Settled::Done(Ok(Some(self.locker.adopt(self.keys, self.token, grant, self.ttl, &self.options))))
    }

    /// The key as the user gave it.
    pub fn key(&self) -> &str {
        &self.keys.key
    }

    /// The cluster slot of the lock (which master of a cluster the call goes to).
    pub fn slot(&self) -> u16 {
        crate::lock::keys::slot(&self.keys.lock)
    }

    /// Makes the attempt on the locker's own connection, with the same token.
    pub async fn fallback(self) -> Result<Option<Arc<Lease>>, SnatchError> {
        self.locker.attempt(self.keys, self.token, &self.options).await
    }
}

impl Lease {
    /// The cluster slot of the lock (which master of a cluster its release goes to).
    pub fn slot(&self) -> u16 {
        crate::lock::keys::slot(&self.keys().lock)
    }

    /// Starts the release of this lease with a command the caller sends; the lease counts as released from now on.
    /// `None` for a semaphore's permit, while minHold keeps the key, or when it was released already:
    /// [`Lease::release`] then does what is left (the release, one that keeps the key, or nothing).
    pub fn direct_release(self: &Arc<Self>) -> Option<DirectRelease> {
        if self.keys().limit.is_some() || !self.hold_left().is_zero() || !self.end_released() {
            return None;
        }
        Some(DirectRelease { lease: self.clone() })
    }
}

impl DirectRelease {
    /// What the reply, or its absence, comes to: whether the key was still ours, or an error.
    pub fn settle(self, reply: Result<Reply, NoReply>) -> Settled<bool, Self> {
        match answer(single(self.lease.nodes()), reply) {
            Answer::Int(n) => Settled::Done(Ok(n == 1)),
            Answer::Again => Settled::Fallback(self),
            Answer::Failed(e) => Settled::Done(Err(e)),
        }
    }

    /// Releases on the locker's own connection.
    pub async fn fallback(self) -> Result<bool, SnatchError> {
        self.lease.nodes().try_release(self.lease.keys(), self.lease.token()).await
    }
}

/// A direct call's command, as [`write_commands`] takes it.
pub enum DirectCommand<'a> {
    /// An acquisition's.
    Acquire(&'a mut DirectAcquire),
    /// A release's.
    Release(&'a DirectRelease),
}

/// What a caller keeps of a direct call until its reply: it knows the call's command.
pub trait DirectCall {
    /// The call's command.
    fn command(&mut self) -> DirectCommand<'_>;
}

/// Appends the commands of `calls`, in order, and awaits their replies in `awaited`: with `group`, the calls of each
/// run of consecutive calls of one kind share one command, which costs Redis less per lock than a command each
/// (bench/README.md, profile steps 19 and 22); without (a cluster master, which refuses a command whose keys are in
/// different slots), each call has its own. An acquisition's time counts from here.
pub fn write_commands<'a, C: DirectCall + 'a>(
    calls: impl IntoIterator<Item = &'a mut C>,
    buf: &mut Vec<u8>,
    awaited: &mut AwaitedReplies,
    group: bool,
) {
    let mut calls = calls.into_iter().map(C::command).peekable();
    while let Some(first) = calls.next() {
        match first {
            DirectCommand::Acquire(first) => {
                let mut run = vec![first];
                while let Some(DirectCommand::Acquire(next)) =
                    calls.next_if(|c| group && matches!(c, DirectCommand::Acquire(_)))
                {
                    run.push(next);
                }
                write_acquisitions(&mut run, buf);
                awaited.acquisitions(run.len());
            }
            DirectCommand::Release(first) => {
                let mut run = vec![first];
                while let Some(DirectCommand::Release(next)) =
                    calls.next_if(|c| group && matches!(c, DirectCommand::Release(_)))
                {
                    run.push(next);
                }
                write_releases(&run, buf);
                awaited.script(run.len());
            }
        }
    }
}

/// `MULTI`, then the commands that take a lock ([`acquisition::COMMANDS`]: `SET … NX PX … GET`, `INCR` and
/// `PEXPIRE` of the fence counter) for each, then `EXEC`: as atomic as the acquire script, which starts with the same
/// commands, for a fraction of Redis's work (no Lua; bench/README.md, profile step 22). A counter found new (below
/// [`crate::lock::keys::CLOCK_FLOOR`]) needs the acquire script to raise it: see [`DirectAcquire::settle`]. The
/// acquisitions' time counts from now.
fn write_acquisitions(run: &mut [&mut DirectAcquire], buf: &mut Vec<u8>) {
    let started = Instant::now();
    resp::encode(buf, &["MULTI"]);
    for attempt in run.iter_mut() {
        acquisition::write(
            buf,
            &acquisition::Values {
                lock: &attempt.keys.lock,
                fence: &attempt.keys.fence,
                token: &attempt.token,
                ttl_ms: attempt.ttl.as_millis(),
                fence_ttl_ms: attempt.locker.config().fence_ttl.as_millis(),
            },
        );
        attempt.started = started;
    }
    resp::encode(buf, &["EXEC"]);
}

/// The commands with which the handshake asks whether the server runs direct acquisitions, and how many replies they
/// get: a transaction as [`write_acquisitions`] sends it (Redis accepts `SET` with both `NX` and `GET` from 7.0 on,
/// and finds an option it refuses only when the transaction runs) on `key` and a fence counter beside it, which it
/// then deletes. A server that answers any of them with an error gets no direct calls: its one-attempt calls go over
/// the locker's own connection, by the acquire script.
fn acquisition_probe(key: &str) -> (Vec<u8>, usize) {
    let fence = [key, ":fence"].concat();
    let mut probe = Vec::new();
    resp::encode(&mut probe, &["MULTI"]);
    let values = acquisition::Values { lock: key, fence: &fence, token: "", ttl_ms: 1, fence_ttl_ms: 1 };
    acquisition::write(&mut probe, &values);
    resp::encode(&mut probe, &["DEL", key, &fence]);
    resp::encode(&mut probe, &["EXEC"]);
    (probe, acquisition::COMMANDS.len() + 3)
}

/// Whether `reply` is an error or, for a transaction's, holds one.
fn holds_error(reply: &Reply) -> bool {
    match reply {
        Reply::Error(_) => true,
        Reply::Array(replies) => replies.iter().any(holds_error),
        _ => false,
    }
}

/// `EVALSHA <release> <n> lock… token…`.
fn write_releases(run: &[&DirectRelease], buf: &mut Vec<u8>) {
    resp::header(buf, 3 + 2 * run.len());
    resp::arg_bytes(buf, b"EVALSHA");
    resp::arg_bytes(buf, scripts::RELEASE.hash().as_bytes());
    resp::arg_number(buf, run.len());
    for release in run {
        resp::arg_bytes(buf, release.lease.keys().lock.as_bytes());
    }
    for release in run {
        resp::arg_bytes(buf, release.lease.token().as_bytes());
    }
}

/// The error replies after which a direct call is made again on the locker's own connection.
const AGAIN_ON: [&str; 5] = ["NOSCRIPT", "MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"];

/// What a reply, or its absence, says of a direct call, before what that means for its kind.
enum Answer {
    Int(i64),
    /// Make the call again on the locker's own connection (the server lacked the script, or the socket failed).
    Again,
    Failed(SnatchError),
}

fn answer(node: &Node, reply: Result<Reply, NoReply>) -> Answer {
    match reply {
        Ok(Reply::Int(n)) => Answer::Int(n),
        // The server lacks the script, or (a cluster master) no longer serves the key's slot, or cannot now: the
        // locker's own connection knows what to do.
        Ok(Reply::Error(text)) if AGAIN_ON.iter().any(|code| text.starts_with(code)) => Answer::Again,
        Err(NoReply::Dropped) => Answer::Again,
        Ok(Reply::Error(text)) => Answer::Failed(node.failure(text)),
        Ok(other) => Answer::Failed(node.failure(format!("unexpected reply {other:?}"))),
        Err(NoReply::TimedOut) => Answer::Failed(node.timed_out()),
    }
}

/// The node of a locker that makes direct calls.
fn single(nodes: &Nodes) -> &Node {
    nodes.single().expect("direct calls are for a single node")
}

/// Sends the `handshake` commands and the `probe` (its commands, and how many replies they get), and reads their
/// replies: an error when a handshake command fails (say, AUTH); whether the server accepts the probe (see
/// [`acquisition_probe`]) otherwise.
async fn greet<S: AsyncRead + AsyncWrite + Unpin>(
    socket: &mut S,
    handshake: &[Vec<&str>],
    (probe, probe_replies): (Vec<u8>, usize),
) -> std::io::Result<Result<bool, String>> {
    let mut request = Vec::new();
    for command in handshake {
        resp::encode(&mut request, command);
    }
    request.extend_from_slice(&probe);
    socket.write_all(&request).await?;
    socket.flush().await?;
    let mut replies = Vec::new();
    for _ in handshake {
        if let Reply::Error(text) = read_reply(socket, &mut replies).await? {
            return Ok(Err(text));
        }
    }
    let mut accepted = true;
    for _ in 0..probe_replies {
        accepted &= !holds_error(&read_reply(socket, &mut replies).await?);
    }
    Ok(Ok(accepted))
}

/// Reads one reply from `socket` (for the handshake), `buf` holding what was read beyond it.
async fn read_reply<S: AsyncRead + Unpin>(socket: &mut S, buf: &mut Vec<u8>) -> std::io::Result<Reply> {
    loop {
        match resp::parse(buf) {
            Ok(Some((reply, len))) => {
                buf.drain(..len);
                return Ok(reply);
            }
            Ok(None) => {}
            Err(e) => return Err(std::io::Error::other(e.0)),
        }
        let mut chunk = [0u8; 512];
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}
