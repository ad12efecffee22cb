//! Optional CRDs (issue #30): a cluster with the VPA CRD and nothing else
//! of nodescope's (the updater installed beside upstream VPA, or a CRD
//! removed during an upgrade). Runs first, before `install` creates the
//! rest.
//!
//! Every long-running component starts without the Feature and checkpoint
//! CRDs and works: the webhook becomes ready and sizes a pod, the updater
//! resizes one, the recommender, the balloon controller and the features
//! controller run. Then the Feature CRD is created: the features controller
//! creates the Features nodescope owns, every component reports in them,
//! and the webhook and the updater obey `vpa-node-scope` turning off.
//! Leaves no Feature CRD behind (deleted at the end).

use crate::feature_reports::entries;
use crate::support::cluster::{self, apply, apply_status};
use crate::support::nodescope as ns;
use crate::support::{eventually, ControlPlane, Process};
use crate::update::{daemonset, spec_of, status, updater_in, webhook_lease_in};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const NS: &str = "e2e-optional";
const NODE: &str = "e2e-opt-n1";
/// A watcher retries a missing kind with backoff of up to 30 s.
const LIMIT: Duration = Duration::from_secs(75);
const HEARTBEAT: &str = "--report-heartbeat=2s";
const EXPIRY: &str = "--report-expiry=60s";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn here(mut object: Value) -> Value {
    object["metadata"]["namespace"] = json!(NS);
    object
}

/// A node-scoped VPA whose group gives `NODE` 300m/300Mi, the VPA-wide
/// recommendation 150m/150Mi; another recommender's, so the one running
/// here leaves its status alone.
fn vpa() -> Value {
    let target = |cpu: &str, memory: &str| json!({"containerRecommendations": [{"containerName": "agent", "target": {"cpu": cpu, "memory": memory}}]});
    let mut group = target("300m", "300Mi");
    group["scopeValue"] = json!(NODE);
    json!({"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "agent", "namespace": NS},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"},
                 "scope": "node", "recommenders": [{"name": "e2e-other"}],
                 "updatePolicy": {"updateMode": "InPlaceOrRecreate"}},
        "status": {"recommendation": target("150m", "150Mi"), "recommendationGroups": [group]}})
}

/// The DaemonSet controller's pod for `NODE`, before admission.
fn created_pod(name: &str, uid: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": "agent"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": uid, "controller": true}]},
        "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}]}}},
            "containers": [{"name": "agent", "image": "registry.example/agent:1",
                "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}, "limits": {"cpu": "200m", "memory": "200Mi"}}}]}})
}

fn spawn(name: &'static str, instance: &str, args: &[String]) -> Process {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodescope"));
    command.args(args);
    let log = std::env::temp_dir().join(format!(
        "nodescope-e2e-{instance}-{}.log",
        std::process::id()
    ));
    Process::spawn(name, command, log).unwrap_or_else(|e| panic!("{e}"))
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

fn recommender(port: u16) -> Process {
    let mut args = strings(&[
        "recommend",
        "--store",
        "kube",
        "--instance",
        "e2e-opt-recommender",
    ]);
    args.push(format!(
        "--metrics=file:{}",
        root().join("examples/recommend/metrics").display()
    ));
    args.extend(strings(&[
        "--leader-elect-resource-namespace",
        NS,
        "--leader-elect-lease-duration=3s",
        HEARTBEAT,
        EXPIRY,
    ]));
    args.extend(strings(&["--recommender-interval=1s"]));
    args.push(format!("--address=127.0.0.1:{port}"));
    spawn("recommend", "e2e-opt-recommender", &args)
}

fn balloon(port: u16) -> Process {
    let mut args = strings(&["balloon", "controller", "--interval", "500ms"]);
    args.extend(strings(&[
        "--instance",
        "e2e-opt-balloon",
        "--lease-namespace",
        NS,
    ]));
    args.extend(strings(&["--lease-duration", "3s", HEARTBEAT, EXPIRY]));
    args.push(format!("--metrics-listen=127.0.0.1:{port}"));
    spawn("balloon", "e2e-opt-balloon", &args)
}

fn features(port: u16) -> Process {
    let mut args = strings(&["features", "controller", "--settle", "1s", "--period", "2s"]);
    args.extend(strings(&["--min-interval", "1s", "--announce=true"]));
    args.extend(strings(&[
        "--instance",
        "e2e-opt-features",
        "--lease-namespace",
        NS,
    ]));
    args.extend(strings(&[
        "--lease-name",
        "e2e-opt-features",
        "--lease-duration=3s",
    ]));
    args.push(format!("--metrics-listen=127.0.0.1:{port}"));
    spawn("features controller", "e2e-opt-features", &args)
}

/// `GET http://127.0.0.1:{port}{path}`'s status code (0 when nothing answers).
async fn probe(port: u16, path: &str) -> u16 {
    let url = format!("http://127.0.0.1:{port}{path}");
    tokio::task::spawn_blocking(move || {
        Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", &url])
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).parse().ok())
            .unwrap_or(0)
    })
    .await
    .unwrap_or(0)
}

