//! `nodescope recommend`: the scoped recommender. Offline (`--store file:`
//! and `--metrics file:`) it replays recorded PodMetrics and prints the VPAs
//! with the status it would write; against a cluster it runs the loop of
//! [`crate::recommend::cluster`]. Every flag upstream's recommender has for
//! these numbers is here under the same name and default.

mod demo;
mod flags;

pub use flags::{RunningFlags, UpstreamFlags};

use crate::cli::kubectl::{cluster, list};
use crate::cli::running::{self, report};
use crate::recommend::checkpoint_dir::{self, CheckpointDir};
use crate::recommend::recording::{Recording, Replayed};
use crate::recommend::replay::{self, ReplayError};
use clap::{Args, ValueEnum};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

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
    pub report: report::ReportFlags,
    #[command(flatten)]
    pub cluster: cluster::ClusterFlags,
}

/// `-o`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Yaml,
    Json,
}

/// `file:PATH` → PATH.
fn file_source<'a>(flag: &str, value: &'a str) -> Result<Option<&'a Path>, String> {
    match value.strip_prefix("file:") {
        Some("") => Err(format!("--{flag} file: needs a path, as in file:./dir")),
        Some(path) => Ok(Some(Path::new(path))),
        None if value == "kube" => Ok(None),
        None if value == "none" && flag == "checkpoints" => Ok(None),
        None if flag == "checkpoints" => Err(format!(
            "--checkpoints {value:?}: expected kube, upstream, file:DIR, upstream:DIR or none"
        )),
        None => Err(format!("--{flag} {value:?}: expected kube or file:PATH")),
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
    args.upstream.namespaces.check()?;
    let demo = args.demo.then(demo::recommend_data).transpose()?;
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
            let read = CheckpointDir::read(dir, &args.upstream.recommender_name)
                .map_err(|e| e.to_string())?;
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
            &replay.recommender_name,
        )
        .map(drop)
        .map_err(text)?,
        Some(dir) => replay::write_checkpoints(
            dir,
            &before,
            &outcome.history,
            recording.last(),
            &replay.recommender_name,
        )
        .map(drop)
        .map_err(text)?,
        None => {}
    }
    let rendered = match args.output {
        Output::Json => list::json(&outcome.vpas)?,
        Output::Yaml => list::yaml(&outcome.vpas)?,
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
    Client(cluster::ClusterError),
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
    args.upstream
        .namespaces
        .check()
        .map_err(RecommendError::Flags)?;
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
        // Scanned once now (every file read, so a bad recording fails at
        // start), then read a group of files at a time as intervals pass.
        Some(path) => crate::recommend::cluster::MetricsSource::Recorded(Replayed::new(
            Recording::scan(path).map_err(|e| RecommendError::Flags(e.to_string()))?,
        )),
    };
    let reporter = args
        .report
        .config(
            "recommender",
            &report::instance(&args.running.instance, "nodescope-recommender"),
            &["vpa-node-scope"],
        )
        .map_err(RecommendError::Flags)?;
    let connection = args
        .cluster
        .connect(cluster::Retry::Default)
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
    let shutdown = running::shutdown("last checkpoint, then the Lease is released");
    let result = crate::recommend::cluster::run(client, config, metrics, shutdown).await;
    server.abort();
    reports.iter().for_each(tokio::task::JoinHandle::abort);
    // A failure of the client in kubectl's words; the loop's own as it
    // says them.
    result.map_err(|e| match cluster::explain(&e, &connection.target) {
        cluster::ClusterError::Other(_) => RecommendError::Loop(e),
        words => RecommendError::Client(words),
    })
}
