//! The recommender's memory: one aggregate per (VPA, container, scope
//! value), and one [`ContainerState`] per pod container. Upstream's `ClusterState`
//! (vertical-pod-autoscaler/pkg/recommender/model/cluster.go) keys its
//! aggregates by pod labels; here the key gains the scope value of the pod's
//! node, resolved by the webhook's own [`Placement::resolve`].
//!
//! Pure: an interval's input goes in, nothing is read or written outside.

use super::aggregate::{AggregateContainerState, HistoryConfig};
use super::container::{ContainerState, PeakConfig, Sink};
use super::input::{PodUsage, ScopedVpa, TrackedPod};
use crate::mutate::scope::{NodeLabels, Placement};
use k8s_openapi::jiff::Timestamp;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// How samples are aggregated (upstream's aggregation flags).
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    pub history: HistoryConfig,
    pub peaks: PeakConfig,
    /// `--memory-aggregation-interval` × `--memory-aggregation-interval-count`:
    /// an aggregate without a sample for this long is dropped.
    pub window_length_ms: i64,
}

/// `namespace/name` of a VPA.
pub type VpaKey = Arc<str>;

/// The history of one container of one VPA: an aggregate per scope value.
/// The DaemonSet-wide state behind `status.recommendation` is their merge,
/// taken when the status is computed, as upstream merges a VPA's
/// aggregation keys (`AggregateStateByContainerName`); AEP-10031's groups
/// are exactly such keys.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContainerHistory {
    pub groups: HashMap<Arc<str>, AggregateContainerState>,
}

/// A tracked pod: where its samples go, and its containers' states.
#[derive(Clone, Debug)]
pub struct PodHistory {
    pub vpa: VpaKey,
    pub value: Arc<str>,
    /// (name, memory request bytes, state), in spec order.
    pub containers: Vec<(Arc<str>, i64, ContainerState)>,
    /// The interval that last listed the pod; a pod not listed is gone.
    seen: u64,
}

/// Equal when the histories are: `seen` is bookkeeping.
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

