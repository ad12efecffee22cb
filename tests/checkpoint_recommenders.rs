//! Issue #42: checkpoints belong to their recommender. Two recommenders
//! (`--recommender-name`) sharing one `--checkpoints file:DIR` each read,
//! replace and remove only their own files; a file whose VPA is gone is
//! removed by the recommender that wrote it, and by no other; a file an
//! older nodescope wrote without a recommender's name is the default
//! recommender's to read and replace, and nobody's to delete.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const DEFAULT_FILE: &str = "monitoring.agent-0-of-1.json";
const FRUGAL_FILE: &str = "monitoring.collector-0-of-1_frugal.json";

fn write(path: &Path, value: &Value) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
    std::fs::write(path, value.to_string()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn vpa(name: &str, recommender: Option<&str>) -> Value {
    let mut vpa = json!({"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name, "namespace": "monitoring"},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name},
                 "scope": "kubernetes.io/hostname"}});
    if let Some(r) = recommender {
        vpa["spec"]["recommenders"] = json!([{"name": r}]);
    }
    vpa
}

fn pod(daemonset: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{daemonset}-n1"), "namespace": "monitoring",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                          "name": daemonset, "controller": true, "uid": daemonset}]},
        "spec": {"nodeName": "n1", "containers": [{"name": "main"}]}})
}

/// The store: VPA `agent` (the default recommender's) and, when `collector`,
/// VPA `collector` (recommender `frugal`'s), with a pod each on node n1.
fn store(dir: &Path, collector: bool) {
    let mut items = vec![
        json!({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}}}),
        vpa("agent", None),
        pod("agent"),
    ];
    if collector {
        items.extend([vpa("collector", Some("frugal")), pod("collector")]);
    }
    write(
        &dir.join("store/cluster.json"),
        &json!({"apiVersion": "v1", "kind": "List", "items": items}),
    );
}

/// One interval of usage at minute `minute`, in a directory of its own.
fn metrics(dir: &Path, minute: u32) -> String {
    let path = dir.join(format!("metrics-{minute}"));
    let item = |pod: &str| {
        json!({"metadata": {"name": pod, "namespace": "monitoring"},
               "timestamp": format!("2026-11-01T00:{minute:02}:00Z"), "window": "30s",
               "containers": [{"name": "main", "usage": {"cpu": format!("{}m", 50 + minute), "memory": "100Mi"}}]})
    };
    write(
        &path.join("usage.json"),
        &json!({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetricsList",
                "items": [item("agent-n1"), item("collector-n1")]}),
    );
    format!("file:{}", path.display())
}

/// `recommend --recommender-name NAME` over `metrics`, continuing from and
/// leaving checkpoints in `dir/checkpoints`.
fn recommend(dir: &Path, name: &str, metrics: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_nodescope"))
        .args([
            "recommend",
            "--recommender-name",
            name,
            "--metrics",
            metrics,
        ])
        .arg(format!("--store=file:{}", dir.join("store").display()))
        .arg(format!(
            "--checkpoints=file:{}",
            dir.join("checkpoints").display()
        ))
        .output()
        .expect("nodescope runs");
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).as_ref()
        ),
        (Some(0), ""),
        "recommend --recommender-name {name}"
    );
}

/// Every file of the checkpoint directory, by name, with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir.join("checkpoints"))
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| {
                    let bytes = std::fs::read(e.path()).unwrap_or_default();
                    (e.file_name().to_string_lossy().into_owned(), bytes)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn labels(bytes: &[u8]) -> Value {
    let object: Value = serde_json::from_slice(bytes).expect("a checkpoint is JSON");
    object["metadata"]["labels"].clone()
}

#[test]
fn two_recommenders_in_one_directory_keep_both_sets_over_several_intervals() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dir = dir.path();
    store(dir, true);
    for minute in 0..4 {
        let usage = metrics(dir, minute);
        for (name, own, other) in [
            ("default", DEFAULT_FILE, FRUGAL_FILE),
            ("frugal", FRUGAL_FILE, DEFAULT_FILE),
        ] {
            let before = files(dir);
            recommend(dir, name, &usage);
            let after = files(dir);
            let names: Vec<&String> = after.keys().collect();
            // Once both have run, each run leaves both sets.
            if minute > 0 || name == "frugal" {
                assert_eq!(
                    names,
                    [DEFAULT_FILE, FRUGAL_FILE],
                    "{name} at minute {minute}"
                );
            }
            // The other's file, byte for byte; its own rewritten.
            assert_eq!(
                before.get(other),
                after.get(other),
                "{name} at minute {minute}"
            );
            assert_ne!(before.get(own), after.get(own), "{name} at minute {minute}");
            assert_eq!(
                labels(&after[own]),
                json!({"app.kubernetes.io/managed-by": "nodescope-recommender",
                       "nodescope.dev/recommender": name}),
            );
        }
    }
}

