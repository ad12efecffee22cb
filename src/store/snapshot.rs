//! The immutable, pre-indexed view of the cluster a decision reads.
//!
//! Built from plain objects by the file loader and the kube watchers alike;
//! lookups are hash-map gets, so per-request cost does not grow with the
//! number of VPAs, nodes or params.

use super::convert::{limit_range_items, vpa_policy, ConvertError};
use super::crd::VerticalPodAutoscaler;
use crate::manifest::object_ref;
use crate::mutate::recommendation::{LimitRangeItem, VpaPolicy};
use crate::policy::{LabelSelector, PolicyInputs};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

type ObjectKey = (String, String, String, String); // apiVersion, kind, namespace, name

/// Everything nodescope knows about the cluster at one moment.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// (namespace, DaemonSet name) -> the node-scoped VPA that wins for it.
    vpas: HashMap<(String, String), Arc<VpaPolicy>>,
    limit_ranges: HashMap<String, Vec<LimitRangeItem>>,
    namespaces: HashMap<String, Value>,
    /// Param objects (Features, ConfigMaps, anything a binding names).
    params: HashMap<ObjectKey, Value>,
    /// (apiVersion, kind) -> keys, for selector lookups.
    params_by_kind: HashMap<(String, String), Vec<ObjectKey>>,
    /// Objects left out, with why; surfaced in logs and by the CLI.
    pub problems: Vec<ConvertError>,
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// A VPA qualifies for per-node mutation: `scope: node`, targeting a DaemonSet.
fn node_scoped_daemonset_target(vpa: &VerticalPodAutoscaler) -> Option<&str> {
    let target = vpa.spec.target_ref.as_ref()?;
    (vpa.spec.scope.as_deref() == Some("node")
        && target.kind == "DaemonSet"
        && target.api_version == "apps/v1"
        && !target.name.is_empty())
    .then_some(target.name.as_str())
}

impl Snapshot {
    /// Indexes `objects`. Objects that cannot be used are recorded in
    /// `problems` and left out; the rest still build a snapshot.
    pub fn build(objects: impl IntoIterator<Item = Value>) -> Self {
        let mut snapshot = Snapshot::default();
        // (ns, ds) -> (creationTimestamp, name, policy): oldest wins, then name.
        let mut chosen: HashMap<(String, String), (String, String, VpaPolicy)> = HashMap::new();
        for object in objects {
            let api_version = str_at(&object, "/apiVersion").to_owned();
            let kind = str_at(&object, "/kind").to_owned();
            match (api_version.as_str(), kind.as_str()) {
                ("autoscaling.k8s.io/v1", "VerticalPodAutoscaler") => {
                    snapshot.add_vpa(object, &mut chosen);
                }
                ("v1", "LimitRange") => snapshot.add_limit_range(object),
                ("v1", "Namespace") => {
                    let name = str_at(&object, "/metadata/name").to_owned();
                    snapshot.namespaces.insert(name, object);
                }
                _ => snapshot.add_param(api_version, kind, object),
            }
        }
        snapshot.vpas = chosen
            .into_iter()
            .map(|(key, (_, _, policy))| (key, Arc::new(policy)))
            .collect();
        snapshot
    }

    fn add_vpa(
        &mut self,
        object: Value,
        chosen: &mut HashMap<(String, String), (String, String, VpaPolicy)>,
    ) {
        let Some(vpa) = self.typed::<VerticalPodAutoscaler>(object) else {
            return;
        };
        let Some(target) = node_scoped_daemonset_target(&vpa) else {
            return;
        };
        let policy = match vpa_policy(&vpa) {
            Ok(policy) => policy,
            Err(e) => {
                self.problems.push(e);
                return;
            }
        };
        let created = vpa
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            // No timestamp (a file store): sorts after every real one.
            .unwrap_or_else(|| "~".into());
        let key = (policy.namespace.clone(), target.to_owned());
        let candidate = (created, policy.name.clone(), policy);
        match chosen.get(&key) {
            Some((c, n, _)) if (c, n) <= (&candidate.0, &candidate.1) => {}
            _ => {
                chosen.insert(key, candidate);
            }
        }
    }

    /// The object as its Rust type, or a recorded problem naming it.
    fn typed<T: serde::de::DeserializeOwned>(&mut self, object: Value) -> Option<T> {
        let reference = object_ref(&object);
        serde_json::from_value(object)
            .map_err(|e| {
                self.problems.push(ConvertError {
                    object: reference,
                    field: "(object)".into(),
                    reason: e.to_string(),
                });
            })
            .ok()
    }

    fn add_limit_range(&mut self, object: Value) {
        let Some(lr) = self.typed::<k8s_openapi::api::core::v1::LimitRange>(object) else {
            return;
        };
        let ns = lr.metadata.namespace.clone().unwrap_or_default();
        match limit_range_items(&lr) {
            Ok(items) => self.limit_ranges.entry(ns).or_default().extend(items),
            Err(e) => self.problems.push(e),
        }
    }

