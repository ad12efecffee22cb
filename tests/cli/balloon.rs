//! `nodescope balloon status`, offline on examples/balloon: the exact table
//! and JSON, the exit status of `--exit-code`; and `balloon set`, which
//! checks a size against the Node before it writes anything.

use super::fake_api::FakeApi;
use super::{assert_exit, command, golden, nodescope, stderr, stdout};
use serde_json::{json, Value};

const STORE: &str = "--store=file:examples/balloon";

#[test]
fn balloon_status_shows_every_node_with_a_balloon_in_a_golden_table() {
    let output = nodescope(&["balloon", "status", STORE]);
    assert_exit(&output, 0);
    golden("balloon-status.table.txt", &stdout(&output));
}

#[test]
fn balloon_status_json_has_the_usable_capacity_and_why_in_a_golden_file() {
    let output = nodescope(&["balloon", "status", STORE, "-o", "json"]);
    assert_exit(&output, 0);
    golden("balloon-status.json", &stdout(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).expect("json");
    let items = report["items"].as_array().expect("items");
    // The golden file holds the key order; here, the keys themselves.
    let mut keys: Vec<&str> = items[0]
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "allocatable",
            "balloon",
            "free",
            "node",
            "reason",
            "requested",
            "state",
            "usable"
        ]
    );
    assert_eq!(items[0]["usable"], json!({"cpu": "6", "memory": "24Gi"}));
    assert_eq!(items[1]["state"], "Refused");
    assert_eq!(
        items[1]["reason"],
        "upsizing the balloon to cpu 5, memory 8Gi leaves cpu 3, memory 24Gi usable, \
         but the node's other pods request cpu 3500m, memory 6Gi: default/batch-b does not fit"
    );
    assert_eq!(items[2]["state"], "Resize");
}

#[test]
fn balloon_status_yaml_is_the_same_document() {
    let output = nodescope(&["balloon", "status", STORE, "-o", "yaml"]);
    assert_exit(&output, 0);
    let yaml: Value = serde_saphyr::from_str(&stdout(&output)).expect("yaml");
    let json = nodescope(&["balloon", "status", STORE, "-o", "json"]);
    let json: Value = serde_json::from_str(&stdout(&json)).expect("json");
    assert_eq!(yaml, json);
}

fn node(name: &str, annotations: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "resourceVersion": "5", "annotations": annotations},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi"}}})
}

fn balloon_pod(node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("balloon-{node}"), "namespace": "kube-system", "uid": node,
            "labels": {"node.kubernetes.io/balloon": "true"}},
        "spec": {"nodeName": node, "containers": [{"name": "balloon",
            "resources": {"requests": {"cpu": "2", "memory": "8Gi"}}}]},
        "status": {"phase": "Running"}})
}

/// A store directory of `objects`, and its `--store` flag.
fn store(objects: &[Value]) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    for (i, object) in objects.iter().enumerate() {
        std::fs::write(dir.path().join(format!("{i}.json")), object.to_string()).expect("write");
    }
    let flag = format!("--store=file:{}", dir.path().display());
    (dir, flag)
}

#[test]
fn balloon_set_refuses_a_size_above_the_nodes_allocatable_before_writing_anything() {
    let api = FakeApi::serving(node("node-a", json!({})));
    let set = |size: &str| {
        command(&["balloon", "set", "node-a", "--usable-cpu", size])
            .env("KUBECONFIG", &api.kubeconfig)
            .output()
            .expect("the binary runs")
    };
    let output = set("64");
    assert_exit(&output, 2);
    assert_eq!(
        stderr(&output),
        "nodescope: balloon: Node node-a: usable cpu 64 is more than the node's allocatable \
         cpu 8; nothing was written\n"
    );
    assert_eq!(stdout(&output), "");
    assert_eq!(api.requests(), ["GET /api/v1/nodes/node-a"]);
    // The same server takes a size that fits: the refusal was the size's.
    let output = set("6");
    assert_exit(&output, 0);
    assert_eq!(stdout(&output), "node/node-a usable size set\n");
    assert_eq!(
        api.requests(),
        [
            "GET /api/v1/nodes/node-a",
            "GET /api/v1/nodes/node-a",
            "PATCH /api/v1/nodes/node-a"
        ]
    );
}

