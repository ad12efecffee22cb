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

    /// Whether some binding could take `object` as its param: a policy's
    /// `paramKind` is the object's apiVersion and kind, and a binding's
    /// `paramRef` names it (or selects it by its labels) in its namespace
    /// (any, when the paramRef leaves it to the request). An offline run
    /// keeps only such objects of a kind that inputs hold by the thousand.
    #[must_use]
    pub fn may_take_as_param(&self, object: &serde_json::Value) -> bool {
        let text = |pointer: &str| {
            object
                .pointer(pointer)
                .and_then(serde_json::Value::as_str)
                .unwrap_or("")
        };
        self.policies
            .iter()
            .filter(|p| {
                p.spec.param_kind.as_ref().is_some_and(|k| {
                    k.api_version == text("/apiVersion") && k.kind == text("/kind")
                })
            })
            .flat_map(|p| p.bindings.iter())
            .filter_map(|b| b.spec.param_ref.as_ref())
            .any(|r| {
                let namespace = r
                    .namespace
                    .as_deref()
                    .filter(|ns| !ns.is_empty())
                    .is_none_or(|ns| ns == text("/metadata/namespace"));
                let named = match (r.name.as_deref(), &r.selector) {
                    (Some(name), _) if !name.is_empty() => name == text("/metadata/name"),
                    (_, Some(selector)) => selector.matches_object(object),
                    _ => false,
                };
                namespace && named
            })
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config_map(namespace: &str, name: &str, labels: serde_json::Value) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": namespace, "labels": labels}})
    }

    #[test]
    fn only_an_object_a_binding_names_in_its_namespace_and_kind_is_a_possible_param() {
        let bundle = super::super::bundle::policy_set().unwrap_or_else(|e| panic!("{e}"));
        let resizers = config_map("kube-system", "nodescope-balloon-resizers", json!({}));
        assert!(bundle.may_take_as_param(&resizers));
        assert!(!bundle.may_take_as_param(&config_map(
            "default",
            "nodescope-balloon-resizers",
            json!({})
        )));
        assert!(!bundle.may_take_as_param(&config_map("kube-system", "settings", json!({}))));
        let mut secret = resizers.clone();
        secret["kind"] = json!("Secret");
        assert!(!bundle.may_take_as_param(&secret));
        let feature = json!({"apiVersion": "featureflags.nodescope.dev/v1alpha1", "kind": "Feature",
                             "metadata": {"name": "vpa-node-scope", "namespace": "kube-system"}});
        assert!(bundle.may_take_as_param(&feature));
    }

    #[test]
    fn a_selector_binding_takes_what_its_labels_match_in_any_namespace_when_it_names_none() {
        let yaml = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: p}\nspec:\n  paramKind: {apiVersion: v1, kind: ConfigMap}\n  matchConstraints:\n    resourceRules: [{apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [pods]}]\n  validations: [{expression: \"true\"}]\n---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: b}\nspec:\n  policyName: p\n  validationActions: [Deny]\n  paramRef: {selector: {matchLabels: {limits: \"yes\"}}, parameterNotFoundAction: Allow}\n";
        let set = PolicySet::from_documents(vec![("p.yaml".to_owned(), yaml.to_owned())])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(set.may_take_as_param(&config_map("a", "x", json!({"limits": "yes"}))));
        assert!(set.may_take_as_param(&config_map("b", "y", json!({"limits": "yes"}))));
        assert!(!set.may_take_as_param(&config_map("a", "x", json!({"limits": "no"}))));
        assert!(!set.may_take_as_param(&config_map("a", "x", json!({}))));
    }
}
