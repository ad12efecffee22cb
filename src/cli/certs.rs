//! `nodescope certs`: writes a CA and serving pair and prints the caBundle.

use super::CertsArgs;
use crate::tls::{generate, CertRequest, TlsError};

/// Generates the pair into `args.out` and returns the text to print.
pub fn run_certs(args: &CertsArgs) -> Result<String, TlsError> {
    let certs = generate(&CertRequest {
        hosts: args.hosts.clone(),
        key_type: args.key_type,
        validity_days: args.days,
    })?;
    certs.write_to(&args.out)?;
    Ok(format!(
        "wrote {dir}/ca.crt, {dir}/tls.crt, {dir}/tls.key (mode 0600)\ncaBundle: {bundle}\n",
        dir = args.out.display(),
        bundle = certs.ca_bundle()
    ))
}
