//! The scenario's workloads and the oracle the steps hold pods to.
//!
//! Three DaemonSets in namespace `workloads`, each with a VPA: `agent`
//! (scope `topology.kubernetes.io/zone`, InPlaceOrRecreate), `exporter`
//! (scope `kubernetes.io/hostname`, InPlaceOrRecreate) and `logger`
//! (unscoped: nodescope leaves it alone). Their templates request less
//! than any recommendation's lower bound, so every scoped pod is outside
//! its recommended range and the updater acts on it at once (upstream's
//! rule: a pod inside the range is updated only after 12 h).

use crate::kubelet::{bytes, milli};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams};
use kube::Client;
use serde_json::{json, Value};
use std::collections::BTreeMap;

pub const NS: &str = "workloads";
pub const SCOPED: &[&str] = &["agent", "exporter"];
pub const ALL: &[&str] = &["agent", "exporter", "logger"];
/// Every template's requests.
pub const TEMPLATE: (&str, &str) = ("10m", "16Mi");

pub fn scope(ds: &str) -> Option<&'static str> {
    match ds {
        "agent" => Some("topology.kubernetes.io/zone"),
        "exporter" => Some("kubernetes.io/hostname"),
        _ => None,
    }
}

pub fn daemonset(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"selector": {"matchLabels": {"app": name}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 2, "automountServiceAccountToken": false,
                    "enableServiceLinks": false,
                    "containers": [{"name": name, "image": format!("registry.example/{name}:1"),
                        "resources": {"requests": {"cpu": TEMPLATE.0, "memory": TEMPLATE.1}},
                        "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"},
                            {"resourceName": "memory", "restartPolicy": "NotRequired"}]}]}}}})
}

pub fn vpa(name: &str) -> Value {
    let mut spec = json!({"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name},
        "updatePolicy": {"updateMode": "InPlaceOrRecreate"}});
    if let Some(scope) = scope(name) {
        spec["scope"] = json!(scope);
    }
    json!({"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name, "namespace": NS}, "spec": spec})
}

/// The VPAs' recommendations as the apiserver holds them: per VPA, the
/// target (cpu millicores, memory bytes) of each group, and of the
/// VPA-wide recommendation under the key `""`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Targets(pub BTreeMap<String, BTreeMap<String, (i64, i64)>>);

fn target(row: &Value) -> Option<(i64, i64)> {
    let t = &row["containerRecommendations"][0]["target"];
    Some((milli(t["cpu"].as_str()?), bytes(t["memory"].as_str()?)))
}

impl Targets {
    pub async fn read(client: &Client) -> Targets {
        let api: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            NS,
            &crate::support::cluster::api_resource(&vpa("agent")),
        );
        let mut out = BTreeMap::new();
        for vpa in api
            .list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("listing VPAs: {e}"))
        {
            let name = vpa.metadata.name.clone().unwrap_or_default();
            let status = &vpa.data["status"];
            let mut rows = BTreeMap::new();
            if let Some(t) = target(&status["recommendation"]) {
                rows.insert(String::new(), t);
            }
            for group in status["recommendationGroups"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if let (Some(value), Some(t)) = (group["scopeValue"].as_str(), target(group)) {
                    rows.insert(value.to_owned(), t);
                }
            }
            out.insert(name, rows);
        }
        Targets(out)
    }

    /// What a pod of `ds` on a node with `labels` must request: its
    /// group's target; the VPA-wide one when its group is missing (the
    /// default `--missing-node-recommendation=aggregate`); the template
    /// for `logger`.
    pub fn expected(&self, ds: &str, labels: &BTreeMap<String, String>) -> (i64, i64) {
        let template = (milli(TEMPLATE.0), bytes(TEMPLATE.1));
        let Some(key) = scope(ds) else {
            return template;
        };
        let rows = self.0.get(ds);
        let value = labels.get(key).cloned().unwrap_or_default();
        rows.and_then(|r| r.get(&value).or_else(|| r.get("")))
            .copied()
            .unwrap_or(template)
    }

    pub fn groups(&self, ds: &str) -> usize {
        self.0
            .get(ds)
            .map_or(0, |r| r.keys().filter(|k| !k.is_empty()).count())
    }
}

/// A pod's (spec requests, status allocated, status resources) of its one
/// container, as (cpu millicores, memory bytes).
pub fn pod_resources(pod: &Pod) -> [(i64, i64); 3] {
    let spec = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.resources.as_ref())
        .and_then(|r| r.requests.clone());
    let status = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first());
    let allocated = status.and_then(|s| s.allocated_resources.clone());
    let actual = status
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.clone());
    let pair = |list: Option<
        BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >| {
        let list = list.unwrap_or_default();
        (
            list.get("cpu").map_or(-1, |q| milli(&q.0)),
            list.get("memory").map_or(-1, |q| bytes(&q.0)),
        )
    };
    [pair(spec), pair(allocated), pair(actual)]
}

pub fn daemonset_of(pod: &Pod) -> String {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "DaemonSet")
        .map(|o| o.name.clone())
        .unwrap_or_default()
}

/// The node a DaemonSet pod was made for: the required node affinity's
/// `metadata.name` matchField, as the DaemonSet controller writes it.
pub fn affinity_node(pod: &Pod) -> Option<String> {
    let terms = pod
        .spec
        .as_ref()?
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?;
    terms
        .node_selector_terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|f| f.key == "metadata.name")
        .and_then(|f| f.values.as_ref()?.first().cloned())
}
