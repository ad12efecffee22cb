//! The policy bundle in `policies/`, evaluated against the AdmissionReview
//! bodies a real kube-apiserver v1.36 sent (and edits of them): for every
//! rule, the decision and the exact message.

mod policy_support;

use policy_support::*;
use serde_json::{json, Value};

// ---- nodescope-vpa-scope ------------------------------------------------

#[test]
fn a_node_scoped_vpa_for_a_daemonset_is_allowed() {
    assert_allowed(
        &review("vpa-node-exporter-daemonset-node-scope-create"),
        &Cluster::shipped(),
    );
    assert_allowed(&review("vpa-node-exporter-update"), &Cluster::shipped());
}

#[test]
fn a_vpa_without_scope_or_with_an_empty_one_is_allowed_for_any_target() {
    let mut vpa = review("vpa-node-exporter-daemonset-node-scope-create");
    object(&mut vpa)["spec"]["targetRef"]["kind"] = json!("Deployment");
    object(&mut vpa)["spec"]["scope"] = json!("");
    assert_allowed(&vpa, &Cluster::shipped());
    object(&mut vpa)["spec"]
        .as_object_mut()
        .map(|s| s.remove("scope"));
    assert_allowed(&vpa, &Cluster::shipped());
}

#[test]
fn a_vpa_scope_that_is_no_label_key_is_invalid_and_quoted() {
    let mut vpa = review("vpa-node-exporter-daemonset-node-scope-create");
    object(&mut vpa)["spec"]["scope"] = json!("node pool");
    assert_denied(
        &vpa,
        &Cluster::shipped(),
        422,
        "nodescope-vpa-scope",
        r#"spec.scope must be absent, "", "node" or a node label key such as "topology.kubernetes.io/zone" (an optional DNS subdomain prefix of at most 253 characters and "/", then a name of at most 63 characters: alphanumerics, "-", "_" or ".", starting and ending with an alphanumeric), not "node pool""#,
    );
    assert_eq!(
        run(&vpa, &Cluster::shipped()).reason.as_deref(),
        Some("Invalid")
    );
}

#[test]
fn a_node_scoped_vpa_for_a_deployment_names_the_kind() {
    let mut vpa = review("vpa-node-exporter-daemonset-node-scope-create");
    object(&mut vpa)["spec"]["targetRef"]["kind"] = json!("Deployment");
    assert_denied(
        &vpa,
        &Cluster::shipped(),
        422,
        "nodescope-vpa-scope",
        r#"spec.scope "node" requires spec.targetRef to be an apps/v1 DaemonSet, not kind "Deployment" (apiVersion "apps/v1")"#,
    );
}

#[test]
fn label_key_scopes_are_allowed_for_the_daemonset_and_name_any_other_target() {
    for scope in [
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "node.kubernetes.io/instance-type",
        "gpu",
    ] {
        let mut vpa = review("vpa-node-exporter-daemonset-node-scope-create");
        object(&mut vpa)["spec"]["scope"] = json!(scope);
        assert_allowed(&vpa, &Cluster::shipped());
        object(&mut vpa)["spec"]["targetRef"]["kind"] = json!("Deployment");
        assert_denied(
            &vpa,
            &Cluster::shipped(),
            422,
            "nodescope-vpa-scope",
            &format!(
                r#"spec.scope "{scope}" requires spec.targetRef to be an apps/v1 DaemonSet, not kind "Deployment" (apiVersion "apps/v1")"#
            ),
        );
    }
}

// ---- nodescope-balloon-pods ---------------------------------------------

#[test]
fn the_balloon_pod_fixture_is_allowed() {
    assert_allowed(&review("pod-node-balloon-create"), &Cluster::shipped());
}

#[test]
fn a_balloon_pod_outside_kube_system_is_forbidden() {
    let mut pod = review("pod-node-balloon-create");
    pod["request"]["namespace"] = json!("default");
    object(&mut pod)["metadata"]["namespace"] = json!("default");
    assert_denied(
        &pod,
        &Cluster::shipped(),
        403,
        "nodescope-balloon-pods",
        r#"a balloon pod must be in namespace "kube-system", not "default""#,
    );
    assert_eq!(
        run(&pod, &Cluster::shipped()).reason.as_deref(),
        Some("Forbidden")
    );
}

