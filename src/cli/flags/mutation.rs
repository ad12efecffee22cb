//! The flags that change what the mutating webhook answers, beside the
//! store and the policies: upstream VPA's `--feature-gates` and
//! `--max-allowed-cpu-boost`. `serve` and `dry-run` flatten this one
//! struct, so that a dry run given the webhook's flags previews exactly the
//! patch the webhook would send, and a gate added to one is in both.

use super::{feature_gates, quantity};
use crate::mutate::BoostSettings;
use clap::Args;

/// `--feature-gates` and `--max-allowed-cpu-boost`, as `serve` reads them
/// (also from `NODESCOPE_<FLAG>`, as the Deployment sets them).
#[derive(Debug, Args, Clone, Default, PartialEq, Eq)]
pub struct MutationFlags {
    /// Upstream VPA's gates as `Name=true,...`. `CPUStartupBoost` (off by
    /// default, as upstream) boosts the CPU of new pods whose VPA has a
    /// `startupBoost`; `PerVPAConfig` changes nothing the webhook does.
    #[arg(long, env = "NODESCOPE_FEATURE_GATES", default_value = "", value_parser = feature_gates::parse)]
    pub feature_gates: feature_gates::FeatureGates,
    /// The most CPU a boosted container is given (upstream's flag); unset:
    /// no cap.
    #[arg(long, env = "NODESCOPE_MAX_ALLOWED_CPU_BOOST", value_parser = quantity)]
    pub max_allowed_cpu_boost: Option<crate::quantity::Quantity>,
}

impl MutationFlags {
    /// The boost the webhook's [`crate::admission::Decider`] applies.
    #[must_use]
    pub fn boost(&self) -> BoostSettings {
        BoostSettings {
            enabled: self.feature_gates.cpu_startup_boost,
            max_allowed_cpu_boost: self.max_allowed_cpu_boost.clone(),
        }
    }
}
