//! `nodescope features` ([`list`]), `features uses NAME` and
//! `features cleanup NAME` ([`cleanup`]): the Features,
//! what keeps one from turning off and what turning it off clears, for
//! people. From the cluster, or offline from manifests: the same use
//! discovery the controller runs ([`crate::features::find_uses`]) over the
//! objects given with `-f`.

mod cleanup;
mod list;

use crate::apiserver::kinds::Kinds;
use crate::apiserver::review::group_version;
use crate::cli::dry_run::{check_state, is_param_kind, is_state, load_policies, RunError};
use crate::cli::flags;
use crate::cli::kubectl::table::table;
use crate::cli::kubectl::{self, cluster};
use crate::features::cluster::{read_features, read_view};
use crate::features::{find_uses, Listed, PolicyUses};
use crate::input::sources::{self, Inputs};
use crate::input::{InputError, SourceDocument};
use crate::json::str_at;
use crate::policy::PolicySet;
use crate::store::Snapshot;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// `nodescope features`.
#[derive(Debug, Args, Clone)]
#[command(args_conflicts_with_subcommands = true)]
pub struct FeaturesArgs {
    #[command(subcommand)]
    pub command: Option<FeaturesCommand>,
    #[command(flatten)]
    pub source: Source,
    /// Output format of the list.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: UsesFormat,
}

#[derive(Debug, Subcommand, Clone)]
pub enum FeaturesCommand {
    /// Every object that keeps a Feature from turning off, with the gating
    /// policy's message that says why. Exit 0: none; 1: some.
    Uses(UsesArgs),
    /// The patches that clear what the Feature declares in spec.cleanup from
    /// every object that uses it, as the controller sends them while the
    /// Feature is TurningOff. Exit 0: none; 1: some.
    Cleanup(cleanup::CleanupArgs),
    /// Run the lifecycle controller against the cluster of the kubeconfig
    /// (or the pod's service account): `desired: Disabled` turns a Feature
    /// `TurningOff`, then `Off` once nothing uses it and the settle time has
    /// passed; `desired: Enabled` turns it `TurningOn`, then `On`.
    Controller(ControllerArgs),
}

/// `nodescope features controller`.
#[derive(Debug, Args, Clone)]
pub struct ControllerArgs {
    /// How long a Feature stays TurningOff at least, so that webhook
    /// replicas whose watch lags have stopped admitting new uses (`30s`,
    /// `500ms`, `2m`).
    #[arg(long, default_value = "30s", value_parser = parse_duration, env = "NODESCOPE_SETTLE")]
    pub settle: std::time::Duration,
    /// How often every Feature is re-evaluated.
    #[arg(long, default_value = "10s", value_parser = flags::interval, env = "NODESCOPE_PERIOD")]
    pub period: std::time::Duration,
    /// The least time between two passes started by watch events (each
    /// pass lists every object the gating policies match).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub min_interval: std::time::Duration,
    /// This replica's name in Events; the pod name in a cluster.
    #[arg(long, env = "POD_NAME", default_value = "nodescope-features")]
    pub instance: String,
    /// The namespace of the Lease the replicas elect their leader on.
    #[arg(long, env = "POD_NAMESPACE", default_value = "nodescope-system")]
    pub lease_namespace: String,
    /// The Lease's name.
    #[arg(long, default_value = "nodescope-features")]
    pub lease_name: String,
    /// How long the leader's Lease lasts after its last renewal (whole
    /// seconds, at least 2s; renewed a third of it before expiry). A leader
    /// stopped by SIGTERM releases the Lease and another replica takes over
    /// within 1s. After a crash (SIGKILL, a lost node) another takes over
    /// between this duration and this duration + 2s after the dead
    /// leader's last renewal, so at most this + 2s after the crash.
    #[arg(long, default_value = "15s", value_parser = flags::lease_duration)]
    pub lease_duration: std::time::Duration,
    /// `--log-format`, `--log-level`.
    #[command(flatten)]
    pub logging: crate::cli::running::LogFlags,
    /// Where /metrics, /healthz and /readyz are served (plain HTTP).
    #[arg(long, env = "NODESCOPE_METRICS_LISTEN", default_value = "0.0.0.0:9090")]
    pub metrics_listen: std::net::SocketAddr,
    #[command(flatten)]
    pub cluster: cluster::ClusterFlags,
    /// Create the Features nodescope owns (kube-system/vpa-node-scope and
    /// kube-system/balloon-pods, desired Enabled) when absent, on becoming
    /// leader; one that exists is never changed.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub announce: bool,
}

