//! Prometheus metrics: the families, and one registry per component.
//!
//! Owns the shared families (HTTP responses, leader election, the status
//! Lease), the webhook's and the recommender's, and the registry every
//! component builds; a part with its own families keeps them in its own
//! `metrics.rs` (`balloon`, `update`, `features`). A component records into
//! its families and serves its own registry, so a scrape shows only what
//! that process moves. Must not: share a registry
//! between components, or take a label value from input without bounding
//! it (label sets are small fixed enums, or values clamped to what
//! Kubernetes can send).
//!
//! # The pattern, for a new component
//!
//! 1. A struct of the component's families, in its part's `metrics.rs`
//!    (`src/<part>/metrics.rs`), named for the component (`UpdaterMetrics`), its families prefixed
//!    `nodescope_<component>_` (`nodescope_updater_evicted_pods`).
//! 2. Its constructor creates every series whose label set is known up
//!    front: each `{result="failure"}` or `{reason=…}` at 0, so that
//!    `increase(…[15m]) > 0` sees the first failure.
//! 3. It implements [`Families`]; the component builds its registry with
//!    [`Registry::builder`], adding its own families and the shared ones it
//!    uses ([`LeaderMetrics`] for an elected controller, [`HttpMetrics`]
//!    for the port that serves `/metrics`). `nodescope_build_info` is in
//!    every registry.
//! 4. `tests/observability.rs` lists the exact families of each component
//!    (registered, and shown at start); `tests/monitoring.rs` checks every
//!    metric the dashboard and the alerts query against the registries,
//!    with a list of the families of components not yet in the crate
//!    (the updater's `nodescope_updater_*` among them): a new component
//!    adds its registry there and takes its names off that list.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use std::sync::Arc;

mod components;
mod http;
mod leader;
mod recommender;
mod status_lease;
mod webhook;

pub use components::WebhookMetrics;
pub use http::{Handler, HttpMetrics};
pub use leader::LeaderMetrics;
pub use recommender::RecommenderMetrics;
pub use status_lease::{StatusLeaseMetrics, StatusLeaseRenewal};
pub use webhook::{
    AdmissionMetrics, HandshakeFailure, PolicyMetrics, RefusalMetrics, ReloadSource, StoreMetrics,
    TlsMetrics,
};

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

/// Success or failure of a reload or a write.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum ReloadResult {
    Success,
    Failure,
}

impl ReloadResult {
    /// Both values, for creating both series at start.
    pub const ALL: [Self; 2] = [Self::Success, Self::Failure];

    /// `Success` when `ok`.
    #[must_use]
    pub fn of(ok: bool) -> Self {
        if ok {
            Self::Success
        } else {
            Self::Failure
        }
    }
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
pub(crate) use label_values;

label_values!(Webhook { Mutate => "mutate", Validate => "validate" });
label_values!(ReviewResult { Allowed => "allowed", Denied => "denied", Patched => "patched", Error => "error" });
label_values!(ReloadResult { Success => "success", Failure => "failure" });

/// `{result}`: success or failure.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ResultLabel {
    pub(crate) result: ReloadResult,
}

/// A family of `{result}` counters with both series at 0.
pub(crate) fn results_at_zero() -> Family<ResultLabel, prometheus_client::metrics::counter::Counter>
{
    let family = Family::default();
    for result in ReloadResult::ALL {
        let _ = family.get_or_create(&ResultLabel { result });
    }
    family
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabel {
    version: String,
}

/// A set of families one component records into. Implemented by each
/// component's metrics and by the shared ones ([`HttpMetrics`],
/// [`LeaderMetrics`]).
pub trait Families {
    /// Adds the families to `registry`, by their names without `_total`.
    fn register(&self, registry: &mut RegistryBuilder);
}

/// One component's registry: `nodescope_build_info` and the families it
/// was built with, rendered for its `/metrics`. Cheap to clone; the
/// families record through their own handles, never through this.
#[derive(Clone)]
pub struct Registry {
    registry: Arc<prometheus_client::registry::Registry>,
    samples: Arc<[String]>,
}

/// Collects a component's families; [`RegistryBuilder::build`] freezes it.
pub struct RegistryBuilder {
    registry: prometheus_client::registry::Registry,
    samples: Vec<String>,
}

impl Registry {
    /// A registry holding `nodescope_build_info` (always 1, labelled with
    /// the version) and nothing else yet.
    #[must_use]
    pub fn builder() -> RegistryBuilder {
        let mut builder = RegistryBuilder {
            registry: prometheus_client::registry::Registry::default(),
            samples: Vec::new(),
        };
        let build_info = Family::<VersionLabel, Gauge>::default();
        build_info
            .get_or_create(&VersionLabel {
                version: env!("CARGO_PKG_VERSION").to_owned(),
            })
            .set(1);
        builder.register(
            "nodescope_build_info",
            "Build information; always 1",
            build_info,
        );
        builder
    }

    /// The Prometheus text exposition of every family. A family with an
    /// open label set and no series yet (no review answered) is left out.
    #[must_use]
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Encoding into a String cannot fail except on fmt errors, which
        // String never raises; an empty page is the safe fallback.
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }

    /// Every sample name a query may use, series or not yet:
    /// `nodescope_x_total` for a counter, `_bucket`, `_sum` and `_count`
    /// for a histogram, the family's name for a gauge.
    #[must_use]
    pub fn sample_names(&self) -> &[String] {
        &self.samples
    }
}

impl RegistryBuilder {
    /// Adds `families`.
    #[must_use]
    pub fn with(mut self, families: &dyn Families) -> Self {
        families.register(&mut self);
        self
    }

    /// Adds one family, `name` without `_total`.
    pub fn register(
        &mut self,
        name: &str,
        help: &str,
        metric: impl prometheus_client::registry::Metric,
    ) {
        use prometheus_client::metrics::MetricType;
        match metric.metric_type() {
            MetricType::Counter => self.samples.push(format!("{name}_total")),
            MetricType::Histogram => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    self.samples.push(format!("{name}{suffix}"));
                }
            }
            _ => self.samples.push(name.to_owned()),
        }
        self.registry.register(name, help, metric);
    }

    /// The finished registry.
    #[must_use]
    pub fn build(self) -> Registry {
        Registry {
            registry: Arc::new(self.registry),
            samples: self.samples.into(),
        }
    }
}

/// The names of the families in an exposition, as `# TYPE` lines give
/// them (counters without `_total`), in order.
#[must_use]
pub fn family_names(exposition: &str) -> Vec<String> {
    exposition
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registry_has_the_build_info_and_only_what_was_added() {
        let registry = Registry::builder().build();
        let text = registry.render();
        assert_eq!(family_names(&text), ["nodescope_build_info"]);
        assert!(
            text.contains(&format!(
                "nodescope_build_info{{version=\"{}\"}} 1",
                env!("CARGO_PKG_VERSION")
            )),
            "{text}"
        );
    }
}
