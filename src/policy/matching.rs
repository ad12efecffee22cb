//! Which requests a policy or binding applies to, as the apiserver decides:
//! namespace selector, object selector, exclude rules, then resource rules.
//!
//! Pure functions over the request view and the namespace labels the caller
//! looked up; `matchPolicy: Equivalent` is not implemented (it needs API
//! discovery): rules match the request's own group/version/resource.

use super::model::{MatchResources, NamedRuleWithOperations, Scope};
use super::request::{AdmissionRequestInput, Shape};
use serde_json::{Map, Value};

/// Whether `criteria` select the request.
///
/// `namespace_labels` is only called when a namespace selector must be
/// evaluated, so the lookup costs nothing for policies without one.
pub(crate) fn matches<'n>(
    criteria: &MatchResources,
    request: &AdmissionRequestInput<'_>,
    namespace_labels: impl FnOnce() -> &'n Map<String, Value>,
) -> bool {
    namespace_selector_matches(criteria, request, namespace_labels)
        && object_selector_matches(criteria, request)
        && !criteria
            .exclude_resource_rules
            .iter()
            .any(|rule| rule_matches(rule, request))
        && (criteria.resource_rules.is_empty()
            || criteria
                .resource_rules
                .iter()
                .any(|rule| rule_matches(rule, request)))
}

/// Cluster-scoped requests (other than for Namespaces) are never excluded by
/// a namespace selector, as in the apiserver.
fn namespace_selector_matches<'n>(
    criteria: &MatchResources,
    request: &AdmissionRequestInput<'_>,
    namespace_labels: impl FnOnce() -> &'n Map<String, Value>,
) -> bool {
    let Some(selector) = criteria.namespace_selector.as_ref() else {
        return true;
    };
    if selector.is_empty() || request.namespace().is_empty() {
        return true;
    }
    selector.matches_labels(namespace_labels())
}

/// The object selector matches if the new OR the old object's labels match.
fn object_selector_matches(criteria: &MatchResources, request: &AdmissionRequestInput<'_>) -> bool {
    let Some(selector) = criteria.object_selector.as_ref() else {
        return true;
    };
    if selector.is_empty() {
        return true;
    }
    [request.object_json(), request.old_object_json()]
        .into_iter()
        .flatten()
        .any(|object| {
            let labels = object
                .get("metadata")
                .and_then(|m| m.get("labels"))
                .and_then(|l| match l.shape() {
                    Shape::Object(fields) => Some(fields),
                    _ => None,
                });
            selector.matches_with(|key| labels?.get(key)?.as_str())
        })
}

/// One resource rule, as `k8s.io/apiserver/.../predicates/rules`.
pub(crate) fn rule_matches(
    rule: &NamedRuleWithOperations,
    request: &AdmissionRequestInput<'_>,
) -> bool {
    let wildcard_or = |list: &[String], value: &str| list.iter().any(|x| x == "*" || x == value);
    scope_matches(rule.scope, request)
        && rule
            .operations
            .iter()
            .any(|op| op.covers(request.operation()))
        && wildcard_or(&rule.api_groups, request.group())
        && wildcard_or(&rule.api_versions, request.version())
        && rule.resources.iter().any(|entry| {
            let (resource, sub) = entry.split_once('/').unwrap_or((entry.as_str(), ""));
            (resource == "*" || resource == request.resource())
                && (sub == "*" || sub == request.sub_resource())
        })
        && (rule.resource_names.is_empty()
            || rule.resource_names.iter().any(|n| n == request.name()))
}

/// Namespaces themselves are cluster-scoped even though their requests
/// carry a namespace.
fn scope_matches(scope: Option<Scope>, request: &AdmissionRequestInput<'_>) -> bool {
    let cluster = request.is_namespace_resource() || request.namespace().is_empty();
    match scope.unwrap_or(Scope::All) {
        Scope::All => true,
        Scope::Namespaced => !cluster,
        Scope::Cluster => cluster,
    }
}

