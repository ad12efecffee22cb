//! `nodescope certs`: writes a CA and serving pair and prints the caBundle.

use super::CertsArgs;
use crate::tls::{days_problem, existing_file, generate, CertRequest, TlsError};

/// `--days`: refused here, before anything is generated, so clap reports it
/// with the flag's name like any other bad value.
pub(super) fn parse_days(text: &str) -> Result<u32, String> {
    let days: u32 = text
        .parse()
        .map_err(|_| "expected a whole number of days".to_owned())?;
    match days_problem(days) {
        Some(reason) => Err(reason.to_owned()),
        None => Ok(days),
    }
}

/// Generates the pair into `args.out` and returns the text to print.
pub fn run_certs(args: &CertsArgs) -> Result<String, TlsError> {
    // Checked before the (for RSA, slow) key generation; `write_to` checks
    // again and never overwrites without --force.
    if !args.force {
        if let Some(path) = existing_file(&args.out) {
            return Err(TlsError::Exists { path });
        }
    }
    let certs = generate(&CertRequest {
        hosts: args.hosts.clone(),
        key_type: args.key_type,
        validity_days: args.days,
    })?;
    certs.write_to(&args.out, args.force)?;
    Ok(format!(
        "wrote {dir}/ca.crt, {dir}/tls.crt, {dir}/tls.key (mode 0600)\ncaBundle: {bundle}\n",
        dir = args.out.display(),
        bundle = certs.ca_bundle()
    ))
}
