//! Prometheus metrics for the admission path, TLS reloads, stores, leader
//! election and the webhook's status Lease.
//!
//! Owns the registry and the metric families; handlers record into them with
//! label sets that are small, fixed enums so cardinality cannot grow with
//! input (the Lease label comes from the process's own flags, one per
//! controller).

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::time::Duration;

mod recommender;
mod status_lease;
pub use recommender::RecommenderMetrics;
pub use status_lease::{StatusLeaseMetrics, StatusLeaseRenewal};

/// Which webhook answered; bounded so a caller cannot invent label values.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Webhook {
    Mutate,
    Validate,
}

/// The outcome of one review as operators alert on it.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum ReviewResult {
    Allowed,
    Denied,
    Patched,
    Error,
}

/// What a request asked for, by path: the routes nodescope serves, and
/// `other` for any path it does not (and for plain HTTP on the TLS port,
/// which never gets as far as a path).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Handler {
    Mutate,
    Validate,
    Healthz,
    Readyz,
    Metrics,
    Other,
}

impl Handler {
    /// The handler of a request for `path`.
    #[must_use]
    pub fn of(path: &str) -> Self {
        match path {
            "/mutate" => Self::Mutate,
            "/validate" => Self::Validate,
            "/healthz" => Self::Healthz,
            "/readyz" => Self::Readyz,
            "/metrics" => Self::Metrics,
            _ => Self::Other,
        }
    }
}

/// Success or failure of a reload (certificates, policies, stores).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum ReloadResult {
    Success,
    Failure,
}

/// Lower-case label values, as Prometheus conventions expect.
macro_rules! label_values {
    ($ty:ty { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            /// The label value this variant is exported as.
            #[must_use]
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $name),+ }
            }
        }
        impl EncodeLabelValue for $ty {
            fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
                use std::fmt::Write;
                encoder.write_str(self.as_str())
            }
        }
    };
}

label_values!(Webhook { Mutate => "mutate", Validate => "validate" });
label_values!(ReviewResult { Allowed => "allowed", Denied => "denied", Patched => "patched", Error => "error" });
label_values!(ReloadResult { Success => "success", Failure => "failure" });
label_values!(Handler {
    Mutate => "mutate",
    Validate => "validate",
    Healthz => "healthz",
    Readyz => "readyz",
    Metrics => "metrics",
    Other => "other",
});

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    webhook: Webhook,
    operation: String,
    resource: String,
    result: ReviewResult,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DurationLabels {
    webhook: Webhook,
    operation: String,
    resource: String,
}

/// `code` is the status nodescope itself sent, so it takes a few values.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResponseLabels {
    handler: Handler,
    code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: ReloadResult,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabel {
    version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabel {
    store: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseLabel {
    lease: String,
}

/// Operation and resource labels are copied from the request, so they are
/// clamped to the values Kubernetes can send; anything else becomes `other`
/// and cannot blow up the series count.
fn bounded_operation(op: &str) -> String {
    match op {
        "CREATE" | "UPDATE" | "DELETE" | "CONNECT" => op.to_owned(),
        _ => "other".to_owned(),
    }
}

fn bounded_resource(resource: &str) -> String {
    let ok = resource.len() <= 63
        && resource.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.' || b == b'/'
        });
    if ok && !resource.is_empty() {
        resource.to_owned()
    } else {
        "other".to_owned()
    }
}

