//! Reading an offline cluster: lists flattened as kubectl and the API write
//! them, each object once, every error at its document.

use super::*;
use serde_json::json;

/// `kind namespace/name @ location` of every object under `dir`.
fn read(dir: &Path) -> Result<(Vec<String>, Kinds), InputError> {
    let mut seen = Vec::new();
    let kinds = read_objects(
        dir,
        |value: Value, location: &Location| {
            format!(
                "{} {}/{} @ {location}",
                value["kind"].as_str().unwrap_or("?"),
                value["metadata"]["namespace"].as_str().unwrap_or(""),
                value["metadata"]["name"].as_str().unwrap_or("")
            )
        },
        |line| {
            seen.push(line);
            Ok::<(), InputError>(())
        },
    )?;
    Ok((seen, kinds))
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn kubectls_list_and_the_apis_typed_lists_give_their_items_each_with_its_kind() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // `kubectl get pods,nodes -o yaml`: a List whose items say their kind.
    write(
        dir.path(),
        "a.yaml",
        "apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p1, namespace: ns}\n- apiVersion: v1\n  kind: Node\n  metadata: {name: n1}\nkind: List\nmetadata: {resourceVersion: \"\"}\n",
    );
    // `kubectl get --raw /api/v1/pods`: a PodList whose items do not,
    // streamed (the list says its kind first).
    let pods = r#"{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[{"metadata":{"name":"p2","namespace":"ns"}},{"metadata":{"name":"p3","namespace":"ns"}}]}"#;
    write(dir.path(), "b.json", pods);
    // A list that says its kind after its items is read whole.
    let late = json!({"kind": "ConfigMapList", "apiVersion": "v1",
        "items": [{"metadata": {"name": "c", "namespace": "ns"}}]});
    write(dir.path(), "b2.json", &late.to_string());
    // The same as YAML, a typed list of DaemonSets.
    write(
        dir.path(),
        "c.yaml",
        "kind: DaemonSetList\napiVersion: apps/v1\nitems:\n- metadata: {name: d, namespace: ns}\n",
    );
    // A list among other documents is read a document at a time.
    write(
        dir.path(),
        "d.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n---\nkind: PodList\napiVersion: v1\nitems:\n- metadata: {name: p4, namespace: ns}\n",
    );
    let (seen, kinds) = read(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let base = dir.path().display();
    assert_eq!(
        seen,
        [
            format!("Pod ns/p1 @ {base}/a.yaml: document 1, item 1"),
            format!("Node /n1 @ {base}/a.yaml: document 1, item 2"),
            format!("Pod ns/p2 @ {base}/b.json: document 1, item 1"),
            format!("Pod ns/p3 @ {base}/b.json: document 1, item 2"),
            format!("ConfigMap ns/c @ {base}/b2.json: document 1, item 1 (line 1)"),
            format!("DaemonSet ns/d @ {base}/c.yaml: document 1, item 1"),
            format!("Namespace /ns @ {base}/d.yaml: document 1 (line 1)"),
            format!("Pod ns/p4 @ {base}/d.yaml: document 2, item 1 (line 5)"),
        ]
    );
    assert_eq!(kinds.count("Pod"), 4);
    assert_eq!(
        kinds.found(),
        "holds only 1 ConfigMap, 1 DaemonSet, 1 Namespace, 1 Node, 4 Pods"
    );
}

#[test]
fn the_same_object_twice_is_refused_naming_both_documents() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    write(
        dir.path(),
        "a.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\n",
    );
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "q", "namespace": "ns"}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}]});
    write(dir.path(), "b.json", &list.to_string());
    let error = read(dir.path()).err().map(|e| e.to_string());
    let base = dir.path().display();
    assert_eq!(
        error,
        Some(format!(
            "{base}/b.json: document 1, item 2: Pod ns/p is given twice, first at {base}/a.yaml: document 1 (line 1); a cluster holds one object of a name"
        ))
    );
}

#[test]
fn the_same_name_in_another_namespace_kind_or_group_is_another_object() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    write(
        dir.path(),
        "a.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: b}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: p, namespace: a}\n---\napiVersion: example.com/v1\nkind: ConfigMap\nmetadata: {name: p, namespace: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {generateName: p-, namespace: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {generateName: p-, namespace: a}\n",
    );
    let (seen, _) = read(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(seen.len(), 6);
}

#[test]
fn a_json_object_with_items_that_is_not_a_list_is_one_object() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let text = r#"{"items": [{"kind": "Namespace"}], "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "whole"}}"#;
    write(dir.path(), "ns.json", text);
    let (seen, _) = read(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let base = dir.path().display();
    assert_eq!(
        seen,
        [format!(
            "Namespace /whole @ {base}/ns.json: document 1 (line 1)"
        )]
    );
}

#[test]
fn a_yaml_syntax_error_names_the_file_document_and_line() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    write(
        dir.path(),
        "bad.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\nkind: [\n",
    );
    let error = read(dir.path()).err().map(|e| e.to_string());
    assert_eq!(
        error,
        Some(format!(
            "{}/bad.yaml: document 2: not valid YAML: unclosed bracket '[' at line 5, column 7",
            dir.path().display()
        ))
    );
}

#[test]
fn a_scoped_vpa_without_a_target_is_named_and_others_are_not() {
    let vpa = |spec: Value| {
        json!({"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
               "metadata": {"name": "v", "namespace": "ops"}, "spec": spec})
    };
    assert_eq!(
        untargeted_scoped_vpa(&vpa(json!({"scope": "node"}))).as_deref(),
        Some("VerticalPodAutoscaler ops/v has spec.scope \"node\" but no spec.targetRef: skipped")
    );
    let target = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d"});
    assert_eq!(
        untargeted_scoped_vpa(&vpa(json!({"scope": "node", "targetRef": target}))),
        None
    );
    assert_eq!(untargeted_scoped_vpa(&vpa(json!({}))), None);
}
