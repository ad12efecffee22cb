use super::*;
use crate::features::find_uses;
use crate::params::NoInputs;
use crate::policy::PolicySet;

fn bundle() -> PolicySet {
    match crate::policy::bundle::policy_set() {
        Ok(set) => set,
        Err(e) => panic!("the shipped bundle loads: {e}"),
    }
}

fn shipped(name: &str) -> Value {
    crate::features::owned::features()
        .into_iter()
        .find(|f| str_at(f, "/metadata/name") == name)
        .unwrap_or_else(|| panic!("no shipped Feature {name}"))
}

fn vpa(name: &str, version: &str, scope: Option<&str>, groups: bool) -> Value {
    let mut object = json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"namespace": "monitoring", "name": name, "resourceVersion": version},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name}},
    });
    if let Some(scope) = scope {
        object["spec"]["scope"] = json!(scope);
    }
    if groups {
        object["status"] = json!({"recommendationGroups": [{"scopeValue": "node-a", "containerRecommendations": []}]});
    }
    object
}

fn listed(group: &str, resource: &str, objects: Vec<Value>) -> Listed {
    Listed {
        group: group.to_owned(),
        version: "v1".to_owned(),
        resource: resource.to_owned(),
        namespaced: true,
        objects,
    }
}

fn plan_for(feature: &Value, policies: &PolicySet, listed: &[Listed]) -> Vec<CleanupPatch> {
    let rules = rules(feature).unwrap_or_else(|e| panic!("{e}"));
    let uses = find_uses(policies, feature, listed, &NoInputs).unwrap_or_else(|e| panic!("{e}"));
    plan(&rules, &uses, listed)
}

#[test]
fn the_shipped_vpa_node_scope_clears_the_groups_then_the_scope_of_each_scoped_vpa() {
    let listed = [listed(
        "autoscaling.k8s.io",
        "verticalpodautoscalers",
        vec![
            vpa("node-exporter", "41", Some("node"), true),
            vpa("dcgm", "7", Some("nvidia.com/gpu.present"), false),
            // Not a use: nothing of it is touched, groups or not.
            vpa("plain", "9", None, true),
        ],
    )];
    let patches = plan_for(&shipped("vpa-node-scope"), &bundle(), &listed);
    let shown: Vec<(String, &str, Value)> = patches
        .iter()
        .map(|p| (p.label(), p.subresource.as_str(), p.patch.clone()))
        .collect();
    assert_eq!(
        shown,
        vec![
            (
                "VerticalPodAutoscaler monitoring/dcgm".to_owned(),
                "",
                json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                       {"op": "remove", "path": "/spec/scope"}])
            ),
            (
                "VerticalPodAutoscaler monitoring/node-exporter".to_owned(),
                "status",
                json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "41"},
                       {"op": "remove", "path": "/status/recommendationGroups"}])
            ),
            (
                "VerticalPodAutoscaler monitoring/node-exporter".to_owned(),
                "",
                json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "41"},
                       {"op": "remove", "path": "/spec/scope"}])
            ),
        ]
    );
    // The second removal of one object is re-guarded by what the first returned.
    assert_eq!(
        patches[2].at_version("42").patch,
        json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
               {"op": "remove", "path": "/spec/scope"}])
    );
    assert_eq!(patches[2].resource_version(), "41");
    // balloon-pods declares nothing: nothing is touched.
    assert_eq!(
        plan_for(&shipped("balloon-pods"), &bundle(), &listed),
        vec![]
    );
}

/// A third party's feature `fancy-mode` of its own `widgets.example.com`,
/// gated by its own policy of the bundle's form.
fn third_party_policies() -> PolicySet {
    let policy = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: example-fancy-mode}
spec:
  failurePolicy: Fail
  paramKind: {apiVersion: featureflags.nodescope.dev/v1alpha1, kind: Feature}
  matchConstraints:
    resourceRules:
      - {apiGroups: [example.com], apiVersions: ["*"], operations: [CREATE, UPDATE], resources: [widgets]}
  validations:
    - expression: >-
        !(has(object.spec.fancy) && object.spec.fancy) ||
        !(has(params.status) && has(params.status.state) && params.status.state in ['TurningOff', 'Off'])
      message: fancy-mode is off
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: example-fancy-mode}
spec:
  policyName: example-fancy-mode
  paramRef: {name: fancy-mode, namespace: widgets-system, parameterNotFoundAction: Allow}
  validationActions: [Deny]