#[test]
fn a_balloon_pod_with_another_priority_class_is_forbidden() {
    let mut pod = review("pod-node-balloon-create");
    object(&mut pod)["spec"]["priorityClassName"] = json!("system-node-critical");
    assert_denied(
        &pod,
        &Cluster::shipped(),
        403,
        "nodescope-balloon-pods",
        r#"a balloon pod must use priorityClassName "node-balloon", not "system-node-critical""#,
    );
}

#[test]
fn a_balloon_pod_not_controlled_by_a_daemonset_is_forbidden() {
    let mut pod = review("pod-node-balloon-create");
    object(&mut pod)["metadata"]["ownerReferences"][0]["controller"] = json!(false);
    assert_denied(&pod, &Cluster::shipped(), 403, "nodescope-balloon-pods",
        "a balloon pod must be controlled by a DaemonSet (an apps/v1 DaemonSet ownerReference with controller: true)");
    object(&mut pod)["metadata"]["ownerReferences"][0]["controller"] = json!(true);
    object(&mut pod)["metadata"]["ownerReferences"][0]["kind"] = json!("ReplicaSet");
    assert!(!run(&pod, &Cluster::shipped()).allowed);
}

#[test]
fn a_balloon_pod_without_memory_requests_names_the_container() {
    let mut pod = review("pod-node-balloon-create");
    object(&mut pod)["spec"]["containers"][0]["resources"]["requests"]
        .as_object_mut()
        .map(|r| r.remove("memory"));
    assert_denied(
        &pod,
        &Cluster::shipped(),
        403,
        "nodescope-balloon-pods",
        r#"a balloon pod must request cpu and memory in every container; missing in "balloon""#,
    );
}

#[test]
fn only_balloon_pods_may_use_the_node_balloon_class() {
    let plain = review("pod-node-exporter-node-a-1-create");
    assert_allowed(&plain, &Cluster::shipped());
    let mut pod = plain.clone();
    object(&mut pod)["spec"]["priorityClassName"] = json!("node-balloon");
    assert_denied(
        &pod,
        &Cluster::shipped(),
        403,
        "nodescope-balloon-pods",
        r#"priorityClassName "node-balloon" is reserved for pods labelled node.kubernetes.io/balloon: "true""#,
    );
}

#[test]
fn removing_the_balloon_label_from_a_node_balloon_pod_is_forbidden() {
    let mut update = review("pod-node-exporter-update-add-label");
    let balloon = review("pod-node-balloon-create")["request"]["object"].clone();
    let mut unlabelled = balloon.clone();
    unlabelled["metadata"]["labels"]
        .as_object_mut()
        .map(|l| l.remove("node.kubernetes.io/balloon"));
    update["request"]["namespace"] = json!("kube-system");
    update["request"]["oldObject"] = balloon;
    update["request"]["object"] = unlabelled;
    assert_denied(
        &update,
        &Cluster::shipped(),
        403,
        "nodescope-balloon-pods",
        r#"priorityClassName "node-balloon" is reserved for pods labelled node.kubernetes.io/balloon: "true""#,
    );
}

#[test]
fn the_balloon_daemonset_fixture_is_allowed_and_held_to_the_pod_rules() {
    let daemonset = review("daemonset-node-balloon-create");
    assert_allowed(&daemonset, &Cluster::shipped());
    let mut wrong_class = daemonset.clone();
    object(&mut wrong_class)["spec"]["template"]["spec"]["priorityClassName"] =
        json!("system-node-critical");
    assert_denied(
        &wrong_class,
        &Cluster::shipped(),
        403,
        "nodescope-balloon-pods",
        r#"the pod template of a balloon DaemonSet must use priorityClassName "node-balloon", not "system-node-critical""#,
    );
    let mut elsewhere = daemonset;
    elsewhere["request"]["namespace"] = json!("monitoring");
    assert_denied(
        &elsewhere,
        &Cluster::shipped(),
        403,
        "nodescope-balloon-pods",
        r#"the pod template of a balloon DaemonSet must be in namespace "kube-system", not "monitoring""#,
    );
}

#[test]
fn a_daemonset_without_the_balloon_label_may_not_use_node_balloon() {
    let mut daemonset = review("daemonset-node-exporter-create");
    assert_allowed(&daemonset, &Cluster::shipped());
    object(&mut daemonset)["spec"]["template"]["spec"]["priorityClassName"] = json!("node-balloon");
    assert_denied(
        &daemonset,
        &Cluster::shipped(),
        403,
        "nodescope-balloon-pods",
        r#"priorityClassName "node-balloon" is reserved for pods labelled node.kubernetes.io/balloon: "true""#,
    );
}

