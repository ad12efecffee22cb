//! The simulated Nodes: created with their labels and allocatable, given a
//! Ready status, and kept alive by a Lease renewed every 10 s (the kubelet's
//! default renew interval; the node lifecycle controller marks a Node
//! `Ready=Unknown` 50 s after the last renewal).

use futures::{stream, StreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const ZONE: &str = "topology.kubernetes.io/zone";
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
pub const HOSTNAME: &str = "kubernetes.io/hostname";

/// What a simulated Node is.
#[derive(Clone, Debug)]
pub struct NodeShape {
    pub name: String,
    pub zone: String,
    pub instance_type: String,
    /// Allocatable cpu (millicores) and memory (bytes).
    pub cpu: i64,
    pub memory: i64,
}

impl NodeShape {
    /// Node `i`: zones a, b, c in turn; `m5.large` (4 cpu, 8Gi) and
    /// `m5.xlarge` (8 cpu, 16Gi) in turn.
    pub fn numbered(i: usize) -> NodeShape {
        let zone = ["zone-a", "zone-b", "zone-c"][i % 3];
        let (instance_type, cpu, gib) = if i % 2 == 0 {
            ("m5.large", 4000, 8)
        } else {
            ("m5.xlarge", 8000, 16)
        };
        NodeShape {
            name: format!("node-{i:04}"),
            zone: zone.to_owned(),
            instance_type: instance_type.to_owned(),
            cpu,
            memory: gib << 30,
        }
    }

    fn object(&self) -> Value {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.name, "labels": {
            HOSTNAME: self.name, ZONE: self.zone, INSTANCE_TYPE: self.instance_type,
            "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}}})
    }

    fn status(&self, index: usize) -> Value {
        let now = now();
        let resources = json!({"cpu": format!("{}m", self.cpu), "memory": self.memory.to_string(),
            "pods": "110", "ephemeral-storage": "100Gi"});
        let condition = |kind: &str, status: &str, reason: &str| {
            json!({"type": kind, "status": status, "reason": reason, "message": "simulated",
                "lastHeartbeatTime": now, "lastTransitionTime": now})
        };
        json!({"status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID"),
                condition("Ready", "True", "KubeletReady"),
            ],
            "addresses": [{"type": "InternalIP", "address": format!("10.1.{}.{}", index / 250, index % 250 + 1)},
                {"type": "Hostname", "address": self.name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": self.name, "systemUUID": self.name, "bootID": "1",
                "kernelVersion": "6.1.0", "osImage": "simulated", "containerRuntimeVersion": "containerd://2.0.0",
                "kubeletVersion": "v1.36.2", "kubeProxyVersion": "", "operatingSystem": "linux",
                "architecture": "amd64"}
        }})
    }
}

pub fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn micro_now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S.%6fZ")
        .to_string()
}

/// The Nodes the kubelet runs, by name.
#[derive(Clone, Default)]
pub struct Nodes {
    shapes: Arc<Mutex<BTreeMap<String, (usize, NodeShape)>>>,
}

impl Nodes {
    pub fn get(&self, name: &str) -> Option<NodeShape> {
        self.lock().get(name).map(|(_, s)| s.clone())
    }

    pub fn all(&self) -> Vec<NodeShape> {
        self.lock().values().map(|(_, s)| s.clone()).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (usize, NodeShape)>> {
        self.shapes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers Node `index` alone: a node joining the running cluster.
    pub async fn join(&self, client: &Client, index: usize) -> NodeShape {
        let mut joined = self.register(client, index, index + 1).await;
        joined.remove(0)
    }

    /// Registers Nodes `from..to` (their objects, status and Leases), as
    /// kubelets starting at once would.
    pub async fn register(&self, client: &Client, from: usize, to: usize) -> Vec<NodeShape> {
        let shapes: Vec<(usize, NodeShape)> =
            (from..to).map(|i| (i, NodeShape::numbered(i))).collect();
        // Known before the objects exist, as a kubelet runs before it
        // registers its Node: a DaemonSet pod bound to the Node while the
        // rest of the registration is under way is started, not ignored
        // (fault 6 once left a joining node's pod without a status so).
        {
            let mut map = self.lock();
            for (i, shape) in &shapes {
                map.insert(shape.name.clone(), (*i, shape.clone()));
            }
        }
        stream::iter(shapes.clone())
            .for_each_concurrent(32, |(i, shape)| {
                let client = client.clone();
                async move {
                    let nodes: Api<Node> = Api::all(client.clone());
                    let node: Node =
                        serde_json::from_value(shape.object()).unwrap_or_else(|e| panic!("{e}"));
                    nodes
                        .create(&PostParams::default(), &node)
                        .await
                        .unwrap_or_else(|e| panic!("creating Node {}: {e}", shape.name));
                    nodes
                        .patch_status(
                            &shape.name,
                            &PatchParams::default(),
                            &Patch::Merge(shape.status(i)),
                        )
                        .await
                        .unwrap_or_else(|e| panic!("Node {} status: {e}", shape.name));
                    renew(&client, &shape.name, true).await;
                }
            })
            .await;
        shapes.into_iter().map(|(_, s)| s).collect()
    }

    /// Renews every Node's Lease every 10 s until the task is dropped. A
    /// round starts every 10 s, not 10 s after the last one ended: at
    /// N = 5,000 a loaded apiserver took long enough over a round that
    /// "sleep, then renew" let Leases age past the controller-manager's
    /// 50 s grace, and their Nodes went `Ready=Unknown`.
    pub fn heartbeat(&self, client: Client) -> tokio::task::JoinHandle<()> {
        let nodes = self.clone();
        tokio::spawn(async move {
            let mut rounds = tokio::time::interval(Duration::from_secs(10));
            rounds.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            rounds.tick().await;
            loop {
                rounds.tick().await;
                let names: Vec<String> = nodes.lock().keys().cloned().collect();
                stream::iter(names)
                    .for_each_concurrent(64, |name| {
                        let client = client.clone();
                        async move { renew(&client, &name, false).await }
                    })
                    .await;
            }
        })
    }
}

/// Creates or renews the Node's Lease, as the kubelet's heartbeat.
async fn renew(client: &Client, node: &str, create: bool) {
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let spec =
        json!({"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": micro_now()});
    if create {
        let lease: Lease = serde_json::from_value(json!({"apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease", "metadata": {"name": node, "namespace": "kube-node-lease"}, "spec": spec}))
        .unwrap_or_else(|e| panic!("{e}"));
        match leases.create(&PostParams::default(), &lease).await {
            Ok(_) => return,
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("creating Lease {node}: {e}"),
        }
    }
    // A missed beat is only late: the next one comes in 10 s.
    let _ = leases
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": spec})),
        )
        .await;
}
