//! `recommend --checkpoints file:DIR|upstream:DIR` offline: a checkpoint
//! directory is replaced only where nodescope wrote it. Recorded metrics,
//! upstream's checkpoints and anybody's notes beside them survive every run.

use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

fn write(path: &Path, value: &Value) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
    std::fs::write(path, value.to_string()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// One scoped VPA, its Node and pod, and one minute of its usage.
fn cluster(dir: &Path) {
    write(
        &dir.join("store/cluster.json"),
        &json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
             "metadata": {"name": "agent", "namespace": "monitoring"},
             "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"},
                      "scope": "kubernetes.io/hostname"}},
            {"apiVersion": "v1", "kind": "Node",
             "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}}},
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "agent-n1", "namespace": "monitoring",
                          "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                               "name": "agent", "controller": true, "uid": "u"}]},
             "spec": {"nodeName": "n1", "containers": [{"name": "agent"}]}},
        ]}),
    );
    write(
        &dir.join("metrics/day-0.json"),
        &json!({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetricsList", "items": [
            {"metadata": {"name": "agent-n1", "namespace": "monitoring"},
             "timestamp": "2026-11-01T00:00:00Z", "window": "30s",
             "containers": [{"name": "agent", "usage": {"cpu": "50m", "memory": "100Mi"}}]}]}),
    );
}

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nodescope"))
        .args(args)
        .output()
        .expect("nodescope runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn checkpoints_into_the_metrics_directory_are_refused_and_nothing_there_is_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    cluster(dir.path());
    write(
        &dir.path().join("metrics/notes.json"),
        &json!({"note": "mine"}),
    );
    let metrics = dir.path().join("metrics");
    let flag = format!("file:{}", metrics.display());
    let store = format!("file:{}", dir.path().join("store").display());
    let (code, stderr) = run(&[
        "recommend",
        "--store",
        &store,
        "--metrics",
        &flag,
        "--once",
        "--checkpoints",
        &flag,
    ]);
    assert_eq!(
        (code, stderr),
        (
            2,
            format!(
                "nodescope: --checkpoints {0}: it overlaps --metrics {0}; checkpoints are \
                 written to (and stale ones removed from) a directory of their own\n",
                metrics.display()
            )
        )
    );
    assert_eq!(names(&metrics), ["day-0.json", "notes.json"]);
}

#[test]
fn a_checkpoint_directory_keeps_what_nodescope_did_not_write_and_says_so_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    cluster(dir.path());
    let checkpoints = dir.path().join("checkpoints");
    write(&checkpoints.join("notes.json"), &json!({"note": "mine"}));
    // Upstream's checkpoint of a VPA the store does not have.
    write(
        &checkpoints.join("upstream.json"),
        &json!({"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscalerCheckpoint",
            "metadata": {"name": "other-app", "namespace": "default"},
            "spec": {"vpaObjectName": "other", "containerName": "app"},
            "status": {"version": "v3", "cpuHistogram": {}, "memoryHistogram": {},
                       "firstSampleStart": null, "lastSampleStart": null}}),
    );
    let store = format!("file:{}", dir.path().join("store").display());
    let metrics = format!("file:{}", dir.path().join("metrics").display());
    for format in ["upstream", "file", "upstream"] {
        let flag = format!("{format}:{}", checkpoints.display());
        let (code, stderr) = run(&[
            "recommend",
            "--store",
            &store,
            "--metrics",
            &metrics,
            "--checkpoints",
            &flag,
        ]);
        assert_eq!(
            (code, stderr),
            (
                0,
                format!(
                    "nodescope: warning: {}: 1 file(s) that are not nodescope's checkpoints \
                     left alone: notes.json\n",
                    checkpoints.display()
                )
            ),
            "--checkpoints {format}:"
        );
    }
    // The last run wrote upstream's format: the global checkpoint and the
    // one of scope value n1 (fnv32a), and removed its own RecommendationCheckpoint.
    let names = names(&checkpoints);
    assert_eq!(names.len(), 4, "{names:?}");
    assert!(
        names.contains(&"monitoring.agent-agent.json".to_owned()),
        "{names:?}"
    );
    assert!(names.contains(&"notes.json".to_owned()));
    assert!(names.contains(&"upstream.json".to_owned()));
    assert!(
        !names.iter().any(|n| n.contains("agent-0-of-")),
        "{names:?}"
    );
}
