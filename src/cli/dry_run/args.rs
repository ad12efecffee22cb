//! `nodescope dry-run`'s flags: what to evaluate (kubectl's `-f` and `-k`),
//! what the policies and the webhook read beside it, and the request each
//! manifest is sent as (`--operation`, `--as`), so that the offline verdict
//! is the one the apiserver would get. The webhook's own flags
//! (`--feature-gates`, `--max-allowed-cpu-boost`) are `serve`'s, flattened,
//! so that the preview is the webhook's answer; `--kubeconfig` and
//! `--context` are kubectl's, for the kinds a cluster serves.

use crate::cli::flags::mutation::MutationFlags;
use crate::cli::kubectl::cluster::ClusterFlags;
use crate::cli::MissingNode;
use clap::{Args, ValueEnum};
use std::path::PathBuf;

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

/// `nodescope dry-run`. `serve` reads its flags from `NODESCOPE_*` too;
/// a dry run reads only its command line, so that what it previews is
/// what it was told.
#[derive(Debug, Args, Clone)]
#[command(mut_arg("feature_gates", |a| a.env(None::<&str>)))]
#[command(mut_arg("max_allowed_cpu_boost", |a| a.env(None::<&str>)))]
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
    /// DaemonSet controller would create them (comma-separated node names,
    /// each a Node name the apiserver takes, each once).
    #[arg(long, value_delimiter = ',', value_parser = crate::cli::flags::node_name::parse)]
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
    /// The webhook's `--feature-gates` and `--max-allowed-cpu-boost`, as
    /// `serve` is given them: with `CPUStartupBoost=true` the preview shows
    /// the boosted pod the webhook would patch.
    #[command(flatten)]
    pub mutation: MutationFlags,
    /// Read the kinds (and versions) the cluster serves from its discovery,
    /// once, instead of the built-in Kubernetes v1.36 table: a cluster with
    /// CRDs or other versions. Without either flag dry-run never connects.
    #[command(flatten)]
    pub cluster: ClusterFlags,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: DryRunFormat,
}