pub use crate::cli::flags::parse_duration;

/// `nodescope features uses`.
#[derive(Debug, Args, Clone)]
pub struct UsesArgs {
    /// The Feature's name.
    pub name: String,
    #[command(flatten)]
    pub namespace: FeatureNamespace,
    #[command(flatten)]
    pub source: Source,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: UsesFormat,
}

/// Which namespace the Feature NAME is looked up in: `-n`, or with `-A`
/// every namespace (each Feature of that name, one item each of the List of
/// `-o json|yaml`).
#[derive(Debug, Args, Clone)]
pub struct FeatureNamespace {
    /// The Feature's namespace.
    #[arg(short = 'n', long, default_value = "kube-system")]
    pub namespace: String,
    /// The Features of that name in every namespace.
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    pub all_namespaces: bool,
}

/// Where the Features, the policies and the objects come from.
#[derive(Debug, Args, Clone)]
pub struct Source {
    /// The cluster's objects, as manifests (a file, a directory or `-`).
    /// Repeatable. Without -f and --params, the cluster of the kubeconfig
    /// is read instead.
    #[arg(short = 'f', long = "filename")]
    pub files: Vec<PathBuf>,
    /// Features (and the Namespaces and ConfigMaps the policies read).
    /// Repeatable.
    #[arg(long)]
    pub params: Vec<PathBuf>,
    /// The gating policies; the bundle built into this binary when omitted.
    #[arg(long)]
    pub policies: Option<PathBuf>,
    /// Without -f and --params: the cluster.
    #[command(flatten)]
    pub cluster: cluster::ClusterFlags,
}

/// `-o` of `features uses`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum UsesFormat {
    Table,
    Json,
    Yaml,
}

/// A report as `-o json` (pretty, with a final newline) or `-o yaml`.
pub(crate) fn render(report: &Value, output: UsesFormat) -> Result<String, RunError> {
    if output == UsesFormat::Yaml {
        serde_saphyr::to_string(report).map_err(|e| RunError::Internal(e.to_string()))
    } else {
        serde_json::to_string_pretty(report)
            .map(|t| t + "\n")
            .map_err(|e| RunError::Internal(e.to_string()))
    }
}

/// What a source holds once read.
pub(crate) struct Loaded {
    pub(crate) policies: PolicySet,
    pub(crate) features: Vec<Value>,
    pub(crate) listed: Vec<Listed>,
    pub(crate) inputs: Snapshot,
}

/// [`load`] for a command that looks through objects (`uses`, `cleanup`):
/// offline, Features alone (`--params`) would report nothing in use, which
/// reads as all clear.
///
/// # Errors
/// `--params` without `-f` (exit 2), and what [`load`] returns.
pub(crate) fn load_with_objects(source: &Source, command: &str) -> Result<Loaded, RunError> {
    if source.files.is_empty() && !source.params.is_empty() {
        return Err(InputError::Usage(format!(
            "features {command}: no objects to look through: give the cluster's objects with -f (a file, a directory or -); --params gives only the Features and the state the policies read"
        ))
        .into());
    }
    load(source)
}

