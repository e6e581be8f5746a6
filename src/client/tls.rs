//! The TLS set-up of mekara's HTTPS client: which certificates it trusts and how it checks
//! a server's.
//!
//! It trusts the system's roots (or the bundle `SSL_CERT_FILE` names, as OpenSSL does)
//! plus the server's own `ca_file`. A trusted certificate may also be the server's own:
//! the one-line `openssl req -x509 … -subj /CN=localhost` makes a self-signed certificate
//! marked as a CA, which WebPKI refuses as a server's certificate (`CaUsedAsEndEntity`)
//! even when it is trusted, while curl, Python and Node accept it. [`PinnedOrWebPki`]
//! accepts a server whose certificate is byte for byte one of the trusted ones and whose
//! name it covers, and leaves every other case to rustls's WebPKI verifier.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rustls::DigitallySignedStruct;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

/// The certificates a client trusts: as WebPKI roots, and as they were read, to compare
/// with the one a server presents.
#[derive(Clone)]
struct Trusted {
    roots: rustls::RootCertStore,
    certs: Vec<CertificateDer<'static>>,
}

/// The certificates every HTTPS connection trusts: the system's, or the bundle
/// `SSL_CERT_FILE` names (read once).
fn system_trusted() -> Result<Trusted, String> {
    static TRUSTED: OnceLock<Result<Trusted, String>> = OnceLock::new();
    TRUSTED
        .get_or_init(|| {
            let found = rustls_native_certs::load_native_certs();
            for error in &found.errors {
                tracing::info!("reading the system's certificates: {error}");
            }
            let mut roots = rustls::RootCertStore::empty();
            let (_, ignored) = roots.add_parsable_certificates(found.certs.iter().cloned());
            if ignored > 0 {
                tracing::info!("{ignored} system certificates could not be used");
            }
            if roots.is_empty() {
                let from = std::env::var_os("SSL_CERT_FILE").map_or_else(
                    || "the system's certificate store".to_string(),
                    |f| format!("`SSL_CERT_FILE` (`{}`)", PathBuf::from(f).display()),
                );
                return Err(format!(
                    "no trusted certificate could be read from {from}; point `SSL_CERT_FILE` at a PEM bundle of CA certificates"
                ));
            }
            Ok(Trusted {
                roots,
                certs: found.certs,
            })
        })
        .clone()
}

/// The TLS set-up of a client: the system's trusted certificates, plus those in `ca_file`,
/// which messages call `setting` (`ca_file`, `sslrootcert`).
pub(crate) fn tls_config(
    ca_file: Option<&Path>,
    setting: &str,
) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut trusted = match (system_trusted(), ca_file) {
        (Ok(trusted), _) => trusted,
        // A server's own CA is enough for that server.
        (Err(_), Some(_)) => Trusted {
            roots: rustls::RootCertStore::empty(),
            certs: Vec::new(),
        },
        (Err(e), None) => return Err(e),
    };
    if let Some(file) = ca_file {
        let shown = file.display();
        let certs = CertificateDer::pem_file_iter(file)
            .map_err(|e| format!("cannot read `{setting}` `{shown}`: {e}"))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("`{setting}` `{shown}` is not a PEM file of certificates: {e}"))?;
        if certs.is_empty() {
            return Err(format!("`{setting}` `{shown}` holds no PEM certificate"));
        }
        for cert in certs {
            trusted.roots.add(cert.clone()).map_err(|e| {
                format!("a certificate in `{setting}` `{shown}` cannot be used: {e}")
            })?;
            trusted.certs.push(cert);
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let webpki =
        WebPkiServerVerifier::builder_with_provider(Arc::new(trusted.roots), provider.clone())
            .build()
            .map_err(|e| format!("cannot set TLS up: {e}"))?;
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set TLS up: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PinnedOrWebPki {
            pinned: trusted.certs,
            webpki,
        }))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Accepts a server whose certificate is one of the trusted ones, exactly, and that
