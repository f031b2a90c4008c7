//! How the locker reaches one Redis server: its URL parsed, with the locker's credentials and TLS settings applied
//! ([`Access`]), and what opens connections to it ([`Endpoint`]). Errors name a server by its URL without the
//! password ([`redact`]).

use crate::config::{LockerConfig, TlsOptions};
use crate::redact::redact;
use base64::Engine;
use redis::aio::{AsyncPushSender, MultiplexedConnection};
use redis::io::AsyncDNSResolver;
use redis::{
    AsyncConnectionConfig, Client, ClientTlsConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo,
    ProtocolVersion, RedisFuture, TlsCertificates,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use snatch_protocol::SnatchError;
use std::net::SocketAddr;
use std::sync::{Arc, Once};
use std::time::Duration;

/// The credentials and TLS settings a locker applies to every server it connects to.
#[derive(Clone)]
pub(crate) struct Access {
    username: Option<String>,
    password: Option<String>,
    tls: Option<Tls>,
}

/// TLS settings, checked and ready for the redis crate and for the direct connection.
#[derive(Clone)]
struct Tls {
    /// Certificates to hand to the redis crate; `None` for the defaults (the platform's trusted roots, no client
    /// certificate).
    certificates: Option<TlsCertificates>,
    servername: Option<String>,
    verify: bool,
    /// The same trust, client certificate and checks, for the direct connection's own TLS (direct/calls.rs).
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
        let info = url
            .into_connection_info()
            .map_err(|e| SnatchError::type_arg(format!("invalid Redis URL '{}': {e}", redact(url))))?;
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

    /// The seed nodes of a cluster, with the credentials and TLS settings every node's connection takes.
    pub(crate) fn cluster(
        &self,
        urls: &[String],
        timeout: Duration,
    ) -> Result<redis::cluster::ClusterClientBuilder, SnatchError> {
        let mut seeds = Vec::with_capacity(urls.len());
        for url in urls {
            let info = url
                .as_str()
                .into_connection_info()
                .map_err(|e| SnatchError::type_arg(format!("invalid Redis URL '{}': {e}", redact(url))))?;
            // No CLIENT SETINFO on connecting: one command fewer for the ACL a locker needs (README).
            let settings = info.redis_settings().clone().set_skip_set_lib_name();
            seeds.push(self.tls_mode(info.set_redis_settings(settings)));
        }
        let first = seeds.first().map(|s| s.redis_settings().clone()).unwrap_or_default();
        // Calls are bounded by the command timeout as a whole (batcher.rs); a reply may take that long itself (WAIT
        // for waitReplicas blocks for it). Retries (after TRYAGAIN during a slot migration, or a node that dropped)
        // wait 2 ms, doubling up to 100 ms, instead of the crate's 1.28 s and more.
        let mut builder = redis::cluster::ClusterClientBuilder::new(seeds)
            .connection_timeout(timeout)
            .response_timeout(timeout * 2)
            .overall_response_timeout(None)
            .min_retry_wait(2)
            .max_retry_wait(100)
            .retry_wait_formula(5, 2);
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
        if let Some(certificates) = self.tls.as_ref().and_then(|t| t.certificates.clone()) {
            builder = builder.certs(certificates);
        }
        Ok(builder)
    }

    fn build(&self, label: String, info: ConnectionInfo) -> Result<Endpoint, SnatchError> {
        // No CLIENT SETINFO on connecting: one command fewer for the ACL a locker needs (README).
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
        let mut info = self.tls_mode(info.set_redis_settings(settings));
        let mut resolver = None;
        if let (ConnectionAddr::TcpTls { host, port, insecure, tls_params }, Some(tls)) = (info.addr(), &self.tls) {
            if let Some(name) = tls.servername.as_ref().filter(|name| *name != host) {
                // Checked against (and sent as SNI) `name`, connected to the URL's host.
                resolver = Some(Arc::new(PinnedName { name: name.clone(), host: host.clone() }));
                let addr = ConnectionAddr::TcpTls {
                    host: name.clone(),
                    port: *port,
                    insecure: *insecure,
                    tls_params: tls_params.clone(),
                };
                info = info.set_addr(addr);
            }
        }
        let direct_tls = match (info.addr(), &self.tls) {
            (ConnectionAddr::TcpTls { host, .. }, Some(tls)) => Some(DirectTls::new(tls.config.clone(), host)?),
            (ConnectionAddr::TcpTls { host, .. }, None) => Some(DirectTls::new(default_config()?, host)?),
            _ => None,
        };
        let client = match self.tls.as_ref().and_then(|t| t.certificates.as_ref()) {
            Some(certificates) if matches!(info.addr(), ConnectionAddr::TcpTls { .. }) => {
                Client::build_with_tls(info, certificates.clone())
            }
            _ => Client::open(info),
        }
        .map_err(|e| SnatchError::type_arg(format!("cannot use Redis URL '{label}': {e}")))?;
        Ok(Endpoint { label, client, resolver, direct_tls })
    }

    /// `info` with certificate checks off when `tls.rejectUnauthorized` is false.
    fn tls_mode(&self, info: ConnectionInfo) -> ConnectionInfo {
        match (info.addr().clone(), &self.tls) {
            (ConnectionAddr::TcpTls { host, port, tls_params, .. }, Some(Tls { verify: false, .. })) => {
                info.set_addr(ConnectionAddr::TcpTls { host, port, insecure: true, tls_params })
            }
            _ => info,
        }
    }
}

impl Tls {
    fn new(options: &TlsOptions) -> Result<Self, SnatchError> {
        install_crypto_provider();
        for (n, ca) in options.ca.iter().enumerate() {
            let certs = CertificateDer::pem_slice_iter(ca.as_bytes()).collect::<Result<Vec<_>, _>>();
            if !certs.is_ok_and(|certs| !certs.is_empty()) {
                return Err(SnatchError::type_arg(format!("tls.ca[{n}] is not a PEM certificate")));
            }
        }
        let root = if !options.ca.is_empty() {
            Some(options.ca.join("\n").into_bytes())
        } else {
            options.extra_ca.as_ref().map(|extra| platform_roots_with(extra))
        };
        let client = match (&options.cert, &options.key) {
            (Some(cert), Some(key)) => {
                Some(ClientTlsConfig { client_cert: cert.clone().into_bytes(), client_key: key.clone().into_bytes() })
            }
            _ => None,
        };
        let certificates =
            (root.is_some() || client.is_some()).then_some(TlsCertificates { client_tls: client, root_cert: root });
        if let Some(certificates) = &certificates {
            // Parsed here, so that bad PEM is an invalid argument of createLocker rather than a failure of each call.
            let probe =
                ConnectionAddr::TcpTls { host: "localhost".into(), port: 6380, insecure: false, tls_params: None };
            Client::build_with_tls(
                probe.into_connection_info().expect("an address is a connection info"),
                certificates.clone(),
            )
            .map_err(|e| SnatchError::type_arg(format!("invalid tls option: {e}")))?;
        }
        let config = Arc::new(client_config(certificates.as_ref(), options.reject_unauthorized)?);
        Ok(Self { certificates, servername: options.servername.clone(), verify: options.reject_unauthorized, config })
    }
}

/// The rustls configuration the redis crate makes of `certificates` and `verify` for its connections (the trusted
/// roots: the PEM given, else the platform's; the client certificate, if any; no checks at all unless `verify`),
/// for the connection the direct calls make themselves.
fn client_config(certificates: Option<&TlsCertificates>, verify: bool) -> Result<rustls::ClientConfig, SnatchError> {
    let invalid = |e: &dyn std::fmt::Display| SnatchError::type_arg(format!("invalid tls option: {e}"));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(&e))?;
    let builder = if verify {
        let mut roots = rustls::RootCertStore::empty();
        match certificates.and_then(|c| c.root_cert.as_deref()) {
            Some(pem) => {
                for cert in CertificateDer::pem_slice_iter(pem) {
                    roots.add(cert.map_err(|e| invalid(&e))?).map_err(|e| invalid(&e))?;
                }
            }
            None => {
                // As the redis crate does: those of the platform's roots that parse.
                roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
            }
        }
        builder.with_root_certificates(roots)
    } else {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
    };
    match certificates.and_then(|c| c.client_tls.as_ref()) {
        Some(client) => {
            let chain = CertificateDer::pem_slice_iter(&client.client_cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| invalid(&e))?;
            // Not the key's text in the error: only that it is not a key.
            let key = PrivateKeyDer::from_pem_slice(&client.client_key)
                .map_err(|_| invalid(&"tls.key is not a PEM private key"))?;
            builder.with_client_auth_cert(chain, key).map_err(|e| invalid(&e))
        }
        None => Ok(builder.with_no_client_auth()),
    }
}

