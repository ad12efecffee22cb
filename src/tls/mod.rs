//! TLS for the webhook listener: loading a PEM pair, serving it through a
//! resolver that can be swapped without restarting, and making certificates.
//!
//! Owns everything about keys and certificates; knows nothing of HTTP. A bad
//! pair on disk never replaces a good one in service.

mod certs;
mod reload;

pub use certs::{generate, CertRequest, GeneratedCerts, KeyType};
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
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
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
    Config(#[from] rustls::Error),
    #[error("certificate generation: {0}")]
    Generate(String),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The one crypto provider in the binary; ring, so no C toolchain beyond
/// ring's own is needed and the FIPS question never arises by accident.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
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
        reason: e.to_string(),
    })?;
    Ok(certified)
}

/// TLS 1.2 and 1.3 only, ALPN `h2` then `http/1.1`: kube-apiserver speaks
/// HTTP/2 to loopback URLs and HTTP/1.1 with keep-alive to services.
pub fn server_config(resolver: Arc<dyn ResolvesServerCert>) -> Result<ServerConfig, TlsError> {
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
