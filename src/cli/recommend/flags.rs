//! The flags of `nodescope recommend` that configure the recommender
//! itself, apart from where its inputs come from: upstream's recommender's
//! numbers ([`UpstreamFlags`]) and how a replica runs in the cluster
//! ([`RunningFlags`]).

use crate::cli::flags::{self, feature_gates, vpa_namespaces};
use crate::quantity::Quantity;
use crate::recommend::aggregate::HistoryConfig;
use crate::recommend::container::PeakConfig;
use crate::recommend::estimate::RecommenderConfig;
use crate::recommend::model::ModelConfig;
use crate::recommend::replay::Replay;
use crate::recommend::status::StatusConfig;
use clap::Args;
use std::time::Duration;

/// How the recommender runs against a cluster.
#[derive(Debug, Args, Clone)]
pub struct RunningFlags {
    /// How often the leader checkpoints its history (and once more when it
    /// stops). A leader that crashes loses at most this much history.
    #[arg(long, default_value = "10m", value_parser = flags::interval, allow_hyphen_values = true)]
    pub checkpoint_interval: Duration,
    /// This replica's name: the Lease holder's identity (the pod name).
    #[arg(long, env = "POD_NAME", default_value = "nodescope-recommender")]
    pub instance: String,
    // The Lease flags take upstream's leader election names; the hidden
    // aliases are nodescope's earlier names, which its other controllers
    // keep. The defaults are nodescope's own, so that this Lease is never
    // upstream's recommender's (`kube-system/vpa-recommender-lease`).
    /// The namespace of the Lease the replicas elect their leader on.
    #[arg(
        long = "leader-elect-resource-namespace",
        value_name = "LEADER_ELECT_RESOURCE_NAMESPACE",
        alias = "lease-namespace",
        env = "POD_NAMESPACE",
        default_value = "nodescope-system"
    )]
    pub lease_namespace: String,
    /// The Lease's name.
    #[arg(
        long = "leader-elect-resource-name",
        value_name = "LEADER_ELECT_RESOURCE_NAME",
        alias = "lease-name",
        default_value = "nodescope-recommender"
    )]
    pub lease_name: String,
    /// How long a dead leader's Lease lasts (at least 2s).
    #[arg(long = "leader-elect-lease-duration", value_name = "LEADER_ELECT_LEASE_DURATION", alias = "lease-duration", default_value = "15s", value_parser = flags::lease_duration, allow_hyphen_values = true)]
    pub lease_duration: Duration,
    /// Where /metrics, /healthz and /readyz are served (plain HTTP).
    // Upstream's name. The hidden alias is what nodescope's other
    // controllers call it, so that one name works for every controller.
    #[arg(long = "address", alias = "metrics-listen", default_value = "0.0.0.0:8942", value_parser = flags::listen_address)]
    pub address: std::net::SocketAddr,
    /// `--log-format`, `--log-level`.
    #[command(flatten)]
    pub logging: crate::cli::running::LogFlags,
}

