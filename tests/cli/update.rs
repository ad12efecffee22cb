//! `nodescope update --plan` offline: the plan on `examples/update` in
//! every format, and the exit codes of bad input.

use super::{golden, nodescope, root};

#[test]
fn the_plan_on_the_example() {
    for (format, name) in [
        ("table", "update-plan.txt"),
        ("json", "update-plan.json"),
        ("yaml", "update-plan.yaml"),
    ] {
        let out = nodescope(&[
            "update",
            "--plan",
            "--store",
            "file:examples/update",
            "-o",
            format,
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        golden(name, &String::from_utf8_lossy(&out.stdout));
    }
    // The JSON has the promised shape: desired only where something changes.
    let out = nodescope(&[
        "update",
        "--plan",
        "--store",
        "file:examples/update",
        "-o",
        "json",
    ]);
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let items = plan["items"].as_array().expect("items");
    assert_eq!(items.len(), 4);
    for item in items {
        let changes = item["action"] != "none";
        assert_eq!(
            item["containers"][0].get("desired").is_some(),
            changes,
            "{item}"
        );
    }
}

#[test]
fn bad_input_exits_2_and_names_the_object() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("pod.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\nspec: {containers: [{name: c, resources: {requests: [1]}}]}\n",
    )
    .expect("write");
    let store = format!("file:{}", dir.path().display());
    let out = nodescope(&["update", "--plan", "--store", &store]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "nodescope: update: Pod ns/p: spec.containers[0].resources.requests: invalid type: array, expected an object\n"
    );
    let out = nodescope(&["update", "--store", "file:examples/update"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "nodescope: update: offline (--store file:), only --plan runs: a pass needs a cluster to act on\n"
    );
    let _ = root();
}