#[test]
fn a_file_whose_vpa_is_gone_is_removed_by_its_owner_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dir = dir.path();
    store(dir, true);
    let usage = metrics(dir, 0);
    recommend(dir, "default", &usage);
    recommend(dir, "frugal", &usage);
    // VPA collector (frugal's) is deleted.
    store(dir, false);
    let before = files(dir);
    recommend(dir, "default", &metrics(dir, 1));
    let after = files(dir);
    assert_eq!(before.get(FRUGAL_FILE), after.get(FRUGAL_FILE));
    assert!(after.contains_key(FRUGAL_FILE), "{:?}", after.keys());
    recommend(dir, "frugal", &metrics(dir, 2));
    let last = files(dir);
    assert_eq!(last.keys().collect::<Vec<_>>(), [DEFAULT_FILE]);
    assert_eq!(after.get(DEFAULT_FILE), last.get(DEFAULT_FILE));
    // And the default recommender's own, once its VPA is gone too.
    let gone = dir.join("empty");
    write(
        &gone.join("cluster.json"),
        &json!({"apiVersion": "v1", "kind": "List", "items": [vpa("other", None)]}),
    );
    std::fs::remove_dir_all(dir.join("store")).expect("rm store");
    std::fs::rename(&gone, dir.join("store")).expect("mv store");
    recommend(dir, "frugal", &metrics(dir, 3));
    assert_eq!(files(dir), last, "frugal removes nothing of default's");
    recommend(dir, "default", &metrics(dir, 4));
    assert_eq!(files(dir), BTreeMap::new());
}

#[test]
fn an_older_nodescopes_files_are_the_default_recommenders_to_replace_and_nobodys_to_delete() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dir = dir.path();
    store(dir, true);
    recommend(dir, "default", &metrics(dir, 0));
    // As an older nodescope wrote them: no recommender's name. One of VPA
    // agent (still there), one of a VPA gone.
    let unnamed = |bytes: &[u8]| {
        let mut object: Value = serde_json::from_slice(bytes).expect("JSON");
        if let Some(labels) = object["metadata"]["labels"].as_object_mut() {
            labels.remove("nodescope.dev/recommender");
        }
        object
    };
    let agent = unnamed(&files(dir)[DEFAULT_FILE]);
    let mut old = agent.clone();
    old["metadata"]["name"] = json!("old-0-of-1");
    old["spec"]["vpaName"] = json!("old");
    let checkpoints = dir.join("checkpoints");
    write(&checkpoints.join(DEFAULT_FILE), &agent);
    write(&checkpoints.join("monitoring.old-0-of-1.json"), &old);
    let before = files(dir);

    recommend(dir, "frugal", &metrics(dir, 1));
    let after = files(dir);
    assert_eq!(before.get(DEFAULT_FILE), after.get(DEFAULT_FILE));
    assert_eq!(
        before.get("monitoring.old-0-of-1.json"),
        after.get("monitoring.old-0-of-1.json")
    );
    assert!(after.contains_key(FRUGAL_FILE));

    recommend(dir, "default", &metrics(dir, 2));
    let last = files(dir);
    assert_eq!(
        labels(&last[DEFAULT_FILE])["nodescope.dev/recommender"],
        "default",
        "adopted and labelled"
    );
    assert_eq!(
        before.get("monitoring.old-0-of-1.json"),
        last.get("monitoring.old-0-of-1.json"),
        "an unnamed file of a VPA gone is left in place"
    );
    assert_eq!(after.get(FRUGAL_FILE), last.get(FRUGAL_FILE));
}
