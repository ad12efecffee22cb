//! The recommender's memory: one aggregate per (VPA, container, scope
//! value), one DaemonSet-wide aggregate per (VPA, container), and one
//! [`ContainerState`] per pod container. Upstream's `ClusterState`
//! (vertical-pod-autoscaler/pkg/recommender/model/cluster.go) keys its
//! aggregates by pod labels; here the key gains the scope value of the pod's
//! node, resolved by the webhook's own [`Placement::resolve`].
//!
//! Pure: an interval's input goes in, nothing is read or written outside.

use super::aggregate::{AggregateContainerState, HistoryConfig};
use super::container::{ContainerState, PeakConfig, Sinks};
use super::input::{PodUsage, ScopedVpa, TrackedPod};
use crate::mutate::scope::{NodeLabels, Placement};
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
}

/// `namespace/name` of a VPA.
pub type VpaKey = Arc<str>;

/// The history of one container of one VPA.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContainerHistory {
    /// Every sample of the DaemonSet's pods: `status.recommendation`.
    pub wide: AggregateContainerState,
    /// Samples by scope value: `status.recommendationGroups`.
    pub groups: HashMap<Arc<str>, AggregateContainerState>,
}

/// A tracked pod: where its samples go, and its containers' states.
#[derive(Clone, Debug, PartialEq)]
pub struct PodHistory {
    pub vpa: VpaKey,
    pub value: Arc<str>,
    /// (name, memory request bytes, state), in spec order.
    pub containers: Vec<(Arc<str>, i64, ContainerState)>,
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
    /// Scope values and container names, shared by every key that uses them
    /// (5,000 node names under 100 VPAs are stored once).
    names: HashMap<Arc<str>, ()>,
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

    /// How many aggregates (groups and DaemonSet-wide) are held.
    #[must_use]
    pub fn keys(&self) -> usize {
        self.vpas
            .values()
            .flat_map(BTreeMap::values)
            .map(|c| c.groups.len() + 1)
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
        let by_target: HashMap<(&str, &str), &ScopedVpa> = vpas
            .iter()
            .map(|v| ((v.namespace.as_str(), v.daemonset.as_str()), v))
            .collect();
        let mut seen = HashMap::with_capacity(pods.len());
        for pod in pods {
            let Some(vpa) = by_target.get(&(pod.namespace.as_str(), pod.daemonset.as_str())) else {
                continue;
            };
            let Placement::Group { value, .. } =
                Placement::resolve(&vpa.scope, pod.node.as_deref(), nodes)
            else {
                continue;
            };
            let key = format!("{}/{}", pod.namespace, pod.name);
            self.track(&key, vpa, value, pod);
            seen.insert(key, pod);
        }
        self.pods.retain(|key, _| seen.contains_key(key));
        for sample in usage {
            self.add_usage(config, sample, &mut stats);
        }
        for (key, pod) in &seen {
            // A kill later than this interval is not known yet: offline, a
            // store file shows the pod as it ended up, while the replay is
            // still earlier in its week.
            for (container, finished_at) in pod.oom_kills.iter().filter(|(_, at)| *at <= now) {
                if self.record_oom(config, key, container, *finished_at) {
                    stats.ooms += 1;
                }
            }
        }
        self.collect_garbage(config, now);
        stats
    }

    /// Registers a pod (or its move to another scope value, which starts
    /// its containers afresh: their window peaks belong to the old group).
    fn track(&mut self, key: &str, vpa: &ScopedVpa, value: &str, pod: &TrackedPod) {
        let vpa_key: VpaKey = self.intern(&format!("{}/{}", vpa.namespace, vpa.name));
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
                vpa: vpa_key.clone(),
                value: value.clone(),
                containers: Vec::new(),
            });
        if entry.vpa != vpa_key || entry.value != value {
            entry.vpa = vpa_key.clone();
            entry.value = value.clone();
            entry.containers.clear();
        }
        let mut states: Vec<_> = containers
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
        std::mem::swap(&mut entry.containers, &mut states);
        // upstream creates the aggregate when the container is first seen,
        // before any sample: an aggregate with no samples still yields the
        // minimum recommendation for the DaemonSet.
        let by_container = self.vpas.entry(vpa_key).or_default();
        for (name, _, _) in &entry.containers {
            by_container.entry(name.clone()).or_default();
        }
    }

    fn sinks<'a>(
        vpas: &'a mut HashMap<VpaKey, BTreeMap<Arc<str>, ContainerHistory>>,
        config: &'a ModelConfig,
        vpa: &VpaKey,
        container: &Arc<str>,
        value: &Arc<str>,
    ) -> Sinks<'a> {
        let history = vpas
            .entry(vpa.clone())
            .or_default()
            .entry(container.clone())
            .or_default();
        Sinks {
            config: &config.history,
            group: history.groups.entry(value.clone()).or_default(),
            wide: &mut history.wide,
        }
    }

    fn add_usage(&mut self, config: &ModelConfig, sample: &PodUsage, stats: &mut Ingested) {
        let key = format!("{}/{}", sample.namespace, sample.name);
        let Some(pod) = self.pods.get_mut(&key) else {
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
            let mut sinks = Self::sinks(&mut self.vpas, config, &pod.vpa, container, &pod.value);
            for taken in [
                state.add_cpu_sample(&mut sinks, *cpu, sample.timestamp),
                state.add_memory_sample(
                    &mut sinks,
                    &config.peaks,
                    *memory,
                    sample.timestamp,
                    false,
                ),
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
        let Some((name, request, state)) = pod
            .containers
            .iter_mut()
            .find(|(n, _, _)| **n == *container)
        else {
            return false;
        };
        let mut sinks = Self::sinks(&mut self.vpas, config, &pod.vpa, name, &pod.value);
        state.record_oom_once(&mut sinks, &config.peaks, finished_at, *request)
    }

    /// upstream `garbageCollectAggregateCollectionStates`: an aggregate whose
    /// last sample is a whole aggregation window old goes, and so does an
    /// empty one no tracked pod feeds; a VPA left with nothing goes too.
    fn collect_garbage(&mut self, config: &ModelConfig, now: Timestamp) {
        let now_ms = now.as_millisecond();
        let expired = |a: &AggregateContainerState| {
            a.last_sample_start()
                .is_some_and(|last| now_ms - last.as_millisecond() >= config.window_length_ms)
        };
        let mut fed: HashMap<(&VpaKey, &Arc<str>), Vec<&Arc<str>>> = HashMap::new();
        for pod in self.pods.values() {
            for (name, _, _) in &pod.containers {
                fed.entry((&pod.vpa, name)).or_default().push(&pod.value);
            }
        }
        let mut keep_vpa = HashMap::new();
        for (vpa, containers) in &mut self.vpas {
            containers.retain(|name, history| {
                let feeders = fed.get(&(vpa, name));
                history.groups.retain(|value, a| {
                    let contributes = feeders.is_some_and(|f| f.contains(&value));
                    !(expired(a) || (a.is_empty() && !contributes))
                });
                let contributes = feeders.is_some();
                !(expired(&history.wide) || (history.wide.is_empty() && !contributes))
            });
            keep_vpa.insert(vpa.clone(), !containers.is_empty());
        }
        self.vpas
            .retain(|vpa, _| keep_vpa.get(vpa).copied().unwrap_or(false));
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

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
