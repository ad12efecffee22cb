//! What each node's balloon should request, and whether it may: pure, a
//! function of the Nodes, the running pods and the configuration.
//!
//! The balloon requests allocatable minus usable, never below zero. An
//! upsize (the node shrinks) proceeds only while the node's other pods'
//! requests still fit in the new usable capacity; otherwise it is refused
//! and the pods that do not fit are named (KEP-5620: fail the upsize
//! instead of preempting). A downsize always proceeds.

use super::node::{check_usable, BalloonNode, DesiredSize};
use super::pods::{limit_index, Balloon, ContainerSize, Held, NodePod, PodIndex};
use super::{CpuMemory, Resource};
use crate::pods::{ResizeStatus, RunningPod};
use serde::Serialize;

/// The numbers the controller and `balloon status` take as flags.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BalloonConfig {
    /// The usable size of a node whose annotations ask for none
    /// (`--default-usable-fraction`).
    pub default: DesiredSize,
}

/// Where a node's balloon stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum State {
    /// No usable size is set for the node: its balloon is left alone.
    Unmanaged,
    /// A usable size is set, but no balloon runs on the node.
    NoBalloon,
    /// The annotations or the balloon pod cannot be read.
    Invalid,
    /// The balloon requests what the usable size asks.
    Settled,
    /// The balloon is to be resized now.
    Resize,
    /// The upsize would leave the node's other pods without room.
    Refused,
    /// A resize was accepted and is not actuated yet.
    Resizing,
    /// The kubelet deferred the resize; it is retried later.
    Deferred,
    /// The node cannot fit the resize; reported, never evicted for.
    Infeasible,
}

impl State {
    /// The word in tables and annotations.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            State::Unmanaged => "Unmanaged",
            State::NoBalloon => "NoBalloon",
            State::Invalid => "Invalid",
            State::Settled => "Settled",
            State::Resize => "Resize",
            State::Refused => "Refused",
            State::Resizing => "Resizing",
            State::Deferred => "Deferred",
            State::Infeasible => "Infeasible",
        }
    }
}

/// One container's new resources, as the resize writes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerResize {
    /// Its index in `spec.containers`.
    pub index: usize,
    /// `resources.requests` entries to write.
    pub requests: Vec<(String, String)>,
    /// `resources.limits` entries to write (only those that equalled the
    /// request, so the QoS class is kept).
    pub limits: Vec<(String, String)>,
}

/// The resize a plan asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BalloonResize {
    /// The balloon pod's namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its resourceVersion when planned: the resize's precondition.
    pub resource_version: String,
    /// What changes.
    pub containers: Vec<ContainerResize>,
}

/// The decision for one node, and the numbers `balloon status` shows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodePlan {
    /// The node.
    pub node: String,
    /// `status.allocatable`.
    pub allocatable: CpuMemory,
    /// What the balloon requests now (its spec).
    pub balloon: CpuMemory,
    /// Allocatable minus the balloon: what workloads may use now.
    pub usable: CpuMemory,
    /// What the node's other pods request.
    pub requested: CpuMemory,
    /// Usable minus requested; negative when the pods overrun it.
    pub free: CpuMemory,
    /// Where the balloon stands.
    pub state: State,
    /// Why, in words.
    pub reason: String,
    /// What the balloon should request; `None` when unmanaged.
    #[serde(skip)]
    pub target: Option<CpuMemory>,
    /// The resize to ask for, when the state is `Resize`.
    #[serde(skip)]
    pub resize: Option<BalloonResize>,
}

/// Plans every node that has a balloon or a usable size, in name order,
/// from the pods the watch or a file keeps: the controller and `balloon
/// status` decide through this one function.
#[must_use]
pub fn plan<'a>(
    nodes: impl IntoIterator<Item = &'a BalloonNode>,
    pods: &PodIndex,
    config: &BalloonConfig,
) -> Vec<NodePlan> {
    let mut plans: Vec<NodePlan> = nodes
        .into_iter()
        .filter_map(|node| {
            let here: Vec<&NodePod> = pods.on(&node.name).collect();
            plan_node(node, &here, config)
        })
        .collect();
    plans.sort_by(|a, b| a.node.cmp(&b.node));
    plans
}

/// [`plan`] from whole pods (`balloon status` reduces each to its
/// [`NodePod`] as it reads it, and calls [`plan`]).
#[must_use]
pub fn plan_nodes(
    nodes: &[BalloonNode],
    pods: &[RunningPod],
    config: &BalloonConfig,
) -> Vec<NodePlan> {
    plan(nodes, &PodIndex::of(pods), config)
}