async fn ready(what: &str, port: u16) {
    eventually(&format!("{what} /readyz"), LIMIT, || async move {
        (probe(port, "/readyz").await == 200).then_some(())
    })
    .await;
}

async fn feature(client: &kube::Client, name: &str) -> Option<Value> {
    let object = json!({"apiVersion": "featureflags.nodescope.dev/v1alpha1", "kind": "Feature",
                        "metadata": {"name": name, "namespace": "kube-system"}});
    let got = cluster::dynamic_api(client, &object).get(name).await.ok()?;
    serde_json::to_value(got).ok()
}

/// The cpu request a dry-run create of a new pod of the DaemonSet gets.
async fn admitted_cpu(client: &kube::Client, uid: &str) -> String {
    let created = cluster::dry_run_create(client, &created_pod("agent-dry", uid))
        .await
        .unwrap_or_else(|e| panic!("dry-run pod: {e}"));
    let value = serde_json::to_value(created).unwrap_or_default();
    value["spec"]["containers"][0]["resources"]["requests"]["cpu"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

pub async fn run(plane: &ControlPlane) {
    let client = plane.client().await;
    cluster::apply_files(&client, &["manifests/components/vpa-crd/vpa-crd.yaml"]).await;
    cluster::established(&client, "verticalpodautoscalers.autoscaling.k8s.io").await;
    apply(
        &client,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    )
    .await;
    apply(
        &client,
        &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}}),
    )
    .await;
    apply_status(&client, &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE},
        "status": {"capacity": {"cpu": "8", "memory": "16Gi", "pods": "110"}, "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}})).await;
    let ds = apply(&client, &here(daemonset("agent", 1))).await;
    apply_status(&client, &here(daemonset("agent", 1))).await;
    let uid = ds.metadata.uid.unwrap_or_default();
    apply(&client, &vpa()).await;
    apply_status(&client, &vpa()).await;

    // A running pod at the template's values, created before the webhook
    // is registered: the updater's to resize.
    let name = "agent-e2e-opt-n1";
    let mut running = created_pod(name, &uid);
    running["spec"]["nodeName"] = json!(NODE);
    running["spec"]
        .as_object_mut()
        .map(|s| s.remove("affinity"));
    apply(&client, &running).await;
    let template = json!({"requests": {"cpu": "100m", "memory": "100Mi"}, "limits": {"cpu": "200m", "memory": "200Mi"}});
    apply_status(&client, &here(status(name, &template, false))).await;
    webhook_lease_in(&client, NS, 0).await;
    // The webhook: ready without the Feature CRD, and it sizes a new pod.
    let server = ns::start(
        plane,
        &[
            "--instance=e2e-opt-webhook",
            HEARTBEAT,
            EXPIRY,
            "--status-lease-name=",
        ],
    )
    .await;
    println!("  webhook: ready with only the VPA CRD");
    let config = ns::webhook_configuration("mutating.yaml", "e2e-optional", &server);
    apply(&client, &config).await;
    let cpu = eventually("the webhook sizes a new pod", LIMIT, || async {
        let cpu = admitted_cpu(&client, &uid).await;
        (cpu == "300m").then_some(cpu)
    })
    .await;
    println!("  webhook: a new pod gets its node's group ({cpu})");

    let (updater_port, recommender_port) =
        (crate::support::free_port(), crate::support::free_port());
    let (balloon_port, features_port) = (crate::support::free_port(), crate::support::free_port());
    let mut processes = vec![
        updater_in(NS, "e2e-opt-updater", updater_port, &[HEARTBEAT, EXPIRY]),
        recommender(recommender_port),
        balloon(balloon_port),
        features(features_port),
    ];
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    assert_eq!(
        spec_of(&pods, name).await.0,
        "100m",
        "stored as the template has it"
    );
    let resized = eventually("the updater resizes the pod", LIMIT, || async {
        let spec = spec_of(&pods, name).await;
        (spec.0 == "300m").then_some(spec)
    })
    .await;
    assert_eq!(
        (
            resized.0.as_str(),
            resized.1.as_str(),
            resized.2.as_str(),
            resized.3.as_str()
        ),
        ("300m", "300Mi", "600m", "600Mi")
    );
    println!("  updater: resized in place to the group with only the VPA CRD");
    for (what, port) in [
        ("updater", updater_port),
        ("recommender", recommender_port),
        ("balloon controller", balloon_port),
        ("features controller", features_port),
    ] {
        ready(what, port).await;
        println!("  {what}: ready with only the VPA CRD");
    }

    // The Feature CRD arrives: the controller creates the Features, every
    // component finds them and reports.
    cluster::apply_files(&client, &["manifests/base/policies/feature-crd.yaml"]).await;
    cluster::established(&client, "features.featureflags.nodescope.dev").await;
    for (name, reporters) in [
        (
            "vpa-node-scope",
            &[
                "webhook/e2e-opt-webhook",
                "recommender/e2e-opt-recommender",
                "updater/e2e-opt-updater",
            ][..],
        ),
        (
            "balloon-pods",
            &[
                "webhook/e2e-opt-webhook",
                "balloon-controller/e2e-opt-balloon",
            ][..],
        ),
    ] {
        let object = eventually(&format!("Feature {name} On, reported"), LIMIT, || async {
            let object = feature(&client, name).await?;
            let seen = entries(&object);
            let all = reporters.iter().all(|r| seen.contains_key(*r));
            (object["status"]["state"] == "On" && all).then_some(object)
        })
        .await;
        assert_eq!(object["spec"]["desired"], "Enabled", "{name}");
        println!("  Feature {name}: created by the controller, On, reported by {reporters:?}");
    }

    // The features controller stops; the Feature is turned off by hand, and
    // the webhook and the updater obey it.
    if let Some(mut controller) = processes.pop() {
        controller.stop(Duration::from_secs(5));
    }
    let off = json!({"apiVersion": "featureflags.nodescope.dev/v1alpha1", "kind": "Feature",
        "metadata": {"name": "vpa-node-scope", "namespace": "kube-system"}, "status": {"state": "TurningOff"}});
    apply_status(&client, &off).await;
    eventually("the webhook gives the VPA-wide value", LIMIT, || async {
        (admitted_cpu(&client, &uid).await == "150m").then_some(())
    })
    .await;
    println!("  webhook: with vpa-node-scope TurningOff, a new pod gets the VPA-wide 150m");
    let reason = eventually("the updater's plan obeys the Feature", LIMIT, || async {
        let out = Command::new(env!("CARGO_BIN_EXE_nodescope"))
            .args(["update", "--plan", "--store", "kube", "-o", "json"])
            .output()
            .ok()?;
        let plan: Value = serde_json::from_slice(&out.stdout).ok()?;
        let item = plan["items"]
            .as_array()?
            .iter()
            .find(|p| p["pod"] == name)?
            .clone();
        let reason = item["message"].as_str()?.to_owned();
        (item["reason"] == "feature not On"
            && reason == "feature kube-system/vpa-node-scope is TurningOff")
            .then_some(reason)
    })
    .await;
    println!("  updater: {reason}");

    for process in &mut processes {
        process.stop(Duration::from_secs(5));
    }
    drop(server);
    cluster::delete(&client, &config).await;
    // Later steps count scoped VPAs and look at every Node: leave none of
    // this step's (without controllers, a deleted Namespace keeps them).
    cluster::delete(&client, &vpa()).await;
    // Grace 0: with no kubelet, a bound pod deleted gracefully stays Terminating.
    let _ = pods
        .delete(name, &DeleteParams::default().grace_period(0))
        .await;
    cluster::delete(&client, &here(daemonset("agent", 1))).await;
    cluster::delete(
        &client,
        &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}}),
    )
    .await;
    // The later steps install the Feature CRD themselves and expect none of
    // this step's Features.
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    let _ = crds
        .delete(
            "features.featureflags.nodescope.dev",
            &DeleteParams::default(),
        )
        .await;
    // ...nor the Events of this step's Features, which later steps count.
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(client.clone(), "kube-system");
    for event in events
        .list(&Default::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        if event.involved_object.kind.as_deref() == Some("Feature") {
            let name = event.metadata.name.unwrap_or_default();
            let _ = events.delete(&name, &DeleteParams::default()).await;
        }
    }
    eventually("the Feature CRD is gone", LIMIT, || async {
        crds.get_opt("features.featureflags.nodescope.dev")
            .await
            .ok()
            .and_then(|c| c.is_none().then_some(()))
    })
    .await;
}
