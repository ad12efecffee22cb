//! The Feature families of the features controller: each Feature's state,
//! the uses and the unconfirmed reports left, the transitions made and the
//! cleanup patches sent. Feature labels come from the Features the leader
//! read in its last pass (a handful, created by admins), and a Feature that
//! is gone loses its series at the next pass.

use crate::metrics::{label_values, Families, HttpMetrics, LeaderMetrics, Registry};
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// A state as the transitions label it; `none` before the first.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum StateLabel {
    None,
    On,
    Off,
    TurningOn,
    TurningOff,
}

label_values!(StateLabel { None => "none", On => "On", Off => "Off", TurningOn => "TurningOn", TurningOff => "TurningOff" });

impl StateLabel {
    const STATES: [Self; 4] = [Self::On, Self::Off, Self::TurningOn, Self::TurningOff];

    /// The label of `state` (`None`: no state yet).
    #[must_use]
    pub fn of(state: Option<super::State>) -> Self {
        use super::State;
        match state {
            None => Self::None,
            Some(State::On) => Self::On,
            Some(State::Off) => Self::Off,
            Some(State::TurningOn) => Self::TurningOn,
            Some(State::TurningOff) => Self::TurningOff,
        }
    }
}

/// What happened to one cleanup patch.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum CleanupResult {
    /// The field was removed.
    Applied,
    /// The object changed since it was read (the `test` failed) or is
    /// gone: the next pass reads it again.
    Conflict,
    /// Refused for another reason (RBAC, a policy, the network).
    Failed,
}

