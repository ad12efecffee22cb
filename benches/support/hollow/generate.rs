//! The generated cluster: `nodes` Nodes with a cloud provider's labels, 30
//! pods on each (4 from the 4 DaemonSets, 1 balloon, 25 of Deployments in
//! ten team namespaces), the 4 DaemonSets, a scoped VPA for each with one
//! recommendation group per scope value, and the bundle's own objects the
//! components read (CRDs, Features, gating policies, the balloon's
//! PriorityClass). Pods are about 3.5 KB of JSON each, as
//! bench/offline-memory.sh's are.

use serde_json::{json, Value};

pub const PODS_PER_NODE: usize = 30;
pub const ZONES: usize = 6;
const TYPES: &[&str] = &["m6i.4xlarge", "c6i.4xlarge", "r6i.4xlarge", "m7g.4xlarge"];
const TEAMS: usize = 10;
const BALLOON_NS: &str = "nodescope-balloons";
pub const BALLOON_PRIORITY: &str = "nodescope-balloon-priorityclass";

/// (namespace, name, containers, VPA scope).
pub const DAEMONSETS: &[(&str, &str, &[&str], &str)] = &[
    (
        "monitoring",
        "node-exporter",
        &["node-exporter", "kube-rbac-proxy"],
        "node",
    ),
    (
        "logging",
        "fluent-bit",
        &["fluent-bit"],
        "kubernetes.io/hostname",
    ),
    (
        "kube-system",
        "csi-node",
        &["csi-driver", "liveness-probe"],
        "topology.kubernetes.io/zone",
    ),
    (
        "kube-system",
        "cilium-agent",
        &["cilium-agent"],
        "node.kubernetes.io/instance-type",
    ),
];

pub fn node_name(i: usize) -> String {
    format!(
        "ip-10-{}-{}-{}.ec2.internal",
        i / 65536 % 256,
        i / 256 % 256,
        i % 256
    )
}

pub fn zone(i: usize) -> String {
    format!("us-east-1{}", (b'a' + (i % ZONES) as u8) as char)
}

pub fn instance_type(i: usize) -> &'static str {
    TYPES[i / ZONES % TYPES.len()]
}

pub fn node(i: usize) -> Value {
    let name = node_name(i);
    let zone = zone(i);
    let kind = instance_type(i);
    let condition = |t: &str, s: &str, reason: &str| {
        json!({"type": t, "status": s, "reason": reason, "message": format!("kubelet {reason}"),
               "lastHeartbeatTime": "2026-11-29T12:00:00Z", "lastTransitionTime": "2026-11-01T00:00:00Z"})
    };
    let size = json!({"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "100Gi",
                      "hugepages-1Gi": "0", "hugepages-2Mi": "0"});
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": format!("22222222-0000-0000-0000-{i:012}"),
            "resourceVersion": "1000", "creationTimestamp": "2026-11-01T00:00:00Z",
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": zone, "topology.kubernetes.io/region": "us-east-1",
                "failure-domain.beta.kubernetes.io/zone": zone, "failure-domain.beta.kubernetes.io/region": "us-east-1",
                "node.kubernetes.io/instance-type": kind, "beta.kubernetes.io/instance-type": kind,
                "eks.amazonaws.com/nodegroup": format!("group-{}", i % 8), "eks.amazonaws.com/capacityType": "ON_DEMAND",
                "topology.ebs.csi.aws.com/zone": zone, "k8s.io/cloud-provider-aws": "0123456789abcdef"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "nodescope.dev/usable-cpu": "12", "nodescope.dev/usable-memory": "48Gi"}},
        "spec": {"providerID": format!("aws:///{zone}/i-{i:017x}"), "podCIDR": "10.100.0.0/24"},
        "status": {"capacity": size, "allocatable": size,
            "conditions": [condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID"),
                condition("Ready", "True", "KubeletReady")],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"architecture": "amd64", "bootID": "b", "containerRuntimeVersion": "containerd://1.7.22",
                "kernelVersion": "6.1.112", "kubeProxyVersion": "", "kubeletVersion": "v1.33.1", "machineID": "m",
                "operatingSystem": "linux", "osImage": "Amazon Linux 2023", "systemUUID": "s"},
            "images": [{"names": ["registry.example/agent@sha256:0000", "registry.example/agent:1.2.3"], "sizeBytes": 12345678}]}})
}

/// A pod's owner: (kind, name, uid).
struct Owner<'a>(&'a str, &'a str, String);

