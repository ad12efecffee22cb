//! The updater's own families: upstream's updater metrics
//! (`pkg/utils/metrics/updater`) under the `nodescope_updater_` prefix.
//! Every family with a known label set exists from the start, at 0.

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::Arc;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepLabel {
    step: String,
}

/// Reasons a resize attempt fails, as labels.
pub const RESIZE_FAILURES: [&str; 3] = ["Infeasible", "Stale", "Error"];
/// Reasons an eviction attempt fails, as labels.
pub const EVICTION_FAILURES: [&str; 3] = ["DisruptionBudget", "Stale", "Error"];
/// The steps of a pass, as upstream's execution timer names them.
pub const STEPS: [&str; 3] = ["plan", "act", "total"];
/// What became of an Event the updater meant to write, as labels.
pub const EVENT_RESULTS: [&str; 4] = ["sent", "failed", "dropped_queue_full", "dropped_spam"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: String,
}

/// The updater's metrics; cheap to clone.
#[derive(Clone)]
pub struct UpdaterMetrics {
    registry: Arc<Registry>,
    controlled: Gauge,
    in_place_updatable: Gauge,
    evictable: Gauge,
    deferred: Gauge,
    unusable: Gauge,
    in_place_updated: Counter,
    evicted: Counter,
    failed_in_place: Family<ReasonLabel, Counter>,
    failed_eviction: Family<ReasonLabel, Counter>,
    infeasible_skipped: Counter,
    latency: Family<StepLabel, Histogram>,
    webhook_fresh: Gauge,
    leader: Gauge,
    events: Family<ResultLabel, Counter>,
}

