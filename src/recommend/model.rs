//! The recommender's memory: one aggregate per (VPA, container, scope
//! value), and one [`ContainerState`] per pod container. Upstream's `ClusterState`
//! (vertical-pod-autoscaler/pkg/recommender/model/cluster.go) keys its
//! aggregates by pod labels; here the key gains the scope value of the pod's
//! node, resolved by the webhook's own [`crate::vpa::Placement::resolve`].
//!
//! Pure: pods and an interval's input go in, nothing is read or written
//! outside. The pods are kept here, not beside: at 500,000 DaemonSet pods a
//! second copy would cost more than the aggregates.

mod observe;

use super::aggregate::{AggregateContainerState, HistoryConfig};
use super::container::{ContainerState, PeakConfig};
use super::input::TrackedPod;
use k8s_openapi::jiff::Timestamp;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// How samples are aggregated (upstream's aggregation flags).
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    pub history: HistoryConfig,
    pub peaks: PeakConfig,
    /// `--memory-aggregation-interval` × `--memory-aggregation-interval-count`:
    /// an aggregate without a sample for this long is dropped.
    pub window_length_ms: i64,
    /// `--memory-aggregation-interval-count`, for a VPA that overrides only
    /// the interval.
    pub interval_count: i64,
    /// `--feature-gates PerVPAConfig=true`: the VPAs' own OOM bump and
    /// memory window ([`super::per_vpa`]) apply.
    pub per_vpa_config: bool,
}

/// `namespace/name` of a VPA.
pub type VpaKey = Arc<str>;

/// The model's hash maps (foldhash: short string keys, a million lookups an
/// interval; randomly seeded per process).
pub type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The model's large maps (aggregates by scope value, pods): entries in one
/// vector kept at its length ([`History::observe`] shrinks it), beside a
/// table of indexes. A hash table of 128-byte slots sits between 44% and
/// 87% full, so it holds up to twice the memory of its entries.
pub type DenseMap<K, V> = indexmap::IndexMap<K, V, foldhash::fast::RandomState>;

/// Gives back a dense map's spare capacity once it exceeds a quarter: a map
/// that grew by doubling holds up to twice its entries.
fn shrink<K, V>(map: &mut DenseMap<K, V>) {
    if map.capacity() > map.len() + map.len() / 4 + 8 {
        map.shrink_to_fit();
    }
}

/// The history of one container of one VPA: an aggregate per scope value.
/// The DaemonSet-wide state behind `status.recommendation` is their merge,
/// taken when the status is computed, as upstream merges a VPA's
/// aggregation keys (`AggregateStateByContainerName`); AEP-10031's groups
/// are exactly such keys.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContainerHistory {
    pub groups: DenseMap<Arc<str>, AggregateContainerState>,
}

/// A pod of a DaemonSet in a watched namespace: what it is (as last
/// listed) and where its samples went.
#[derive(Clone, Debug, Default)]
pub struct PodHistory {
    /// Its namespace (also the key's first part, kept apart so that placing
    /// 500,000 pods an interval splits no strings).
    pub namespace: Arc<str>,
    /// The DaemonSet that controls it.
    pub daemonset: Arc<str>,
    /// Its node, once bound.
    pub node: Option<Arc<str>>,
    /// (name, memory request bytes, state), in spec order.
    pub containers: Box<[(Arc<str>, i64, ContainerState)]>,
    /// OOM kills its statuses show (usually none).
    pub oom_kills: Box<[(Arc<str>, Timestamp)]>,
    /// The VPA and scope value of its samples at the last interval; `None`
    /// when no scoped VPA targets its DaemonSet or its node is unknown.
    pub vpa: Option<VpaKey>,
    pub value: Option<Arc<str>>,
}

/// Equal when the histories are: what the pod is comes from the watch (or
/// the store files), not from a checkpoint.
impl PartialEq for PodHistory {
    fn eq(&self, other: &Self) -> bool {
        self.vpa == other.vpa && self.value == other.value && self.containers == other.containers
    }
}

/// What one interval did, for metrics and logs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ingested {
    pub samples: u64,
    pub dropped: u64,
    pub ooms: u64,
}

/// The whole model. Pods are kept up to date by [`History::upsert_pod`]
/// and [`History::remove_pod`] (from a watch, or once from store files);
/// [`History::observe`] then takes an interval's usage.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// By VPA, then container name.
    pub vpas: FastMap<VpaKey, BTreeMap<Arc<str>, ContainerHistory>>,
    /// By `namespace/name`.
    pub pods: DenseMap<String, PodHistory>,
    /// Scope values, container, DaemonSet and node names and VPA keys,
    /// shared by every key that uses them (5,000 node names under 100
    /// VPAs are stored once).
    names: Names,
    /// Reused for `namespace/name` lookups, so a lookup allocates nothing.
    key: String,
}

#[derive(Clone, Debug, Default)]
struct Names(FastMap<Arc<str>, ()>);

impl Names {
    fn get(&mut self, s: &str) -> Arc<str> {
        if let Some((k, ())) = self.0.get_key_value(s) {
            return k.clone();
        }
        let k: Arc<str> = Arc::from(s);
        self.0.insert(k.clone(), ());
        k
    }
}

/// Equal when the histories are: the interned names are a cache.
impl PartialEq for History {
    fn eq(&self, other: &Self) -> bool {
        self.vpas == other.vpas && self.pods == other.pods
    }
}

