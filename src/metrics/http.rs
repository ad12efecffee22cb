//! `nodescope_http_responses_total{handler,code}`: every response a
//! component's HTTP listener sends, refusals included. Shared by every
//! component that serves `/metrics`.

use super::{label_values, Families};
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

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

label_values!(Handler {
    Mutate => "mutate",
    Validate => "validate",
    Healthz => "healthz",
    Readyz => "readyz",
    Metrics => "metrics",
    Other => "other",
});

/// `code` is the status nodescope itself sent, so it takes a few values.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResponseLabels {
    handler: Handler,
    code: u16,
}

/// The responses of one component's listeners. The label set is open
/// (any handler with any code it sent), so series appear as they happen.
#[derive(Clone, Default)]
pub struct HttpMetrics {
    responses: Family<ResponseLabels, Counter>,
}

impl HttpMetrics {
    /// Counts one HTTP response, whatever it says: reviews, probes, scrapes
    /// and every refusal, so a misdirected or oversized call is seen.
    pub fn response(&self, handler: Handler, code: u16) {
        self.responses
            .get_or_create(&ResponseLabels { handler, code })
            .inc();
    }
}

impl Families for HttpMetrics {
    fn register(&self, registry: &mut super::RegistryBuilder) {
        registry.register(
            "nodescope_http_responses",
            "HTTP responses sent, by handler and status code; refusals (400, 404, 405, 413, 415) included",
            self.responses.clone(),
        );
    }
}
