//! TLS for the webhook listener: loading a PEM pair, serving it through a
//! resolver that can be swapped without restarting, and making certificates.
//!
//! Owns everything about keys and certificates; knows nothing of HTTP. A bad
//! pair on disk never replaces a good one in service.

mod certs;
mod reload;

pub use certs::{
    check_out_dir, days_problem, existing_file, generate, host_problem, CertRequest,
    GeneratedCerts, KeyType, MAX_DAYS,
};
pub use reload::{watch_pair, ReloadingResolver};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::ResolvesServerCert;
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a certificate pair could not be used; each names the file at fault.
///
/// Every message already ends with its cause, so no variant also returns it
/// from `source()`: a caller that prints the chain (anyhow's `{:#}`) would
/// otherwise say it twice.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {cause}")]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{path}: no PEM CERTIFICATE block found")]
    NoCertificate { path: PathBuf },
    #[error("{path}: invalid PEM certificate: {reason}")]
    BadCertificate { path: PathBuf, reason: String },
    #[error("{path}: no usable private key (expected PEM PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY): {reason}")]
    BadKey { path: PathBuf, reason: String },
    #[error("{key} does not match the certificate in {cert}: {reason}")]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        reason: String,
    },
    #[error("TLS configuration: {0}")]
    Config(rustls::Error),
    #[error("certificate generation: {0}")]
    Generate(String),
    #[error("cannot write {}: {}", path.display(), crate::input::sources::reason(cause))]
    Write {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("--out {}: is a file, not a directory", dir.display())]
    NotADirectory { dir: PathBuf },
    #[error(
        "{} is a symbolic link (to {}); nodescope does not write through links: remove it, or choose another --out",
        path.display(),
        target.display()
    )]
    Link { path: PathBuf, target: PathBuf },
    #[error("{path} already exists; pass --force to replace ca.crt, tls.crt and tls.key")]
    Exists { path: PathBuf },
    #[error("--host {host:?} is neither a DNS name nor an IP address: {reason}")]
    BadHost { host: String, reason: String },
    #[error("--days {days}: {reason}")]
    BadDays { days: u32, reason: &'static str },
}

/// The one crypto provider in the binary; ring, so no C toolchain beyond
/// ring's own is needed and the FIPS question never arises by accident.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|cause| TlsError::Read {
        path: path.to_owned(),
        cause,
    })
}

/// Loads and cross-checks a PEM certificate chain and key, so a half-written
/// or mismatched pair is rejected before it can reach a handshake.
pub fn load_pair(cert_path: &Path, key_path: &Path) -> Result<CertifiedKey, TlsError> {
    let cert_pem = read(cert_path)?;
    let key_pem = read(key_path)?;
    certified_key_from_pem(&cert_pem, &key_pem, cert_path, key_path)
}

/// Same as [`load_pair`] on bytes already read; paths are only for messages.
pub fn certified_key_from_pem(
    cert_pem: &[u8],
    key_pem: &[u8],
    cert_path: &Path,
    key_path: &Path,
) -> Result<CertifiedKey, TlsError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::BadCertificate {
            path: cert_path.to_owned(),
            reason: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate {
            path: cert_path.to_owned(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::BadKey {
        path: key_path.to_owned(),
        reason: e.to_string(),
    })?;
    let provider = provider();
    let signing_key =
        provider
            .key_provider
            .load_private_key(key)
            .map_err(|e| TlsError::BadKey {
                path: key_path.to_owned(),
                reason: e.to_string(),
            })?;
    let certified = CertifiedKey::new(chain, signing_key);
    certified.keys_match().map_err(|e| TlsError::Mismatch {
        cert: cert_path.to_owned(),
        key: key_path.to_owned(),
        // rustls's own text for these ends in its enum's variant name.
        reason: match e {
            rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
                "its public key is not the one the certificate names".to_owned()
            }
            rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown) => {
                "the key cannot give its public key to compare".to_owned()
            }
            other => other.to_string(),
        },
    })?;
    Ok(certified)
}

/// TLS 1.2 and 1.3 only, ALPN `h2` then `http/1.1`: kube-apiserver speaks
/// HTTP/2 to loopback URLs and HTTP/1.1 with keep-alive to services.
pub fn server_config(resolver: Arc<dyn ResolvesServerCert>) -> Result<ServerConfig, TlsError> {
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(TlsError::Config)?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