impl History {
    /// The history of `container` of `vpa`, created empty if new.
    pub fn container_entry(&mut self, vpa: &VpaKey, container: &str) -> &mut ContainerHistory {
        let container = self.names.get(container);
        self.vpas
            .entry(vpa.clone())
            .or_default()
            .entry(container)
            .or_default()
    }

    /// A scope value, shared with every other key that has it.
    pub fn intern_value(&mut self, value: &str) -> Arc<str> {
        self.names.get(value)
    }

    /// Puts back a pod read from a checkpoint: where its samples went and
    /// its containers' windows. What the pod is comes later, from the
    /// watch or the store ([`Self::upsert_pod`] keeps the windows).
    pub fn restore_pod(
        &mut self,
        vpa: &VpaKey,
        key: &str,
        value: &str,
        containers: Vec<(String, i64, ContainerState)>,
    ) {
        let value = self.names.get(value);
        let containers = containers
            .into_iter()
            .map(|(name, memory, state)| (self.names.get(&name), memory, state))
            .collect();
        let namespace = self.names.get(key.split_once('/').map_or("", |(ns, _)| ns));
        self.pods.insert(
            key.to_owned(),
            PodHistory {
                namespace,
                containers,
                vpa: Some(vpa.clone()),
                value: Some(value),
                ..PodHistory::default()
            },
        );
    }

    /// Takes a restored history's aggregates and windows, for the pods this
    /// one knows (a pod the checkpoint has but the watch does not is gone).
    pub fn adopt(&mut self, restored: History) {
        self.vpas = restored.vpas;
        for pod in self.pods.values_mut() {
            pod.vpa = None;
            pod.value = None;
            for (_, _, state) in pod.containers.iter_mut() {
                *state = ContainerState::default();
            }
        }
        for (key, old) in restored.pods {
            let Some(pod) = self.pods.get_mut(&key) else {
                continue;
            };
            pod.vpa = old.vpa;
            pod.value = old.value;
            for (name, _, state) in pod.containers.iter_mut() {
                if let Some((_, _, s)) = old.containers.iter().find(|(n, _, _)| n == name) {
                    *state = *s;
                }
            }
        }
    }

    /// Forgets every aggregate and window (this replica no longer leads),
    /// keeping what the pods are.
    pub fn forget(&mut self) {
        self.adopt(History::default());
    }

    /// Adds or updates a pod from a listing or a watch event. A pod whose
    /// containers are the same keeps their windows.
    pub fn upsert_pod(&mut self, pod: &TrackedPod) {
        let names = &mut self.names;
        let containers: Vec<(Arc<str>, i64)> = pod
            .containers
            .iter()
            .map(|(name, memory)| (names.get(name), *memory))
            .collect();
        let oom_kills = pod
            .oom_kills
            .iter()
            .map(|(name, at)| (names.get(name), *at))
            .collect();
        let daemonset = names.get(&pod.daemonset);
        let namespace = names.get(&pod.namespace);
        let node = pod.node.as_deref().map(|n| names.get(n));
        set_key(&mut self.key, &pod.namespace, &pod.name);
        let entry = match self.pods.get_mut(self.key.as_str()) {
            Some(entry) => entry,
            None => self.pods.entry(self.key.clone()).or_default(),
        };
        let same = entry.containers.len() == containers.len()
            && entry
                .containers
                .iter()
                .zip(&containers)
                .all(|((a, _, _), (b, _))| a == b);
        if same {
            for ((_, memory, _), (_, request)) in entry.containers.iter_mut().zip(&containers) {
                *memory = *request;
            }
        } else {
            entry.containers = containers
                .into_iter()
                .map(|(name, memory)| {
                    let state = entry
                        .containers
                        .iter()
                        .find(|(n, _, _)| *n == name)
                        .map(|(_, _, s)| *s)
                        .unwrap_or_default();
                    (name, memory, state)
                })
                .collect();
        }
        entry.namespace = namespace;
        entry.daemonset = daemonset;
        entry.node = node;
        entry.oom_kills = oom_kills;
    }

    /// Forgets a deleted pod.
    pub fn remove_pod(&mut self, namespace: &str, name: &str) {
        set_key(&mut self.key, namespace, name);
        self.pods.swap_remove(self.key.as_str());
    }

    /// Keeps only the pods for which `keep(namespace, name)` holds (a
    /// namespace listed again, or no longer watched).
    pub fn retain_pods(&mut self, mut keep: impl FnMut(&str, &str) -> bool) {
        self.pods.retain(|key, _| {
            let (namespace, name) = key.split_once('/').unwrap_or(("", key));
            keep(namespace, name)
        });
    }

    /// How many aggregates (one per VPA, container and scope value) are held.
    #[must_use]
    pub fn keys(&self) -> usize {
        self.vpas
            .values()
            .flat_map(BTreeMap::values)
            .map(|c| c.groups.len())
            .sum()
    }

    /// How many placed pods each VPA has (upstream's `PodCount`, behind the
    /// `NoPodsMatched` condition).
    #[must_use]
    pub fn pod_counts(&self) -> HashMap<VpaKey, usize> {
        let mut counts = HashMap::new();
        for vpa in self.pods.values().filter_map(|p| p.vpa.as_ref()) {
            *counts.entry(vpa.clone()).or_default() += 1;
        }
        counts
    }
}

fn set_key(key: &mut String, namespace: &str, name: &str) {
    key.clear();
    key.push_str(namespace);
    key.push('/');
    key.push_str(name);
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
