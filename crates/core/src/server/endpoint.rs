//! How the locker reaches one Redis server: its URL parsed, with the locker's credentials and TLS settings applied
//! ([`Access`]), and what opens connections to it ([`Endpoint`]). Errors name a server by its URL without the
//! password ([`redact`]).

use crate::config::{LockerConfig, TlsOptions};
use crate::redact::redact;
use crate::server::dial::{self, ClusterTlsKey};
use crate::server::tls::{self, ServerTls};
use redis::aio::{AsyncPushSender, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Client, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, ProtocolVersion};
use snatch_protocol::SnatchError;
use std::sync::Arc;
use std::time::Duration;

/// The credentials and TLS settings a locker applies to every server it connects to.
#[derive(Clone)]
pub(crate) struct Access {
    username: Option<String>,
    password: Option<String>,
    /// The `tls` options, checked; `None` without (a `rediss://` URL then takes the defaults).
    tls: Option<Tls>,
}

/// TLS settings, checked and ready for every TLS connection.
#[derive(Clone)]
struct Tls {
    servername: Option<String>,
    config: Arc<rustls::ClientConfig>,
}

impl Access {
    /// The locker's credentials, and its TLS settings checked (PEM parsed) once for all its connections.
    pub(crate) fn new(config: &LockerConfig) -> Result<Self, SnatchError> {
        let tls = config.tls.as_ref().map(Tls::new).transpose()?;
        Ok(Self { username: config.username.clone(), password: config.password.clone(), tls })
    }

    /// The same TLS settings without credentials (for servers whose credentials are in their URLs only).
    pub(crate) fn without_credentials(&self) -> Self {
        Self { username: None, password: None, tls: self.tls.clone() }
    }

    /// `url` parsed, with the locker's credentials where the URL gives none and, for a `rediss://` URL, its TLS
    /// settings. An invalid URL is an invalid argument.
    pub(crate) fn endpoint(&self, url: &str) -> Result<Endpoint, SnatchError> {
        let info = parse(url)?;
        if matches!(info.addr(), ConnectionAddr::Unix(_)) && self.tls.as_ref().is_some_and(|t| t.servername.is_some()) {
            return Err(SnatchError::type_arg("tls.servername needs a rediss:// URL"));
        }
        self.build(redact(url), info)
    }

    /// A server found at `host:port` (a master that sentinels named), over TLS when `tls`, on database 0.
    pub(crate) fn discovered(&self, host: &str, port: u16, tls: bool) -> Result<Endpoint, SnatchError> {
        let scheme = if tls { "rediss" } else { "redis" };
        let addr = if tls {
            ConnectionAddr::TcpTls { host: host.to_owned(), port, insecure: false, tls_params: None }
        } else {
            ConnectionAddr::Tcp(host.to_owned(), port)
        };
        let info = addr.into_connection_info().map_err(|e| SnatchError::Redis { cause: e.to_string() })?;
        let label = if host.contains(':') {
            format!("{scheme}://[{host}]:{port}")
        } else {
            format!("{scheme}://{host}:{port}")
        };
        self.build(label, info)
    }

    /// The seed nodes of a cluster, with the credentials every node's connection takes; over TLS, with the
    /// registration (`tls`, of [`Self::cluster_tls`]) that gives the node connections this locker's TLS.
    pub(crate) fn cluster(
        &self,
        urls: &[String],
        timeout: Duration,
        tls: Option<&ClusterTlsKey>,
    ) -> Result<redis::cluster::ClusterClientBuilder, SnatchError> {
        let seeds = Self::seeds(urls)?;
        let first = seeds.first().map(|s| s.redis_settings().clone()).unwrap_or_default();
        // Calls are bounded by the command timeout as a whole (batcher.rs); a reply may take that long itself (WAIT
        // for waitReplicas blocks for it). Retries (after TRYAGAIN during a slot migration, or a node that dropped)
        // wait 2 ms, doubling up to 100 ms, instead of the crate's 1.28 s and more.
        let seeds = seeds.into_iter().map(|seed| {
            // The registration stands in for the database (dial.rs puts it back).
            let settings = seed.redis_settings().clone().set_db(0);
            seed.set_redis_settings(settings)
        });
        let mut builder = redis::cluster::ClusterClientBuilder::new(seeds)
            .connection_timeout(timeout)
            .response_timeout(timeout * 2)
            .overall_response_timeout(None)
            .min_retry_wait(2)
            .max_retry_wait(100)
            .retry_wait_formula(5, 2)
            .database_id(tls.map_or(first.db(), ClusterTlsKey::db));
        if first.username().is_none() {
            if let Some(username) = &self.username {
                builder = builder.username(username);
            }
        }
        if first.password().is_none() {
            if let Some(password) = &self.password {
                builder = builder.password(password);
            }
        }
        Ok(builder)
    }

