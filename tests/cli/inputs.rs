//! The operator's inputs offline (issue 30): lists as kubectl and the API
//! write them, each object once, and an input that holds nothing a command
//! can use is exit 2 naming it, never an empty "all clear".

use super::{assert_exit, fails_with, nodescope, stderr, stdout};
use serde_json::{json, Value};
use std::path::Path;

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("written");
}

/// The documents of a YAML file, in order.
fn documents(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(super::root().join(path)).expect("readable");
    serde_saphyr::from_multiple::<Value>(&text)
        .expect("valid YAML")
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

/// The documents of `path` as the API returns them: one typed list per
/// kind (`PodList`), whose items leave out their kind and apiVersion.
fn as_typed_lists(path: &str) -> Vec<Value> {
    let mut lists: Vec<Value> = Vec::new();
    for mut object in documents(path) {
        let kind = object["kind"].as_str().expect("a kind").to_owned();
        let api_version = object["apiVersion"]
            .as_str()
            .expect("an apiVersion")
            .to_owned();
        let map = object.as_object_mut().expect("an object");
        map.remove("kind");
        map.remove("apiVersion");
        let list_kind = format!("{kind}List");
        match lists.iter_mut().find(|l| l["kind"] == list_kind.as_str()) {
            Some(list) => list["items"].as_array_mut().expect("items").push(object),
            None => lists.push(json!({
                "kind": list_kind, "apiVersion": api_version,
                "metadata": {"resourceVersion": "1"}, "items": [object]})),
        }
    }
    lists
}

#[test]
fn typed_lists_as_the_api_returns_them_give_the_same_plan_and_status_as_the_objects() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (example, command) in [
        ("examples/update", vec!["update", "--plan"]),
        ("examples/balloon", vec!["balloon", "status"]),
    ] {
        let typed = dir.path().join(example.trim_start_matches("examples/"));
        std::fs::create_dir_all(&typed).expect("mkdir");
        for (i, list) in as_typed_lists(&format!("{example}/cluster.yaml"))
            .iter()
            .enumerate()
        {
            write(&typed.join(format!("{i}.json")), &list.to_string());
        }
        let run = |store: String| {
            let args = [command.clone(), vec!["--store", &store]].concat();
            nodescope(&args)
        };
        let objects = run(format!("file:{example}"));
        let lists = run(format!("file:{}", typed.display()));
        assert_exit(&objects, 0);
        assert_exit(&lists, 0);
        assert!(stdout(&objects).lines().count() > 1, "{}", stdout(&objects));
        assert_eq!(stdout(&lists), stdout(&objects), "{example}");
    }
}

#[test]
fn update_plan_and_balloon_status_on_nothing_exit_2_naming_the_store_and_the_kinds_they_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let blank = dir.path().join("blank.yaml");
    write(&blank, "");
    let others = dir.path().join("others");
    std::fs::create_dir_all(&others).expect("mkdir");
    write(
        &others.join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ns}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: b, namespace: ns}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: ns}\n",
    );
    for (path, found) in [
        (&empty, "holds no objects"),
        (&blank, "holds no objects"),
        (&others, "holds only 2 ConfigMaps, 1 Secret"),
    ] {
        let store = format!("file:{}", path.display());
        fails_with(
            &nodescope(&["update", "--plan", "--store", &store]),
            &format!("update: --store {store}: {found}; the plan is made for Pods (with their DaemonSets, VerticalPodAutoscalers, Nodes and LimitRanges)"),
        );
        fails_with(
            &nodescope(&["balloon", "status", "--store", &store]),
            &format!(
                "balloon status: --store {store}: {found}; the status is of Nodes (with the Pods on them)"
            ),
        );
    }
}

#[test]
fn recommend_once_on_a_store_without_a_scoped_vpa_exits_2_naming_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let metrics = dir.path().join("metrics");
    std::fs::create_dir_all(&store).expect("mkdir");
    std::fs::create_dir_all(&metrics).expect("mkdir");
    let store_flag = format!("file:{}", store.display());
    let metrics_flag = format!("file:{}", metrics.display());
    let args = [
        "recommend",
        "--store",
        &store_flag,
        "--metrics",
        &metrics_flag,
        "--once",
    ];
    fails_with(
        &nodescope(&args),
        &format!("--store {store_flag}: holds no objects; recommendations are made for VerticalPodAutoscalers with a spec.scope and a DaemonSet spec.targetRef"),
    );
    // A VPA whose scope names no workload is named, and is not one.
    write(
        &store.join("vpa.yaml"),
        "apiVersion: autoscaling.k8s.io/v1\nkind: VerticalPodAutoscaler\nmetadata: {name: agent, namespace: ops}\nspec: {scope: node}\n",
    );
    let output = nodescope(&args);
    assert_exit(&output, 2);
    assert_eq!(
        stderr(&output),
        format!(
            "nodescope: warning: VerticalPodAutoscaler ops/agent has spec.scope \"node\" but no spec.targetRef: skipped\n\
             nodescope: --store {store_flag}: holds only 1 VerticalPodAutoscaler; recommendations are made for VerticalPodAutoscalers with a spec.scope and a DaemonSet spec.targetRef\n"
        )
    );
}

