//! Step `feature-reports`: components report what they observed of the
//! Features they obey, and turning `vpa-node-scope` off waits for them and
//! cleans up after itself. The controller creates the Features nodescope
//! owns; three webhook replicas and the recommender report in
//! `status.uses` (the write rate is measured); `features cleanup
//! --dry-run` lists the patches; with `desired: Disabled` the scoped VPA
//! loses `spec.scope` and its groups without anyone touching it, a stopped
//! replica's report expires and is removed, and `Off` comes only once the
//! paused replica resumes and confirms. The controller's `/metrics` shows
//! the state gauge move.

use crate::features::{feature, reaches, LIMIT};
use crate::support::cluster;
use crate::support::nodescope as ns;
use crate::support::{eventually, ControlPlane, Process};
use kube::api::Api;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const NAMESPACE: &str = "e2e-reports";
/// The replicas' heartbeat: short, so that the step measures a rate in
/// seconds; the default (60s) scales it (docs/operations.md).
const HEARTBEAT_SECONDS: u64 = 2;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn webhook_args(instance: &str, expiry: &str) -> Vec<String> {
    vec![
        format!("--instance={instance}"),
        format!("--report-heartbeat={HEARTBEAT_SECONDS}s"),
        format!("--report-expiry={expiry}"),
        "--status-lease-name=".to_owned(),
    ]
}

fn recommender() -> Process {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodescope"));
    command.args(["recommend", "--store", "kube"]);
    command.arg(format!(
        "--metrics=file:{}",
        root().join("examples/recommend/metrics").display()
    ));
    command.args([
        "--instance",
        "e2e-recommender",
        "--leader-elect-resource-namespace",
        NAMESPACE,
    ]);
    command.args([
        "--leader-elect-resource-name",
        "e2e-reports-recommender",
        "--leader-elect-lease-duration=3s",
    ]);
    command.arg(format!("--report-heartbeat={HEARTBEAT_SECONDS}s"));
    command.arg("--report-expiry=60s");
    command.arg(format!(
        "--address=127.0.0.1:{}",
        crate::support::free_port()
    ));
    let log = std::env::temp_dir().join(format!(
        "nodescope-e2e-reports-recommender-{}.log",
        std::process::id()
    ));
    Process::spawn("recommend", command, log).unwrap_or_else(|e| panic!("{e}"))
}

fn controller(metrics: u16) -> Process {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodescope"));
    command.args(["features", "controller", "--settle", "3s", "--period", "1h"]);
    command.args(["--min-interval", "1s", "--announce=true"]);
    command.args(["--instance", "e2e-reports-controller"]);
    command.args([
        "--lease-namespace",
        NAMESPACE,
        "--lease-name",
        "e2e-reports",
    ]);
    command.arg("--lease-duration=3s");
    command.arg(format!("--metrics-listen=127.0.0.1:{metrics}"));
    let log = std::env::temp_dir().join(format!(
        "nodescope-e2e-reports-controller-{}.log",
        std::process::id()
    ));
    Process::spawn("features controller", command, log).unwrap_or_else(|e| panic!("{e}"))
}

fn scoped_vpa() -> Value {
    json!({"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
           "metadata": {"name": "grandfathered", "namespace": NAMESPACE},
           "spec": {"scope": "node",
                    // Another recommender's: the one running here leaves its status alone.
                    "recommenders": [{"name": "e2e-other"}],
                    "targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"}}})
}

async fn get(client: &kube::Client, object: &Value) -> Option<Value> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let got = cluster::dynamic_api(client, object).get(name).await.ok()?;
    serde_json::to_value(got).ok()
}

/// `component/instance` → `(observedState, lastReportTime)` of the
/// Feature's `status.uses`.
pub(crate) fn entries(feature: &Value) -> BTreeMap<String, (String, String)> {
    feature["status"]["uses"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                format!(
                    "{}/{}",
                    e["component"].as_str().unwrap_or(""),
                    e["instance"].as_str().unwrap_or("")
                ),
                (
                    e["observedState"].as_str().unwrap_or("").to_owned(),
                    e["lastReportTime"].as_str().unwrap_or("").to_owned(),
                ),
            )
        })
        .collect()
}

fn gauge(text: &str, state: &str) -> Option<String> {
    let prefix = format!(
        "nodescope_feature_state{{namespace=\"kube-system\",name=\"vpa-node-scope\",state=\"{state}\"}} "
    );
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
}

fn signal(process: &std::process::Child, signal: libc::c_int) {
    // SAFETY: the pid is our own child, not yet reaped.
    unsafe {
        libc::kill(process.id() as libc::pid_t, signal);
    }
}