/// One node, from the pods bound to it that hold resources; `None` when it
/// has neither a balloon nor a usable size.
#[must_use]
pub fn plan_node(
    node: &BalloonNode,
    pods: &[&NodePod],
    config: &BalloonConfig,
) -> Option<NodePlan> {
    let balloons: Vec<(&NodePod, &Balloon)> = pods
        .iter()
        .filter_map(|p| p.balloon().map(|b| (*p, b)))
        .collect();
    let mut others: Vec<(&NodePod, &Result<CpuMemory, Box<str>>)> = pods
        .iter()
        .filter_map(|p| match &p.held {
            Held::Requests(r) => Some((*p, r)),
            Held::Balloon(_) => None,
        })
        .collect();
    others.sort_by(|(a, _), (b, _)| {
        (a.start_time.unwrap_or(i64::MAX), &a.key).cmp(&(b.start_time.unwrap_or(i64::MAX), &b.key))
    });
    let from_default = matches!(&node.desired, Ok(d) if d.is_empty());
    let desired = match &node.desired {
        Ok(d) if d.is_empty() => Ok(config.default.clone()),
        other => other.clone(),
    };
    let mut plan = NodePlan {
        node: node.name.clone(),
        allocatable: node.allocatable.clone(),
        balloon: CpuMemory::default(),
        usable: node.allocatable.clone(),
        requested: CpuMemory::default(),
        free: CpuMemory::default(),
        state: State::Unmanaged,
        reason: String::new(),
        target: None,
        resize: None,
    };
    let mut other_sizes = Vec::new();
    for (p, size) in &others {
        match size {
            Ok(size) => {
                plan.requested = plan.requested.plus(size);
                other_sizes.push((&*p.key, size));
            }
            Err(reason) => return Some(plan.with(State::Invalid, reason.to_string())),
        }
    }
    let balloon = match balloons.as_slice() {
        [] => None,
        [one] => Some(*one),
        many => {
            let mut names: Vec<&str> = many.iter().map(|(p, _)| &*p.key).collect();
            names.sort_unstable();
            plan.free = plan.usable.minus(&plan.requested);
            let reason = format!(
                "{} balloon pods on the node: {}",
                many.len(),
                names.join(", ")
            );
            return Some(plan.with(State::Invalid, reason));
        }
    };
    let sizes = match balloon.map(|(_, b)| b.containers.as_deref()).transpose() {
        Ok(sizes) => sizes,
        Err(reason) => return Some(plan.with(State::Invalid, reason.to_string())),
    };
    if let Some(sizes) = sizes {
        plan.balloon = sizes
            .iter()
            .fold(CpuMemory::default(), |s, c| s.plus(&c.requests));
    }
    plan.usable = plan.allocatable.minus(&plan.balloon);
    plan.free = plan.usable.minus(&plan.requested);
    // Named after where the size came from, as an unreadable annotation is.
    let desired = match desired.and_then(|d| match check_usable(&d, &node.allocatable) {
        Ok(()) => Ok(d),
        Err(e) if from_default => Err(format!("--default-usable-fraction: {e}")),
        Err(e) => Err(format!("annotation {}: {e}", e.annotation())),
    }) {
        Ok(d) => d,
        Err(reason) => return Some(plan.with(State::Invalid, reason)),
    };
    let (Some(pod), Some(sizes)) = (balloon, sizes) else {
        if desired.is_empty() {
            return None;
        }
        return Some(plan.with(
            State::NoBalloon,
            "a usable size is set, but no balloon pod runs on the node".into(),
        ));
    };
    if desired.is_empty() {
        return Some(plan.with(
            State::Unmanaged,
            "no usable size is set for the node: the balloon is left alone".into(),
        ));
    }
    let target = target_of(&node.allocatable, &plan.balloon, &desired);
    plan.target = Some(target.clone());
    decide(plan, pod, sizes, &target, &other_sizes)
}

/// Allocatable minus usable, never below zero; the current balloon for a
/// resource without a usable size.
fn target_of(allocatable: &CpuMemory, current: &CpuMemory, desired: &DesiredSize) -> CpuMemory {
    let mut target = current.clone();
    for r in Resource::ALL {
        if let Some(usable) = desired.usable(r, allocatable.get(r)) {
            let held = allocatable
                .get(r)
                .checked_sub(&usable)
                .filter(|q| q.sign() > 0)
                .unwrap_or_else(|| r.zero());
            target.set(r, held);
        }
    }
    target
}

