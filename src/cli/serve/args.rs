//! The flags of `nodescope serve`, apart from its run: every one also read
//! from `NODESCOPE_<FLAG>`, as a Deployment configures the webhook, so that
//! the chart's manifests are checked against this one struct.

use crate::cli::flags;
use crate::cli::kubectl::cluster;
use crate::cli::running::report;
use crate::cli::{LogFormat, MissingNode};
use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;

/// `nodescope serve`; every flag can also be set as `NODESCOPE_<FLAG>`,
/// but `--instance` (`POD_NAME`) and `--status-lease-namespace`
/// (`POD_NAMESPACE`), which the downward API sets in a pod.
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
    #[arg(long, env = "NODESCOPE_TLS_RELOAD_INTERVAL", default_value_t = 2, value_parser = flags::seconds, allow_negative_numbers = true)]
    pub tls_reload_interval: u64,
    /// Where cluster state comes from: `kube` (watch the API server) or
    /// `file:PATH` (a YAML/JSON file or directory, reloaded on change).
    #[arg(long, env = "NODESCOPE_STORE", default_value = "kube")]
    pub store: crate::store::StoreSource,
    /// Watch VPAs and LimitRanges in this namespace only (kube store).
    #[arg(long, env = "NODESCOPE_NAMESPACE")]
    pub namespace: Option<String>,
    /// Directory of ValidatingAdmissionPolicies and bindings, reloaded on
    /// change; the bundle built into this binary when omitted.
    #[arg(long, env = "NODESCOPE_POLICIES")]
    pub policies: Option<PathBuf>,
    /// What a pod gets when its VPA has no recommendation group for its
    /// node's scope value, the node is unknown, or the pod names no node.
    #[arg(
        long,
        env = "NODESCOPE_MISSING_NODE_RECOMMENDATION",
        value_enum,
        default_value = "aggregate"
    )]
    pub missing_node_recommendation: MissingNode,
    /// `--feature-gates` and `--max-allowed-cpu-boost`, which `dry-run`
    /// takes too.
    #[command(flatten)]
    pub mutation: flags::mutation::MutationFlags,
    /// How often the file store and the policies are checked for changes, in seconds.
    #[arg(long, env = "NODESCOPE_RELOAD_INTERVAL", default_value_t = 2, value_parser = flags::seconds, allow_negative_numbers = true)]
    pub reload_interval: u64,
    /// The Lease each replica renews while ready (`--store kube` only), so
    /// that `nodescope update` evicts only while the webhook can size the
    /// pods that come back; the updater's
    /// `--admission-controller-status-lease-name`. Empty: no Lease.
    #[arg(
        long,
        env = "NODESCOPE_STATUS_LEASE_NAME",
        default_value = crate::leader::status::DEFAULT_LEASE_NAME
    )]
    pub status_lease_name: String,
    /// The status Lease's namespace: the pod's own.
    #[arg(long, env = "POD_NAMESPACE", default_value = "nodescope-system")]
    pub status_lease_namespace: String,
    /// How often the status Lease is renewed, and how long each renewal may
    /// take. Keep it well under the updater's
    /// `--admission-controller-status-lease-timeout` (1m).
    #[arg(
        long,
        env = "NODESCOPE_STATUS_LEASE_UPDATE_INTERVAL",
        default_value = "10s",
        value_parser = flags::interval
    )]
    pub status_lease_update_interval: std::time::Duration,
    /// This replica's name, written as the status Lease's holder: the pod
    /// name; the host name when unset.
    #[arg(long, env = "POD_NAME")]
    pub instance: Option<String>,
    /// Optional plain-HTTP address serving only /metrics, /healthz and /readyz.
    #[arg(long, env = "NODESCOPE_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// Larger request bodies get HTTP 413 (read to their end and dropped
    /// first, up to 64 MiB, so that a client still sending sees the answer).
    #[arg(long, env = "NODESCOPE_MAX_BODY_BYTES", default_value_t = crate::server::DEFAULT_MAX_BODY_BYTES, value_parser = flags::bytes, allow_negative_numbers = true)]
    pub max_body_bytes: usize,
    /// Seconds in-flight reviews may take to finish after SIGTERM.
    #[arg(long, env = "NODESCOPE_DRAIN_TIMEOUT", default_value_t = 25, value_parser = flags::seconds_or_zero, allow_negative_numbers = true)]
    pub drain_timeout: u64,
    /// Seconds a client has to finish the TLS handshake.
    #[arg(long, env = "NODESCOPE_HANDSHAKE_TIMEOUT", default_value_t = 10, value_parser = flags::seconds, allow_negative_numbers = true)]
    pub handshake_timeout: u64,
    /// Seconds an idle keep-alive connection (or a slow header) may last.
    #[arg(long, env = "NODESCOPE_IDLE_TIMEOUT", default_value_t = 120, value_parser = flags::seconds, allow_negative_numbers = true)]
    pub idle_timeout: u64,
    /// How log lines on stderr are written.
    #[arg(long, env = "NODESCOPE_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// A tracing filter such as `info` or `nodescope=debug`.
    #[arg(long, env = "NODESCOPE_LOG_LEVEL", default_value = "info", value_parser = flags::log_filter)]
    pub log_level: String,
    /// Make throwaway certificates, serve the example store built into the
    /// binary on 127.0.0.1:8443 and print curl lines that post sample reviews.
    #[arg(long, env = "NODESCOPE_DEMO")]
    pub demo: bool,
    /// With `--store kube`: what this replica observes of the Features it
    /// obeys, reported in their status.uses.
    #[command(flatten)]
    pub report: report::ReportFlags,
    /// With `--store kube`: the cluster.
    #[command(flatten)]
    pub cluster: cluster::ClusterFlags,
}

impl ServeArgs {
    /// `--instance`, else the host name (a pod's is its name), else
    /// `nodescope`: the status Lease's holder.
    #[must_use]
    pub fn holder_identity(&self) -> String {
        self.instance
            .clone()
            .filter(|i| !i.is_empty())
            .or_else(|| {
                std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .ok()
                    .map(|h| h.trim().to_owned())
                    .filter(|h| !h.is_empty())
            })
            .unwrap_or_else(|| "nodescope".to_owned())
    }
}
