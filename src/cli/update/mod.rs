//! `nodescope update`: the per-node updater. `--plan` prints what one pass
//! would do and changes nothing (offline from `--store file:DIR`, or from
//! the cluster); without it, the controller runs against the cluster.
//! Every flag upstream's updater has for these numbers is here under the
//! same name and default.

mod list;

use crate::cli::flags::{self, feature_gates, parse_duration, vpa_namespaces};
use crate::cli::kubectl::table::{none_found, write_table};
use crate::cli::kubectl::{self, cluster, scope};
use crate::cli::running::{self, report};
use crate::cli::MissingNode;
use crate::store::Snapshot;
use crate::update::cluster::LoopConfig;
use crate::update::metrics::UpdaterMetrics;
use crate::update::priority::PriorityConfig;
use crate::update::{plan_pass, Memory, PodPlan, UpdateConfig, Workloads};
use clap::Args;
use serde_json::Value;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

/// `nodescope update`.
#[derive(Debug, Args, Clone)]
pub struct UpdateArgs {
    /// Where VPAs, DaemonSets, Nodes, Pods and LimitRanges come from:
    /// `kube` (the cluster) or `file:PATH` (manifests, pods with their
    /// status; `file:-` reads standard input).
    #[arg(long, default_value = "kube")]
    pub store: String,
    #[command(flatten)]
    pub cluster: cluster::ClusterFlags,
    /// With `--plan`, which pods are shown: every namespace by default.
    /// The pass is planned over every pod all the same (a DaemonSet's
    /// disruption budget counts them all), so a shown pod's action is the
    /// one the updater would take.
    #[command(flatten)]
    pub scope: scope::PodScope,
    /// Print what one pass would do, change nothing, and exit.
    #[arg(long)]
    pub plan: bool,
    /// Output of `--plan`.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: PlanOutput,
    /// With `--plan`: exit 1 when the pass would resize or evict a pod, 0
    /// when it would not, as `git diff --exit-code`; without it, 0 either
    /// way. Deferred pods are not actions.
    #[arg(long, requires = "plan")]
    pub exit_code: bool,
    /// How often a pass runs.
    #[arg(long, default_value = "1m", value_parser = flags::interval)]
    pub updater_interval: Duration,
    #[command(flatten)]
    pub namespaces: vpa_namespaces::NamespaceFlags,
    /// A DaemonSet with fewer live pods is never disrupted.
    #[arg(long, default_value_t = 2, value_parser = flags::count, allow_negative_numbers = true)]
    pub min_replicas: usize,
    /// The fraction of a DaemonSet's pods that may be disrupted at once;
    /// pods that are not Ready count as disrupted.
    #[arg(long, default_value_t = 0.5, value_parser = flags::fraction, allow_negative_numbers = true)]
    pub eviction_tolerance: f64,
    /// `--kube-api-qps`, `--kube-api-burst`: the pace of every request,
    /// and how many writes of a pass are in flight at once.
    #[command(flatten)]
    pub pace: crate::pace::PaceFlags,
    /// Evictions per second (0 or less: no limit).
    #[arg(long, default_value_t = -1.0, value_parser = flags::finite, allow_negative_numbers = true)]
    pub eviction_rate_limit: f64,
    /// Evictions allowed at once above the rate.
    #[arg(long, default_value_t = 1, value_parser = flags::count_u32, allow_negative_numbers = true)]
    pub eviction_rate_burst: u32,
    /// Resize in place without counting against --eviction-tolerance when
    /// every container may be resized without a restart.
    #[arg(long)]
    pub in_place_skip_disruption_budget: bool,
    /// A pod within its recommendation is updated only when the change is
    /// at least this fraction (upstream's resource diff), in (0, 1].
    #[arg(long, default_value_t = 0.1, value_parser = flags::fraction, allow_negative_numbers = true)]
    pub pod_update_threshold: f64,
    /// ...and only when it is older than this.
    #[arg(long, default_value = "12h", value_parser = parse_duration)]
    pub in_recommendation_bounds_eviction_lifetime_threshold: Duration,
    /// A container OOM-killed sooner than this after it started makes its
    /// pod updated at once.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub evict_after_oom_threshold: Duration,
    /// Alpha features, as upstream's `--feature-gates`: `PerVPAConfig=true`
    /// lets a VPA's `updatePolicy.evictAfterOOMSeconds` replace
    /// `--evict-after-oom-threshold` for its pods; `CPUStartupBoost=true`
    /// unboosts boosted pods in place once their `durationSeconds` has
    /// passed.
    #[arg(long, default_value = "", value_parser = feature_gates::parse)]
    pub feature_gates: feature_gates::FeatureGates,
    /// Evict only while nodescope's webhook renews its status Lease: an
    /// evicted DaemonSet pod comes back through admission.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub use_admission_controller_status: bool,
    /// The webhook's status Lease (`serve --status-lease-name`).
    #[arg(long, default_value = "nodescope-webhook")]
    pub admission_controller_status_lease_name: String,
    /// Its namespace.
    #[arg(long, env = "POD_NAMESPACE", default_value = "nodescope-system")]
    pub admission_controller_status_lease_namespace: String,
    /// How old the webhook's last renewal may be.
    #[arg(long, default_value = "1m", value_parser = flags::interval)]
    pub admission_controller_status_lease_timeout: Duration,
    /// As the webhook's flag: what a pod gets when its group is missing.
    #[arg(long, value_enum, default_value = "aggregate")]
    pub missing_node_recommendation: MissingNode,
    /// This replica's name: the Lease holder's identity (the pod name).
    #[arg(long, env = "POD_NAME", default_value = "nodescope-updater")]
    pub instance: String,
    // The Lease flags take upstream's leader election names; the hidden
    // aliases are nodescope's earlier names, which its other controllers
    // keep. The defaults are nodescope's own, so that this Lease is never
    // upstream's updater's (`kube-system/vpa-updater`) when both run.
    /// The namespace of the updater's own Lease.
    #[arg(
        long = "leader-elect-resource-namespace",
        value_name = "LEADER_ELECT_RESOURCE_NAMESPACE",
        alias = "lease-namespace",
        env = "POD_NAMESPACE",
        default_value = "nodescope-system"
    )]
    pub lease_namespace: String,
    /// The updater's Lease.
    #[arg(
        long = "leader-elect-resource-name",
        value_name = "LEADER_ELECT_RESOURCE_NAME",
        alias = "lease-name",
        default_value = "nodescope-updater"
    )]
    pub lease_name: String,
    /// How long a dead leader's Lease lasts (at least 2s).
    #[arg(long = "leader-elect-lease-duration", value_name = "LEADER_ELECT_LEASE_DURATION", alias = "lease-duration", default_value = "15s", value_parser = flags::lease_duration)]
    pub lease_duration: Duration,
    /// Where /metrics, /healthz and /readyz are served (plain HTTP).
    // Upstream's name. The hidden alias is nodescope's earlier name, kept
    // so that Deployments written for it still start.
    #[arg(long = "address", alias = "metrics-listen", default_value = "0.0.0.0:8943", value_parser = flags::listen_address)]
    pub address: std::net::SocketAddr,
    /// `--log-format`, `--log-level`.
    #[command(flatten)]
    pub logging: crate::cli::running::LogFlags,
    /// What this replica observes of `vpa-node-scope`, reported in its
    /// status.uses (not with --plan).
    #[command(flatten)]
    pub report: report::ReportFlags,
}

