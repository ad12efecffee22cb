//! The immutable, pre-indexed view of the cluster a decision reads.
//!
//! Built from plain objects by the file loader and the kube watchers alike;
//! lookups are hash-map gets, so per-request cost does not grow with the
//! number of VPAs, nodes or params.

use super::convert::{ConvertError, Interner};
use super::entry::Entry;
use crate::params::PolicyInputs;
use crate::selector::LabelSelector;
use crate::vpa::{LimitRangeItem, VpaPolicy};
use crate::vpa::{NodeLabel, NodeLabels, SCOPE_FEATURE};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// A node's labels as interned (key, value) pairs.
type LabelPairs = [(Arc<str>, Arc<str>)];

/// Nested maps keyed by owned strings, so lookups by `&str` never allocate.
type ByName<T> = HashMap<String, T>;

/// Param objects of one apiVersion and kind: by namespace and name, and in
/// load order for selector lookups.
#[derive(Debug, Default)]
struct KindParams {
    by_name: ByName<ByName<Arc<Value>>>,
    all: Vec<(String, Arc<Value>)>,
}

/// Everything nodescope knows about the cluster at one moment.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// namespace -> DaemonSet name -> the node-scoped VPA that wins for it.
    vpas: ByName<ByName<Arc<VpaPolicy>>>,
    /// (namespace, VPA name) -> `metadata.resourceVersion` of each scoped VPA.
    vpa_versions: HashMap<(String, String), Arc<str>>,
    limit_ranges: ByName<Vec<LimitRangeItem>>,
    namespaces: ByName<Arc<Value>>,
    /// Every node the store knows, by its interned name.
    nodes: HashSet<Arc<str>>,
    /// label key -> node -> value, for the keys some scoped VPA names only:
    /// a label scope reads one key, and 5,000 nodes must not cost 5,000
    /// Nodes. The names and values are the entries' own interned strings,
    /// so the index adds no allocation per node, only its tables.
    node_labels: HashMap<Arc<str>, HashMap<Arc<str>, Arc<str>>>,
    /// The label keys the node listing kept (`None`: every key, as a file
    /// store has whole Nodes). Lookups of other keys say "unknown node"
    /// rather than "absent": the label may just not be listed yet.
    covered: Option<super::nodes::LabelKeys>,
    /// apiVersion -> kind -> params (Features, ConfigMaps, anything a
    /// binding names).
    params: ByName<ByName<KindParams>>,
    /// The state of Feature [`SCOPE_FEATURE`] when it is `TurningOff` or
    /// `Off`: read once here, so the request path only tests an option.
    scope_gate: Option<Box<str>>,
    /// Objects left out, with why; surfaced in logs and by the CLI.
    pub problems: Vec<ConvertError>,
}

impl Snapshot {
    /// Indexes `objects`. Objects that cannot be used are recorded in
    /// `problems` and left out; the rest still build a snapshot.
    pub fn build(objects: impl IntoIterator<Item = Value>) -> Self {
        let mut interner = Interner::default();
        let entries: Vec<Entry> = objects
            .into_iter()
            .map(|o| Entry::from_value(o, &mut interner))
            .collect();
        Self::from_entries(&entries)
    }

