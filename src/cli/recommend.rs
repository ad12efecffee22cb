//! `nodescope recommend`: the scoped recommender. Offline (`--store file:`
//! and `--metrics file:`) it replays recorded PodMetrics and prints the VPAs
//! with the status it would write; against a cluster it runs the loop of
//! [`crate::recommend::cluster`]. Every flag upstream's recommender has for
//! these numbers is here under the same name and default.

use super::flags;
use crate::quantity::Quantity;
use crate::recommend::aggregate::HistoryConfig;
use crate::recommend::checkpoint_dir::{self, CheckpointDir};
use crate::recommend::container::PeakConfig;
use crate::recommend::estimate::RecommenderConfig;
use crate::recommend::model::ModelConfig;
use crate::recommend::recording::Recording;
use crate::recommend::replay::{self, Replay, ReplayError};
use crate::recommend::status::StatusConfig;
use clap::{Args, ValueEnum};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// `nodescope recommend`.
#[derive(Debug, Args, Clone)]
pub struct RecommendArgs {
    /// Where VPAs, Pods and Nodes come from: `kube` (the cluster) or
    /// `file:PATH` (manifests; `file:-` reads standard input).
    #[arg(long, default_value = "kube")]
    pub store: String,
    /// Where usage comes from: `kube` (metrics.k8s.io/v1beta1, as
    /// metrics-server serves it) or `file:PATH` (recorded PodMetricsList
    /// files, replayed in timestamp order: all at once offline, one
    /// interval per --recommender-interval with --store kube).
    #[arg(long, default_value = "kube")]
    pub metrics: String,
    /// Where history is kept across restarts: `kube`
    /// (RecommendationCheckpoint objects), `upstream` (upstream's
    /// VerticalPodAutoscalerCheckpoint objects, scoped and global, as
    /// upstream's recommender with DaemonSetScope writes them), `file:DIR`,
    /// `upstream:DIR` (files in upstream's format), or `none`. Offline the
    /// default is none. A VPA without nodescope checkpoints is imported
    /// from upstream's, when there are any.
    #[arg(long)]
    pub checkpoints: Option<String>,
    /// Replay the recording once, print the VPAs with their status, and
    /// exit. Offline runs always do this; against a cluster it is refused.
    #[arg(long)]
    pub once: bool,
    /// Replay the example data built into this binary (three node shapes).
    #[arg(long, conflicts_with_all = ["store", "metrics"])]
    pub demo: bool,
    /// Output of an offline run: the VPAs with the status that would be
    /// written.
    #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
    pub output: Output,
    #[command(flatten)]
    pub upstream: UpstreamFlags,
    #[command(flatten)]
    pub running: RunningFlags,
    /// What this replica observes of `vpa-node-scope`, reported in its
    /// status.uses.
    #[command(flatten)]
    pub report: super::report_flags::ReportFlags,
    #[command(flatten)]
    pub cluster: super::cluster::ClusterFlags,
}

/// How the recommender runs against a cluster.
#[derive(Debug, Args, Clone)]
pub struct RunningFlags {
    /// How often the leader checkpoints its history (and once more when it
    /// stops). A leader that crashes loses at most this much history.
    #[arg(long, default_value = "10m", value_parser = flags::interval)]
    pub checkpoint_interval: Duration,
    /// This replica's name: the Lease holder's identity (the pod name).
    #[arg(long, env = "POD_NAME", default_value = "nodescope-recommender")]
    pub instance: String,
    /// The namespace of the Lease the replicas elect their leader on.
    #[arg(long, env = "POD_NAMESPACE", default_value = "nodescope-system")]
    pub lease_namespace: String,
    /// The Lease's name.
    #[arg(long, default_value = "nodescope-recommender")]
    pub lease_name: String,
    /// How long a dead leader's Lease lasts (at least 2s).
    #[arg(long, default_value = "15s", value_parser = flags::lease_duration)]
    pub lease_duration: Duration,
    /// Where /metrics, /healthz and /readyz are served (plain HTTP), as upstream's
    /// `--address`.
    #[arg(long, default_value = "0.0.0.0:8942")]
    pub address: std::net::SocketAddr,
    /// `text` or `json` logs.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: super::LogFormat,
}

