//! The command line, parsed once into typed configuration.
//!
//! Nothing outside this module reads flags or environment variables; each
//! subcommand gets a plain struct and runs from it.

mod certs;
mod serve;

pub use certs::run_certs;
pub use serve::run_serve;

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;

/// nodescope: admission webhooks and a CEL policy bundle for node-level
/// resource control (per-node VPA for DaemonSets, balloon pods, feature lifecycle).
#[derive(Debug, Parser)]
#[command(name = "nodescope", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTPS admission webhook server.
    Serve(Box<ServeArgs>),
    /// Generate a self-signed CA and a serving certificate.
    Certs(CertsArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// `--missing-node-recommendation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MissingNode {
    /// Leave the pod's resources unchanged (and warn).
    None,
    /// Use the VPA's DaemonSet-wide `status.recommendation` (and warn).
    Aggregate,
}

impl From<MissingNode> for crate::mutate::MissingNodeRecommendation {
    fn from(m: MissingNode) -> Self {
        match m {
            MissingNode::None => Self::LeaveUnchanged,
            MissingNode::Aggregate => Self::Aggregate,
        }
    }
}

/// `nodescope serve`; every flag can also be set as `NODESCOPE_<FLAG>`.
#[derive(Debug, Args, Clone)]
pub struct ServeArgs {
    /// HTTPS address for /mutate, /validate and the probes.
    #[arg(long, env = "NODESCOPE_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// PEM certificate chain.
    #[arg(long, env = "NODESCOPE_TLS_CERT", required_unless_present = "demo")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key (PKCS#8, RSA or EC).
    #[arg(long, env = "NODESCOPE_TLS_KEY", required_unless_present = "demo")]
    pub tls_key: Option<PathBuf>,
    /// How often the certificate files are checked for changes, in seconds.
    #[arg(long, env = "NODESCOPE_TLS_RELOAD_INTERVAL", default_value_t = 2)]
    pub tls_reload_interval: u64,
    /// Where cluster state comes from: `kube` (watch the API server) or
    /// `file:PATH` (a YAML/JSON file or directory, reloaded on change).
    #[arg(long, env = "NODESCOPE_STORE", default_value = "kube")]
    pub store: crate::store::StoreSource,
    /// Watch VPAs and LimitRanges in this namespace only (kube store).
    #[arg(long, env = "NODESCOPE_NAMESPACE")]
    pub namespace: Option<String>,
    /// Directory of ValidatingAdmissionPolicies and bindings, reloaded on change.
    #[arg(long, env = "NODESCOPE_POLICIES", default_value = "policies")]
    pub policies: PathBuf,
    /// What a pod gets when its VPA has no recommendation for its node.
    #[arg(
        long,
        env = "NODESCOPE_MISSING_NODE_RECOMMENDATION",
        value_enum,
        default_value = "none"
    )]
    pub missing_node_recommendation: MissingNode,
    /// How often the file store and the policies are checked for changes, in seconds.
    #[arg(long, env = "NODESCOPE_RELOAD_INTERVAL", default_value_t = 2)]
    pub reload_interval: u64,
    /// Optional plain-HTTP address serving only /metrics, /healthz and /readyz.
    #[arg(long, env = "NODESCOPE_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// Larger request bodies get HTTP 413 without being read.
    #[arg(long, env = "NODESCOPE_MAX_BODY_BYTES", default_value_t = crate::server::DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
    /// Seconds in-flight reviews may take to finish after SIGTERM.
    #[arg(long, env = "NODESCOPE_DRAIN_TIMEOUT", default_value_t = 25)]
    pub drain_timeout: u64,
    /// Seconds a client has to finish the TLS handshake.
    #[arg(long, env = "NODESCOPE_HANDSHAKE_TIMEOUT", default_value_t = 10)]
    pub handshake_timeout: u64,
    /// Seconds an idle keep-alive connection (or a slow header) may last.
    #[arg(long, env = "NODESCOPE_IDLE_TIMEOUT", default_value_t = 120)]
    pub idle_timeout: u64,
    #[arg(long, env = "NODESCOPE_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// A tracing filter such as `info` or `nodescope=debug`.
    #[arg(long, env = "NODESCOPE_LOG_LEVEL", default_value = "info")]
    pub log_level: String,
    /// Make throwaway certificates, listen on 127.0.0.1:8443 and print a curl
    /// line that posts a sample review.
    #[arg(long, env = "NODESCOPE_DEMO")]
    pub demo: bool,
}

/// `nodescope certs`.
#[derive(Debug, Args, Clone)]
pub struct CertsArgs {
    /// DNS name or IP the serving certificate is valid for; repeat it.
    #[arg(long = "host", required = true)]
    pub hosts: Vec<String>,
    /// Directory for ca.crt, tls.crt and tls.key (created if missing).
    #[arg(long, default_value = "certs/out")]
    pub out: PathBuf,
    #[arg(long, value_enum, default_value = "ecdsa")]
    pub key_type: crate::tls::KeyType,
    /// Validity of both certificates, in days.
    #[arg(long, default_value_t = 365)]
    pub days: u32,
}

/// Installs the global tracing subscriber; call once, at start.
pub fn init_logging(format: LogFormat, level: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info"));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
