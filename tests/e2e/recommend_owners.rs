//! Issue #42: two recommenders (`--recommender-name default` and `frugal`,
//! each with its own Lease) in one namespace keep both checkpoint sets. Each
//! labels its `RecommendationCheckpoint`s with its name and deletes only its
//! own, so over several checkpoint writes of each (counted by
//! `nodescope_recommender_checkpoint_writes_total`) neither object is ever
//! deleted and re-created (same uid) while both are rewritten. Once VPA
//! `collector` is deleted, its recommender deletes its checkpoint, and the
//! other's stays as it is.

use crate::support::nodescope::scrape;
use crate::support::{cluster, eventually, free_port, ControlPlane, Process};
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::ApiResource;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const NAMESPACE: &str = "e2e-rec-owners";
const NODE: &str = "e2e-own-n1";
const LIMIT: Duration = Duration::from_secs(60);
const START: i64 = 1_796_000_000;
/// Checkpoint writes of each recommender to watch both sets through.
const WRITES: u64 = 4;

fn store() -> Vec<Value> {
    let mut objects = vec![json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}}})];
    for (name, recommender) in [("agent", None), ("collector", Some("frugal"))] {
        let mut vpa = json!({"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name},
                     "scope": "kubernetes.io/hostname", "updatePolicy": {"updateMode": "Initial"}}});
        if let Some(r) = recommender {
            vpa["spec"]["recommenders"] = json!([{ "name": r }]);
        }
        objects.push(vpa);
        objects.push(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{name}-n1"), "namespace": NAMESPACE,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name,
                                              "uid": format!("0b8e5a52-1d3c-4a8e-9b0e-00000000000{}", name.len() % 10),
                                              "controller": true}]},
            "spec": {"nodeName": NODE, "containers": [{"name": "main", "image": "registry.example/main:1",
                     "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}}]}}));
    }
    objects
}

/// A minute of usage for both pods, for `minutes` minutes.
fn metrics(minutes: i64) -> Value {
    let items: Vec<Value> = (0..minutes)
        .flat_map(|minute| {
            let at = k8s_openapi::jiff::Timestamp::from_second(START + minute * 60)
                .map(|t| t.to_string())
                .unwrap_or_default();
            ["agent-n1", "collector-n1"].map(|pod| {
                json!({"metadata": {"name": pod, "namespace": NAMESPACE},
                       "timestamp": at, "window": "30s",
                       "containers": [{"name": "main", "usage": {"cpu": format!("{}m", 50 + minute), "memory": "100Mi"}}]})
            })
        })
        .collect();
    json!({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetricsList", "metadata": {}, "items": items})
}

fn recommender(name: &str, metrics: &Path, port: u16) -> Process {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodescope"));
    command.args(["recommend", "--store", "kube", "--recommender-name", name]);
    command.arg(format!("--metrics=file:{}", metrics.display()));
    command.args([
        "--recommender-interval",
        "300ms",
        "--checkpoint-interval",
        "1s",
    ]);
    command.args([
        "--instance",
        name,
        "--leader-elect-resource-namespace",
        NAMESPACE,
    ]);
    command.arg(format!("--leader-elect-resource-name=recommender-{name}"));
    command.args(["--log-format", "json"]);
    command.arg(format!("--address=127.0.0.1:{port}"));
    let log = std::env::temp_dir().join(format!(
        "nodescope-e2e-owners-{name}-{}.log",
        std::process::id()
    ));
    Process::spawn("recommend", command, log).unwrap_or_else(|e| panic!("{e}"))
}

fn checkpoint_api(client: &kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        NAMESPACE,
        &ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk(
                "nodescope.dev",
                "v1alpha1",
                "RecommendationCheckpoint",
            ),
            "recommendationcheckpoints",
        ),
    )
}

/// Each checkpoint: (uid, its recommender label, spec.writtenAt), by name.
async fn checkpoints(client: &kube::Client) -> BTreeMap<String, (String, String, String)> {
    let list = checkpoint_api(client)
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("listing checkpoints: {e}"));
    list.items
        .into_iter()
        .map(|o| {
            let label = o
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("nodescope.dev/recommender"))
                .cloned()
                .unwrap_or_default();
            let written = o.data["spec"]["writtenAt"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            (
                o.metadata.name.unwrap_or_default(),
                (o.metadata.uid.unwrap_or_default(), label, written),
            )
        })
        .collect()
}

