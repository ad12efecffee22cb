//! `-n`, `-A`, `-l` and NODE names, as kubectl reads them, from a store
//! and from the fake apiserver alike.

use super::fake_api::FakeApi;
use super::kubectl::{against, objects, pools, row, store, HEADER};
use super::{assert_exit, nodescope, root, stderr, stdout};
use serde_json::{json, Value};
use std::process::Output;

#[test]
fn node_names_restrict_the_rows_and_a_missing_one_is_not_found_online_and_offline_alike() {
    let api = FakeApi::serving_objects(pools());
    let (_dir, flag) = store(&pools());
    let online = against(&api, &["balloon", "status", "node-c", "nope", "node-a"]);
    let offline = nodescope(&["balloon", "status", &flag, "node-c", "nope", "node-a"]);
    for output in [&online, &offline] {
        assert_exit(output, 1);
        assert_eq!(
            stdout(output),
            format!("{HEADER}{}{}", row("node-a"), row("node-c"))
        );
        assert_eq!(
            stderr(output),
            "nodescope: balloon status: Error from server (NotFound): nodes \"nope\" not found\n"
        );
    }
    assert_eq!(
        api.requests(),
        [
            "GET /api/v1/nodes/node-c",
            "GET /api/v1/pods",
            "GET /api/v1/nodes/nope",
            "GET /api/v1/nodes/node-a",
            "GET /api/v1/pods"
        ]
    );
    // Only names that are not there: nothing on stdout, as kubectl.
    for output in [
        against(&api, &["balloon", "status", "nope"]),
        nodescope(&["balloon", "status", &flag, "nope"]),
    ] {
        assert_exit(&output, 1);
        assert_eq!(stdout(&output), "");
    }
}

#[test]
fn a_selector_picks_nodes_by_label_online_and_offline() {
    let api = FakeApi::serving_objects(pools());
    let (_dir, flag) = store(&pools());
    for (selector, rows) in [
        ("pool=cpu", vec!["node-b", "node-c"]),
        ("pool=cpu,!canary", vec!["node-b"]),
        ("pool in (gpu, cpu),canary", vec!["node-c"]),
        ("pool notin (cpu)", vec!["node-a"]),
        ("pool=tpu", vec![]),
    ] {
        let expected = if rows.is_empty() {
            "NODE   ALLOCATABLE   BALLOON   USABLE   REQUESTED   FREE   STATE   REASON\n".to_owned()
        } else {
            format!(
                "{HEADER}{}",
                rows.iter().map(|n| row(n)).collect::<String>()
            )
        };
        let online = against(&api, &["balloon", "status", "-l", selector]);
        assert_exit(&online, 0);
        assert_eq!(stdout(&online), expected, "{selector}");
        let offline = nodescope(&["balloon", "status", &flag, "--selector", selector]);
        assert_exit(&offline, 0);
        assert_eq!(stdout(&offline), expected, "{selector}");
    }
    // The selector goes to the server too, as kubectl sends it.
    assert!(
        api.requests_with_query()
            .iter()
            .any(|r| r == "GET /api/v1/nodes?&labelSelector=pool%3Dcpu"),
        "{:?}",
        api.requests_with_query()
    );
}

#[test]
fn a_selector_that_does_not_read_is_a_usage_error_naming_the_flag() {
    for (args, value, why) in [
        (
            vec!["balloon", "status", "-l"],
            "pool in (a",
            "pool in (: the set has no closing parenthesis",
        ),
        (
            vec!["update", "--plan", "--store", "file:examples/update", "-l"],
            "app>1",
            "app: the operators > and < are not supported (=, ==, !=, in, notin, exists, !)",
        ),
    ] {
        let mut all = args.clone();
        all.push(value);
        let output = nodescope(&all);
        assert_exit(&output, 2);
        assert_eq!(
            stderr(&output),
            format!(
                "error: invalid value '{value}' for '--selector <SELECTOR>': {why}\n\n\
                 For more information, try '--help'.\n"
            )
        );
    }
    // NODE names and -l, as kubectl, do not go together.
    let output = nodescope(&["balloon", "status", "node-a", "-l", "a=b"]);
    assert_exit(&output, 2);
    assert!(
        stderr(&output).starts_with(
            "error: the argument '[NODE]...' cannot be used with '--selector <SELECTOR>'"
        ),
        "{}",
        stderr(&output)
    );
}

/// examples/update with agent-x labelled canary.
fn update_objects() -> Vec<Value> {
    let mut objects = objects("examples/update/cluster.yaml");
    for object in &mut objects {
        if object["kind"] == "Pod" && object["metadata"]["name"] == "agent-x" {
            object["metadata"]["labels"]["canary"] = json!("true");
        }
    }
    objects
}

