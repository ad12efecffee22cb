//! The pure core of upstream's VPA recommender (kubernetes/autoscaler,
//! `vertical-pod-autoscaler/pkg/recommender`, as released in VPA 1.7.1),
//! with the scope value of the pod's node as one more part of the
//! aggregation key (AEP-10031), in upstream's cut:
//! - arithmetic: bucket schemes, the decaying histogram,
//!   [`AggregateContainerState`], the estimator chain and the per-pod
//!   recommendation (`scheme`, `histogram`, `aggregate`, `estimate`);
//! - the model: per-pod-container memory windows and OOM bumps
//!   ([`container`]), the keyed history ([`model`]), fed from [`input`]
//!   and [`usage`];
//! - logic to status: [`status`] (capping, rounding, conditions, groups),
//!   kept within what etcd stores by [`fit`];
//! - persistence: [`checkpoints`] (sharded `RecommendationCheckpoint`
//!   objects), and upstream's `VerticalPodAutoscalerCheckpoint`s
//!   ([`upstream`], to import from and to write for upstream);
//! - edges: [`replay`] (files, no cluster) and [`cluster`] with [`watch`]
//!   and [`upstream_cluster`] (the apiserver, Lease held).
//!
//! Everything but the two edges is pure: no I/O, no clock.
//!
//! The numbers are upstream's bit for bit: the histograms hold the same
//! `f64` weights upstream holds (only the buckets in use, see
//! [`histogram`]), Go's non-correctly-rounded math routines (`Log`, `Exp2`,
//! `Pow`, `Ldexp`, `time.Round`) are ported in a private module, and the
//! estimator keeps upstream's integer rounding at every stage ([`estimate`]).
//!
//! Per key (one [`AggregateContainerState`]) this takes 112 bytes plus
//! 8 bytes per bucket in each histogram's window: a week of per-minute CPU
//! samples with ±20% noise around 250m and seven daily memory peaks take
//! 168 bytes (112 + 5 CPU and 2 memory buckets; the memory test in
//! `histogram_tests.rs`), before allocator overhead for the two windows.

pub mod aggregate;
mod api;
pub mod checkpoint;
pub mod checkpoint_dir;
pub mod checkpoints;
pub mod cluster;
pub mod container;
pub mod estimate;
pub mod fit;
mod gomath;
pub mod histogram;
pub mod input;
pub mod model;
pub mod per_vpa;
pub mod recording;
pub mod replay;
pub mod scheme;
pub mod status;
pub mod tracked;
pub mod upstream;
pub mod upstream_cluster;
pub mod usage;
pub mod vpa;
pub mod watch;

pub use aggregate::{AggregateCheckpoint, AggregateContainerState, HistoryConfig};
pub use checkpoint::HistogramCheckpoint;
pub use estimate::{recommend_pod, ContainerRecommendation, RecommenderConfig, Resources};
pub use histogram::DecayingHistogram;
pub use scheme::BucketScheme;

/// Invalid bucket schemes and checkpoints.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HistogramError {
    /// `BucketScheme::exponential` / `linear` parameters out of range.
    #[error("invalid bucket scheme: {0}")]
    InvalidScheme(String),
    /// A checkpoint field that cannot be restored.
    #[error("invalid checkpoint field `{field}`: {reason}")]
    InvalidCheckpoint {
        /// The field, e.g. `cpu.w[3]`.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
}

#[cfg(test)]
#[path = "aggregate_tests.rs"]
mod aggregate_tests;
#[cfg(test)]
mod dense_reference;
#[cfg(test)]
#[path = "estimate_tests.rs"]
mod estimate_tests;
#[cfg(test)]
#[path = "histogram_tests.rs"]
mod histogram_tests;
#[cfg(test)]
#[path = "property_tests.rs"]
mod property_tests;