/// upstream's recommender flags (vertical-pod-autoscaler/pkg/recommender/
/// config/config.go), names and defaults unchanged.
#[derive(Debug, Args, Clone)]
pub struct UpstreamFlags {
    /// VPAs naming this recommender in spec.recommenders are computed; a
    /// VPA naming none belongs to "default". Its checkpoints carry the name
    /// as a label value (nodescope.dev/recommender), so it must be one.
    #[arg(long, default_value = "default", value_parser = flags::label_value)]
    pub recommender_name: String,
    /// How often metrics are fetched and recommendations computed.
    #[arg(long, default_value = "1m", value_parser = flags::interval, allow_hyphen_values = true)]
    pub recommender_interval: Duration,
    #[command(flatten)]
    pub namespaces: vpa_namespaces::NamespaceFlags,
    /// Fraction of usage added as the safety margin.
    #[arg(long, default_value_t = 0.15, value_parser = flags::non_negative, allow_negative_numbers = true)]
    pub recommendation_margin_fraction: f64,
    /// Minimum CPU recommendation for a pod, shared among its containers.
    #[arg(long, default_value_t = 25.0, value_parser = flags::non_negative, allow_negative_numbers = true)]
    pub pod_recommendation_min_cpu_millicores: f64,
    /// Minimum memory recommendation for a pod, shared among its containers.
    #[arg(long, default_value_t = 250.0, value_parser = flags::non_negative, allow_negative_numbers = true)]
    pub pod_recommendation_min_memory_mb: f64,
    /// CPU usage percentile of the target.
    #[arg(long, default_value_t = 0.9, value_parser = flags::percentile, allow_negative_numbers = true)]
    pub target_cpu_percentile: f64,
    /// CPU usage percentile of the lower bound.
    #[arg(long, default_value_t = 0.5, value_parser = flags::percentile, allow_negative_numbers = true)]
    pub recommendation_lower_bound_cpu_percentile: f64,
    /// CPU usage percentile of the upper bound.
    #[arg(long, default_value_t = 0.95, value_parser = flags::percentile, allow_negative_numbers = true)]
    pub recommendation_upper_bound_cpu_percentile: f64,
    /// Memory peak percentile of the target.
    #[arg(long, default_value_t = 0.9, value_parser = flags::percentile, allow_negative_numbers = true)]
    pub target_memory_percentile: f64,
    /// Memory peak percentile of the lower bound.
    #[arg(long, default_value_t = 0.5, value_parser = flags::percentile, allow_negative_numbers = true)]
    pub recommendation_lower_bound_memory_percentile: f64,
    /// Memory peak percentile of the upper bound.
    #[arg(long, default_value_t = 0.95, value_parser = flags::percentile, allow_negative_numbers = true)]
    pub recommendation_upper_bound_memory_percentile: f64,
    /// The time unit of the CPU bounds' confidence multiplier.
    #[arg(long, default_value = "24h", value_parser = flags::interval, allow_hyphen_values = true)]
    pub confidence_interval_cpu: Duration,
    /// The time unit of the memory bounds' confidence multiplier.
    #[arg(long, default_value = "24h", value_parser = flags::interval, allow_hyphen_values = true)]
    pub confidence_interval_memory: Duration,
    /// CPU recommendations are rounded up to a multiple of this.
    #[arg(long, default_value_t = 1, value_parser = flags::count_i64, allow_negative_numbers = true)]
    pub round_cpu_millicores: i64,
    /// Memory recommendations are rounded up to a multiple of this.
    #[arg(long, default_value_t = 1, value_parser = flags::count_i64, allow_negative_numbers = true)]
    pub round_memory_bytes: i64,
    /// The window of one memory peak.
    #[arg(long, default_value = "24h", value_parser = flags::interval, allow_hyphen_values = true)]
    pub memory_aggregation_interval: Duration,
    /// How many windows history is kept for.
    #[arg(long, default_value_t = 8, value_parser = flags::count_i64, allow_negative_numbers = true)]
    pub memory_aggregation_interval_count: i64,
    /// Half-life of a memory peak's weight.
    #[arg(long, default_value = "24h", value_parser = flags::interval, allow_hyphen_values = true)]
    pub memory_histogram_decay_half_life: Duration,
    /// Half-life of a CPU sample's weight.
    #[arg(long, default_value = "24h", value_parser = flags::interval, allow_hyphen_values = true)]
    pub cpu_histogram_decay_half_life: Duration,
    /// Memory after an OOM kill: at least this times the usage.
    #[arg(long, default_value_t = 1.2, value_parser = flags::ratio, allow_negative_numbers = true)]
    pub oom_bump_up_ratio: f64,
    /// Memory after an OOM kill: at least the usage plus this many bytes.
    #[arg(long, default_value_t = 104_857_600.0, value_parser = flags::non_negative, allow_negative_numbers = true)]
    pub oom_min_bump_up_bytes: f64,
    /// Largest CPU recommended for a container (a VPA's maxAllowed wins;
    /// 0: no cap).
    #[arg(long, value_parser = flags::quantity, allow_hyphen_values = true)]
    pub container_recommendation_max_allowed_cpu: Option<Quantity>,
    /// Largest memory recommended for a container (a VPA's maxAllowed wins;
    /// 0: no cap).
    #[arg(long, value_parser = flags::quantity, allow_hyphen_values = true)]
    pub container_recommendation_max_allowed_memory: Option<Quantity>,
    /// nodescope's own: a scope value gets a group once each of its
    /// containers has this many CPU samples (1: any history, upstream's
    /// notion of an aggregate that is not empty).
    #[arg(long, default_value_t = 1, value_parser = flags::count_u64, allow_negative_numbers = true)]
    pub group_min_samples: u64,
    /// Alpha features, as upstream's `--feature-gates`: `PerVPAConfig=true`
    /// lets a VPA's container policies set their own oomBumpUpRatio,
    /// oomMinBumpUp and memory aggregation window.
    #[arg(long, default_value = "", value_parser = feature_gates::parse)]
    pub feature_gates: feature_gates::FeatureGates,
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// `a` (named `a_flag`) must not be above `b`: both flags and values named.
fn ordered(a_flag: &str, a: f64, b_flag: &str, b: f64, why: &str) -> Result<(), String> {
    if a > b {
        return Err(format!("--{a_flag} {a} is above --{b_flag} {b}: {why}"));
    }
    Ok(())
}

/// A cap (0: none) below a floor.
fn cap_above_floor(
    cap_flag: &str,
    cap: Option<&Quantity>,
    scale: f64,
    floor_flag: &str,
    floor: f64,
) -> Result<(), String> {
    match cap {
        Some(cap) if !cap.is_zero() && cap.as_approximate_f64() * scale < floor => Err(format!(
            "--{cap_flag} {cap} is below --{floor_flag} {floor}: every recommendation would \
             be capped under its minimum"
        )),
        _ => Ok(()),
    }
}

impl UpstreamFlags {
    /// The checks between flags, each in range on its own (clap checked
    /// that): no bound that can invert a recommendation.
    ///
    /// # Errors
    /// The first pair out of order, naming both flags and their values.
    pub fn check(&self) -> Result<(), String> {
        const LOWER: &str = "the lower bound would be above the target";
        const UPPER: &str = "the target would be above the upper bound";
        ordered(
            "recommendation-lower-bound-cpu-percentile",
            self.recommendation_lower_bound_cpu_percentile,
            "target-cpu-percentile",
            self.target_cpu_percentile,
            LOWER,
        )?;
        ordered(
            "target-cpu-percentile",
            self.target_cpu_percentile,
            "recommendation-upper-bound-cpu-percentile",
            self.recommendation_upper_bound_cpu_percentile,
            UPPER,
        )?;
        ordered(
            "recommendation-lower-bound-memory-percentile",
            self.recommendation_lower_bound_memory_percentile,
            "target-memory-percentile",
            self.target_memory_percentile,
            LOWER,
        )?;
        ordered(
            "target-memory-percentile",
            self.target_memory_percentile,
            "recommendation-upper-bound-memory-percentile",
            self.recommendation_upper_bound_memory_percentile,
            UPPER,
        )?;
        cap_above_floor(
            "container-recommendation-max-allowed-cpu",
            self.container_recommendation_max_allowed_cpu.as_ref(),
            1000.0,
            "pod-recommendation-min-cpu-millicores",
            self.pod_recommendation_min_cpu_millicores,
        )?;
        cap_above_floor(
            "container-recommendation-max-allowed-memory",
            self.container_recommendation_max_allowed_memory.as_ref(),
            1.0 / (1024.0 * 1024.0),
            "pod-recommendation-min-memory-mb",
            self.pod_recommendation_min_memory_mb,
        )
    }

