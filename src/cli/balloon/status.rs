//! `nodescope balloon status`: every node with a balloon, from the cluster
//! or offline from `--store file:DIR`, planned as the controller plans it,
//! so that what the operator sees is what the controller would do.

use crate::balloon::{plan_objects, BalloonConfig, DesiredSize, Fraction, NodePlan, State};
use crate::cli::kubectl::cluster::{self, ClusterError, ClusterFlags, Connection};
use crate::cli::kubectl::list::{self, Output};
use crate::cli::kubectl::scope::Selector;
use crate::cli::kubectl::table::write_table;
use clap::Args;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use serde_json::Value;
use std::io::Write;
use std::process::ExitCode;

/// `nodescope balloon status`.
#[derive(Debug, Args, Clone)]
pub struct StatusArgs {
    /// Only these Nodes, as `kubectl get nodes NODE...`; a name that is
    /// not there is an error (exit 1), the others are shown.
    #[arg(value_name = "NODE")]
    pub nodes: Vec<String>,
    /// Only the Nodes whose labels match, in kubectl's syntax
    /// (`node.kubernetes.io/instance-type=m5.large`, `pool in (a,b)`);
    /// not with NODE names, as kubectl.
    #[arg(short = 'l', long, value_name = "SELECTOR", value_parser = Selector::parse, conflicts_with = "nodes")]
    pub selector: Option<Selector>,
    /// Where Nodes and Pods come from: `kube` or `file:PATH` (`file:-`:
    /// standard input).
    #[arg(long, default_value = "kube")]
    pub store: String,
    #[command(flatten)]
    pub cluster: ClusterFlags,
    /// The output.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: Output,
    /// The usable fraction of a node whose annotations set no size.
    #[arg(long, value_parser = Fraction::parse)]
    pub default_usable_fraction: Option<Fraction>,
    /// Exit 1 when a node is Refused, Infeasible or Invalid (a size the
    /// controller cannot reach without the operator), 0 otherwise, as
    /// `git diff --exit-code`; without it, 0 whatever the states.
    #[arg(long)]
    pub exit_code: bool,
}

/// Whether a plan needs the operator: `--exit-code` exits 1 for it.
fn needs_operator(plan: &NodePlan) -> bool {
    matches!(
        plan.state,
        State::Refused | State::Infeasible | State::Invalid
    )
}