    /// Indexes converted objects. Only `Arc`s are cloned, so this is cheap
    /// enough to run after every burst of watch events.
    pub fn from_entries<'e>(entries: impl IntoIterator<Item = &'e Entry>) -> Self {
        Self::from_entries_covering(entries, None)
    }

    /// As [`Snapshot::from_entries`], for Nodes whose labels were filtered
    /// down to `covered` keys when they were listed.
    pub fn from_entries_covering<'e>(
        entries: impl IntoIterator<Item = &'e Entry>,
        covered: Option<super::nodes::LabelKeys>,
    ) -> Self {
        let mut snapshot = Snapshot {
            covered,
            ..Snapshot::default()
        };
        // (ns, ds) -> (creationTimestamp, name, policy): oldest wins, then name.
        let mut chosen: HashMap<(&str, &str), (&str, &Arc<VpaPolicy>)> = HashMap::new();
        let mut nodes: Vec<(&Arc<str>, &LabelPairs)> = Vec::new();
        for entry in entries {
            match entry {
                Entry::Vpa {
                    daemonset,
                    created,
                    resource_version,
                    policy,
                } => {
                    snapshot.vpa_versions.insert(
                        (policy.namespace.clone(), policy.name.clone()),
                        resource_version.clone(),
                    );
                    let key = (policy.namespace.as_str(), daemonset.as_str());
                    match chosen.get(&key) {
                        Some((c, p))
                            if (*c, p.name.as_str()) <= (created.as_str(), &policy.name) => {}
                        _ => {
                            chosen.insert(key, (created, policy));
                        }
                    }
                }
                Entry::LimitRange { namespace, items } => snapshot
                    .limit_ranges
                    .entry(namespace.clone())
                    .or_default()
                    .extend(items.iter().cloned()),
                Entry::Namespace { name, object } => {
                    snapshot.namespaces.insert(name.clone(), object.clone());
                }
                Entry::Node { name, labels } => nodes.push((name, labels)),
                Entry::Param {
                    api_version,
                    kind,
                    namespace,
                    name,
                    object,
                } => {
                    let params = snapshot
                        .params
                        .entry(api_version.clone())
                        .or_default()
                        .entry(kind.clone())
                        .or_default();
                    params
                        .by_name
                        .entry(namespace.clone())
                        .or_default()
                        .insert(name.clone(), object.clone());
                    params.all.push((namespace.clone(), object.clone()));
                }
                Entry::Ignored => {}
                Entry::Problem(e) => snapshot.problems.push(e.clone()),
            }
        }
        let keys: Vec<&str> = {
            let mut keys: Vec<&str> = chosen
                .values()
                .filter_map(|(_, policy)| policy.scope.label_key())
                .collect();
            keys.sort_unstable();
            keys.dedup();
            keys
        };
        snapshot.nodes.reserve(nodes.len());
        for (name, labels) in nodes {
            snapshot.nodes.insert(name.clone());
            for (key, value) in labels {
                if keys.binary_search(&&**key).is_ok() {
                    snapshot
                        .node_labels
                        .entry(key.clone())
                        .or_insert_with(|| HashMap::with_capacity(snapshot.nodes.capacity()))
                        .insert(name.clone(), value.clone());
                }
            }
        }
        for ((namespace, daemonset), (_, policy)) in chosen {
            snapshot
                .vpas
                .entry(namespace.to_owned())
                .or_default()
                .insert(daemonset.to_owned(), policy.clone());
        }
        snapshot.scope_gate = snapshot
            .feature_state(SCOPE_FEATURE)
            .filter(|s| matches!(*s, "TurningOff" | "Off"))
            .map(Box::from);
        snapshot
    }

    /// The state of a Feature (`status.state`), if the store has it.
    #[must_use]
    pub fn feature_state(&self, (namespace, name): (&str, &str)) -> Option<&str> {
        self.param(
            "featureflags.nodescope.dev/v1alpha1",
            "Feature",
            Some(namespace),
            name,
        )?
        .pointer("/status/state")?
        .as_str()
    }

    /// The `metadata.resourceVersion` of scoped VPA `namespace/name` as
    /// the store last saw it.
    #[must_use]
    pub fn vpa_resource_version(&self, namespace: &str, name: &str) -> Option<&str> {
        self.vpa_versions
            .get(&(namespace.to_owned(), name.to_owned()))
            .map(|v| &**v)
    }

    /// The VPA that governs pods of DaemonSet `daemonset` in `namespace`.
    #[must_use]
    pub fn vpa_for(&self, namespace: &str, daemonset: &str) -> Option<&VpaPolicy> {
        self.vpas.get(namespace)?.get(daemonset).map(|p| &**p)
    }

    /// LimitRange items of `namespace` (empty when none).
    #[must_use]
    pub fn limit_ranges(&self, namespace: &str) -> &[LimitRangeItem] {
        self.limit_ranges.get(namespace).map_or(&[], Vec::as_slice)
    }

    /// How many Nodes the store knows; for logs and tests.
    #[must_use]
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the node listing has every label key a scoped VPA names.
    #[must_use]
    pub fn node_labels_complete(&self) -> bool {
        self.covered.as_ref().is_none_or(|covered| {
            self.scope_label_keys()
                .iter()
                .all(|key| covered.contains(key))
        })
    }

    /// The label keys the scoped VPAs name, which the Node store keeps.
    #[must_use]
    pub fn scope_label_keys(&self) -> std::collections::BTreeSet<Arc<str>> {
        self.vpas
            .values()
            .flat_map(HashMap::values)
            .filter_map(|policy| match &policy.scope {
                crate::vpa::ScopeKey::Label(key) => Some(key.clone()),
                crate::vpa::ScopeKey::NodeName => None,
            })
            .collect()
    }

    /// How many DaemonSets have a scoped VPA; for logs and tests.
    #[must_use]
    pub fn vpa_count(&self) -> usize {
        self.vpas.values().map(HashMap::len).sum()
    }

    fn kind_params(&self, api_version: &str, kind: &str) -> Option<&KindParams> {
        self.params.get(api_version)?.get(kind)
    }
}

