//! The recommender's metrics: what it ingested, holds and wrote, and
//! whether its metrics source answers (an outage keeps the last statuses,
//! and this says so).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Outcome {
    /// `success` or `failure`.
    result: &'static str,
}

fn outcome(ok: bool) -> Outcome {
    Outcome {
        result: if ok { "success" } else { "failure" },
    }
}

/// Registered by [`super::Metrics::new`]; recorded through its methods.
#[derive(Clone, Default)]
pub struct RecommenderMetrics {
    samples: Counter,
    dropped: Counter,
    keys: Gauge,
    status_writes: Family<Outcome, Counter>,
    checkpoint_writes: Family<Outcome, Counter>,
    source_up: Gauge,
}

impl RecommenderMetrics {
    /// Adds the families to `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "nodescope_recommender_samples",
            "Usage samples taken into the model (CPU and memory count one each)",
            self.samples.clone(),
        );
        registry.register(
            "nodescope_recommender_samples_dropped",
            "Usage samples dropped: out of order, negative, or of a container the pod spec lacks",
            self.dropped.clone(),
        );
        registry.register(
            "nodescope_recommender_keys",
            "Aggregation keys held: (VPA, container, scope value) and (VPA, container)",
            self.keys.clone(),
        );
        registry.register(
            "nodescope_recommender_status_writes",
            "VPA status writes by result (a failure is retried next interval)",
            self.status_writes.clone(),
        );
        registry.register(
            "nodescope_recommender_checkpoint_writes",
            "RecommendationCheckpoint writes by result",
            self.checkpoint_writes.clone(),
        );
        registry.register(
            "nodescope_recommender_metrics_source_up",
            "1 when the last PodMetrics list succeeded; 0 while the last recommendations are kept",
            self.source_up.clone(),
        );
    }

    pub(super) fn ingested(&self, samples: u64, dropped: u64, keys: usize) {
        self.samples.inc_by(samples);
        self.dropped.inc_by(dropped);
        self.keys.set(i64::try_from(keys).unwrap_or(i64::MAX));
    }

    pub(super) fn status_write(&self, ok: bool) {
        self.status_writes.get_or_create(&outcome(ok)).inc();
    }

    pub(super) fn checkpoint_write(&self, ok: bool) {
        self.checkpoint_writes.get_or_create(&outcome(ok)).inc();
    }

    pub(super) fn source(&self, up: bool) {
        self.source_up.set(i64::from(up));
    }
}

#[cfg(test)]
mod tests {
    use crate::metrics::Metrics;

    #[test]
    fn the_recommenders_families_render_what_was_recorded() {
        let m = Metrics::new();
        m.recommender_ingested(2_000, 3, 1_000);
        m.recommender_ingested(10, 0, 1_002);
        m.recommendation_write(true);
        m.recommendation_write(false);
        m.checkpoint_write(true);
        m.recommender_metrics_source(false);
        m.leader("nodescope-system/nodescope-recommender", true);
        let text = m.render();
        for line in [
            "nodescope_recommender_samples_total 2010",
            "nodescope_recommender_samples_dropped_total 3",
            "nodescope_recommender_keys 1002",
            "nodescope_recommender_status_writes_total{result=\"success\"} 1",
            "nodescope_recommender_status_writes_total{result=\"failure\"} 1",
            "nodescope_recommender_checkpoint_writes_total{result=\"success\"} 1",
            "nodescope_recommender_metrics_source_up 0",
            "nodescope_leader{lease=\"nodescope-system/nodescope-recommender\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
    }
}
