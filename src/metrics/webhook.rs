//! The webhook's own families: reviews answered, certificate reloads and
//! handshakes, policy reloads, store failures and refused reloads.

use super::{
    label_values, results_at_zero, Families, ReloadResult, ResultLabel, ReviewResult, Webhook,
};
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use std::time::Duration;

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

/// Reviews answered and how long they took. The resource label comes from
/// the request, so its series appear as reviews arrive.
#[derive(Clone)]
pub struct AdmissionMetrics {
    requests: Family<RequestLabels, Counter>,
    durations: Family<DurationLabels, Histogram>,
    unusable: Counter,
}

impl Default for AdmissionMetrics {
    fn default() -> Self {
        Self {
            requests: Family::default(),
            unusable: Counter::default(),
            durations: Family::new_with_constructor(|| {
                // 50 µs .. ~10 s: the fast path sits in the first buckets,
                // the apiserver's timeout in the last.
                Histogram::new([
                    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                    0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                ])
            }),
        }
    }
}

impl AdmissionMetrics {
    /// Counts containers left unchanged for an unusable recommendation.
    pub fn unusable_recommendations(&self, count: usize) {
        if count > 0 {
            self.unusable.inc_by(count as u64);
        }
    }

    /// Records one answered review.
    pub fn observe(
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
}

impl Families for AdmissionMetrics {
    fn register(&self, registry: &mut super::RegistryBuilder) {
        registry.register(
            "nodescope_admission_requests",
            "Admission reviews answered, by webhook, operation, resource and result",
            self.requests.clone(),
        );
        registry.register(
            "nodescope_admission_unusable_recommendations",
            "Containers admitted unchanged because their recommendation (group or VPA-wide) was negative or unparsable",
            self.unusable.clone(),
        );
        registry.register(
            "nodescope_admission_duration_seconds",
            "Time from request body to response body",
            self.durations.clone(),
        );
    }
}

/// Why a TLS handshake on the webhook's port failed.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum HandshakeFailure {
    /// The client refused nodescope's certificate (it sent a certificate
    /// alert): most often a `caBundle` that does not match the serving CA.
    CertificateRejected,
    /// No protocol version, cipher suite or ALPN protocol in common.
    Incompatible,
    /// Bytes that are not a TLS handshake, or a broken one.
    Protocol,
    /// Plain HTTP sent to the TLS port (answered with a 400).
    PlainHttp,
    /// The client closed the connection during the handshake.
    Closed,
    /// Not finished within `--handshake-timeout`.
    Timeout,
    /// Anything else.
    Other,
}

impl HandshakeFailure {
    /// Every reason, for creating every series at start.
    pub const ALL: [Self; 7] = [
        Self::CertificateRejected,
        Self::Incompatible,
        Self::Protocol,
        Self::PlainHttp,
        Self::Closed,
        Self::Timeout,
        Self::Other,
    ];
}

label_values!(HandshakeFailure {
    CertificateRejected => "certificate_rejected",
    Incompatible => "incompatible",
    Protocol => "protocol",
    PlainHttp => "plain_http",
    Closed => "closed",
    Timeout => "timeout",
    Other => "other",
});

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: HandshakeFailure,
}

/// Certificate reloads and failed handshakes, every series from start.
#[derive(Clone)]
pub struct TlsMetrics {
    reloads: Family<ResultLabel, Counter>,
    handshake_errors: Family<ReasonLabel, Counter>,
}

impl Default for TlsMetrics {
    fn default() -> Self {
        let handshake_errors = Family::default();
        for reason in HandshakeFailure::ALL {
            let _ = handshake_errors.get_or_create(&ReasonLabel { reason });
        }
        Self {
            reloads: results_at_zero(),
            handshake_errors,
        }
    }
}

impl TlsMetrics {
    /// Counts a certificate reload attempt.
    pub fn reload(&self, result: ReloadResult) {
        self.reloads.get_or_create(&ResultLabel { result }).inc();
    }

