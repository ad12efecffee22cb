//! `nodescope certs`: a throwaway CA and a serving certificate for the hosts
//! the apiserver will dial, for clusters without cert-manager and for tests.

use super::TlsError;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use std::path::Path;

/// ECDSA P-256 by default: a full handshake costs the server about half of
/// what RSA-2048 costs. RSA exists for clients or policies that demand it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KeyType {
    /// ECDSA P-256: a TLS handshake costs the server about half of RSA's.
    Ecdsa,
    /// RSA-2048, for clients or policies that require RSA.
    Rsa,
}

/// The files `write_to` writes, in the order it writes them.
pub const FILES: [&str; 3] = ["ca.crt", "tls.crt", "tls.key"];

/// The first of [`FILES`] that already exists in `dir`, a link (even one
/// that leads nowhere) included.
#[must_use]
pub fn existing_file(dir: &Path) -> Option<std::path::PathBuf> {
    FILES
        .iter()
        .map(|f| dir.join(f))
        .find(|p| std::fs::symlink_metadata(p).is_ok())
}

/// Why nothing may be written into `dir`, checked before anything is: it
/// is a file, or one of [`FILES`] in it is a symbolic link (which would
/// carry the key to wherever it points).
///
/// # Errors
/// As said.
pub fn check_out_dir(dir: &Path) -> Result<(), TlsError> {
    if std::fs::metadata(dir).is_ok_and(|m| !m.is_dir()) {
        return Err(TlsError::NotADirectory {
            dir: dir.to_owned(),
        });
    }
    if let Some(path) = FILES
        .iter()
        .map(|f| dir.join(f))
        .find(|p| crate::files::is_link(p))
    {
        let target = std::fs::read_link(&path).unwrap_or_default();
        return Err(TlsError::Link { path, target });
    }
    Ok(())
}

/// What to certify.
#[derive(Clone, Debug)]
pub struct CertRequest {
    /// DNS names and IP addresses the serving certificate is valid for.
    pub hosts: Vec<String>,
    pub key_type: KeyType,
    pub validity_days: u32,
}

/// PEM text of the CA, the serving chain and its key.
pub struct GeneratedCerts {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

impl GeneratedCerts {
    /// The webhook configuration's `caBundle`: base64 of the CA PEM.
    pub fn ca_bundle(&self) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(self.ca_pem.as_bytes())
    }

    /// Writes `ca.crt`, `tls.crt` and `tls.key` (mode 0600) into `dir`,
    /// creating it; the names match a `kubernetes.io/tls` Secret's keys.
    ///
    /// Unless `replace`, a file already there is an error and nothing is
    /// written: replacing a CA that webhook configurations trust breaks
    /// every call until each `caBundle` is updated. A symbolic link in
    /// place of a file is refused even with `replace`, before anything is
    /// written: its target is someone else's file, and a private key must
    /// not land there. Each file is written new or renamed into place
    /// ([`crate::files`]), so no link is ever followed.
    pub fn write_to(&self, dir: &Path, replace: bool) -> Result<(), TlsError> {
        let [ca, crt, key] = FILES.map(|f| dir.join(f));
        let files = [
            (ca, self.ca_pem.as_bytes(), false),
            (crt, self.cert_pem.as_bytes(), false),
            (key, self.key_pem.as_bytes(), true),
        ];
        if !replace {
            if let Some(path) = existing_file(dir) {
                return Err(TlsError::Exists { path });
            }
        }
        check_out_dir(dir)?;
        std::fs::create_dir_all(dir).map_err(|cause| TlsError::Write {
            path: dir.to_owned(),
            cause,
        })?;
        for (path, bytes, private) in &files {
            write_file(path, bytes, *private, replace).map_err(|cause| {
                if cause.kind() == std::io::ErrorKind::AlreadyExists {
                    TlsError::Exists { path: path.clone() }
                } else {
                    TlsError::Write {
                        path: path.clone(),
                        cause,
                    }
                }
            })?;
        }
        Ok(())
    }
}

