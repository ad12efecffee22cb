//! `nodescope certs`: writes a CA and serving pair and prints the caBundle,
//! the pair `serve --tls-cert --tls-key` then serves with (the self-signed
//! overlay's, through scripts/self-signed.sh), without a cert-manager.

use crate::tls::{check_out_dir, days_problem, existing_file, generate, CertRequest, TlsError};
use clap::Args;
use std::path::PathBuf;

/// `nodescope certs`.
#[derive(Debug, Args, Clone)]
pub struct CertsArgs {
    /// DNS name or IP the serving certificate is valid for; repeat it.
    #[arg(long = "host", required = true)]
    pub hosts: Vec<String>,
    /// Directory for ca.crt, tls.crt and tls.key (created if missing).
    #[arg(long, default_value = "certs/out")]
    pub out: PathBuf,
    /// Replace ca.crt, tls.crt and tls.key if --out already holds them.
    #[arg(long)]
    pub force: bool,
    /// Key algorithm of the CA and the serving certificate.
    #[arg(long, value_enum, default_value = "ecdsa")]
    pub key_type: crate::tls::KeyType,
    /// Validity of both certificates, in days (1 to 36500).
    #[arg(long, default_value_t = 365, value_parser = parse_days)]
    pub days: u32,
}

/// `--days`: refused here, before anything is generated, so clap reports it
/// with the flag's name like any other bad value.
fn parse_days(text: &str) -> Result<u32, String> {
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
    check_out_dir(&args.out)?;
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
