//! `balloon set --dry-run=client|server`, `--store file:-`, the List shape
//! of every `-o json|yaml`, `completion` and `version`.

use super::fake_api::FakeApi;
use super::kubectl::{against, pools, row, HEADER};
use super::{assert_exit, golden, nodescope, nodescope_with_stdin, root, stderr, stdout};
use serde_json::{json, Value};

#[test]
fn balloon_set_dry_run_client_sends_no_patch_and_prints_it() {
    let api = FakeApi::serving_objects(pools());
    let output = against(
        &api,
        &[
            "balloon",
            "set",
            "node-a",
            "--usable-cpu",
            "6",
            "--dry-run=client",
        ],
    );
    assert_exit(&output, 0);
    assert_eq!(
        stdout(&output),
        "{\n  \"metadata\": {\n    \"annotations\": {\n      \"nodescope.dev/usable-cpu\": \"6\",\n      \
         \"nodescope.dev/usable-fraction\": null,\n      \"nodescope.dev/usable-memory\": null\n    },\n    \
         \"resourceVersion\": \"5\"\n  }\n}\nnode/node-a usable size set (dry run)\n"
    );
    assert_eq!(api.requests(), ["GET /api/v1/nodes/node-a"]);
    // Everything is still checked.
    let output = against(
        &api,
        &[
            "balloon",
            "set",
            "node-a",
            "--usable-cpu",
            "64",
            "--dry-run=client",
        ],
    );
    assert_exit(&output, 2);
    assert_eq!(stdout(&output), "");
    let output = against(
        &api,
        &[
            "balloon",
            "set",
            "nope",
            "--usable-cpu",
            "6",
            "--dry-run=client",
        ],
    );
    assert_exit(&output, 2);
    assert_eq!(
        stderr(&output),
        "nodescope: balloon: Error from server (NotFound): nodes \"nope\" not found\n"
    );
}

#[test]
fn balloon_set_dry_run_server_sends_the_patch_with_dry_run_all_and_nothing_persists() {
    let api = FakeApi::serving_objects(pools());
    let output = against(
        &api,
        &[
            "balloon",
            "set",
            "node-a",
            "--usable-memory",
            "24Gi",
            "--dry-run=server",
        ],
    );
    assert_exit(&output, 0);
    assert_eq!(
        stdout(&output),
        "{\n  \"nodescope.dev/usable-memory\": \"24Gi\"\n}\nnode/node-a usable size set (server dry run)\n"
    );
    let requests = api.requests_with_query();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[0], "GET /api/v1/nodes/node-a");
    assert!(
        requests[1].starts_with("PATCH /api/v1/nodes/node-a?")
            && requests[1].contains("dryRun=All"),
        "{requests:?}"
    );
    let node = api.object("Node", "node-a").expect("node-a");
    assert_eq!(
        node["metadata"]["annotations"],
        json!({"nodescope.dev/usable-fraction": "0.75"})
    );
    // Without --dry-run the same patch is kept, and sent without dryRun.
    let output = against(
        &api,
        &["balloon", "set", "node-a", "--usable-memory", "24Gi"],
    );
    assert_exit(&output, 0);
    assert_eq!(stdout(&output), "node/node-a usable size set\n");
    assert!(!api.requests_with_query()[3].contains("dryRun"));
    let node = api.object("Node", "node-a").expect("node-a");
    assert_eq!(
        node["metadata"]["annotations"],
        json!({"nodescope.dev/usable-memory": "24Gi"})
    );
    let output = nodescope(&[
        "balloon",
        "set",
        "n",
        "--usable-cpu",
        "1",
        "--dry-run=server",
        "--wait",
    ]);
    assert_exit(&output, 2);
}

#[test]
fn store_file_dash_reads_standard_input_as_a_directory_of_the_same_objects() {
    let cluster =
        std::fs::read_to_string(root().join("examples/update/cluster.yaml")).expect("read");
    let piped = nodescope_with_stdin(
        &["update", "--plan", "--store", "file:-", "-o", "json"],
        &cluster,
    );
    assert_exit(&piped, 0);
    let file = nodescope(&[
        "update",
        "--plan",
        "--store",
        "file:examples/update",
        "-o",
        "json",
    ]);
    assert_eq!(stdout(&piped), stdout(&file));

    let balloons =
        std::fs::read_to_string(root().join("examples/balloon/cluster.yaml")).expect("read");
    let piped = nodescope_with_stdin(&["balloon", "status", "--store=file:-"], &balloons);
    assert_exit(&piped, 0);
    golden("balloon-status.table.txt", &stdout(&piped));

    // A JSON List on stdin, as `kubectl get -o json` writes it.
    let list = json!({"apiVersion": "v1", "kind": "List", "items": pools()}).to_string();
    let piped = nodescope_with_stdin(&["balloon", "status", "--store=file:-", "node-b"], &list);
    assert_exit(&piped, 0);
    assert_eq!(stdout(&piped), format!("{HEADER}{}", row("node-b")));

    let store = std::fs::read_to_string(root().join("examples/recommend/store/zone-agent.yaml"))
        .expect("read");
    let args = ["--metrics", "file:examples/recommend/metrics", "-o", "json"];
    let piped = nodescope_with_stdin(
        &[&["recommend", "--store", "file:-"], &args[..]].concat(),
        &store,
    );
    assert_exit(&piped, 0);
    let file = nodescope(
        &[
            &["recommend", "--store", "file:examples/recommend/store"],
            &args[..],
        ]
        .concat(),
    );
    assert_exit(&file, 0);
    assert_eq!(stdout(&piped), stdout(&file));

    // Errors name standard input as -f - does.
    let piped = nodescope_with_stdin(&["balloon", "status", "--store=file:-"], "kind: [\n");
    assert_exit(&piped, 2);
    assert!(
        stderr(&piped).starts_with("nodescope: balloon status: <stdin>"),
        "{}",
        stderr(&piped)
    );
}

