//! Opening a socket for direct calls: connected over TCP (and TLS for a `rediss://` URL or a TLS cluster, with the
//! locker's TLS settings), then the handshake that snatch-protocol's direct/handshake.rs writes and reads; and the
//! slot map of a cluster, whose masters the sockets go to.

use crate::direct::stream::DirectStream;
use crate::lock::locker::Locker;
use redis::ConnectionAddr;
use snatch_protocol::direct::handshake::{Greeted, Greeting, Handshake};
use snatch_protocol::direct::target::{ClusterMap, DirectTarget, SlotRange};
use snatch_protocol::resp::{self, Reply};
use snatch_protocol::SnatchError;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// Opens a socket for direct calls of `locker` to `target`: connected, authenticated, on the URL's database, named
/// [`snatch_protocol::direct::handshake::DIRECT_CLIENT_NAME`], with the release and acquire scripts loaded, in
/// non-blocking mode, knowing the server's own commands it may use (snatch-protocol's offers.rs).
/// `None` when direct calls do not apply to the locker ([`Locker::direct_node`]), to `target` (not of the locker's
/// kind, or a Unix socket URL), or the server refuses the commands of direct acquisitions (the handshake's probe).
/// Bounded by the command timeout.
pub async fn open(locker: &Locker, target: &DirectTarget) -> Result<Option<DirectStream>, SnatchError> {
    let Some(node) = locker.direct_node() else { return Ok(None) };
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
    let prefix = &locker.config().prefix;
    let greeting =
        Greeting { username: settings.username(), password: settings.password(), db: settings.db(), prefix, target };
    let (handshake, hello) = Handshake::new(&greeting);
    let open = async {
        let tcp = TcpStream::connect((host, *port)).await.map_err(|e| node.failure(format!("cannot connect: {e}")))?;
        tcp.set_nodelay(true).map_err(|e| node.failure(e))?;
        let (accepted, tcp, session) = match &endpoint.tls {
            None => {
                let mut tcp = tcp;
                let accepted = greet(&mut tcp, handshake, &hello).await.map_err(|e| node.failure(e))?;
                (accepted, tcp.into_std(), None)
            }
            Some(tls) => {
                let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
                let mut stream = connector.connect(tls.name.clone(), tcp).await.map_err(|e| node.failure(e))?;
                let accepted = greet(&mut stream, handshake, &hello).await.map_err(|e| node.failure(e))?;
                let (tcp, session) = stream.into_inner();
                (accepted, tcp.into_std(), Some(session))
            }
        };
        match accepted {
            Err(refusal) => Err(node.failure(refusal)),
            Ok(Greeted::Refused) => Ok(None),
            Ok(Greeted::Direct(offers)) => {
                Ok(Some(DirectStream::new(tcp.map_err(|e| node.failure(e))?, session, offers)))
            }
        }
    };
    tokio::time::timeout(node.timeout(), open).await.unwrap_or_else(|_| Err(node.timed_out()))
}

/// Which master serves each slot of `locker`'s Redis Cluster (`CLUSTER SLOTS` on any node), for direct calls to go
/// to; `None` when the locker is not on a cluster or direct calls do not apply to it. Bounded by the command timeout.
pub async fn cluster_map(locker: &Locker) -> Result<Option<ClusterMap>, SnatchError> {
    let Some(node) = locker.direct_node().filter(|node| node.cluster().is_some()) else { return Ok(None) };
    let slots =
        tokio::time::timeout(node.timeout(), node.cluster_slots()).await.unwrap_or_else(|_| Err(node.timed_out()))?;
    Ok(Some(ClusterMap::new(slot_ranges(&slots))))
}

/// The ranges of a `CLUSTER SLOTS` reply: `[start, end, [host, port, …], replicas…]` for each; malformed ones are
/// left out.
pub(crate) fn slot_ranges(reply: &redis::Value) -> Vec<SlotRange> {
    let redis::Value::Array(ranges) = reply else { return Vec::new() };
    let int = |value: Option<&redis::Value>| match value? {
        redis::Value::Int(n) => Some(*n),
        _ => None,
    };
    ranges
        .iter()
        .filter_map(|range| {
            let redis::Value::Array(fields) = range else { return None };
            let (Some(start), Some(end), Some(redis::Value::Array(master))) =
                (int(fields.first()), int(fields.get(1)), fields.get(2))
            else {
                return None;
            };
            let (Some(redis::Value::BulkString(host)), Some(port)) = (master.first(), int(master.get(1))) else {
                return None;
            };
            Some(SlotRange { start, end, master: format!("{}:{port}", String::from_utf8_lossy(host)) })
        })
        .collect()
}

/// Sends `hello` (the handshake's bytes) and reads replies until `handshake` has them all: whether the server runs
/// direct acquisitions and what it offers, or the refusal of a handshake command (say, AUTH's).
async fn greet<S: AsyncRead + AsyncWrite + Unpin>(
    socket: &mut S,
    mut handshake: Handshake,
    hello: &[u8],
) -> std::io::Result<Result<Greeted, String>> {
    socket.write_all(hello).await?;
    socket.flush().await?;
    let mut buf = Vec::new();
    loop {
        if let Some(done) = handshake.take(read_reply(socket, &mut buf).await?) {
            return Ok(done);
        }
    }
}

/// Reads one reply from `socket`, `buf` holding what was read beyond it.
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
