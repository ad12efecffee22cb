use super::*;
use serde_json::json;

fn checkpoint(name: &str, labelled: bool) -> Value {
    let mut object = json!({
        "apiVersion": "nodescope.dev/v1alpha1",
        "kind": "RecommendationCheckpoint",
        "metadata": {"name": name, "namespace": "monitoring"},
        "spec": {"vpaName": "agent"},
    });
    if labelled {
        object["metadata"]["labels"] = json!({OWNER_LABEL: OWNER});
    }
    object
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
fn only_files_nodescope_wrote_are_removed_when_the_set_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path();
    std::fs::write(path.join("notes.json"), r#"{"note": "mine"}"#).expect("write");
    std::fs::write(
        path.join("day-1.json"),
        r#"{"kind": "PodMetricsList", "items": []}"#,
    )
    .expect("write");
    // Upstream's own checkpoint under the very name nodescope would give it.
    let theirs = json!({"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscalerCheckpoint",
        "metadata": {"name": "agent-agent", "namespace": "monitoring"}});
    std::fs::write(path.join("monitoring.agent-agent.json"), theirs.to_string()).expect("write");

    let first = CheckpointDir::read(path, DEFAULT_RECOMMENDER).expect("read");
    replace(
        path,
        &first,
        &[checkpoint("agent-0-of-1", false)],
        DEFAULT_RECOMMENDER,
    )
    .expect("written");
    let second = CheckpointDir::read(path, DEFAULT_RECOMMENDER).expect("read");
    assert_eq!(second.ours, [path.join("monitoring.agent-0-of-1.json")]);
    replace(
        path,
        &second,
        &[checkpoint("agent-0-of-2", false)],
        DEFAULT_RECOMMENDER,
    )
    .expect("written");

    assert_eq!(
        names(path),
        [
            "day-1.json",
            "monitoring.agent-0-of-2.json",
            "monitoring.agent-agent.json",
            "notes.json"
        ]
    );
    let written: Value = serde_json::from_str(
        &std::fs::read_to_string(path.join("monitoring.agent-0-of-2.json")).expect("read"),
    )
    .expect("json");
    assert_eq!(written["metadata"]["labels"][OWNER_LABEL], OWNER);
}

#[test]
fn files_that_are_not_checkpoints_are_named_in_one_warning_and_checkpoints_of_others_are_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path();
    std::fs::write(path.join("notes.json"), "not json {").expect("write");
    std::fs::write(path.join("day-1.yaml"), "kind: PodMetricsList\nitems: []\n").expect("write");
    std::fs::write(
        path.join("upstream.yaml"),
        "apiVersion: autoscaling.k8s.io/v1\nkind: VerticalPodAutoscalerCheckpoint\n\
         metadata: {name: agent-agent, namespace: monitoring}\n",
    )
    .expect("write");
    let read = CheckpointDir::read(path, DEFAULT_RECOMMENDER).expect("read");
    assert_eq!(read.objects.len(), 1);
    assert!(read.ours.is_empty());
    assert_eq!(
        read.foreign_warning(path).expect("a warning"),
        format!(
            "{}: 2 file(s) that are not nodescope's checkpoints left alone: day-1.yaml, notes.json",
            path.display()
        )
    );
}

#[test]
fn a_name_taken_by_a_file_nodescope_did_not_write_stops_the_write_before_anything_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path();
    let taken = path.join("monitoring.agent-0-of-1.json");
    std::fs::write(&taken, checkpoint("agent-0-of-1", false).to_string()).expect("write");
    let before = CheckpointDir::read(path, DEFAULT_RECOMMENDER).expect("read");
    let error = replace(
        path,
        &before,
        &[
            checkpoint("agent-1", false),
            checkpoint("agent-0-of-1", false),
        ],
        DEFAULT_RECOMMENDER,
    )
    .expect_err("refused");
    assert_eq!(
        error.to_string(),
        format!(
            "refusing to overwrite {}: recommender \"default\" did not write it (it has no \
             app.kubernetes.io/managed-by: nodescope-recommender label, or another \
             nodescope.dev/recommender); move it away or choose another --checkpoints directory",
            taken.display()
        )
    );
    assert_eq!(names(path), ["monitoring.agent-0-of-1.json"]);
}