#[allow(clippy::too_many_arguments)]
fn pod(
    namespace: &str,
    name: &str,
    node: &str,
    labels: Value,
    owner: Owner<'_>,
    containers: &[&str],
    requests: (&str, &str),
    priority: Option<&str>,
) -> Value {
    let res = json!({"requests": {"cpu": requests.0, "memory": requests.1},
                     "limits": {"memory": requests.1}});
    let specs: Vec<Value> = containers.iter().map(|c| json!({
        "name": c, "image": format!("registry.example/{c}:1.2.3"), "imagePullPolicy": "IfNotPresent",
        "args": ["--log-level=info", "--listen=:9100"],
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}],
        "ports": [{"containerPort": 9100, "name": "metrics", "protocol": "TCP"}],
        "resources": res,
        "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "name": "kube-api-access", "readOnly": true}],
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"})).collect();
    let statuses: Vec<Value> = containers.iter().enumerate().map(|(i, c)| json!({
        "name": c, "ready": true, "restartCount": 0, "started": true,
        "image": format!("registry.example/{c}:1.2.3"), "imageID": format!("registry.example/{c}@sha256:{:064}", i),
        "containerID": format!("containerd://{:064}", i), "resources": res,
        "allocatedResources": {"cpu": requests.0, "memory": requests.1},
        "state": {"running": {"startedAt": "2026-11-01T00:00:11Z"}}})).collect();
    let mut spec = json!({"nodeName": node, "serviceAccountName": "default", "containers": specs,
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
        "schedulerName": "default-scheduler", "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority",
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
        "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}]});
    if owner.0 == "DaemonSet" {
        spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}});
    }
    if let Some(p) = priority {
        spec["priorityClassName"] = json!(p);
    }
    let conditions: Vec<Value> = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .iter()
    .map(|t| json!({"type": t, "status": "True", "lastTransitionTime": "2026-11-01T00:00:12Z"}))
    .collect();
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "generateName": format!("{}-", owner.1),
            "uid": format!("00000000-{:04x}-0000-0000-{:012}", name.len(), fxhash(name)),
            "resourceVersion": "1000", "creationTimestamp": "2026-11-01T00:00:00Z", "labels": labels,
            "annotations": {"kubectl.kubernetes.io/default-container": containers[0]},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner.0, "name": owner.1, "uid": owner.2,
                "controller": true, "blockOwnerDeletion": true}]},
        "spec": spec,
        "status": {"phase": "Running", "qosClass": "Burstable", "hostIP": "10.0.0.1", "podIP": "10.1.0.1",
            "startTime": "2026-11-01T00:00:10Z",
            "conditions": conditions,
            "containerStatuses": statuses}})
}

fn fxhash(s: &str) -> u64 {
    s.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    }) % 1_000_000_000_000
}

fn ds_uid(d: usize) -> String {
    format!("11111111-0000-0000-0000-{d:012}")
}

/// The 30 pods of node `i`.
pub fn pods_of(i: usize) -> Vec<Value> {
    let node = node_name(i);
    let mut out = Vec::with_capacity(PODS_PER_NODE);
    for (d, (ns, ds, containers, _)) in DAEMONSETS.iter().enumerate() {
        let labels = json!({"app.kubernetes.io/name": ds, "controller-revision-hash": "5d8f7c9b4", "pod-template-generation": "3"});
        let name = format!("{ds}-{i:05x}");
        out.push(pod(
            ns,
            &name,
            &node,
            labels,
            Owner("DaemonSet", ds, ds_uid(d)),
            containers,
            ("100m", "128Mi"),
            Some("system-node-critical"),
        ));
    }
    // Every hundredth balloon is not at its size, so each pass resizes some.
    let cpu = if i % 100 == 0 { "3" } else { "4" };
    let labels = json!({"node.kubernetes.io/balloon": "true", "app.kubernetes.io/name": "balloon"});
    out.push(pod(
        BALLOON_NS,
        &format!("balloon-{i:05x}"),
        &node,
        labels,
        Owner(
            "ReplicaSet",
            "balloon-7c9d",
            "33333333-0000-0000-0000-000000000000".into(),
        ),
        &["balloon"],
        (cpu, "16Gi"),
        Some(BALLOON_PRIORITY),
    ));
    for k in 0..PODS_PER_NODE - DAEMONSETS.len() - 1 {
        let team = (i + k) % TEAMS;
        let app = format!("svc-{}", (i * 7 + k) % 40);
        let labels = json!({"app.kubernetes.io/name": app, "pod-template-hash": "6b7d8f9c5", "team": format!("team-{team}")});
        let name = format!("{app}-6b7d8f9c5-{i:05x}{k:02}");
        out.push(pod(
            &format!("team-{team}"),
            &name,
            &node,
            labels,
            Owner(
                "ReplicaSet",
                &format!("{app}-6b7d8f9c5"),
                format!("44444444-0000-0000-0000-{team:06}{k:06}"),
            ),
            &["app", "istio-proxy"],
            ("100m", "256Mi"),
            None,
        ));
    }
    out
}

