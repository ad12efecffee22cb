//! One pass: for every pod of every scoped DaemonSet VPA, what to do now.
//! Pure: a function of the store snapshot, the workloads, the
//! configuration, what earlier passes saw ([`Memory`]) and the time.

use super::priority::PodPriority;
use super::restriction::{can_evict, in_place_decision, GroupStats, InPlaceDecision};
use super::workloads::{DaemonSetInfo, Workloads};
use super::{Action, PodPlan, Reason, UpdateConfig};
use crate::mutate::pod::PodView;
use crate::mutate::{resize_ops, Sizing};
use crate::pods::{PodPhase, RunningPod};
use crate::store::Snapshot;
use crate::vpa::{NodeLabels, Placement, ResourceList, UpdateMode, VpaPolicy, SCOPE_FEATURE};
use std::collections::HashMap;

/// What the updater remembers between passes.
#[derive(Clone, Debug, Default)]
pub struct Memory {
    /// Pod UID -> the requests of its last resize the node could not fit
    /// (upstream's `infeasibleAttempts`).
    pub infeasible: HashMap<String, Vec<(String, ResourceList)>>,
    /// Pod key -> when the updater first saw its resize pending or asked
    /// for it (upstream's `lastInPlaceAttemptTimeMap`), Unix seconds.
    pub resizing_since: HashMap<String, i64>,
}

impl Memory {
    /// Forgets pods that are gone.
    pub fn retain_live(&mut self, workloads: &Workloads) {
        let uids: std::collections::HashSet<&str> =
            workloads.pods.values().map(|p| &*p.uid).collect();
        self.infeasible.retain(|uid, _| uids.contains(uid.as_str()));
        self.resizing_since
            .retain(|key, _| workloads.pods.contains_key(key));
    }
}

/// Plans one pass. `webhook_fresh` says whether nodescope's webhook renewed
/// its status Lease recently: without it nothing is evicted.
pub fn plan_pass(
    snapshot: &Snapshot,
    workloads: &Workloads,
    config: &UpdateConfig,
    memory: &mut Memory,
    webhook_fresh: bool,
    now: i64,
) -> Vec<PodPlan> {
    let gate = snapshot.scope_gate();
    // A plan per pod at most: grown once, not doubled along the pass.
    let mut out = Vec::with_capacity(workloads.pods.len());
    for ((namespace, ds), pods) in workloads.by_daemonset() {
        // A VPA of a namespace this updater does not handle is as if
        // absent: another updater may own it.
        if !config.namespaces.handles(namespace) {
            continue;
        }
        let Some(vpa) = snapshot.vpa_for(namespace, ds) else {
            continue;
        };
        let daemonset = workloads
            .daemonsets
            .get(&(namespace.to_owned(), ds.to_owned()));
        let group = Group {
            snapshot,
            vpa,
            vpa_name: std::sync::Arc::from(vpa.name.as_str()),
            daemonset,
            config,
            now,
        };
        group.plan(&pods, gate, memory, webhook_fresh, &mut out);
    }
    out
}

/// Adds a decided plan to the pass's output. `desired` is shown only for
/// pods that change (as the JSON promises), and is dropped as soon as the
/// plan is decided, so that a pass over every pod holds it only for those.
fn push(out: &mut Vec<PodPlan>, mut plan: PodPlan) {
    if !plan.action.acts() {
        for c in &mut plan.containers {
            c.desired = None;
        }
    }
    out.push(plan);
}

struct Group<'a> {
    snapshot: &'a Snapshot,
    vpa: &'a VpaPolicy,
    /// Shared by the group's plans.
    vpa_name: std::sync::Arc<str>,
    daemonset: Option<&'a DaemonSetInfo>,
    config: &'a UpdateConfig,
    now: i64,
}

/// A pod that passed the priority rules, waiting for the disruption check.
struct Candidate<'p> {
    pod: &'p RunningPod,
    view: PodView<'p>,
    sizing: Sizing,
    plan: PodPlan,
    priority: PodPriority,
    quick_oom: bool,
}