impl UpdateArgs {
    /// The pass's numbers.
    #[must_use]
    pub fn config(&self) -> UpdateConfig {
        let secs = |d: Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
        UpdateConfig {
            priority: PriorityConfig {
                min_change_priority: self.pod_update_threshold,
                pod_lifetime_update_threshold: secs(
                    self.in_recommendation_bounds_eviction_lifetime_threshold,
                ),
                evict_after_oom_threshold: secs(self.evict_after_oom_threshold),
            },
            min_replicas: self.min_replicas,
            eviction_tolerance: self.eviction_tolerance,
            in_place_skip_disruption_budget: self.in_place_skip_disruption_budget,
            missing: self.missing_node_recommendation.into(),
            per_vpa_config: self.feature_gates.per_vpa_config,
            namespaces: self.namespaces.namespaces(),
            startup_boost: self.feature_gates.cpu_startup_boost,
        }
    }

    /// Whether this runs without a cluster.
    #[must_use]
    pub fn is_offline(&self) -> bool {
        self.store.starts_with("file:")
    }
}

/// Plans one pass over `objects` (everything the store needs plus Pods and
/// DaemonSets), as of `now`.
///
/// # Errors
/// Every Pod or DaemonSet that cannot be read, and every object the store
/// left out, each naming itself.
pub fn plan_objects(
    objects: Vec<Value>,
    config: &UpdateConfig,
    webhook_fresh: bool,
    now: i64,
) -> Result<Vec<PodPlan>, String> {
    let (workloads, rest) = Workloads::split(objects).map_err(|e| e.join("\n"))?;
    let snapshot = Snapshot::build(rest);
    if !snapshot.problems.is_empty() {
        let words: Vec<String> = snapshot.problems.iter().map(ToString::to_string).collect();
        return Err(words.join("\n"));
    }
    let mut memory = Memory::default();
    Ok(plan_pass(
        &snapshot,
        &workloads,
        config,
        &mut memory,
        webhook_fresh,
        now,
    ))
}

