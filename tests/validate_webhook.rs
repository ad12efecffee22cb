//! `POST /validate` end to end: the `policies/` bundle enforced by the real
//! server over TLS, on the captured reviews and on edits of them.

mod common;

use common::*;
use serde_json::{json, Value};

fn review(name: &str) -> Value {
    serde_json::from_slice(&fixture(&format!("{name}.validate.json"))).unwrap()
}

async fn validate(server: &Server, v: &Value) -> Value {
    let mut client = H1::connect(server.addr, &server.ca()).await;
    let reply = client
        .post("/validate?timeout=3s", serde_json::to_vec(v).unwrap())
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let response = reply.json()["response"].clone();
    assert_eq!(response["uid"], v["request"]["uid"]);
    response
}

fn denied(response: &Value, code: u16, reason: &str, message: &str) {
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(
        response["status"],
        json!({"status": "Failure", "code": code, "reason": reason, "message": message})
    );
}

#[tokio::test]
async fn every_captured_review_is_admitted_by_the_bundle() {
    let server = Server::start(&[]);
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
        let response = validate(&server, &review(name)).await;
        // Both captured VPAs have scope node: admitted with the portability
        // warning.
        let expected = if name.starts_with("vpa-") {
            json!({"uid": review(name)["request"]["uid"], "allowed": true, "warnings": [PORTABLE_WARNING]})
        } else {
            json!({"uid": review(name)["request"]["uid"], "allowed": true})
        };
        assert_eq!(response, expected, "{name}");
    }
}

#[tokio::test]
async fn pod_without_the_balloon_label_cannot_borrow_node_balloon() {
    let server = Server::start(&[]);
    let mut v = review("pod-node-exporter-node-a-1-create");
    v["request"]["object"]["spec"]["priorityClassName"] = json!("node-balloon");
    denied(
        &validate(&server, &v).await,
        403,
        "Forbidden",
        "ValidatingAdmissionPolicy 'nodescope-balloon-pods' with binding 'nodescope-balloon-pods' denied request: priorityClassName \"node-balloon\" is reserved for pods labelled node.kubernetes.io/balloon: \"true\"",
    );
}

#[tokio::test]
async fn daemonset_template_without_the_label_cannot_borrow_node_balloon() {
    let server = Server::start(&[]);
    let mut v = review("daemonset-node-exporter-create");
    v["request"]["object"]["spec"]["template"]["spec"]["priorityClassName"] = json!("node-balloon");
    denied(
        &validate(&server, &v).await,
        403,
        "Forbidden",
        "ValidatingAdmissionPolicy 'nodescope-balloon-pods' with binding 'nodescope-balloon-pods' denied request: priorityClassName \"node-balloon\" is reserved for pods labelled node.kubernetes.io/balloon: \"true\"",
    );
}

#[tokio::test]
async fn balloon_pod_outside_kube_system_is_denied() {
    let server = Server::start(&[]);
    let mut v = review("pod-node-balloon-create");
    v["request"]["namespace"] = json!("default");
    v["request"]["object"]["metadata"]["namespace"] = json!("default");
    denied(
        &validate(&server, &v).await,
        403,
        "Forbidden",
        "ValidatingAdmissionPolicy 'nodescope-balloon-pods' with binding 'nodescope-balloon-pods' denied request: a balloon pod must be in namespace \"kube-system\", not \"default\"",
    );
}

