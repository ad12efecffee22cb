//! `nodescope recommend` on a cluster that ran upstream's recommender: it
//! holds upstream's `VerticalPodAutoscalerCheckpoint` CRD (PR #10012's, with
//! `spec.scopeValue`) and, for a zone-scoped VPA, only upstream's checkpoints
//! (one per zone and the global one), no `RecommendationCheckpoint`. The
//! recording has one interval. The recommender imports upstream's history
//! at start and writes, on that first interval, exactly the targets of an
//! offline replay that imports the same checkpoints from files; without the
//! import the one interval says something else.

use crate::recommend::{offline, targets, write};
use crate::support::{cluster, eventually, ControlPlane, Process};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::ApiResource;
use nodescope::recommend::aggregate::{AggregateContainerState, HistoryConfig};
use nodescope::recommend::upstream;
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

const NAMESPACE: &str = "e2e-rec-upstream";
const LIMIT: Duration = Duration::from_secs(60);
const START: i64 = 1_795_000_000;
/// (node, zone, history's CPU millicores, the recording's)
const NODES: [(&str, &str, f64, i64); 2] = [
    ("e2e-up-n1", "a", 400.0, 100),
    ("e2e-up-n2", "b", 900.0, 150),
];
const WEEK: i64 = 7 * 24 * 60;

