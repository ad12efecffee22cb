//! Label scopes (AEP-10031) through the running server: `--store file:`
//! holding Nodes with zone and instance-type labels and VPAs scoped by
//! those keys; each DaemonSet pod gets the group of its node's label value.

mod common;

use base64::Engine;
use common::*;
use serde_json::{json, Value};
use std::time::Duration;

const POD_REVIEW: &str = "pod-node-exporter-node-a-1-create.mutate.json";

fn nodes(zone_of_n3: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Node
metadata:
  name: n1
  labels: {{topology.kubernetes.io/zone: zone-a, node.kubernetes.io/instance-type: m5.large}}
---
apiVersion: v1
kind: Node
metadata:
  name: n2
  labels: {{topology.kubernetes.io/zone: zone-b, node.kubernetes.io/instance-type: p4d.24xlarge}}
---
apiVersion: v1
kind: Node
metadata:
  name: n3
  labels: {{topology.kubernetes.io/zone: {zone_of_n3}}}
"#
    )
}

fn vpa(name: &str, daemonset: &str, scope: &str, groups: &[(&str, &str)]) -> Value {
    let groups: Vec<Value> = groups
        .iter()
        .map(|(value, cpu)| {
            json!({"scopeValue": value, "containerRecommendations": [
                {"containerName": "node-exporter", "target": {"cpu": cpu, "memory": "100Mi"}}]})
        })
        .collect();
    json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name, "namespace": "monitoring"},
        "spec": {"scope": scope,
                 "targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": daemonset},
                 "resourcePolicy": {"containerPolicies": [{"containerName": "kube-rbac-proxy", "mode": "Off"}]}},
        "status": {
            "recommendation": {"containerRecommendations": [
                {"containerName": "node-exporter", "target": {"cpu": "111m", "memory": "100Mi"}}]},
            "recommendationGroups": groups,
        },
    })
}

fn store(dir: &std::path::Path, zone_of_n3: &str) {
    std::fs::write(dir.join("nodes.yaml"), nodes(zone_of_n3)).unwrap();
    let vpas = [
        vpa(
            "by-zone",
            "node-exporter",
            "topology.kubernetes.io/zone",
            &[
                ("zone-a", "150m"),
                ("zone-b", "250m"),
                ("__absent__", "50m"),
            ],
        ),
        vpa(
            "by-instance-type",
            "gpu-agent",
            "node.kubernetes.io/instance-type",
            &[("m5.large", "80m"), ("p4d.24xlarge", "900m")],
        ),
    ];
    for vpa in vpas {
        let name = format!("{}.json", vpa["metadata"]["name"].as_str().unwrap());
        std::fs::write(dir.join(name), serde_json::to_vec(&vpa).unwrap()).unwrap();
    }
}

/// The captured pod, owned by `daemonset`, headed for `node`.
fn review(daemonset: &str, node: &str) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(&fixture(POD_REVIEW)).unwrap();
    let object = &mut v["request"]["object"];
    object["metadata"]["ownerReferences"][0]["name"] = json!(daemonset);
    object["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"][0]["matchFields"][0]["values"] = json!([node]);
    serde_json::to_vec(&v).unwrap()
}