// ---- nodescope-balloon-priorityclass -------------------------------------

fn balloon_priority_class() -> Value {
    let mut class = review("priorityclass-node-balloon-fixture-create");
    class["request"]["name"] = json!("node-balloon");
    object(&mut class)["metadata"]["name"] = json!("node-balloon");
    class
}

#[test]
fn the_node_balloon_priority_class_as_specified_is_allowed() {
    assert_allowed(&balloon_priority_class(), &Cluster::shipped());
}

#[test]
fn other_priority_classes_are_not_constrained() {
    let mut other = review("priorityclass-node-balloon-fixture-create");
    object(&mut other)["preemptionPolicy"] = json!("PreemptLowerPriority");
    assert_allowed(&other, &Cluster::shipped());
}

#[test]
fn the_node_balloon_priority_class_must_not_preempt() {
    let mut class = balloon_priority_class();
    object(&mut class)["preemptionPolicy"] = json!("PreemptLowerPriority");
    assert_denied(
        &class,
        &Cluster::shipped(),
        403,
        "nodescope-balloon-priorityclass",
        r#"PriorityClass "node-balloon" must have preemptionPolicy "Never", not "PreemptLowerPriority""#,
    );
}

#[test]
fn the_node_balloon_priority_class_must_not_be_global_default() {
    let mut class = balloon_priority_class();
    object(&mut class)["globalDefault"] = json!(true);
    assert_denied(
        &class,
        &Cluster::shipped(),
        403,
        "nodescope-balloon-priorityclass",
        r#"PriorityClass "node-balloon" must not be the global default (globalDefault: false)"#,
    );
}

#[test]
fn the_node_balloon_priority_class_must_have_the_balloon_value() {
    let mut class = balloon_priority_class();
    object(&mut class)["value"] = json!(2000001000);
    assert_denied(
        &class,
        &Cluster::shipped(),
        403,
        "nodescope-balloon-priorityclass",
        r#"PriorityClass "node-balloon" must have value 1000000000, not 2000001000"#,
    );
}

// ---- nodescope-balloon-resize --------------------------------------------

fn balloon_resize(username: &str) -> Value {
    let mut resize = review("pod-node-exporter-resize");
    for key in ["object", "oldObject"] {
        resize["request"][key]["metadata"]["labels"]["node.kubernetes.io/balloon"] = json!("true");
    }
    resize["request"]["userInfo"]["username"] = json!(username);
    resize
}

#[test]
fn resizing_a_non_balloon_pod_is_not_constrained_even_without_the_configmap() {
    assert_allowed(&review("pod-node-exporter-resize"), &Cluster::default());
}

#[test]
fn a_listed_identity_may_resize_a_balloon() {
    assert_allowed(
        &balloon_resize("system:serviceaccount:kube-system:node-resizer"),
        &Cluster::shipped(),
    );
}

#[test]
fn a_listed_group_may_resize_a_balloon() {
    let cluster = Cluster::default().with(resizers("someone\n  group:system:masters  \n"));
    assert_allowed(&balloon_resize("e2e-admin"), &cluster);
}

#[test]
fn an_unlisted_identity_may_not_resize_a_balloon() {
    assert_denied(
        &balloon_resize("e2e-admin"),
        &Cluster::shipped(),
        403,
        "nodescope-balloon-resize",
        r#"resizing a balloon pod is reserved to the identities in ConfigMap kube-system/nodescope-balloon-resizers; "e2e-admin" is not one of them"#,
    );
}

#[test]
fn without_the_configmap_nobody_may_resize_a_balloon() {
    assert_denied(&balloon_resize("system:serviceaccount:kube-system:node-resizer"), &Cluster::default(), 422,
        "nodescope-balloon-resize",
        "failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction");
}

// ---- feature gates ---------------------------------------------------------

#[test]
fn a_node_scoped_vpa_is_denied_while_its_feature_turns_off() {
    let vpa = review("vpa-node-exporter-daemonset-node-scope-create");
    for state in ["TurningOff", "Off"] {
        let cluster = Cluster::shipped().with(feature("vpa-node-scope", Some(state)));
        assert_denied(
            &vpa,
            &cluster,
            403,
            "nodescope-feature-vpa-node-scope",
            &format!(
                r#"feature "vpa-node-scope" is {state}: no new uses allowed (a VerticalPodAutoscaler with spec.scope "node")"#
            ),
        );
    }
}

