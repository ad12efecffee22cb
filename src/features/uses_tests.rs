use super::*;
use crate::params::NoInputs;
use serde_json::json;

fn bundle() -> PolicySet {
    match crate::policy::bundle::policy_set() {
        Ok(set) => set,
        Err(e) => panic!("the shipped bundle loads: {e}"),
    }
}

fn feature(namespace: &str, name: &str, state: &str) -> Value {
    json!({
        "apiVersion": "featureflags.nodescope.dev/v1alpha1",
        "kind": "Feature",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"desired": "Disabled"},
        "status": {"state": state},
    })
}

fn vpa(namespace: &str, name: &str, scope: Option<&str>) -> Value {
    let mut spec =
        json!({"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name}});
    if let Some(scope) = scope {
        spec["scope"] = json!(scope);
    }
    json!({
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"namespace": namespace, "name": name},
        "spec": spec,
    })
}

fn vpas(objects: Vec<Value>) -> Listed {
    Listed {
        group: "autoscaling.k8s.io".to_owned(),
        version: "v1".to_owned(),
        resource: "verticalpodautoscalers".to_owned(),
        namespaced: true,
        objects,
    }
}

fn uses_of(set: &PolicySet, feature: &Value, listed: &[Listed]) -> Vec<PolicyUses> {
    match find_uses(set, feature, listed, &NoInputs) {
        Ok(uses) => uses,
        Err(e) => panic!("uses are found: {e}"),
    }
}

#[test]
fn scoped_vpas_use_vpa_node_scope_and_unscoped_ones_do_not_whatever_the_recorded_state() {
    let listed = [vpas(vec![
        vpa("monitoring", "node-exporter", Some("node")),
        vpa("default", "plain", None),
        vpa("default", "empty", Some("")),
        vpa("gpu", "dcgm", Some("nvidia.com/gpu.present")),
    ])];
    for state in ["On", "TurningOff", "Off"] {
        let uses = uses_of(
            &bundle(),
            &feature("kube-system", "vpa-node-scope", state),
            &listed,
        );
        assert_eq!(
            transition_tasks(&uses),
            vec![TransitionTask {
                name: "nodescope-feature-vpa-node-scope".to_owned(),
                count: 2,
                description:
                    "VerticalPodAutoscaler gpu/dcgm, VerticalPodAutoscaler monitoring/node-exporter"
                        .to_owned(),
            }],
            "recorded state {state}"
        );
        assert_eq!(
            uses[0].uses[1].message,
            "feature \"vpa-node-scope\" is Off: no new uses allowed (a VerticalPodAutoscaler with spec.scope \"node\")"
        );
    }
}

#[test]
fn a_task_names_the_first_three_objects_and_counts_the_rest() {
    let objects = (0..15)
        .map(|i| vpa("monitoring", &format!("exporter-{i:02}"), Some("node")))
        .collect();
    let uses = uses_of(
        &bundle(),
        &feature("kube-system", "vpa-node-scope", "TurningOff"),
        &[vpas(objects)],
    );
    assert_eq!(
        transition_tasks(&uses),
        vec![TransitionTask {
            name: "nodescope-feature-vpa-node-scope".to_owned(),
            count: 15,
            description: "VerticalPodAutoscaler monitoring/exporter-00, VerticalPodAutoscaler monitoring/exporter-01, VerticalPodAutoscaler monitoring/exporter-02 and 12 more".to_owned(),
        }]
    );
}

#[test]
fn balloon_pods_finds_labelled_pods_and_daemonsets_through_its_own_rules() {
    let pod = |name: &str, balloon: bool| {
        let mut labels = json!({"app": name});
        if balloon {
            labels["node.kubernetes.io/balloon"] = json!("true");
        }
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"namespace": "kube-system", "name": name, "labels": labels},
               "spec": {"containers": [{"name": "c", "image": "pause"}]}})
    };
    let daemonset = json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"namespace": "kube-system", "name": "balloon"},
        "spec": {"template": {"metadata": {"labels": {"node.kubernetes.io/balloon": "true"}},
                              "spec": {"containers": [{"name": "c", "image": "pause"}]}}}});
    let listed = [
        Listed {
            group: String::new(),
            version: "v1".to_owned(),
            resource: "pods".to_owned(),
            namespaced: true,
            objects: vec![pod("balloon-abc", true), pod("web", false)],
        },
        Listed {
            group: "apps".to_owned(),
            version: "v1".to_owned(),
            resource: "daemonsets".to_owned(),
            namespaced: true,
            objects: vec![daemonset],
        },
        vpas(vec![vpa("monitoring", "node-exporter", Some("node"))]),
    ];
    let uses = uses_of(
        &bundle(),
        &feature("kube-system", "balloon-pods", "On"),
        &listed,
    );
    assert_eq!(
        transition_tasks(&uses),
        vec![TransitionTask {
            name: "nodescope-feature-balloon-pods".to_owned(),
            count: 2,
            description: "DaemonSet kube-system/balloon, Pod kube-system/balloon-abc".to_owned(),
        }]
    );
    assert_eq!(
        uses[0]
            .uses
            .iter()
            .map(|u| u.message.as_str())
            .collect::<Vec<_>>(),
        [
            "feature \"balloon-pods\" is Off: no new uses allowed (a balloon DaemonSet)",
            "feature \"balloon-pods\" is Off: no new uses allowed (a balloon pod)",
        ]
    );
}

