//! What the bundle needs from the store: the namespaces whose param objects
//! the bindings name, so the kube store watches exactly those.

use super::PolicySet;

impl PolicySet {
    /// Namespaces named by bindings' `paramRef.namespace`, sorted, unique.
    #[must_use]
    pub fn param_namespaces(&self) -> Vec<String> {
        let mut namespaces: Vec<String> = self
            .policies
            .iter()
            .flat_map(|p| p.bindings.iter())
            .filter_map(|b| b.spec.param_ref.as_ref()?.namespace.clone())
            .filter(|ns| !ns.is_empty())
            .collect();
        namespaces.sort();
        namespaces.dedup();
        namespaces
    }
}

/// A policy that gates a feature: one of its bindings takes that Feature as
/// its param, so what it denies while the feature is off is a use of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatingPolicy {
    /// The policy's name.
    pub policy: String,
    /// `(group, resource)` of every CREATE resource rule of the policy's
    /// `matchConstraints`, sorted, unique; `*` stays `*` for the caller's
    /// discovery to expand. Subresource rules are left out: objects are
    /// listed whole.
    pub resources: Vec<(String, String)>,
}

/// The API the Feature params are of.
const FEATURE_GROUP: &str = "featureflags.nodescope.dev";
const FEATURE_KIND: &str = "Feature";

impl PolicySet {
    /// The policies gating Feature `namespace/name`: those with a
    /// `Feature` paramKind and a binding whose `paramRef` names it (by
    /// name, in its namespace or, without namespace, in the request's, which
    /// can be the Feature's). No kind is known here: the rules say what to
    /// list, so a third party's gate of the same form is found the same way.
    #[must_use]
    pub fn gating_policies(&self, namespace: &str, name: &str) -> Vec<GatingPolicy> {
        self.policies
            .iter()
            .filter(|p| {
                p.spec.param_kind.as_ref().is_some_and(|k| {
                    k.kind == FEATURE_KIND
                        && k.api_version.split_once('/').map(|(g, _)| g) == Some(FEATURE_GROUP)
                })
            })
            .filter(|p| {
                p.bindings.iter().any(|b| {
                    b.spec.param_ref.as_ref().is_some_and(|r| {
                        r.name.as_deref() == Some(name)
                            && r.namespace
                                .as_deref()
                                .is_none_or(|ns| ns.is_empty() || ns == namespace)
                    })
                })
            })
            .map(|p| {
                let mut resources: Vec<(String, String)> = p
                    .spec
                    .match_constraints
                    .iter()
                    .flat_map(|c| c.resource_rules.iter())
                    .filter(|rule| rule.operations.iter().any(|op| op.covers("CREATE")))
                    .flat_map(|rule| {
                        rule.api_groups.iter().flat_map(move |group| {
                            rule.resources
                                .iter()
                                .filter(|r| !r.contains('/'))
                                .map(move |r| (group.clone(), r.clone()))
                        })
                    })
                    .collect();
                resources.sort();
                resources.dedup();
                GatingPolicy {
                    policy: p.name.clone(),
                    resources,
                }
            })
            .collect()
    }
}