/// Accepts any server certificate (`rejectUnauthorized: false`), still checking the handshake's signatures.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Selects rustls's crypto provider (ring, the one this crate is built with) for the process's TLS connections.
fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // An error means one is installed already: that one stays.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The platform's trusted roots followed by `extra` (all PEM): the default trust with `NODE_EXTRA_CA_CERTS`.
fn platform_roots_with(extra: &str) -> Vec<u8> {
    let mut pem = String::new();
    for cert in rustls_native_certs::load_native_certs().certs {
        pem.push_str("-----BEGIN CERTIFICATE-----\n");
        let encoded = base64::engine::general_purpose::STANDARD.encode(cert.as_ref());
        for line in encoded.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
    }
    pem.push_str(extra);
    pem.into_bytes()
}

/// One server: what opens connections to it.
pub(crate) struct Endpoint {
    /// The URL without its password, for errors.
    pub(crate) label: String,
    client: Client,
    /// Set when `tls.servername` differs from the URL's host: the connection info then names the server by
    /// `servername` (what its certificate is checked against) and this resolves that name to the URL's host.
    resolver: Option<Arc<PinnedName>>,
    /// For a TLS server: the TLS the direct connection speaks (the same as the redis crate's).
    pub(crate) direct_tls: Option<DirectTls>,
}

