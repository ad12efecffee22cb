//! The startup boost in a pass (upstream VPA 1.8's updater with the
//! `CPUStartupBoost` gate, `RunOnce` and `CanUnboost`): a pod that carries
//! a `vpaCpuStartupBoost/<container>` annotation is not updated as the
//! others are; once a boost has expired it is resized in place back to its
//! group's recommendation, whatever the updateMode, within the
//! DaemonSet's tolerance, and the expired annotations are removed.

use super::{desired, push, Group};
use crate::mutate::pod::PodView;
use crate::mutate::unboost::{boosted_containers, expired_boosts, unboost_sizing};
use crate::mutate::{boost::boost_annotation_key, resize_ops, Sizing};
use crate::pods::{PodPhase, RunningPod};
use crate::update::restriction::GroupStats;
use crate::update::{Action, PodPlan, Reason};
use crate::vpa::Placement;

/// A boosted pod, set aside in the first loop of a pass.
pub(super) struct Boosted<'p> {
    pub(super) pod: &'p RunningPod,
    pub(super) view: PodView<'p>,
    pub(super) plan: PodPlan,
    pub(super) sizing: Sizing,
    pub(super) placement: Placement<'p>,
}

impl Group<'_> {
    /// Whether `pod` is handled as a boosted pod: the gate is on, its VPA
    /// has a boost, it carries a boost annotation and it is a pod the
    /// updater acts on at all (bound to a known node, alive, no balloon).
    pub(super) fn is_boosted(&self, pod: &RunningPod, placement: Placement<'_>) -> bool {
        self.config.startup_boost
            && self.vpa.has_startup_boost()
            && boosted_containers(pod.annotations()).next().is_some()
            && !pod.balloon
            && !pod.terminating
            && pod.node.is_some()
            && !matches!(placement, Placement::UnknownNode { .. })
    }

    /// Decides a boosted pod: still boosted (deferred), or unboosted in
    /// place when `stats` (`None` below --min-replicas) allow.
    pub(super) fn unboost(
        &self,
        b: Boosted<'_>,
        stats: Option<&mut GroupStats>,
        out: &mut Vec<PodPlan>,
    ) {
        let Boosted {
            pod,
            view,
            mut plan,
            sizing,
            placement,
        } = b;
        let boosted: Vec<&str> = boosted_containers(pod.annotations()).collect();
        let expired = expired_boosts(
            boosted.iter().copied(),
            self.vpa,
            pod.ready,
            pod.ready_since,
            self.now,
        );
        plan.action = Action::Deferred;
        if expired.is_empty() {
            plan.reason = Reason::BoostActive;
            plan.message = if pod.ready {
                let longest = boosted
                    .iter()
                    .map(|c| self.vpa.startup_boost_duration(c))
                    .max()
                    .unwrap_or(0);
                let since = pod
                    .ready_since
                    .map_or_else(String::new, |t| format!(" (Ready {}s ago)", self.now - t));
                format!(
                    "CPU startup boost in progress: unboosted {longest}s after the pod became \
                     Ready{since}"
                )
                .into()
            } else {
                "CPU startup boost in progress: unboosted once the pod has been Ready for its \
                 durationSeconds"
                    .into()
            };
            push(out, plan);
            return;
        }
        let unboosted = match unboost_sizing(&view, self.vpa, &sizing, &expired) {
            Ok(s) => s,
            Err(why) => {
                plan.reason = Reason::BoostStuck;
                plan.message = format!("CPU startup boost expired, but {why}").into();
                push(out, plan);
                return;
            }
        };
        let mut plan = PodPlan {
            action: Action::Deferred,
            ..self.plan_of(pod, placement, &unboosted)
        };
        let held = if pod.phase == PodPhase::Pending {
            Some("pending".to_owned())
        } else if pod.resize.is_updating() {
            Some("a resize is pending or in progress".to_owned())
        } else {
            match stats.as_deref() {
                None => Some(format!(
                    "fewer live pods than --min-replicas {}",
                    self.config.min_replicas
                )),
                Some(s) if !s.is_pod_disruptable() => Some(format!(
                    "{} of {} pods may be disrupted at once (--eviction-tolerance) and that many \
                     already are",
                    s.eviction_tolerance.max(1),
                    s.configured
                )),
                Some(_) => None,
            }
        };
        if let Some(held) = held {
            plan.reason = Reason::UnboostHeld;
            plan.message = format!("unboost: CPU startup boost expired; held back: {held}").into();
            push(out, plan);
            return;
        }
        let ops = resize_ops(&view, &unboosted);
        if !ops.is_empty() {
            if let Some(stats) = stats {
                stats.in_place_initiated += 1;
            }
        }
        plan.reason = Reason::Unboost;
        plan.message = format!(
            "unboost: the CPU startup boost of {} expired (durationSeconds after Ready); back to \
             its recommendation in place{}",
            expired.join(", "),
            if ops.is_empty() {
                ", which it has already: only the annotation is removed"
            } else {
                ""
            }
        )
        .into();
        plan.ops = ops;
        plan.unboost = expired.iter().map(|c| boost_annotation_key(c)).collect();
        plan.action = Action::Resize;
        desired::fill(&mut plan, pod, &unboosted);
        push(out, plan);
    }
}