impl Group<'_> {
    fn plan(
        &self,
        pods: &[&RunningPod],
        gate: Option<&str>,
        memory: &mut Memory,
        webhook_fresh: bool,
        out: &mut Vec<PodPlan>,
    ) {
        let mode = self.vpa.update_mode;
        let mut candidates = Vec::new();
        let mut boosted = Vec::new();
        for &pod in pods {
            // Parsed once for the whole pass over this pod.
            let view = pod.view();
            let placement = Placement::resolve(&self.vpa.scope, pod.node.as_deref(), self.snapshot);
            let mut plan = self.sized(pod, &view, placement);
            if gate.is_none() && self.is_boosted(pod, placement) {
                // Decided first, once the disruption budget is known.
                let (plan, sizing) = plan;
                boosted.push(Boosted {
                    pod,
                    view,
                    plan,
                    sizing,
                    placement,
                });
                continue;
            }
            let skip = if let Some(state) = gate {
                Some((
                    Action::None,
                    Reason::FeatureNotOn,
                    format!("feature {}/{} is {state}", SCOPE_FEATURE.0, SCOPE_FEATURE.1),
                ))
            } else if matches!(mode, UpdateMode::Off | UpdateMode::Initial) {
                Some((
                    Action::None,
                    if mode == UpdateMode::Off {
                        Reason::UpdateModeOff
                    } else {
                        Reason::UpdateModeInitial
                    },
                    format!("updateMode {mode:?} never changes a running pod"),
                ))
            } else if pod.balloon {
                Some((
                    Action::None,
                    Reason::BalloonPod,
                    "a balloon pod: only the balloon controller resizes it".into(),
                ))
            } else if pod.terminating {
                Some((Action::None, Reason::Terminating, "terminating".into()))
            } else if pod.node.is_none() {
                Some((
                    Action::None,
                    Reason::NotScheduled,
                    "not bound to a node yet".into(),
                ))
            } else if let Placement::UnknownNode { node } = placement {
                // Its group depends on a label of a Node the store does not
                // have (not listed yet, or left out of a dump): moving it to
                // the VPA-wide value now could undo its group's, so wait.
                Some((
                    Action::Deferred,
                    Reason::UnknownNode,
                    self.unknown_node(node),
                ))
            } else {
                None
            };
            if let Some((action, reason, message)) = skip {
                plan.0.action = action;
                plan.0.reason = reason;
                plan.0.message = message.into();
                push(out, plan.0);
                continue;
            }
            let (mut plan, sizing) = plan;
            if sizing.containers.is_empty() {
                (plan.reason, plan.message) = if sizing.warnings.is_empty() {
                    (
                        Reason::NoRecommendation,
                        "no recommendation for its containers".into(),
                    )
                } else {
                    (
                        Reason::UnusableRecommendation,
                        sizing.warnings.join("; ").into(),
                    )
                };
                push(out, plan);
                continue;
            }
            // At its target already: the desired resources and the resize
            // body are built only for the pods a pass may act on.
            let settled = !pod.resize.is_updating()
                && desired::at_target(&plan, pod, &sizing)
                && resize_ops(&view, &sizing).is_empty();
            if settled {
                plan.reason = Reason::AtTarget;
                plan.message = super::SETTLED.into();
                push(out, plan);
                continue;
            }
            match self.prioritize(pod, &view, &sizing, &mut plan, memory) {
                Ok((priority, quick_oom)) => candidates.push(Candidate {
                    pod,
                    view,
                    sizing,
                    plan,
                    priority,
                    quick_oom,
                }),
                Err((action, reason, message)) => {
                    plan.action = action;
                    plan.reason = reason;
                    plan.message = message;
                    push(out, plan);
                }
            }
        }
        // Sorted by index, so the plans are not moved along (stable, as a
        // sort of the candidates themselves).
        let mut order: Vec<usize> = (0..candidates.len()).collect();
        order.sort_by(|&a, &b| {
            PodPriority::descending(&candidates[a].priority, &candidates[b].priority)
        });
        let mut slots: Vec<Option<Candidate<'_>>> = candidates.into_iter().map(Some).collect();
        let candidates = order.into_iter().filter_map(|i| slots[i].take());
        let live = pods.iter().filter(|p| !p.terminating).count();
        // A pod whose resize is pending or not yet actuated is disrupted
        // already, like one that is not Ready: the next pass must not take
        // the tolerance again while the kubelet works on the first.
        let running = pods
            .iter()
            .filter(|p| {
                !p.terminating
                    && p.phase == PodPhase::Running
                    && p.ready
                    && !p.resize.is_updating()
                    && !p.awaiting_actuation
            })
            .count();
        let configured = self
            .daemonset
            .and_then(|d| d.desired_number_scheduled)
            .filter(|n| *n > 0)
            .unwrap_or(live);
        let in_place = matches!(mode, UpdateMode::InPlaceOrRecreate | UpdateMode::InPlace);
        let stats = GroupStats::new(
            configured,
            live,
            running,
            self.config.min_replicas,
            self.config.eviction_tolerance,
            in_place && self.config.in_place_skip_disruption_budget,
        );
        let Some(mut stats) = stats else {
            for b in boosted {
                self.unboost(b, None, out);
            }
            for mut c in candidates {
                c.plan.action = Action::Deferred;
                c.plan.reason = Reason::MinReplicas;
                c.plan.message = format!(
                    "{} live pods, fewer than --min-replicas {}",
                    live, self.config.min_replicas
                )
                .into();
                push(out, c.plan);
            }
            return;
        };
        // Upstream unboosts before any other update of the pass.
        for b in boosted {
            self.unboost(b, Some(&mut stats), out);
        }
        for Candidate {
            pod,
            view,
            sizing,
            mut plan,
            priority,
            quick_oom,
        } in candidates
        {
            // How long its resize has been pending (0 when it is not);
            // the key is built only when the memory can hold it.
            let since = if pod.resize.is_updating() || !memory.resizing_since.is_empty() {
                let key = pod.key();
                if pod.resize.is_updating() {
                    memory.resizing_since.entry(key.clone()).or_insert(self.now);
                }
                self.now - memory.resizing_since.get(&key).copied().unwrap_or(self.now)
            } else {
                0
            };
            let why = Why {
                priority: &priority,
                quick_oom,
                oom_threshold_of_vpa: self.oom_threshold_of_vpa(),
                threshold: self.config.priority.min_change_priority,
            };
            // A pod that runs but is not Ready is disrupted already (it is
            // not counted as running above), so changing it adds nothing to
            // what the tolerance bounds and takes nothing from it. Without
            // this, a DaemonSet whose pods all OOM could never be given the
            // memory that makes them Ready again (PR #10141's case).
            let unready = pod.phase == PodPhase::Running
                && !pod.ready
                && !pod.terminating
                && !pod.resize.is_updating()
                && !pod.awaiting_actuation;
            let decision = if unready && (in_place || !stats.below_min_replicas) {
                if in_place {
                    InPlaceDecision::Approved
                } else {
                    InPlaceDecision::Evict
                }
            } else if in_place {
                if pod.phase == PodPhase::Pending {
                    InPlaceDecision::Deferred
                } else {
                    in_place_decision(
                        &pod.resize,
                        &stats,
                        mode == UpdateMode::InPlace,
                        since,
                        self.config.in_place_skip_disruption_budget,
                        pod.non_disruptive_resize,
                    )
                }
            } else if can_evict(&pod.resize, &stats, since) {
                InPlaceDecision::Evict
            } else {
                InPlaceDecision::Deferred
            };
            match decision {
                InPlaceDecision::Approved | InPlaceDecision::Infeasible => {
                    let ops = resize_ops(&view, &sizing);
                    if ops.is_empty() {
                        plan.action = Action::Deferred;
                        (plan.reason, plan.message) = match &pod.resize {
                            crate::pods::ResizeStatus::Infeasible(m) => (
                                Reason::ResizeInfeasible,
                                format!(
                                    "resize infeasible ({m}); waiting for a lower recommendation"
                                )
                                .into(),
                            ),
                            _ => (
                                Reason::ResizePending,
                                "resize asked for; waiting for the kubelet to actuate it".into(),
                            ),
                        };
                    } else {
                        stats.in_place_initiated += usize::from(!unready);
                        plan.ops = ops;
                        plan.action = Action::Resize;
                        plan.reason = why.reason();
                        plan.message = why.to_string().into();
                    }
                }
                InPlaceDecision::Evict if webhook_fresh => {
                    stats.evicted += usize::from(!unready);
                    plan.action = Action::Evict;
                    plan.reason = why.reason();
                    plan.message = match &pod.resize {
                        crate::pods::ResizeStatus::None => why.to_string().into(),
                        status => format!("{why}; resize {}", status_words(status)).into(),
                    };
                }
                InPlaceDecision::Evict => {
                    plan.action = Action::Deferred;
                    plan.reason = Reason::WebhookStale;
                    plan.message = format!(
                        "{why}, but nodescope's webhook has not renewed its status Lease: no eviction, \
                         since the pod would come back without its group"
                    )
                    .into();
                }
                InPlaceDecision::Deferred => {
                    plan.action = Action::Deferred;
                    (plan.reason, plan.message) = match &pod.resize {
                        crate::pods::ResizeStatus::None if pod.phase == PodPhase::Pending => {
                            (Reason::PodPending, "pending: resized once running".into())
                        }
                        crate::pods::ResizeStatus::None => (Reason::EvictionTolerance, format!(
                            "{why}; held back: {} of {} pods may be disrupted at once (--eviction-tolerance) and that many already are",
                            stats.eviction_tolerance.max(1), stats.configured
                        ).into()),
                        status => (
                            Reason::of_resize(status),
                            format!("resize {}: waiting", status_words(status)).into(),
                        ),
                    };
                }
            }
            if plan.action.acts() {
                desired::fill(&mut plan, pod, &sizing);
            }
            push(out, plan);
        }
    }
}

#[path = "plan_priority.rs"]
mod prioritize;
pub use prioritize::requested;

#[path = "plan_desired.rs"]
mod desired;

#[path = "plan_boost.rs"]
mod boost;
use boost::Boosted;

#[path = "plan_words.rs"]
mod words;
use words::{status_words, Why};

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "boost_tests.rs"]
mod boost_tests;
