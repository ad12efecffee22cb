//! Which recommendation group a DaemonSet pod belongs to: AEP-10031's scope
//! resolution ("Admission Controller and Updater", steps 2 to 4), shared by
//! the webhook and anything else that must place a pod in a group the same
//! way (the recommender aggregates by the same value).
//!
//! Pure: node labels come from whatever implements [`NodeLabels`] (the store
//! snapshot), never from the API server.

use std::sync::Arc;

/// The scope value of a node that does not carry the scope's label key
/// (AEP-10031 `__absent__`).
pub const ABSENT: &str = "__absent__";
/// With this key, as with KEP-4943's `node`, the scope value is the node's
/// name and no Node lookup is needed.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// KEP-4943's spelling of "one recommendation per node".
pub const NODE_SCOPE: &str = "node";

/// A VPA's `spec.scope`, parsed once when the VPA is indexed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ScopeKey {
    /// `node` or `kubernetes.io/hostname`: the value is the node name.
    #[default]
    NodeName,
    /// Any other node label key: the value is that label's value.
    Label(Arc<str>),
}

impl ScopeKey {
    /// `None` for an absent or empty scope (not a scoped VPA).
    #[must_use]
    pub fn parse(scope: &str, intern: impl FnOnce(&str) -> Arc<str>) -> Option<ScopeKey> {
        match scope {
            "" => None,
            NODE_SCOPE | HOSTNAME_LABEL => Some(ScopeKey::NodeName),
            key => Some(ScopeKey::Label(intern(key))),
        }
    }

    /// The label key the Node store must keep, if any.
    #[must_use]
    pub fn label_key(&self) -> Option<&str> {
        match self {
            ScopeKey::NodeName => None,
            ScopeKey::Label(key) => Some(key),
        }
    }
}

/// What the Node store knows of one node's label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeLabel<'a> {
    /// The store has no such node (not listed yet, deleted, or a typo).
    UnknownNode,
    /// The node is known and lacks the key.
    Absent,
    /// The label's value.
    Value(&'a str),
}

/// Node labels by node name, as the store indexed them.
pub trait NodeLabels {
    /// The value of label `key` on node `node`; an O(1) lookup.
    fn node_label(&self, node: &str, key: &str) -> NodeLabel<'_>;

    /// The state of Feature [`SCOPE_FEATURE`] when it gates scopes off
    /// (`TurningOff` or `Off`). Asked here, with the node, so that the one
    /// [`Placement::resolve`] the webhook, the recommender and the updater
    /// share obeys the gate for all three. `None` (the default): no gate.
    fn scope_gate(&self) -> Option<&str> {
        None
    }
}

/// No nodes at all, for callers that only use node-name scopes.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoNodes;

impl NodeLabels for NoNodes {
    fn node_label(&self, _: &str, _: &str) -> NodeLabel<'_> {
        NodeLabel::UnknownNode
    }
}

/// Where a pod lands, as far as its VPA's groups are concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement<'a> {
    /// The group to look up: the node name, a label value, or [`ABSENT`].
    Group {
        /// The pod's node.
        node: &'a str,
        /// The `scopeValue` to find.
        value: &'a str,
    },
    /// The scope is a label and the store does not know the node.
    UnknownNode {
        /// The pod's node.
        node: &'a str,
    },
    /// Neither `spec.nodeName` nor the DaemonSet controller's node affinity
    /// names a node.
    NoNode,
    /// Feature [`SCOPE_FEATURE`] is `TurningOff` or `Off` (the state is
    /// given): a scoped VPA acts as an unscoped one, so the pod gets the
    /// VPA-wide recommendation, whatever its node.
    ScopeOff {
        /// The Feature's state.
        state: &'a str,
    },
}

/// The Feature (namespace, name) that gates `spec.scope` (KEP-3920).
pub const SCOPE_FEATURE: (&str, &str) = ("kube-system", "vpa-node-scope");

impl<'a> Placement<'a> {
    /// Resolves the scope value of `node` for `key` (AEP-10031 steps 2-3):
    /// the node name itself for node-name scopes, with no lookup; else the
    /// node's label from `nodes`, or [`ABSENT`] when it lacks the key.
    #[must_use]
    pub fn resolve(key: &ScopeKey, node: Option<&'a str>, nodes: &'a impl NodeLabels) -> Self {
        if let Some(state) = nodes.scope_gate() {
            return Placement::ScopeOff { state };
        }
        let Some(node) = node else {
            return Placement::NoNode;
        };
        match key {
            ScopeKey::NodeName => Placement::Group { node, value: node },
            ScopeKey::Label(key) => match nodes.node_label(node, key) {
                NodeLabel::Value(value) => Placement::Group { node, value },
                NodeLabel::Absent => Placement::Group {
                    node,
                    value: ABSENT,
                },
                NodeLabel::UnknownNode => Placement::UnknownNode { node },
            },
        }
    }

    /// A pod on `node` under a node-name scope.
    #[must_use]
    pub fn on_node(node: &'a str) -> Self {
        Placement::Group { node, value: node }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Nodes(HashMap<&'static str, Vec<(&'static str, &'static str)>>);

    impl NodeLabels for Nodes {
        fn node_label(&self, node: &str, key: &str) -> NodeLabel<'_> {
            match self.0.get(node) {
                None => NodeLabel::UnknownNode,
                Some(labels) => labels
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map_or(NodeLabel::Absent, |(_, v)| NodeLabel::Value(v)),
            }
        }
    }

    fn nodes() -> Nodes {
        Nodes(HashMap::from([
            ("n1", vec![("topology.kubernetes.io/zone", "zone-a")]),
            ("n2", vec![]),
        ]))
    }

    fn key(scope: &str) -> ScopeKey {
        ScopeKey::parse(scope, |k| Arc::from(k)).unwrap_or_else(|| panic!("{scope:?} is a scope"))
    }

    #[test]
    fn an_empty_scope_is_not_a_scope() {
        assert_eq!(ScopeKey::parse("", |k| Arc::from(k)), None);
    }

    #[test]
    fn node_and_hostname_scopes_use_the_node_name_without_a_lookup() {
        let nodes = NoNodes;
        for scope in ["node", "kubernetes.io/hostname"] {
            assert_eq!(
                Placement::resolve(&key(scope), Some("n9"), &nodes),
                Placement::Group {
                    node: "n9",
                    value: "n9"
                }
            );
        }
    }

    #[test]
    fn a_label_scope_uses_the_label_value_or_absent() {
        let nodes = nodes();
        let zone = key("topology.kubernetes.io/zone");
        assert_eq!(
            Placement::resolve(&zone, Some("n1"), &nodes),
            Placement::Group {
                node: "n1",
                value: "zone-a"
            }
        );
        assert_eq!(
            Placement::resolve(&zone, Some("n2"), &nodes),
            Placement::Group {
                node: "n2",
                value: ABSENT
            }
        );
    }

    #[test]
    fn a_node_the_store_does_not_know_and_a_pod_without_node_are_told_apart() {
        let nodes = nodes();
        let zone = key("topology.kubernetes.io/zone");
        assert_eq!(
            Placement::resolve(&zone, Some("n7"), &nodes),
            Placement::UnknownNode { node: "n7" }
        );
        assert_eq!(Placement::resolve(&zone, None, &nodes), Placement::NoNode);
        assert_eq!(
            Placement::resolve(&key("node"), None, &nodes),
            Placement::NoNode
        );
    }
}
