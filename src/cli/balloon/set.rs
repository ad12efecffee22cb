//! `nodescope balloon set`: writes a Node's usable size (its annotations)
//! once the size is checked against the Node, as the controller would
//! check it; `--dry-run=client|server` shows what would be written,
//! kubectl's way, and `--wait` follows the balloon until it settles.

use crate::balloon::node::check_usable_quantity;
use crate::balloon::{
    check_usable, plan_objects, BalloonConfig, BalloonNode, DesiredSize, Fraction, Resource, State,
    USABLE_CPU_ANNOTATION, USABLE_FRACTION_ANNOTATION, USABLE_MEMORY_ANNOTATION,
};
use crate::cli::flags;
use crate::cli::kubectl::cluster::{ClusterFlags, Retry};
use crate::quantity::Quantity;
use clap::{Args, ValueEnum};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde_json::Value;
use std::process::ExitCode;
use std::time::Duration;

/// kubectl's `--dry-run`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DryRun {
    /// Write the size.
    None,
    /// Check everything (the Node is read), print the patch, send nothing.
    Client,
    /// Send the patch with dryRun=All: the server checks it and answers
    /// with the Node as it would be, and nothing persists.
    Server,
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
    /// Return once the resize is actuated or refused: exit 0 when the
    /// balloon holds what was asked, 1 when it is refused (Refused,
    /// Infeasible, Invalid, no balloon), 4 when --timeout passes first.
    #[arg(long)]
    pub wait: bool,
    /// `client`: print the patch and send nothing; `server`: send it with
    /// dryRun=All and print the Node's size as the server would store it;
    /// nothing persists either way.
    #[arg(long, value_enum, default_value = "none", conflicts_with = "wait")]
    pub dry_run: DryRun,
    #[command(flatten)]
    pub cluster: ClusterFlags,
    /// How long `--wait` waits (then exit 4).
    #[arg(long, default_value = "2m", value_parser = flags::interval)]
    pub timeout: Duration,
}

/// The exit code of `set --wait` when `--timeout` passes before the
/// balloon settles or is refused: not 1, which says the cluster refused
/// the size, while this says only that it has not answered yet.
pub const TIMED_OUT: u8 = 4;

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
    let connection = args
        .cluster
        .connect(Retry::Off)
        .await
        .map_err(|e| e.to_string())?;
    let nodes: Api<Node> = Api::all(connection.client.clone());
    let params = match args.dry_run {
        DryRun::Server => PatchParams::default().dry_run(),
        DryRun::None | DryRun::Client => PatchParams::default(),
    };
    let mut attempt = 0;
    let written = loop {
        attempt += 1;
        let node = nodes
            .get(&args.node)
            .await
            .map_err(|e| connection.error(&e).to_string())?;
        let node = serde_json::to_value(&node).map_err(|e| format!("Node {}: {e}", args.node))?;
        let patch = checked_set_patch(args, &node)?;
        if args.dry_run == DryRun::Client {
            say(&pretty(&patch))?;
            say(&format!("node/{} usable size set (dry run)", args.node))?;
            return Ok(ExitCode::SUCCESS);
        }
        match nodes
            .patch(&args.node, &params, &Patch::Merge(&patch))
            .await
        {
            Ok(written) => break written,
            Err(kube::Error::Api(status)) if status.code == 409 && attempt < 5 => continue,
            Err(e) => return Err(connection.error(&e).to_string()),
        }
    };
    if args.dry_run == DryRun::Server {
        let annotations = written.metadata.annotations.unwrap_or_default();
        let size: serde_json::Map<String, Value> = [
            USABLE_CPU_ANNOTATION,
            USABLE_MEMORY_ANNOTATION,
            USABLE_FRACTION_ANNOTATION,
        ]
        .into_iter()
        .filter_map(|key| Some((key.to_owned(), annotations.get(key)?.clone().into())))
        .collect();
        say(&pretty(&Value::Object(size)))?;
        say(&format!(
            "node/{} usable size set (server dry run)",
            args.node
        ))?;
        return Ok(ExitCode::SUCCESS);
    }
    say(&format!("node/{} usable size set", args.node))?;
    if !args.wait {
        return Ok(ExitCode::SUCCESS);
    }
    let deadline = tokio::time::Instant::now() + args.timeout;
    let name = std::slice::from_ref(&args.node);
    loop {
        let (objects, _) = super::status::gather(&connection, name, None)
            .await
            .map_err(|e| e.to_string())?;
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
                say(&format!("{}: {}", p.state.as_str(), p.reason))?;
                return Ok(if p.state == State::Settled {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(1)
                });
            }
        }
        if tokio::time::Instant::now() >= deadline {
            let words = plan.map_or_else(
                || "no balloon plan for it yet".to_owned(),
                |p| format!("{}: {}", p.state.as_str(), p.reason),
            );
            eprintln!(
                "nodescope: balloon set: timed out after {} waiting for node/{} to settle; \
                 last seen {words}",
                go_duration(args.timeout),
                args.node
            );
            return Ok(ExitCode::from(TIMED_OUT));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// A duration as Go (and so `--timeout`'s own syntax) writes it: `2m0s`,
/// `45s`, `1h0m0s`, `1.5s`.
fn go_duration(d: Duration) -> String {
    let secs = d.as_secs();
    let millis = d.subsec_millis();
    let seconds = if millis == 0 {
        format!("{}s", secs % 60)
    } else {
        format!(
            "{}.{}s",
            secs % 60,
            format!("{millis:03}").trim_end_matches('0')
        )
    };
    match (secs / 3600, secs / 60 % 60) {
        (0, 0) => seconds,
        (0, m) => format!("{m}m{seconds}"),
        (h, m) => format!("{h}h{m}m{seconds}"),
    }
}

/// One line on standard output ([`crate::cli::out`]).
fn say(line: &str) -> Result<(), String> {
    use std::io::Write;
    writeln!(crate::cli::out::stdout(), "{line}").map_err(|e| {
        format!(
            "cannot write the output: {}",
            crate::input::sources::reason(&e)
        )
    })
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
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
    fn a_timeout_reads_as_go_writes_a_duration() {
        assert_eq!(go_duration(Duration::from_secs(120)), "2m0s");
        assert_eq!(go_duration(Duration::from_secs(45)), "45s");
        assert_eq!(go_duration(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
    }

    #[test]
    fn set_needs_a_size_and_takes_a_fraction_alone() {
        assert!(parse(&["n1"]).is_err());
        assert!(parse(&["n1", "--usable-cpu", "6", "--usable-fraction", "0.5"]).is_err());
        assert!(parse(&["n1", "--usable-fraction", "1.5"]).is_err());
    }
}