#[test]
fn a_checkpoint_directory_that_is_or_holds_the_metrics_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let metrics = dir.path().join("metrics");
    std::fs::create_dir_all(&metrics).expect("mkdir");
    for (checkpoints, refused) in [
        (metrics.clone(), true),
        (metrics.join("checkpoints"), true),
        (dir.path().to_owned(), true),
        (dir.path().join("checkpoints"), false),
    ] {
        let result = check_apart(&checkpoints, "metrics", &metrics);
        assert_eq!(result.is_err(), refused, "{}", checkpoints.display());
    }
    assert_eq!(
        check_apart(&metrics, "metrics", &metrics)
            .expect_err("refused")
            .to_string(),
        format!(
            "--checkpoints {0}: it overlaps --metrics {0}; checkpoints are written to (and \
             stale ones removed from) a directory of their own",
            metrics.display()
        )
    );
}

#[test]
fn each_recommender_reads_and_owns_only_its_own_files_and_default_adopts_unnamed_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path();
    let named = |name: &str, recommender: &str| owned(&checkpoint(name, false), recommender);
    // An older nodescope's: the owner label, no recommender's name.
    let unnamed = checkpoint("old-0-of-1", true);
    let empty = CheckpointDir::default();
    replace(path, &empty, &[named("agent-0-of-1", "default")], "default").expect("written");
    replace(path, &empty, &[named("agent-0-of-1", "frugal")], "frugal").expect("written");
    std::fs::write(path.join("monitoring.old-0-of-1.json"), unnamed.to_string()).expect("write");
    assert_eq!(
        names(path),
        [
            "monitoring.agent-0-of-1.json",
            "monitoring.agent-0-of-1_frugal.json",
            "monitoring.old-0-of-1.json"
        ]
    );
    let recommender_of = |o: &Value| o["metadata"]["labels"][RECOMMENDER_LABEL].clone();

    let frugal = CheckpointDir::read(path, "frugal").expect("read");
    assert_eq!(
        frugal.ours,
        [path.join("monitoring.agent-0-of-1_frugal.json")]
    );
    assert!(frugal.adopted.is_empty());
    assert_eq!(
        frugal
            .objects
            .iter()
            .map(recommender_of)
            .collect::<Vec<_>>(),
        [json!("frugal")]
    );

    let default = CheckpointDir::read(path, DEFAULT_RECOMMENDER).expect("read");
    assert_eq!(default.ours, [path.join("monitoring.agent-0-of-1.json")]);
    assert_eq!(default.adopted, [path.join("monitoring.old-0-of-1.json")]);
    assert_eq!(
        default
            .objects
            .iter()
            .map(recommender_of)
            .collect::<Vec<_>>(),
        [json!("default"), Value::Null]
    );

    // default writes nothing: its named file goes, the unnamed one stays,
    // frugal's stays.
    replace(path, &default, &[], DEFAULT_RECOMMENDER).expect("written");
    assert_eq!(
        names(path),
        [
            "monitoring.agent-0-of-1_frugal.json",
            "monitoring.old-0-of-1.json"
        ]
    );
    // Written again by default, the unnamed one becomes default's.
    let default = CheckpointDir::read(path, DEFAULT_RECOMMENDER).expect("read");
    replace(
        path,
        &default,
        &[checkpoint("old-0-of-1", false)],
        DEFAULT_RECOMMENDER,
    )
    .expect("written");
    let again = CheckpointDir::read(path, DEFAULT_RECOMMENDER).expect("read");
    assert_eq!(again.ours, [path.join("monitoring.old-0-of-1.json")]);
    assert!(again.adopted.is_empty());
}
