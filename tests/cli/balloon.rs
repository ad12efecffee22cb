//! `nodescope balloon status`, offline on examples/balloon: the exact table
//! and JSON, and a store that is not a file or `kube`.

use super::{assert_exit, golden, nodescope, stdout};
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
