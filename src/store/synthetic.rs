//! Synthetic cluster state for benchmarks and load tests: many node-scoped
//! VPAs with a recommendation group per node, shaped like real ones, so
//! figures at 5,000 or 50,000 nodes can be reproduced by anyone.

use serde_json::{json, Value};

/// `vpas` node-scoped VPAs in namespace `monitoring`, each for DaemonSet
/// `ds-<i>` (the first one for `node-exporter`, the DaemonSet of the captured
/// pod review), each with a group for `node-a-1` and `node-<n>` for n < `nodes`,
/// two containers (`node-exporter`, `kube-rbac-proxy`) per group.
#[must_use]
pub fn node_scoped_vpas(vpas: usize, nodes: usize) -> Vec<Value> {
    (0..vpas)
        .map(|i| {
            let daemonset = if i == 0 { "node-exporter".to_owned() } else { format!("ds-{i}") };
            let group = |node: String, n: usize| {
                json!({
                    "scopeValue": node,
                    "containerRecommendations": [
                        {"containerName": "node-exporter",
                         "target": {"cpu": format!("{}m", 100 + n % 400), "memory": format!("{}Mi", 128 + n % 256)}},
                        {"containerName": "kube-rbac-proxy",
                         "target": {"cpu": format!("{}m", 10 + n % 20), "memory": format!("{}Mi", 20 + n % 40)}}
                    ]
                })
            };
            let mut groups: Vec<Value> = (0..nodes).map(|n| group(format!("node-{n}"), n)).collect();
            groups.push(group("node-a-1".to_owned(), 50));
            json!({
                "apiVersion": "autoscaling.k8s.io/v1",
                "kind": "VerticalPodAutoscaler",
                "metadata": {"name": daemonset, "namespace": "monitoring",
                             "creationTimestamp": "2026-11-01T00:00:00Z"},
                "spec": {
                    "scope": "node",
                    "targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": daemonset},
                    "updatePolicy": {"updateMode": "Initial"},
                    "resourcePolicy": {"containerPolicies": [
                        {"containerName": "*", "maxAllowed": {"cpu": "2", "memory": "2Gi"}}
                    ]}
                },
                "status": {"recommendationGroups": groups}
            })
        })
        .collect()
}