/// Reads the Features, the policies and the objects: from the cluster, or
/// offline from `--params` and `-f`. `-f` is read as `dry-run` reads it
/// ([`Inputs::each`], a file or a piece of one at a time) in two passes:
/// the first learns the kinds, refuses an object given twice and keeps the
/// Features; the second keeps only what the Features' gating policies
/// match or their `spec.cleanup` names, and the state the policies read,
/// so that memory follows what is looked through, not the input's size.
pub(crate) fn load(source: &Source) -> Result<Loaded, RunError> {
    if source.files.is_empty() && source.params.is_empty() {
        return load_cluster(source);
    }
    let name = source
        .policies
        .as_ref()
        .map(|p| format!("--policies {}", p.display()))
        .unwrap_or_default();
    let (policies, mut state) = load_policies(source.policies.as_deref(), &name)?;
    let mut inputs = Inputs::default();
    let params = inputs.read("--params", &source.params)?;
    let mut kinds = Kinds::default();
    // --params and -f are one cluster: an object is in it once.
    let mut unique = crate::input::objects::Unique::default();
    let mut features: Vec<Value> = Vec::new();
    let mut first = |document: &SourceDocument, kinds: &mut Kinds| -> Result<(), RunError> {
        unique.check(&document.value, &document.location)?;
        kinds
            .learn(&document.value)
            .map_err(|why| InputError::document(&document.location, why))?;
        if is_feature(&document.value) {
            features.push(document.value.clone());
        }
        Ok(())
    };
    for document in &params {
        first(document, &mut kinds)?;
    }
    inputs.each("-f", &source.files, &mut |documents: Vec<
        SourceDocument,
    >| {
        documents.iter().try_for_each(|d| first(d, &mut kinds))
    })?;
    for document in &params {
        check_state(&kinds, document)?;
    }
    let wanted = wanted(&policies, &features);
    state.extend(params.into_iter().map(|d| d.value).filter(is_param_kind));
    let mut listed: BTreeMap<(String, String, String), Listed> = BTreeMap::new();
    let mut second = |document: SourceDocument| -> Result<(), RunError> {
        check_state(&kinds, &document)?;
        let value = document.value;
        let info = kinds
            .lookup(str_at(&value, "/apiVersion"), str_at(&value, "/kind"))
            .map_err(|why| InputError::document(&document.location, why))?;
        let (group, version) = group_version(str_at(&value, "/apiVersion"));
        let looked_through = wanted
            .iter()
            .any(|(g, r)| (g == "*" || g == group) && (r == "*" || *r == info.resource));
        if is_state(&policies, &value) {
            state.push(value.clone());
        }
        if looked_through {
            let key = (group.to_owned(), version.to_owned(), info.resource.clone());
            listed
                .entry(key)
                .or_insert_with(|| Listed {
                    group: group.to_owned(),
                    version: version.to_owned(),
                    resource: info.resource.clone(),
                    namespaced: info.namespaced,
                    objects: Vec::new(),
                })
                .objects
                .push(value);
        }
        Ok(())
    };
    inputs.rewind();
    inputs.each("-f", &source.files, &mut |documents: Vec<
        SourceDocument,
    >| {
        documents.into_iter().try_for_each(&mut second)
    })?;
    Ok(Loaded {
        policies,
        features,
        listed: listed.into_values().collect(),
        inputs: Snapshot::build(state),
    })
}

/// A nodescope Feature.
fn is_feature(value: &Value) -> bool {
    str_at(value, "/kind") == "Feature"
        && group_version(str_at(value, "/apiVersion")).0 == "featureflags.nodescope.dev"
}

/// The `(group, resource)`s worth keeping from `-f`: what the Features'
/// gating policies match (`*` for any), as the controller lists them from
/// the cluster, and what their `spec.cleanup` names (a declaration that
/// does not read is refused later, by the command that follows it).
fn wanted(policies: &PolicySet, features: &[Value]) -> BTreeSet<(String, String)> {
    let mut wanted = BTreeSet::new();
    for feature in features {
        for gate in policies.gating_policies(
            str_at(feature, "/metadata/namespace"),
            str_at(feature, "/metadata/name"),
        ) {
            wanted.extend(gate.resources);
        }
        for rule in crate::features::cleanup::rules(feature).unwrap_or_default() {
            wanted.insert((rule.group, rule.resource));
        }
    }
    wanted
}

/// The cluster of the kubeconfig (or the pod's service account): its
/// Features, gating policies (or `--policies`), the objects they match and
/// its Namespaces, read as the controller reads them.
fn load_cluster(source: &Source) -> Result<Loaded, RunError> {
    let failed = |e: &cluster::ClusterError| -> RunError {
        InputError::Usage(format!(
            "{e} - or give the objects offline with -f and --params"
        ))
        .into()
    };
    let override_policies = match &source.policies {
        Some(path) => Some(load_policies(Some(path), &format!("--policies {}", path.display()))?.0),
        None => None,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| RunError::Internal(format!("starting the async runtime: {e}")))?;
    runtime.block_on(async {
        let connection = source
            .cluster
            .connect(cluster::Retry::Default)
            .await
            .map_err(|e| failed(&e))?;
        let explain = |e: &crate::features::cluster::ClusterError| {
            failed(&cluster::explain(e, &connection.target))
        };
        let client = &connection.client;
        let features = read_features(client).await.map_err(|e| explain(&e))?;
        let view = read_view(client, features).await.map_err(|e| explain(&e))?;
        Ok(Loaded {
            policies: override_policies.unwrap_or(view.policies),
            features: view.features,
            listed: view.listed,
            inputs: view.inputs,
        })
    })
}

