//! One interval taken into the [`History`]: pods placed (their VPA and
//! scope value), usage samples and OOM kills added, expired aggregates
//! dropped. Pure, as the rest of the model: nothing read or written outside.

use super::{set_key, shrink, FastMap, History, Ingested, ModelConfig, VpaKey};
use crate::recommend::aggregate::AggregateContainerState;
use crate::recommend::container::{ContainerState, Sink};
use crate::recommend::input::{PodUsage, ScopedVpa};
use crate::recommend::per_vpa::{self, Effective};
use crate::vpa::{NodeLabels, Placement};
use k8s_openapi::jiff::Timestamp;
use std::collections::{BTreeMap, HashSet};

impl History {
    /// Takes one interval, in upstream's order: where each pod's samples
    /// go now (`LoadPods`: its VPA, and the scope value of its node), the
    /// usage samples (`LoadRealTimeMetrics`), the OOM kills (upstream's OOM
    /// channel), then forgets aggregates that expired.
    pub fn observe(
        &mut self,
        config: &ModelConfig,
        vpas: &[ScopedVpa],
        nodes: &impl NodeLabels,
        usage: &[PodUsage],
        now: Timestamp,
    ) -> Ingested {
        let mut stats = Ingested::default();
        self.place(vpas, nodes);
        let settings = Settings::new(config, vpas);
        let mut key = std::mem::take(&mut self.key);
        for sample in usage {
            set_key(&mut key, &sample.namespace, &sample.name);
            self.add_usage(config, &settings, &key, sample, &mut stats);
        }
        self.key = key;
        stats.ooms = self.record_ooms(config, &settings, now);
        self.collect_garbage(&settings, now);
        stats
    }

    /// Resolves each pod's VPA and scope value. A pod that moved to another
    /// value (its node's label changed) starts its containers afresh: their
    /// window peaks belong to the old group. upstream creates a container's
    /// aggregate when the container is first seen, before any sample, and
    /// so does this: an aggregate with no samples still counts for the
    /// DaemonSet (it gets the minimum recommendation).
    fn place(&mut self, vpas: &[ScopedVpa], nodes: &impl NodeLabels) {
        let names = &mut self.names;
        let by_target: FastMap<(&str, &str), (VpaKey, &ScopedVpa)> = vpas
            .iter()
            .map(|v| {
                let key = names.get(&format!("{}/{}", v.namespace, v.name));
                ((v.namespace.as_str(), v.daemonset.as_str()), (key, v))
            })
            .collect();
        for pod in self.pods.values_mut() {
            let placed =
                by_target
                    .get(&(&*pod.namespace, &*pod.daemonset))
                    .and_then(|(vpa_key, vpa)| {
                        match Placement::resolve(&vpa.scope, pod.node.as_deref(), nodes) {
                            Placement::Group { value, .. } => Some((vpa_key, value)),
                            _ => None,
                        }
                    });
            let Some((vpa, value)) = placed else {
                pod.vpa = None;
                pod.value = None;
                continue;
            };
            let unchanged = pod.vpa.as_ref() == Some(vpa) && pod.value.as_deref() == Some(value);
            if unchanged {
                continue;
            }
            let value = names.get(value);
            if pod.vpa.is_some() {
                for (_, _, state) in pod.containers.iter_mut() {
                    *state = ContainerState::default();
                }
            }
            pod.vpa = Some(vpa.clone());
            pod.value = Some(value.clone());
            let by_container = self.vpas.entry(vpa.clone()).or_default();
            for (name, _, _) in pod.containers.iter() {
                by_container
                    .entry(name.clone())
                    .or_default()
                    .groups
                    .entry(value.clone())
                    .or_default();
            }
        }
    }

    fn add_usage(
        &mut self,
        config: &ModelConfig,
        settings: &Settings<'_>,
        key: &str,
        sample: &PodUsage,
        stats: &mut Ingested,
    ) {
        let Some(pod) = self.pods.get_mut(key) else {
            return;
        };
        let (Some(vpa), Some(value)) = (&pod.vpa, &pod.value) else {
            return;
        };
        let Some(containers) = self.vpas.get_mut(vpa) else {
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
            let history = match containers.get_mut(container) {
                Some(history) => history,
                None => containers.entry(container.clone()).or_default(),
            };
            let group = match history.groups.get_mut(value) {
                Some(group) => group,
                None => history.groups.entry(value.clone()).or_default(),
            };
            let mut sink = Sink {
                config: &config.history,
                group,
            };
            let peaks = settings.of(vpa, container).peaks;
            for taken in [
                state.add_cpu_sample(&mut sink, *cpu, sample.timestamp),
                state.add_memory_sample(&mut sink, &peaks, *memory, sample.timestamp, false),
            ] {
                if taken {
                    stats.samples += 1;
                } else {
                    stats.dropped += 1;
                }
            }
        }
    }