#[test]
fn a_feature_that_is_on_unset_or_absent_blocks_nothing() {
    let vpa = review("vpa-node-exporter-daemonset-node-scope-create");
    assert_allowed(
        &vpa,
        &Cluster::shipped().with(feature("vpa-node-scope", Some("On"))),
    );
    assert_allowed(
        &vpa,
        &Cluster::shipped().with(feature("vpa-node-scope", Some("TurningOn"))),
    );
    assert_allowed(
        &vpa,
        &Cluster::shipped().with(feature("vpa-node-scope", None)),
    );
    assert_allowed(&vpa, &Cluster::shipped());
}

#[test]
fn updating_an_existing_use_is_allowed_but_introducing_one_is_not() {
    let cluster = Cluster::shipped().with(feature("vpa-node-scope", Some("TurningOff")));
    let update = review("vpa-node-exporter-update");
    assert_allowed(&update, &cluster);
    let mut introduce = update;
    introduce["request"]["oldObject"]["spec"]
        .as_object_mut()
        .map(|s| s.remove("scope"));
    assert_denied(
        &introduce,
        &cluster,
        403,
        "nodescope-feature-vpa-node-scope",
        r#"feature "vpa-node-scope" is TurningOff: no new uses allowed (a VerticalPodAutoscaler with spec.scope "node")"#,
    );
}

#[test]
fn a_zone_scope_is_a_use_of_the_feature_like_node() {
    let cluster = Cluster::shipped().with(feature("vpa-node-scope", Some("TurningOff")));
    let mut create = review("vpa-node-exporter-daemonset-node-scope-create");
    object(&mut create)["spec"]["scope"] = json!("topology.kubernetes.io/zone");
    assert_denied(
        &create,
        &cluster,
        403,
        "nodescope-feature-vpa-node-scope",
        r#"feature "vpa-node-scope" is TurningOff: no new uses allowed (a VerticalPodAutoscaler with spec.scope "topology.kubernetes.io/zone")"#,
    );
    let mut keep = review("vpa-node-exporter-update");
    for o in ["object", "oldObject"] {
        keep["request"][o]["spec"]["scope"] = json!("topology.kubernetes.io/zone");
    }
    assert_allowed(&keep, &cluster);
}

#[test]
fn deleting_a_use_is_never_blocked() {
    let cluster = Cluster::shipped().with(feature("vpa-node-scope", Some("Off")));
    let mut delete = review("vpa-node-exporter-update");
    delete["request"]["operation"] = json!("DELETE");
    delete["request"]["object"] = Value::Null;
    assert_allowed(&delete, &cluster);
}

#[test]
fn balloon_pods_and_daemonsets_are_denied_while_balloon_pods_is_off() {
    let cluster = Cluster::shipped().with(feature("balloon-pods", Some("Off")));
    assert_denied(
        &review("pod-node-balloon-create"),
        &cluster,
        403,
        "nodescope-feature-balloon-pods",
        r#"feature "balloon-pods" is Off: no new uses allowed (a balloon pod)"#,
    );
    assert_denied(
        &review("daemonset-node-balloon-create"),
        &cluster,
        403,
        "nodescope-feature-balloon-pods",
        r#"feature "balloon-pods" is Off: no new uses allowed (a balloon DaemonSet)"#,
    );
    assert_allowed(&review("pod-node-exporter-node-a-1-create"), &cluster);
    assert_allowed(&balloon_priority_class(), &cluster);
}

#[test]
fn feature_objects_themselves_are_not_constrained() {
    assert_allowed(&review("feature-vpanodescope-create"), &Cluster::shipped());
    assert_allowed(
        &review("feature-vpanodescope-status-update"),
        &Cluster::shipped(),
    );
}

#[test]
fn every_fixture_is_allowed_by_the_shipped_bundle() {
    for name in [
        "daemonset-node-balloon-create",
        "daemonset-node-exporter-create",
        "feature-vpanodescope-create",
        "feature-vpanodescope-status-update",
        "pod-node-balloon-create",
        "pod-node-exporter-ephemeralcontainers",
        "pod-node-exporter-node-a-1-create",
        "pod-node-exporter-resize",
        "pod-node-exporter-update-add-label",
        "priorityclass-node-balloon-fixture-create",
        "vpa-node-exporter-daemonset-node-scope-create",
        "vpa-node-exporter-update",
    ] {
        let outcome = run(&review(name), &Cluster::shipped());
        assert!(outcome.allowed, "{name}: {:?}", outcome.message);
    }
}
