//! `nodescope recommend` against the control plane. envtest serves no
//! `metrics.k8s.io`, so usage comes from recorded PodMetrics
//! (`--metrics file:`), one interval per tick; everything else is the
//! cluster's: VPAs, Pods (with an OOM kill in a status), Nodes, the Lease,
//! the status writes and the `RecommendationCheckpoint` objects.
//!
//! Three replicas take turns over the three thirds of the recording, each
//! started as a follower while the one before leads: the first is stopped
//! with SIGTERM (it writes a last checkpoint and releases the Lease), the
//! second is killed with SIGKILL after a periodic checkpoint (the third
//! takes the Lease once it expires). Each new leader starts from the
//! checkpoints, and the VPA ends with exactly the targets of an offline
//! replay of the whole recording (`--store file:`), the same code without
//! a cluster.

use crate::support::{cluster, eventually, ControlPlane, Process};
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::ApiResource;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const NAMESPACE: &str = "e2e-recommend";
const LIMIT: Duration = Duration::from_secs(60);
const START: i64 = 1_795_000_000;
/// (node, zone, CPU millicores, memory MiB)
const NODES: [(&str, &str, i64, i64); 3] = [
    ("e2e-rec-n1", "a", 120, 300),
    ("e2e-rec-n2", "a", 125, 310),
    ("e2e-rec-n3", "b", 600, 900),
];
const INTERVALS: i64 = 18;
const LEASE_SECONDS: u64 = 3;