label_values!(CleanupResult { Applied => "applied", Conflict => "conflict", Failed => "failed" });

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FeatureLabel {
    namespace: String,
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FeatureStateLabel {
    namespace: String,
    name: String,
    state: StateLabel,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransitionLabel {
    from: StateLabel,
    to: StateLabel,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CleanupLabel {
    result: CleanupResult,
}

/// The Feature families.
#[derive(Clone, Default)]
pub struct FeatureFamilies {
    state: Family<FeatureStateLabel, Gauge>,
    uses: Family<FeatureLabel, Gauge>,
    reports_missing: Family<FeatureLabel, Gauge>,
    transitions: Family<TransitionLabel, Counter>,
    cleanup_patches: Family<CleanupLabel, Counter>,
    /// The Features the last pass set series for, so the next removes only
    /// those that are gone: a pass never clears a family first, because a
    /// scrape between the clear and the sets would miss Features that are
    /// there (the balloon controller's per-node families once did).
    observed: Arc<Mutex<HashSet<FeatureLabel>>>,
}

/// One Feature as the last pass saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureSample {
    pub namespace: String,
    pub name: String,
    pub state: Option<super::State>,
    /// Objects its gating policies still find.
    pub uses: usize,
    /// Live instances that have not confirmed the state the Feature is
    /// turning to.
    pub reports_missing: usize,
}

impl FeatureFamilies {
    /// Every transition and every cleanup result at 0.
    #[must_use]
    pub fn new() -> Self {
        let families = Self::default();
        for from in std::iter::once(StateLabel::None).chain(StateLabel::STATES) {
            for to in StateLabel::STATES {
                if from != to {
                    let _ = families
                        .transitions
                        .get_or_create(&TransitionLabel { from, to });
                }
            }
        }
        for result in [
            CleanupResult::Applied,
            CleanupResult::Conflict,
            CleanupResult::Failed,
        ] {
            let _ = families
                .cleanup_patches
                .get_or_create(&CleanupLabel { result });
        }
        families
    }

    /// Replaces the per-Feature series with `features` (a pass's view): the
    /// state gauge is 1 for its state and 0 for the others.
    pub fn observe(&self, features: &[FeatureSample]) {
        let mut now = HashSet::with_capacity(features.len());
        for f in features {
            let current = StateLabel::of(f.state);
            for state in StateLabel::STATES {
                self.state
                    .get_or_create(&FeatureStateLabel {
                        namespace: f.namespace.clone(),
                        name: f.name.clone(),
                        state,
                    })
                    .set(i64::from(state == current));
            }
            let label = FeatureLabel {
                namespace: f.namespace.clone(),
                name: f.name.clone(),
            };
            self.uses
                .get_or_create(&label)
                .set(i64::try_from(f.uses).unwrap_or(i64::MAX));
            self.reports_missing
                .get_or_create(&label)
                .set(i64::try_from(f.reports_missing).unwrap_or(i64::MAX));
            now.insert(label);
        }
        let mut observed = self
            .observed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for gone in observed.difference(&now) {
            for state in StateLabel::STATES {
                self.state.remove(&FeatureStateLabel {
                    namespace: gone.namespace.clone(),
                    name: gone.name.clone(),
                    state,
                });
            }
            self.uses.remove(gone);
            self.reports_missing.remove(gone);
        }
        *observed = now;
    }

    /// Counts one state change written.
    pub fn transition(&self, from: Option<super::State>, to: super::State) {
        self.transitions
            .get_or_create(&TransitionLabel {
                from: StateLabel::of(from),
                to: StateLabel::of(Some(to)),
            })
            .inc();
    }

    /// Counts one cleanup patch.
    pub fn cleanup_patch(&self, result: CleanupResult) {
        self.cleanup_patches
            .get_or_create(&CleanupLabel { result })
            .inc();
    }
}

impl Families for FeatureFamilies {
    fn register(&self, registry: &mut crate::metrics::RegistryBuilder) {
        registry.register(
            "nodescope_feature_state",
            "1 for the state each Feature is in (status.state), 0 for the others; series from the leader's first pass",
            self.state.clone(),
        );
        registry.register(
            "nodescope_feature_uses",
            "Objects the Feature's gating policies still find as uses",
            self.uses.clone(),
        );
        registry.register(
            "nodescope_feature_reports_missing",
            "Live reporting instances that have not yet confirmed TurningOff or Off while the Feature is desired Disabled",
            self.reports_missing.clone(),
        );
        registry.register(
            "nodescope_feature_transitions",
            "State changes written, by from and to state",
            self.transitions.clone(),
        );
        registry.register(
            "nodescope_feature_cleanup_patches",
            "Cleanup patches sent while a Feature is TurningOff, by result",
            self.cleanup_patches.clone(),
        );
    }
}

/// `nodescope features controller`: the Features as the leader sees them
/// ([`FeatureFamilies`]), its election and its port's responses.
#[derive(Clone)]
pub struct FeaturesMetrics {
    pub features: FeatureFamilies,
    pub leader: LeaderMetrics,
    pub http: HttpMetrics,
    registry: Registry,
}

impl FeaturesMetrics {
    /// The controller's families, elected on `lease` (`namespace/name`).
    #[must_use]
    pub fn new(lease: &str) -> Self {
        let features = FeatureFamilies::new();
        let leader = LeaderMetrics::new(lease);
        let http = HttpMetrics::default();
        let registry = Registry::builder()
            .with(&features)
            .with(&leader)
            .with(&http)
            .build();
        Self {
            features,
            leader,
            http,
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leader_gauge_is_one_per_lease_while_leading() {
        let m = FeaturesMetrics::new("nodescope-system/nodescope-features");
        let text = m.registry().render();
        assert!(
            text.contains("nodescope_leader{lease=\"nodescope-system/nodescope-features\"} 0\n"),
            "{text}"
        );
        m.leader.leader("nodescope-system/nodescope-features", true);
        assert!(m
            .registry()
            .render()
            .contains("nodescope_leader{lease=\"nodescope-system/nodescope-features\"} 1\n"));
    }

    fn sample(name: &str, uses: usize) -> FeatureSample {
        FeatureSample {
            namespace: "team".into(),
            name: name.into(),
            state: Some(crate::features::State::TurningOff),
            uses,
            reports_missing: 1,
        }
    }

    #[test]
    fn a_pass_replaces_the_features_it_saw_and_removes_only_those_gone() {
        let m = FeaturesMetrics::new("nodescope-system/nodescope-features");
        m.features.observe(&[sample("a", 3), sample("b", 4)]);
        m.features.observe(&[sample("b", 5)]);
        let text = m.render();
        assert!(
            !text.contains("name=\"a\""),
            "a Feature that is gone keeps no series: {text}"
        );
        assert!(
            text.contains("nodescope_feature_uses{namespace=\"team\",name=\"b\"} 5\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "nodescope_feature_state{namespace=\"team\",name=\"b\",state=\"TurningOff\"} 1\n"
            ),
            "{text}"
        );
        m.features.observe(&[]);
        assert!(!m.render().contains("name=\"b\""), "{}", m.render());
    }
}