/// `nodescope_recommender_checkpoint_writes_total{result="success"}`.
async fn writes(port: u16) -> u64 {
    let text = scrape(port).await;
    text.lines()
        .find_map(|l| {
            l.strip_prefix("nodescope_recommender_checkpoint_writes_total{result=\"success\"} ")
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Panics with its log when the recommender has exited (a zombie, not yet
/// reaped: `try_wait` needs `&mut`, which a polled closure cannot lend).
fn alive(process: &Process) {
    let stat =
        std::fs::read_to_string(format!("/proc/{}/stat", process.child.id())).unwrap_or_default();
    let state = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next());
    if !matches!(state, Some(s) if s != 'Z' && s != 'X') {
        panic!("the recommender exited:\n{}", process.log_tail());
    }
}

pub async fn run(plane: &ControlPlane) {
    let client = plane.client().await;
    cluster::namespace(&client, NAMESPACE).await;
    cluster::apply_files(
        &client,
        &[
            "manifests/components/recommender/checkpoint-crd.yaml",
            "manifests/components/vpa-crd/vpa-crd.yaml",
        ],
    )
    .await;
    eventually("RecommendationCheckpoint served", LIMIT, || async {
        checkpoint_api(&client)
            .list(&ListParams::default())
            .await
            .ok()
    })
    .await;
    let objects = store();
    for object in &objects {
        cluster::apply(&client, object).await;
    }
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let recorded = dir.path().join("metrics");
    crate::recommend::write(&recorded.join("usage.json"), &metrics(120));

    let ports = [free_port(), free_port()];
    let mut default = recommender("default", &recorded, ports[0]);
    let mut frugal = recommender("frugal", &recorded, ports[1]);
    let expected_names = ["agent-0-of-1", "collector-0-of-1"];
    let first = eventually("both recommenders' checkpoints", LIMIT, || async {
        alive(&default);
        alive(&frugal);
        let now = checkpoints(&client).await;
        (now.keys().map(String::as_str).eq(expected_names)).then_some(now)
    })
    .await;
    assert_eq!(first["agent-0-of-1"].1, "default", "{first:?}");
    assert_eq!(first["collector-0-of-1"].1, "frugal", "{first:?}");
    let base = [writes(ports[0]).await, writes(ports[1]).await];
    // Several checkpoint writes of each, every set present at every look.
    eventually(
        &format!("{WRITES} more checkpoint writes of each"),
        LIMIT,
        || async {
            alive(&default);
            alive(&frugal);
            let now = checkpoints(&client).await;
            for name in expected_names {
                let (uid, label, _) = now
                    .get(name)
                    .unwrap_or_else(|| panic!("checkpoint {name} deleted: {now:?}"));
                assert_eq!((uid, label), (&first[name].0, &first[name].1), "{name}");
            }
            let counts = [writes(ports[0]).await, writes(ports[1]).await];
            (counts[0] >= base[0] + WRITES && counts[1] >= base[1] + WRITES).then_some(())
        },
    )
    .await;
    let after = checkpoints(&client).await;
    for name in expected_names {
        assert_eq!(after[name].0, first[name].0, "{name} re-created");
        assert_ne!(after[name].2, first[name].2, "{name} not rewritten");
    }
    println!(
        "  recommenders default and frugal in one namespace: {WRITES}+ checkpoint writes each, \
         neither checkpoint deleted (uids unchanged), both rewritten"
    );

    // VPA collector is deleted: frugal deletes its checkpoint, default's stays.
    let collector = objects
        .iter()
        .find(|o| o["metadata"]["name"] == "collector")
        .cloned()
        .unwrap_or_default();
    cluster::delete(&client, &collector).await;
    let left = eventually(
        "frugal's checkpoint of collector deleted",
        LIMIT,
        || async {
            alive(&frugal);
            let now = checkpoints(&client).await;
            (!now.contains_key("collector-0-of-1")).then_some(now)
        },
    )
    .await;
    assert_eq!(
        left.get("agent-0-of-1").map(|c| &c.0),
        Some(&first["agent-0-of-1"].0),
        "{left:?}"
    );
    let base = writes(ports[0]).await;
    eventually("a checkpoint write of default after", LIMIT, || async {
        alive(&default);
        (writes(ports[0]).await > base).then_some(())
    })
    .await;
    let last = checkpoints(&client).await;
    assert_eq!(
        last.keys().map(String::as_str).collect::<Vec<_>>(),
        ["agent-0-of-1"]
    );
    assert_eq!(last["agent-0-of-1"].0, first["agent-0-of-1"].0);
    println!(
        "  VPA collector deleted: frugal deleted its checkpoint; default's is the same object"
    );

    default.stop(Duration::from_secs(10));
    frugal.stop(Duration::from_secs(10));
    for object in objects.iter().rev() {
        cluster::delete(&client, object).await;
    }
    for name in ["agent-0-of-1", "collector-0-of-1"] {
        let _ = checkpoint_api(&client)
            .delete(name, &kube::api::DeleteParams::default())
            .await;
    }
}
