//! The `dry-run` and `test` subcommands, through the real binary: golden
//! outputs on `examples/` and on the captured reviews, every exit code, and
//! the bad-input messages.
//!
//! Golden files live in `tests/golden/`; regenerate them with
//! `NODESCOPE_BLESS=1 cargo test --test cli` and review the diff.

mod bad_input;
mod balloon;
mod exclude;
mod fail_closed;
mod fake_api;
mod features;
mod inputs;
mod kinds_v1_36;
mod kubectl;
mod kubectl_output;
mod kubectl_scope;
mod kustomize;
mod log_level;
mod recommend_flags;
mod suites;
mod update;
mod upstream_flags;
mod webhook_preview;

use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_nodescope");
const FIXTURES: &str = "tests/fixtures/admission-reviews";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn command(args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .current_dir(root())
        .env_remove("NO_COLOR")
        .stdin(Stdio::null());
    command
}

fn nodescope(args: &[&str]) -> Output {
    command(args).output().expect("the binary runs")
}

fn nodescope_with_stdin(args: &[&str], stdin: &str) -> Output {
    let mut child = command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(stdin.as_bytes())
        .expect("stdin written");
    child.wait_with_output().expect("the binary finishes")
}

/// Asserts exit code 2 with exactly `message` (after `nodescope: `) on
/// stderr, one line, and nothing on stdout: a run that cannot check must
/// not print a report that looks like a pass.
fn fails_with(output: &Output, message: &str) {
    assert_exit(output, 2);
    assert_eq!(stderr(output), format!("nodescope: {message}\n"));
    assert_eq!(stdout(output), "");
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("utf-8 stdout")
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("utf-8 stderr")
}

fn assert_exit(output: &Output, code: i32) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        stdout(output),
        stderr(output)
    );
}

/// Compares `actual` with `tests/golden/<name>`, or rewrites it when
/// `NODESCOPE_BLESS` is set.
fn golden(name: &str, actual: &str) {
    let path: PathBuf = root().join("tests/golden").join(name);
    if std::env::var_os("NODESCOPE_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
        std::fs::write(&path, actual).expect("golden written");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run NODESCOPE_BLESS=1 cargo test --test cli",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "{} differs (NODESCOPE_BLESS=1 regenerates it):\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

// ---- golden outputs ------------------------------------------------------

const EXAMPLES: &[&str] = &[
    "dry-run",
    "-f",
    "examples/manifests",
    "--params",
    "examples/store",
];

#[test]
fn the_examples_table_json_yaml_and_junit_match_their_golden_files() {
    for (format, file) in [
        ("table", "examples.table.txt"),
        ("json", "examples.json"),
        ("yaml", "examples.yaml"),
        ("junit", "examples.junit.xml"),
    ] {
        let output = nodescope(&[EXAMPLES, &["-o", format]].concat());
        assert_exit(&output, 1);
        golden(file, &stdout(&output));
    }
}

#[test]
fn daemonset_pods_expanded_per_node_show_the_patch_and_resources_in_golden_files() {
    let args = [
        "dry-run",
        "-f",
        "examples/manifests/node-exporter.yaml",
        "--recommendations",
        "examples/store",
        "--nodes",
        "node-a-1,node-b-1,node-c-1",
    ];
    for (format, file) in [
        ("table", "node-exporter-nodes.table.txt"),
        ("json", "node-exporter-nodes.json"),
    ] {
        let output = nodescope(&[&args[..], &["-o", format]].concat());
        assert_exit(&output, 0);
        golden(file, &stdout(&output));
    }
}

#[test]
fn the_captured_reviews_replay_into_golden_table_json_and_junit() {
    let args = [
        "dry-run",
        "-f",
        FIXTURES,
        "--params",
        "examples/store",
        "--recommendations",
        "examples/store",
    ];
    for (format, file) in [
        ("table", "captured-reviews.table.txt"),
        ("json", "captured-reviews.json"),
        ("junit", "captured-reviews.junit.xml"),
    ] {
        let output = nodescope(&[&args[..], &["-o", format]].concat());
        assert_exit(&output, 0);
        golden(file, &stdout(&output));
    }
}

// ---- behaviour -----------------------------------------------------------

fn json_report(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\n{}", stdout(output), stderr(output)))
}

/// (policy, binding, result, message) of every row of the only object.
fn rows(report: &Value) -> Vec<Value> {
    report["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .flat_map(|o| o["results"].as_array().cloned().unwrap_or_default())
        .collect()
}

#[test]
fn output_is_a_table_by_default_as_with_kubectl_even_when_piped_and_never_has_colour() {
    let default = nodescope(EXAMPLES);
    assert_exit(&default, 1);
    let table = nodescope(&[EXAMPLES, &["-o", "table"]].concat());
    assert_eq!(stdout(&default), stdout(&table));
    assert!(!stdout(&default).contains('\x1b'), "{}", stdout(&default));
    golden("examples.table.txt", &stdout(&default));
}

#[test]
fn two_objects_of_the_same_name_are_told_apart_by_their_source() {
    let output = nodescope(EXAMPLES);
    assert_exit(&output, 1);
    let text = stdout(&output);
    let sources: Vec<(&str, &str)> = text
        .lines()
        .filter(|line| line.starts_with("PriorityClass/node-balloon "))
        .filter_map(|line| {
            let mut cells = line.split_whitespace();
            Some((cells.next()?, cells.next()?))
        })
        .collect();
    assert_eq!(
        sources,
        [
            (
                "PriorityClass/node-balloon",
                "examples/manifests/balloon.yaml#1"
            ),
            (
                "PriorityClass/node-balloon",
                "examples/manifests/mistakes.yaml#3"
            ),
        ]
    );
    let header: Vec<&str> = text
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["OBJECT", "SOURCE", "POLICY", "BINDING", "RESULT", "MESSAGE"]
    );
}

#[test]
fn a_raw_manifest_gets_the_answer_of_the_object_the_apiserver_admitted() {
    let fixture = format!("{FIXTURES}/pod-node-balloon-create.validate.json");
    let replayed = nodescope(&["dry-run", "-f", &fixture, "-o", "json"]);
    assert_exit(&replayed, 0);
    // The manifest as written: no priority, no preemptionPolicy, requests
    // only as limits. The apiserver fills all three in before admission.
    let manifest = r#"
apiVersion: v1
kind: Pod
metadata:
  generateName: node-balloon-
  namespace: kube-system
  labels: {node.kubernetes.io/balloon: "true"}
  ownerReferences:
  - {apiVersion: apps/v1, kind: DaemonSet, name: node-balloon, uid: u, controller: true}
spec:
  priorityClassName: node-balloon
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10
    resources:
      limits: {cpu: "2", memory: 4Gi}
"#;
    let raw = nodescope_with_stdin(
        &[
            "dry-run",
            "-f",
            "-",
            "--params",
            "examples/manifests/balloon.yaml",
            "-o",
            "json",
        ],
        manifest,
    );
    assert_exit(&raw, 0);
    assert_eq!(rows(&json_report(&raw)), rows(&json_report(&replayed)));

    // And the priority class: the apiserver's default preemptionPolicy is
    // what the bundle forbids, with the same message either way.
    let defaulted = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: node-balloon}\nvalue: 1000000000\npreemptionPolicy: PreemptLowerPriority\n";
    let omitted = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: node-balloon}\nvalue: 1000000000\n";
    let a = nodescope_with_stdin(&["dry-run", "-f", "-", "-o", "json"], defaulted);
    let b = nodescope_with_stdin(&["dry-run", "-f", "-", "-o", "json"], omitted);
    assert_exit(&a, 1);
    assert_exit(&b, 1);
    assert_eq!(rows(&json_report(&a)), rows(&json_report(&b)));
}