    /// The typed configuration of the model and the status.
    #[must_use]
    pub fn replay(&self) -> Replay {
        let interval_ms = millis(self.memory_aggregation_interval);
        Replay {
            model: ModelConfig {
                history: HistoryConfig {
                    cpu_half_life: self.cpu_histogram_decay_half_life,
                    memory_half_life: self.memory_histogram_decay_half_life,
                    cpu_weight_from_request: false,
                },
                peaks: PeakConfig {
                    interval_ms,
                    oom_bump_up_ratio: self.oom_bump_up_ratio,
                    oom_min_bump_up_bytes: self.oom_min_bump_up_bytes,
                },
                window_length_ms: interval_ms
                    .saturating_mul(self.memory_aggregation_interval_count.max(1)),
                interval_count: self.memory_aggregation_interval_count.max(1),
                per_vpa_config: self.feature_gates.per_vpa_config,
            },
            status: StatusConfig {
                recommender: RecommenderConfig {
                    margin_fraction: self.recommendation_margin_fraction,
                    pod_min_cpu_millicores: self.pod_recommendation_min_cpu_millicores,
                    pod_min_memory_mb: self.pod_recommendation_min_memory_mb,
                    target_cpu_percentile: self.target_cpu_percentile,
                    lower_bound_cpu_percentile: self.recommendation_lower_bound_cpu_percentile,
                    upper_bound_cpu_percentile: self.recommendation_upper_bound_cpu_percentile,
                    confidence_interval_cpu: self.confidence_interval_cpu,
                    target_memory_percentile: self.target_memory_percentile,
                    lower_bound_memory_percentile: self
                        .recommendation_lower_bound_memory_percentile,
                    upper_bound_memory_percentile: self
                        .recommendation_upper_bound_memory_percentile,
                    confidence_interval_memory: self.confidence_interval_memory,
                },
                round_cpu_millicores: self.round_cpu_millicores,
                round_memory_bytes: self.round_memory_bytes,
                max_allowed_cpu: self.container_recommendation_max_allowed_cpu.clone(),
                max_allowed_memory: self.container_recommendation_max_allowed_memory.clone(),
                group_min_samples: self.group_min_samples,
                status_limit: crate::recommend::fit::STATUS_LIMIT,
            },
            recommender_name: self.recommender_name.clone(),
            namespaces: self.namespaces.namespaces(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        upstream: UpstreamFlags,
    }

    #[test]
    fn the_flags_defaults_are_the_librarys_upstream_defaults() {
        let flags = Flags::try_parse_from(["recommend"]).map(|f| f.upstream.replay());
        assert_eq!(flags.ok(), Some(Replay::defaults()));
    }
}