fn timestamp(minute: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(START + minute * 60)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

fn objects() -> (Vec<Value>, Value) {
    let mut store = vec![json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "agent", "namespace": NAMESPACE},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"},
                 "scope": "topology.kubernetes.io/zone", "updatePolicy": {"updateMode": "Initial"}},
    })];
    for (node, zone, _, _) in NODES {
        store.push(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node, "labels": {"topology.kubernetes.io/zone": zone}}}));
        store.push(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("agent-{node}"), "namespace": NAMESPACE,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                                              "uid": "0b8e5a52-1d3c-4a8e-9b0e-000000000001", "controller": true}]},
            "spec": {"nodeName": node, "containers": [{"name": "agent", "image": "registry.example/agent:1",
                     "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}}]}}));
    }
    // The pod on n3 was OOM-killed during the fifth interval.
    let status = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "agent-e2e-rec-n3", "namespace": NAMESPACE},
        "status": {"phase": "Running", "containerStatuses": [{"name": "agent", "image": "registry.example/agent:1",
            "imageID": "", "ready": true, "restartCount": 1, "state": {"running": {"startedAt": timestamp(5)}},
            "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137, "startedAt": timestamp(0), "finishedAt": timestamp(4)}}}]}});
    (store, status)
}

fn metrics(range: std::ops::Range<i64>) -> Value {
    let mut items = Vec::new();
    for minute in range {
        for (i, (node, _, cpu, memory)) in NODES.iter().enumerate() {
            let wave = (minute + i as i64) % 3;
            // Zone a's load doubles in the second third, zone b's in the last.
            let doubled = if i < 2 { minute >= 6 } else { minute >= 12 };
            let cpu = if doubled { cpu * 2 } else { *cpu };
            items.push(json!({
                "metadata": {"name": format!("agent-{node}"), "namespace": NAMESPACE},
                "timestamp": timestamp(minute), "window": "30s",
                "containers": [{"name": "agent", "usage": {"cpu": format!("{}m", cpu + wave * 5), "memory": format!("{}Mi", memory + wave * 10)}}],
            }));
        }
    }
    json!({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetricsList", "metadata": {}, "items": items})
}

/// Writes `value` as JSON at `path`, making its directory.
pub(crate) fn write(path: &Path, value: &Value) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
    std::fs::write(path, serde_json::to_string(value).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn recommender(instance: &str, metrics: &Path) -> Process {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodescope"));
    command.args(["recommend", "--store", "kube"]);
    command.arg(format!("--metrics=file:{}", metrics.display()));
    command.args([
        "--recommender-interval",
        "300ms",
        "--checkpoint-interval",
        "1s",
    ]);
    command.args([
        "--instance",
        instance,
        "--leader-elect-resource-namespace",
        NAMESPACE,
        "--leader-elect-resource-name",
        "recommender",
    ]);
    command.arg(format!("--leader-elect-lease-duration={LEASE_SECONDS}s"));
    command.args(["--log-format", "json"]);
    command.arg(format!(
        "--address=127.0.0.1:{}",
        crate::support::free_port()
    ));
    let log = std::env::temp_dir().join(format!(
        "nodescope-e2e-{instance}-{}.log",
        std::process::id()
    ));
    Process::spawn("recommend", command, log).unwrap_or_else(|e| panic!("{e}"))
}

/// What `status` says, targets only (bounds and conditions are written
/// only with a target change, and conditions carry times).
pub(crate) fn targets(status: &Value) -> Value {
    let wide: Vec<Value> = status["recommendation"]["containerRecommendations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| json!({"containerName": c["containerName"], "target": c["target"]}))
        .collect();
    json!({"recommendation": wide, "groups": status["recommendationGroups"]})
}

/// The offline replay's targets over `metrics`, from `checkpoints` (a
/// `file:` directory) when given.
pub(crate) fn offline(store: &Path, metrics: &Path, checkpoints: Option<&Path>) -> Value {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodescope"));
    command
        .args(["recommend", "-o", "json"])
        .arg(format!("--store=file:{}", store.display()))
        .arg(format!("--metrics=file:{}", metrics.display()));
    if let Some(c) = checkpoints {
        command.arg(format!("--checkpoints=file:{}", c.display()));
    }
    let out = command.output().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    let vpa = list["items"]
        .as_array()
        .and_then(|i| i.iter().find(|o| o["kind"] == "VerticalPodAutoscaler"))
        .cloned()
        .unwrap_or_default();
    targets(&vpa["status"])
}

fn api(client: &kube::Client, group: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let version = if group == "nodescope.dev" {
        "v1alpha1"
    } else {
        "v1"
    };
    Api::namespaced_with(
        client.clone(),
        NAMESPACE,
        &ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk(group, version, kind),
            plural,
        ),
    )
}

fn checkpoint_api(client: &kube::Client) -> Api<DynamicObject> {
    api(
        client,
        "nodescope.dev",
        "RecommendationCheckpoint",
        "recommendationcheckpoints",
    )
}

async fn vpa_targets(client: &kube::Client) -> Value {
    let api = api(
        client,
        "autoscaling.k8s.io",
        "VerticalPodAutoscaler",
        "verticalpodautoscalers",
    );
    api.get("agent")
        .await
        .map(|v| targets(&v.data["status"]))
        .unwrap_or_default()
}

async fn checkpoints(client: &kube::Client) -> Vec<(String, Value)> {
    let api = checkpoint_api(client);
    api.list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .map(|o| {
                    (
                        o.metadata.name.unwrap_or_default(),
                        o.data["spec"]["writtenAt"].clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Until the VPA's targets are `expected`, while the recommender runs.
async fn until_targets(client: &kube::Client, expected: &Value, process: &mut Process) {
    let what = format!("the VPA's targets to become {expected}");
    eventually(&what, LIMIT, || async {
        if process_gone(process) {
            panic!("the recommender exited:\n{}", process.log_tail());
        }
        (vpa_targets(client).await == *expected).then_some(())
    })
    .await;
}

fn process_gone(process: &Process) -> bool {
    // `exited` needs `&mut`; a signal-0 probe does not.
    // SAFETY: kill with signal 0 only checks that the pid exists.
    unsafe { libc::kill(process.child.id() as libc::pid_t, 0) != 0 }
}

pub async fn run(plane: &ControlPlane) {
    let client = plane.client().await;
    cluster::namespace(&client, NAMESPACE).await;
    cluster::apply_files(
        &client,
        &["manifests/components/recommender/checkpoint-crd.yaml"],
    )
    .await;
    // Established before anything lists the kind.
    eventually("RecommendationCheckpoint served", LIMIT, || async {
        let api = checkpoint_api(&client);
        api.list(&ListParams::default()).await.ok()
    })
    .await;
    let (store, pod_status) = objects();
    for object in &store {
        cluster::apply(&client, object).await;
    }
    cluster::apply_status(&client, &pod_status).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut files = store.clone();
    if let Some(pod) = files
        .iter_mut()
        .find(|o| o["metadata"]["name"] == "agent-e2e-rec-n3")
    {
        pod["status"] = pod_status["status"].clone();
    }
    write(
        &dir.path().join("store/cluster.json"),
        &json!({"apiVersion": "v1", "kind": "List", "items": files}),
    );
    let parts: Vec<PathBuf> = ["a", "b", "c"]
        .iter()
        .map(|p| dir.path().join("metrics").join(p))
        .collect();
    for (i, part) in parts.iter().enumerate() {
        let from = i as i64 * INTERVALS / 3;
        write(
            &part.join("metrics.json"),
            &metrics(from..from + INTERVALS / 3),
        );
    }
    let store_dir = dir.path().join("store");
    // What an uninterrupted offline replay gives after each third.
    let upto = |n: usize| {
        let only = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        for part in &parts[..n] {
            let to = only.path().join(part.file_name().unwrap_or_default());
            std::fs::create_dir_all(&to).unwrap_or_else(|e| panic!("{e}"));
            std::fs::copy(part.join("metrics.json"), to.join("metrics.json"))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        offline(&store_dir, only.path(), None)
    };
    let expected: Vec<Value> = (1..=3).map(upto).collect();
    assert_eq!(
        expected[0]["groups"].as_array().map(Vec::len),
        Some(2),
        "{:#}",
        expected[0]
    );
    assert_ne!(
        expected[0], expected[1],
        "the second third must change a target"
    );
    assert_ne!(
        expected[1], expected[2],
        "the last third must change a target: {:#}",
        expected[0]
    );
    // The last third alone says something else: what the last replica
    // ends with comes from the checkpoints.
    assert_ne!(offline(&store_dir, &parts[2], None), expected[2]);

    let mut first = recommender("e2e-rec-1", &parts[0]);
    until_targets(&client, &expected[0], &mut first).await;
    until_replayed(&first).await;
    println!(
        "  e2e-rec-1 leads: {} intervals -> groups {}",
        INTERVALS / 3,
        expected[0]["groups"]
    );
    let mut second = recommender("e2e-rec-2", &parts[1]);
    // SIGTERM: the last checkpoint, then the Lease is released.
    first.stop(Duration::from_secs(10));
    let exit = first.exited();
    assert!(
        exit.is_some_and(|s| s.success()),
        "{exit:?}\n{}",
        first.log_tail()
    );
    assert_eq!(
        checkpoint_names(&client).await,
        vec!["agent-0-of-1".to_owned()]
    );
    assert_eq!(holder(&client, Some("e2e-rec-1")).await, "e2e-rec-2");
    until_targets(&client, &expected[1], &mut second).await;
    until_replayed(&second).await;
    println!("  e2e-rec-1 stopped (SIGTERM); e2e-rec-2 took over from its checkpoint: the targets of an uninterrupted replay of two thirds");
    let mut third = recommender("e2e-rec-3", &parts[2]);
    // A periodic checkpoint written after the second third was replayed.
    let replayed = k8s_openapi::jiff::Timestamp::now();
    eventually("a checkpoint after the second third", LIMIT, || async {
        let written = checkpoint_times(&client).await;
        written.iter().all(|t| *t > replayed).then_some(())
    })
    .await;
    // SAFETY: our own child, not yet reaped.
    unsafe { libc::kill(second.child.id() as libc::pid_t, libc::SIGKILL) };
    let killed = std::time::Instant::now();
    assert_eq!(holder(&client, Some("e2e-rec-2")).await, "e2e-rec-3");
    let took = killed.elapsed();
    assert!(
        took <= Duration::from_secs(LEASE_SECONDS + 2),
        "e2e-rec-3 took the Lease {took:?} after the kill"
    );
    until_targets(&client, &expected[2], &mut third).await;
    println!(
        "  e2e-rec-2 killed (SIGKILL): e2e-rec-3 led {:.1} s later (lease {LEASE_SECONDS} s) and, from the checkpoint, ends with the targets of an uninterrupted replay of the whole recording",
        took.as_secs_f64()
    );
    third.stop(Duration::from_secs(10));
    let _ = second.exited();

    for object in store.iter().rev() {
        cluster::delete(&client, object).await;
    }
}

/// Until the recommender has replayed all of its recording (it then says
/// so at every interval).
async fn until_replayed(process: &Process) {
    eventually("the recording replayed", LIMIT, || async {
        let log = std::fs::read_to_string(&process.log).unwrap_or_default();
        log.contains("metrics unavailable: keeping the last recommendations")
            .then_some(())
    })
    .await;
}

async fn checkpoint_names(client: &kube::Client) -> Vec<String> {
    checkpoints(client)
        .await
        .into_iter()
        .map(|(n, _)| n)
        .collect()
}

async fn checkpoint_times(client: &kube::Client) -> Vec<k8s_openapi::jiff::Timestamp> {
    checkpoints(client)
        .await
        .into_iter()
        .filter_map(|(_, t)| t.as_str()?.parse().ok())
        .collect()
}

/// The holder of the recommender's Lease, once it is not `not`.
async fn holder(client: &kube::Client, not: Option<&str>) -> String {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), NAMESPACE);
    eventually(
        &format!("the Lease held, not by {not:?}"),
        LIMIT,
        || async {
            let lease = leases.get("recommender").await.ok()?;
            let holder = lease.spec?.holder_identity?;
            (Some(holder.as_str()) != not).then_some(holder)
        },
    )
    .await
}