/// The labels of the request's namespace: from the Namespace object when
/// the store has it, always with `kubernetes.io/metadata.name` (the
/// apiserver sets that label on every namespace, so a selector on it works
/// even before the store has seen the namespace). For a Namespace request
/// the labels come from the object being written.
pub(crate) fn namespace_labels(
    request: &AdmissionRequestInput<'_>,
    namespace_object: Option<&Value>,
) -> Map<String, Value> {
    let source = if request.is_namespace_resource() && request.sub_resource().is_empty() {
        request.object().or(request.old_object())
    } else {
        namespace_object
    };
    let mut labels = source
        .and_then(|ns| ns.pointer("/metadata/labels"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    labels
        .entry("kubernetes.io/metadata.name")
        .or_insert_with(|| Value::String(request.namespace().to_owned()));
    labels
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::model::Operation;
    use crate::selector::{LabelSelector, LabelSelectorRequirement, SelectorOperator};
    use serde_json::json;

    fn request(operation: &str, resource: &str, sub: &str, namespace: &str) -> Value {
        json!({
            "operation": operation,
            "resource": {"group": "", "version": "v1", "resource": resource},
            "subResource": sub,
            "namespace": namespace,
            "name": "p",
            "object": {"metadata": {"labels": {"app": "new"}}},
            "oldObject": {"metadata": {"labels": {"app": "old"}}},
        })
    }

    fn rule(resources: &[&str], operations: &[Operation]) -> NamedRuleWithOperations {
        NamedRuleWithOperations {
            api_groups: vec![String::new()],
            api_versions: vec!["*".into()],
            resources: resources.iter().map(|r| (*r).to_owned()).collect(),
            operations: operations.to_vec(),
            ..Default::default()
        }
    }

    fn check(rule: &NamedRuleWithOperations, raw: &Value) -> bool {
        let input = AdmissionRequestInput::from_request(raw).expect("valid request");
        rule_matches(rule, &input)
    }

    #[test]
    fn a_plain_resource_rule_does_not_match_its_subresources() {
        let pods = rule(&["pods"], &[Operation::Update]);
        assert!(check(&pods, &request("UPDATE", "pods", "", "a")));
        assert!(!check(&pods, &request("UPDATE", "pods", "resize", "a")));
    }

    #[test]
    fn subresource_rules_and_wildcards_match_as_in_the_apiserver() {
        let resize = rule(&["pods/resize"], &[Operation::All]);
        assert!(check(&resize, &request("UPDATE", "pods", "resize", "a")));
        assert!(!check(&resize, &request("UPDATE", "pods", "", "a")));
        let status = rule(&["*/status"], &[Operation::Update]);
        assert!(check(&status, &request("UPDATE", "pods", "status", "a")));
        assert!(!check(&status, &request("UPDATE", "pods", "resize", "a")));
        let everything = rule(&["pods/*"], &[Operation::Update]);
        assert!(check(&everything, &request("UPDATE", "pods", "", "a")));
        assert!(check(
            &everything,
            &request("UPDATE", "pods", "resize", "a")
        ));
        assert!(!check(&everything, &request("CREATE", "pods", "", "a")));
    }

    #[test]
    fn resource_names_and_scope_narrow_a_rule() {
        let mut named = rule(&["pods"], &[Operation::All]);
        named.resource_names = vec!["q".into()];
        assert!(!check(&named, &request("CREATE", "pods", "", "a")));
        let mut cluster = rule(&["*"], &[Operation::All]);
        cluster.scope = Some(Scope::Cluster);
        assert!(!check(&cluster, &request("CREATE", "pods", "", "a")));
        assert!(check(&cluster, &request("CREATE", "nodes", "", "")));
        assert!(check(&cluster, &request("CREATE", "namespaces", "", "")));
    }

    #[test]
    fn exclude_rules_win_over_resource_rules() {
        let criteria = MatchResources {
            resource_rules: vec![rule(&["*"], &[Operation::All])],
            exclude_resource_rules: vec![rule(&["configmaps"], &[Operation::All])],
            ..Default::default()
        };
        let empty = Map::new();
        let raw = request("CREATE", "configmaps", "", "a");
        let input = AdmissionRequestInput::from_request(&raw).expect("valid");
        assert!(!matches(&criteria, &input, || &empty));
        let raw = request("CREATE", "pods", "", "a");
        let input = AdmissionRequestInput::from_request(&raw).expect("valid");
        assert!(matches(&criteria, &input, || &empty));
    }

    #[test]
    fn the_object_selector_matches_the_new_or_the_old_object() {
        let selector = |value: &str| MatchResources {
            object_selector: Some(LabelSelector {
                match_labels: [("app".to_owned(), value.to_owned())].into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let empty = Map::new();
        let raw = request("UPDATE", "pods", "", "a");
        let input = AdmissionRequestInput::from_request(&raw).expect("valid");
        assert!(matches(&selector("new"), &input, || &empty));
        assert!(matches(&selector("old"), &input, || &empty));
        assert!(!matches(&selector("other"), &input, || &empty));
    }

    #[test]
    fn the_namespace_selector_sees_the_metadata_name_label_without_the_namespace_object() {
        let criteria = MatchResources {
            namespace_selector: Some(LabelSelector {
                match_expressions: vec![LabelSelectorRequirement {
                    key: "kubernetes.io/metadata.name".into(),
                    operator: SelectorOperator::In,
                    values: vec!["kube-system".into()],
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        for (namespace, expected) in [("kube-system", true), ("default", false)] {
            let raw = request("CREATE", "pods", "", namespace);
            let input = AdmissionRequestInput::from_request(&raw).expect("valid");
            let labels = namespace_labels(&input, None);
            assert_eq!(
                matches(&criteria, &input, || &labels),
                expected,
                "{namespace}"
            );
        }
        // cluster-scoped requests are never excluded by a namespace selector
        let raw = request("CREATE", "nodes", "", "");
        let input = AdmissionRequestInput::from_request(&raw).expect("valid");
        let labels = namespace_labels(&input, None);
        assert!(matches(&criteria, &input, || &labels));
    }

    #[test]
    fn selector_operators_follow_kubernetes_semantics() {
        let labels = json!({"metadata": {"labels": {"tier": "a"}}});
        let requirement = |operator, values: &[&str]| LabelSelector {
            match_expressions: vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator,
                values: values.iter().map(|v| (*v).to_owned()).collect(),
            }],
            ..Default::default()
        };
        assert!(requirement(SelectorOperator::In, &["a", "b"]).matches_object(&labels));
        assert!(!requirement(SelectorOperator::NotIn, &["a"]).matches_object(&labels));
        assert!(requirement(SelectorOperator::NotIn, &["a"]).matches_object(&json!({})));
        assert!(requirement(SelectorOperator::Exists, &[]).matches_object(&labels));
        assert!(requirement(SelectorOperator::DoesNotExist, &[]).matches_object(&json!({})));
    }
}
