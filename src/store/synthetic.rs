//! Synthetic cluster state for benchmarks and load tests: many scoped VPAs
//! (a group per node, or per zone with labelled Nodes), shaped like real
//! ones, so figures at 5,000 or 50,000 nodes can be reproduced by anyone.

use serde_json::{json, Value};

/// `vpas` node-scoped VPAs in namespace `monitoring`, each for DaemonSet
/// `ds-<i>` (the first one for `node-exporter`, the DaemonSet of the captured
/// pod review), each with a group for `node-a-1` and `node-<n>` for n < `nodes`,
/// two containers (`node-exporter`, `kube-rbac-proxy`) per group.
#[must_use]
pub fn node_scoped_vpas(vpas: usize, nodes: usize) -> Vec<Value> {
    (0..vpas)
        .map(|i| {
            let daemonset = daemonset_name(i);
            let mut groups: Vec<Value> =
                (0..nodes).map(|n| group(&format!("node-{n}"), n)).collect();
            groups.push(group("node-a-1", 50));
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

/// The containers every group recommends for, in pod order.
pub const CONTAINERS: [&str; 2] = ["node-exporter", "kube-rbac-proxy"];

/// The targets of group number `n`, per container of [`CONTAINERS`]:
/// (millicores, MiB). They vary with `n`, as real groups differ from node
/// to node.
#[must_use]
pub fn group_targets(n: usize) -> [(usize, usize); 2] {
    [(100 + n % 400, 128 + n % 256), (10 + n % 20, 20 + n % 40)]
}

/// The group number [`zone_scoped_cluster`] gives VPA `vpa` for zone number
/// `zone` (`zone-<zone>`, and [`ZONES`] for `zone-a`).
#[must_use]
pub fn zone_group(vpa: usize, zone: usize) -> usize {
    vpa + zone * 37
}

/// The DaemonSet of VPA number `i`: `node-exporter` for the first,
/// `ds-<i>` for the others.
#[must_use]
pub fn daemonset_name(i: usize) -> String {
    if i == 0 {
        "node-exporter".to_owned()
    } else {
        format!("ds-{i}")
    }
}

/// One recommendation group with the targets of [`group_targets`].
fn group(scope_value: &str, n: usize) -> Value {
    let recommendations: Vec<Value> = CONTAINERS
        .iter()
        .zip(group_targets(n))
        .map(|(name, (cpu, memory))| {
            json!({"containerName": name,
                   "target": {"cpu": format!("{cpu}m"), "memory": format!("{memory}Mi")}})
        })
        .collect();
    json!({"scopeValue": scope_value, "containerRecommendations": recommendations})
}

/// The zones the zone-scoped cluster spreads its nodes over.
pub const ZONES: usize = 3;

/// `vpas` VPAs like [`node_scoped_vpas`] but with
/// `scope: topology.kubernetes.io/zone` and a group per zone, plus `nodes`
/// Node objects (`node-<n>` in `zone-<n % 3>`, and `node-a-1` in `zone-a`)
/// carrying the labels a real node has, so the Node store's filtering is
/// measured too.
#[must_use]
pub fn zone_scoped_cluster(vpas: usize, nodes: usize) -> Vec<Value> {
    const ZONE: &str = "topology.kubernetes.io/zone";
    let mut objects = node_scoped_vpas(vpas, 0);
    for (i, vpa) in objects.iter_mut().enumerate() {
        vpa["spec"]["scope"] = json!(ZONE);
        let groups: Vec<Value> = (0..ZONES)
            .map(|z| format!("zone-{z}"))
            .chain(["zone-a".to_owned()])
            .enumerate()
            .map(|(z, zone)| group(&zone, zone_group(i, z)))
            .collect();
        vpa["status"]["recommendationGroups"] = json!(groups);
    }
    let node = |name: String, zone: String| {
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m6i.2xlarge",
                "topology.kubernetes.io/region": "eu-west-1",
                ZONE: zone,
                "node-role.kubernetes.io/worker": "",
                "karpenter.sh/nodepool": "general-purpose",
                "karpenter.sh/capacity-type": "on-demand",
            }}
        })
    };
    objects.extend((0..nodes).map(|n| node(format!("node-{n}"), format!("zone-{}", n % ZONES))));
    objects.push(node("node-a-1".to_owned(), "zone-a".to_owned()));
    objects
}
