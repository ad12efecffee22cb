//! The words of a plan: why a pod is a candidate (naming upstream's
//! measure for what it is), why one waits for its Node, and a resize
//! status as the kubelet reports it.

use super::Group;
use crate::update::priority::PodPriority;
use crate::update::Reason;
use crate::vpa::ScopeKey;

impl Group<'_> {
    /// Why a pod on `node` waits: the store does not know the Node whose
    /// label names its group.
    pub(super) fn unknown_node(&self, node: &str) -> String {
        let label = match &self.vpa.scope {
            ScopeKey::Label(key) => format!("its {key} label"),
            ScopeKey::NodeName => "its group".to_owned(),
        };
        format!(
            "node {node:?} is not known (no such Node in the store), so {label} is unknown: \
             waiting until it is rather than moving the pod to the VerticalPodAutoscaler-wide \
             recommendation"
        )
    }
}

/// Why a pod is a candidate, in words; formatted only into the reason it
/// ends in (a pass makes tens of thousands). The number is upstream's
/// resource diff, named as what it is: over the pod's resources, the sum
/// of |request - recommendation| / request.
pub(super) struct Why<'p> {
    pub(super) priority: &'p PodPriority,
    pub(super) quick_oom: bool,
    /// The VPA's `evictAfterOOMSeconds` when it replaced the flag.
    pub(super) oom_threshold_of_vpa: Option<i64>,
    /// `--pod-update-threshold`.
    pub(super) threshold: f64,
}

impl Why<'_> {
    /// The same, in a few words.
    pub(super) fn reason(&self) -> Reason {
        if self.quick_oom {
            Reason::OomKilled
        } else if self.priority.outside_recommended_range {
            Reason::OutsideBounds
        } else if self.priority.scale_up {
            Reason::BelowTarget
        } else {
            Reason::AboveTarget
        }
    }
}

impl std::fmt::Display for Why<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.quick_oom {
            match self.oom_threshold_of_vpa {
                Some(s) => write!(
                    f,
                    "a container was OOM-killed sooner than its VPA's evictAfterOOMSeconds \
                     ({s}) after it started; "
                )?,
                None => f.write_str(
                    "a container was OOM-killed sooner than --evict-after-oom-threshold after \
                     it started; ",
                )?,
            }
        } else if self.priority.outside_recommended_range {
            f.write_str("outside its recommended range (a request is missing); ")?;
        } else if self.priority.scale_up {
            f.write_str("below its recommendation: ")?;
        } else {
            f.write_str("above its recommendation: ")?;
        }
        write!(
            f,
            "the summed relative difference of its requests from the recommendation \
             (upstream's resource diff) is {:.2}",
            self.priority.resource_diff
        )?;
        if !self.quick_oom && !self.priority.outside_recommended_range {
            write!(f, ", at least --pod-update-threshold {:.2}", self.threshold)?;
        }
        Ok(())
    }
}

pub(super) fn status_words(status: &crate::pods::ResizeStatus) -> String {
    use crate::pods::ResizeStatus as S;
    match status {
        S::None => "none".into(),
        S::Deferred(m) => format!("deferred ({m})"),
        S::Infeasible(m) => format!("infeasible ({m})"),
        S::InProgress => "in progress".into(),
        S::Error(m) => format!("failed ({m})"),
        S::Unknown(r) => format!("in an unknown state ({r})"),
    }
}
