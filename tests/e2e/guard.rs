//! `components/upstream-updater-guard` enforced natively by the real
//! apiserver: with the guard installed, a resize by the identity named as
//! upstream's updater is refused on a pod with nodescope's mark and taken
//! on one without, and its evictions are refused in a listed namespace
//! only. Anyone else resizes and evicts as before. The messages are the
//! ones nodescope's own engine gives (tests/upstream_updater_guard.rs), so
//! the engine and the apiserver agree word for word.
//!
//! The guard reads its ConfigMap as a param, and kube-apiserver
//! (kubernetes/kubernetes#130887, v1.36.2 included) stops following
//! ConfigMap params for good, per process, once no binding names that
//! kind for one refresh: a guard bound after that finds no params and,
//! failing open by design, refuses nothing. So this step runs before any
//! other binds and unbinds a ConfigMap param (the `enforcers` step does),
//! and leaves behind a binding of that kind that matches nothing, which
//! keeps the apiserver following ConfigMaps for the rest of the suite.

use crate::support::admission::Clients;
use crate::support::{cluster, eventually, state, ControlPlane};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, EvictParams, Patch, PatchParams};
use kube::Client;
use nodescope::apiserver::review::User;
use serde_json::{json, Value};
use std::time::Duration;

const GUARD: &str = "manifests/components/upstream-updater-guard/guard.yaml";
const POLICY: &str = "nodescope-upstream-updater-guard";
const UPSTREAM: &str = "system:serviceaccount:kube-system:vpa-updater";
const SHIELDED: &str = "e2e-guard";
const FREE: &str = "e2e-guard-free";
const KEEPER: &str = "e2e-keep-configmap-params";

/// A policy and binding with a ConfigMap param that match nothing, left
/// in place (see the module's doc).
fn keeper() -> [Value; 2] {
    [
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": KEEPER},
            "spec": {"failurePolicy": "Ignore", "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["configmaps"]}]},
                "matchConditions": [{"name": "never", "expression": "false"}],
                "validations": [{"expression": "true"}]},
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": KEEPER},
            "spec": {"policyName": KEEPER, "validationActions": ["Deny"],
                "paramRef": {"name": KEEPER, "namespace": "default", "parameterNotFoundAction": "Allow"}},
        }),
    ]
}

fn user(username: &str) -> User {
    User {
        username: username.to_owned(),
        groups: vec!["system:serviceaccounts".to_owned()],
    }
}

fn pod(namespace: &str, name: &str, marked: bool) -> Value {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [{"name": "agent", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                          "limits": {"cpu": "200m", "memory": "128Mi"}}}]},
    });
    if marked {
        pod["metadata"]["annotations"] = json!({"nodescope.dev/original-resources":
            r#"{"agent":{"requests":{"cpu":"50m","memory":"32Mi"}}}"#});
    }
    pod
}

/// `pods/resize` of `namespace/name` as `client`: `Err("<code> <message>")`
/// when refused.
async fn resize(client: &Client, namespace: &str, name: &str, cpu: &str) -> Result<(), String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let patch = json!({"spec": {"containers": [{"name": "agent",
        "resources": {"requests": {"cpu": cpu}}}]}});
    pods.patch_subresource(
        "resize",
        name,
        &PatchParams::default(),
        &Patch::Strategic(&patch),
    )
    .await
    .map(|_| ())
    .map_err(refusal)
}

/// An eviction of `namespace/name` as `client`.
async fn evict(client: &Client, namespace: &str, name: &str) -> Result<(), String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    pods.evict(name, &EvictParams::default())
        .await
        .map(|_| ())
        .map_err(refusal)
}

fn refusal(error: kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("{} {}", status.code, status.message),
        other => other.to_string(),
    }
}

/// The apiserver's refusal of a request on pod `name`: its Forbidden
/// prefix, then the policy's message as nodescope's engine words it.
fn denied(name: &str, message: &str) -> String {
    format!("403 pods \"{name}\" is forbidden: ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: {message}")
}

pub async fn run(plane: &ControlPlane) {
    let admin = plane.client().await;
    for namespace in ["nodescope-system", SHIELDED, FREE] {
        cluster::apply(
            &admin,
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        )
        .await;
    }
    let mut clients = Clients::new(plane).await;
    let upstream_user = user(UPSTREAM);
    let other_user = user("system:serviceaccount:e2e-guard:resizer");
    let authorized =
        state::authorize(&mut clients, &[upstream_user.clone(), other_user.clone()]).await;
    let upstream = clients.as_user(&upstream_user);
    let other = clients.as_user(&other_user);

    for object in keeper() {
        cluster::apply(&admin, &object).await;
    }
    let mut guard = cluster::documents(GUARD);
    for object in &mut guard {
        if object["kind"] == "ConfigMap" {
            object["data"]["evictionNamespaces"] = json!(format!("{SHIELDED}\n"));
        }
        cluster::apply(&admin, object).await;
    }
    for (namespace, name, marked) in [
        (SHIELDED, "marked", true),
        (SHIELDED, "unmarked", false),
        (SHIELDED, "evicted-by-admin", true),
        (FREE, "unshielded", false),
    ] {
        cluster::apply(&admin, &pod(namespace, name, marked)).await;
    }

    let refused = eventually(
        "the guard refuses upstream's resize of the marked pod",
        Duration::from_secs(30),
        || {
            let upstream = upstream.clone();
            async move { resize(&upstream, SHIELDED, "marked", "150m").await.err() }
        },
    )
    .await;
    assert_eq!(
        refused,
        denied(
            "marked",
            &format!(
            "nodescope sizes this pod per node (annotation nodescope.dev/original-resources); \
             upstream VPA's updater ({UPSTREAM}) would overwrite it with the DaemonSet-wide recommendation. \
             Run upstream's updater with --ignored-vpa-object-namespaces={SHIELDED}; \
             see docs/operations.md#running-beside-upstream-vpa"
            )
        )
    );
    println!("  upstream's resize of a marked pod: refused");
    assert_eq!(
        resize(&upstream, SHIELDED, "unmarked", "150m").await,
        Ok(())
    );
    println!("  upstream's resize of an unmarked pod: taken");
    assert_eq!(resize(&other, SHIELDED, "marked", "150m").await, Ok(()));
    println!("  another identity's resize of the marked pod: taken");

    assert_eq!(
        evict(&upstream, SHIELDED, "unmarked").await,
        Err(denied(
            "unmarked",
            &format!(
            "nodescope sizes the DaemonSet pods of namespace {SHIELDED} per node, and an eviction \
             does not show which pod carries its mark, so evictions by upstream VPA's updater ({UPSTREAM}) \
             are refused here (ConfigMap nodescope-system/nodescope-upstream-updater-guard, key evictionNamespaces): \
             the pod would come back and be evicted again, towards the DaemonSet-wide recommendation. \
             Run upstream's updater with --ignored-vpa-object-namespaces={SHIELDED}; \
             see docs/operations.md#running-beside-upstream-vpa"
            )
        ))
    );
    println!("  upstream's eviction in a listed namespace: refused");
    assert_eq!(evict(&upstream, FREE, "unshielded").await, Ok(()));
    println!("  upstream's eviction elsewhere: taken");
    assert_eq!(evict(&admin, SHIELDED, "evicted-by-admin").await, Ok(()));
    println!("  an eviction by anyone else in the listed namespace (a drain): taken");

    for object in guard.iter().rev() {
        cluster::delete(&admin, object).await;
    }
    for name in ["marked", "unmarked"] {
        cluster::delete(&admin, &pod(SHIELDED, name, false)).await;
    }
    cluster::delete(&admin, &authorized).await;
}