fn at(minute: i64) -> Timestamp {
    Timestamp::from_second(START + minute * 60).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn store() -> Vec<Value> {
    let mut store = vec![json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "agent", "namespace": NAMESPACE},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"},
                 "scope": "topology.kubernetes.io/zone"},
    })];
    for (node, zone, _, _) in NODES {
        store.push(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node, "labels": {"topology.kubernetes.io/zone": zone}}}));
        store.push(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("agent-{node}"), "namespace": NAMESPACE,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                                              "uid": "0b8e5a52-1d3c-4a8e-9b0e-000000000002", "controller": true}]},
            "spec": {"nodeName": node, "containers": [{"name": "agent", "image": "registry.example/agent:1",
                     "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}}]}}));
    }
    store
}

/// Upstream's checkpoints of a week: per zone, CPU every 10 minutes near
/// the zone's level and a 500 MB peak a day; and the global one.
fn checkpoints() -> Vec<Value> {
    let config = HistoryConfig::default();
    let mut global = AggregateContainerState::default();
    let mut out = Vec::new();
    for (_, zone, level, _) in NODES {
        let mut a = AggregateContainerState::default();
        for step in 0..WEEK / 10 {
            let wave = (step % 5) as f64 * 0.02;
            a.add_cpu_sample(&config, level / 1000.0 * (1.0 + wave), 0.1, at(step * 10));
        }
        for day in 1..=7 {
            a.add_memory_peak(&config, 5e8, at(day * 1440 - 1));
        }
        global.merge(&config, &a);
        out.push(upstream::object(
            NAMESPACE,
            "agent",
            "agent",
            Some(zone),
            &a.to_vpa_checkpoint(),
            at(WEEK),
        ));
    }
    out.push(upstream::object(
        NAMESPACE,
        "agent",
        "agent",
        None,
        &global.to_vpa_checkpoint(),
        at(WEEK),
    ));
    for o in &mut out {
        if let Some(meta) = o["metadata"].as_object_mut() {
            meta.remove("creationTimestamp");
        }
    }
    out
}

fn metrics() -> Value {
    let items: Vec<Value> = NODES
        .iter()
        .map(|(node, _, _, cpu)| json!({
            "metadata": {"name": format!("agent-{node}"), "namespace": NAMESPACE},
            "timestamp": at(WEEK + 1).to_string(), "window": "30s",
            "containers": [{"name": "agent", "usage": {"cpu": format!("{cpu}m"), "memory": "300Mi"}}],
        }))
        .collect();
    json!({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetricsList", "metadata": {}, "items": items})
}

fn api(client: &kube::Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        NAMESPACE,
        &ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("autoscaling.k8s.io", "v1", kind),
            plural,
        ),
    )
}

pub async fn run(plane: &ControlPlane) {
    let client = plane.client().await;
    cluster::namespace(&client, NAMESPACE).await;
    // nodescope's recommender component brings its own CRD; the cluster
    // holds none of its objects.
    cluster::apply_files(
        &client,
        &[
            "tests/fixtures/upstream/vpa-checkpoint-crd.yaml",
            "manifests/components/recommender/checkpoint-crd.yaml",
        ],
    )
    .await;
    let own: Api<DynamicObject> = Api::namespaced_with(
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
    );
    eventually("RecommendationCheckpoint served", LIMIT, || async {
        own.list(&ListParams::default()).await.ok()
    })
    .await;
    assert!(own
        .list(&ListParams::default())
        .await
        .is_ok_and(|l| l.items.is_empty()));
    let upstream_api = api(&client, upstream::KIND, "verticalpodautoscalercheckpoints");
    eventually("VerticalPodAutoscalerCheckpoint served", LIMIT, || async {
        upstream_api.list(&ListParams::default()).await.ok()
    })
    .await;
    for object in store() {
        cluster::apply(&client, &object).await;
    }
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    write(
        &dir.path().join("store/cluster.json"),
        &json!({"apiVersion": "v1", "kind": "List", "items": store()}),
    );
    write(&dir.path().join("metrics/interval.json"), &metrics());
    let files = dir.path().join("checkpoints");
    for object in checkpoints() {
        cluster::apply(&client, &object).await;
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        write(&files.join(format!("{NAMESPACE}.{name}.json")), &object);
    }
    let names: Vec<String> = upstream_api
        .list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter_map(|o| o.metadata.name)
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        names,
        [
            "agent-agent",
            "agent-agent-e40c292c",
            "agent-agent-e70c2de5"
        ]
    );
    let expected = offline(
        &dir.path().join("store"),
        &dir.path().join("metrics"),
        Some(&files),
    );
    assert_eq!(
        expected["groups"].as_array().map(Vec::len),
        Some(2),
        "{expected:#}"
    );
    assert_ne!(
        offline(&dir.path().join("store"), &dir.path().join("metrics"), None),
        expected,
        "the import must matter"
    );

    let mut command = Command::new(env!("CARGO_BIN_EXE_nodescope"));
    command.args(["recommend", "--store", "kube"]);
    command.arg(format!(
        "--metrics=file:{}",
        dir.path().join("metrics").display()
    ));
    command.args([
        "--recommender-interval",
        "300ms",
        "--checkpoint-interval",
        "1h",
    ]);
    command.args([
        "--instance",
        "e2e-rec-upstream",
        "--leader-elect-resource-namespace",
        NAMESPACE,
        "--leader-elect-resource-name",
        "recommender",
        "--leader-elect-lease-duration=3s",
    ]);
    command.args(["--log-format", "json"]);
    command.arg(format!(
        "--address=127.0.0.1:{}",
        crate::support::free_port()
    ));
    let log = std::env::temp_dir().join(format!(
        "nodescope-e2e-rec-upstream-{}.log",
        std::process::id()
    ));
    let mut process =
        Process::spawn("recommend", command, log.clone()).unwrap_or_else(|e| panic!("{e}"));
    let vpas = api(&client, "VerticalPodAutoscaler", "verticalpodautoscalers");
    let written = eventually("the VPA's first status", LIMIT, || async {
        let vpa = vpas.get("agent").await.ok()?;
        vpa.data["status"]["recommendationGroups"]
            .is_array()
            .then(|| targets(&vpa.data["status"]))
    })
    .await;
    assert_eq!(written, expected, "log:\n{}", process.log_tail());
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("history imported from upstream's VerticalPodAutoscalerCheckpoints"),
        "{text}"
    );
    println!(
        "  upstream's checkpoints imported: groups on the first interval {}",
        written["groups"]
    );
    process.stop(Duration::from_secs(10));
}