impl Default for UpdaterMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl UpdaterMetrics {
    /// Registers every family.
    #[must_use]
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let m = UpdaterMetrics {
            registry: Arc::default(),
            controlled: Gauge::default(),
            in_place_updatable: Gauge::default(),
            evictable: Gauge::default(),
            deferred: Gauge::default(),
            unusable: Gauge::default(),
            in_place_updated: Counter::default(),
            evicted: Counter::default(),
            failed_in_place: Family::default(),
            failed_eviction: Family::default(),
            infeasible_skipped: Counter::default(),
            latency: Family::new_with_constructor(|| {
                Histogram::new([
                    0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                ])
            }),
            webhook_fresh: Gauge::default(),
            leader: Gauge::default(),
            events: Family::default(),
        };
        for result in EVENT_RESULTS {
            let _ = m.events.get_or_create(&ResultLabel {
                result: result.into(),
            });
        }
        for reason in RESIZE_FAILURES {
            let _ = m.failed_in_place.get_or_create(&ReasonLabel {
                reason: reason.into(),
            });
        }
        for reason in EVICTION_FAILURES {
            let _ = m.failed_eviction.get_or_create(&ReasonLabel {
                reason: reason.into(),
            });
        }
        for step in STEPS {
            let _ = m.latency.get_or_create(&StepLabel { step: step.into() });
        }
        registry.register(
            "nodescope_updater_controlled_pods",
            "Pods of scoped DaemonSet VPAs seen in the last pass",
            m.controlled.clone(),
        );
        registry.register(
            "nodescope_updater_in_place_updatable_pods",
            "Pods the last pass would resize in place",
            m.in_place_updatable.clone(),
        );
        registry.register(
            "nodescope_updater_evictable_pods",
            "Pods the last pass would evict",
            m.evictable.clone(),
        );
        registry.register(
            "nodescope_updater_deferred_pods",
            "Pods the last pass would change but held back (plan action deferred)",
            m.deferred.clone(),
        );
        registry.register(
            "nodescope_updater_unusable_recommendations",
            "Containers the last pass left alone because their recommendation (group or VPA-wide) was negative or unparsable",
            m.unusable.clone(),
        );
        registry.register(
            "nodescope_updater_in_place_updated_pods",
            "Resizes the apiserver accepted",
            m.in_place_updated.clone(),
        );
        registry.register(
            "nodescope_updater_evicted_pods",
            "Evictions the apiserver accepted",
            m.evicted.clone(),
        );
        registry.register(
            "nodescope_updater_failed_in_place_update_attempts",
            "Resizes refused, by reason",
            m.failed_in_place.clone(),
        );
        registry.register(
            "nodescope_updater_failed_eviction_attempts",
            "Evictions refused, by reason (DisruptionBudget: a PodDisruptionBudget said no)",
            m.failed_eviction.clone(),
        );
        registry.register("nodescope_updater_infeasible_skipped_pods", "Pods left alone because their last resize was infeasible and the recommendation asks no less", m.infeasible_skipped.clone());
        registry.register(
            "nodescope_updater_execution_latency_seconds",
            "Time a pass took, by step",
            m.latency.clone(),
        );
        registry.register(
            "nodescope_updater_webhook_lease_fresh",
            "1 while nodescope's webhook status Lease is fresh (evictions allowed), else 0",
            m.webhook_fresh.clone(),
        );
        registry.register(
            "nodescope_updater_leader",
            "1 while this replica holds the updater's Lease, else 0",
            m.leader.clone(),
        );
        registry.register(
            "nodescope_updater_events",
            "Events the updater meant to write, by result (dropped_queue_full: 1,000 were waiting; dropped_spam: 25 on one object within five minutes)",
            m.events.clone(),
        );
        UpdaterMetrics {
            registry: Arc::new(registry),
            ..m
        }
    }

    /// What the last pass found.
    pub fn pass(&self, controlled: usize, resizable: usize, evictable: usize, deferred: usize) {
        let g = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.controlled.set(g(controlled));
        self.in_place_updatable.set(g(resizable));
        self.evictable.set(g(evictable));
        self.deferred.set(g(deferred));
    }

    /// Containers of the last pass whose recommendation cannot be applied.
    pub fn unusable(&self, containers: usize) {
        self.unusable
            .set(i64::try_from(containers).unwrap_or(i64::MAX));
    }

    /// One resize accepted.
    pub fn resized(&self) {
        self.in_place_updated.inc();
    }

    /// One eviction accepted.
    pub fn evicted(&self) {
        self.evicted.inc();
    }

    /// One resize refused (`reason` from [`RESIZE_FAILURES`]).
    pub fn resize_failed(&self, reason: &str) {
        self.failed_in_place
            .get_or_create(&ReasonLabel {
                reason: reason.into(),
            })
            .inc();
    }

    /// One eviction refused (`reason` from [`EVICTION_FAILURES`]).
    pub fn eviction_failed(&self, reason: &str) {
        self.failed_eviction
            .get_or_create(&ReasonLabel {
                reason: reason.into(),
            })
            .inc();
    }

    /// A pod skipped for its infeasible last resize.
    pub fn infeasible_skipped(&self) {
        self.infeasible_skipped.inc();
    }

    /// How long a step took.
    pub fn step(&self, step: &str, seconds: f64) {
        self.latency
            .get_or_create(&StepLabel { step: step.into() })
            .observe(seconds);
    }

    /// Whether the webhook's status Lease is fresh.
    pub fn webhook_fresh(&self, fresh: bool) {
        self.webhook_fresh.set(i64::from(fresh));
    }

    /// One Event's fate (`result` from [`EVENT_RESULTS`]).
    pub fn event(&self, result: &str) {
        self.events
            .get_or_create(&ResultLabel {
                result: result.into(),
            })
            .inc();
    }

    /// Whether this replica leads.
    pub fn leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// The OpenMetrics text.
    #[must_use]
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_there_from_the_start() {
        let text = UpdaterMetrics::new().render();
        for line in [
            "nodescope_updater_controlled_pods 0",
            "nodescope_updater_in_place_updatable_pods 0",
            "nodescope_updater_evictable_pods 0",
            "nodescope_updater_deferred_pods 0",
            "nodescope_updater_unusable_recommendations 0",
            "nodescope_updater_in_place_updated_pods_total 0",
            "nodescope_updater_evicted_pods_total 0",
            "nodescope_updater_failed_in_place_update_attempts_total{reason=\"Infeasible\"} 0",
            "nodescope_updater_failed_eviction_attempts_total{reason=\"DisruptionBudget\"} 0",
            "nodescope_updater_infeasible_skipped_pods_total 0",
            "nodescope_updater_execution_latency_seconds_count{step=\"total\"} 0",
            "nodescope_updater_webhook_lease_fresh 0",
            "nodescope_updater_leader 0",
            "nodescope_updater_events_total{result=\"dropped_queue_full\"} 0",
            "nodescope_updater_events_total{result=\"dropped_spam\"} 0",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from\n{text}"
            );
        }
        assert!(
            !text.contains("nodescope_admission"),
            "only the updater's families"
        );
    }
}
