//! Step 2: the feature lifecycle controller on a real apiserver. A scoped
//! VPA keeps `vpa-node-scope` from turning off: `desired: Disabled` makes
//! it `TurningOff` with a task naming that VPA, new scoped VPAs are refused
//! natively and by the webhook, and once the VPA is gone the Feature is
//! `Off`; `desired: Enabled` brings it back `On`. The same for a third
//! party's Feature gated by its own policy and CRD.

use crate::support::cluster::{self, dry_run_create};
use crate::support::nodescope as ns;
use crate::support::{eventually, ControlPlane, Process};
use kube::api::{Api, DynamicObject};
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

/// Settle time of the controller under test: short, so that the bounds
/// below are the settle time plus the watches' delivery.
const SETTLE: &str = "3s";
/// Longer than the whole step: every transition must come from a watch
/// event (a Feature, a policy, a listed object) or the settle time.
const PERIOD: &str = "1h";
/// The Lease of the leader-election part (`crate::election`), in seconds.
pub const LEASE_SECONDS: u64 = 3;
/// Only bounds a hang: settle (3 s) + min interval (1 s) + slack for a busy machine.
pub const LIMIT: Duration = Duration::from_secs(45);

fn vpa(name: &str) -> Value {
    json!({"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
           "metadata": {"name": name, "namespace": "e2e-features"},
           "spec": {"scope": "node",
                    "targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name}}})
}

pub fn feature(namespace: &str, name: &str, desired: Option<&str>) -> Value {
    let mut f = json!({"apiVersion": "featureflags.nodescope.dev/v1alpha1", "kind": "Feature",
                       "metadata": {"name": name, "namespace": namespace}, "spec": {}});
    if let Some(desired) = desired {
        f["spec"]["desired"] = json!(desired);
    }
    f
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// The Feature's status, once `state` is reached.
pub async fn reaches(client: &kube::Client, feature: &Value, state: &str) -> Value {
    let api = cluster::dynamic_api(client, feature);
    let name = feature["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    eventually(&format!("Feature {name} {state}"), LIMIT, || {
        let (api, name): (Api<DynamicObject>, String) = (api.clone(), name.clone());
        async move {
            let object = api.get(&name).await.ok()?;
            let status = object.data.get("status")?.clone();
            (status["state"] == state).then_some(status)
        }
    })
    .await
}

pub fn controller(instance: &str, lease: &str) -> Process {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodescope"));
    command.args([
        "features",
        "controller",
        "--settle",
        SETTLE,
        "--period",
        PERIOD,
        "--min-interval",
        "1s",
        // The Features this step makes are its own (feature_reports.rs
        // checks the announcement).
        "--announce=false",
    ]);
    command.args(["--instance", instance, "--lease-name", lease]);
    command.arg(format!("--lease-duration={LEASE_SECONDS}s"));
    command.arg(format!(
        "--metrics-listen=127.0.0.1:{}",
        crate::support::free_port()
    ));
    let log = std::env::temp_dir().join(format!(
        "nodescope-e2e-{instance}-{}.log",
        std::process::id()
    ));
    Process::spawn("features controller", command, log).unwrap_or_else(|e| panic!("{e}"))
}

pub async fn run(plane: &ControlPlane) {
    let client = plane.client().await;
    cluster::apply(&client, &namespace("e2e-features")).await;
    let gates = cluster::apply_files(&client, &["policies/feature-gates.yaml"]).await;
    let vpa_feature = feature("kube-system", "vpa-node-scope", None);
    cluster::apply(&client, &vpa_feature).await;
    let mut on = vpa_feature.clone();
    on["status"] = json!({"state": "On"});
    cluster::apply_status(&client, &on).await;
    let kept = vpa("kept");
    eventually(
        "a scoped VPA created while the Feature is On",
        LIMIT,
        || {
            let client = client.clone();
            let kept = kept.clone();
            async move {
                cluster::dynamic_api(&client, &kept)
                    .create(
                        &Default::default(),
                        &serde_json::from_value(kept.clone()).ok()?,
                    )
                    .await
                    .ok()
            }
        },
    )
    .await;

    let mut running = controller("e2e-features-a", "e2e-features");
    cluster::apply(
        &client,
        &feature("kube-system", "vpa-node-scope", Some("Disabled")),
    )
    .await;
    let status = reaches(&client, &vpa_feature, "TurningOff").await;
    assert_eq!(
        status["transitionTasks"],
        json!([{"name": "nodescope-feature-vpa-node-scope", "count": 1,
                "description": "VerticalPodAutoscaler e2e-features/kept"}]),
        "{}",
        running.log_tail()
    );
    println!(
        "  desired Disabled: TurningOff, task {}",
        status["transitionTasks"][0]
    );

    // The same, for people, from the live cluster.
    let uses = cli(
        &["features", "uses", "vpa-node-scope", "-n", "kube-system"],
        1,
    );
    assert_eq!(
        uses,
        "POLICY                             OBJECT                                    MESSAGE\n\
         nodescope-feature-vpa-node-scope   VerticalPodAutoscaler e2e-features/kept   feature \"vpa-node-scope\" is Off: no new uses allowed (a VerticalPodAutoscaler with spec.scope \"node\")\n\
         1 object(s) keep Feature kube-system/vpa-node-scope from turning off\n"
    );
    println!(
        "  $ nodescope features uses vpa-node-scope -n kube-system\n{}",
        indent(&uses)
    );
    let list = cli(&["features"], 0);
    let rows: Vec<Vec<&str>> = list
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        [
            "NAMESPACE",
            "NAME",
            "DESIRED",
            "STATE",
            "USES",
            "LAST-TRANSITION"
        ]
    );
    assert_eq!(
        rows[1][..5],
        [
            "kube-system",
            "vpa-node-scope",
            "Disabled",
            "TurningOff",
            "1"
        ]
    );
    println!("  $ nodescope features\n{}", indent(&list));

    let native = eventually("a new scoped VPA refused natively", LIMIT, || {
        let client = client.clone();
        async move { dry_run_create(&client, &vpa("new")).await.err() }
    })
    .await;
    assert_eq!(
        native,
        "403 verticalpodautoscalers.autoscaling.k8s.io \"new\" is forbidden: ValidatingAdmissionPolicy 'nodescope-feature-vpa-node-scope' with binding 'nodescope-feature-vpa-node-scope' denied request: feature \"vpa-node-scope\" is TurningOff: no new uses allowed (a VerticalPodAutoscaler with spec.scope \"node\")"
    );
    println!("  natively: {native}");
    // The webhook alone: the native binding goes, the webhook comes.
    for gate in gates
        .iter()
        .filter(|g| g["kind"] == "ValidatingAdmissionPolicyBinding")
    {
        cluster::delete(&client, gate).await;
    }
    let server = ns::start(plane, &[]).await;
    let validating = ns::webhook_configuration("validating.yaml", "e2e-features", &server);
    cluster::apply(&client, &validating).await;
    let webhook = eventually("a new scoped VPA refused by the webhook", LIMIT, || {
        let client = client.clone();
        async move {
            dry_run_create(&client, &vpa("new"))
                .await
                .err()
                .filter(|e| e.contains("admission webhook"))
        }
    })
    .await;
    assert_eq!(
        webhook,
        "403 admission webhook \"feature-gates.nodescope.dev\" denied the request: ValidatingAdmissionPolicy 'nodescope-feature-vpa-node-scope' with binding 'nodescope-feature-vpa-node-scope' denied request: feature \"vpa-node-scope\" is TurningOff: no new uses allowed (a VerticalPodAutoscaler with spec.scope \"node\")"
    );
    println!("  by the webhook: {webhook}");
    // The native binding back: the controller reads the cluster's bindings.
    for gate in gates
        .iter()
        .filter(|g| g["kind"] == "ValidatingAdmissionPolicyBinding")
    {
        cluster::apply(&client, gate).await;
    }

    cluster::delete(&client, &kept).await;
    let status = reaches(&client, &vpa_feature, "Off").await;
    assert_eq!(status["transitionTasks"], json!([]));
    println!("  VPA deleted: Off at {}", status["lastTransitionTime"]);

    cluster::apply(
        &client,
        &feature("kube-system", "vpa-node-scope", Some("Enabled")),
    )
    .await;
    let status = reaches(&client, &vpa_feature, "On").await;
    println!("  desired Enabled: On at {}", status["lastTransitionTime"]);
    eventually("a scoped VPA admitted again", LIMIT, || {
        let client = client.clone();
        async move { dry_run_create(&client, &vpa("new")).await.ok() }
    })
    .await;
    println!("  a scoped VPA is admitted again");

    let reasons = eventually("the controller's Events on the Feature", LIMIT, || {
        let events: Api<k8s_openapi::api::events::v1::Event> =
            Api::namespaced(client.clone(), "kube-system");
        async move {
            let mut list = events.list(&Default::default()).await.ok()?.items;
            list.retain(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("vpa-node-scope")
                    && e.reporting_controller.as_deref() == Some("nodescope-features")
            });
            list.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
            let reasons: Vec<String> = list.iter().filter_map(|e| e.reason.clone()).collect();
            (reasons.len() >= 4).then_some(reasons)
        }
    })
    .await;
    assert_eq!(reasons, ["TurningOff", "Off", "TurningOn", "On"]);
    println!("  Events on the Feature: {}", reasons.join(", "));

    third_party(&client, &running).await;

    running.stop(Duration::from_secs(5));
    crate::election::run(&client).await;

    // Leave the cluster as the later steps expect it: no controller, the
    // Features On without desired, no native gates, no webhook.
    cluster::apply(&client, &vpa_feature).await;
    cluster::apply_status(&client, &on).await;
    cluster::delete(&client, &validating).await;
    for gate in &gates {
        cluster::delete(&client, gate).await;
    }
    drop(server);
}

/// A third party's Feature, gated by its own policy on its own CRD's kind:
/// the controller finds its uses through discovery, knowing no kind.
async fn third_party(client: &kube::Client, running: &Process) {
    let objects = cluster::documents("examples/features/acme/objects.yaml");
    let policy = cluster::documents("examples/features/acme/policy.yaml");
    for ns in ["acme-system", "ml"] {
        cluster::apply(client, &namespace(ns)).await;
    }
    let crd = objects
        .iter()
        .find(|o| o["kind"] == "CustomResourceDefinition")
        .cloned()
        .unwrap_or_default();
    cluster::apply(client, &crd).await;
    for object in &policy {
        cluster::apply(client, object).await;
    }
    let shares: Vec<Value> = objects
        .iter()
        .filter(|o| o["kind"] == "GpuShare")
        .cloned()
        .collect();
    for share in &shares {
        let share = share.clone();
        eventually(
            &format!("GpuShare {} created", share["metadata"]["name"]),
            LIMIT,
            || {
                let (client, share) = (client.clone(), share.clone());
                async move {
                    let typed: DynamicObject = serde_json::from_value(share.clone()).ok()?;
                    match cluster::dynamic_api(&client, &share)
                        .create(&Default::default(), &typed)
                        .await
                    {
                        Ok(created) => Some(created),
                        Err(kube::Error::Api(s)) if s.code == 409 => Some(typed),
                        Err(_) => None,
                    }
                }
            },
        )
        .await;
    }
    let acme = feature("acme-system", "gpu-sharing", Some("Disabled"));
    cluster::apply(client, &acme).await;
    let status = reaches(client, &acme, "TurningOff").await;
    assert_eq!(
        status["transitionTasks"],
        json!([{"name": "acme-gpu-sharing", "count": 1, "description": "GpuShare ml/train"}]),
        "{}",
        running.log_tail()
    );
    println!(
        "  third party gpu-sharing: TurningOff, task {}",
        status["transitionTasks"][0]
    );
    for share in &shares {
        cluster::delete(client, share).await;
    }
    let status = reaches(client, &acme, "Off").await;
    assert_eq!(status["transitionTasks"], json!([]));
    println!("  GpuShares deleted: gpu-sharing Off");
    for object in policy.iter().rev() {
        cluster::delete(client, object).await;
    }
    cluster::delete(client, &acme).await;
}

/// Runs `nodescope ARGS` against the control plane (KUBECONFIG is set for
/// the whole suite) and returns its stdout, asserting the exit code.
pub fn cli(args: &[&str], code: i32) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_nodescope"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("nodescope {args:?}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(
        output.status.code(),
        Some(code),
        "nodescope {args:?}:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

pub fn indent(text: &str) -> String {
    text.lines().map(|l| format!("    {l}\n")).collect()
}
