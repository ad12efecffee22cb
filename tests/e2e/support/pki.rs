//! The control plane's own PKI, made fresh for every run: a CA, the
//! apiserver's serving certificate, an admin client certificate in
//! `system:masters`, and the service-account signing key pair.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use std::path::{Path, PathBuf};

/// Files the apiserver and its clients read, all under one directory.
pub struct Pki {
    pub ca_cert: PathBuf,
    pub ca_pem: String,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub admin_cert_pem: String,
    pub admin_key_pem: String,
    pub service_account_key: PathBuf,
    pub service_account_pub: PathBuf,
}

fn cert_err(e: rcgen::Error) -> String {
    format!("generating the e2e PKI: {e}")
}

impl Pki {
    pub fn generate(dir: &Path) -> Result<Pki, String> {
        let ca_key = KeyPair::generate().map_err(cert_err)?;
        let ca = ca_params()?;
        let ca_cert = ca.self_signed(&ca_key).map_err(cert_err)?;
        let ca_pem = ca_cert.pem();
        let ca_key_pem = ca_key.serialize_pem();
        let issuer = Issuer::new(ca, ca_key);

        let serving_key = KeyPair::generate().map_err(cert_err)?;
        let mut serving = CertificateParams::new(vec!["localhost".to_owned()]).map_err(cert_err)?;
        serving
            .subject_alt_names
            .push(SanType::IpAddress([127, 0, 0, 1].into()));
        serving.distinguished_name = name("kube-apiserver", None);
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_cert = serving.signed_by(&serving_key, &issuer).map_err(cert_err)?;

        let admin_key = KeyPair::generate().map_err(cert_err)?;
        let mut admin = CertificateParams::new(Vec::<String>::new()).map_err(cert_err)?;
        admin.distinguished_name = name("e2e-admin", Some("system:masters"));
        admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let admin_cert = admin.signed_by(&admin_key, &issuer).map_err(cert_err)?;

        let sa_key = KeyPair::generate().map_err(cert_err)?;
        let pki = Pki {
            ca_cert: dir.join("ca.crt"),
            ca_pem: ca_pem.clone(),
            serving_cert: dir.join("apiserver.crt"),
            serving_key: dir.join("apiserver.key"),
            admin_cert_pem: admin_cert.pem(),
            admin_key_pem: admin_key.serialize_pem(),
            service_account_key: dir.join("sa.key"),
            service_account_pub: dir.join("sa.pub"),
        };
        let write = |path: &Path, text: &str| {
            std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
        };
        write(&pki.ca_cert, &ca_pem)?;
        write(&dir.join("ca.key"), &ca_key_pem)?;
        write(&pki.serving_cert, &serving_cert.pem())?;
        write(&pki.serving_key, &serving_key.serialize_pem())?;
        write(&pki.service_account_key, &sa_key.serialize_pem())?;
        write(&pki.service_account_pub, &sa_key.public_key_pem())?;
        Ok(pki)
    }
}

/// A client certificate and key (PEM) for user `common` in group
/// `organization`, signed by the CA that [`Pki::generate`] left in `dir`:
/// the system suite's controller-manager and scheduler each have their own.
#[allow(dead_code)]
pub fn client(
    dir: &Path,
    common: &str,
    organization: Option<&str>,
) -> Result<(String, String), String> {
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name))
            .map_err(|e| format!("{}: {e}", dir.join(name).display()))
    };
    // The same name and key as the CA's certificate: what a signature
    // needs of its issuer (rcgen reads certificates only with x509-parser).
    let ca_key = KeyPair::from_pem(&read("ca.key")?).map_err(cert_err)?;
    let issuer = Issuer::new(ca_params()?, ca_key);
    let key = KeyPair::generate().map_err(cert_err)?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(cert_err)?;
    params.distinguished_name = name(common, organization);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, &issuer).map_err(cert_err)?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn ca_params() -> Result<CertificateParams, String> {
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(cert_err)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca.distinguished_name = name("nodescope-e2e-ca", None);
    Ok(ca)
}

fn name(common: &str, organization: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common);
    if let Some(o) = organization {
        dn.push(DnType::OrganizationName, o);
    }
    dn
}