    /// Counts a failed handshake.
    pub fn handshake_error(&self, reason: HandshakeFailure) {
        self.handshake_errors
            .get_or_create(&ReasonLabel { reason })
            .inc();
    }
}

impl Families for TlsMetrics {
    fn register(&self, registry: &mut super::RegistryBuilder) {
        registry.register(
            "nodescope_tls_reloads",
            "Certificate reload attempts by result",
            self.reloads.clone(),
        );
        registry.register(
            "nodescope_tls_handshake_errors",
            "TLS handshakes that failed, by reason (certificate_rejected: the client does not trust the serving certificate, as with a wrong caBundle)",
            self.handshake_errors.clone(),
        );
    }
}

/// Policy bundle reloads (`--policies DIR`), both results from start.
#[derive(Clone)]
pub struct PolicyMetrics {
    reloads: Family<ResultLabel, Counter>,
}

impl Default for PolicyMetrics {
    fn default() -> Self {
        Self {
            reloads: results_at_zero(),
        }
    }
}

impl PolicyMetrics {
    /// Counts a policy reload attempt.
    pub fn reload(&self, result: ReloadResult) {
        self.reloads.get_or_create(&ResultLabel { result }).inc();
    }
}

impl Families for PolicyMetrics {
    fn register(&self, registry: &mut super::RegistryBuilder) {
        registry.register(
            "nodescope_policy_reloads",
            "Policy bundle reload attempts by result",
            self.reloads.clone(),
        );
    }
}

/// What a refused reload would have replaced.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum ReloadSource {
    /// `--policies DIR`.
    Policies,
    /// `--store file:PATH`.
    Store,
}

label_values!(ReloadSource { Policies => "policies", Store => "store" });

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabel {
    source: ReloadSource,
}

/// Reloads refused because what they read would leave the webhooks
/// nothing to check (policies the webhook configurations route to gone, an
/// empty file store): both series from start, so the first one is seen.
#[derive(Clone)]
pub struct RefusalMetrics {
    refused: Family<SourceLabel, Counter>,
}

impl Default for RefusalMetrics {
    fn default() -> Self {
        let refused = Family::default();
        for source in [ReloadSource::Policies, ReloadSource::Store] {
            let _ = refused.get_or_create(&SourceLabel { source });
        }
        Self { refused }
    }
}

impl RefusalMetrics {
    /// Counts a refused reload of `source`.
    pub fn refuse(&self, source: ReloadSource) {
        self.refused.get_or_create(&SourceLabel { source }).inc();
    }
}

impl Families for RefusalMetrics {
    fn register(&self, registry: &mut super::RegistryBuilder) {
        registry.register(
            "nodescope_reloads_refused",
            "Reloads refused because they would leave the webhooks nothing to check; \
             the last good policies or store keep serving and /readyz is not ready",
            self.refused.clone(),
        );
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabel {
    store: String,
}

/// Store failures, by store (`file` or `kube`).
#[derive(Clone)]
pub struct StoreMetrics {
    errors: Family<StoreLabel, Counter>,
}

impl StoreMetrics {
    /// The families of a process that runs `store`: its series from start.
    #[must_use]
    pub fn new(store: &str) -> Self {
        let errors = Family::default();
        let _ = errors.get_or_create(&StoreLabel {
            store: store.to_owned(),
        });
        Self { errors }
    }

    /// Counts a store failure (watch error, unparsable file) for `store`.
    pub fn store_error(&self, store: &str) {
        self.errors
            .get_or_create(&StoreLabel {
                store: store.to_owned(),
            })
            .inc();
    }

    /// The failures counted for `store` so far.
    #[must_use]
    pub fn errors(&self, store: &str) -> u64 {
        self.errors
            .get_or_create(&StoreLabel {
                store: store.to_owned(),
            })
            .get()
    }
}

impl Families for StoreMetrics {
    fn register(&self, registry: &mut super::RegistryBuilder) {
        registry.register(
            "nodescope_store_errors",
            "Store watch or load failures; the last good snapshot keeps serving",
            self.errors.clone(),
        );
    }
}