#[test]
fn a_feature_no_binding_names_has_no_uses() {
    let listed = [vpas(vec![vpa("monitoring", "node-exporter", Some("node"))])];
    assert_eq!(
        uses_of(&bundle(), &feature("kube-system", "unknown", "On"), &listed),
        []
    );
    assert_eq!(
        uses_of(
            &bundle(),
            &feature("other", "vpa-node-scope", "On"),
            &listed
        ),
        []
    );
}

#[test]
fn a_feature_without_a_name_is_an_error_that_says_so() {
    let result = find_uses(&bundle(), &json!({"kind": "Feature"}), &[], &NoInputs);
    assert_eq!(
        result.err().map(|e| e.to_string()),
        Some("Feature has no metadata.name".to_owned())
    );
}

/// A third party gates its own feature, in its own namespace, on its own
/// CRD's kind, with a policy of the same form: found the same way.
const THIRD_PARTY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: acme-gpu-sharing
spec:
  failurePolicy: Fail
  paramKind:
    apiVersion: featureflags.nodescope.dev/v1alpha1
    kind: Feature
  matchConstraints:
    resourceRules:
      - apiGroups: ["acme.example.com"]
        apiVersions: ["*"]
        operations: ["CREATE", "UPDATE"]
        resources: ["gpushares"]
  variables:
    - name: state
      expression: "has(params.status) && has(params.status.state) ? params.status.state : ''"
    - name: uses
      expression: "has(object.spec) && has(object.spec.shared) && object.spec.shared"
    - name: usedBefore
      expression: "oldObject != null && has(oldObject.spec.shared) && oldObject.spec.shared"
  validations:
    - expression: "!variables.uses || variables.usedBefore || !(variables.state in ['TurningOff', 'Off'])"
      reason: Forbidden
      messageExpression: "'feature \"' + params.metadata.name + '\" is ' + variables.state + ': no new shared GPUs'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: acme-gpu-sharing
spec:
  policyName: acme-gpu-sharing
  paramRef:
    name: gpu-sharing
    namespace: acme-system
    parameterNotFoundAction: Allow
  validationActions: ["Deny"]
"#;

#[test]
fn a_third_party_feature_gated_by_its_own_policy_finds_its_own_kind() {
    let set =
        match PolicySet::from_documents(vec![("acme.yaml".to_owned(), THIRD_PARTY.to_owned())]) {
            Ok(set) => set,
            Err(e) => panic!("the third-party policy loads: {e}"),
        };
    let share = |ns: &str, name: &str, shared: bool| {
        json!({"apiVersion": "acme.example.com/v1", "kind": "GpuShare",
               "metadata": {"namespace": ns, "name": name}, "spec": {"shared": shared}})
    };
    let listed = [Listed {
        group: "acme.example.com".to_owned(),
        version: "v1".to_owned(),
        resource: "gpushares".to_owned(),
        namespaced: true,
        objects: vec![
            share("ml", "train", true),
            share("ml", "infer", false),
            share("batch", "a", true),
        ],
    }];
    let uses = uses_of(&set, &feature("acme-system", "gpu-sharing", "On"), &listed);
    assert_eq!(
        transition_tasks(&uses),
        vec![TransitionTask {
            name: "acme-gpu-sharing".to_owned(),
            count: 2,
            description: "GpuShare batch/a, GpuShare ml/train".to_owned(),
        }]
    );
    assert_eq!(
        uses[0].uses[0].message,
        "feature \"gpu-sharing\" is Off: no new shared GPUs"
    );
}
