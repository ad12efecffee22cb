//! `POST /mutate` end to end: the real server over TLS with `--store file:`,
//! the captured DaemonSet pod review, and the returned patch applied with
//! `json-patch` to the object the apiserver sent.

mod common;

use base64::Engine;
use common::*;
use serde_json::{json, Value};

const POD_REVIEW: &str = "pod-node-exporter-node-a-1-create.mutate.json";

/// The review with the pod pinned to `node` instead of node-a-1.
fn review_for_node(node: &str) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(&fixture(POD_REVIEW)).unwrap();
    let terms = &mut v["request"]["object"]["spec"]["affinity"]["nodeAffinity"]
        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
    terms[0]["matchFields"][0]["values"] = json!([node]);
    serde_json::to_vec(&v).unwrap()
}

struct Mutated {
    response: Value,
    pod: Value,
}

/// Posts `body`, applies the patch (if any) to `request.object`.
async fn mutate(server: &Server, body: Vec<u8>) -> Mutated {
    let sent: Value = serde_json::from_slice(&body).unwrap();
    let mut client = H1::connect(server.addr, &server.ca()).await;
    let reply = client.post("/mutate?timeout=2s", body).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let response = reply.json()["response"].clone();
    assert_eq!(response["uid"], sent["request"]["uid"]);
    assert_eq!(response["allowed"], true);
    let mut pod = sent["request"]["object"].clone();
    if let Some(patch) = response["patch"].as_str() {
        assert_eq!(response["patchType"], "JSONPatch");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
        json_patch::patch(&mut pod, &patch).unwrap();
    }
    Mutated { response, pod }
}

fn resources(pod: &Value, container: usize) -> &Value {
    &pod["spec"]["containers"][container]["resources"]
}

#[tokio::test]
async fn daemonset_pod_gets_the_recommendation_of_its_own_node() {
    let server = Server::start(&[]);
    let out = mutate(&server, fixture(POD_REVIEW)).await;
    assert!(out.response.get("warnings").is_none(), "{}", out.response);
    // node-exporter: request 102m/180Mi, limit 250m/180Mi; node-a-1 target 150m/256Mi.
    assert_eq!(
        resources(&out.pod, 0)["requests"],
        json!({"cpu": "150m", "memory": "256Mi"})
    );
    // cpu limit keeps the 250/102 ratio, floored in millicores; memory limit == request stays equal.
    assert_eq!(
        resources(&out.pod, 0)["limits"],
        json!({"cpu": "367m", "memory": "256Mi"})
    );
    // kube-rbac-proxy is RequestsOnly: requests 15m/30Mi, limits untouched at 20m/40Mi.
    assert_eq!(
        resources(&out.pod, 1)["requests"],
        json!({"cpu": "15m", "memory": "30Mi"})
    );
    assert_eq!(
        resources(&out.pod, 1)["limits"],
        json!({"cpu": "20m", "memory": "40Mi"})
    );
    let annotations = &out.pod["metadata"]["annotations"];
    assert_eq!(
        annotations["vpaObservedContainers"],
        "node-exporter, kube-rbac-proxy"
    );
    assert_eq!(
        annotations["vpaUpdates"],
        "Pod resources updated by node-exporter: container 0: cpu request, memory request, cpu limit, memory limit; container 1: cpu request, memory request"
    );
    // Existing annotations are kept.
    assert_eq!(
        annotations["kubectl.kubernetes.io/default-container"],
        "node-exporter"
    );
}

#[tokio::test]
async fn each_node_gets_a_different_recommendation() {
    let server = Server::start(&[]);
    let small = mutate(&server, review_for_node("node-a-2")).await;
    assert_eq!(
        resources(&small.pod, 0)["requests"],
        json!({"cpu": "80m", "memory": "128Mi"})
    );
    // node-b-1 recommends 2 cpu / 2Gi; maxAllowed caps to 1 cpu / 1Gi.
    let big = mutate(&server, review_for_node("node-b-1")).await;
    assert_eq!(
        resources(&big.pod, 0)["requests"],
        json!({"cpu": "1", "memory": "1Gi"})
    );
    let updates = big.pod["metadata"]["annotations"]["vpaUpdates"]
        .as_str()
        .unwrap();
    assert!(updates.contains("cpu capped to maxAllowed"), "{updates}");
    assert!(updates.contains("memory capped to maxAllowed"), "{updates}");
}

#[tokio::test]
async fn with_the_strict_option_a_node_without_a_group_gets_no_resource_change_and_a_warning() {
    let server = Server::start(&["--missing-node-recommendation", "none"]);
    let sent: Value = serde_json::from_slice(&review_for_node("node-z-9")).unwrap();
    let out = mutate(&server, review_for_node("node-z-9")).await;
    assert_eq!(out.pod["spec"], sent["request"]["object"]["spec"]);
    assert_eq!(
        out.response["warnings"],
        json!(["no recommendation for node \"node-z-9\" in VerticalPodAutoscaler monitoring/node-exporter; resources left unchanged"])
    );
    assert_eq!(
        out.pod["metadata"]["annotations"]["vpaObservedContainers"],
        "node-exporter, kube-rbac-proxy"
    );
}

