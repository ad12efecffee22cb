//! Node resizing by balloon (KEP-5620): a node's usable size is set on the
//! Node, and the balloon pod on it holds the rest of its allocatable.
//!
//! [`sizing`] decides, purely, what each node's balloon should request and
//! whether an upsize may proceed (it never evicts or preempts: an upsize
//! that the node's other pods do not fit under is refused). [`node`] and
//! [`pods`] read Nodes and Pods down to what the decision needs: the
//! controller ([`watched`]) at each watch event, `balloon status` from
//! files as it reads each object (`input::cluster::balloon_state`),
//! `balloon status` and `balloon set --wait` from the cluster's lists
//! ([`plan_objects`]), then all decide through
//! the one function [`plan`]. The resize itself is
//! [`crate::pods::resize`], shared with the updater. Only [`cluster`] (the
//! controller's watches and writes) does I/O.

pub mod cluster;
pub mod metrics;
pub mod node;
pub mod pods;
pub mod sizing;
#[cfg(test)]
mod sizing_tests;
pub mod watched;
#[cfg(test)]
mod watched_tests;

use crate::pods::RunningPod;
use crate::quantity::{Format, Quantity};
use serde::Serialize;
use serde_json::Value;

pub use self::node::{check_usable, BalloonNode, DesiredSize, Fraction, NodeError};
pub use self::pods::{NodePod, PodIndex};
pub use self::sizing::{plan, plan_nodes, BalloonConfig, BalloonResize, NodePlan, State};

/// Node annotation: the cpu that workloads may use (a quantity).
pub const USABLE_CPU_ANNOTATION: &str = "nodescope.dev/usable-cpu";
/// Node annotation: the memory that workloads may use (a quantity).
pub const USABLE_MEMORY_ANNOTATION: &str = "nodescope.dev/usable-memory";
/// Node annotation: the fraction of allocatable that workloads may use, for
/// the resources without an absolute size (`0.25`: a quarter).
pub const USABLE_FRACTION_ANNOTATION: &str = "nodescope.dev/usable-fraction";
/// Node annotation the controller writes: the last state of the node's
/// balloon (`Refused`, `Infeasible`, `Settled`, ...).
pub const STATE_ANNOTATION: &str = "nodescope.dev/balloon-state";
/// Node annotation the controller writes: why, in words.
pub const REASON_ANNOTATION: &str = "nodescope.dev/balloon-reason";

/// A resource the balloon holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    /// `cpu`.
    Cpu,
    /// `memory`.
    Memory,
}

impl Resource {
    /// Both, in the order tables and messages list them.
    pub const ALL: [Resource; 2] = [Resource::Cpu, Resource::Memory];

    /// The resource's name in a pod spec.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Cpu => "cpu",
            Resource::Memory => "memory",
        }
    }

    /// Zero, in the format this resource is printed in.
    #[must_use]
    pub fn zero(self) -> Quantity {
        Quantity::from_i64(0, self.format())
    }

    /// cpu prints in decimal units (`1500m`), memory in binary (`24Gi`).
    #[must_use]
    pub fn format(self) -> Format {
        match self {
            Resource::Cpu => Format::DecimalSI,
            Resource::Memory => Format::BinarySI,
        }
    }
}

/// A cpu and a memory quantity: what a node, a balloon or a set of pods
/// holds. Serialized as `{"cpu": "6", "memory": "24Gi"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CpuMemory {
    /// cpu.
    pub cpu: Quantity,
    /// memory.
    pub memory: Quantity,
}

impl Default for CpuMemory {
    fn default() -> Self {
        CpuMemory {
            cpu: Resource::Cpu.zero(),
            memory: Resource::Memory.zero(),
        }
    }
}

impl CpuMemory {
    /// One resource.
    #[must_use]
    pub fn get(&self, r: Resource) -> &Quantity {
        match r {
            Resource::Cpu => &self.cpu,
            Resource::Memory => &self.memory,
        }
    }

    /// Sets one resource.
    pub fn set(&mut self, r: Resource, q: Quantity) {
        match r {
            Resource::Cpu => self.cpu = q,
            Resource::Memory => self.memory = q,
        }
    }

    /// `self + other`, resource by resource; a sum too large to hold
    /// exactly keeps `self` (quantities this large do not occur on nodes).
    #[must_use]
    pub fn plus(&self, other: &CpuMemory) -> CpuMemory {
        let mut out = self.clone();
        for r in Resource::ALL {
            if let Some(q) = self.get(r).checked_add(other.get(r)) {
                out.set(r, q);
            }
        }
        out
    }

    /// `self - other`, resource by resource; may be negative.
    #[must_use]
    pub fn minus(&self, other: &CpuMemory) -> CpuMemory {
        let mut out = self.clone();
        for r in Resource::ALL {
            if let Some(q) = self.get(r).checked_sub(other.get(r)) {
                out.set(r, q);
            }
        }
        out
    }

    /// `cpu 6, memory 24Gi`.
    #[must_use]
    pub fn words(&self) -> String {
        format!("cpu {}, memory {}", self.cpu, self.memory)
    }
}

/// Plans every node from Node and Pod objects (other kinds are ignored):
/// each read as the controller's watch reads it, then [`plan`].
///
/// # Errors
/// Every Node or Pod that cannot be read, each naming itself.
pub fn plan_objects(objects: &[Value], config: &BalloonConfig) -> Result<Vec<NodePlan>, String> {
    let mut nodes = Vec::new();
    let mut pods = PodIndex::default();
    let mut problems = Vec::new();
    for object in objects {
        match object.get("kind").and_then(Value::as_str) {
            Some("Node") => match node::BalloonNode::from_value(object) {
                Ok(n) => nodes.push(n),
                Err(e) => problems.push(e.to_string()),
            },
            Some("Pod") => match RunningPod::from_value(object) {
                Ok(p) => {
                    if let Some(p) = NodePod::of(&p) {
                        pods.put(p);
                    }
                }
                Err(e) => problems.push(e.to_string()),
            },
            _ => {}
        }
    }
    if problems.is_empty() {
        Ok(plan(&nodes, &pods, config))
    } else {
        Err(problems.join("\n"))
    }
}
