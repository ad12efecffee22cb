//! The pods as the balloon pass reads them, kept by node.
//!
//! A pass reads, of each pod bound to a node and not finished: its key and
//! start time (the refusal names the pods that do not fit, oldest kept
//! first) and the sum of its containers' cpu and memory requests; of the
//! balloon pod, also each container's requests and limits (the resize
//! writes the first container and keeps requests equal to limits), its
//! resourceVersion (the resize's precondition) and where its last resize
//! stands. [`NodePod`] is that and no more (about 200 bytes a pod).
//!
//! Per-node sums alone would be smaller, but a refused upsize names the
//! pods that do not fit, so each pod's own sum and age is kept; a pod that
//! is unbound or finished holds nothing on a node and is not kept at all.
//! [`PodIndex`] keeps them by node, so that a pass reads each node's pods
//! without grouping every pod again, and a pod's change touches one entry.

use super::{CpuMemory, Resource};
use crate::pods::{PodPhase, ResizeStatus, RunningPod};
use crate::quantity::Quantity;
use std::collections::HashMap;
use std::sync::Arc;

/// One container's cpu and memory requests and limits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerSize {
    /// `resources.requests` cpu and memory (zero when absent).
    pub requests: CpuMemory,
    /// `resources.limits` cpu and memory, by [`limit_index`].
    pub limits: [Option<Quantity>; 2],
}

/// Where a resource's limit is in [`ContainerSize::limits`].
#[must_use]
pub fn limit_index(r: Resource) -> usize {
    match r {
        Resource::Cpu => 0,
        Resource::Memory => 1,
    }
}

/// The balloon pod, as its resize needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Balloon {
    /// `metadata.resourceVersion`: the resize's precondition.
    pub resource_version: Arc<str>,
    /// Each container's sizes; `Err` names the container and the field.
    pub containers: Result<Box<[ContainerSize]>, Box<str>>,
    /// Where its last resize stands.
    pub resize: ResizeStatus,
    /// The spec asks for other resources than the kubelet reports.
    pub awaiting_actuation: bool,
}

/// What a pod holds on its node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Held {
    /// Any pod but a balloon: the sum of its containers' requests; `Err`
    /// names the container and the field that is not a quantity.
    Requests(Result<CpuMemory, Box<str>>),
    /// A balloon pod (labelled `node.kubernetes.io/balloon: "true"`).
    Balloon(Box<Balloon>),
}

/// A pod bound to a node and not finished, as the balloon pass reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodePod {
    /// `namespace/name` (a namespace holds no `/`).
    pub key: Arc<str>,
    /// `spec.nodeName`.
    pub node: Arc<str>,
    /// `status.startTime`, in Unix seconds.
    pub start_time: Option<i64>,
    /// What it holds.
    pub held: Held,
}

impl NodePod {
    /// The part of `pod` a pass reads; `None` when it holds nothing on a
    /// node (unbound, or finished).
    #[must_use]
    pub fn of(pod: &RunningPod) -> Option<NodePod> {
        if pod.phase == PodPhase::Done {
            return None;
        }
        let node = pod.node.clone()?;
        let sizes = containers(pod).map_err(Box::from);
        let held = if pod.balloon {
            Held::Balloon(Box::new(Balloon {
                resource_version: pod.resource_version.clone(),
                containers: sizes.map(Vec::into_boxed_slice),
                resize: pod.resize.clone(),
                awaiting_actuation: pod.awaiting_actuation,
            }))
        } else {
            Held::Requests(sizes.map(|sizes| {
                sizes
                    .iter()
                    .fold(CpuMemory::default(), |sum, c| sum.plus(&c.requests))
            }))
        };
        Some(NodePod {
            key: Arc::from(pod.key()),
            node,
            start_time: pod.start_time,
            held,
        })
    }

    /// `metadata.namespace`.
    #[must_use]
    pub fn namespace(&self) -> &str {
        self.key.split_once('/').map_or("", |(ns, _)| ns)
    }

    /// `metadata.name`.
    #[must_use]
    pub fn name(&self) -> &str {
        self.key
            .split_once('/')
            .map_or(&*self.key, |(_, name)| name)
    }

    /// The balloon, if the pod is one.
    #[must_use]
    pub fn balloon(&self) -> Option<&Balloon> {
        match &self.held {
            Held::Balloon(b) => Some(b),
            Held::Requests(_) => None,
        }
    }
}

/// Each container's cpu and memory requests and limits, from the spec.
fn containers(pod: &RunningPod) -> Result<Vec<ContainerSize>, String> {
    let view = pod.view();
    let mut out = Vec::new();
    for c in &view.spec.containers {
        let mut size = ContainerSize::default();
        for r in Resource::ALL {
            let parse = |text: &str, field: &str| {
                Quantity::parse(text)
                    .map_err(|e| format!("pod {}: container {} {field}: {e}", pod.key(), c.name))
            };
            if let Some(q) = c.requests().and_then(|m| m.get(r.as_str())) {
                size.requests.set(r, parse(&q.0, "requests")?);
            }
            if let Some(q) = c.limits().and_then(|m| m.get(r.as_str())) {
                size.limits[limit_index(r)] = Some(parse(&q.0, "limits")?);
            }
        }
        out.push(size);
    }
    Ok(out)
}

/// The pods kept, by node and by key.
#[derive(Clone, Debug, Default)]
pub struct PodIndex {
    by_node: HashMap<Arc<str>, HashMap<Arc<str>, NodePod>>,
    node_of: HashMap<Arc<str>, Arc<str>>,
}

impl PodIndex {
    /// Every pod of `pods` that holds something on a node.
    #[must_use]
    pub fn of<'a>(pods: impl IntoIterator<Item = &'a RunningPod>) -> PodIndex {
        let mut index = PodIndex::default();
        for pod in pods.into_iter().filter_map(NodePod::of) {
            index.put(pod);
        }
        index
    }

    /// Keeps `pod`, in place of what its key held (on whichever node).
    pub fn put(&mut self, mut pod: NodePod) {
        // One copy of each node's name, however many pods it runs.
        if let Some((name, _)) = self.by_node.get_key_value(&pod.node) {
            pod.node = Arc::clone(name);
        }
        match self.node_of.get(&pod.key) {
            Some(node) if *node == pod.node => {}
            Some(_) => {
                self.remove(&pod.key);
                self.node_of.insert(pod.key.clone(), pod.node.clone());
            }
            None => {
                self.node_of.insert(pod.key.clone(), pod.node.clone());
            }
        }
        self.by_node
            .entry(pod.node.clone())
            .or_default()
            .insert(pod.key.clone(), pod);
    }

    /// Forgets the pod `key` (`namespace/name`), if kept.
    pub fn remove(&mut self, key: &str) {
        let Some(node) = self.node_of.remove(key) else {
            return;
        };
        if let Some(pods) = self.by_node.get_mut(&node) {
            pods.remove(key);
            if pods.is_empty() {
                self.by_node.remove(&node);
            }
        }
    }

    /// The pods kept on `node`, in no order.
    pub fn on(&self, node: &str) -> impl Iterator<Item = &NodePod> {
        self.by_node.get(node).into_iter().flat_map(HashMap::values)
    }

    /// The pod `key`, if kept.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&NodePod> {
        let node = self.node_of.get(key)?;
        self.by_node.get(node)?.get(key)
    }

    /// How many pods are kept.
    #[must_use]
    pub fn len(&self) -> usize {
        self.node_of.len()
    }

    /// Whether none is.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.node_of.is_empty()
    }
}