/// `-o`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Yaml,
    Json,
}

/// upstream's recommender flags (vertical-pod-autoscaler/pkg/recommender/
/// config/config.go), names and defaults unchanged.
#[derive(Debug, Args, Clone)]
pub struct UpstreamFlags {
    /// VPAs naming this recommender in spec.recommenders are computed; a
    /// VPA naming none belongs to "default".
    #[arg(long, default_value = "default")]
    pub recommender_name: String,
    /// How often metrics are fetched and recommendations computed.
    #[arg(long, default_value = "1m", value_parser = flags::interval)]
    pub recommender_interval: Duration,
    /// Fraction of usage added as the safety margin.
    #[arg(long, default_value_t = 0.15, value_parser = flags::non_negative, allow_negative_numbers = true)]
    pub recommendation_margin_fraction: f64,
    /// Minimum CPU recommendation for a pod, shared among its containers.
    #[arg(long, default_value_t = 25.0, value_parser = flags::non_negative, allow_negative_numbers = true)]
    pub pod_recommendation_min_cpu_millicores: f64,
    /// Minimum memory recommendation for a pod, shared among its containers.
    #[arg(long, default_value_t = 250.0, value_parser = flags::non_negative, allow_negative_numbers = true)]
    pub pod_recommendation_min_memory_mb: f64,
    /// CPU usage percentile of the target.
    #[arg(long, default_value_t = 0.9, value_parser = flags::percentile, allow_negative_numbers = true)]
    pub target_cpu_percentile: f64,
    /// CPU usage percentile of the lower bound.
    #[arg(long, default_value_t = 0.5, value_parser = flags::percentile, allow_negative_numbers = true)]
    pub recommendation_lower_bound_cpu_percentile: f64,
    /// CPU usage percentile of the upper bound.
    #[arg(long, default_value_t = 0.95, value_parser = flags::percentile, allow_negative_numbers = true)]
    pub recommendation_upper_bound_cpu_percentile: f64,
    /// Memory peak percentile of the target.
    #[arg(long, default_value_t = 0.9, value_parser = flags::percentile, allow_negative_numbers = true)]
    pub target_memory_percentile: f64,
    /// Memory peak percentile of the lower bound.
    #[arg(long, default_value_t = 0.5, value_parser = flags::percentile, allow_negative_numbers = true)]
    pub recommendation_lower_bound_memory_percentile: f64,
    /// Memory peak percentile of the upper bound.
    #[arg(long, default_value_t = 0.95, value_parser = flags::percentile, allow_negative_numbers = true)]
    pub recommendation_upper_bound_memory_percentile: f64,
    /// The time unit of the CPU bounds' confidence multiplier.
    #[arg(long, default_value = "24h", value_parser = flags::interval)]
    pub confidence_interval_cpu: Duration,
    /// The time unit of the memory bounds' confidence multiplier.
    #[arg(long, default_value = "24h", value_parser = flags::interval)]
    pub confidence_interval_memory: Duration,
    /// CPU recommendations are rounded up to a multiple of this.
    #[arg(long, default_value_t = 1, value_parser = flags::count_i64, allow_negative_numbers = true)]
    pub round_cpu_millicores: i64,
    /// Memory recommendations are rounded up to a multiple of this.
    #[arg(long, default_value_t = 1, value_parser = flags::count_i64, allow_negative_numbers = true)]
    pub round_memory_bytes: i64,
    /// The window of one memory peak.
    #[arg(long, default_value = "24h", value_parser = flags::interval)]
    pub memory_aggregation_interval: Duration,
    /// How many windows history is kept for.
    #[arg(long, default_value_t = 8, value_parser = flags::count_i64, allow_negative_numbers = true)]
    pub memory_aggregation_interval_count: i64,
    /// Half-life of a memory peak's weight.
    #[arg(long, default_value = "24h", value_parser = flags::interval)]
    pub memory_histogram_decay_half_life: Duration,
    /// Half-life of a CPU sample's weight.
    #[arg(long, default_value = "24h", value_parser = flags::interval)]
    pub cpu_histogram_decay_half_life: Duration,
    /// Memory after an OOM kill: at least this times the usage.
    #[arg(long, default_value_t = 1.2, value_parser = flags::ratio, allow_negative_numbers = true)]
    pub oom_bump_up_ratio: f64,
    /// Memory after an OOM kill: at least the usage plus this many bytes.
    #[arg(long, default_value_t = 104_857_600.0, value_parser = flags::non_negative, allow_negative_numbers = true)]
    pub oom_min_bump_up_bytes: f64,
    /// Largest CPU recommended for a container (a VPA's maxAllowed wins).
    #[arg(long)]
    pub container_recommendation_max_allowed_cpu: Option<Quantity>,
    /// Largest memory recommended for a container (a VPA's maxAllowed wins).
    #[arg(long)]
    pub container_recommendation_max_allowed_memory: Option<Quantity>,
    /// nodescope's own: a scope value gets a group once each of its
    /// containers has this many CPU samples (1: any history, upstream's
    /// notion of an aggregate that is not empty).
    #[arg(long, default_value_t = 1, value_parser = flags::count_u64, allow_negative_numbers = true)]
    pub group_min_samples: u64,
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl UpstreamFlags {
    /// The typed configuration of the model and the status.
    #[must_use]
    pub fn replay(&self) -> Replay {
        let interval_ms = millis(self.memory_aggregation_interval);
        Replay {
            model: ModelConfig {
                history: HistoryConfig {
                    cpu_half_life: self.cpu_histogram_decay_half_life,
                    memory_half_life: self.memory_histogram_decay_half_life,
                    cpu_weight_from_request: false,
                },
                peaks: PeakConfig {
                    interval_ms,
                    oom_bump_up_ratio: self.oom_bump_up_ratio,
                    oom_min_bump_up_bytes: self.oom_min_bump_up_bytes,
                },
                window_length_ms: interval_ms
                    .saturating_mul(self.memory_aggregation_interval_count.max(1)),
            },
            status: StatusConfig {
                recommender: RecommenderConfig {
                    margin_fraction: self.recommendation_margin_fraction,
                    pod_min_cpu_millicores: self.pod_recommendation_min_cpu_millicores,
                    pod_min_memory_mb: self.pod_recommendation_min_memory_mb,
                    target_cpu_percentile: self.target_cpu_percentile,
                    lower_bound_cpu_percentile: self.recommendation_lower_bound_cpu_percentile,
                    upper_bound_cpu_percentile: self.recommendation_upper_bound_cpu_percentile,
                    confidence_interval_cpu: self.confidence_interval_cpu,
                    target_memory_percentile: self.target_memory_percentile,
                    lower_bound_memory_percentile: self
                        .recommendation_lower_bound_memory_percentile,
                    upper_bound_memory_percentile: self
                        .recommendation_upper_bound_memory_percentile,
                    confidence_interval_memory: self.confidence_interval_memory,
                },
                round_cpu_millicores: self.round_cpu_millicores,
                round_memory_bytes: self.round_memory_bytes,
                max_allowed_cpu: self.container_recommendation_max_allowed_cpu.clone(),
                max_allowed_memory: self.container_recommendation_max_allowed_memory.clone(),
                group_min_samples: self.group_min_samples,
                status_limit: crate::recommend::fit::STATUS_LIMIT,
            },
            recommender_name: self.recommender_name.clone(),
        }
    }
}

/// `file:PATH` → PATH.
fn file_source<'a>(flag: &str, value: &'a str) -> Result<Option<&'a Path>, String> {
    match value.strip_prefix("file:") {
        Some("") => Err(format!("--{flag} file: needs a path, as in file:./dir")),
        Some(path) => Ok(Some(Path::new(path))),
        None if value == "kube" => Ok(None),
        None if value == "none" && flag == "checkpoints" => Ok(None),
        None => Err(format!(
            "--{flag} {value:?}: expected kube or file:PATH{}",
            if flag == "checkpoints" {
                " or none"
            } else {
                ""
            }
        )),
    }
}