/// Settled, resizing, or a resize: the upsize only if the others fit.
fn decide(
    mut plan: NodePlan,
    (pod, balloon): (&NodePod, &Balloon),
    sizes: &[ContainerSize],
    target: &CpuMemory,
    others: &[(&str, &CpuMemory)],
) -> Option<NodePlan> {
    let Some(first) = sizes.first() else {
        return Some(plan.with(
            State::Invalid,
            format!("balloon pod {} has no container", pod.key),
        ));
    };
    // The first container carries the change; the others keep theirs.
    let rest = plan.balloon.minus(&first.requests);
    let mut request = first.requests.clone();
    let mut resize = ContainerResize {
        index: 0,
        requests: Vec::new(),
        limits: Vec::new(),
    };
    for r in Resource::ALL {
        let wanted = target
            .get(r)
            .checked_sub(rest.get(r))
            .filter(|q| q.sign() > 0)
            .unwrap_or_else(|| r.zero());
        if &wanted == first.requests.get(r) {
            continue;
        }
        resize
            .requests
            .push((r.as_str().into(), wanted.to_string()));
        match &first.limits[limit_index(r)] {
            // requests = limits stay equal: the QoS class is kept.
            Some(limit) if limit == first.requests.get(r) => {
                resize.limits.push((r.as_str().into(), wanted.to_string()));
            }
            Some(limit) if limit < &wanted => {
                let reason = format!(
                    "balloon pod {}: its {} limit {limit} is below the {wanted} it should request",
                    pod.key,
                    r.as_str()
                );
                return Some(plan.with(State::Invalid, reason));
            }
            _ => {}
        }
        request.set(r, wanted);
    }
    let new_balloon = rest.plus(&request);
    if resize.requests.is_empty() {
        let (state, reason) = settled(balloon, &new_balloon);
        return Some(plan.with(state, reason));
    }
    let new_usable = plan.allocatable.minus(&new_balloon);
    let growing: Vec<Resource> = Resource::ALL
        .into_iter()
        .filter(|r| new_balloon.get(*r) > plan.balloon.get(*r))
        .collect();
    let overrun: Vec<&str> = overrun(others, &new_usable, &growing);
    if !overrun.is_empty() {
        let reason = format!(
            "upsizing the balloon to {} leaves {} usable, but the node's other pods request {}: {} {}",
            new_balloon.words(),
            new_usable.words(),
            plan.requested.words(),
            overrun.join(", "),
            if overrun.len() == 1 { "does not fit" } else { "do not fit" }
        );
        return Some(plan.with(State::Refused, reason));
    }
    let direction = if growing.is_empty() {
        "downsize"
    } else {
        "upsize"
    };
    plan.resize = Some(BalloonResize {
        namespace: pod.namespace().to_owned(),
        name: pod.name().to_owned(),
        resource_version: balloon.resource_version.to_string(),
        containers: vec![resize],
    });
    let reason = format!(
        "{direction} the balloon from {} to {}",
        plan.balloon.words(),
        new_balloon.words()
    );
    Some(plan.with(State::Resize, reason))
}

/// The pods that do not fit in `usable` for a growing resource, the oldest
/// kept first.
fn overrun<'a>(
    others: &[(&'a str, &CpuMemory)],
    usable: &CpuMemory,
    growing: &[Resource],
) -> Vec<&'a str> {
    let mut sum = CpuMemory::default();
    let mut out = Vec::new();
    for (key, size) in others {
        sum = sum.plus(size);
        if growing.iter().any(|r| sum.get(*r) > usable.get(*r)) {
            out.push(*key);
        }
    }
    out
}

/// The balloon's spec is its target: where the resize stands.
fn settled(pod: &Balloon, balloon: &CpuMemory) -> (State, String) {
    match &pod.resize {
        ResizeStatus::Deferred(message) => (
            State::Deferred,
            format!("the kubelet deferred the resize ({message}); it is retried later"),
        ),
        ResizeStatus::Infeasible(message) => (
            State::Infeasible,
            format!("the node cannot fit the resize ({message}); nothing is evicted for it"),
        ),
        ResizeStatus::Error(message) => (
            State::Resizing,
            format!("the kubelet reports an error resizing the balloon: {message}"),
        ),
        ResizeStatus::InProgress | ResizeStatus::Unknown(_) => (
            State::Resizing,
            format!("the resize to {} is in progress", balloon.words()),
        ),
        ResizeStatus::None if pod.awaiting_actuation => (
            State::Resizing,
            format!(
                "the resize to {} is accepted, not actuated yet",
                balloon.words()
            ),
        ),
        ResizeStatus::None => (
            State::Settled,
            format!("the balloon holds {} as asked", balloon.words()),
        ),
    }
}

impl NodePlan {
    fn with(mut self, state: State, reason: String) -> NodePlan {
        self.state = state;
        self.reason = reason;
        self
    }
}