/// Writes `bytes` to `path`; `private` files get mode 0600. Without
/// `replace` the file must not exist yet, which also closes the gap
/// between the existence check and the write; with it, the new file is
/// renamed over the old.
fn write_file(path: &Path, bytes: &[u8], private: bool, replace: bool) -> std::io::Result<()> {
    let mode = if private {
        crate::files::Mode::Private
    } else {
        crate::files::Mode::Public
    };
    if replace {
        crate::files::replace(path, bytes, mode)
    } else {
        crate::files::write_new(path, bytes, mode)
    }
}

fn gen_err(e: impl std::fmt::Display) -> TlsError {
    TlsError::Generate(e.to_string())
}

fn key_pair(key_type: KeyType) -> Result<KeyPair, TlsError> {
    match key_type {
        KeyType::Ecdsa => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(gen_err),
        KeyType::Rsa => {
            // ring signs with RSA but cannot generate RSA keys, so the key
            // comes from the RustCrypto `rsa` crate and ring signs with it.
            use rsa::pkcs8::EncodePrivateKey;
            let mut rng = rsa::rand_core::OsRng;
            let private = rsa::RsaPrivateKey::new(&mut rng, 2048).map_err(gen_err)?;
            let pem = private
                .to_pkcs8_pem(rsa::pkcs8::LineEnding::LF)
                .map_err(gen_err)?;
            KeyPair::from_pem_and_sign_algo(&pem, &rcgen::PKCS_RSA_SHA256).map_err(gen_err)
        }
    }
}

/// The longest validity `--days` accepts: a hundred years, far beyond any
/// sensible certificate and far inside X.509's year 9999.
pub const MAX_DAYS: u32 = 36_500;

/// Why `days` is not a usable validity, if it is not.
#[must_use]
pub fn days_problem(days: u32) -> Option<&'static str> {
    match days {
        0 => Some("a certificate must be valid for at least 1 day"),
        d if d > MAX_DAYS => Some("at most 36500 days (100 years)"),
        _ => None,
    }
}

fn validity(params: &mut CertificateParams, days: u32) {
    let now = time::OffsetDateTime::now_utc();
    // Backdate a little so a node with a slightly slow clock accepts it.
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + time::Duration::days(i64::from(days));
}

