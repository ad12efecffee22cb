//! The balloon controller's families, under `nodescope_balloon_`: per node
//! and resource, the capacity workloads may use (balloon space counted as
//! absent), the balloon's requests and the other pods' requests; each
//! node's state; resize results by outcome. Every outcome exists from the
//! start, at 0.

use super::{NodePlan, Resource};
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeResource {
    node: String,
    resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeState {
    node: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: String,
}

/// The outcomes of a resize, as labels: `Resized` (the apiserver accepted
/// it), `Refused` (the others would not fit), `Infeasible`, `Stale`,
/// `Error`.
pub const OUTCOMES: [&str; 5] = ["Resized", "Refused", "Infeasible", "Stale", "Error"];

type Amount = Family<NodeResource, Gauge<f64, AtomicU64>>;

/// The controller's metrics; cheap to clone.
#[derive(Clone)]
pub struct BalloonMetrics {
    registry: Arc<Registry>,
    usable: Amount,
    balloon: Amount,
    requested: Amount,
    states: Family<NodeState, Gauge>,
    results: Family<OutcomeLabel, Counter>,
    leader: Gauge,
    /// Held to write by [`Self::observe`] and to read by [`Self::render`]:
    /// a pass clears the per-node families and sets them again, and a
    /// scrape in between would show some nodes and not others (a system
    /// run saw node-0007's state with node-0025's usable series absent).
    pass: Arc<std::sync::RwLock<()>>,
}

impl Default for BalloonMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl BalloonMetrics {
    /// Registers every family.
    #[must_use]
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let m = BalloonMetrics {
            registry: Arc::default(),
            usable: Amount::default(),
            balloon: Amount::default(),
            requested: Amount::default(),
            states: Family::default(),
            results: Family::default(),
            leader: Gauge::default(),
            pass: Arc::default(),
        };
        for outcome in OUTCOMES {
            let _ = m.results.get_or_create(&OutcomeLabel {
                outcome: outcome.into(),
            });
        }
        registry.register(
            "nodescope_balloon_usable",
            "Allocatable minus the balloon's requests, per node and resource (cpu in cores, memory in bytes)",
            m.usable.clone(),
        );
        registry.register(
            "nodescope_balloon_requests",
            "The balloon's requests, per node and resource",
            m.balloon.clone(),
        );
        registry.register(
            "nodescope_balloon_non_balloon_requests",
            "The requests of the node's other pods, per node and resource",
            m.requested.clone(),
        );
        // A gauge per node, not a counter of transitions: an alert asks how
        // long a node has been Refused or Invalid, which the resize results
        // (counted once, when the state is written) cannot tell.
        registry.register(
            "nodescope_balloon_node_state",
            "1 for each node's state in the last pass (Refused, Invalid, Settled, ...)",
            m.states.clone(),
        );
        registry.register(
            "nodescope_balloon_resize_results",
            "Balloon resizes by outcome",
            m.results.clone(),
        );
        registry.register(
            "nodescope_balloon_leader",
            "1 while this replica holds the controller's Lease, else 0",
            m.leader.clone(),
        );
        BalloonMetrics {
            registry: Arc::new(registry),
            ..m
        }
    }

    /// Replaces the per-node gauges with the pass's numbers (nodes that are
    /// gone disappear).
    pub fn observe(&self, plans: &[NodePlan]) {
        let _whole = self
            .pass
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for family in [&self.usable, &self.balloon, &self.requested] {
            family.clear();
        }
        self.states.clear();
        for p in plans {
            self.states
                .get_or_create(&NodeState {
                    node: p.node.clone(),
                    state: p.state.as_str().into(),
                })
                .set(1);
            for r in Resource::ALL {
                let label = NodeResource {
                    node: p.node.clone(),
                    resource: r.as_str().into(),
                };
                let amount = |v: &super::CpuMemory| match r {
                    Resource::Cpu => v.cpu.as_approximate_f64(),
                    Resource::Memory => v.memory.as_approximate_f64(),
                };
                self.usable.get_or_create(&label).set(amount(&p.usable));
                self.balloon.get_or_create(&label).set(amount(&p.balloon));
                self.requested
                    .get_or_create(&label)
                    .set(amount(&p.requested));
            }
        }
    }

    /// One resize result (one of [`OUTCOMES`]).
    pub fn result(&self, outcome: &str) {
        self.results
            .get_or_create(&OutcomeLabel {
                outcome: outcome.into(),
            })
            .inc();
    }

    /// Whether this replica leads.
    pub fn leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// The OpenMetrics text.
    #[must_use]
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _whole = self
            .pass
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balloon::{CpuMemory, State};

    #[test]
    fn every_outcome_is_exported_from_the_start() {
        let text = BalloonMetrics::new().render();
        for outcome in OUTCOMES {
            assert!(
                text.contains(&format!(
                    "nodescope_balloon_resize_results_total{{outcome=\"{outcome}\"}} 0"
                )),
                "{outcome}: {text}"
            );
        }
        assert!(text.contains("nodescope_balloon_leader 0"), "{text}");
    }

    fn plan(node: &str, state: State) -> NodePlan {
        NodePlan {
            node: node.into(),
            allocatable: CpuMemory::default(),
            balloon: CpuMemory::default(),
            usable: CpuMemory::default(),
            requested: CpuMemory::default(),
            free: CpuMemory::default(),
            state,
            reason: String::new(),
            target: None,
            resize: None,
        }
    }

    #[test]
    fn each_node_has_the_state_of_the_last_pass_and_a_node_that_is_gone_has_none() {
        let metrics = BalloonMetrics::new();
        metrics.observe(&[plan("a", State::Refused), plan("b", State::Invalid)]);
        metrics.observe(&[plan("a", State::Settled)]);
        let text = metrics.render();
        let states: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("nodescope_balloon_node_state"))
            .collect();
        assert_eq!(
            states,
            ["nodescope_balloon_node_state{node=\"a\",state=\"Settled\"} 1"]
        );
    }
}