impl NodeLabels for Snapshot {
    fn scope_gate(&self) -> Option<&str> {
        self.scope_gate.as_deref()
    }

    fn node_label(&self, node: &str, key: &str) -> NodeLabel<'_> {
        if self.covered.as_ref().is_some_and(|c| !c.contains(key)) {
            return NodeLabel::UnknownNode;
        }
        match self
            .node_labels
            .get(key)
            .and_then(|by_node| by_node.get(node))
        {
            Some(value) => NodeLabel::Value(value),
            None if self.nodes.contains(node) => NodeLabel::Absent,
            None => NodeLabel::UnknownNode,
        }
    }
}

impl PolicyInputs for Snapshot {
    fn namespace(&self, name: &str) -> Option<&Value> {
        self.namespaces.get(name).map(|v| &**v)
    }

    fn param(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<&Value> {
        self.kind_params(api_version, kind)?
            .by_name
            .get(namespace.unwrap_or(""))?
            .get(name)
            .map(|v| &**v)
    }

    fn params_matching(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        selector: &LabelSelector,
    ) -> Vec<&Value> {
        let Some(params) = self.kind_params(api_version, kind) else {
            return Vec::new();
        };
        params
            .all
            .iter()
            .filter(|(ns, _)| namespace.is_none_or(|n| ns == n))
            .map(|(_, v)| &**v)
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
    fn vpas_without_scope_or_daemonset_target_are_not_indexed() {
        let snapshot = Snapshot::build([
            vpa("whole", "2026-01-01T00:00:00Z", "", "DaemonSet"),
            vpa("deploy", "2026-01-01T00:00:00Z", "node", "Deployment"),
            vpa(
                "zonal-deploy",
                "2026-01-01T00:00:00Z",
                "topology.kubernetes.io/zone",
                "Deployment",
            ),
        ]);
        assert_eq!(snapshot.vpa_count(), 0);
    }

    #[test]
    fn a_label_scoped_vpa_for_a_daemonset_is_indexed_with_its_key() {
        let snapshot = Snapshot::build([vpa(
            "zonal",
            "2026-01-01T00:00:00Z",
            "topology.kubernetes.io/zone",
            "DaemonSet",
        )]);
        assert_eq!(
            snapshot
                .vpa_for("monitoring", "node-exporter")
                .map(|v| &v.scope),
            Some(&crate::vpa::ScopeKey::Label(
                "topology.kubernetes.io/zone".into()
            ))
        );
    }

    #[test]
    fn an_unparsable_target_is_no_recommendation_for_its_container_alone() {
        let mut bad = vpa("bad", "2026-01-01T00:00:00Z", "node", "DaemonSet");
        bad["status"] = json!({"recommendationGroups": [{"scopeValue": "n1",
            "containerRecommendations": [
                {"containerName": "c", "target": {"cpu": "lots"}},
                {"containerName": "d", "target": {"cpu": "1"}}]}]});
        let snapshot = Snapshot::build([bad]);
        assert!(snapshot.problems.is_empty(), "{:?}", snapshot.problems);
        let vpa = snapshot
            .vpa_for("monitoring", "node-exporter")
            .expect("the VPA loads");
        let group = vpa.recommendations.group("n1").expect("its group");
        assert_eq!(
            group.unusable("c"),
            Some(
                "its cpu target \"lots\" does not parse: quantity \"lots\" is not a number \
                 followed by an optional suffix (e.g. \"1.5\", \"250m\", \"12e6\")"
            )
        );
        assert_eq!(group.unusable("d"), None);
        assert_eq!(group.target("d").count(), 1);
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