/// The TLS of a direct connection to one server: its rustls configuration, and the name its certificate is checked
/// against.
#[derive(Clone)]
pub(crate) struct DirectTls {
    pub(crate) config: Arc<rustls::ClientConfig>,
    pub(crate) name: ServerName<'static>,
}

impl DirectTls {
    fn new(config: Arc<rustls::ClientConfig>, host: &str) -> Result<Self, SnatchError> {
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| SnatchError::type_arg(format!("invalid TLS server name '{host}': {e}")))?;
        Ok(Self { config, name })
    }
}

/// The rustls configuration of a `rediss://` URL without `tls` options: the platform's roots, no client certificate.
fn default_config() -> Result<Arc<rustls::ClientConfig>, SnatchError> {
    static DEFAULT: std::sync::OnceLock<Arc<rustls::ClientConfig>> = std::sync::OnceLock::new();
    if let Some(config) = DEFAULT.get() {
        return Ok(config.clone());
    }
    install_crypto_provider();
    let config = Arc::new(client_config(None, true)?);
    Ok(DEFAULT.get_or_init(|| config).clone())
}

impl Endpoint {
    /// A command connection (RESP2), the attempt bounded by `timeout`; its commands have no timeout of their own.
    pub(crate) async fn connect(&self, timeout: Duration) -> redis::RedisResult<MultiplexedConnection> {
        self.client.get_multiplexed_async_connection_with_config(&self.config(timeout)).await
    }

    /// A connection for subscriptions (RESP3), whose messages go to `push`.
    pub(crate) async fn subscriber(
        &self,
        timeout: Duration,
        push: impl AsyncPushSender,
    ) -> redis::RedisResult<MultiplexedConnection> {
        let info = self.client.get_connection_info().clone();
        let settings = info.redis_settings().clone().set_protocol(ProtocolVersion::RESP3);
        let client = Client::open(info.set_redis_settings(settings))?;
        client.get_multiplexed_async_connection_with_config(&self.config(timeout).set_push_sender(push)).await
    }

    /// The server's address, credentials and database.
    pub(crate) fn info(&self) -> &ConnectionInfo {
        self.client.get_connection_info()
    }

    /// Whether the connection is TLS.
    pub(crate) fn is_tls(&self) -> bool {
        matches!(self.info().addr(), ConnectionAddr::TcpTls { .. })
    }

    /// The host to connect to: the URL's (which a `tls.servername` replaces in the connection info).
    pub(crate) fn connect_host(&self) -> Option<&str> {
        match (&self.resolver, self.info().addr()) {
            (Some(pinned), _) => Some(&pinned.host),
            (None, ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. }) => Some(host),
            _ => None,
        }
    }

    fn config(&self, timeout: Duration) -> AsyncConnectionConfig {
        let config = AsyncConnectionConfig::new().set_connection_timeout(Some(timeout)).set_response_timeout(None);
        match &self.resolver {
            Some(resolver) => config.set_dns_resolver(PinnedName::clone(resolver)),
            None => config,
        }
    }
}

/// Resolves `name` (`tls.servername`) to the addresses of `host` (the URL's), any other name as usual.
#[derive(Clone)]
struct PinnedName {
    name: String,
    host: String,
}

impl AsyncDNSResolver for PinnedName {
    fn resolve<'a, 'b: 'a>(
        &'a self,
        host: &'b str,
        port: u16,
    ) -> RedisFuture<'a, Box<dyn Iterator<Item = SocketAddr> + Send + 'a>> {
        let target = if host == self.name { self.host.as_str() } else { host };
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((target, port)).await?;
            Ok(Box::new(addrs) as Box<dyn Iterator<Item = SocketAddr> + Send>)
        })
    }
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
    fn servername_names_the_server_and_resolves_to_the_url_host() {
        let tls =
            TlsOptions { servername: Some("redis.test".into()), reject_unauthorized: true, ..TlsOptions::default() };
        let access = Access::new(&LockerConfig { tls: Some(tls), ..LockerConfig::default() }).unwrap();
        let endpoint = access.endpoint("rediss://127.0.0.1:6380").unwrap();
        assert!(matches!(endpoint.info().addr(), ConnectionAddr::TcpTls { host, .. } if host == "redis.test"));
        assert!(endpoint.resolver.as_ref().is_some_and(|r| r.host == "127.0.0.1"));
    }
}
