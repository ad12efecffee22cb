//! The command line, parsed once into typed configuration.
//!
//! Nothing outside this module reads flags or environment variables; each
//! subcommand gets a plain struct and runs from it.

pub mod balloon;
pub mod balloon_controller;
pub mod balloon_set;
mod certs;
pub mod cluster;
mod demo;
pub mod dry_run;
pub mod feature_gates;
pub mod features;
mod features_cleanup;
mod features_list;
pub mod flags;
pub mod list;
pub mod namespace_flags;
pub mod recommend;
mod recommend_flags;
pub mod report_flags;
pub mod scope;
mod serve;
mod table;
pub mod test_suite;
pub mod update;
mod update_list;
pub mod version;

pub use certs::run_certs;
pub use dry_run::run_dry_run;
pub use features::run_features;
pub use serve::run_serve;
pub use test_suite::run_test;

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
    /// Show what the webhook and the policy bundle would say about manifests,
    /// offline. Exit 0: all admitted; 1: any denied; 2: bad input or nothing to
    /// check; 3: internal error.
    DryRun(Box<DryRunArgs>),
    /// Run policy test suites (YAML files of cases with expected results).
    /// Exit 0: all passed; 1: any failed; 2: bad input or nothing to test; 3:
    /// internal error.
    Test(TestArgs),
    /// KEP-3920 Features: list them (namespace, name, desired, state, uses
    /// left, age of the last transition), `uses NAME` for every object that
    /// keeps one from turning off, `cleanup NAME --dry-run` for what turning
    /// it off clears (from the cluster, or offline from manifests), or run
    /// the lifecycle `controller`.
    Features(Box<features::FeaturesArgs>),
    /// The scoped recommender: writes status.recommendationGroups (one
    /// recommendation per scope value) and the DaemonSet-wide
    /// status.recommendation of scoped DaemonSet VPAs, with upstream VPA's
    /// algorithm. Offline (--store file: --metrics file:, or --demo) it
    /// replays recorded PodMetrics and prints the VPAs with that status.
    Recommend(Box<recommend::RecommendArgs>),
    /// The per-node updater: brings running pods of scoped DaemonSet VPAs
    /// to their node's recommendation group, in place where the updateMode
    /// allows, with upstream VPA updater's rules and limits. `--plan`
    /// prints one pass and changes nothing.
    Update(Box<update::UpdateArgs>),
    /// Node resizing by balloon (KEP-5620): `status` of every node with a
    /// balloon (from the cluster, or offline from --store file:), `set` a
    /// Node's usable size, or run the `controller` that resizes balloons in
    /// place (an upsize the node's other pods would not fit under is
    /// refused, never evicted for).
    Balloon(Box<balloon::BalloonArgs>),
    /// Print the version, git commit and build date (`-o json|yaml` as
    /// `kubectl version -o`).
    Version(version::VersionArgs),
    /// Print a shell completion script: `source <(nodescope completion
    /// bash)`.
    Completion(version::CompletionArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One line per event for people (colour on a terminal).
    Text,
    /// One JSON object per event for log collectors.
    Json,
}

/// `--missing-node-recommendation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MissingNode {
    /// Use the VPA's DaemonSet-wide `status.recommendation`, as AEP-10031
    /// does (and warn); unchanged when there is none.
    Aggregate,
    /// Leave the pod's resources unchanged (and warn): KEP-4943's reading.
    None,
}

impl From<MissingNode> for crate::mutate::MissingNodeRecommendation {
    fn from(m: MissingNode) -> Self {
        match m {
            MissingNode::None => Self::LeaveUnchanged,
            MissingNode::Aggregate => Self::Aggregate,
        }
    }
}

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
    /// Upstream VPA's gates as `Name=true,...`. `CPUStartupBoost` (off by
    /// default, as upstream) boosts the CPU of new pods whose VPA has a
    /// `startupBoost`; `PerVPAConfig` changes nothing the webhook does.
    #[arg(long, env = "NODESCOPE_FEATURE_GATES", default_value = "", value_parser = feature_gates::parse)]
    pub feature_gates: feature_gates::FeatureGates,
    /// The most CPU a boosted container is given (upstream's flag); unset:
    /// no cap.
    #[arg(long, env = "NODESCOPE_MAX_ALLOWED_CPU_BOOST", value_parser = flags::quantity)]
    pub max_allowed_cpu_boost: Option<crate::quantity::Quantity>,
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
    #[arg(long, env = "NODESCOPE_LOG_LEVEL", default_value = "info")]
    pub log_level: String,
    /// Make throwaway certificates, serve the example store built into the
    /// binary on 127.0.0.1:8443 and print curl lines that post sample reviews.
    #[arg(long, env = "NODESCOPE_DEMO")]
    pub demo: bool,
    /// With `--store kube`: what this replica observes of the Features it
    /// obeys, reported in their status.uses.
    #[command(flatten)]
    pub report: report_flags::ReportFlags,
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
    #[arg(long, default_value_t = 365, value_parser = certs::parse_days)]
    pub days: u32,
}

