//! The recommender's metrics: what it ingested, holds and wrote, and
//! whether its metrics source answers (an outage keeps the last statuses,
//! and this says so).

use super::{results_at_zero, Families, HttpMetrics, LeaderMetrics, ReloadResult, ResultLabel};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

fn outcome(ok: bool) -> ResultLabel {
    ResultLabel {
        result: ReloadResult::of(ok),
    }
}

/// The recommender's families, every series from start (write failures at
/// 0), and its registry: these, the leader gauge and its port's responses.
#[derive(Clone)]
pub struct RecommenderMetrics {
    samples: Counter,
    dropped: Counter,
    keys: Gauge,
    status_writes: Family<ResultLabel, Counter>,
    checkpoint_writes: Family<ResultLabel, Counter>,
    source_up: Gauge,
    groups_too_large: Gauge,
    leader: LeaderMetrics,
    http: HttpMetrics,
    registry: super::Registry,
}

impl RecommenderMetrics {
    /// The families of a recommender elected on `lease` (`namespace/name`).
    #[must_use]
    pub fn new(lease: &str) -> Self {
        let mut metrics = Self {
            samples: Counter::default(),
            dropped: Counter::default(),
            keys: Gauge::default(),
            status_writes: results_at_zero(),
            checkpoint_writes: results_at_zero(),
            source_up: Gauge::default(),
            groups_too_large: Gauge::default(),
            leader: LeaderMetrics::new(lease),
            http: HttpMetrics::default(),
            registry: super::Registry::builder().build(),
        };
        metrics.registry = super::Registry::builder()
            .with(&metrics)
            .with(&metrics.leader)
            .with(&metrics.http)
            .build();
        metrics
    }

    /// The registry its `/metrics` renders.
    #[must_use]
    pub fn registry(&self) -> &super::Registry {
        &self.registry
    }

    /// The leader gauge, for [`crate::leader::Leadership::export`].
    #[must_use]
    pub fn leader(&self) -> &LeaderMetrics {
        &self.leader
    }

    /// The responses of its metrics port.
    #[must_use]
    pub fn http(&self) -> &HttpMetrics {
        &self.http
    }

    /// Renders its registry.
    #[must_use]
    pub fn render(&self) -> String {
        self.registry.render()
    }

    /// One interval: samples taken and dropped, keys held.
    pub fn recommender_ingested(&self, samples: u64, dropped: u64, keys: usize) {
        self.samples.inc_by(samples);
        self.dropped.inc_by(dropped);
        self.keys.set(i64::try_from(keys).unwrap_or(i64::MAX));
    }

    /// Counts a VPA status write.
    pub fn recommendation_write(&self, ok: bool) {
        self.status_writes.get_or_create(&outcome(ok)).inc();
    }

    /// Counts a checkpoint object write.
    pub fn checkpoint_write(&self, ok: bool) {
        self.checkpoint_writes.get_or_create(&outcome(ok)).inc();
    }

    /// VPAs whose `recommendationGroups` did not fit in their status at
    /// the last interval.
    pub fn recommender_groups_too_large(&self, vpas: usize) {
        self.groups_too_large
            .set(i64::try_from(vpas).unwrap_or(i64::MAX));
    }

    /// Whether the metrics source answered.
    pub fn recommender_metrics_source(&self, up: bool) {
        self.source_up.set(i64::from(up));
    }
}

impl Families for RecommenderMetrics {
    fn register(&self, registry: &mut super::RegistryBuilder) {
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
        registry.register(
            "nodescope_recommender_groups_too_large",
            "VPAs whose recommendationGroups did not fit in their status at the last interval \
             (condition RecommendationGroupsTooLarge; their pods get status.recommendation)",
            self.groups_too_large.clone(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::RecommenderMetrics;

    #[test]
    fn the_recommenders_families_render_what_was_recorded() {
        let m = RecommenderMetrics::new("nodescope-system/nodescope-recommender");
        m.recommender_ingested(2_000, 3, 1_000);
        m.recommender_ingested(10, 0, 1_002);
        m.recommendation_write(true);
        m.recommendation_write(false);
        m.checkpoint_write(true);
        m.recommender_metrics_source(false);
        m.recommender_groups_too_large(2);
        m.leader()
            .leader("nodescope-system/nodescope-recommender", true);
        let text = m.render();
        for line in [
            "nodescope_recommender_samples_total 2010",
            "nodescope_recommender_samples_dropped_total 3",
            "nodescope_recommender_keys 1002",
            "nodescope_recommender_status_writes_total{result=\"success\"} 1",
            "nodescope_recommender_status_writes_total{result=\"failure\"} 1",
            "nodescope_recommender_checkpoint_writes_total{result=\"success\"} 1",
            "nodescope_recommender_checkpoint_writes_total{result=\"failure\"} 0",
            "nodescope_recommender_metrics_source_up 0",
            "nodescope_recommender_groups_too_large 2",
            "nodescope_leader{lease=\"nodescope-system/nodescope-recommender\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
    }
}