/// Whether this invocation runs offline (and so needs no cluster): the
/// store is files. (`--store kube --metrics file:` runs the cluster loop on
/// recorded usage.)
#[must_use]
pub fn is_offline(args: &RecommendArgs) -> bool {
    args.demo || args.store.starts_with("file:")
}

/// Offline: replay and print. Exit 0; 2 for bad input.
///
/// # Errors
/// Bad flags or unreadable inputs, as one sentence naming the file.
pub fn run_offline(args: &RecommendArgs, out: &mut impl Write) -> Result<ExitCode, String> {
    let demo = args
        .demo
        .then(crate::cli::demo::recommend_data)
        .transpose()?;
    let (store, metrics) = match &demo {
        Some(dir) => (dir.path().join("store"), dir.path().join("metrics")),
        None => {
            let store = file_source("store", &args.store)?
                .ok_or("offline, --store must be file:PATH too")?;
            let metrics = file_source("metrics", &args.metrics)?
                .ok_or("offline, --metrics must be file:PATH too")?;
            (store.to_owned(), metrics.to_owned())
        }
    };
    let (checkpoints, upstream_format): (Option<PathBuf>, bool) = match args.checkpoints.as_deref()
    {
        None => (None, false),
        Some("kube" | "upstream") => {
            return Err("offline, --checkpoints must be file:DIR, upstream:DIR or none".into())
        }
        Some(value) => match value.strip_prefix("upstream:") {
            Some("") => {
                return Err("--checkpoints upstream: needs a path, as in upstream:./dir".into())
            }
            Some(dir) => (Some(PathBuf::from(dir)), true),
            None => (
                file_source("checkpoints", value)?.map(Path::to_owned),
                false,
            ),
        },
    };
    let replay = args.upstream.replay();
    let text = |e: ReplayError| e.to_string();
    let before = match &checkpoints {
        Some(dir) => {
            let apart = |flag, other: &Path| {
                checkpoint_dir::check_apart(dir, flag, other).map_err(|e| e.to_string())
            };
            // Standard input is no directory to overlap.
            if store != Path::new("-") {
                apart("store", &store)?;
            }
            apart("metrics", &metrics)?;
            let read = CheckpointDir::read(dir).map_err(|e| e.to_string())?;
            if let Some(warning) = read.foreign_warning(dir) {
                eprintln!("nodescope: warning: {warning}");
            }
            read
        }
        None => CheckpointDir::default(),
    };
    let cluster = crate::input::cluster::recommender_cluster(
        &store,
        &format!("--store file:{}", store.display()),
        &mut |warning| eprintln!("nodescope: warning: {warning}"),
    )
    .map_err(|e| e.to_string())?;
    // Read a group of files at a time: memory does not grow with the
    // number of recorded files.
    let recording = Recording::scan(&metrics).map_err(text)?;
    let history = replay.restore(&before).map_err(text)?;
    let mut failed = None;
    let intervals = recording
        .intervals()
        .map_while(|group| group.map_err(|e| failed = Some(e)).ok())
        .flatten();
    let outcome = replay.run(&cluster, history, intervals);
    if let Some(error) = failed {
        return Err(text(error));
    }
    match &checkpoints {
        Some(dir) if upstream_format => replay::write_upstream_checkpoints(
            dir,
            &before,
            &replay.model.history,
            &outcome.history,
            recording.last(),
        )
        .map(drop)
        .map_err(text)?,
        Some(dir) => replay::write_checkpoints(dir, &before, &outcome.history, recording.last())
            .map(drop)
            .map_err(text)?,
        None => {}
    }
    let rendered = match args.output {
        Output::Json => super::list::json(&outcome.vpas)?,
        Output::Yaml => super::list::yaml(&outcome.vpas)?,
    };
    out.write_all(rendered.as_bytes())
        .map_err(|e| format!("writing the output: {e}"))?;
    tracing::info!(
        intervals = outcome.intervals,
        samples = outcome.ingested.samples,
        dropped = outcome.ingested.dropped,
        ooms = outcome.ingested.ooms,
        keys = outcome.history.keys(),
        "replayed"
    );
    Ok(ExitCode::SUCCESS)
}

