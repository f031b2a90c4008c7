//! The redis crate's connections over our TLS: the crate makes its own rustls configuration and takes no other
//! (redis-rs #463), so for a TLS server we open the TCP and TLS stream ourselves (tls.rs's configuration) and hand
//! it to the crate ([`over_tls`]); a cluster's node connections do the same through [`NodeConnection`].

use crate::server::tls::ServerTls;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::Connect;
use redis::{
    AsyncConnectionConfig, Client, Cmd, ConnectionAddr, ErrorKind, IntoConnectionInfo, Pipeline, RedisConnectionInfo,
    RedisError, RedisFuture, RedisResult, Value,
};
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// A connection to `host:port` over `tls`, then the crate's handshake of `settings` (AUTH, SELECT, HELLO) with
/// `config`; all of it bounded by `timeout`.
pub(crate) async fn over_tls(
    host: &str,
    port: u16,
    nodelay: bool,
    tls: &ServerTls,
    settings: &RedisConnectionInfo,
    config: AsyncConnectionConfig,
    timeout: Duration,
) -> RedisResult<MultiplexedConnection> {
    let connect = async {
        let tcp = TcpStream::connect((host, port)).await?;
        tcp.set_nodelay(nodelay)?;
        let mut stream = tokio_rustls::TlsConnector::from(tls.config.clone()).connect(tls.name.clone(), tcp).await?;
        accepted(&mut stream).await?;
        let (connection, driver) = MultiplexedConnection::new_with_config(settings, stream, config).await?;
        // It ends when the connection's last clone is dropped.
        tokio::spawn(driver);
        Ok(connection)
    };
    tokio::time::timeout(timeout, connect)
        .await
        .unwrap_or_else(|_| Err(RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut))))
}

/// Waits for the server's answer to a PING (PONG, or NOAUTH before AUTH): under TLS 1.3 a server that refuses the
/// client's certificate (missing, expired, of an unknown CA) says so by an alert after the handshake, and a first
/// write may then fail with a broken pipe that hides why; the alert read names it.
async fn accepted<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S) -> std::io::Result<()> {
    let wrote = async {
        stream.write_all(b"PING\r\n").await?;
        stream.flush().await
    }
    .await;
    let mut line = Vec::new();
    let read = async {
        while !line.ends_with(b"\r\n") {
            let mut byte = [0];
            if stream.read(&mut byte).await? == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
            }
            line.push(byte[0]);
        }
        Ok(())
    }
    .await;
    match (wrote, read) {
        (Ok(()), read) => read,
        // A TLS error read (the alert) says more than the write's.
        (Err(_), Err(read)) if read.kind() == std::io::ErrorKind::InvalidData => Err(read),
        (Err(wrote), _) => Err(wrote),
    }
}

/// A cluster's TLS: what the node connections of the clusters registered under it take.
#[derive(Clone)]
struct ClusterTls {
    config: Arc<ClientConfig>,
    /// The database the cluster's URLs name (its registration stands in for it, see [`ClusterTlsKey`]).
    db: i64,
    /// The bound of a node connection's opening (the crate's config does not tell it).
    timeout: Duration,
}

/// The TLS of the clusters whose node connections are open or may open, by key.
static CLUSTERS: LazyLock<Mutex<HashMap<i64, ClusterTls>>> = LazyLock::new(Mutex::default);

/// A cluster's entry in the registry of TLS settings, removed when dropped. [`Connect::connect_with_config`] is a
/// function without state: all a node connection learns of its cluster is the connection info that the cluster
/// client's settings make; the key travels as the client's database number (negative, so never a real one), and
/// [`NodeConnection`] puts the real one back.
pub(crate) struct ClusterTlsKey(i64);

impl ClusterTlsKey {
    /// Registers `config` for a cluster on database `db`, its node connections opened within `timeout`.
    pub(crate) fn new(config: Arc<ClientConfig>, db: i64, timeout: Duration) -> Self {
        static NEXT: AtomicI64 = AtomicI64::new(-1);
        let key = NEXT.fetch_sub(1, Ordering::Relaxed);
        let cluster = ClusterTls { config, db, timeout };
        CLUSTERS.lock().expect("not poisoned").insert(key, cluster);
        Self(key)
    }

    /// The database number that stands for this registration in the cluster client's settings.
    pub(crate) fn db(&self) -> i64 {
        self.0
    }
}

impl Drop for ClusterTlsKey {
    fn drop(&mut self) {
        CLUSTERS.lock().expect("not poisoned").remove(&self.0);
    }
}

/// A connection to one node of a cluster: the crate's own for a plain cluster, over our TLS for a TLS one.
#[derive(Clone)]
pub(crate) struct NodeConnection(MultiplexedConnection);

impl Connect for NodeConnection {
    fn connect_with_config<'a, T>(info: T, config: AsyncConnectionConfig) -> RedisFuture<'a, Self>
    where
        T: IntoConnectionInfo + Send + 'a,
    {
        Box::pin(async move {
            let info = info.into_connection_info()?;
            let registered = CLUSTERS.lock().expect("not poisoned").get(&info.redis_settings().db()).cloned();
            let (ConnectionAddr::TcpTls { host, port, .. }, Some(cluster)) = (info.addr(), registered) else {
                if info.redis_settings().db() < 0 {
                    return Err(RedisError::from((ErrorKind::Io, "the locker of this cluster is closed")));
                }
                let client = Client::open(info)?;
                return client.get_multiplexed_async_connection_with_config(&config).await.map(Self);
            };
            let name = ServerName::try_from(host.clone()).map_err(|e| {
                RedisError::from((ErrorKind::InvalidClientConfig, "invalid TLS server name", e.to_string()))
            })?;
            let tls = ServerTls { config: cluster.config, name };
            let settings = info.redis_settings().clone().set_db(cluster.db);
            let nodelay = info.tcp_settings().nodelay();
            over_tls(host, *port, nodelay, &tls, &settings, config, cluster.timeout).await.map(Self)
        })
    }
}

impl ConnectionLike for NodeConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.0.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.0.req_packed_commands(cmd, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.0.get_db()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_registration_stands_for_a_negative_database_until_dropped() {
        let config = crate::server::tls::client_config(None).unwrap();
        let (first, second) =
            (ClusterTlsKey::new(config.clone(), 3, Duration::ZERO), ClusterTlsKey::new(config, 0, Duration::ZERO));
        assert!(first.db() < 0 && second.db() < 0 && first.db() != second.db());
        assert_eq!(CLUSTERS.lock().unwrap().get(&first.db()).map(|c| c.db), Some(3));
        let key = first.db();
        drop(first);
        assert!(!CLUSTERS.lock().unwrap().contains_key(&key));
        assert!(CLUSTERS.lock().unwrap().contains_key(&second.db()));
    }
}