/// `update --plan --store file:DIR`: prints the plan; exit 0 (or, with
/// `--exit-code`, 1 when it acts), or 2 on bad input.
///
/// # Errors
/// Unreadable input, with the file or object and why.
pub fn run_offline(args: &UpdateArgs, out: &mut impl Write) -> Result<ExitCode, String> {
    args.namespaces.check()?;
    if !args.plan {
        return Err(
            "offline (--store file:), only --plan runs: a pass needs a cluster to act on".into(),
        );
    }
    let path = crate::cli::flags::store_file(&args.store)?;
    let state = crate::input::cluster::updater_state(
        path,
        &format!("--store {}", args.store),
        (!args.scope.is_everything())
            .then_some(&|namespace, labels| args.scope.selects_labelled(namespace, labels)),
        &mut |warning| eprintln!("nodescope: warning: {warning}"),
    )
    .map_err(|e| e.to_string())?;
    // Offline there is no webhook Lease to read: the plan shows what a pass
    // would do with a healthy webhook.
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let plans = plan_pass(
        &state.snapshot,
        &state.workloads,
        &args.config(),
        &mut Memory::default(),
        true,
        now,
    );
    let plans = match &state.selected {
        Some(selected) => shown(plans, selected),
        None => plans,
    };
    print_plan(args, &plans, out)?;
    let code = plan_code(args, &plans);
    // The command ends here: freeing every pod and plan one allocation at
    // a time took a tenth of a run on 100,000 pods, and the OS takes the
    // memory back at once.
    std::mem::forget((state, plans));
    Ok(code)
}

/// Prints the plan; a table with no row is kubectl's `No resources found`
/// on stderr instead (a List stays a List, empty), so that a selection or
/// a store that plans no pod never reads as a plan where nothing is to do.
fn print_plan(args: &UpdateArgs, plans: &[PodPlan], out: &mut impl Write) -> Result<(), String> {
    if plans.is_empty() && matches!(args.output, PlanOutput::Table | PlanOutput::Wide) {
        eprintln!("{}", none_found(args.scope.namespace.as_deref()));
        return Ok(());
    }
    render(plans, args.output, out).map_err(|e| e.to_string())
}

/// The plans of the pods `-n` and `-l` chose (`namespace/name`).
fn shown(plans: Vec<PodPlan>, selected: &std::collections::HashSet<String>) -> Vec<PodPlan> {
    plans
        .into_iter()
        .filter(|p| selected.contains(&format!("{}/{}", p.namespace, p.pod)))
        .collect()
}

/// The exit status of `--plan`: with `--exit-code`, 1 when some pod would
/// be resized or evicted.
fn plan_code(args: &UpdateArgs, plans: &[PodPlan]) -> ExitCode {
    if args.exit_code && plans.iter().any(|p| p.action.acts()) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// `-o` of `update --plan`: kubectl's table, `wide` with the message of
/// each row, or the List as JSON or YAML.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PlanOutput {
    /// One row per pod; REASON in a few words.
    Table,
    /// The table with a MESSAGE column: why, in a sentence.
    Wide,
    /// A `v1` List of the pods' plans, as JSON.
    Json,
    /// The same List as YAML.
    Yaml,
}

/// Writes the plan as a table (with `wide`, each row's message too), or as
/// a List ([`kubectl::list`]) in JSON or YAML.
///
/// # Errors
/// When `out` fails.
pub fn render(plans: &[PodPlan], output: PlanOutput, out: &mut impl Write) -> std::io::Result<()> {
    let row = |p: &PodPlan| {
        [
            format!("{}/{}", p.namespace, p.pod),
            p.node.as_deref().unwrap_or("-").to_owned(),
            p.scope_value.as_deref().unwrap_or("-").to_owned(),
            p.action.as_str().to_owned(),
            p.reason.to_string(),
            change(p),
        ]
    };
    const HEADERS: [&str; 6] = [
        "POD",
        "NODE",
        "SCOPE VALUE",
        "ACTION",
        "REASON",
        "CURRENT → DESIRED",
    ];
    match output {
        PlanOutput::Json => {
            let text = kubectl::list::json(plans).map_err(std::io::Error::other)?;
            write!(out, "{text}")
        }
        PlanOutput::Yaml => {
            let text = kubectl::list::yaml(plans).map_err(std::io::Error::other)?;
            write!(out, "{text}")
        }
        PlanOutput::Table => write_table(
            || std::iter::once(HEADERS.map(str::to_owned)).chain(plans.iter().map(row)),
            out,
        ),
        PlanOutput::Wide => {
            // The sentence last, as the widest column.
            let [a, b, c, d, e, f] = HEADERS;
            let headers = [a, b, c, d, e, f, "MESSAGE"].map(str::to_owned);
            write_table(
                || {
                    std::iter::once(headers.clone()).chain(plans.iter().map(|p| {
                        let [a, b, c, d, e, f] = row(p);
                        [a, b, c, d, e, f, p.message.to_string()]
                    }))
                },
                out,
            )
        }
    }
}