/// The whole model.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// By VPA, then container name.
    pub vpas: HashMap<VpaKey, BTreeMap<Arc<str>, ContainerHistory>>,
    /// By `namespace/name`.
    pub pods: HashMap<String, PodHistory>,
    /// Scope values, container names and VPA keys, shared by every key that
    /// uses them (5,000 node names under 100 VPAs are stored once).
    names: HashMap<Arc<str>, ()>,
    /// Intervals observed, to stamp the pods each one lists.
    intervals: u64,
    /// Reused for `namespace/name` lookups, so a lookup allocates nothing.
    key: String,
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
        let container = self.intern(container);
        self.vpas
            .entry(vpa.clone())
            .or_default()
            .entry(container)
            .or_default()
    }

    /// A scope value, shared with every other key that has it.
    pub fn intern_value(&mut self, value: &str) -> Arc<str> {
        self.intern(value)
    }

    /// Puts back a pod read from a checkpoint.
    pub fn restore_pod(
        &mut self,
        vpa: &VpaKey,
        key: &str,
        value: &str,
        containers: Vec<(String, i64, ContainerState)>,
    ) {
        let value = self.intern(value);
        let containers = containers
            .into_iter()
            .map(|(name, memory, state)| (self.intern(&name), memory, state))
            .collect();
        self.pods.insert(
            key.to_owned(),
            PodHistory {
                vpa: vpa.clone(),
                value,
                containers,
                seen: self.intervals,
            },
        );
    }

    fn intern(&mut self, s: &str) -> Arc<str> {
        if let Some((k, ())) = self.names.get_key_value(s) {
            return k.clone();
        }
        let k: Arc<str> = Arc::from(s);
        self.names.insert(k.clone(), ());
        k
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

    /// Takes one interval: the pods as listed now (their nodes, requests
    /// and OOM kills), then the usage samples, then the kills, in upstream's
    /// order (`LoadPods`, `LoadRealTimeMetrics`, the OOM channel), then
    /// forgets pods that are gone and aggregates that expired.
    pub fn observe(
        &mut self,
        config: &ModelConfig,
        vpas: &[ScopedVpa],
        pods: &[TrackedPod],
        nodes: &impl NodeLabels,
        usage: &[PodUsage],
        now: Timestamp,
    ) -> Ingested {
        let mut stats = Ingested::default();
        self.intervals += 1;
        let mut by_target: HashMap<(&str, &str), (VpaKey, &ScopedVpa)> = HashMap::new();
        for v in vpas {
            let key = self.intern(&format!("{}/{}", v.namespace, v.name));
            by_target.insert((v.namespace.as_str(), v.daemonset.as_str()), (key, v));
        }
        let mut key = std::mem::take(&mut self.key);
        for pod in pods {
            let Some((vpa_key, vpa)) =
                by_target.get(&(pod.namespace.as_str(), pod.daemonset.as_str()))
            else {
                continue;
            };
            let Placement::Group { value, .. } =
                Placement::resolve(&vpa.scope, pod.node.as_deref(), nodes)
            else {
                continue;
            };
            set_key(&mut key, &pod.namespace, &pod.name);
            self.track(&key, vpa_key, value, pod);
        }
        let stamp = self.intervals;
        self.pods.retain(|_, p| p.seen == stamp);
        for sample in usage {
            set_key(&mut key, &sample.namespace, &sample.name);
            self.add_usage(config, &key, sample, &mut stats);
        }
        for pod in pods.iter().filter(|p| !p.oom_kills.is_empty()) {
            set_key(&mut key, &pod.namespace, &pod.name);
            // A kill later than this interval is not known yet: offline, a
            // store file shows the pod as it ended up, while the replay is
            // still earlier in its week.
            for (container, finished_at) in pod.oom_kills.iter().filter(|(_, at)| *at <= now) {
                if self.record_oom(config, &key, container, *finished_at) {
                    stats.ooms += 1;
                }
            }
        }
        self.key = key;
        self.collect_garbage(config, now);
        stats
    }

    /// Marks a pod listed this interval. A pod seen before on the same
    /// scope value with the same containers only gets its stamp; otherwise
    /// it is (re)registered, and a move to another scope value starts its
    /// containers afresh: their window peaks belong to the old group.
    fn track(&mut self, key: &str, vpa: &VpaKey, value: &str, pod: &TrackedPod) {
        let stamp = self.intervals;
        if let Some(entry) = self.pods.get_mut(key) {
            let same = entry.vpa == *vpa
                && *entry.value == *value
                && entry.containers.len() == pod.containers.len()
                && entry
                    .containers
                    .iter()
                    .zip(&pod.containers)
                    .all(|((a, _, _), (b, _))| **a == **b);
            if same {
                for ((_, memory, _), (_, request)) in entry.containers.iter_mut().zip(&pod.containers) {
                    *memory = *request;
                }
                entry.seen = stamp;
                return;
            }
        }
        let value = self.intern(value);
        let containers: Vec<_> = pod
            .containers
            .iter()
            .map(|(name, memory)| (self.intern(name), *memory))
            .collect();
        let entry = self
            .pods
            .entry(key.to_owned())
            .or_insert_with(|| PodHistory {
                vpa: vpa.clone(),
                value: value.clone(),
                containers: Vec::new(),
                seen: stamp,
            });
        if entry.vpa != *vpa || entry.value != value {
            entry.vpa = vpa.clone();
            entry.value = value.clone();
            entry.containers.clear();
        }
        let states: Vec<_> = containers
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
        entry.containers = states;
        entry.seen = stamp;
        // upstream creates the aggregate when the container is first seen,
        // before any sample: an aggregate with no samples still counts for
        // the DaemonSet (it gets the minimum recommendation).
        let by_container = self.vpas.entry(vpa.clone()).or_default();
        for (name, _, _) in &entry.containers {
            by_container
                .entry(name.clone())
                .or_default()
                .groups
                .entry(value.clone())
                .or_default();
        }
    }

    fn add_usage(&mut self, config: &ModelConfig, key: &str, sample: &PodUsage, stats: &mut Ingested) {
        let Some(pod) = self.pods.get_mut(key) else {
            return;
        };
        let Some(containers) = self.vpas.get_mut(&pod.vpa) else {
            return;
        };
        for (name, cpu, memory) in &sample.containers {
            // Samples of containers the spec does not list (init containers,
            // ephemeral ones) are dropped, as upstream drops them.
            let Some((container, _, state)) =
                pod.containers.iter_mut().find(|(n, _, _)| **n == **name)
            else {
                stats.dropped += 2;
                continue;
            };
            let history = containers.entry(container.clone()).or_default();
            let group = match history.groups.get_mut(&pod.value) {
                Some(group) => group,
                None => history.groups.entry(pod.value.clone()).or_default(),
            };
            let mut sink = Sink {
                config: &config.history,
                group,
            };
            for taken in [
                state.add_cpu_sample(&mut sink, *cpu, sample.timestamp),
                state.add_memory_sample(&mut sink, &config.peaks, *memory, sample.timestamp, false),
            ] {
                if taken {
                    stats.samples += 1;
                } else {
                    stats.dropped += 1;
                }
            }
        }
    }

    fn record_oom(
        &mut self,
        config: &ModelConfig,
        key: &str,
        container: &str,
        finished_at: Timestamp,
    ) -> bool {
        let Some(pod) = self.pods.get_mut(key) else {
            return false;
        };
        let Some((name, request, state)) =
            pod.containers.iter_mut().find(|(n, _, _)| **n == *container)
        else {
            return false;
        };
        let group = self
            .vpas
            .entry(pod.vpa.clone())
            .or_default()
            .entry(name.clone())
            .or_default()
            .groups
            .entry(pod.value.clone())
            .or_default();
        let mut sink = Sink {
            config: &config.history,
            group,
        };
        state.record_oom_once(&mut sink, &config.peaks, finished_at, *request)
    }

    /// upstream `garbageCollectAggregateCollectionStates`: an aggregate whose
    /// last sample is a whole aggregation window old goes, and so does an
    /// empty one no tracked pod feeds; a VPA left with nothing goes too.
    /// Only empty aggregates (rare: a container listed but not yet sampled)
    /// need the pods, so the index of what pods feed is built only for them.
    fn collect_garbage(&mut self, config: &ModelConfig, now: Timestamp) {
        let now_ms = now.as_millisecond();
        let expired = |a: &AggregateContainerState| {
            a.last_sample_start()
                .is_some_and(|last| now_ms - last.as_millisecond() >= config.window_length_ms)
        };
        let any_empty = self
            .vpas
            .values()
            .flat_map(BTreeMap::values)
            .any(|c| c.groups.values().any(AggregateContainerState::is_empty));
        let mut fed: HashSet<(&str, &str, &str)> = HashSet::new();
        if any_empty {
            for pod in self.pods.values() {
                for (name, _, _) in &pod.containers {
                    fed.insert((&pod.vpa, name, &pod.value));
                }
            }
        }
        for (vpa, containers) in &mut self.vpas {
            for (name, history) in containers.iter_mut() {
                history.groups.retain(|value, a| {
                    !(expired(a) || (a.is_empty() && !fed.contains(&(&**vpa, &**name, &**value))))
                });
            }
            containers.retain(|_, h| !h.groups.is_empty());
        }
        self.vpas.retain(|_, containers| !containers.is_empty());
    }

    /// How many tracked pods each VPA has (upstream's `PodCount`, behind
    /// the `NoPodsMatched` condition).
    #[must_use]
    pub fn pod_counts(&self) -> HashMap<VpaKey, usize> {
        let mut counts = HashMap::new();
        for pod in self.pods.values() {
            *counts.entry(pod.vpa.clone()).or_default() += 1;
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