/// The exit status of `balloon status`.
fn status_code(args: &StatusArgs, plans: &[NodePlan]) -> ExitCode {
    if args.exit_code && plans.iter().any(needs_operator) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Writes the plans as a table, or as a List ([`list`]) in JSON or
/// YAML.
///
/// # Errors
/// When `out` fails.
pub fn render(plans: &[NodePlan], output: Output, out: &mut impl Write) -> std::io::Result<()> {
    match output {
        Output::Json => {
            let text = list::json(plans).map_err(std::io::Error::other)?;
            write!(out, "{text}")
        }
        Output::Yaml => {
            let text = list::yaml(plans).map_err(std::io::Error::other)?;
            write!(out, "{text}")
        }
        Output::Table => {
            let headers = [
                "NODE",
                "ALLOCATABLE",
                "BALLOON",
                "USABLE",
                "REQUESTED",
                "FREE",
                "STATE",
                "REASON",
            ]
            .map(String::from);
            let cell = |v: &crate::balloon::CpuMemory| format!("{}/{}", v.cpu, v.memory);
            let row = |p: &NodePlan| {
                [
                    p.node.clone(),
                    cell(&p.allocatable),
                    cell(&p.balloon),
                    cell(&p.usable),
                    cell(&p.requested),
                    cell(&p.free),
                    p.state.as_str().to_owned(),
                    p.reason.clone(),
                ]
            };
            write_table(
                || std::iter::once(headers.clone()).chain(plans.iter().map(row)),
                out,
            )
        }
    }
}

impl StatusArgs {
    fn config(&self) -> BalloonConfig {
        BalloonConfig {
            default: DesiredSize {
                fraction: self.default_usable_fraction,
                ..DesiredSize::default()
            },
        }
    }
}

/// `balloon status --store file:DIR`.
///
/// # Errors
/// Unreadable input, naming the file or object.
pub fn run_status_offline(args: &StatusArgs, out: &mut impl Write) -> Result<ExitCode, String> {
    let path = crate::cli::flags::store_file(&args.store)?;
    let (mut nodes, pods) =
        crate::input::cluster::balloon_state(path, &format!("--store {}", args.store), &|node| {
            args.selector.as_ref().is_none_or(|s| s.matches(node))
        })
        .map_err(|e| e.to_string())?;
    let mut missing = Vec::new();
    if !args.nodes.is_empty() {
        nodes.retain(|n| args.nodes.contains(&n.name));
        missing = args
            .nodes
            .iter()
            .filter(|name| !nodes.iter().any(|n| &n.name == *name))
            .cloned()
            .collect();
    }
    let plans = crate::balloon::plan(&nodes, &pods, &args.config());
    let code = finish(args, &plans, &missing, out);
    // The command ends here: the OS takes the memory back at once, where
    // freeing every pod one allocation at a time takes a tenth of a run.
    std::mem::forget((nodes, pods, plans));
    code
}

/// Prints the rows, then each NODE not found as kubectl does (offline and
/// against the cluster in the same words): exit 1 when one is missing.
fn finish(
    args: &StatusArgs,
    plans: &[NodePlan],
    missing: &[String],
    out: &mut impl Write,
) -> Result<ExitCode, String> {
    // kubectl prints nothing but the errors when no name was found.
    if missing.is_empty() || !plans.is_empty() {
        render(plans, args.output, out).map_err(|e| e.to_string())?;
    }
    out.flush().map_err(|e| e.to_string())?;
    for name in missing {
        eprintln!(
            "nodescope: balloon status: {}",
            ClusterError::not_found("nodes", name)
        );
    }
    Ok(if missing.is_empty() {
        status_code(args, plans)
    } else {
        ExitCode::from(1)
    })
}

/// Lists Nodes and Pods as JSON objects: the Nodes named (and the names
/// not found) with the Pods on them, or every Node `selector` picks and
/// every Pod.
///
/// # Errors
/// A request that fails, in kubectl's words.
pub async fn gather(
    connection: &Connection,
    names: &[String],
    selector: Option<&Selector>,
) -> Result<(Vec<Value>, Vec<String>), ClusterError> {
    let client = &connection.client;
    let json = |object: Result<Value, serde_json::Error>, kind: &str| {
        object
            .map(|mut v| {
                v["kind"] = kind.into();
                v
            })
            .map_err(|e| ClusterError::Other(format!("{kind}: {e}")))
    };
    let (mut out, mut missing) = (Vec::new(), Vec::new());
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client.clone());
    if names.is_empty() {
        let mut params = ListParams::default();
        if let Some(selector) = selector {
            params = params.labels(&selector.text);
        }
        let listed = nodes
            .list(&params)
            .await
            .map_err(|e| connection.error(&e))?;
        for node in listed.items {
            let node = json(serde_json::to_value(node), "Node")?;
            // The server selected already; the same test offline.
            if selector.is_none_or(|s| s.matches(&node)) {
                out.push(node);
            }
        }
        let listed = pods
            .list(&ListParams::default())
            .await
            .map_err(|e| connection.error(&e))?;
        for pod in listed.items {
            out.push(json(serde_json::to_value(pod), "Pod")?);
        }
        return Ok((out, missing));
    }
    for name in names {
        let node = match nodes.get(name).await {
            Ok(node) => node,
            Err(e) => match connection.error(&e) {
                error if error.is_not_found() => {
                    missing.push(name.clone());
                    continue;
                }
                error => return Err(error),
            },
        };
        out.push(json(serde_json::to_value(node), "Node")?);
        let params = ListParams::default().fields(&format!("spec.nodeName={name}"));
        let listed = pods.list(&params).await.map_err(|e| connection.error(&e))?;
        for pod in listed.items {
            out.push(json(serde_json::to_value(pod), "Pod")?);
        }
    }
    Ok((out, missing))
}

/// `balloon status` against the cluster.
///
/// # Errors
/// No cluster, or a request that fails.
pub async fn run_status_cluster(args: &StatusArgs) -> Result<ExitCode, String> {
    if args.store != "kube" {
        return Err(format!(
            "--store {:?}: expected kube or file:PATH",
            args.store
        ));
    }
    let connection = args
        .cluster
        .connect(cluster::Retry::Off)
        .await
        .map_err(|e| e.to_string())?;
    let (objects, missing) = gather(&connection, &args.nodes, args.selector.as_ref())
        .await
        .map_err(|e| e.to_string())?;
    let plans = plan_objects(&objects, &args.config())?;
    finish(args, &plans, &missing, &mut crate::cli::out::stdout())
}
