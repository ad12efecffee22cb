//! Faults the simulated kubelet can be told to show, for the fault steps:
//!
//! - a node whose balloon's every resize is answered `Infeasible`, as a
//!   kubelet that cannot give the pod what it asks answers (its runtime
//!   refusing the new cgroup limits, say), whatever the Node's allocatable
//!   says; the node's other pods are resized as before;
//! - pods OOM-killed: each container's `lastState` is `terminated` with
//!   reason `OOMKilled`, its `restartCount` goes up, and the pod is not
//!   Ready; it stays so (the container keeps being killed) until it is
//!   given more memory than it had when it was killed.

use super::pods::{current, desired, key, lock, Kubelet};
use super::{bytes, status};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

type Key = (String, String);

/// One pod's OOM kill.
#[derive(Clone, Debug)]
struct Oom {
    finished_at: String,
    restarts: i64,
    /// Not Ready while its allocated memory is at most this (bytes).
    below: i64,
}

#[derive(Default)]
pub(crate) struct Faults {
    infeasible: Mutex<HashSet<String>>,
    ooms: Mutex<HashMap<Key, Oom>>,
}

impl Faults {
    pub(super) fn infeasible(&self, node: &str, pod: &Pod) -> bool {
        let balloon = pod
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key("node.kubernetes.io/balloon"));
        balloon && lock(&self.infeasible).contains(node)
    }

    /// Writes the pod's OOM kill into a status about to be written.
    pub(super) fn mark(&self, key: &Key, status: &mut Value) {
        let Some(oom) = lock(&self.ooms).get(key).cloned() else {
            return;
        };
        let memory = status["status"]["containerStatuses"][0]["allocatedResources"]["memory"]
            .as_str()
            .map_or(0, bytes);
        let ready = memory > oom.below;
        for cs in status["status"]["containerStatuses"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            cs["restartCount"] = json!(oom.restarts);
            cs["ready"] = json!(ready);
            cs["lastState"] = json!({"terminated": {"reason": "OOMKilled", "exitCode": 137,
                "startedAt": oom.finished_at, "finishedAt": oom.finished_at}});
        }
        if !ready {
            for c in status["status"]["conditions"]
                .as_array_mut()
                .into_iter()
                .flatten()
            {
                if c["type"] == "Ready" || c["type"] == "ContainersReady" {
                    c["status"] = json!("False");
                    c["reason"] = json!("ContainersNotReady");
                    c["lastTransitionTime"] = json!(oom.finished_at);
                }
            }
        }
    }
}

impl Kubelet {
    /// Answers every resize of `node`'s balloon `Infeasible` (`on`), or
    /// judges them again as the node's room says.
    pub fn set_infeasible(&self, node: &str, on: bool) {
        let mut nodes = lock(&self.shared.faults.infeasible);
        if on {
            nodes.insert(node.to_owned());
        } else {
            nodes.remove(node);
        }
    }

    /// OOM-kills every container of `pods` now; returns when each pod's
    /// status says so.
    pub async fn oom_kill(&self, pods: &[Pod]) {
        let finished_at = super::nodes::now();
        for pod in pods {
            let key = key(pod);
            let memory = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.first())
                .and_then(|c| c.allocated_resources.as_ref())
                .and_then(|a| a.get("memory"))
                .map_or(0, |q| bytes(&q.0));
            let restarts = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.first())
                .map_or(0, |c| i64::from(c.restart_count));
            lock(&self.shared.faults.ooms).insert(
                key.clone(),
                Oom {
                    finished_at: finished_at.clone(),
                    restarts: restarts + 1,
                    below: memory,
                },
            );
            let containers = desired(pod);
            let keep = |name: &str, requests: &Value, limits: &Value| {
                current(pod, name).unwrap_or_else(|| {
                    (
                        requests.clone(),
                        json!({"requests": requests, "limits": limits}),
                    )
                })
            };
            let status = status::whole(pod, &containers, keep, None);
            let api: Api<Pod> = Api::namespaced(self.shared.client.clone(), &key.0);
            assert!(
                self.shared.write(&api, &key, status).await,
                "{}/{}: the OOM kill not written",
                key.0,
                key.1
            );
        }
    }
}