/// The POD column of a plan table.
fn pods(output: &Output) -> Vec<String> {
    stdout(output)
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn update_plan_shows_the_pods_of_n_and_l_from_a_store_and_from_the_cluster_alike() {
    let api = FakeApi::serving_objects(update_objects());
    let (_dir, flag) = store(&update_objects());
    let all = [
        "monitoring/agent-b2",
        "monitoring/agent-a",
        "monitoring/agent-x",
        "monitoring/agent-b",
    ];
    for (scope, expected) in [
        (vec![], &all[..]),
        (vec!["-A"], &all[..]),
        (vec!["-n", "monitoring"], &all[..]),
        (vec!["--namespace", "kube-system"], &[][..]),
        (vec!["-l", "canary"], &["monitoring/agent-x"][..]),
        (
            vec!["-n", "monitoring", "-l", "app=agent,!canary"],
            &[
                "monitoring/agent-b2",
                "monitoring/agent-a",
                "monitoring/agent-b",
            ][..],
        ),
    ] {
        let mut args = vec!["update", "--plan"];
        args.extend_from_slice(&scope);
        let mut offline = args.clone();
        offline.push(&flag);
        let offline = nodescope(&offline);
        assert_exit(&offline, 0);
        assert_eq!(pods(&offline), expected, "{scope:?}");
        args.push("--use-admission-controller-status=false");
        let online = against(&api, &args);
        assert_exit(&online, 0);
        assert_eq!(stdout(&online), stdout(&offline), "{scope:?}");
        // No pod shown: kubectl's words, on stderr, from either.
        let said = match (expected.is_empty(), scope.first()) {
            (false, _) => String::new(),
            (true, Some(&"--namespace")) => {
                format!("No resources found in {} namespace.\n", scope[1])
            }
            (true, _) => "No resources found\n".to_owned(),
        };
        assert_eq!(stderr(&offline), said, "{scope:?}");
        assert_eq!(stderr(&online), said, "{scope:?}");
    }
    // A selected pod's action is the one of the whole pass: agent-b is
    // still held back by the pods that are not shown.
    let output = nodescope(&["update", "--plan", &flag, "-l", "!canary", "-o", "json"]);
    let plan: Value = serde_json::from_str(&stdout(&output)).expect("json");
    let b = plan["items"]
        .as_array()
        .and_then(|i| i.iter().find(|p| p["pod"] == "agent-b"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(b["action"], "deferred", "{plan}");
    let output = nodescope(&["update", "--plan", &flag, "-n", "x", "-A"]);
    assert_exit(&output, 2);
    assert!(
        stderr(&output).starts_with(
            "error: the argument '--namespace <NAMESPACE>' cannot be used with '--all-namespaces'"
        ),
        "{}",
        stderr(&output)
    );
    let output = nodescope(&["update", "-n", "monitoring", "--kubeconfig", "/nonexistent"]);
    assert_exit(&output, 2);
    assert_eq!(
        stderr(&output),
        "nodescope: update: -n and -l choose the pods --plan shows; the updater itself acts on \
         every pod of the scoped VerticalPodAutoscalers\n"
    );
}

#[test]
fn features_uses_with_all_namespaces_reports_the_feature_of_every_namespace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let features = dir.path().join("features.yaml");
    let base =
        std::fs::read_to_string(root().join("examples/features/features.yaml")).expect("read");
    let other = "---\napiVersion: featureflags.nodescope.dev/v1alpha1\nkind: Feature\n\
                 metadata: {name: vpa-node-scope, namespace: acme}\nspec: {desired: Enabled}\n";
    std::fs::write(&features, format!("{base}\n{other}")).expect("written");
    let params = features.to_str().expect("utf-8");
    let vpas = "examples/features/vpas.yaml";
    let output = nodescope(&[
        "features",
        "uses",
        "vpa-node-scope",
        "-A",
        "--params",
        params,
        "-f",
        vpas,
        "-o",
        "json",
    ]);
    assert_exit(&output, 1);
    let list: Value = serde_json::from_str(&stdout(&output)).expect("json");
    assert_eq!(list["kind"], "List");
    let features: Vec<&Value> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| &i["feature"])
        .collect();
    assert_eq!(
        features,
        [
            &json!({"name": "vpa-node-scope", "namespace": "acme"}),
            &json!({"name": "vpa-node-scope", "namespace": "kube-system"})
        ]
    );
    let table = nodescope(&[
        "features",
        "uses",
        "vpa-node-scope",
        "-A",
        "--params",
        params,
        "-f",
        vpas,
    ]);
    assert_exit(&table, 1);
    let text = stdout(&table);
    let summaries: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" object(s) keep "))
        .collect();
    assert_eq!(summaries.len(), 2, "{text}");
    assert!(summaries[0].ends_with("keep Feature acme/vpa-node-scope from turning off"));
    assert!(summaries[1].ends_with("keep Feature kube-system/vpa-node-scope from turning off"));
    let output = nodescope(&[
        "features", "uses", "nope", "-A", "--params", params, "-f", vpas,
    ]);
    assert_exit(&output, 2);
    assert!(
        stderr(&output).starts_with("nodescope: no Feature nope in any namespace: there are "),
        "{}",
        stderr(&output)
    );
    let output = nodescope(&["features", "cleanup", "x", "--dry-run", "-n", "a", "-A"]);
    assert_exit(&output, 2);
}