    fn add_param(&mut self, api_version: String, kind: String, object: Value) {
        let key = (
            api_version.clone(),
            kind.clone(),
            str_at(&object, "/metadata/namespace").to_owned(),
            str_at(&object, "/metadata/name").to_owned(),
        );
        self.params_by_kind
            .entry((api_version, kind))
            .or_default()
            .push(key.clone());
        self.params.insert(key, object);
    }

    /// The VPA that governs pods of DaemonSet `daemonset` in `namespace`.
    #[must_use]
    pub fn vpa_for(&self, namespace: &str, daemonset: &str) -> Option<&VpaPolicy> {
        // A tuple key of borrowed strs would need a custom Borrow impl; the two
        // short allocations are cheaper than the hashing of a 15 KB body.
        self.vpas
            .get(&(namespace.to_owned(), daemonset.to_owned()))
            .map(|p| &**p)
    }

    /// LimitRange items of `namespace` (empty when none).
    #[must_use]
    pub fn limit_ranges(&self, namespace: &str) -> &[LimitRangeItem] {
        self.limit_ranges.get(namespace).map_or(&[], Vec::as_slice)
    }

    /// How many DaemonSets have a node-scoped VPA; for logs and tests.
    #[must_use]
    pub fn vpa_count(&self) -> usize {
        self.vpas.len()
    }
}

impl PolicyInputs for Snapshot {
    fn namespace(&self, name: &str) -> Option<&Value> {
        self.namespaces.get(name)
    }

    fn param(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<&Value> {
        self.params.get(&(
            api_version.to_owned(),
            kind.to_owned(),
            namespace.unwrap_or("").to_owned(),
            name.to_owned(),
        ))
    }

    fn params_matching(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        selector: &LabelSelector,
    ) -> Vec<&Value> {
        let Some(keys) = self
            .params_by_kind
            .get(&(api_version.to_owned(), kind.to_owned()))
        else {
            return Vec::new();
        };
        keys.iter()
            .filter(|k| namespace.is_none_or(|ns| k.2 == ns))
            .filter_map(|k| self.params.get(k))
            .filter(|v| selector.matches_object(v))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vpa(name: &str, created: &str, scope: &str, kind: &str) -> Value {
        json!({
            "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
            "metadata": {"name": name, "namespace": "monitoring", "creationTimestamp": created},
            "spec": {"scope": scope, "targetRef": {"apiVersion": "apps/v1", "kind": kind, "name": "node-exporter"}}
        })
    }

    #[test]
    fn oldest_node_scoped_vpa_wins_then_the_name() {
        let snapshot = Snapshot::build([
            vpa("b-newer", "2026-02-01T00:00:00Z", "node", "DaemonSet"),
            vpa("c-old", "2026-01-01T00:00:00Z", "node", "DaemonSet"),
            vpa("a-old", "2026-01-01T00:00:00Z", "node", "DaemonSet"),
        ]);
        assert_eq!(
            snapshot
                .vpa_for("monitoring", "node-exporter")
                .map(|v| v.name.as_str()),
            Some("a-old")
        );
    }

    #[test]
    fn vpas_without_node_scope_or_daemonset_target_are_not_indexed() {
        let snapshot = Snapshot::build([
            vpa("whole", "2026-01-01T00:00:00Z", "", "DaemonSet"),
            vpa("deploy", "2026-01-01T00:00:00Z", "node", "Deployment"),
        ]);
        assert_eq!(snapshot.vpa_count(), 0);
    }

    #[test]
    fn bad_quantity_leaves_the_vpa_out_naming_object_and_field() {
        let mut bad = vpa("bad", "2026-01-01T00:00:00Z", "node", "DaemonSet");
        bad["status"] = json!({"recommendationGroups": [{"scopeValue": "n1",
            "containerRecommendations": [{"containerName": "c", "target": {"cpu": "lots"}}]}]});
        let snapshot = Snapshot::build([bad]);
        assert_eq!(snapshot.vpa_count(), 0);
        let problem = snapshot.problems[0].to_string();
        assert!(
            problem.starts_with("VerticalPodAutoscaler monitoring/bad: status.recommendationGroups[0].containerRecommendations[0].target.cpu: "),
            "{problem}"
        );
    }

    #[test]
    fn params_are_found_by_name_and_by_selector() {
        let snapshot = Snapshot::build([json!({
            "apiVersion": "featureflags.nodescope.dev/v1alpha1", "kind": "Feature",
            "metadata": {"name": "balloon-pods", "namespace": "kube-system", "labels": {"tier": "platform"}}
        })]);
        assert!(snapshot
            .param(
                "featureflags.nodescope.dev/v1alpha1",
                "Feature",
                Some("kube-system"),
                "balloon-pods"
            )
            .is_some());
        let selector: LabelSelector =
            serde_json::from_value(json!({"matchLabels": {"tier": "platform"}})).unwrap();
        assert_eq!(
            snapshot
                .params_matching(
                    "featureflags.nodescope.dev/v1alpha1",
                    "Feature",
                    None,
                    &selector
                )
                .len(),
            1
        );
    }
}