#[test]
fn a_feature_turning_off_in_the_files_blocks_a_new_node_scoped_vpa() {
    let input = r#"
apiVersion: featureflags.nodescope.dev/v1alpha1
kind: Feature
metadata: {name: vpa-node-scope, namespace: kube-system}
status: {state: TurningOff}
---
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata: {name: agent, namespace: ops}
spec:
  scope: node
  targetRef: {apiVersion: apps/v1, kind: DaemonSet, name: agent}
"#;
    let output = nodescope_with_stdin(&["dry-run", "-f", "-", "-o", "json"], input);
    assert_exit(&output, 1);
    let report = json_report(&output);
    assert_eq!(
        report["objects"][1]["status"]["message"],
        "ValidatingAdmissionPolicy 'nodescope-feature-vpa-node-scope' with binding \
         'nodescope-feature-vpa-node-scope' denied request: feature \"vpa-node-scope\" is \
         TurningOff: no new uses allowed (a VerticalPodAutoscaler with spec.scope \"node\")"
    );
    // DELETE is never blocked.
    let delete = nodescope_with_stdin(
        &["dry-run", "-f", "-", "-o", "json", "--operation", "DELETE"],
        input,
    );
    assert_exit(&delete, 0);
}

#[test]
fn an_update_is_judged_against_its_old_object_and_the_identity_given() {
    let dir = tempfile::tempdir().expect("tempdir");
    let old = dir.path().join("old.yaml");
    std::fs::write(
        &old,
        "apiVersion: autoscaling.k8s.io/v1\nkind: VerticalPodAutoscaler\nmetadata: {name: agent, namespace: ops}\nspec:\n  scope: node\n  targetRef: {apiVersion: apps/v1, kind: DaemonSet, name: agent}\n",
    )
    .expect("written");
    let feature = dir.path().join("feature.yaml");
    std::fs::write(
        &feature,
        "apiVersion: featureflags.nodescope.dev/v1alpha1\nkind: Feature\nmetadata: {name: vpa-node-scope, namespace: kube-system}\nstatus: {state: \"Off\"}\n",
    )
    .expect("written");
    let new = "apiVersion: autoscaling.k8s.io/v1\nkind: VerticalPodAutoscaler\nmetadata: {name: agent, namespace: ops, labels: {a: b}}\nspec:\n  scope: node\n  targetRef: {apiVersion: apps/v1, kind: DaemonSet, name: agent}\n";
    let args = [
        "dry-run",
        "-f",
        "-",
        "--params",
        feature.to_str().expect("utf-8"),
        "--operation",
        "UPDATE",
        "--old",
        old.to_str().expect("utf-8"),
        "--as",
        "alice",
        "--as-group",
        "devs",
        "-o",
        "json",
    ];
    let output = nodescope_with_stdin(&args, new);
    assert_exit(&output, 0);
    assert_eq!(json_report(&output)["objects"][0]["operation"], "UPDATE");
}
