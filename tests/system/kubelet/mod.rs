//! A simulated kubelet for many Nodes at once: what the control plane and
//! nodescope need from kubelets, and nothing they do not read.
//!
//! - `nodes`: Nodes with allocatable, labels (three zones, two instance
//!   types) and a Lease heartbeat in `kube-node-lease` every 10 s, so the
//!   node lifecycle controller keeps them Ready.
//! - `pods`: every pod bound to one of them becomes Running and Ready with
//!   `containerStatuses` carrying `resources` and `allocatedResources`, as a
//!   1.33+ kubelet writes them (without those the apiserver refuses
//!   `pods/resize`); a resize is actuated as KEP-1287 says; a pod being
//!   deleted (an eviction, a preemption) is removed after its grace period.
//! - `faults`: a node whose resizes are Infeasible, pods OOM-killed.
//! - `usage`: per-node usage from a declared model, written as the
//!   PodMetricsList recordings `recommend --metrics file:` replays.

mod faults;
pub mod nodes;
pub mod pods;
mod status;
pub mod usage;

pub use nodes::{NodeShape, Nodes};
pub use pods::Kubelet;

/// A quantity in the units the suite uses: millicores or bytes.
pub fn milli(cpu: &str) -> i64 {
    parse(cpu, true)
}

pub fn bytes(memory: &str) -> i64 {
    parse(memory, false)
}

fn parse(text: &str, cpu: bool) -> i64 {
    let quantity = nodescope::quantity::Quantity::parse(text)
        .unwrap_or_else(|e| panic!("quantity {text:?}: {e}"));
    if cpu {
        quantity.milli_value()
    } else {
        quantity.value()
    }
}