pub(crate) fn uses_of(loaded: &Loaded, feature: &Value) -> Result<Vec<PolicyUses>, RunError> {
    find_uses(&loaded.policies, feature, &loaded.listed, &loaded.inputs)
        .map_err(|e| InputError::Usage(e.to_string()).into())
}

/// Runs `nodescope features [uses]`.
///
/// # Errors
/// Bad input (exit 2), or output that cannot be written (exit 3).
pub fn run_features(args: &FeaturesArgs) -> Result<ExitCode, RunError> {
    match &args.command {
        Some(FeaturesCommand::Uses(uses)) => run_uses(uses),
        Some(FeaturesCommand::Cleanup(cleanup)) => cleanup::run_cleanup(cleanup),
        Some(FeaturesCommand::Controller(_)) => Err(RunError::Internal(
            "the controller runs online, not through the offline runner".into(),
        )),
        None => list::run_list(&args.source, args.output),
    }
}

/// The Features `name` in the namespace asked (or, with `-A`, in every
/// namespace, sorted by namespace) among those loaded.
///
/// # Errors
/// None has that name (exit 2), naming those there are.
pub(crate) fn find_features<'l>(
    loaded: &'l Loaded,
    namespace: &FeatureNamespace,
    name: &str,
) -> Result<Vec<&'l Value>, RunError> {
    let mut found: Vec<&Value> = loaded
        .features
        .iter()
        .filter(|f| {
            (namespace.all_namespaces || str_at(f, "/metadata/namespace") == namespace.namespace)
                && str_at(f, "/metadata/name") == name
        })
        .collect();
    found.sort_by_key(|f| str_at(f, "/metadata/namespace"));
    if !found.is_empty() {
        return Ok(found);
    }
    let asked = if namespace.all_namespaces {
        format!("{name} in any namespace")
    } else {
        format!("{}/{name}", namespace.namespace)
    };
    let mut known: Vec<String> = loaded
        .features
        .iter()
        .map(|f| {
            format!(
                "{}/{}",
                str_at(f, "/metadata/namespace"),
                str_at(f, "/metadata/name")
            )
        })
        .collect();
    known.sort();
    let known = if known.is_empty() {
        "there is none".to_owned()
    } else {
        format!("there are {}", known.join(", "))
    };
    Err(InputError::Usage(format!("no Feature {asked}: {known}")).into())
}

/// The reports, one per Feature, as a `v1` List whether one Feature or
/// (with `-A`) several was asked: every `-o json|yaml` that prints rows is
/// a List, so `jq .items` reads them alike.
pub(crate) fn render_reports(reports: &[Value], output: UsesFormat) -> Result<String, RunError> {
    render(
        &serde_json::to_value(kubectl::list::list(reports))
            .map_err(|e| RunError::Internal(e.to_string()))?,
        output,
    )
}

fn run_uses(args: &UsesArgs) -> Result<ExitCode, RunError> {
    let loaded = load_with_objects(&args.source, "uses")?;
    let mut text = String::new();
    let mut reports = Vec::new();
    let mut any = false;
    for feature in find_features(&loaded, &args.namespace, &args.name)? {
        let namespace = str_at(feature, "/metadata/namespace");
        let uses: Vec<_> = uses_of(&loaded, feature)?
            .into_iter()
            .flat_map(|p| p.uses)
            .collect();
        any |= !uses.is_empty();
        if args.output == UsesFormat::Table {
            let mut rows = vec![["POLICY", "OBJECT", "MESSAGE"].map(str::to_owned)];
            rows.extend(
                uses.iter()
                    .map(|u| [u.policy.clone(), u.label(), u.message.clone()]),
            );
            text.push_str(&table(&rows));
            text.push_str(&format!(
                "{} object(s) keep Feature {namespace}/{} from turning off\n",
                uses.len(),
                args.name
            ));
        } else {
            reports.push(
                json!({"feature": {"namespace": namespace, "name": args.name}, "uses": uses}),
            );
        }
    }
    if args.output != UsesFormat::Table {
        text = render_reports(&reports, args.output)?;
    }
    write_out(&text)?;
    Ok(if !any {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

pub(crate) fn write_out(text: &str) -> Result<(), RunError> {
    let mut out = crate::cli::out::stdout();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| {
            RunError::Internal(format!("cannot write the output: {}", sources::reason(&e)))
        })
}
