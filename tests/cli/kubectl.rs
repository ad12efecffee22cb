//! kubectl's conventions on every command that talks to a cluster:
//! `--kubeconfig` and `--context` and kubectl's error words here; `-n`,
//! `-A`, `-l` and NODE names in [`super::kubectl_scope`];
//! `--dry-run=client|server`, `--store file:-`, the List shape, completion
//! and version in [`super::kubectl_output`]. Through the real binary,
//! against the fake apiserver of [`super::fake_api`] or offline, with exact
//! outputs.

use super::fake_api::FakeApi;
use super::{assert_exit, command, nodescope, root, stderr, stdout};
use serde_json::{json, Value};
use std::process::Output;

/// The documents of a YAML file of the repository, as JSON values.
pub(super) fn objects(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(root().join(path)).expect("read");
    text.split("\n---\n")
        .filter_map(|d| serde_saphyr::from_str::<Value>(d).ok())
        .filter(Value::is_object)
        .collect()
}

/// `nodescope ARGS` with `--kubeconfig` set to `api`'s and no KUBECONFIG.
pub(super) fn against(api: &FakeApi, args: &[&str]) -> Output {
    let mut all = args.to_vec();
    let path = api.kubeconfig.to_str().expect("utf-8");
    all.extend(["--kubeconfig", path]);
    command(&all)
        .env_remove("KUBECONFIG")
        .output()
        .expect("the binary runs")
}

pub(super) fn node(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "resourceVersion": "5", "labels": labels,
            "annotations": {"nodescope.dev/usable-fraction": "0.75"}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi"}}})
}

pub(super) fn balloon_pod(node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("balloon-{node}"), "namespace": "kube-system", "uid": node,
            "labels": {"node.kubernetes.io/balloon": "true"}},
        "spec": {"nodeName": node, "containers": [{"name": "balloon",
            "resources": {"requests": {"cpu": "2", "memory": "8Gi"}}}]},
        "status": {"phase": "Running"}})
}

/// Two pools of nodes, each with a balloon.
pub(super) fn pools() -> Vec<Value> {
    vec![
        node("node-a", json!({"pool": "gpu"})),
        balloon_pod("node-a"),
        node("node-b", json!({"pool": "cpu"})),
        balloon_pod("node-b"),
        node("node-c", json!({"pool": "cpu", "canary": "true"})),
        balloon_pod("node-c"),
    ]
}

/// A store directory of `objects`, and its `--store` flag.
pub(super) fn store(objects: &[Value]) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    for (i, object) in objects.iter().enumerate() {
        std::fs::write(dir.path().join(format!("{i}.json")), object.to_string()).expect("write");
    }
    let flag = format!("--store=file:{}", dir.path().display());
    (dir, flag)
}

pub(super) const HEADER: &str =
    "NODE     ALLOCATABLE   BALLOON   USABLE   REQUESTED   FREE     STATE     REASON\n";

pub(super) fn row(name: &str) -> String {
    format!("{name}   8/32Gi        2/8Gi     6/24Gi   0/0         6/24Gi   Settled   the balloon holds cpu 2, memory 8Gi as asked\n")
}

#[test]
fn kubeconfig_flag_reaches_the_cluster_it_names_and_wins_over_the_environment() {
    let api = FakeApi::serving_objects(pools());
    let output = against(&api, &["balloon", "status"]);
    assert_exit(&output, 0);
    assert_eq!(
        stdout(&output),
        format!(
            "{HEADER}{}{}{}",
            row("node-a"),
            row("node-b"),
            row("node-c")
        )
    );
    assert_eq!(api.requests(), ["GET /api/v1/nodes", "GET /api/v1/pods"]);
    // KUBECONFIG, as kube's Config::infer reads it, when the flag is absent.
    let output = command(&["balloon", "status", "-o", "json"])
        .env("KUBECONFIG", &api.kubeconfig)
        .output()
        .expect("the binary runs");
    assert_exit(&output, 0);
    // The flag wins over KUBECONFIG.
    let output = command(&["balloon", "status", "--kubeconfig"])
        .arg(&api.kubeconfig)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("the binary runs");
    assert_exit(&output, 0);
}