#[test]
fn balloon_set_refuses_a_negative_zero_or_overflowing_size_before_connecting() {
    for (flag, value, why) in [
        ("--usable-cpu", "-1", "usable cpu -1 is negative"),
        (
            "--usable-cpu",
            "0",
            "usable cpu 0 leaves workloads nothing: a usable size is above 0",
        ),
        (
            "--usable-memory",
            "-1Gi",
            "usable memory -1Gi is negative",
        ),
        (
            "--usable-cpu",
            "99999999999999999999999",
            "usable cpu 99999999999999999999999 is too large: at most 9223372036854775807m can be held",
        ),
        (
            "--usable-fraction",
            "0",
            "\"0\" is not in (0, 1]: a usable fraction is above 0 and at most 1",
        ),
    ] {
        let output = command(&["balloon", "set", "node-a", flag, value])
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .output()
            .expect("the binary runs");
        assert_exit(&output, 2);
        let name = flag.trim_start_matches("--").replace('-', "_").to_uppercase();
        assert_eq!(
            stderr(&output),
            format!(
                "error: invalid value '{value}' for '{flag} <{name}>': {why}\n\n\
                 For more information, try '--help'.\n"
            )
        );
    }
}

#[test]
fn balloon_status_calls_a_size_above_allocatable_invalid_says_why_and_exit_code_tells_it() {
    let (_dir, flag) = store(&[
        node("node-a", json!({"nodescope.dev/usable-cpu": "64"})),
        balloon_pod("node-a"),
    ]);
    let output = nodescope(&["balloon", "status", &flag]);
    assert_exit(&output, 0);
    assert_eq!(
        stdout(&output),
        "NODE     ALLOCATABLE   BALLOON   USABLE   REQUESTED   FREE     STATE     REASON\n\
         node-a   8/32Gi        2/8Gi     6/24Gi   0/0         6/24Gi   Invalid   \
         annotation nodescope.dev/usable-cpu: usable cpu 64 is more than the node's allocatable cpu 8\n"
    );
    let output = nodescope(&["balloon", "status", &flag, "--exit-code"]);
    assert_exit(&output, 1);
    // A node Refused (examples/balloon's node-b) needs the operator too.
    let output = nodescope(&["balloon", "status", STORE, "--exit-code"]);
    assert_exit(&output, 1);
    let (_dir, flag) = store(&[
        node(
            "node-z",
            json!({"nodescope.dev/usable-cpu": "6", "nodescope.dev/usable-memory": "24Gi"}),
        ),
        balloon_pod("node-z"),
    ]);
    let output = nodescope(&["balloon", "status", &flag, "--exit-code"]);
    assert_exit(&output, 0);
    assert!(stdout(&output).contains(" Settled "), "{}", stdout(&output));
}

#[test]
fn a_default_fraction_in_exponent_form_is_refused_with_a_true_message() {
    let output = nodescope(&[
        "balloon",
        "status",
        STORE,
        "--default-usable-fraction",
        "1e-9",
    ]);
    assert_exit(&output, 2);
    assert_eq!(
        stderr(&output),
        "error: invalid value '1e-9' for '--default-usable-fraction <DEFAULT_USABLE_FRACTION>': \
         \"1e-9\" is not a fraction written as a plain decimal with at most nine decimals in \
         (0, 1], such as 0.25\n\nFor more information, try '--help'.\n"
    );
}

#[test]
fn balloon_set_wait_that_times_out_exits_4_not_1_and_says_what_it_last_saw() {
    let api = FakeApi::serving_objects(vec![node("node-a", json!({})), balloon_pod("node-a")]);
    let output = command(&[
        "balloon",
        "set",
        "node-a",
        "--usable-cpu",
        "4",
        "--wait",
        "--timeout",
        "1s",
    ])
    .env("KUBECONFIG", &api.kubeconfig)
    .output()
    .expect("the binary runs");
    // Nothing resizes the balloon here: the wait ends by the clock, which
    // is not a refusal (exit 1).
    assert_exit(&output, 4);
    assert_eq!(stdout(&output), "node/node-a usable size set\n");
    assert_eq!(
        stderr(&output),
        "nodescope: balloon set: timed out after 1s waiting for node/node-a to settle; last \
         seen Resize: upsize the balloon from cpu 2, memory 8Gi to cpu 4, memory 8Gi\n"
    );
}
