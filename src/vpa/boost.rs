//! AEP-7862's CPU startup boost (upstream VPA 1.7/1.8,
//! `spec.startupBoost` and `containerPolicies[].startupBoost`): a pod is
//! given more CPU than its recommendation while it starts, and the updater
//! takes it back in place once it has been Ready for `durationSeconds`.
//!
//! Kept as the API has it (the type as written, factor and quantity both
//! optional) so that the webhook can answer a malformed boost the way
//! upstream's admission controller does, with the same error, rather than
//! the store dropping the whole VPA.

use super::policy::VpaPolicy;
use crate::quantity::Quantity;

/// `startupBoost.cpu.type`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum BoostKind {
    /// `Factor`, and upstream's reading of an empty type.
    #[default]
    Factor,
    /// `Quantity`: added to the request.
    Quantity,
    /// Anything else; the CRD's enum refuses it, a hand-made CRD may not,
    /// and upstream then answers `unsupported startup boost type`.
    Other(String),
}

/// `startupBoost.cpu` (upstream `GenericStartupBoost`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuBoost {
    /// `type`.
    pub kind: BoostKind,
    /// `factor`: the request is multiplied by it.
    pub factor: Option<i32>,
    /// `quantity`: added to the request.
    pub quantity: Option<Quantity>,
    /// `durationSeconds`: how long after the pod became Ready the boost
    /// is kept; `None` reads as upstream's default 0.
    pub duration_seconds: Option<i32>,
}

/// `startupBoost` (upstream `StartupBoost`). Without `cpu` it boosts
/// nothing ("If this field is not set, no startup boost is applied").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StartupBoost {
    /// `cpu`.
    pub cpu: Option<CpuBoost>,
}

impl VpaPolicy {
    /// The boost for `container`: its container policy's when that has one,
    /// else the VPA-wide one (upstream `getContainerStartupBoostPolicy`).
    #[must_use]
    pub fn startup_boost_for(&self, container: &str) -> Option<&StartupBoost> {
        self.container_policy(container)
            .and_then(|p| p.startup_boost.as_ref())
            .or(self.startup_boost.as_ref())
    }

    /// Whether any boost is configured, VPA-wide or for a container
    /// (upstream `HasStartupBoost`).
    #[must_use]
    pub fn has_startup_boost(&self) -> bool {
        self.startup_boost.is_some()
            || self
                .container_policies
                .iter()
                .any(|p| p.startup_boost.is_some())
    }

    /// How long `container` keeps its boost after the pod became Ready, in
    /// seconds (upstream `getContainerCPUStartupBoostDuration`): the
    /// container policy's `durationSeconds` when it sets one, else the
    /// VPA-wide one, else 0. Unlike the boost itself, a container policy
    /// whose boost has no duration does not hide the VPA-wide duration.
    #[must_use]
    pub fn startup_boost_duration(&self, container: &str) -> i64 {
        let duration = |b: Option<&StartupBoost>| {
            b.and_then(|b| b.cpu.as_ref())
                .and_then(|c| c.duration_seconds)
        };
        let container_policy = self
            .container_policy(container)
            .and_then(|p| duration(p.startup_boost.as_ref()));
        i64::from(
            container_policy
                .or(duration(self.startup_boost.as_ref()))
                .unwrap_or(0),
        )
    }
}