#[tokio::test]
async fn by_default_a_node_without_a_group_falls_back_to_the_aggregate_recommendation() {
    let server = Server::start(&[]);
    let out = mutate(&server, review_for_node("node-z-9")).await;
    assert_eq!(
        resources(&out.pod, 0)["requests"],
        json!({"cpu": "120m", "memory": "200Mi"})
    );
    assert_eq!(
        out.response["warnings"],
        json!(["no recommendation for node \"node-z-9\" in VerticalPodAutoscaler monitoring/node-exporter; using the VerticalPodAutoscaler-wide recommendation"])
    );
}

#[tokio::test]
async fn balloon_pod_gets_no_patch() {
    let server = Server::start(&[]);
    let out = mutate(&server, fixture("pod-node-balloon-create.mutate.json")).await;
    assert!(out.response.get("patch").is_none(), "{}", out.response);
}

#[tokio::test]
async fn balloon_labelled_pod_of_a_vpa_daemonset_gets_no_patch() {
    let server = Server::start(&[]);
    let mut v: Value = serde_json::from_slice(&fixture(POD_REVIEW)).unwrap();
    v["request"]["object"]["metadata"]["labels"]["node.kubernetes.io/balloon"] = json!("true");
    let out = mutate(&server, serde_json::to_vec(&v).unwrap()).await;
    assert!(out.response.get("patch").is_none(), "{}", out.response);
}

#[tokio::test]
async fn update_mode_off_vpa_gives_no_patch() {
    let store = tempfile::tempdir().unwrap();
    let vpa = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/store/node-exporter-vpa.yaml"
    ))
    .unwrap();
    std::fs::write(
        store.path().join("vpa.yaml"),
        vpa.replace("updateMode: Initial", "updateMode: \"Off\""),
    )
    .unwrap();
    let arg = format!("--store=file:{}", store.path().display());
    let server = Server::start(&[&arg]);
    let out = mutate(&server, fixture(POD_REVIEW)).await;
    assert!(out.response.get("patch").is_none(), "{}", out.response);
}

#[tokio::test]
async fn applying_the_mutation_to_its_own_output_changes_nothing() {
    let server = Server::start(&[]);
    let first = mutate(&server, fixture(POD_REVIEW)).await;
    let mut again: Value = serde_json::from_slice(&fixture(POD_REVIEW)).unwrap();
    again["request"]["object"] = first.pod.clone();
    let second = mutate(&server, serde_json::to_vec(&again).unwrap()).await;
    assert_eq!(second.pod, first.pod);
    assert!(
        second.response.get("patch").is_none(),
        "reinvocation produced a patch: {}",
        second.response
    );
}

#[tokio::test]
async fn dry_run_request_is_answered_the_same_way() {
    let server = Server::start(&[]);
    let mut v: Value = serde_json::from_slice(&fixture(POD_REVIEW)).unwrap();
    v["request"]["dryRun"] = json!(true);
    let dry = mutate(&server, serde_json::to_vec(&v).unwrap()).await;
    let real = mutate(&server, fixture(POD_REVIEW)).await;
    assert_eq!(dry.pod, real.pod);
}

#[tokio::test]
async fn unreadable_pod_is_allowed_unchanged_with_a_warning() {
    let server = Server::start(&[]);
    let mut v: Value = serde_json::from_slice(&fixture(POD_REVIEW)).unwrap();
    v["request"]["object"]["spec"]["containers"] = json!("not a list");
    let out = mutate(&server, serde_json::to_vec(&v).unwrap()).await;
    assert!(out.response.get("patch").is_none());
    let warning = out.response["warnings"][0].as_str().unwrap();
    assert!(
        warning.starts_with("nodescope: cannot read Pod/monitoring/<generated>: "),
        "{warning}"
    );
}

#[tokio::test]
async fn file_store_change_is_served_without_restart_and_bad_file_keeps_last_snapshot() {
    let store = tempfile::tempdir().unwrap();
    let vpa_path = store.path().join("vpa.yaml");
    let vpa = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/store/node-exporter-vpa.yaml"
    ))
    .unwrap();
    std::fs::write(&vpa_path, &vpa).unwrap();
    let arg = format!("--store=file:{}", store.path().display());
    let server = Server::start(&[&arg, "--reload-interval", "1"]);
    let out = mutate(&server, fixture(POD_REVIEW)).await;
    assert_eq!(resources(&out.pod, 0)["requests"]["cpu"], "150m");

    // A broken file: the previous snapshot keeps serving.
    std::fs::write(&vpa_path, "kind: [unclosed\n").unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let out = mutate(&server, fixture(POD_REVIEW)).await;
    assert_eq!(resources(&out.pod, 0)["requests"]["cpu"], "150m");
    let logs = server.logs().join("\n");
    assert!(
        logs.contains("store reload failed; keeping the previous snapshot"),
        "{logs}"
    );
    assert!(logs.contains("vpa.yaml"), "{logs}");

    // A fixed file with new data is served.
    std::fs::write(
        &vpa_path,
        vpa.replace(
            "target: {cpu: 150m, memory: 256Mi}",
            "target: {cpu: 175m, memory: 256Mi}",
        ),
    )
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let out = mutate(&server, fixture(POD_REVIEW)).await;
        if resources(&out.pod, 0)["requests"]["cpu"] == "175m" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "new store data never served"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
