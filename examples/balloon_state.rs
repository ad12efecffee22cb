//! The balloon controller's memory, held and per pass, counted by the
//! allocator, for the figures in BENCHMARKS.md (issue 43).
//!
//! `cargo run --example balloon_state -- [NODES] [PODS_PER_NODE] [before|after]`
//! (5,000 nodes, 4 pods a node and both states unless given: one balloon and three workload pods a node, as the
//! system suite runs them). It feeds generated Nodes and Pods, shaped as a
//! kubelet and a Deployment write them (labels, managedFields, conditions,
//! images), through two states one after the other:
//!
//! - before: whole objects kept as a reflector keeps them (`Arc<K>` by key),
//!   and a pass that turns both stores into JSON and parses them again
//!   (`plan_objects`), as the controller did until issue 43;
//! - after: the controller's watch handlers ([`NodeWatch`], [`PodWatch`]),
//!   and a pass over what they keep ([`plan`]).
//!
//! Each prints the bytes held once the list is in, and the peak above that
//! during one pass. Run it under `/usr/bin/time -v` for the process's RSS.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::watcher::Event;
use nodescope::balloon::pods::{Balloon, ContainerSize, Held, NodePod};
use nodescope::balloon::watched::{lock, NodeWatch, PodWatch, Watched, WatchedNode};
use nodescope::balloon::{plan, plan_objects, BalloonConfig, NodePlan};
use nodescope::throttle::Throttle;
use serde_json::{json, Value};
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The system allocator, counting the bytes live and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; the
// counters are only added to and read.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        // SAFETY: the caller's layout, as GlobalAlloc::alloc requires.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Starts a peak count from what is live now.
fn reset_peak() {
    PEAK.store(live(), Ordering::Relaxed);
}

fn node(i: usize) -> Value {
    let name = format!("worker-{i:05}");
    let images: Vec<Value> = (0..25)
        .map(|k| {
            json!({"names": [format!("registry.example.com/team/app-{k}@sha256:{:064x}", k * 7919),
                             format!("registry.example.com/team/app-{k}:v1.{k}.0")],
                   "sizeBytes": 50_000_000 + k * 1_000_000})
        })
        .collect();
    let condition = |kind: &str, status: &str, reason: &str| {
        json!({"type": kind, "status": status, "reason": reason,
               "message": format!("kubelet reports {kind} is {status}"),
               "lastHeartbeatTime": "2026-11-29T10:00:00Z", "lastTransitionTime": "2026-11-28T10:00:00Z"})
    };
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name, "uid": format!("6f1c{i:08}-0000-4000-8000-000000000000"), "resourceVersion": "123456",
            "creationTimestamp": "2026-11-28T10:00:00Z",
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                       "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
                       "node.kubernetes.io/instance-type": "m6i.2xlarge", "topology.kubernetes.io/region": "eu-west-1",
                       "topology.kubernetes.io/zone": "eu-west-1a", "nodepool": "general"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                            "nodescope.dev/usable-fraction": "0.75",
                            "nodescope.dev/balloon-state": "Settled",
                            "nodescope.dev/balloon-reason": "the balloon holds cpu 2, memory 8Gi as asked"},
            "managedFields": [
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2026-11-29T10:00:00Z",
                 "fieldsType": "FieldsV1", "subresource": "status",
                 "fieldsV1": {"f:status": {"f:allocatable": {"f:cpu": {}, "f:memory": {}, "f:pods": {}},
                              "f:capacity": {"f:cpu": {}, "f:memory": {}, "f:pods": {}},
                              "f:conditions": {"k:{\"type\":\"Ready\"}": {"f:lastHeartbeatTime": {}, "f:status": {}}},
                              "f:images": {}, "f:nodeInfo": {"f:bootID": {}}}}},
                {"manager": "nodescope", "operation": "Update", "apiVersion": "v1", "time": "2026-11-29T10:00:00Z",
                 "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {"f:annotations": {"f:nodescope.dev/balloon-reason": {},
                                                                "f:nodescope.dev/balloon-state": {}}}}}
            ]
        },
        "spec": {"podCIDR": format!("10.{}.{}.0/24", i / 256, i % 256), "providerID": format!("aws:///eu-west-1a/i-{i:017x}")},
        "status": {
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi", "hugepages-2Mi": "0", "hugepages-1Gi": "0"},
            "allocatable": {"cpu": "7910m", "memory": "31Gi", "pods": "110", "ephemeral-storage": "92Gi", "hugepages-2Mi": "0", "hugepages-1Gi": "0"},
            "conditions": [condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                           condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                           condition("PIDPressure", "False", "KubeletHasSufficientPID"),
                           condition("Ready", "True", "KubeletReady")],
            "addresses": [{"type": "InternalIP", "address": format!("10.0.{}.{}", i / 256, i % 256)},
                          {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": format!("{i:032x}"), "systemUUID": format!("{i:032x}"), "bootID": format!("{i:032x}"),
                         "kernelVersion": "6.1.0-27-amd64", "osImage": "Debian GNU/Linux 12 (bookworm)",
                         "containerRuntimeVersion": "containerd://2.1.0", "kubeletVersion": "v1.36.2",
                         "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
            "images": images
        }
    })
}