pub async fn run(plane: &ControlPlane) {
    let client = plane.client().await;
    cluster::namespace(&client, NAMESPACE).await;
    // The CRDs it uses, as `install` leaves them (applied again: the step
    // also runs alone).
    let crds = cluster::apply_files(
        &client,
        &[
            "policies/feature-crd.yaml",
            "manifests/components/vpa-crd/vpa-crd.yaml",
            "manifests/components/recommender/checkpoint-crd.yaml",
        ],
    )
    .await;
    for crd in &crds {
        eventually("the CRD established", LIMIT, || {
            let (client, crd) = (client.clone(), crd.clone());
            async move {
                let got = get(&client, &crd).await?;
                got["status"]["conditions"]
                    .as_array()?
                    .iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
                    .then_some(())
            }
        })
        .await;
    }
    let gates = cluster::apply_files(&client, &["policies/feature-gates.yaml"]).await;
    let vpa_feature = feature("kube-system", "vpa-node-scope", None);
    let balloon_feature = feature("kube-system", "balloon-pods", None);
    // Whatever earlier steps left: the controller announces them afresh.
    for f in [&vpa_feature, &balloon_feature] {
        cluster::delete(&client, f).await;
        eventually("the Feature gone", LIMIT, || {
            let (client, f) = (client.clone(), f.clone());
            async move { get(&client, &f).await.is_none().then_some(()) }
        })
        .await;
    }

    let metrics_port = crate::support::free_port();
    let running = controller(metrics_port);
    let status = reaches(&client, &vpa_feature, "On").await;
    let announced = get(&client, &vpa_feature).await.unwrap_or_default();
    assert_eq!(
        announced["spec"]["desired"],
        "Enabled",
        "{}",
        running.log_tail()
    );
    assert_eq!(
        announced["spec"]["cleanup"],
        json!([{"group": "autoscaling.k8s.io", "resource": "verticalpodautoscalers", "jsonPointer": "/spec/scope"},
               {"group": "autoscaling.k8s.io", "resource": "verticalpodautoscalers", "jsonPointer": "/status/recommendationGroups"}])
    );
    reaches(&client, &balloon_feature, "On").await;
    println!("  announced by the controller: kube-system/vpa-node-scope and balloon-pods, desired Enabled, On at {}", status["lastTransitionTime"]);

    let a = ns::start(
        plane,
        &webhook_args("e2e-webhook-a", "60s")
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    )
    .await;
    let b = ns::start(
        plane,
        &webhook_args("e2e-webhook-b", "60s")
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    )
    .await;
    let mut c = Some(
        ns::start(
            plane,
            &webhook_args("e2e-webhook-c", "6s")
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        )
        .await,
    );
    let recommending = recommender();
    let reported = eventually(
        "three webhook replicas and the recommender report On",
        LIMIT,
        || {
            let (client, f) = (client.clone(), vpa_feature.clone());
            async move {
                let e = entries(&get(&client, &f).await?);
                let names: Vec<&str> = e.keys().map(String::as_str).collect();
                (names
                    == [
                        "recommender/e2e-recommender",
                        "webhook/e2e-webhook-a",
                        "webhook/e2e-webhook-b",
                        "webhook/e2e-webhook-c",
                    ]
                    && e.values().all(|(state, _)| state == "On"))
                .then_some(e)
            }
        },
    )
    .await;
    println!(
        "  status.uses of vpa-node-scope: {}",
        reported.keys().cloned().collect::<Vec<_>>().join(", ")
    );
    let balloon = eventually(
        "the webhook replicas report on balloon-pods too",
        LIMIT,
        || {
            let (client, f) = (client.clone(), balloon_feature.clone());
            async move {
                let e = entries(&get(&client, &f).await?);
                (e.len() == 3).then_some(e)
            }
        },
    )
    .await;
    assert_eq!(
        balloon.keys().cloned().collect::<Vec<_>>(),
        [
            "webhook/e2e-webhook-a",
            "webhook/e2e-webhook-b",
            "webhook/e2e-webhook-c"
        ]
    );

    // The write load of 3 webhook replicas × 2 Features: every change of
    // an entry's lastReportTime is one write.
    let window = Duration::from_secs(12);
    let started = Instant::now();
    let mut last: BTreeMap<String, String> = BTreeMap::new();
    let mut writes = 0usize;
    while started.elapsed() < window {
        for f in [&vpa_feature, &balloon_feature] {
            let object = get(&client, f).await.unwrap_or_default();
            for (who, (_, time)) in entries(&object) {
                if !who.starts_with("webhook/") {
                    continue;
                }
                let key = format!("{}:{who}", f["metadata"]["name"]);
                if last.get(&key).is_some_and(|t| *t != time) {
                    writes += 1;
                }
                last.insert(key, time);
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let per_minute = writes as f64 * 60.0 / window.as_secs_f64();
    let expected = 6.0 * 60.0 / HEARTBEAT_SECONDS as f64;
    println!(
        "  write load: {writes} reports in {}s from 3 webhook replicas × 2 Features at a {HEARTBEAT_SECONDS}s heartbeat: {per_minute:.0}/min (at most {expected:.0}/min; {:.1}/min at the default 60s)",
        window.as_secs(),
        per_minute * HEARTBEAT_SECONDS as f64 / 60.0
    );
    // A heartbeat every 2 s, checked each second: each entry writes every
    // 2 to 3 s.
    assert!(
        per_minute <= expected + 6.0 && per_minute >= expected * 2.0 / 3.0 - 6.0,
        "{per_minute}/min"
    );

    // A scoped VPA with groups, created while On: a use.
    let vpa = scoped_vpa();
    cluster::apply(&client, &vpa).await;
    let mut with_groups = vpa.clone();
    with_groups["status"] = json!({"recommendationGroups": [
        {"scopeValue": "node-a", "containerRecommendations": [{"containerName": "agent", "target": {"cpu": "100m", "memory": "64Mi"}}]}]});
    let stored = cluster::apply_status(&client, &with_groups).await;
    let version = stored.metadata.resource_version.clone().unwrap_or_default();

    let dry_run = crate::features::cli(
        &[
            "features",
            "cleanup",
            "vpa-node-scope",
            "-n",
            "kube-system",
            "--dry-run",
        ],
        1,
    );
    // Earlier steps of the suite may leave scoped VPAs of their own: each
    // is a use too, listed on its own rows.
    let lines: Vec<&str> = dry_run.lines().collect();
    let rows = &lines[1..lines.len().saturating_sub(1)];
    let mine: Vec<String> = rows
        .iter()
        .filter(|r| r.contains(&format!("{NAMESPACE}/grandfathered")))
        .map(|r| r.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        mine,
        [
            format!("VerticalPodAutoscaler {NAMESPACE}/grandfathered status [{{\"op\":\"test\",\"path\":\"/metadata/resourceVersion\",\"value\":\"{version}\"}},{{\"op\":\"remove\",\"path\":\"/status/recommendationGroups\"}}]"),
            format!("VerticalPodAutoscaler {NAMESPACE}/grandfathered - [{{\"op\":\"test\",\"path\":\"/metadata/resourceVersion\",\"value\":\"{version}\"}},{{\"op\":\"remove\",\"path\":\"/spec/scope\"}}]"),
        ],
        "{dry_run}"
    );
    assert_eq!(
        lines
            .first()
            .map(|l| l.split_whitespace().collect::<Vec<_>>()),
        Some(vec!["OBJECT", "SUBRESOURCE", "PATCH"])
    );
    assert_eq!(
        lines.last().copied(),
        Some(format!("{} patch(es) clear what Feature kube-system/vpa-node-scope declares in spec.cleanup", rows.len()).as_str())
    );
    let planned = rows.len();
    println!(
        "  $ nodescope features cleanup vpa-node-scope -n kube-system --dry-run\n{}",
        crate::features::indent(&dry_run)
    );
    let on = crate::support::nodescope::scrape(metrics_port).await;
    assert_eq!(gauge(&on, "On").as_deref(), Some("1"), "{on}");
    assert_eq!(gauge(&on, "Off").as_deref(), Some("0"), "{on}");

    // c stops (its entry expires 6 s after its last report); b pauses
    // (its entry stays live for 60 s, unconfirmed).
    if let Some(mut stopped) = c.take() {
        let _ = stopped.child.kill();
        let _ = stopped.child.wait();
    }
    signal(&b.child, libc::SIGSTOP);
    let mut disabled = feature("kube-system", "vpa-node-scope", Some("Disabled"));
    disabled["spec"]["cleanup"] = announced["spec"]["cleanup"].clone();
    cluster::apply(&client, &disabled).await;
    reaches(&client, &vpa_feature, "TurningOff").await;
    let cleaned = eventually("the scoped VPA cleaned by the controller", LIMIT, || {
        let (client, vpa) = (client.clone(), vpa.clone());
        async move {
            let object = get(&client, &vpa).await?;
            (object["spec"].get("scope").is_none()
                && object["status"].get("recommendationGroups").is_none())
            .then_some(object)
        }
    })
    .await;
    println!(
        "  TurningOff: VPA {NAMESPACE}/grandfathered now has spec {} and status {}",
        cleaned["spec"], cleaned["status"]
    );
    let waiting = eventually("only the paused replica left to confirm", LIMIT, || {
        let (client, f) = (client.clone(), vpa_feature.clone());
        async move {
            let object = get(&client, &f).await?;
            let tasks = object["status"]["transitionTasks"].clone();
            let gone = !entries(&object).contains_key("webhook/e2e-webhook-c");
            (tasks == json!([{"name": "reports", "count": 1, "description": "not yet confirmed by webhook/e2e-webhook-b"}]) && gone)
                .then_some(object)
        }
    })
    .await;
    println!(
        "  transitionTasks: {}; the stopped replica's report expired and was removed",
        waiting["status"]["transitionTasks"]
    );
    // Past the settle time, no use left: still TurningOff for b alone.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let still = get(&client, &vpa_feature).await.unwrap_or_default();
    assert_eq!(
        still["status"]["state"],
        "TurningOff",
        "{}",
        running.log_tail()
    );
    let turning = crate::support::nodescope::scrape(metrics_port).await;
    assert_eq!(
        gauge(&turning, "TurningOff").as_deref(),
        Some("1"),
        "{turning}"
    );
    assert!(turning.lines().any(|l| l == r#"nodescope_feature_reports_missing{namespace="kube-system",name="vpa-node-scope"} 1"#), "{turning}");
    println!("  5 s past the settle time, b paused: still TurningOff, nodescope_feature_reports_missing 1");

    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let resumed = k8s_openapi::jiff::Timestamp::from_second(now)
        .map(|t| t.to_string())
        .unwrap_or_default();
    signal(&b.child, libc::SIGCONT);
    let off = reaches(&client, &vpa_feature, "Off").await;
    let confirmed = entries(&json!({"status": off}));
    // b has seen TurningOff, and by now maybe Off too.
    assert!(
        matches!(
            confirmed.get("webhook/e2e-webhook-b").map(|e| e.0.as_str()),
            Some("TurningOff" | "Off")
        ),
        "{off}"
    );
    assert!(
        off["lastTransitionTime"].as_str().unwrap_or("") >= resumed.as_str(),
        "{off}"
    );
    println!(
        "  b resumed at {resumed} and confirmed: Off at {}",
        off["lastTransitionTime"]
    );
    let after = eventually("the state gauge at Off", LIMIT, || async {
        let text = crate::support::nodescope::scrape(metrics_port).await;
        (gauge(&text, "Off").as_deref() == Some("1")).then_some(text)
    })
    .await;
    assert_eq!(gauge(&after, "TurningOff").as_deref(), Some("0"));
    assert!(
        after
            .lines()
            .any(|l| l == r#"nodescope_feature_transitions_total{from="TurningOff",to="Off"} 1"#),
        "{after}"
    );
    // Every planned removal was applied (a field written again meanwhile
    // is removed again, so at least that many).
    let applied: usize = after
        .lines()
        .find_map(|l| {
            l.strip_prefix(r#"nodescope_feature_cleanup_patches_total{result="applied"} "#)
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(
        applied >= planned,
        "{applied} applied, {planned} planned:\n{after}"
    );
    println!("  /metrics: nodescope_feature_state{{state=\"Off\"}} 1, TurningOff→Off 1, {applied} cleanup patches applied ({planned} planned)");
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), NAMESPACE);
    let notes = eventually("the Events on the cleaned VPA", LIMIT, || {
        let events = events.clone();
        async move {
            let list = events.list(&Default::default()).await.ok()?.items;
            let mut notes: Vec<String> = list
                .iter()
                .filter(|e| e.reason.as_deref() == Some("FeatureCleanup"))
                .filter_map(|e| e.note.clone())
                .collect();
            notes.sort();
            (notes.len() == 2).then_some(notes)
        }
    })
    .await;
    assert_eq!(
        notes,
        [
            "removed /spec/scope as Feature kube-system/vpa-node-scope turns off (declared in its spec.cleanup)",
            "removed /status/recommendationGroups as Feature kube-system/vpa-node-scope turns off (declared in its spec.cleanup)"
        ]
    );

    println!("  Events on the VPA: FeatureCleanup, {}", notes.join("; "));

    drop(running);
    drop(recommending);
    drop((a, b));
    cluster::delete(&client, &vpa).await;
    for f in [&vpa_feature, &balloon_feature] {
        cluster::delete(&client, f).await;
    }
    for gate in &gates {
        cluster::delete(&client, gate).await;
    }
}