    /// For a cluster of TLS nodes (`rediss://` seeds): the registration of this locker's TLS for its node
    /// connections, held as long as they may open.
    pub(crate) fn cluster_tls(&self, urls: &[String], timeout: Duration) -> Result<Option<ClusterTlsKey>, SnatchError> {
        let seeds = Self::seeds(urls)?;
        if !seeds.iter().any(|seed| matches!(seed.addr(), ConnectionAddr::TcpTls { .. })) {
            return Ok(None);
        }
        let db = seeds.first().map_or(0, |seed| seed.redis_settings().db());
        Ok(Some(ClusterTlsKey::new(self.tls_config()?, db, timeout)))
    }

    /// `urls` parsed, without CLIENT SETINFO on connecting (one command fewer for the ACL a locker needs:
    /// docs/deployments.md).
    fn seeds(urls: &[String]) -> Result<Vec<ConnectionInfo>, SnatchError> {
        urls.iter()
            .map(|url| {
                let info = parse(url)?;
                let settings = info.redis_settings().clone().set_skip_set_lib_name();
                Ok(info.set_redis_settings(settings))
            })
            .collect()
    }

    /// The rustls configuration of this locker's TLS connections.
    fn tls_config(&self) -> Result<Arc<rustls::ClientConfig>, SnatchError> {
        match &self.tls {
            Some(tls) => Ok(tls.config.clone()),
            None => tls::client_config(None),
        }
    }

    fn build(&self, label: String, info: ConnectionInfo) -> Result<Endpoint, SnatchError> {
        // No CLIENT SETINFO on connecting: one command fewer for the ACL a locker needs (docs/deployments.md).
        let mut settings = info.redis_settings().clone().set_skip_set_lib_name();
        if settings.username().is_none() {
            if let Some(username) = &self.username {
                settings = settings.set_username(username);
            }
        }
        if settings.password().is_none() {
            if let Some(password) = &self.password {
                settings = settings.set_password(password);
            }
        }
        let info = info.set_redis_settings(settings);
        let tls = match info.addr() {
            ConnectionAddr::TcpTls { host, .. } => {
                // Checked against (and sent as SNI) `servername` when given, else the URL's host.
                let name = self.tls.as_ref().and_then(|t| t.servername.as_deref()).unwrap_or(host);
                Some(ServerTls::new(self.tls_config()?, name)?)
            }
            _ => None,
        };
        let client =
            Client::open(info).map_err(|e| SnatchError::type_arg(format!("cannot use Redis URL '{label}': {e}")))?;
        Ok(Endpoint { label, client, tls })
    }
}

impl Tls {
    fn new(options: &TlsOptions) -> Result<Self, SnatchError> {
        Ok(Self { servername: options.servername.clone(), config: tls::client_config(Some(options))? })
    }
}

/// One server: what opens connections to it.
pub(crate) struct Endpoint {
    /// The URL without its password, for errors.
    pub(crate) label: String,
    client: Client,
    /// For a TLS server: the TLS every connection to it speaks (the crate's and the direct connection's).
    pub(crate) tls: Option<ServerTls>,
}

impl Endpoint {
    /// A command connection (RESP2), the attempt bounded by `timeout`; its commands have no timeout of their own.
    pub(crate) async fn connect(&self, timeout: Duration) -> redis::RedisResult<MultiplexedConnection> {
        match &self.tls {
            Some(tls) => self.over_tls(tls, self.info(), config(timeout), timeout).await,
            None => self.client.get_multiplexed_async_connection_with_config(&config(timeout)).await,
        }
    }

    /// A connection for subscriptions (RESP3), whose messages go to `push`.
    pub(crate) async fn subscriber(
        &self,
        timeout: Duration,
        push: impl AsyncPushSender,
    ) -> redis::RedisResult<MultiplexedConnection> {
        let info = self.client.get_connection_info().clone();
        let settings = info.redis_settings().clone().set_protocol(ProtocolVersion::RESP3);
        let info = info.set_redis_settings(settings);
        let config = config(timeout).set_push_sender(push);
        match &self.tls {
            Some(tls) => self.over_tls(tls, &info, config, timeout).await,
            None => Client::open(info)?.get_multiplexed_async_connection_with_config(&config).await,
        }
    }

