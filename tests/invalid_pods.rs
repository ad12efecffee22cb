//! Issue #42: a pod the apiserver's own validation refuses (no `spec`, a
//! negative request) is refused by /mutate, /validate and `dry-run` in the
//! apiserver's words (422 Invalid), never allowed or sized.

mod common;

use common::*;
use serde_json::{json, Value};

const NO_SPEC: &str = "spec.containers: Required value";
const NEGATIVE: &str = "spec.containers[0].resources.requests[cpu]: Invalid value: \"-5\": \
                        must be greater than or equal to 0";

fn review(name: &str) -> Value {
    serde_json::from_slice(&fixture(name)).unwrap()
}

fn without_spec(mut v: Value) -> Value {
    v["request"]["object"]
        .as_object_mut()
        .unwrap()
        .remove("spec");
    v
}

fn negative_cpu(mut v: Value) -> Value {
    v["request"]["object"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("-5");
    v
}

async fn answer(server: &Server, path: &str, v: &Value) -> Value {
    let mut client = H1::connect(server.addr, &server.ca()).await;
    let reply = client.post(path, serde_json::to_vec(v).unwrap()).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.json()["response"].clone()
}

fn assert_invalid(response: &Value, uid: &Value, message: &str) {
    assert_eq!(
        *response,
        json!({
            "uid": uid,
            "allowed": false,
            "status": {"status": "Failure", "code": 422, "reason": "Invalid", "message": message}
        })
    );
}

#[tokio::test]
async fn a_pod_without_spec_or_with_a_negative_request_is_refused_by_both_webhooks() {
    let server = Server::start(&[]);
    let mutate = review("pod-node-exporter-node-a-1-create.mutate.json");
    let uid = mutate["request"]["uid"].clone();
    assert_invalid(
        &answer(&server, "/mutate", &without_spec(mutate.clone())).await,
        &uid,
        &format!("Pod \"node-exporter-\" is invalid: {NO_SPEC}"),
    );
    // Not patched: refused.
    assert_invalid(
        &answer(&server, "/mutate", &negative_cpu(mutate)).await,
        &uid,
        &format!("Pod \"node-exporter-\" is invalid: {NEGATIVE}"),
    );
    let validate = review("pod-node-exporter-node-a-1-create.validate.json");
    let uid = validate["request"]["uid"].clone();
    assert_invalid(
        &answer(&server, "/validate", &without_spec(validate.clone())).await,
        &uid,
        &format!("Pod \"node-exporter-8qrss\" is invalid: {NO_SPEC}"),
    );
    assert_invalid(
        &answer(&server, "/validate", &negative_cpu(validate)).await,
        &uid,
        &format!("Pod \"node-exporter-8qrss\" is invalid: {NEGATIVE}"),
    );
}

#[test]
fn dry_run_refuses_a_pod_without_spec_and_one_with_a_negative_request() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pods.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: nospec, namespace: default}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: negative, namespace: default}\n\
         spec:\n  containers:\n  - name: c\n    image: registry.k8s.io/pause:3.10\n    \
         resources: {requests: {cpu: \"-5\"}}\n",
    )
    .unwrap();
    let output = run_in(dir.path(), &["dry-run", "-f", "pods.yaml", "-o", "json"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let statuses: Vec<(Value, Value, Value)> = report["objects"]
        .as_array()
        .unwrap_or_else(|| panic!("{report}"))
        .iter()
        .map(|o| {
            (
                o["object"].clone(),
                o["allowed"].clone(),
                o["status"].clone(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            (
                json!("Pod/default/nospec"),
                json!(false),
                json!({"code": 422, "reason": "Invalid",
                       "message": format!("Pod \"nospec\" is invalid: {NO_SPEC}")})
            ),
            (
                json!("Pod/default/negative"),
                json!(false),
                json!({"code": 422, "reason": "Invalid",
                       "message": format!("Pod \"negative\" is invalid: {NEGATIVE}")})
            ),
        ]
    );
}

#[test]
fn dry_runs_table_says_the_apiserver_refused_it_rather_than_that_no_policy_matched() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("pod.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: nospec, namespace: default}\n",
    )
    .unwrap();
    let output = run_in(dir.path(), &["dry-run", "-f", "pod.yaml"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "OBJECT              SOURCE      POLICY  BINDING  RESULT  MESSAGE\n\
         Pod/default/nospec  pod.yaml#1  -       -        deny    Pod \"nospec\" is invalid: \
         spec.containers: Required value\n  \
         denied (422 Invalid): Pod \"nospec\" is invalid: spec.containers: Required value\n\
         1 objects: 0 allowed, 1 denied, 0 warnings, 0 errors\n"
    );
}