"#;
    PolicySet::from_documents(vec![("third-party.yaml".to_owned(), policy.to_owned())])
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_third_partys_feature_clears_its_own_fields_of_its_own_kind_the_same_way() {
    let feature = json!({
        "apiVersion": "featureflags.nodescope.dev/v1alpha1", "kind": "Feature",
        "metadata": {"namespace": "widgets-system", "name": "fancy-mode"},
        "spec": {"desired": "Disabled", "cleanup": [
            {"group": "example.com", "resource": "widgets", "jsonPointer": "/spec/fancy"},
            {"group": "example.com", "resource": "widgets", "jsonPointer": "/status/fancyLevel"},
            // Another kind's field of the same name: never touched here.
            {"group": "other.example.com", "resource": "widgets", "jsonPointer": "/spec/fancy"}
        ]},
    });
    let widget = |name: &str, fancy: bool| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"namespace": "shop", "name": name, "resourceVersion": "3"},
               "spec": {"fancy": fancy}, "status": {"fancyLevel": 2}})
    };
    let listed = [
        listed(
            "example.com",
            "widgets",
            vec![widget("a", true), widget("b", false)],
        ),
        listed("other.example.com", "widgets", vec![widget("a", true)]),
    ];
    let patches = plan_for(&feature, &third_party_policies(), &listed);
    assert_eq!(
        serde_json::to_value(&patches).unwrap_or_default(),
        json!([
            {"group": "example.com", "version": "v1", "resource": "widgets", "kind": "Widget",
             "namespace": "shop", "name": "a", "subresource": "status", "jsonPointer": "/status/fancyLevel",
             "patch": [{"op": "test", "path": "/metadata/resourceVersion", "value": "3"},
                       {"op": "remove", "path": "/status/fancyLevel"}]},
            {"group": "example.com", "version": "v1", "resource": "widgets", "kind": "Widget",
             "namespace": "shop", "name": "a", "subresource": "", "jsonPointer": "/spec/fancy",
             "patch": [{"op": "test", "path": "/metadata/resourceVersion", "value": "3"},
                       {"op": "remove", "path": "/spec/fancy"}]}
        ])
    );
}

#[test]
fn a_feature_without_cleanup_declares_nothing_and_bad_entries_are_named() {
    let feature = |cleanup: Value| json!({"metadata": {"namespace": "ns", "name": "f"}, "spec": {"cleanup": cleanup}});
    assert_eq!(
        rules(&json!({"metadata": {"name": "f"}, "spec": {}})),
        Ok(vec![])
    );
    assert_eq!(
        rules(&feature(json!("all"))),
        Err(CleanupError::NotAList {
            feature: "ns/f".to_owned()
        })
    );
    let message = |cleanup: Value| rules(&feature(cleanup)).map_err(|e| e.to_string());
    assert_eq!(
        message(json!([{"group": "g", "jsonPointer": "/spec/x"}])),
        Err("Feature ns/f: spec.cleanup[0].resource is required (a REST resource such as verticalpodautoscalers)".to_owned())
    );
    assert_eq!(
        message(
            json!([{"resource": "r", "jsonPointer": "/spec/x"}, {"resource": "r", "jsonPointer": "spec.x"}])
        ),
        Err(
            "Feature ns/f: spec.cleanup[1].jsonPointer must be a JSON pointer such as /spec/scope"
                .to_owned()
        )
    );
    assert_eq!(
        message(json!([{"resource": "r", "jsonPointer": "/metadata/labels"}])),
        Err(
            "Feature ns/f: spec.cleanup[0].jsonPointer must not name the object's metadata"
                .to_owned()
        )
    );
}

#[test]
fn fields_still_held_are_counted_per_declared_field() {
    let rules = rules(&shipped("vpa-node-scope")).unwrap_or_else(|e| panic!("{e}"));
    let listed = [listed(
        "autoscaling.k8s.io",
        "verticalpodautoscalers",
        vec![
            vpa("a", "1", Some("node"), true),
            vpa("b", "1", Some("node"), false),
            vpa("c", "1", Some(""), false),
        ],
    )];
    let counts: Vec<(&str, usize)> = held(&rules, &listed)
        .into_iter()
        .map(|(r, n)| (r.json_pointer.as_str(), n))
        .collect();
    assert_eq!(
        counts,
        vec![("/spec/scope", 2), ("/status/recommendationGroups", 1)]
    );
}
