//! Checks a server's certificate as Node's TLS does (OpenSSL's chain check and `tls.checkServerIdentity`), so that a
//! `tls` option set that works with ioredis works here: webpki decides first; where it refuses what Node accepts,
//! the rules below decide instead:
//! - a certificate valid but for its names: Node's name rule (a DNS name in the subjectAltName; the subject's CN
//!   only when there is no DNS name in it; an IP address only in the subjectAltName);
//! - an X.509 v1 certificate, which webpki cannot read, signed by a trusted CA;
//! - a certificate that is itself trusted (a self-signed one given in `tls.ca`).
//!
//! Those last two are checked here: the issuer's signature (a trusted CA's, directly or through CA certificates the
//! server sends), the validity periods, and the names as above.
//!
//! With `rejectUnauthorized: false` no certificate is checked, but the handshake's signatures still are (also by a
//! v1 certificate).

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, SignatureVerificationAlgorithm, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error, PeerMisbehaved, SignatureScheme};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Version};
use x509_parser::x509::SubjectPublicKeyInfo;

/// The most CA certificates between a leaf and a root that the checks here follow.
const MAX_INTERMEDIATES: usize = 6;

/// The server certificate check of a locker's TLS connections.
#[derive(Debug)]
pub(crate) struct CertificateCheck {
    /// What is trusted; `None` with `rejectUnauthorized: false`.
    trust: Option<Trust>,
    algorithms: WebPkiSupportedAlgorithms,
}

#[derive(Debug)]
struct Trust {
    /// webpki's check over `roots`; `None` when there are no roots it can use (then only the rules here apply).
    webpki: Option<Arc<WebPkiServerVerifier>>,
    roots: Vec<CertificateDer<'static>>,
}