    async fn over_tls(
        &self,
        tls: &ServerTls,
        info: &ConnectionInfo,
        config: AsyncConnectionConfig,
        timeout: Duration,
    ) -> redis::RedisResult<MultiplexedConnection> {
        let ConnectionAddr::TcpTls { host, port, .. } = info.addr() else { unreachable!("a TLS endpoint's address") };
        let nodelay = info.tcp_settings().nodelay();
        dial::over_tls(host, *port, nodelay, tls, info.redis_settings(), config, timeout).await
    }

    /// The server's address, credentials and database.
    pub(crate) fn info(&self) -> &ConnectionInfo {
        self.client.get_connection_info()
    }

    /// Whether the connection is TLS.
    pub(crate) fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The host to connect to (none for a Unix socket).
    pub(crate) fn connect_host(&self) -> Option<&str> {
        match self.info().addr() {
            ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } => Some(host),
            _ => None,
        }
    }
}

/// `url` parsed; an invalid one is an invalid argument (named without its password).
fn parse(url: &str) -> Result<ConnectionInfo, SnatchError> {
    url.into_connection_info().map_err(|e| SnatchError::type_arg(format!("invalid Redis URL '{}': {e}", redact(url))))
}

/// The settings of a connection opened within `timeout`, whose commands have no timeout of their own.
fn config(timeout: Duration) -> AsyncConnectionConfig {
    AsyncConnectionConfig::new().set_connection_timeout(Some(timeout)).set_response_timeout(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_apply_where_the_url_has_none() {
        let config = LockerConfig {
            username: Some("opt-user".into()),
            password: Some("opt-pass".into()),
            ..LockerConfig::default()
        };
        let access = Access::new(&config).unwrap();
        let plain = access.endpoint("redis://127.0.0.1:1").unwrap();
        assert_eq!(plain.info().redis_settings().username(), Some("opt-user"));
        assert_eq!(plain.info().redis_settings().password(), Some("opt-pass"));
        let own = access.endpoint("redis://url-user:url-pass@127.0.0.1:1").unwrap();
        assert_eq!(own.info().redis_settings().username(), Some("url-user"));
        assert_eq!(own.info().redis_settings().password(), Some("url-pass"));
        assert_eq!(own.label, "redis://url-user:***@127.0.0.1:1");
        let bare = access.without_credentials().endpoint("redis://127.0.0.1:1").unwrap();
        assert_eq!(bare.info().redis_settings().password(), None);
    }

    #[test]
    fn bad_urls_and_pem_are_invalid_arguments() {
        let access = Access::new(&LockerConfig::default()).unwrap();
        assert_eq!(access.endpoint("http://nope").err().unwrap().code(), "ERR_SNATCH_INVALID_ARG");
        for ca in ["not a certificate", "-----BEGIN CERTIFICATE-----\nAAAA"] {
            let tls = TlsOptions { ca: vec![ca.into()], reject_unauthorized: true, ..TlsOptions::default() };
            let err = Access::new(&LockerConfig { tls: Some(tls), ..LockerConfig::default() }).err().unwrap();
            assert_eq!(err.code(), "ERR_SNATCH_INVALID_ARG", "{ca}");
        }
        let key = TlsOptions {
            cert: Some("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".into()),
            key: Some("no key".into()),
            reject_unauthorized: true,
            ..TlsOptions::default()
        };
        let err = Access::new(&LockerConfig { tls: Some(key), ..LockerConfig::default() }).err().unwrap();
        assert_eq!(err.code(), "ERR_SNATCH_INVALID_ARG");
        assert!(!err.to_string().contains("no key"), "the key's text is not repeated: {err}");
    }

    #[test]
    fn servername_names_the_certificate_and_the_url_the_host() {
        let tls =
            TlsOptions { servername: Some("redis.test".into()), reject_unauthorized: true, ..TlsOptions::default() };
        let access = Access::new(&LockerConfig { tls: Some(tls), ..LockerConfig::default() }).unwrap();
        let endpoint = access.endpoint("rediss://127.0.0.1:6380").unwrap();
        assert_eq!(endpoint.connect_host(), Some("127.0.0.1"));
        assert!(
            matches!(&endpoint.tls, Some(tls) if tls.name == rustls::pki_types::ServerName::try_from("redis.test").unwrap())
        );
    }
}
