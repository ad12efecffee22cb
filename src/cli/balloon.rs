//! `nodescope balloon`: node resizing by balloon (KEP-5620). `status` shows
//! every node with a balloon (from the cluster, or offline from
//! `--store file:DIR`); `set` writes a Node's usable size; `controller`
//! resizes the balloons to match.

use super::flags;
use super::update::Output;
use crate::balloon::node::check_usable_quantity;
use crate::balloon::{
    check_usable, plan_objects, BalloonConfig, BalloonNode, DesiredSize, Fraction, NodePlan,
    Resource, State, USABLE_CPU_ANNOTATION, USABLE_FRACTION_ANNOTATION, USABLE_MEMORY_ANNOTATION,
};
use crate::quantity::Quantity;
use clap::{Args, Subcommand};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::Value;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

/// `nodescope balloon`.
#[derive(Debug, Args, Clone)]
pub struct BalloonArgs {
    #[command(subcommand)]
    pub command: BalloonCommand,
}

/// What `nodescope balloon` does.
#[derive(Debug, Subcommand, Clone)]
pub enum BalloonCommand {
    /// NODE, ALLOCATABLE, BALLOON, USABLE, REQUESTED (by other pods), FREE,
    /// STATE and REASON of every node with a balloon or a usable size; each
    /// value is cpu/memory. With --exit-code, exit 1 when a node is
    /// Refused, Infeasible or Invalid.
    Status(StatusArgs),
    /// Set a Node's usable size (its annotations); the balloon controller
    /// resizes its balloon to match.
    Set(SetArgs),
    /// Resize every node's balloon to its usable size, as the leader of
    /// its replicas.
    Controller(Box<super::balloon_controller::ControllerArgs>),
}

/// `nodescope balloon status`.
#[derive(Debug, Args, Clone)]
pub struct StatusArgs {
    /// Where Nodes and Pods come from: `kube` or `file:PATH`.
    #[arg(long, default_value = "kube")]
    pub store: String,
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

/// `nodescope balloon set`.
#[derive(Debug, Args, Clone)]
#[command(group(
    clap::ArgGroup::new("size")
        .required(true)
        .multiple(true)
        .args(["usable_cpu", "usable_memory", "usable_fraction"])
))]
pub struct SetArgs {
    /// The Node.
    pub node: String,
    /// The cpu that workloads may use (a quantity above 0 and at most the
    /// node's allocatable: `6`, `5500m`).
    #[arg(long, value_parser = usable_cpu, allow_hyphen_values = true)]
    pub usable_cpu: Option<Quantity>,
    /// The memory that workloads may use (a quantity above 0 and at most
    /// the node's allocatable: `24Gi`).
    #[arg(long, value_parser = usable_memory, allow_hyphen_values = true)]
    pub usable_memory: Option<Quantity>,
    /// Instead, the fraction of allocatable that workloads may use.
    #[arg(long, value_parser = Fraction::parse, conflicts_with_all = ["usable_cpu", "usable_memory"])]
    pub usable_fraction: Option<Fraction>,
    /// Return once the resize is actuated or refused (exit 0 when the
    /// balloon holds what was asked, 1 otherwise).
    #[arg(long)]
    pub wait: bool,
    /// How long `--wait` waits.
    #[arg(long, default_value = "2m", value_parser = flags::interval)]
    pub timeout: Duration,
}

/// `--usable-cpu`: a quantity, checked alone as the Node's annotation is.
fn usable_cpu(text: &str) -> Result<Quantity, String> {
    usable(text, Resource::Cpu)
}

/// `--usable-memory`.
fn usable_memory(text: &str) -> Result<Quantity, String> {
    usable(text, Resource::Memory)
}