#[test]
fn update_plan_names_a_scoped_vpa_without_a_target_on_stderr_and_still_plans() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cluster = std::fs::read_to_string(super::root().join("examples/update/cluster.yaml"))
        .expect("readable");
    write(
        &dir.path().join("cluster.yaml"),
        &format!("{cluster}\n---\napiVersion: autoscaling.k8s.io/v1\nkind: VerticalPodAutoscaler\nmetadata: {{name: lost, namespace: ops}}\nspec: {{scope: node}}\n"),
    );
    let store = format!("file:{}", dir.path().display());
    let output = nodescope(&["update", "--plan", "--store", &store]);
    assert_exit(&output, 0);
    assert_eq!(
        stderr(&output),
        "nodescope: warning: VerticalPodAutoscaler ops/lost has spec.scope \"node\" but no spec.targetRef: skipped\n"
    );
    let example = nodescope(&["update", "--plan", "--store", "file:examples/update"]);
    assert_eq!(stdout(&output), stdout(&example));
}

#[test]
fn the_same_pod_twice_in_a_store_exits_2_naming_both_documents() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: agent-x, namespace: ops}\nspec: {nodeName: n1, containers: [{name: c}]}\n";
    let node = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n";
    write(&dir.path().join("a.yaml"), &format!("{node}---\n{pod}"));
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [
        serde_saphyr::from_str::<Value>(pod).expect("yaml")]});
    write(&dir.path().join("b.json"), &list.to_string());
    let store = format!("file:{}", dir.path().display());
    let base = dir.path().display();
    let twice = format!(
        "{base}/b.json: document 1, item 1: Pod ops/agent-x is given twice, first at {base}/a.yaml: document 2 (line 5); a cluster holds one object of a name"
    );
    fails_with(
        &nodescope(&["update", "--plan", "--store", &store]),
        &format!("update: {twice}"),
    );
    fails_with(
        &nodescope(&["balloon", "status", "--store", &store]),
        &format!("balloon status: {twice}"),
    );
}

#[test]
fn dry_run_refuses_the_same_param_twice_in_its_params() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: ops}\ndata: {a: \"1\"}\n";
    let file = dir.path().join("params.yaml");
    write(&file, &format!("{config_map}---\n{config_map}"));
    let path = file.display().to_string();
    fails_with(
        &nodescope(&["dry-run", "-f", "examples/manifests/node-exporter.yaml", "--params", &path]),
        &format!("{path}: document 2 (line 6): ConfigMap ops/settings is given twice, first at {path}: document 1 (line 1); a cluster holds one object of a name"),
    );
}

#[test]
fn features_uses_and_cleanup_without_objects_exit_2_saying_so() {
    for command in [
        vec!["features", "uses", "vpa-node-scope"],
        vec!["features", "cleanup", "vpa-node-scope", "--dry-run"],
    ] {
        let args = [
            command.clone(),
            vec!["--params", "examples/features/features.yaml"],
        ]
        .concat();
        fails_with(
            &nodescope(&args),
            &format!(
                "features {}: no objects to look through: give the cluster's objects with -f (a file, a directory or -); --params gives only the Features and the state the policies read",
                command[1]
            ),
        );
    }
}

#[test]
fn dry_run_nodes_are_node_names_the_apiserver_takes_each_once() {
    let regex = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
    for (value, why) in [
        (
            "",
            "The Node \"\" is invalid: metadata.name: Required value: name or generateName is \
             required"
                .to_owned(),
        ),
        (
            "bad node!",
            format!(
                "The Node \"bad node!\" is invalid: metadata.name: Invalid value: \"bad node!\": \
                 a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
                 characters, '-' or '.', and must start and end with an alphanumeric character \
                 (e.g. 'example.com', regex used for validation is '{regex}')"
            ),
        ),
    ] {
        let output = nodescope(&[
            "dry-run",
            "-f",
            "examples/manifests/node-exporter.yaml",
            "--nodes",
            value,
        ]);
        assert_exit(&output, 2);
        assert_eq!(stdout(&output), "", "{value:?}");
        assert_eq!(
            stderr(&output),
            format!(
                "error: invalid value '{value}' for '--nodes <NODES>': {why}\n\n\
                 For more information, try '--help'.\n"
            ),
            "{value:?}"
        );
    }
    // One empty name in a list is refused too.
    let output = nodescope(&[
        "dry-run",
        "-f",
        "examples/manifests/node-exporter.yaml",
        "--nodes",
        "node-a,,node-b",
    ]);
    assert_exit(&output, 2);
    assert!(
        stderr(&output).starts_with("error: invalid value '' for '--nodes <NODES>': The Node \"\""),
        "{}",
        stderr(&output)
    );
    // Twice the same node, in one list or across flags.
    for nodes in [
        vec!["--nodes", "node-a,node-b,node-a"],
        vec!["--nodes", "node-a", "--nodes", "node-a"],
    ] {
        let mut args = vec!["dry-run", "-f", "examples/manifests/node-exporter.yaml"];
        args.extend_from_slice(&nodes);
        let output = nodescope(&args);
        assert_exit(&output, 2);
        assert_eq!(stdout(&output), "", "{nodes:?}");
        assert_eq!(
            stderr(&output),
            "nodescope: --nodes: \"node-a\" is given twice: a DaemonSet runs one pod per node\n",
            "{nodes:?}"
        );
    }
}