pub fn namespaces() -> Vec<String> {
    let mut out: Vec<String> = [
        "default",
        "kube-system",
        "monitoring",
        "logging",
        "nodescope-system",
        BALLOON_NS,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    out.extend((0..TEAMS).map(|t| format!("team-{t}")));
    out
}

pub fn daemonset(d: usize, nodes: usize) -> Value {
    let (ns, name, containers, _) = DAEMONSETS[d];
    let specs: Vec<Value> = containers.iter().map(|c| json!({"name": c, "image": format!("registry.example/{c}:1.2.3"),
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "128Mi"}}})).collect();
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": ns, "uid": ds_uid(d), "resourceVersion": "1000", "generation": 3,
            "creationTimestamp": "2026-11-01T00:00:00Z", "labels": {"app.kubernetes.io/name": name}},
        "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {"metadata": {"labels": {"app.kubernetes.io/name": name}},
                "spec": {"containers": specs, "priorityClassName": "system-node-critical"}}},
        "status": {"currentNumberScheduled": nodes, "desiredNumberScheduled": nodes, "numberAvailable": nodes,
            "numberReady": nodes, "updatedNumberScheduled": nodes, "numberMisscheduled": 0, "observedGeneration": 3}})
}

/// The scope values of `scope` over `nodes` nodes.
fn scope_values(scope: &str, nodes: usize) -> Vec<String> {
    match scope {
        "node" | "kubernetes.io/hostname" => (0..nodes).map(node_name).collect(),
        "topology.kubernetes.io/zone" => (0..ZONES.min(nodes)).map(zone).collect(),
        _ => TYPES.iter().map(|t| t.to_string()).collect(),
    }
}

/// The VPA of DaemonSet `d`: recommendations other than the pods' 100m /
/// 128Mi, so the updater finds every pod to resize.
pub fn vpa(d: usize, nodes: usize) -> Value {
    let (ns, name, containers, scope) = DAEMONSETS[d];
    let recs = |cpu: &str, mem: &str| -> Vec<Value> {
        containers.iter().map(|c| json!({"containerName": c, "target": {"cpu": cpu, "memory": mem},
            "lowerBound": {"cpu": "50m", "memory": "64Mi"}, "upperBound": {"cpu": "1", "memory": "1Gi"},
            "uncappedTarget": {"cpu": cpu, "memory": mem}})).collect()
    };
    let groups: Vec<Value> = scope_values(scope, nodes).into_iter().enumerate()
        .map(|(i, v)| json!({"scopeValue": v, "containerRecommendations": recs(&format!("{}m", 150 + i % 50), "200Mi")}))
        .collect();
    json!({"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name, "namespace": ns, "uid": format!("55555555-0000-0000-0000-{d:012}"),
            "resourceVersion": "1000", "generation": 1, "creationTimestamp": "2026-11-01T00:00:00Z"},
        "spec": {"scope": scope, "targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name},
            "updatePolicy": {"updateMode": "InPlaceOrRecreate"},
            "resourcePolicy": {"containerPolicies": [{"containerName": "*", "minAllowed": {"cpu": "10m", "memory": "16Mi"},
                "maxAllowed": {"cpu": "2", "memory": "2Gi"}}]}},
        "status": {"conditions": [{"type": "RecommendationProvided", "status": "True", "lastTransitionTime": "2026-11-01T00:00:00Z"}],
            "recommendation": {"containerRecommendations": recs("150m", "200Mi")},
            "recommendationGroups": groups}})
}

/// The repository's YAML documents (CRDs, Features, policies) the
/// components read, parsed.
pub fn bundle() -> Vec<Value> {
    let texts = [
        include_str!("../../../manifests/components/vpa-crd/vpa-crd.yaml"),
        include_str!("../../../manifests/components/vpa-crd/vpa-checkpoint-crd.yaml"),
        include_str!("../../../manifests/components/recommender/checkpoint-crd.yaml"),
        include_str!("../../../policies/feature-crd.yaml"),
        include_str!("../../../policies/feature-gates.yaml"),
        include_str!("../../../policies/balloon-priorityclass.yaml"),
        include_str!("../../../policies/balloon-pods.yaml"),
        include_str!("../../../policies/balloon-resize.yaml"),
        include_str!("../../../policies/node-resizer.yaml"),
        include_str!("../../../policies/vpa-scope.yaml"),
        include_str!("../../../policies/vpa-scope-portable.yaml"),
        include_str!("../../../src/features/owned.yaml"),
    ];
    let mut out = Vec::new();
    for text in texts {
        let docs: Vec<Value> =
            serde_saphyr::from_multiple(text).unwrap_or_else(|e| panic!("bundle YAML: {e}"));
        for mut doc in docs.into_iter().filter(|d| d.is_object()) {
            if doc["kind"] == "Feature" {
                let desired = doc["spec"]["desired"].clone();
                doc["status"] = json!({"state": desired, "observedGeneration": 1});
                doc["metadata"]["generation"] = json!(1);
            }
            out.push(doc);
        }
    }
    out
}