/// Why the cluster loop could not run.
#[derive(Debug, thiserror::Error)]
pub enum RecommendError {
    #[error("{0}")]
    Flags(String),
    #[error(transparent)]
    Client(super::cluster::ClusterError),
    #[error("cannot listen on {addr} (--address): {cause}")]
    Bind {
        addr: std::net::SocketAddr,
        cause: std::io::Error,
    },
    #[error(transparent)]
    Loop(#[from] crate::recommend::cluster::ClusterError),
}

/// Against the cluster: /metrics, /healthz and /readyz on `--address`, and the loop
/// until SIGTERM or Ctrl-C.
///
/// # Errors
/// Flags that need a cluster set to files, no cluster, a busy address, or
/// a Lease that cannot be read.
pub async fn run_cluster(args: &RecommendArgs) -> Result<(), RecommendError> {
    if args.once {
        return Err(RecommendError::Flags(
            "--once replays files: give --store file:DIR and --metrics file:DIR (or --demo)".into(),
        ));
    }
    let checkpoints =
        match args.checkpoints.as_deref() {
            None | Some("kube") => crate::recommend::cluster::CheckpointFormat::Nodescope,
            Some("upstream") => crate::recommend::cluster::CheckpointFormat::Upstream,
            Some(_) => return Err(RecommendError::Flags(
                "against a cluster, --checkpoints is kube (RecommendationCheckpoint objects) or \
                 upstream (VerticalPodAutoscalerCheckpoint objects)"
                    .into(),
            )),
        };
    if args.store != "kube" {
        return Err(RecommendError::Flags(format!(
            "--store {:?}: expected kube or file:PATH",
            args.store
        )));
    }
    let source = match file_source("metrics", &args.metrics).map_err(RecommendError::Flags)? {
        None => crate::recommend::cluster::MetricsSource::Api,
        Some(path) => crate::recommend::cluster::MetricsSource::Recorded(
            replay::load_metrics(path)
                .map_err(|e| RecommendError::Flags(e.to_string()))?
                .into(),
        ),
    };
    let reporter = args
        .report
        .config(
            "recommender",
            &super::report_flags::instance(&args.running.instance, "nodescope-recommender"),
            &["vpa-node-scope"],
        )
        .map_err(RecommendError::Flags)?;
    let connection = args
        .cluster
        .connect(super::cluster::Retry::Default)
        .await
        .map_err(RecommendError::Client)?;
    let client = connection.client.clone();
    let reports = reporter
        .map(|r| crate::features::reporter::spawn(&client, &r))
        .unwrap_or_default();
    let lease = crate::leader::LeaseConfig {
        namespace: args.running.lease_namespace.clone(),
        name: args.running.lease_name.clone(),
        duration: args.running.lease_duration,
    };
    let metrics = crate::metrics::RecommenderMetrics::new(&lease.lease());
    let listener = tokio::net::TcpListener::bind(args.running.address)
        .await
        .map_err(|cause| RecommendError::Bind {
            addr: args.running.address,
            cause,
        })?;
    let server = tokio::spawn(crate::server::serve_plain(
        listener,
        crate::server::controller_router(metrics.registry().clone(), metrics.http().clone()),
        crate::server::ConnectionOptions::default(),
        std::future::pending(),
    ));
    let config = crate::recommend::cluster::LoopConfig {
        metrics: source,
        replay: args.upstream.replay(),
        interval: args.upstream.recommender_interval,
        checkpoint_interval: args.running.checkpoint_interval,
        checkpoints,
        lease,
        instance: args.running.instance.clone(),
    };
    let shutdown = super::update_list::shutdown("last checkpoint, then the Lease is released");
    let result = crate::recommend::cluster::run(client, config, metrics, shutdown).await;
    server.abort();
    reports.iter().for_each(tokio::task::JoinHandle::abort);
    // A failure of the client in kubectl's words; the loop's own as it
    // says them.
    result.map_err(|e| match super::cluster::explain(&e, &connection.target) {
        super::cluster::ClusterError::Other(_) => RecommendError::Loop(e),
        words => RecommendError::Client(words),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        upstream: UpstreamFlags,
    }

    #[test]
    fn the_flags_defaults_are_the_librarys_upstream_defaults() {
        let flags = Flags::try_parse_from(["recommend"]).map(|f| f.upstream.replay());
        assert_eq!(flags.ok(), Some(Replay::defaults()));
    }
}