/// `agent: cpu 100m→150m, memory 128Mi→256Mi (limits cpu 200m→300m)`.
fn change(p: &PodPlan) -> String {
    let mut parts = Vec::new();
    for c in &p.containers {
        let Some(desired) = &c.desired else { continue };
        let diff = |cur: &crate::pods::Texts, want: &crate::pods::Texts| {
            want.iter()
                .filter(|(r, v)| cur.get(r) != Some(*v))
                .map(|(r, v)| format!("{r} {}→{v}", cur.get(r).unwrap_or("-")))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let requests = diff(&c.current.requests, &desired.requests);
        let limits = diff(&c.current.limits, &desired.limits);
        let mut text = format!("{}: {requests}", c.name);
        if !limits.is_empty() {
            text.push_str(&format!(" (limits {limits})"));
        }
        parts.push(text);
    }
    if parts.is_empty() || !p.action.acts() {
        "-".into()
    } else {
        parts.join("; ")
    }
}

/// Against the cluster: `--plan` lists once and prints; otherwise the loop
/// until SIGTERM, with /metrics, /healthz and /readyz.
///
/// # Errors
/// No cluster, a busy address, or a Lease that cannot be read.
pub async fn run_cluster(args: &UpdateArgs) -> Result<ExitCode, String> {
    if args.store != "kube" {
        return Err(format!(
            "--store {:?}: expected kube or file:PATH",
            args.store
        ));
    }
    if !args.plan && !args.scope.is_everything() {
        return Err("-n and -l choose the pods --plan shows; the updater itself acts on every pod of the scoped VerticalPodAutoscalers".into());
    }
    // Checked before connecting, as every flag is.
    args.namespaces.check()?;
    let report = if args.plan {
        None
    } else {
        args.report.config(
            "updater",
            &report::instance(&args.instance, "nodescope-updater"),
            &["vpa-node-scope"],
        )?
    };
    // A PodDisruptionBudget refuses an eviction with 429 and Retry-After;
    // the client's default retry would wait on it for minutes, holding the
    // pass. The refusal is an answer: it is reported, and the next pass
    // tries again.
    let connection = args
        .cluster
        .connect_paced(cluster::Retry::Off, &args.pace)
        .await
        .map_err(|e| e.to_string())?;
    let client = connection.client.clone();
    if args.plan {
        let namespaces = args.namespaces.namespaces();
        let objects = list::gather(&connection, namespaces.only())
            .await
            .map_err(|e| e.to_string())?;
        let selected = objects
            .iter()
            .filter(|o| o["kind"] == "Pod" && args.scope.selects(o))
            .map(|o| {
                format!(
                    "{}/{}",
                    crate::json::str_at(o, "/metadata/namespace"),
                    crate::json::str_at(o, "/metadata/name")
                )
            })
            .collect();
        let fresh = !args.use_admission_controller_status
            || list::webhook_fresh(
                &client,
                &args.admission_controller_status_lease_namespace,
                &args.admission_controller_status_lease_name,
                args.admission_controller_status_lease_timeout,
            )
            .await;
        let now = k8s_openapi::jiff::Timestamp::now().as_second();
        let plans = shown(
            plan_objects(objects, &args.config(), fresh, now)?,
            &selected,
        );
        print_plan(args, &plans, &mut crate::cli::out::stdout())?;
        return Ok(plan_code(args, &plans));
    }
    let reports = report
        .map(|r| crate::features::reporter::spawn(&client, &r))
        .unwrap_or_default();
    let metrics = UpdaterMetrics::new();
    let ready = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let render = {
        let metrics = metrics.clone();
        std::sync::Arc::new(move || metrics.render())
    };
    let server = running::serve_probes("--address", args.address, render, ready.clone()).await?;
    let config = LoopConfig {
        update: args.config(),
        interval: args.updater_interval,
        lease: crate::leader::LeaseConfig {
            namespace: args.lease_namespace.clone(),
            name: args.lease_name.clone(),
            duration: args.lease_duration,
        },
        instance: args.instance.clone(),
        use_admission_controller_status: args.use_admission_controller_status,
        status_lease: (
            args.admission_controller_status_lease_namespace.clone(),
            args.admission_controller_status_lease_name.clone(),
        ),
        status_lease_timeout: args.admission_controller_status_lease_timeout,
        eviction_rate: (args.eviction_rate_limit, args.eviction_rate_burst),
        in_flight: args.pace.in_flight(),
    };
    // The Events' own client, so its bucket paces them apart from the
    // writes (update/events.rs).
    let events = args
        .cluster
        .connect_paced(cluster::Retry::Off, &args.pace)
        .await
        .map_err(|e| e.to_string())?
        .client;
    let result = crate::update::cluster::run(
        client,
        events,
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