/// `.apiVersion`, `.kind` and how many `.items`.
fn list_shape(text: &str) -> (Value, Value, usize) {
    let value: Value = serde_json::from_str(text)
        .or_else(|_| serde_saphyr::from_str(text))
        .unwrap_or_else(|e| panic!("{e}: {text}"));
    let items = value["items"].as_array().map_or(0, Vec::len);
    (value["apiVersion"].clone(), value["kind"].clone(), items)
}

#[test]
fn every_json_and_yaml_of_several_objects_is_a_v1_list() {
    let features = ["--params", "examples/features/features.yaml"];
    let cleanup = ["--params", "examples/features/cleanup/features.yaml"];
    for format in ["json", "yaml"] {
        for (args, items, code) in [
            (
                vec!["update", "--plan", "--store", "file:examples/update"],
                4,
                0,
            ),
            (
                vec!["balloon", "status", "--store", "file:examples/balloon"],
                3,
                0,
            ),
            (
                [
                    &["features"][..],
                    &features,
                    &["-f", "examples/features/vpas.yaml"],
                ]
                .concat(),
                2,
                0,
            ),
            // One Feature asked, without -A: still a List, of one report.
            (
                [
                    &["features", "uses", "vpa-node-scope"][..],
                    &features,
                    &["-f", "examples/features/vpas.yaml"],
                ]
                .concat(),
                1,
                1,
            ),
            (
                [
                    &["features", "cleanup", "vpa-node-scope", "--dry-run"][..],
                    &cleanup,
                    &["-f", "examples/features/cleanup/vpas.yaml"],
                ]
                .concat(),
                1,
                1,
            ),
            (vec!["recommend", "--demo"], 1, 0),
        ] {
            let mut all = args.clone();
            all.extend(["-o", format]);
            let output = nodescope(&all);
            assert_exit(&output, code);
            assert_eq!(
                list_shape(&stdout(&output)),
                (json!("v1"), json!("List"), items),
                "{all:?}"
            );
        }
    }
}

#[test]
fn completion_scripts_name_nodescope_and_its_subcommands() {
    let bash = nodescope(&["completion", "bash"]);
    assert_exit(&bash, 0);
    let text = stdout(&bash);
    assert!(text.contains("complete -F _nodescope"), "{text}");
    for subcommand in [
        "balloon",
        "update",
        "recommend",
        "features",
        "version",
        "completion",
    ] {
        assert!(text.contains(subcommand), "{subcommand}");
    }
    assert!(text.contains("--kubeconfig") && text.contains("--dry-run"));
    for shell in ["zsh", "fish"] {
        let output = nodescope(&["completion", shell]);
        assert_exit(&output, 0);
        assert!(stdout(&output).contains("nodescope"), "{shell}");
    }
    let output = nodescope(&["completion", "powershell"]);
    assert_exit(&output, 2);
}

#[test]
fn version_prints_the_version_commit_and_build_date_as_kubectl_does() {
    let output = nodescope(&["version"]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[0], format!("Version: v{}", env!("CARGO_PKG_VERSION")));
    let commit = lines[1]
        .strip_prefix("Git commit: ")
        .expect("a commit line");
    assert!(
        commit == "unknown"
            || (commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{commit}"
    );
    let date = lines[2].strip_prefix("Build date: ").expect("a date line");
    assert!(
        date == "unknown" || date.parse::<k8s_openapi::jiff::Timestamp>().is_ok(),
        "{date}"
    );
    let json = nodescope(&["version", "-o", "json"]);
    assert_exit(&json, 0);
    let value: Value = serde_json::from_str(&stdout(&json)).expect("json");
    assert_eq!(
        value["clientVersion"]["gitVersion"],
        format!("v{}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(value["clientVersion"]["gitCommit"], commit);
    assert_eq!(value["clientVersion"]["buildDate"], date);
    // Go's GOARCH, as kubectl's `platform`: linux/amd64, never linux/x86_64.
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    assert_eq!(
        value["clientVersion"]["platform"],
        format!("{}/{arch}", std::env::consts::OS)
    );
    assert!(!stdout(&json).contains("x86_64"), "{}", stdout(&json));
    let yaml = nodescope(&["version", "-o", "yaml"]);
    let from_yaml: Value = serde_saphyr::from_str(&stdout(&yaml)).expect("yaml");
    assert_eq!(from_yaml, value);
    let flag = nodescope(&["--version"]);
    assert_exit(&flag, 0);
    assert_eq!(
        stdout(&flag),
        format!("nodescope {}\n", env!("CARGO_PKG_VERSION"))
    );
}