/// (the node-exporter container's cpu request after the patch, warnings).
async fn cpu(server: &Server, body: Vec<u8>) -> (String, Value) {
    let sent: Value = serde_json::from_slice(&body).unwrap();
    let mut client = H1::connect(server.addr, &server.ca()).await;
    let reply = client.post("/mutate?timeout=2s", body).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let response = reply.json()["response"].clone();
    let mut pod = sent["request"]["object"].clone();
    if let Some(patch) = response["patch"].as_str() {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
        json_patch::patch(&mut pod, &patch).unwrap();
    }
    let cpu = pod["spec"]["containers"][0]["resources"]["requests"]["cpu"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (cpu, response["warnings"].clone())
}

#[tokio::test]
async fn zone_and_instance_type_scopes_give_each_pod_its_nodes_group() {
    let dir = tempfile::tempdir().unwrap();
    store(dir.path(), "zone-a");
    let server = Server::start(&[&format!("--store=file:{}", dir.path().display())]);
    let none = Value::Null;
    assert_eq!(
        cpu(&server, review("node-exporter", "n1")).await,
        ("150m".into(), none.clone())
    );
    assert_eq!(
        cpu(&server, review("node-exporter", "n2")).await,
        ("250m".into(), none.clone())
    );
    assert_eq!(
        cpu(&server, review("gpu-agent", "n1")).await,
        ("80m".into(), none.clone())
    );
    assert_eq!(
        cpu(&server, review("gpu-agent", "n2")).await,
        ("900m".into(), none.clone())
    );
    // n3 has a zone but no instance type: the __absent__ group, which
    // by-instance-type lacks, so its VPA-wide recommendation.
    assert_eq!(
        cpu(&server, review("gpu-agent", "n3")).await,
        (
            "111m".into(),
            json!(["no recommendation for node.kubernetes.io/instance-type \"__absent__\" (node \"n3\" has no node.kubernetes.io/instance-type label) in VerticalPodAutoscaler monitoring/by-instance-type; using the VerticalPodAutoscaler-wide recommendation"])
        )
    );
    // A node the store does not know.
    assert_eq!(
        cpu(&server, review("node-exporter", "n9")).await,
        (
            "111m".into(),
            json!(["node \"n9\" is not in nodescope's Node store, so its topology.kubernetes.io/zone label is unknown (VerticalPodAutoscaler monitoring/by-zone); using the VerticalPodAutoscaler-wide recommendation"])
        )
    );
}

#[tokio::test]
async fn a_node_label_change_in_the_store_moves_the_next_pod_to_another_group() {
    let dir = tempfile::tempdir().unwrap();
    store(dir.path(), "zone-a");
    let server = Server::start(&[
        &format!("--store=file:{}", dir.path().display()),
        "--reload-interval=1",
    ]);
    assert_eq!(cpu(&server, review("node-exporter", "n3")).await.0, "150m");
    std::fs::write(dir.path().join(".nodes.yaml.new"), nodes("zone-b")).unwrap();
    std::fs::rename(
        dir.path().join(".nodes.yaml.new"),
        dir.path().join("nodes.yaml"),
    )
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if cpu(&server, review("node-exporter", "n3")).await.0 == "250m" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "n3's new zone was not picked up"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn groups_are_read_as_upstream_reads_them_last_entry_wins_and_empty_groups_are_skipped() {
    // kubernetes/autoscaler PR #10012 (deed6de9c6),
    // buildGroupRecommendationLookup: entries fill a map by container name,
    // and a group without entries is not put in the lookup.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("nodes.yaml"), nodes("zone-a")).unwrap();
    let entry = |cpu: &str| json!({"containerName": "node-exporter", "target": {"cpu": cpu, "memory": "100Mi"}});
    let mut vpa = vpa(
        "by-zone",
        "node-exporter",
        "topology.kubernetes.io/zone",
        &[],
    );
    vpa["status"]["recommendationGroups"] = json!([
        {"scopeValue": "zone-a", "containerRecommendations": [entry("150m")]},
        {"scopeValue": "zone-a", "containerRecommendations": []},
        {"scopeValue": "zone-b", "containerRecommendations": [entry("250m"), entry("260m")]},
    ]);
    std::fs::write(
        dir.path().join("by-zone.json"),
        serde_json::to_vec(&vpa).unwrap(),
    )
    .unwrap();
    let server = Server::start(&[&format!("--store=file:{}", dir.path().display())]);
    assert_eq!(
        cpu(&server, review("node-exporter", "n1")).await,
        ("150m".into(), Value::Null),
        "the later, empty zone-a group does not replace the earlier one"
    );
    assert_eq!(
        cpu(&server, review("node-exporter", "n2")).await,
        ("260m".into(), Value::Null),
        "the later entry for node-exporter wins"
    );
}