impl CertificateCheck {
    /// A check that trusts `roots`.
    pub(crate) fn trusting(roots: Vec<CertificateDer<'static>>, provider: Arc<CryptoProvider>) -> Self {
        let mut store = rustls::RootCertStore::empty();
        store.add_parsable_certificates(roots.iter().cloned());
        let algorithms = provider.signature_verification_algorithms;
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider).build().ok();
        Self { trust: Some(Trust { webpki, roots }), algorithms }
    }

    /// No check of the certificate (`rejectUnauthorized: false`); the handshake's signatures are checked.
    pub(crate) fn none(provider: &CryptoProvider) -> Self {
        Self { trust: None, algorithms: provider.signature_verification_algorithms }
    }

    /// Node's acceptance of `leaf` where webpki cannot read it (v1) or does not trust it as a leaf (a trusted
    /// certificate itself): trusted itself, or signed by a trusted CA directly or through the server's
    /// `intermediates` (each a CA in its validity); within its validity; naming `name`.
    /// `trusted`: the leaf is one of the roots.
    fn check_alone(
        &self,
        trust: &Trust,
        leaf: &X509Certificate<'_>,
        trusted: bool,
        intermediates: &[CertificateDer<'_>],
        name: &ServerName<'_>,
        now: UnixTime,
    ) -> Result<(), Error> {
        let (roots, intermediates) = (parsed(&trust.roots), parsed(intermediates));
        if !trusted && !self.chains(leaf, &roots, &intermediates, now, MAX_INTERMEDIATES) {
            return Err(CertificateError::UnknownIssuer.into());
        }
        let validity = leaf.validity();
        let time = |t: &x509_parser::time::ASN1Time| {
            UnixTime::since_unix_epoch(Duration::from_secs(t.timestamp().max(0) as u64))
        };
        if validity.not_after.timestamp() < now.as_secs() as i64 {
            return Err(CertificateError::ExpiredContext { time: now, not_after: time(&validity.not_after) }.into());
        }
        if validity.not_before.timestamp() > now.as_secs() as i64 {
            return Err(
                CertificateError::NotValidYetContext { time: now, not_before: time(&validity.not_before) }.into()
            );
        }
        if !names(leaf, name) {
            let presented = leaf
                .subject()
                .iter_common_name()
                .filter_map(|cn| cn.as_str().ok())
                .map(|cn| format!("CN={cn}"))
                .collect();
            return Err(CertificateError::NotValidForNameContext { expected: name.to_owned(), presented }.into());
        }
        Ok(())
    }

    /// Whether `cert` is signed by one of `roots`, or by one of `intermediates` (a CA within its validity) that chains
    /// so, through at most `depth` of them; the issuer's key checks the signature, each root within its validity.
    fn chains(
        &self,
        cert: &X509Certificate<'_>,
        roots: &[X509Certificate<'_>],
        intermediates: &[X509Certificate<'_>],
        now: UnixTime,
        depth: usize,
    ) -> bool {
        let at = asn1_time(now);
        let issued = |issuer: &&X509Certificate<'_>| {
            issuer.subject().as_raw() == cert.issuer().as_raw()
                && issuer.validity().is_valid_at(at)
                && verify(self.algorithms.all, issuer.public_key(), cert)
        };
        roots.iter().any(|root| issued(&root))
            || depth > 0
                && intermediates.iter().filter(issued).any(|ca| {
                    ca.basic_constraints().ok().flatten().is_some_and(|bc| bc.value.ca)
                        && self.chains(ca, roots, intermediates, now, depth - 1)
                })
    }

    /// The handshake's signature by `leaf`, which webpki cannot read, with the algorithms of its scheme.
    fn verify_handshake(
        &self,
        leaf: &X509Certificate<'_>,
        message: &[u8],
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        let schemes = self.algorithms.mapping.iter().filter(|(scheme, _)| *scheme == dss.scheme);
        let algorithms = schemes.flat_map(|(_, algs)| algs.iter().copied());
        if signed(algorithms, leaf.public_key(), message, dss.signature()) {
            Ok(HandshakeSignatureValid::assertion())
        } else {
            Err(CertificateError::BadSignature.into())
        }
    }
}

/// `cert` parsed when it is an X.509 v1 certificate, which webpki cannot read (its handshake signatures are then
/// checked by [`CertificateCheck::verify_handshake`]).
fn v1<'a>(cert: &'a CertificateDer<'_>) -> Option<X509Certificate<'a>> {
    X509Certificate::from_der(cert).ok().map(|(_, cert)| cert).filter(|cert| cert.version() == X509Version::V1)
}

impl ServerCertVerifier for CertificateCheck {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let Some(trust) = &self.trust else { return Ok(ServerCertVerified::assertion()) };
        let refused = match &trust.webpki {
            Some(webpki) => match webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            {
                Ok(verified) => return Ok(verified),
                Err(e) => e,
            },
            None => CertificateError::UnknownIssuer.into(),
        };
        let Ok((_, leaf)) = X509Certificate::from_der(end_entity) else { return Err(refused) };
        let valid_but_for_names = matches!(
            refused,
            Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }
            )
        );
        if valid_but_for_names && names(&leaf, server_name) {
            return Ok(ServerCertVerified::assertion());
        }
        let trusted = trust.roots.iter().any(|root| root.as_ref() == end_entity.as_ref());
        if leaf.version() != X509Version::V1 && !trusted {
            return Err(refused);
        }
        self.check_alone(trust, &leaf, trusted, intermediates, server_name, now)
            .map(|()| ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        match v1(cert) {
            Some(leaf) => self.verify_handshake(&leaf, message, dss),
            None => rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms),
        }
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        let Some(leaf) = v1(cert) else {
            return rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms);
        };
        use SignatureScheme::*;
        // Those TLS 1.3 does not allow in a handshake signature (RFC 8446, 4.2.3).
        let legacy = matches!(
            dss.scheme,
            RSA_PKCS1_SHA1 | RSA_PKCS1_SHA256 | RSA_PKCS1_SHA384 | RSA_PKCS1_SHA512 | ECDSA_SHA1_Legacy
        );
        if legacy {
            return Err(PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme.into());
        }
        self.verify_handshake(&leaf, message, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Those of `certs` that parse.
fn parsed<'a>(certs: &'a [CertificateDer<'_>]) -> Vec<X509Certificate<'a>> {
    certs.iter().filter_map(|cert| X509Certificate::from_der(cert).ok().map(|(_, cert)| cert)).collect()
}

/// `now` as x509-parser's time.
fn asn1_time(now: UnixTime) -> x509_parser::time::ASN1Time {
    x509_parser::time::ASN1Time::from_timestamp(now.as_secs() as i64)
        .unwrap_or_else(|_| x509_parser::time::ASN1Time::now())
}

/// Whether `cert`'s signature verifies with `issuer_key`, by one of `algorithms` of the certificate's signature
/// algorithm.
fn verify(
    algorithms: &[&dyn SignatureVerificationAlgorithm],
    issuer_key: &SubjectPublicKeyInfo<'_>,
    cert: &X509Certificate<'_>,
) -> bool {
    let oid = cert.signature_algorithm.algorithm.as_bytes();
    let of_its_algorithm = algorithms.iter().copied().filter(|alg| {
        // The algorithm identifier's contents start with its OID's tag (6), length and bytes.
        let id = alg.signature_alg_id();
        let id = id.as_ref();
        id.len() >= 2 && id[0] == 6 && id.get(2..2 + id[1] as usize) == Some(oid)
    });
    signed(of_its_algorithm, issuer_key, cert.tbs_certificate.as_ref(), &cert.signature_value.data)
}

/// Whether `signature` of `message` verifies with `key` by one of `algorithms`.
fn signed<'a>(
    algorithms: impl IntoIterator<Item = &'a dyn SignatureVerificationAlgorithm>,
    key: &SubjectPublicKeyInfo<'_>,
    message: &[u8],
    signature: &[u8],
) -> bool {
    algorithms.into_iter().any(|alg| alg.verify_signature(&key.subject_public_key.data, message, signature).is_ok())
}

/// Node's name rule (`tls.checkServerIdentity`): an IP address must be one of the subjectAltName's; a host name must
/// match one of its DNS names or, when it has none, the subject's CN.
fn names(cert: &X509Certificate<'_>, name: &ServerName<'_>) -> bool {
    let alt_names = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|ext| ext.value.general_names.as_slice())
        .unwrap_or_default();
    match name {
        ServerName::IpAddress(ip) => {
            let ip = IpAddr::from(*ip);
            alt_names.iter().any(|n| match n {
                GeneralName::IPAddress(bytes) => match bytes.len() {
                    4 => <[u8; 4]>::try_from(*bytes).is_ok_and(|b| IpAddr::from(b) == ip),
                    16 => <[u8; 16]>::try_from(*bytes).is_ok_and(|b| IpAddr::from(b) == ip),
                    _ => false,
                },
                _ => false,
            })
        }
        ServerName::DnsName(host) => {
            let dns: Vec<&str> = alt_names
                .iter()
                .filter_map(|n| match n {
                    GeneralName::DNSName(d) => Some(*d),
                    _ => None,
                })
                .collect();
            if dns.is_empty() {
                cert.subject()
                    .iter_common_name()
                    .filter_map(|cn| cn.as_str().ok())
                    .any(|cn| host_matches(host.as_ref(), cn))
            } else {
                dns.iter().any(|pattern| host_matches(host.as_ref(), pattern))
            }
        }
        _ => false,
    }
}

