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
    Ecdsa,
    Rsa,
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
    pub fn write_to(&self, dir: &Path) -> Result<(), TlsError> {
        let wrap = |path: &Path| {
            let path = path.to_owned();
            move |source| TlsError::Write { path, source }
        };
        std::fs::create_dir_all(dir).map_err(wrap(dir))?;
        let ca = dir.join("ca.crt");
        std::fs::write(&ca, &self.ca_pem).map_err(wrap(&ca))?;
        let crt = dir.join("tls.crt");
        std::fs::write(&crt, &self.cert_pem).map_err(wrap(&crt))?;
        let key = dir.join("tls.key");
        write_private(&key, self.key_pem.as_bytes()).map_err(wrap(&key))?;
        Ok(())
    }
}

#[cfg(unix)]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    // An existing file keeps its old mode on open; force 0600 either way.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(bytes)
}

#[cfg(not(unix))]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::write(path, bytes)
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

fn validity(params: &mut CertificateParams, days: u32) {
    let now = time::OffsetDateTime::now_utc();
    // Backdate a little so a node with a slightly slow clock accepts it.
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + time::Duration::days(i64::from(days));
}

/// Makes a CA and a serving certificate signed by it.
pub fn generate(request: &CertRequest) -> Result<GeneratedCerts, TlsError> {
    if request.hosts.is_empty() {
        return Err(TlsError::Generate(
            "at least one --host is required (a DNS name such as nodescope.nodescope-system.svc, or an IP)".into(),
        ));
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
            Err(_) => h.clone().try_into().map(SanType::DnsName).map_err(|e| {
                TlsError::Generate(format!("--host {h:?} is not a valid DNS name: {e}"))
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
        certs.write_to(dir.path()).unwrap();
        crate::tls::load_pair(&dir.path().join("tls.crt"), &dir.path().join("tls.key")).unwrap();
        assert!(certs.key_pem.contains("BEGIN PRIVATE KEY"));
    }

    #[test]
    fn generated_rsa_pair_loads_as_a_matching_pair() {
        let certs = generate(&request(KeyType::Rsa)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        certs.write_to(dir.path()).unwrap();
        crate::tls::load_pair(&dir.path().join("tls.crt"), &dir.path().join("tls.key")).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn private_key_is_written_with_mode_0600() {
        use std::os::unix::fs::PermissionsExt;
        let certs = generate(&request(KeyType::Ecdsa)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        certs.write_to(dir.path()).unwrap();
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