#[tokio::test]
async fn balloon_pod_without_a_memory_request_is_denied() {
    let server = Server::start(&[]);
    let mut v = review("pod-node-balloon-create");
    for c in v["request"]["object"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
    {
        c["resources"]["requests"]
            .as_object_mut()
            .unwrap()
            .remove("memory");
    }
    denied(
        &validate(&server, &v).await,
        403,
        "Forbidden",
        "ValidatingAdmissionPolicy 'nodescope-balloon-pods' with binding 'nodescope-balloon-pods' denied request: a balloon pod must request cpu and memory in every container; missing in \"balloon\"",
    );
}

#[tokio::test]
async fn node_balloon_priority_class_must_never_preempt() {
    let server = Server::start(&[]);
    let mut v = review("priorityclass-node-balloon-fixture-create");
    v["request"]["name"] = json!("node-balloon");
    v["request"]["object"]["metadata"]["name"] = json!("node-balloon");
    v["request"]["object"]["preemptionPolicy"] = json!("PreemptLowerPriority");
    denied(
        &validate(&server, &v).await,
        403,
        "Forbidden",
        "ValidatingAdmissionPolicy 'nodescope-balloon-priorityclass' with binding 'nodescope-balloon-priorityclass' denied request: PriorityClass \"node-balloon\" must have preemptionPolicy \"Never\", not \"PreemptLowerPriority\"",
    );
}

#[tokio::test]
async fn vpa_scope_that_is_neither_node_nor_a_label_key_is_invalid() {
    let server = Server::start(&[]);
    let mut v = review("vpa-node-exporter-daemonset-node-scope-create");
    v["request"]["object"]["spec"]["scope"] = json!("Topology/zone");
    denied(
        &validate(&server, &v).await,
        422,
        "Invalid",
        "ValidatingAdmissionPolicy 'nodescope-vpa-scope' with binding 'nodescope-vpa-scope' denied request: spec.scope must be absent, \"\", \"node\" or a node label key such as \"topology.kubernetes.io/zone\" (an optional DNS subdomain prefix of at most 253 characters and \"/\", then a name of at most 63 characters: alphanumerics, \"-\", \"_\" or \".\", starting and ending with an alphanumeric), not \"Topology/zone\"",
    );
}

#[tokio::test]
async fn label_key_scopes_for_the_daemonset_are_admitted() {
    let server = Server::start(&[]);
    let mut v = review("vpa-node-exporter-daemonset-node-scope-create");
    for scope in [
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "node.kubernetes.io/instance-type",
        "nvidia.com/gpu.present",
    ] {
        v["request"]["object"]["spec"]["scope"] = json!(scope);
        let response = validate(&server, &v).await;
        assert_eq!(response["allowed"], true, "{scope}: {response}");
    }
}

#[tokio::test]
async fn zone_scope_requires_a_daemonset_target_and_is_quoted() {
    let server = Server::start(&[]);
    let mut v = review("vpa-node-exporter-daemonset-node-scope-create");
    v["request"]["object"]["spec"]["scope"] = json!("topology.kubernetes.io/zone");
    v["request"]["object"]["spec"]["targetRef"]["kind"] = json!("StatefulSet");
    denied(
        &validate(&server, &v).await,
        422,
        "Invalid",
        "ValidatingAdmissionPolicy 'nodescope-vpa-scope' with binding 'nodescope-vpa-scope' denied request: spec.scope \"topology.kubernetes.io/zone\" requires spec.targetRef to be an apps/v1 DaemonSet, not kind \"StatefulSet\" (apiVersion \"apps/v1\")",
    );
}

#[tokio::test]
async fn node_scope_requires_a_daemonset_target() {
    let server = Server::start(&[]);
    let mut v = review("vpa-node-exporter-daemonset-node-scope-create");
    v["request"]["object"]["spec"]["targetRef"]["kind"] = json!("Deployment");
    denied(
        &validate(&server, &v).await,
        422,
        "Invalid",
        "ValidatingAdmissionPolicy 'nodescope-vpa-scope' with binding 'nodescope-vpa-scope' denied request: spec.scope \"node\" requires spec.targetRef to be an apps/v1 DaemonSet, not kind \"Deployment\" (apiVersion \"apps/v1\")",
    );
}

#[tokio::test]
async fn balloon_resize_is_reserved_to_the_listed_identities() {
    let server = Server::start(&[]);
    let mut v = review("pod-node-exporter-resize");
    for o in ["object", "oldObject"] {
        v["request"][o]["metadata"]["labels"]["node.kubernetes.io/balloon"] = json!("true");
    }
    denied(
        &validate(&server, &v).await,
        403,
        "Forbidden",
        "ValidatingAdmissionPolicy 'nodescope-balloon-resize' with binding 'nodescope-balloon-resize' denied request: resizing a balloon pod is reserved to the identities in ConfigMap kube-system/nodescope-balloon-resizers; \"e2e-admin\" is not one of them",
    );
    v["request"]["userInfo"]["username"] = json!("system:serviceaccount:kube-system:node-resizer");
    assert_eq!(validate(&server, &v).await["allowed"], true);
}

/// A store where `feature` has `state`, everything else as in examples/store.
fn store_with_feature_state(feature: &str, state: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/store");
    for entry in std::fs::read_dir(&examples).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
    }
    let features = std::fs::read_to_string(examples.join("features.yaml")).unwrap();
    let marker = format!("name: {feature}\n  namespace: kube-system\nspec:\n  desired: Enabled\nstatus:\n  state: \"On\"");
    assert!(features.contains(&marker));
    let replaced = features.replace(
        &marker,
        &marker.replace("state: \"On\"", &format!("state: \"{state}\"")),
    );
    std::fs::write(dir.path().join("features.yaml"), replaced).unwrap();
    dir
}