/// Whether `host` matches `pattern` by Node's rule: the same labels (case and a final dot aside), of printable ASCII;
/// a `*` allowed in the first label only, once, not for a pattern of two labels or fewer, nor in an `xn--` label.
fn host_matches(host: &str, pattern: &str) -> bool {
    let labels = |name: &str| name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    let (host, pattern) = (labels(host), labels(pattern));
    let host: Vec<&str> = host.split('.').collect();
    let pattern: Vec<&str> = pattern.split('.').collect();
    if pattern.is_empty() || host.len() != pattern.len() || pattern.iter().any(|label| label.is_empty()) {
        return false;
    }
    if pattern.iter().any(|label| label.bytes().any(|b| !(0x21..=0x7f).contains(&b))) {
        return false;
    }
    if host[1..] != pattern[1..] {
        return false;
    }
    let (first, wanted) = (host[0], pattern[0]);
    match wanted.split_once('*') {
        None => first == wanted,
        Some(_) if wanted.contains("xn--") => first == wanted,
        Some((prefix, suffix)) => {
            !suffix.contains('*')
                && pattern.len() > 2
                && prefix.len() + suffix.len() <= first.len()
                && first.starts_with(prefix)
                && first.ends_with(suffix)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::host_matches;

    #[test]
    fn host_names_match_by_nodes_rule() {
        for (host, pattern) in [
            ("localhost", "localhost"),
            ("LocalHost.", "localhost"),
            ("redis.example.com", "*.example.com"),
            ("redis-1.example.com", "redis-*.example.com"),
            ("redis.example.com", "re*is.example.com"),
        ] {
            assert!(host_matches(host, pattern), "{host} {pattern}");
        }
        for (host, pattern) in [
            ("example.com", "*.com"),
            ("a.b.example.com", "*.example.com"),
            ("redis.example.com", "*.*.com"),
            ("redis.example.com", "**.example.com"),
            ("xn--a.example.com", "xn--*.example.com"),
            ("redis.example.com", "redis..com"),
            ("other", "localhost"),
            ("re.example.com", "red*is.example.com"),
            ("a.example.com", "a.exam ple.com"),
        ] {
            assert!(!host_matches(host, pattern), "{host} {pattern}");
        }
    }
}