/// Why `host` cannot be a SAN, in the terms of the rule it breaks; `None`
/// when it is an IP address or a DNS name a TLS client will accept (the
/// check is rustls's own, so a name passing here verifies in a handshake).
#[must_use]
pub fn host_problem(host: &str) -> Option<String> {
    if host.parse::<std::net::IpAddr>().is_ok() {
        return None;
    }
    // A wildcard is allowed as the whole leftmost label only.
    let name = host.strip_prefix("*.").unwrap_or(host);
    if name.is_empty() {
        return Some("it is empty".into());
    }
    if name.len() > 253 {
        return Some("a DNS name is at most 253 characters".into());
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')))
    {
        return Some(format!(
            "{c:?} is not allowed; a DNS name has only letters, digits, '-', '_' and '.'"
        ));
    }
    let labels: Vec<&str> = name.strip_suffix('.').unwrap_or(name).split('.').collect();
    if labels.iter().any(|l| l.is_empty()) {
        return Some("it has an empty label (two dots in a row, or a leading dot)".into());
    }
    if labels.iter().any(|l| l.len() > 63) {
        return Some("a label is longer than 63 characters".into());
    }
    if labels
        .iter()
        .any(|l| l.starts_with('-') || l.ends_with('-'))
    {
        return Some("a label starts or ends with '-'".into());
    }
    if labels
        .last()
        .is_some_and(|l| l.bytes().all(|b| b.is_ascii_digit()))
    {
        return Some(
            "it is not a valid IP address, and a DNS name cannot end in an all-numeric label"
                .into(),
        );
    }
    rustls::pki_types::DnsName::try_from(name)
        .err()
        .map(|_| "rustls does not accept it as a DNS name".into())
}

/// Makes a CA and a serving certificate signed by it.
pub fn generate(request: &CertRequest) -> Result<GeneratedCerts, TlsError> {
    if request.hosts.is_empty() {
        return Err(TlsError::Generate(
            "at least one --host is required (a DNS name such as nodescope.nodescope-system.svc, or an IP)".into(),
        ));
    }
    if let Some(reason) = days_problem(request.validity_days) {
        return Err(TlsError::BadDays {
            days: request.validity_days,
            reason,
        });
    }
    for host in &request.hosts {
        if let Some(reason) = host_problem(host) {
            return Err(TlsError::BadHost {
                host: host.clone(),
                reason,
            });
        }
    }
    let ca_key = key_pair(request.key_type)?;
    let mut ca_params = CertificateParams::default();
    let mut ca_dn = DistinguishedName::new();
    ca_dn.push(DnType::CommonName, "nodescope webhook CA");
    ca_params.distinguished_name = ca_dn;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    validity(&mut ca_params, request.validity_days);
    let ca_cert = ca_params.self_signed(&ca_key).map_err(gen_err)?;

    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, request.hosts[0].clone());
    params.distinguished_name = dn;
    params.subject_alt_names = request
        .hosts
        .iter()
        .map(|h| match h.parse::<std::net::IpAddr>() {
            Ok(ip) => Ok(SanType::IpAddress(ip)),
            Err(_) => h
                .clone()
                .try_into()
                .map(SanType::DnsName)
                .map_err(|e| TlsError::BadHost {
                    host: h.clone(),
                    reason: e.to_string(),
                }),
        })
        .collect::<Result<_, _>>()?;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    validity(&mut params, request.validity_days);
    let key = key_pair(request.key_type)?;
    let issuer = Issuer::new(ca_params, ca_key);
    let cert = params.signed_by(&key, &issuer).map_err(gen_err)?;
    Ok(GeneratedCerts {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(key_type: KeyType) -> CertRequest {
        CertRequest {
            hosts: vec!["nodescope.nodescope-system.svc".into(), "127.0.0.1".into()],
            key_type,
            validity_days: 365,
        }
    }

    #[test]
    fn generated_ecdsa_pair_loads_as_a_matching_pair() {
        let certs = generate(&request(KeyType::Ecdsa)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        certs.write_to(dir.path(), false).unwrap();
        crate::tls::load_pair(&dir.path().join("tls.crt"), &dir.path().join("tls.key")).unwrap();
        assert!(certs.key_pem.contains("BEGIN PRIVATE KEY"));
    }

    #[test]
    fn generated_rsa_pair_loads_as_a_matching_pair() {
        let certs = generate(&request(KeyType::Rsa)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        certs.write_to(dir.path(), false).unwrap();
        crate::tls::load_pair(&dir.path().join("tls.crt"), &dir.path().join("tls.key")).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn private_key_is_written_with_mode_0600() {
        use std::os::unix::fs::PermissionsExt;
        let certs = generate(&request(KeyType::Ecdsa)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        certs.write_to(dir.path(), false).unwrap();
        let mode = std::fs::metadata(dir.path().join("tls.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn mismatched_key_is_rejected_naming_both_files() {
        let a = generate(&request(KeyType::Ecdsa)).unwrap();
        let b = generate(&request(KeyType::Ecdsa)).unwrap();
        let err = crate::tls::certified_key_from_pem(
            a.cert_pem.as_bytes(),
            b.key_pem.as_bytes(),
            Path::new("a/tls.crt"),
            Path::new("b/tls.key"),
        )
        .err()
        .unwrap();
        let msg = err.to_string();
        assert!(
            msg.starts_with("b/tls.key does not match the certificate in a/tls.crt"),
            "{msg}"
        );
    }

    #[test]
    fn empty_host_list_is_refused() {
        let mut r = request(KeyType::Ecdsa);
        r.hosts.clear();
        assert!(generate(&r).is_err());
    }
}