    /// Records each placed pod's OOM kills up to `now`: a kill later than
    /// this interval is not known yet (offline, a store file shows the pod
    /// as it ended up while the replay is earlier in its week).
    fn record_ooms(
        &mut self,
        config: &ModelConfig,
        settings: &Settings<'_>,
        now: Timestamp,
    ) -> u64 {
        let mut recorded = 0;
        for pod in self.pods.values_mut().filter(|p| !p.oom_kills.is_empty()) {
            let (Some(vpa), Some(value)) = (&pod.vpa, &pod.value) else {
                continue;
            };
            for (container, finished_at) in pod.oom_kills.iter().filter(|(_, at)| *at <= now) {
                let Some((name, request, state)) =
                    pod.containers.iter_mut().find(|(n, _, _)| n == container)
                else {
                    continue;
                };
                let group = self
                    .vpas
                    .entry(vpa.clone())
                    .or_default()
                    .entry(name.clone())
                    .or_default()
                    .groups
                    .entry(value.clone())
                    .or_default();
                let mut sink = Sink {
                    config: &config.history,
                    group,
                };
                let peaks = settings.of(vpa, name).peaks;
                if state.record_oom_once(&mut sink, &peaks, *finished_at, *request) {
                    recorded += 1;
                }
            }
        }
        recorded
    }

    /// upstream `garbageCollectAggregateCollectionStates`: an aggregate whose
    /// last sample is a whole aggregation window old goes, and so does an
    /// empty one no placed pod feeds; a VPA left with nothing goes too.
    /// Only empty aggregates (rare: a container listed but not yet sampled)
    /// need the pods, so the index of what pods feed is built only for them.
    fn collect_garbage(&mut self, settings: &Settings<'_>, now: Timestamp) {
        let now_ms = now.as_millisecond();
        let expired = |a: &AggregateContainerState, window_length_ms: i64| {
            a.last_sample_start()
                .is_some_and(|last| now_ms - last.as_millisecond() >= window_length_ms)
        };
        let any_empty = self
            .vpas
            .values()
            .flat_map(BTreeMap::values)
            .any(|c| c.groups.values().any(AggregateContainerState::is_empty));
        let mut fed: HashSet<(&str, &str, &str), foldhash::fast::RandomState> = HashSet::default();
        if any_empty {
            for pod in self.pods.values() {
                if let (Some(vpa), Some(value)) = (&pod.vpa, &pod.value) {
                    for (name, _, _) in pod.containers.iter() {
                        fed.insert((vpa, name, value));
                    }
                }
            }
        }
        for (vpa, containers) in &mut self.vpas {
            for (name, history) in containers.iter_mut() {
                let window = settings.of(vpa, name).window_length_ms;
                history.groups.retain(|value, a| {
                    !(expired(a, window)
                        || (a.is_empty() && !fed.contains(&(&**vpa, &**name, &**value))))
                });
            }
            containers.retain(|_, h| !h.groups.is_empty());
            for history in containers.values_mut() {
                shrink(&mut history.groups);
            }
        }
        self.vpas.retain(|_, containers| !containers.is_empty());
        shrink(&mut self.pods);
    }
}

/// The peaks and window of each (VPA, container): the flags', unless the
/// VPA overrides them under `PerVPAConfig`. Only VPAs with overrides are
/// indexed, so the usual interval pays one empty-map lookup per container.
struct Settings<'v> {
    config: &'v ModelConfig,
    base: Effective,
    overridden: FastMap<String, &'v ScopedVpa>,
}

impl<'v> Settings<'v> {
    fn new(config: &'v ModelConfig, vpas: &'v [ScopedVpa]) -> Self {
        let overridden = if config.per_vpa_config {
            vpas.iter()
                .filter(|v| !v.per_vpa.is_empty())
                .map(|v| (format!("{}/{}", v.namespace, v.name), v))
                .collect()
        } else {
            FastMap::default()
        };
        Settings {
            config,
            base: per_vpa::effective(config, None),
            overridden,
        }
    }

    fn of(&self, vpa: &str, container: &str) -> Effective {
        match self.overridden.get(vpa) {
            None => self.base,
            Some(v) => per_vpa::effective(self.config, v.per_vpa_config(container)),
        }
    }
}