#[tokio::test]
async fn new_node_scoped_vpa_is_denied_while_its_feature_turns_off() {
    let store = store_with_feature_state("vpa-node-scope", "TurningOff");
    let server = Server::start(&[&format!("--store=file:{}", store.path().display())]);
    denied(
        &validate(&server, &review("vpa-node-exporter-daemonset-node-scope-create")).await,
        403,
        "Forbidden",
        "ValidatingAdmissionPolicy 'nodescope-feature-vpa-node-scope' with binding 'nodescope-feature-vpa-node-scope' denied request: feature \"vpa-node-scope\" is TurningOff: no new uses allowed (a VerticalPodAutoscaler with spec.scope \"node\")",
    );
    // An update of a VPA that already used the feature is clean-up, not a new use.
    assert_eq!(
        validate(&server, &review("vpa-node-exporter-update")).await["allowed"],
        true
    );
}

#[tokio::test]
async fn new_zone_scoped_vpa_is_denied_while_its_feature_turns_off_but_an_existing_one_may_be_updated(
) {
    let store = store_with_feature_state("vpa-node-scope", "TurningOff");
    let server = Server::start(&[&format!("--store=file:{}", store.path().display())]);
    let mut create = review("vpa-node-exporter-daemonset-node-scope-create");
    create["request"]["object"]["spec"]["scope"] = json!("topology.kubernetes.io/zone");
    denied(
        &validate(&server, &create).await,
        403,
        "Forbidden",
        "ValidatingAdmissionPolicy 'nodescope-feature-vpa-node-scope' with binding 'nodescope-feature-vpa-node-scope' denied request: feature \"vpa-node-scope\" is TurningOff: no new uses allowed (a VerticalPodAutoscaler with spec.scope \"topology.kubernetes.io/zone\")",
    );
    let mut update = review("vpa-node-exporter-update");
    for o in ["object", "oldObject"] {
        update["request"][o]["spec"]["scope"] = json!("topology.kubernetes.io/zone");
    }
    assert_eq!(validate(&server, &update).await["allowed"], true);
}

#[tokio::test]
async fn new_balloon_pod_is_denied_while_balloon_pods_are_off() {
    let store = store_with_feature_state("balloon-pods", "Off");
    let server = Server::start(&[&format!("--store=file:{}", store.path().display())]);
    let response = validate(&server, &review("pod-node-balloon-create")).await;
    assert_eq!(response["allowed"], false, "{response}");
    let message = response["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("ValidatingAdmissionPolicy 'nodescope-feature-balloon-pods' with binding 'nodescope-feature-balloon-pods' denied request: feature \"balloon-pods\" is Off"),
        "{message}"
    );
}

fn deep_array(depth: usize) -> Value {
    let mut deep = json!(1);
    for _ in 0..depth {
        deep = json!([deep]);
    }
    deep
}

#[tokio::test]
async fn deeply_nested_field_no_policy_reads_is_answered_without_harm() {
    let server = Server::start(&[]);
    let mut v = review("vpa-node-exporter-update");
    v["request"]["object"]["spec"]["extra"] = deep_array(300);
    let response = validate(&server, &v).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(
        validate(&server, &review("vpa-node-exporter-update")).await["allowed"],
        true
    );
}

#[tokio::test]
async fn deeply_nested_field_a_policy_reads_is_judged_like_any_bad_value() {
    let server = Server::start(&[]);
    let mut v = review("vpa-node-exporter-daemonset-node-scope-create");
    v["request"]["object"]["spec"]["scope"] = deep_array(300);
    // The messageExpression cannot render a 300-deep list, so the static
    // message is used, as the apiserver does when messageExpression fails.
    denied(
        &validate(&server, &v).await,
        422,
        "Invalid",
        "ValidatingAdmissionPolicy 'nodescope-vpa-scope' with binding 'nodescope-vpa-scope' denied request: spec.scope must be absent, \"\", \"node\" or a node label key such as \"topology.kubernetes.io/zone\" (an optional DNS subdomain prefix of at most 253 characters and \"/\", then a name of at most 63 characters: alphanumerics, \"-\", \"_\" or \".\", starting and ending with an alphanumeric)",
    );
}

