//! The rustls configuration of a locker's TLS connections, made once of its `tls` options: the trusted roots (`ca`,
//! else the platform's with `NODE_EXTRA_CA_CERTS`), the server certificate check ([`CertificateCheck`], off with
//! `rejectUnauthorized: false`) and the client certificate. Every TLS connection takes it: the redis crate's (over
//! streams opened by dial.rs) and the direct connection's, each with the name it checks a server by ([`ServerTls`]).

use crate::config::TlsOptions;
use crate::server::certificate_check::CertificateCheck;
use rustls::client::ResolvesClientCert;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, SignatureScheme};
use snatch_protocol::SnatchError;
use std::sync::{Arc, OnceLock};
use x509_parser::prelude::{FromDer, X509Certificate};

/// The client configuration `options` make (the defaults without options: the platform's roots, no client
/// certificate). Bad PEM, or a key that is not the certificate's, is an invalid argument.
pub(crate) fn client_config(options: Option<&TlsOptions>) -> Result<Arc<ClientConfig>, SnatchError> {
    let Some(options) = options else { return default_config() };
    make(options).map(Arc::new)
}

fn make(options: &TlsOptions) -> Result<ClientConfig, SnatchError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(&e))?
        .dangerous();
    let builder = if options.reject_unauthorized {
        builder
            .with_custom_certificate_verifier(Arc::new(CertificateCheck::trusting(roots(options)?, provider.clone())))
    } else {
        builder.with_custom_certificate_verifier(Arc::new(CertificateCheck::none(&provider)))
    };
    match (&options.cert, &options.key) {
        (Some(cert), Some(key)) => {
            Ok(builder.with_client_cert_resolver(Arc::new(ClientCertificate::new(cert, key, &provider)?)))
        }
        _ => Ok(builder.with_no_client_auth()),
    }
}

/// The configuration of a `rediss://` URL without `tls` options, made once.
fn default_config() -> Result<Arc<ClientConfig>, SnatchError> {
    static DEFAULT: OnceLock<Arc<ClientConfig>> = OnceLock::new();
    if let Some(config) = DEFAULT.get() {
        return Ok(config.clone());
    }
    let config = Arc::new(make(&TlsOptions { reject_unauthorized: true, ..TlsOptions::default() })?);
    Ok(DEFAULT.get_or_init(|| config).clone())
}

fn invalid(e: &dyn std::fmt::Display) -> SnatchError {
    SnatchError::type_arg(format!("invalid tls option: {e}"))
}

/// The roots `options` trust: `ca` (each entry PEM, one certificate or more), else the platform's and the
/// certificates of `NODE_EXTRA_CA_CERTS`.
fn roots(options: &TlsOptions) -> Result<Vec<CertificateDer<'static>>, SnatchError> {
    let mut roots = Vec::new();
    for (n, ca) in options.ca.iter().enumerate() {
        match CertificateDer::pem_slice_iter(ca.as_bytes()).collect::<Result<Vec<_>, _>>() {
            Ok(certs) if !certs.is_empty() => roots.extend(certs),
            _ => return Err(SnatchError::type_arg(format!("tls.ca[{n}] is not a PEM certificate"))),
        }
    }
    if options.ca.is_empty() {
        roots.extend(rustls_native_certs::load_native_certs().certs);
        if let Some(extra) = &options.extra_ca {
            // As Node does with NODE_EXTRA_CA_CERTS: what does not parse is left out.
            roots.extend(CertificateDer::pem_slice_iter(extra.as_bytes()).filter_map(Result::ok));
        }
    }
    Ok(roots)
}

/// The TLS of the connections to one server: the locker's rustls configuration, and the name the server's
/// certificate is checked against.
#[derive(Clone)]
pub(crate) struct ServerTls {
    pub(crate) config: Arc<rustls::ClientConfig>,
    pub(crate) name: ServerName<'static>,
}

impl ServerTls {
    pub(crate) fn new(config: Arc<rustls::ClientConfig>, name: &str) -> Result<Self, SnatchError> {
        let name = ServerName::try_from(name.to_owned())
            .map_err(|e| SnatchError::type_arg(format!("invalid TLS server name '{name}': {e}")))?;
        Ok(Self { config, name })
    }
}

/// The client certificate, sent to every server that asks for one.
#[derive(Debug)]
struct ClientCertificate(Arc<CertifiedKey>);

impl ClientCertificate {
    /// `cert` (PEM chain) with `key` (PEM), which must be the certificate's key. Read with x509-parser rather than
    /// rustls's own check, which refuses X.509 v1 certificates (Node sends them).
    fn new(cert: &str, key: &str, provider: &CryptoProvider) -> Result<Self, SnatchError> {
        let chain = CertificateDer::pem_slice_iter(cert.as_bytes()).collect::<Result<Vec<_>, _>>();
        let chain =
            chain.ok().filter(|c| !c.is_empty()).ok_or_else(|| invalid(&"tls.cert is not a PEM certificate"))?;
        // Not the key's text in the error: only that it is not a key.
        let key =
            PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|_| invalid(&"tls.key is not a PEM private key"))?;
        let key =
            provider.key_provider.load_private_key(key).map_err(|_| invalid(&"tls.key is not a usable private key"))?;
        let (_, leaf) = X509Certificate::from_der(&chain[0]).map_err(|_| invalid(&"tls.cert is not a certificate"))?;
        if key.public_key().is_some_and(|public| public.as_ref() != leaf.public_key().raw) {
            return Err(invalid(&"tls.key is not the key of tls.cert"));
        }
        Ok(Self(Arc::new(CertifiedKey::new(chain, key))))
    }
}

impl ResolvesClientCert for ClientCertificate {
    fn resolve(&self, _root_hints: &[&[u8]], _schemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}