/// covers the name connected to; anything else goes to WebPKI, whose verdict stands.
#[derive(Debug)]
struct PinnedOrWebPki {
    pinned: Vec<CertificateDer<'static>>,
    webpki: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for PinnedOrWebPki {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self
            .pinned
            .iter()
            .any(|c| c.as_ref() == end_entity.as_ref())
        {
            let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
            match rustls::client::verify_server_name(&parsed, server_name) {
                Err(_) if names_in_subject_only(end_entity, server_name) => {}
                named => named?,
            }
            return Ok(ServerCertVerified::assertion());
        }
        self.webpki
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// Whether `cert` lists no DNS name and its subject's common name is `name`: how the
/// one-line self-signed certificates name their host, which OpenSSL's clients (curl,
/// Python) and Node accept for want of a subjectAltName. Only for a pinned certificate.
fn names_in_subject_only(cert: &CertificateDer<'_>, name: &ServerName<'_>) -> bool {
    let ServerName::DnsName(name) = name else {
        return false;
    };
    let Ok(cert) = webpki::EndEntityCert::try_from(cert) else {
        return false;
    };
    cert.valid_dns_names().next().is_none()
        && common_name(cert.subject()).is_some_and(|cn| cn.eq_ignore_ascii_case(name.as_ref()))
}

/// The common name (OID 2.5.4.3) in a DER subject without its outer SEQUENCE: a
/// sequence of SETs of SEQUENCEs { OID, string }.
fn common_name(mut subject: &[u8]) -> Option<&str> {
    const COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
    while !subject.is_empty() {
        let (0x31, mut set, rest) = der_item(subject)? else {
            return None;
        };
        subject = rest;
        while !set.is_empty() {
            let (0x30, attribute, rest) = der_item(set)? else {
                return None;
            };
            set = rest;
            let (0x06, oid, value) = der_item(attribute)? else {
                return None;
            };
            if oid == COMMON_NAME {
                let (_, value, _) = der_item(value)?;
                return std::str::from_utf8(value).ok();
            }
        }
    }
    None
}

/// The first DER item of `der`: its tag, its contents and what follows it.
fn der_item(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let (bytes, after) = rest.split_at(count);
        rest = after;
        bytes.iter().fold(0, |n, &b| (n << 8) | usize::from(b))
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// Why a handshake failed, in words, and what to do about it; `trust` says how a
/// certificate is trusted where this client is configured (a server's `ca_file`, or
/// `SSL_CERT_FILE` only).
pub(crate) fn handshake_failure(target: &str, source: &std::io::Error, trust: &str) -> String {
    use rustls::CertificateError as C;
    let certificate = source
        .get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>())
        .and_then(|e| match e {
            rustls::Error::InvalidCertificate(c) => Some(c),
            _ => None,
        });
    let host = target.rsplit_once(':').map_or(target, |(host, _)| host);
    // WebPKI's word for a self-signed certificate that is marked as a CA.
    let ca_as_own = |e: &rustls::OtherError| {
        matches!(e.0.downcast_ref(), Some(webpki::Error::CaUsedAsEndEntity))
    };
    let why = match certificate {
        Some(C::UnknownIssuer | C::BadSignature) => format!(
            "its certificate is not trusted (it is self-signed or signed by a CA mekara does not trust); trust the certificate itself, or the CA that signed it, with {trust}"
        ),
        Some(C::Other(e)) if ca_as_own(e) => format!(
            "its certificate is not trusted (it is self-signed or signed by a CA mekara does not trust); trust the certificate itself, or the CA that signed it, with {trust}"
        ),
        Some(C::NotValidForName | C::NotValidForNameContext { .. }) => format!(
            "its certificate does not cover the name `{host}`; use a URL with a name the certificate lists (its subjectAltName), or make the certificate for `{host}`"
        ),
        Some(C::Expired | C::ExpiredContext { .. }) => {
            "its certificate has expired; renew it on the server".to_string()
        }
        Some(C::NotValidYet | C::NotValidYetContext { .. }) => {
            "its certificate is not valid yet; check the clocks of both machines".to_string()
        }
        Some(C::InvalidPurpose | C::InvalidPurposeContext { .. }) => {
            "its certificate is not for TLS servers (its extendedKeyUsage lacks serverAuth)"
                .to_string()
        }
        _ => format!("{source}; if its certificate is not trusted yet, trust it with {trust}"),
    };
    format!("the TLS handshake with `{target}` failed: {why}")
}