fn usable(text: &str, r: Resource) -> Result<Quantity, String> {
    let q = Quantity::parse(text).map_err(|e| e.to_string())?;
    check_usable_quantity(r, &q)?;
    Ok(q)
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

/// Writes the plans as a table, JSON (`{"items": [...]}`) or YAML.
///
/// # Errors
/// When `out` fails.
pub fn render(plans: &[NodePlan], output: Output, out: &mut impl Write) -> std::io::Result<()> {
    // A struct, not `json!`, so that each item's keys keep their order.
    #[derive(serde::Serialize)]
    struct Items<'a> {
        items: &'a [NodePlan],
    }
    let document = Items { items: plans };
    match output {
        Output::Json => {
            let text = serde_json::to_string_pretty(&document).unwrap_or_default();
            writeln!(out, "{text}")
        }
        Output::Yaml => {
            let text = serde_saphyr::to_string(&document)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            write!(out, "{text}")
        }
        Output::Table => {
            let mut rows = vec![[
                "NODE",
                "ALLOCATABLE",
                "BALLOON",
                "USABLE",
                "REQUESTED",
                "FREE",
                "STATE",
                "REASON",
            ]
            .map(String::from)];
            for p in plans {
                let cell = |v: &crate::balloon::CpuMemory| format!("{}/{}", v.cpu, v.memory);
                rows.push([
                    p.node.clone(),
                    cell(&p.allocatable),
                    cell(&p.balloon),
                    cell(&p.usable),
                    cell(&p.requested),
                    cell(&p.free),
                    p.state.as_str().to_owned(),
                    p.reason.clone(),
                ]);
            }
            write!(out, "{}", super::features::table(&rows))
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
    let path = args.store.trim_start_matches("file:");
    let (nodes, pods) = crate::input::cluster::balloon_state(
        std::path::Path::new(path),
        &format!("--store {}", args.store),
    )
    .map_err(|e| e.to_string())?;
    let plans = crate::balloon::plan_nodes(&nodes, &pods, &args.config());
    render(&plans, args.output, out).map_err(|e| e.to_string())?;
    Ok(status_code(args, &plans))
}

/// The client of every `balloon` command: kube's default client retries
/// 429s for minutes, which would hold a pass; a refusal is an answer.
///
/// # Errors
/// No kubeconfig or service account.
pub async fn client() -> Result<kube::Client, String> {
    let mut config = kube::Config::infer().await.map_err(|e| e.to_string())?;
    config.default_retry = false;
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

/// Lists Nodes and Pods (only those on `node`, when given) as JSON objects.
///
/// # Errors
/// A list that fails, naming it.
pub async fn gather(client: &kube::Client, node: Option<&str>) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    let nodes: Api<Node> = Api::all(client.clone());
    let listed = match node {
        Some(name) => vec![nodes
            .get(name)
            .await
            .map_err(|e| format!("Node {name}: {e}"))?],
        None => {
            nodes
                .list(&ListParams::default())
                .await
                .map_err(|e| format!("listing nodes: {e}"))?
                .items
        }
    };
    for n in listed {
        let mut v = serde_json::to_value(n).map_err(|e| e.to_string())?;
        v["kind"] = "Node".into();
        out.push(v);
    }
    let pods: Api<Pod> = Api::all(client.clone());
    let params = match node {
        Some(name) => ListParams::default().fields(&format!("spec.nodeName={name}")),
        None => ListParams::default(),
    };
    let listed = pods
        .list(&params)
        .await
        .map_err(|e| format!("listing pods: {e}"))?;
    for p in listed.items {
        let mut v = serde_json::to_value(p).map_err(|e| e.to_string())?;
        v["kind"] = "Pod".into();
        out.push(v);
    }
    Ok(out)
}

/// `balloon status` against the cluster.
///
/// # Errors
/// No cluster, or a list that fails.
pub async fn run_status_cluster(args: &StatusArgs) -> Result<ExitCode, String> {
    if args.store != "kube" {
        return Err(format!(
            "--store {:?}: expected kube or file:PATH",
            args.store
        ));
    }
    let client = client().await?;
    let objects = gather(&client, None).await?;
    let plans = plan_objects(&objects, &args.config())?;
    render(&plans, args.output, &mut std::io::stdout().lock()).map_err(|e| e.to_string())?;
    Ok(status_code(args, &plans))
}

/// The merge patch `set` writes: the asked annotations, the others removed
/// (an absolute size would win over a fraction), guarded by the Node's
/// resourceVersion.
#[must_use]
pub fn set_patch(args: &SetArgs, resource_version: &str) -> Value {
    let text = |q: &Option<Quantity>| q.as_ref().map_or(Value::Null, |q| q.to_string().into());
    serde_json::json!({
        "metadata": {
            "resourceVersion": resource_version,
            "annotations": {
                USABLE_CPU_ANNOTATION: text(&args.usable_cpu),
                USABLE_MEMORY_ANNOTATION: text(&args.usable_memory),
                USABLE_FRACTION_ANNOTATION: args.usable_fraction.map_or(Value::Null, |f| f.to_string().into()),
            }
        }
    })
}

/// The patch for `node` (the Node as read), once the asked size passed
/// the one check the controller and `balloon status` make too, against
/// the node's allocatable.
///
/// # Errors
/// The Node cannot be read, or the size is wrong for it; nothing is
/// written then.
pub fn checked_set_patch(args: &SetArgs, node: &Value) -> Result<Value, String> {
    let read = BalloonNode::from_value(node).map_err(|e| e.to_string())?;
    let desired = DesiredSize {
        cpu: args.usable_cpu.clone(),
        memory: args.usable_memory.clone(),
        fraction: args.usable_fraction,
    };
    check_usable(&desired, &read.allocatable)
        .map_err(|e| format!("Node {}: {e}; nothing was written", read.name))?;
    let version = node
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Ok(set_patch(args, version))
}

/// `balloon set`: reads the Node, checks the size against its allocatable,
/// patches it (retrying a conflict with a fresh read), then with `--wait`
/// follows the node's plan until it settles or is refused.
///
/// # Errors
/// No cluster, no such Node, or a patch that keeps failing.
pub async fn run_set(args: &SetArgs) -> Result<ExitCode, String> {
    let client = client().await?;
    let nodes: Api<Node> = Api::all(client.clone());
    let mut attempt = 0;
    loop {
        attempt += 1;
        let node = nodes
            .get(&args.node)
            .await
            .map_err(|e| format!("Node {}: {e}", args.node))?;
        let node = serde_json::to_value(&node).map_err(|e| format!("Node {}: {e}", args.node))?;
        let patch = checked_set_patch(args, &node)?;
        match nodes
            .patch(&args.node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => break,
            Err(kube::Error::Api(status)) if status.code == 409 && attempt < 5 => continue,
            Err(e) => return Err(format!("Node {}: {e}", args.node)),
        }
    }
    println!("node/{} usable size set", args.node);
    if !args.wait {
        return Ok(ExitCode::SUCCESS);
    }
    let deadline = tokio::time::Instant::now() + args.timeout;
    loop {
        let objects = gather(&client, Some(&args.node)).await?;
        let plans = plan_objects(&objects, &BalloonConfig::default())?;
        let plan = plans.into_iter().find(|p| p.node == args.node);
        if let Some(p) = &plan {
            let done = matches!(
                p.state,
                State::Settled
                    | State::Refused
                    | State::Infeasible
                    | State::Invalid
                    | State::NoBalloon
            );
            if done {
                println!("{}: {}", p.state.as_str(), p.reason);
                return Ok(if p.state == State::Settled {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(1)
                });
            }
        }
        if tokio::time::Instant::now() >= deadline {
            let words = plan.map_or_else(
                || "no plan".to_owned(),
                |p| format!("{}: {}", p.state.as_str(), p.reason),
            );
            println!("timed out after {:?}; {words}", args.timeout);
            return Ok(ExitCode::from(1));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Runs a `balloon` command against the cluster.
///
/// # Errors
/// As the command says.
pub async fn run_cluster(args: &BalloonArgs) -> Result<ExitCode, String> {
    match &args.command {
        BalloonCommand::Status(status) => run_status_cluster(status).await,
        BalloonCommand::Set(set) => run_set(set).await,
        BalloonCommand::Controller(controller) => super::balloon_controller::run(controller).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        set: SetArgs,
    }

    fn parse(args: &[&str]) -> Result<SetArgs, String> {
        Cli::try_parse_from(std::iter::once("set").chain(args.iter().copied()))
            .map(|c| c.set)
            .map_err(|e| e.kind().to_string())
    }

    #[test]
    fn set_replaces_every_size_annotation_under_the_nodes_resource_version() {
        let args = parse(&["n1", "--usable-fraction", "0.25"]).expect("args");
        assert_eq!(
            set_patch(&args, "42"),
            serde_json::json!({"metadata": {"resourceVersion": "42", "annotations": {
                "nodescope.dev/usable-cpu": null,
                "nodescope.dev/usable-memory": null,
                "nodescope.dev/usable-fraction": "0.25"}}})
        );
        let args = parse(&["n1", "--usable-memory", "24Gi"]).expect("args");
        assert_eq!(
            set_patch(&args, "7")["metadata"]["annotations"]["nodescope.dev/usable-memory"],
            "24Gi"
        );
    }

    #[test]
    fn set_needs_a_size_and_takes_a_fraction_alone() {
        assert!(parse(&["n1"]).is_err());
        assert!(parse(&["n1", "--usable-cpu", "6", "--usable-fraction", "0.5"]).is_err());
        assert!(parse(&["n1", "--usable-fraction", "1.5"]).is_err());
    }
}