fn pod(node: usize, k: usize) -> Value {
    let node_name = format!("worker-{node:05}");
    let balloon = k == 0;
    let (namespace, name, owner) = if balloon {
        ("kube-system", format!("balloon-{node_name}"), "DaemonSet")
    } else {
        ("shop", format!("web-7d9c5b6f4-{node:05}{k}"), "ReplicaSet")
    };
    let mut labels = json!({"app": "web", "pod-template-hash": "7d9c5b6f4"});
    if balloon {
        labels = json!({"app": "balloon", "node.kubernetes.io/balloon": "true"});
    }
    let (cpu, memory) = if balloon {
        ("1977m", "7936Mi")
    } else {
        ("250m", "512Mi")
    };
    let condition = |kind: &str| json!({"type": kind, "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-11-29T09:00:00Z"});
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": namespace, "uid": format!("a1b2{node:08}-{k:04}-4000-8000-000000000000"),
            "resourceVersion": "234567", "creationTimestamp": "2026-11-29T09:00:00Z",
            "generateName": "web-7d9c5b6f4-", "labels": labels,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner, "name": "web-7d9c5b6f4",
                                 "uid": "0000aaaa-0000-4000-8000-000000000000", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": "2026-11-29T09:00:00Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {"f:app": {}}},
                     "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {"f:image": {}, "f:resources": {"f:requests": {}}}}}}},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2026-11-29T09:00:05Z",
                 "fieldsType": "FieldsV1", "subresource": "status",
                 "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {}, "f:startTime": {}}}}
            ]
        },
        "spec": {
            "nodeName": node_name, "serviceAccountName": "default", "restartPolicy": "Always",
            "schedulerName": "default-scheduler", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "priority": 0, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority",
            "containers": [{
                "name": "web", "image": "registry.example.com/shop/web:v2.3.1", "imagePullPolicy": "IfNotPresent",
                "ports": [{"containerPort": 8080, "protocol": "TCP", "name": "http"}],
                "env": [{"name": "MODE", "value": "production"}, {"name": "LOG_LEVEL", "value": "info"},
                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
                "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}},
                "volumeMounts": [{"name": "kube-api-access-abcde", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"
            }],
            "volumes": [{"name": "kube-api-access-abcde", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
        },
        "status": {
            "phase": "Running", "qosClass": "Burstable", "startTime": "2026-11-29T09:00:01Z",
            "hostIP": "10.0.0.1", "hostIPs": [{"ip": "10.0.0.1"}], "podIP": "10.1.0.5", "podIPs": [{"ip": "10.1.0.5"}],
            "conditions": [condition("PodReadyToStartContainers"), condition("Initialized"), condition("Ready"),
                           condition("ContainersReady"), condition("PodScheduled")],
            "containerStatuses": [{"name": "web", "ready": true, "started": true, "restartCount": 0,
                "image": "registry.example.com/shop/web:v2.3.1", "imageID": format!("registry.example.com/shop/web@sha256:{:064x}", 42),
                "containerID": format!("containerd://{:064x}", node * 10 + k),
                "state": {"running": {"startedAt": "2026-11-29T09:00:03Z"}},
                "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}}}]
        }
    })
}

fn typed<K: serde::de::DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("a generated object reads")
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Whole objects by key, and a pass through JSON, as until issue 43.
fn before(nodes: usize, per_node: usize, config: &BalloonConfig) -> Vec<NodePlan> {
    let pods = nodes * per_node;
    let base = live();
    let mut node_store: HashMap<String, Arc<Node>> = HashMap::new();
    for i in 0..nodes {
        let n: Node = typed(node(i));
        node_store.insert(n.metadata.name.clone().unwrap_or_default(), Arc::new(n));
    }
    let node_bytes = live() - base;
    let mut pod_store: HashMap<String, Arc<Pod>> = HashMap::new();
    for i in 0..nodes {
        for k in 0..per_node {
            let p: Pod = typed(pod(i, k));
            let key = format!(
                "{}/{}",
                p.metadata.namespace.as_deref().unwrap_or_default(),
                p.metadata.name.as_deref().unwrap_or_default()
            );
            pod_store.insert(key, Arc::new(p));
        }
    }
    let pod_bytes = live() - base - node_bytes;
    reset_peak();
    let before_pass = live();
    let mut objects = Vec::new();
    for n in node_store.values() {
        let mut v = serde_json::to_value(&**n).expect("serializes");
        v["kind"] = "Node".into();
        objects.push(v);
    }
    for p in pod_store.values() {
        let mut v = serde_json::to_value(&**p).expect("serializes");
        v["kind"] = "Pod".into();
        objects.push(v);
    }
    let old_plans = plan_objects(&objects, config).expect("readable");
    drop(objects);
    let old_peak = PEAK.load(Ordering::Relaxed) - before_pass;
    println!(
        "before: whole objects {:.1} MiB held ({} bytes a node, {} a pod); a pass peaks {:.1} MiB above that",
        mib(node_bytes + pod_bytes),
        node_bytes / nodes,
        pod_bytes / pods.max(1),
        mib(old_peak)
    );
    old_plans
}

fn main() {
    let mut args = std::env::args().skip(1);
    let nodes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5_000);
    let per_node: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(4);
    let pods = nodes * per_node;
    let only = args.next();
    let run = |which: &str| only.as_deref().is_none_or(|o| o == which);
    let config = BalloonConfig::default();
    println!(
        "{nodes} nodes, {pods} pods; one Node is {} bytes of JSON, one Pod {} (a balloon {})",
        serde_json::to_vec(&node(0)).map_or(0, |v| v.len()),
        serde_json::to_vec(&pod(0, 1)).map_or(0, |v| v.len()),
        serde_json::to_vec(&pod(0, 0)).map_or(0, |v| v.len()),
    );

    let old_plans = if run("before") {
        before(nodes, per_node, &config)
    } else {
        Vec::new()
    };
    if !run("after") {
        return;
    }
    println!(
        "kept inline: a NodePod {} bytes (of which what it holds {}), a balloon's extra {} \
         (+ {} a container), a WatchedNode {}",
        std::mem::size_of::<NodePod>(),
        std::mem::size_of::<Held>(),
        std::mem::size_of::<Balloon>(),
        std::mem::size_of::<ContainerSize>(),
        std::mem::size_of::<WatchedNode>(),
    );
    // After: the controller's watch handlers and its pass.
    let base = live();
    let state = Mutex::new(Watched::default());
    let throttle = Throttle::new();
    let mut node_watch = NodeWatch::default();
    node_watch.on(Event::Init, &state, &throttle);
    for i in 0..nodes {
        node_watch.on(Event::InitApply(typed(node(i))), &state, &throttle);
    }
    node_watch.on(Event::InitDone, &state, &throttle);
    let node_bytes = live() - base;
    let mut pod_watch = PodWatch::default();
    pod_watch.on(Event::Init, &state, &throttle);
    for i in 0..nodes {
        for k in 0..per_node {
            pod_watch.on(Event::InitApply(typed(pod(i, k))), &state, &throttle);
        }
    }
    pod_watch.on(Event::InitDone, &state, &throttle);
    let pod_bytes = live() - base - node_bytes;
    reset_peak();
    let before_pass = live();
    let new_plans = {
        let s = lock(&state);
        plan(s.nodes.values().map(|n| &n.node), &s.pods, &config)
    };
    let new_peak = PEAK.load(Ordering::Relaxed) - before_pass;
    println!(
        "after: compact state {:.1} MiB held ({} bytes a node, {} a pod); a pass peaks {:.1} MiB above that",
        mib(node_bytes + pod_bytes),
        node_bytes / nodes,
        pod_bytes / pods.max(1),
        mib(new_peak)
    );
    if !run("before") {
        return;
    }
    let same = old_plans == new_plans;
    println!("{} plans, the same both ways: {same}", new_plans.len());
    if !same {
        std::process::exit(1);
    }
}