/// `-o` of `dry-run`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DryRunFormat {
    /// One row per object and binding, then a summary (colour on a terminal).
    Table,
    /// The report as JSON (schema in docs/dry-run.md).
    Json,
    /// The same report as YAML.
    Yaml,
    /// JUnit XML: one testcase per object and binding.
    Junit,
}

/// `CREATE`, `UPDATE` or `DELETE`, for `--operation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "UPPER")]
pub enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    /// The operation as an AdmissionRequest spells it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
        }
    }
}

/// `nodescope dry-run`.
#[derive(Debug, Args, Clone)]
pub struct DryRunArgs {
    /// Manifests to evaluate: a file, a directory (recursively: .yaml, .yml,
    /// .json; a directory with a kustomization is rendered as -k does) or
    /// `-` for stdin; multi-document YAML, `List`s and AdmissionReview JSON
    /// (replayed as the apiserver sent it). Repeatable.
    #[arg(short = 'f', long = "filename", required_unless_present = "kustomize")]
    pub files: Vec<PathBuf>,
    /// A kustomization directory, rendered with `kubectl kustomize` (kubectl
    /// must be on PATH). Repeatable.
    #[arg(short = 'k', long = "kustomize")]
    pub kustomize: Vec<PathBuf>,
    /// ValidatingAdmissionPolicies and bindings (a directory or a file); the bundle
    /// built into this binary when omitted.
    #[arg(long)]
    pub policies: Option<PathBuf>,
    /// Features, ConfigMaps, Namespaces and PriorityClasses the policies and
    /// the defaulting read. Repeatable.
    #[arg(long)]
    pub params: Vec<PathBuf>,
    /// VerticalPodAutoscalers (with per-node recommendation groups) and
    /// LimitRanges: DaemonSet pods are then shown with the mutating
    /// webhook's patch. Repeatable.
    #[arg(long)]
    pub recommendations: Vec<PathBuf>,
    /// Leave out files and directories found under a directory given with
    /// -f, --params, --recommendations or --old whose path (as found, without a leading `./`) or name matches
    /// GLOB (`examples/recommend/metrics`, `*.json`, `**/testdata/*`; `*`
    /// stays within a path segment). Repeatable.
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,
    /// Expand each DaemonSet given with -f into one pod per node, as the
    /// DaemonSet controller would create them (comma-separated node names).
    #[arg(long, value_delimiter = ',')]
    pub nodes: Vec<String>,
    /// The operation of every request built from a manifest.
    #[arg(long, value_enum, default_value = "CREATE")]
    pub operation: Operation,
    /// The previous versions of the objects, for `--operation UPDATE`.
    #[arg(long)]
    pub old: Vec<PathBuf>,
    /// The user making the requests (`request.userInfo.username`).
    #[arg(long = "as")]
    pub as_user: Option<String>,
    /// A group of that user (`request.userInfo.groups`). Repeatable.
    #[arg(long = "as-group")]
    pub as_groups: Vec<String>,
    /// What a pod gets when its VPA has no recommendation for its node.
    #[arg(long, value_enum, default_value = "aggregate")]
    pub missing_node_recommendation: MissingNode,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: DryRunFormat,
}

/// `-o` of `test`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TestFormat {
    /// One PASS/FAIL line per case and a summary.
    Text,
    /// JUnit XML: one testcase per case.
    Junit,
}

/// `nodescope test`.
#[derive(Debug, Args, Clone)]
pub struct TestArgs {
    /// Suite files, or directories searched recursively for .yaml/.yml files.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Policies for suites that do not name their own `policies:`; the
    /// bundle built into this binary when omitted.
    #[arg(long)]
    pub policies: Option<PathBuf>,
    /// Run only the cases whose `suite/case` name matches this regex.
    #[arg(long)]
    pub run: Option<String>,
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: TestFormat,
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
