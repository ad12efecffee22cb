//! The registry of the webhook (`serve`). The recommender's is beside its
//! families, in `recommender.rs`; the features controller's in
//! `features/metrics.rs`.

use super::{
    AdmissionMetrics, Families, Handler, HttpMetrics, PolicyMetrics, RefusalMetrics, Registry,
    ReloadResult, ReviewResult, StoreMetrics, TlsMetrics, Webhook,
};
use std::time::Duration;

/// `nodescope serve`: reviews, responses, certificates, policies and the
/// store, in one registry. Cheap to clone and share across tasks.
#[derive(Clone)]
pub struct WebhookMetrics {
    pub admission: AdmissionMetrics,
    pub http: HttpMetrics,
    pub tls: TlsMetrics,
    pub policies: PolicyMetrics,
    pub store: StoreMetrics,
    /// Reloads refused for leaving the webhooks nothing to check.
    pub refusals: RefusalMetrics,
    /// The status Lease renewal (series only once it starts).
    pub status_lease: super::StatusLeaseMetrics,
    registry: Registry,
}

impl WebhookMetrics {
    /// The webhook's families, reading its objects from `store` (`file`
    /// or `kube`, the store label).
    #[must_use]
    pub fn new(store: &str) -> Self {
        let admission = AdmissionMetrics::default();
        let http = HttpMetrics::default();
        let tls = TlsMetrics::default();
        let policies = PolicyMetrics::default();
        let store = StoreMetrics::new(store);
        let refusals = RefusalMetrics::default();
        let status_lease = super::StatusLeaseMetrics::default();
        let families: [&dyn Families; 7] = [
            &admission,
            &http,
            &tls,
            &policies,
            &store,
            &refusals,
            &status_lease,
        ];
        let registry = families
            .into_iter()
            .fold(Registry::builder(), |builder, families| {
                builder.with(families)
            })
            .build();
        Self {
            admission,
            http,
            tls,
            policies,
            store,
            refusals,
            status_lease,
            registry,
        }
    }

    /// The registry its `/metrics` renders.
    #[must_use]
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Renders its registry.
    #[must_use]
    pub fn render(&self) -> String {
        self.registry.render()
    }

    /// Records one answered review.
    pub fn observe_review(
        &self,
        webhook: Webhook,
        operation: &str,
        resource: &str,
        result: ReviewResult,
        elapsed: Duration,
    ) {
        self.admission
            .observe(webhook, operation, resource, result, elapsed);
    }

    /// Counts containers a pod was admitted without resizing because their
    /// recommendation could not be applied.
    pub fn unusable_recommendations(&self, count: usize) {
        self.admission.unusable_recommendations(count);
    }

    /// Counts one HTTP response.
    pub fn http_response(&self, handler: Handler, code: u16) {
        self.http.response(handler, code);
    }

    /// Counts a policy reload attempt.
    pub fn policy_reload(&self, result: ReloadResult) {
        self.policies.reload(result);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reviews_render_with_bounded_labels() {
        let m = WebhookMetrics::new("file");
        m.observe_review(
            Webhook::Mutate,
            "CREATE",
            "pods",
            ReviewResult::Patched,
            Duration::from_micros(80),
        );
        m.observe_review(
            Webhook::Validate,
            "<script>",
            "Not A Resource!",
            ReviewResult::Error,
            Duration::from_micros(80),
        );
        let text = m.render();
        assert!(text.contains(
            "nodescope_admission_requests_total{webhook=\"mutate\",operation=\"CREATE\",resource=\"pods\",result=\"patched\"} 1"
        ), "{text}");
        assert!(text.contains(
            "nodescope_admission_requests_total{webhook=\"validate\",operation=\"other\",resource=\"other\",result=\"error\"} 1"
        ), "{text}");
        m.http_response(Handler::of("/admit"), 404);
        assert!(
            m.render()
                .contains("nodescope_http_responses_total{handler=\"other\",code=\"404\"} 1"),
            "{text}"
        );
        assert!(text.contains("nodescope_admission_duration_seconds_bucket{le=\"0.00005\",webhook=\"mutate\",operation=\"CREATE\",resource=\"pods\"} 0"), "{text}");
    }

    #[test]
    fn failure_counters_exist_at_zero_from_start() {
        let text = WebhookMetrics::new("kube").render();
        for line in [
            "nodescope_tls_reloads_total{result=\"success\"} 0",
            "nodescope_tls_reloads_total{result=\"failure\"} 0",
            "nodescope_policy_reloads_total{result=\"failure\"} 0",
            "nodescope_store_errors_total{store=\"kube\"} 0",
            "nodescope_reloads_refused_total{source=\"policies\"} 0",
            "nodescope_reloads_refused_total{source=\"store\"} 0",
            "nodescope_tls_handshake_errors_total{reason=\"certificate_rejected\"} 0",
            "nodescope_tls_handshake_errors_total{reason=\"timeout\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
    }
}
