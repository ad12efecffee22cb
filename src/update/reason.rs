//! Why a pass does what it does to a pod, in a few words: the REASON
//! column of `update --plan` and the `reason` of its JSON and YAML, as a
//! kubectl table keeps its columns short (an Event's `reason` beside its
//! `message`). The sentence that explains it, with the numbers and the
//! flags, is the plan's `message` (`-o wide`, `-o json|yaml`, and the
//! updater's log).

use serde::{Serialize, Serializer};

/// One plan's reason. A closed set, so that a script may match on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Reason {
    /// At its group's recommendation already.
    #[default]
    AtTarget,
    /// The scope Feature is not On: the updater leaves every pod alone.
    FeatureNotOn,
    /// `updateMode: Off`.
    UpdateModeOff,
    /// `updateMode: Initial`.
    UpdateModeInitial,
    /// A balloon pod: the balloon controller's alone.
    BalloonPod,
    /// Being deleted.
    Terminating,
    /// Not bound to a node yet.
    NotScheduled,
    /// Bound to a Node the store does not know.
    UnknownNode,
    /// No recommendation for its containers.
    NoRecommendation,
    /// A recommendation that cannot be applied (the message says why).
    UnusableRecommendation,
    /// The change is below `--pod-update-threshold`.
    ChangeTooSmall,
    /// Nothing would change.
    NoChange,
    /// Within its recommendation, with no `status.startTime` yet.
    NoStartTime,
    /// Within its recommendation, younger than the lifetime threshold.
    TooYoung,
    /// Its last resize was infeasible and the recommendation asks no less.
    InfeasibleBefore,
    /// Fewer live pods than `--min-replicas`.
    MinReplicas,
    /// Below its recommendation.
    BelowTarget,
    /// Above its recommendation.
    AboveTarget,
    /// Outside its recommended range (a request is missing).
    OutsideBounds,
    /// A container was OOM-killed soon after it started.
    OomKilled,
    /// nodescope's webhook has not renewed its status Lease: no eviction.
    WebhookStale,
    /// The pod is Pending: resized once running.
    PodPending,
    /// As many pods are disrupted as `--eviction-tolerance` allows.
    EvictionTolerance,
    /// A resize was asked for; the kubelet has not actuated it yet.
    ResizePending,
    /// The kubelet deferred the resize.
    ResizeDeferred,
    /// The kubelet found the resize infeasible.
    ResizeInfeasible,
    /// The kubelet is resizing.
    ResizeInProgress,
    /// The resize failed.
    ResizeFailed,
    /// A resize status nodescope does not know.
    ResizeUnknown,
    /// Its CPU startup boost has not expired.
    BoostActive,
    /// Its CPU startup boost expired, but cannot be undone (the message
    /// says why).
    BoostStuck,
    /// Its boost expired; the unboost is held back this pass.
    UnboostHeld,
    /// Its boost expired: back to its recommendation in place.
    Unboost,
}

impl Reason {
    /// The words in the table and the JSON.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::AtTarget => "at target",
            Reason::FeatureNotOn => "feature not On",
            Reason::UpdateModeOff => "updateMode Off",
            Reason::UpdateModeInitial => "updateMode Initial",
            Reason::BalloonPod => "balloon pod",
            Reason::Terminating => "terminating",
            Reason::NotScheduled => "not scheduled",
            Reason::UnknownNode => "unknown node",
            Reason::NoRecommendation => "no recommendation",
            Reason::UnusableRecommendation => "unusable recommendation",
            Reason::ChangeTooSmall => "change too small",
            Reason::NoChange => "no change",
            Reason::NoStartTime => "no startTime",
            Reason::TooYoung => "too young",
            Reason::InfeasibleBefore => "infeasible before",
            Reason::MinReplicas => "below min replicas",
            Reason::BelowTarget => "below target",
            Reason::AboveTarget => "above target",
            Reason::OutsideBounds => "outside bounds",
            Reason::OomKilled => "OOM-killed",
            Reason::WebhookStale => "webhook stale",
            Reason::PodPending => "pod pending",
            Reason::EvictionTolerance => "eviction tolerance",
            Reason::ResizePending => "resize pending",
            Reason::ResizeDeferred => "resize deferred",
            Reason::ResizeInfeasible => "resize infeasible",
            Reason::ResizeInProgress => "resize in progress",
            Reason::ResizeFailed => "resize failed",
            Reason::ResizeUnknown => "resize unknown",
            Reason::BoostActive => "boost active",
            Reason::BoostStuck => "boost stuck",
            Reason::UnboostHeld => "unboost held",
            Reason::Unboost => "unboost",
        }
    }

    /// The reason of a pod held back by its resize status.
    #[must_use]
    pub fn of_resize(status: &crate::pods::ResizeStatus) -> Self {
        use crate::pods::ResizeStatus as S;
        match status {
            S::None => Reason::ResizePending,
            S::Deferred(_) => Reason::ResizeDeferred,
            S::Infeasible(_) => Reason::ResizeInfeasible,
            S::InProgress => Reason::ResizeInProgress,
            S::Error(_) => Reason::ResizeFailed,
            S::Unknown(_) => Reason::ResizeUnknown,
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Reason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Reason;

    #[test]
    fn a_reason_is_a_few_words_in_the_table_and_the_json() {
        assert_eq!(Reason::BelowTarget.to_string(), "below target");
        assert_eq!(
            serde_json::to_value(Reason::NoStartTime).ok(),
            Some(serde_json::json!("no startTime"))
        );
        assert_eq!(
            Reason::of_resize(&crate::pods::ResizeStatus::Infeasible("x".into())),
            Reason::ResizeInfeasible
        );
    }
}