#[test]
fn server_refuses_to_start_on_a_policy_that_does_not_compile() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bad.yaml"),
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata:\n  name: broken\nspec:\n  matchConstraints:\n    resourceRules:\n    - apiGroups: [\"\"]\n      apiVersions: [v1]\n      operations: [CREATE]\n      resources: [pods]\n  validations:\n  - expression: object.spec.frobnicate(1) == 2\n",
    )
    .unwrap();
    let certs = tempfile::tempdir().unwrap();
    make_certs(certs.path());
    let out = std::process::Command::new(BIN)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--store=file:examples/store",
        ])
        .arg(format!("--policies={}", dir.path().display()))
        .arg("--tls-cert")
        .arg(certs.path().join("tls.crt"))
        .arg("--tls-key")
        .arg(certs.path().join("tls.key"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.yaml"), "{stderr}");
    assert!(
        stderr.contains("ValidatingAdmissionPolicy 'broken'"),
        "{stderr}"
    );
    assert!(
        stderr.contains("spec.validations[0].expression"),
        "{stderr}"
    );
    assert!(stderr.contains("frobnicate"), "{stderr}");
}

#[tokio::test]
async fn policy_changes_are_reloaded_and_a_broken_bundle_keeps_the_last_good_one() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    for entry in std::fs::read_dir(&bundle).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    let server = Server::start(&[
        &format!("--policies={}", dir.path().display()),
        "--reload-interval",
        "1",
    ]);
    let mut steal = review("pod-node-exporter-node-a-1-create");
    steal["request"]["object"]["spec"]["priorityClassName"] = json!("node-balloon");
    assert_eq!(validate(&server, &steal).await["allowed"], false);

    // A policy that does not compile: the previous bundle stays in force.
    let balloon = dir.path().join("balloon-pods.yaml");
    let good = std::fs::read_to_string(&balloon).unwrap();
    std::fs::write(
        &balloon,
        good.replacen("expression:", "expression: frobnicate() ||", 1),
    )
    .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    assert_eq!(validate(&server, &steal).await["allowed"], false);
    let logs = server.logs().join("\n");
    assert!(
        logs.contains("policy reload failed; keeping the previous bundle"),
        "{logs}"
    );

    // A valid change to a rule: served without a restart. (A bundle that
    // drops the rule is refused instead: tests/fail_closed.rs.)
    std::fs::write(
        &balloon,
        good.replace("is reserved for pods labelled", "is kept for pods labelled"),
    )
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let response = validate(&server, &steal).await;
        assert_eq!(response["allowed"], false, "{response}");
        let message = response["status"]["message"].as_str().unwrap_or_default();
        if message.contains("is kept for pods labelled") {
            break;
        }
        assert!(
            message.contains("is reserved for pods labelled"),
            "neither the old rule nor the new: {message}"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "reloaded bundle never served"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

const PORTABLE_WARNING: &str = "Validation failed for ValidatingAdmissionPolicy 'nodescope-vpa-scope-portable' \
     with binding 'nodescope-vpa-scope-portable': spec.scope \"node\" means the node's name to nodescope \
     (KEP-4943), but upstream VPA's DaemonSetScope reads it as a node label key \"node\", which nodes \
     rarely carry, so there every pod would share one \"__absent__\" group; spec.scope \
     \"kubernetes.io/hostname\" gives one group per node in both";

#[tokio::test]
async fn scope_node_is_admitted_with_a_warning_that_upstream_reads_it_as_a_label_key() {
    let server = Server::start(&[]);
    let create = review("vpa-node-exporter-daemonset-node-scope-create");
    let response = validate(&server, &create).await;
    assert_eq!(
        response,
        json!({"uid": create["request"]["uid"], "allowed": true, "warnings": [PORTABLE_WARNING]})
    );
    let mut update = review("vpa-node-exporter-update");
    update["request"]["object"]["spec"]["scope"] = json!("node");
    let response = validate(&server, &update).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(
        response["warnings"],
        json!([PORTABLE_WARNING]),
        "{response}"
    );
    // kubernetes.io/hostname means the same to upstream: no warning.
    let mut hostname = create.clone();
    hostname["request"]["object"]["spec"]["scope"] = json!("kubernetes.io/hostname");
    let response = validate(&server, &hostname).await;
    assert_eq!(
        response,
        json!({"uid": create["request"]["uid"], "allowed": true})
    );
}
