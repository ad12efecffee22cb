//! `nodescope balloon controller`: the typed flags of the balloon
//! controller and its start (probes, metrics, the loop until SIGTERM).

use crate::balloon::cluster::LoopConfig;
use crate::balloon::metrics::BalloonMetrics;
use crate::balloon::{BalloonConfig, DesiredSize, Fraction};
use crate::cli::flags;
use crate::cli::kubectl::cluster;
use crate::cli::running::{self, report};
use clap::Args;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// `nodescope balloon controller`.
#[derive(Debug, Args, Clone)]
pub struct ControllerArgs {
    /// The usable fraction of a node whose annotations set no size.
    #[arg(long, value_parser = Fraction::parse)]
    pub default_usable_fraction: Option<Fraction>,
    /// How often a pass runs.
    #[arg(long, default_value = "10s", value_parser = flags::interval)]
    pub interval: Duration,
    /// This replica's name: the Lease holder's identity (the pod name).
    #[arg(long, env = "POD_NAME", default_value = "nodescope-balloon")]
    pub instance: String,
    /// The namespace of the controller's Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "kube-system")]
    pub lease_namespace: String,
    /// The controller's Lease.
    #[arg(long, default_value = "nodescope-balloon")]
    pub lease_name: String,
    /// How long a dead leader's Lease lasts (at least 2s).
    #[arg(long, default_value = "15s", value_parser = flags::lease_duration)]
    pub lease_duration: Duration,
    /// Where /metrics, /healthz and /readyz are served (plain HTTP).
    #[arg(long, default_value = "0.0.0.0:8944")]
    pub metrics_listen: std::net::SocketAddr,
    /// `--log-format`, `--log-level`.
    #[command(flatten)]
    pub logging: crate::cli::running::LogFlags,
    /// What this replica observes of `balloon-pods`, reported in its
    /// status.uses.
    #[command(flatten)]
    pub report: report::ReportFlags,
    /// `--kube-api-qps`, `--kube-api-burst`: the pace of every request,
    /// and how many resizes of a pass are in flight at once.
    #[command(flatten)]
    pub pace: crate::pace::PaceFlags,
    #[command(flatten)]
    pub cluster: cluster::ClusterFlags,
}

/// Runs the controller until SIGTERM, with /metrics, /healthz and /readyz.
///
/// # Errors
/// No cluster, a busy address, or a Lease that cannot be read.
pub async fn run(args: &ControllerArgs) -> Result<ExitCode, String> {
    let reporter = args.report.config(
        "balloon-controller",
        &report::instance(&args.instance, "nodescope-balloon"),
        &["balloon-pods"],
    )?;
    // kube's default client retries 429s for minutes, which would hold a
    // pass; a refusal is an answer.
    let connection = args
        .cluster
        .connect_paced(cluster::Retry::Off, &args.pace)
        .await
        .map_err(|e| e.to_string())?;
    let client = connection.client.clone();
    let reports = reporter
        .map(|r| crate::features::reporter::spawn(&client, &r))
        .unwrap_or_default();
    let metrics = BalloonMetrics::new();
    let ready = Arc::new(AtomicBool::new(false));
    let render = {
        let metrics = metrics.clone();
        Arc::new(move || metrics.render())
    };
    let server = running::serve_probes(
        "--metrics-listen",
        args.metrics_listen,
        render,
        ready.clone(),
    )
    .await?;
    let config = LoopConfig {
        balloon: BalloonConfig {
            default: DesiredSize {
                fraction: args.default_usable_fraction,
                ..DesiredSize::default()
            },
        },
        interval: args.interval,
        lease: crate::leader::LeaseConfig {
            namespace: args.lease_namespace.clone(),
            name: args.lease_name.clone(),
            duration: args.lease_duration,
        },
        instance: args.instance.clone(),
        in_flight: args.pace.in_flight(),
    };
    let result = crate::balloon::cluster::run(
        client,
        config,
        metrics,
        ready,
        running::shutdown("the Lease is released"),
    )
    .await;
    server.abort();
    reports.iter().for_each(tokio::task::JoinHandle::abort);
    result.map_err(|e| cluster::explain(&e, &connection.target).to_string())?;
    Ok(ExitCode::SUCCESS)
}
