//! `dry-run` previews what the webhook `serve` runs would answer: given
//! serve's own `--feature-gates` and `--max-allowed-cpu-boost`, a pod of a
//! VPA with a CPU startup boost is shown boosted, with the very patch the
//! server's `admission::answer` returns for the same review under the same
//! flags; a gate nodescope does not know is refused.

use super::*;
use base64::Engine as _;
use clap::Parser;
use nodescope::admission::{self, Decider};
use nodescope::cli::{Cli, Command as Subcommand};
use nodescope::metrics::Webhook;
use std::sync::Arc;

/// A review the apiserver sent for a node-exporter pod on node-a-1.
const REVIEW: &str =
    "tests/fixtures/admission-reviews/pod-node-exporter-node-a-1-create.mutate.json";

/// node-exporter's VPA with a startup boost of 3x CPU.
fn boosted_vpa() -> Value {
    serde_json::json!({"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "node-exporter", "namespace": "monitoring"},
        "spec": {"scope": "node",
            "targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "node-exporter"},
            "updatePolicy": {"updateMode": "InPlaceOrRecreate"},
            "startupBoost": {"cpu": {"type": "Factor", "factor": 3, "durationSeconds": 60}}},
        "status": {"recommendationGroups": [{"scopeValue": "node-a-1", "containerRecommendations": [
            {"containerName": "node-exporter", "target": {"cpu": "150m", "memory": "256Mi"}}]}]}})
}

/// The patch `serve` (started with `flags`) answers `review` with: the
/// server's own decider, built from serve's parsed flags as `run_serve`
/// builds it, over the file store `serve --store file:` loads.
fn served_patch(flags: &[&str], store: &Path, review: &[u8]) -> Value {
    let argv = [&["nodescope", "serve", "--demo"][..], flags].concat();
    let Subcommand::Serve(args) = Cli::try_parse_from(argv).expect("serve's flags").command else {
        panic!("not serve");
    };
    let snapshot = nodescope::store::file::load(store).expect("the store loads");
    let policies = nodescope::policy::bundle::policy_set().expect("the bundle loads");
    let decider = Decider {
        missing_node: args.missing_node_recommendation.into(),
        boost: args.mutation.boost(),
        ..Decider::new(Arc::new(snapshot), Arc::new(policies))
    };
    let answer = admission::answer(Webhook::Mutate, review, &decider);
    assert_eq!(answer.http_status, 200);
    let response: Value = serde_json::from_slice(&answer.body).expect("a review");
    let patch = response["response"]["patch"].as_str().expect("a patch");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .expect("base64");
    serde_json::from_slice(&bytes).expect("a JSON patch")
}

#[test]
fn with_serve_s_feature_gates_the_preview_is_the_webhook_s_boosted_patch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let vpa = dir.path().join("vpa.json");
    std::fs::write(&vpa, boosted_vpa().to_string()).expect("written");
    let review = std::fs::read(root().join(REVIEW)).expect("the review");
    let vpa_arg = vpa.to_str().expect("utf-8");
    let gates = ["--feature-gates", "CPUStartupBoost=true"];
    let capped = [&gates[..], &["--max-allowed-cpu-boost", "400m"]].concat();
    let mut patches = Vec::new();
    for flags in [&[][..], &gates[..], &capped[..]] {
        let args = [
            &[
                "dry-run",
                "-f",
                REVIEW,
                "--recommendations",
                vpa_arg,
                "-o",
                "json",
            ][..],
            flags,
        ]
        .concat();
        let output = nodescope(&args);
        assert_exit(&output, 0);
        let report = json_report(&output);
        let previewed = report["objects"][0]["mutation"]["patch"].clone();
        assert_eq!(
            previewed,
            served_patch(flags, &vpa, &review),
            "dry-run {flags:?}"
        );
        let containers = &report["objects"][0]["mutation"]["containers"][0];
        patches.push((
            containers["requests"]["cpu"].clone(),
            containers["limits"]["cpu"].clone(),
        ));
    }
    // Without the gate the pod gets its node's 150m; with it three times
    // that, the limit kept in the template's ratio (250m:102m); capped at
    // 400m by --max-allowed-cpu-boost.
    assert_eq!(
        patches,
        [
            ("150m".into(), "367m".into()),
            ("450m".into(), "1102m".into()),
            ("400m".into(), "980m".into()),
        ]
        .map(|(r, l): (String, String)| (Value::from(r), Value::from(l)))
    );
}

#[test]
fn the_boost_shows_in_the_table_as_the_pod_the_webhook_would_create() {
    let output = nodescope(&[
        "dry-run",
        "-f",
        "examples/startup-boost/agent.yaml",
        "--recommendations",
        "examples/startup-boost/vpa.yaml",
        "--nodes",
        "node-a-1",
        "--feature-gates",
        "CPUStartupBoost=true",
    ]);
    assert_exit(&output, 0);
    let table = stdout(&output);
    let lines: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("    add /spec") || l.starts_with("    =>"))
        .collect();
    assert_eq!(
        lines,
        [
            r#"    add /spec/containers/0/resources/requests/cpu "600m""#,
            r#"    add /spec/containers/0/resources/requests/memory "128Mi""#,
            r#"    add /spec/containers/0/resources/limits/cpu "1200m""#,
            r#"    add /spec/containers/0/resources/limits/memory "256Mi""#,
            "    => agent: requests cpu=600m memory=128Mi; limits cpu=1200m memory=256Mi",
        ]
    );
    assert!(table.contains(r#""vpaCpuStartupBoost/agent":"#), "{table}");
}

#[test]
fn an_unknown_gate_or_a_bad_cap_exits_2_naming_the_flag() {
    for (flag, value, why) in [
        (
            "--feature-gates",
            "CPUStartupboost=true",
            r#"unrecognized feature gate "CPUStartupboost" (known: CPUStartupBoost, PerVPAConfig)"#,
        ),
        (
            "--feature-gates",
            "CPUStartupBoost=yes",
            "CPUStartupBoost=yes: a gate is true or false",
        ),
        (
            "--max-allowed-cpu-boost",
            "-1",
            r#"expected a quantity >= 0 (0: no cap), not "-1""#,
        ),
    ] {
        let output = nodescope(&[
            "dry-run",
            "-f",
            "examples/startup-boost/agent.yaml",
            &format!("{flag}={value}"),
        ]);
        assert_exit(&output, 2);
        let placeholder = if flag == "--feature-gates" {
            "<FEATURE_GATES>"
        } else {
            "<MAX_ALLOWED_CPU_BOOST>"
        };
        assert_eq!(
            stderr(&output).lines().next(),
            Some(
                format!("error: invalid value '{value}' for '{flag} {placeholder}': {why}")
                    .as_str()
            )
        );
        assert_eq!(stdout(&output), "");
    }
}

#[test]
fn serve_s_environment_does_not_change_a_dry_run() {
    let mut command = command(&[
        "dry-run",
        "-f",
        "examples/startup-boost/agent.yaml",
        "--recommendations",
        "examples/startup-boost/vpa.yaml",
        "--nodes",
        "node-a-1",
    ]);
    command.env("NODESCOPE_FEATURE_GATES", "CPUStartupBoost=true");
    let output = command.output().expect("runs");
    assert_exit(&output, 0);
    assert!(
        stdout(&output)
            .contains("=> agent: requests cpu=200m memory=128Mi; limits cpu=400m memory=256Mi"),
        "{}",
        stdout(&output)
    );
}