/// All of nodescope's metrics; cheap to clone and share across tasks.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    requests: Family<RequestLabels, Counter>,
    responses: Family<ResponseLabels, Counter>,
    durations: Family<DurationLabels, Histogram>,
    tls_reloads: Family<ResultLabel, Counter>,
    store_errors: Family<StoreLabel, Counter>,
    policy_reloads: Family<ResultLabel, Counter>,
    leader: Family<LeaseLabel, Gauge>,
    status_lease: StatusLeaseMetrics,
    recommender: RecommenderMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Builds the registry; `build_info` is set once here since it never changes.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let responses = Family::<ResponseLabels, Counter>::default();
        let durations = Family::<DurationLabels, Histogram>::new_with_constructor(|| {
            // 50 µs .. ~10 s: the fast path sits in the first buckets, the
            // apiserver's timeout in the last.
            Histogram::new([
                0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            ])
        });
        let tls_reloads = Family::<ResultLabel, Counter>::default();
        let store_errors = Family::<StoreLabel, Counter>::default();
        let policy_reloads = Family::<ResultLabel, Counter>::default();
        let leader = Family::<LeaseLabel, Gauge>::default();
        let status_lease = StatusLeaseMetrics::default();
        status_lease.register(&mut registry);
        let recommender = RecommenderMetrics::default();
        recommender.register(&mut registry);
        let build_info = Family::<VersionLabel, Gauge>::default();
        build_info
            .get_or_create(&VersionLabel {
                version: env!("CARGO_PKG_VERSION").to_owned(),
            })
            .set(1);
        registry.register(
            "nodescope_admission_requests",
            "Admission reviews answered, by webhook, operation, resource and result",
            requests.clone(),
        );
        registry.register(
            "nodescope_http_responses",
            "HTTP responses sent, by handler and status code; refusals (400, 404, 405, 413, 415) included",
            responses.clone(),
        );
        registry.register(
            "nodescope_admission_duration_seconds",
            "Time from request body to response body",
            durations.clone(),
        );
        registry.register(
            "nodescope_tls_reloads",
            "Certificate reload attempts by result",
            tls_reloads.clone(),
        );
        registry.register(
            "nodescope_store_errors",
            "Store watch or load failures; the last good snapshot keeps serving",
            store_errors.clone(),
        );
        registry.register(
            "nodescope_policy_reloads",
            "Policy bundle reload attempts by result",
            policy_reloads.clone(),
        );
        registry.register(
            "nodescope_leader",
            "1 while this replica leads on the Lease (namespace/name), else 0",
            leader.clone(),
        );
        registry.register(
            "nodescope_build_info",
            "Build information; always 1",
            build_info,
        );
        Self {
            registry: Arc::new(registry),
            requests,
            responses,
            durations,
            tls_reloads,
            store_errors,
            policy_reloads,
            leader,
            status_lease,
            recommender,
        }
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
        let operation = bounded_operation(operation);
        let resource = bounded_resource(resource);
        self.durations
            .get_or_create(&DurationLabels {
                webhook,
                operation: operation.clone(),
                resource: resource.clone(),
            })
            .observe(elapsed.as_secs_f64());
        self.requests
            .get_or_create(&RequestLabels {
                webhook,
                operation,
                resource,
                result,
            })
            .inc();
    }

    /// Counts one HTTP response, whatever it says: reviews, probes, scrapes
    /// and every refusal, so a misdirected or oversized call is seen.
    pub fn http_response(&self, handler: Handler, code: u16) {
        self.responses
            .get_or_create(&ResponseLabels { handler, code })
            .inc();
    }

    /// Counts a certificate reload attempt.
    pub fn tls_reload(&self, result: ReloadResult) {
        self.tls_reloads
            .get_or_create(&ResultLabel { result })
            .inc();
    }

    /// Counts a policy reload attempt.
    pub fn policy_reload(&self, result: ReloadResult) {
        self.policy_reloads
            .get_or_create(&ResultLabel { result })
            .inc();
    }

    /// Counts a store failure (watch error, unparsable file) for `store`.
    pub fn store_error(&self, store: &str) {
        self.store_errors
            .get_or_create(&StoreLabel {
                store: store.to_owned(),
            })
            .inc();
    }

    /// Sets whether this replica leads on `lease` (`namespace/name`): a sum
    /// over the replicas other than 1 is an election gone wrong.
    pub fn leader(&self, lease: &str, leading: bool) {
        self.leader
            .get_or_create(&LeaseLabel {
                lease: lease.to_owned(),
            })
            .set(i64::from(leading));
    }

    /// Starts every `nodescope_status_lease_renewals_total{result}` series
    /// at 0, so that a rate or an absence alert works from the first
    /// scrape; called when the renewal starts, so a server that renews no
    /// Lease exports none.
    pub fn status_lease_started(&self) {
        self.status_lease.start();
    }

    /// Counts one tick of the status Lease renewal.
    pub fn status_lease_renewal(&self, result: StatusLeaseRenewal) {
        self.status_lease.renewal(result);
    }

    /// One recommender interval: samples taken and dropped, keys held.
    pub fn recommender_ingested(&self, samples: u64, dropped: u64, keys: usize) {
        self.recommender.ingested(samples, dropped, keys);
    }

    /// Counts a VPA status write.
    pub fn recommendation_write(&self, ok: bool) {
        self.recommender.status_write(ok);
    }

    /// Counts a checkpoint object write.
    pub fn checkpoint_write(&self, ok: bool) {
        self.recommender.checkpoint_write(ok);
    }

    /// Whether the recommender's metrics source answered.
    pub fn recommender_metrics_source(&self, up: bool) {
        self.recommender.source(up);
    }

    /// Renders the Prometheus text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Encoding into a String cannot fail except on fmt errors, which
        // String never raises; an empty page is the safe fallback.
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_with_bounded_labels() {
        let m = Metrics::new();
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
        assert!(text.contains("nodescope_build_info{version=\""), "{text}");
        m.http_response(Handler::of("/admit"), 404);
        assert!(
            m.render()
                .contains("nodescope_http_responses_total{handler=\"other\",code=\"404\"} 1"),
            "{text}"
        );
        assert!(text.contains("nodescope_admission_duration_seconds_bucket{le=\"0.00005\",webhook=\"mutate\",operation=\"CREATE\",resource=\"pods\"} 0"), "{text}");
    }

    #[test]
    fn the_leader_gauge_is_one_per_lease_while_leading() {
        let m = Metrics::new();
        m.leader("nodescope-system/nodescope-features", true);
        m.leader("nodescope-system/nodescope-recommend", false);
        let text = m.render();
        assert!(
            text.contains("nodescope_leader{lease=\"nodescope-system/nodescope-features\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("nodescope_leader{lease=\"nodescope-system/nodescope-recommend\"} 0\n"),
            "{text}"
        );
        m.leader("nodescope-system/nodescope-features", false);
        assert!(m
            .render()
            .contains("nodescope_leader{lease=\"nodescope-system/nodescope-features\"} 0\n"));
    }
}