#[test]
fn context_chooses_between_two_clusters_and_a_refused_one_is_worded_as_kubectl() {
    let api = FakeApi::serving_objects(pools());
    let two = api.kubeconfig_with(
        "two",
        &[("dead", "http://127.0.0.1:1"), ("fake", &api.url)],
        "dead",
    );
    let path = two.to_str().expect("utf-8");
    let run = |extra: &[&str]| {
        let mut args = vec!["balloon", "status", "node-a", "--kubeconfig", path];
        args.extend_from_slice(extra);
        command(&args).output().expect("the binary runs")
    };
    let output = run(&[]);
    assert_exit(&output, 2);
    assert_eq!(
        stderr(&output),
        format!(
            "nodescope: balloon status: The connection to the server 127.0.0.1:1 was refused - \
             did you specify the right host or port? (kubeconfig: {path}; context: dead)\n"
        )
    );
    assert_eq!(stdout(&output), "");
    let output = run(&["--context", "fake"]);
    assert_exit(&output, 0);
    assert_eq!(stdout(&output), format!("{HEADER}{}", row("node-a")));
    let output = run(&["--context", "nope"]);
    assert_exit(&output, 2);
    assert_eq!(
        stderr(&output),
        format!(
            "nodescope: balloon status: cannot load the kubeconfig: no context \"nope\" in it \
             (kubeconfig: {path}; context: nope)\n"
        )
    );
}

#[test]
fn every_cluster_command_says_which_server_refused_and_which_kubeconfig_named_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\ncurrent-context: dead\n\
         clusters: [{name: dead, cluster: {server: \"http://127.0.0.1:1\"}}]\n\
         users: [{name: dead, user: {token: t}}]\n\
         contexts: [{name: dead, context: {cluster: dead, user: dead}}]\n",
    )
    .expect("written");
    let path = kubeconfig.to_str().expect("utf-8");
    let refused = format!(
        "The connection to the server 127.0.0.1:1 was refused - did you specify the right host \
         or port? (kubeconfig: {path}; context: dead)"
    );
    for (args, prefix, suffix) in [
        (vec!["balloon", "status"], "balloon status: ", ""),
        (
            vec!["balloon", "set", "n", "--usable-cpu", "1"],
            "balloon: ",
            "",
        ),
        (vec!["update", "--plan"], "update: ", ""),
        (
            vec!["features", "uses", "vpa-node-scope"],
            "",
            " - or give the objects offline with -f and --params",
        ),
    ] {
        let mut all = args.clone();
        all.extend(["--kubeconfig", path]);
        let output = nodescope(&all);
        assert_exit(&output, 2);
        assert_eq!(
            stderr(&output),
            format!("nodescope: {prefix}{refused}{suffix}\n"),
            "{args:?}"
        );
    }
    // The controllers log as they go (other threads until the exit), and
    // stop with the same words.
    for (args, prefix) in [
        (
            vec!["update", "--metrics-listen", "127.0.0.1:0"],
            "update: ",
        ),
        (vec!["recommend", "--address", "127.0.0.1:0"], "recommend: "),
        (
            vec!["balloon", "controller", "--metrics-listen", "127.0.0.1:0"],
            "balloon: ",
        ),
        (
            vec!["features", "controller", "--metrics-listen", "127.0.0.1:0"],
            "features controller: ",
        ),
    ] {
        let mut all = args.clone();
        all.extend(["--kubeconfig", path]);
        let output = nodescope(&all);
        assert_exit(&output, 2);
        let text = stderr(&output);
        let words = format!("nodescope: {prefix}{refused}");
        assert!(text.lines().any(|l| l == words), "{args:?}: {text}");
    }
}

#[test]
fn a_missing_kubeconfig_is_named_with_where_to_give_one() {
    let output = command(&["update", "--plan"])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .expect("the binary runs");
    assert_exit(&output, 2);
    assert_eq!(
        stderr(&output),
        "nodescope: update: cannot load the kubeconfig: /nonexistent/kubeconfig: no such file \
         or directory - give one with --kubeconfig or $KUBECONFIG \
         (kubeconfig: $KUBECONFIG=/nonexistent/kubeconfig)\n"
    );
}
