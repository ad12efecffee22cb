//! Step `feature-contention`: the controller's status write never loses to
//! the reports. Three reporters apply their `status.uses` entries every
//! 500 ms, each write changing the Feature, while a Feature no policy gates
//! goes from `TurningOff` to `Off`. An update conditioned on the
//! resourceVersion a pass read lost to such writes for over 30 s (409 every
//! 1.4 s); the controller's server-side apply of its own fields cannot.
//! `Off` comes within the settle time plus two periods of `TurningOff`, by
//! the Feature's own `lastTransitionTime`s, and the controller never logs a
//! status it could not write.

use crate::features::{feature, reaches, LIMIT};
use crate::support::cluster;
use crate::support::{eventually, ControlPlane, Process};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const NAMESPACE: &str = "e2e-contention";
const SETTLE_SECONDS: i64 = 3;
const PERIOD_SECONDS: i64 = 2;
const REPORTERS: usize = 3;
const REPORT_EVERY: Duration = Duration::from_millis(500);

fn controller(metrics: u16) -> Process {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodescope"));
    command.args(["features", "controller", "--announce=false"]);
    command.arg(format!("--settle={SETTLE_SECONDS}s"));
    command.arg(format!("--period={PERIOD_SECONDS}s"));
    command.args(["--min-interval", "1s"]);
    command.args(["--instance", "e2e-contention-controller"]);
    command.args([
        "--lease-namespace",
        NAMESPACE,
        "--lease-name",
        "e2e-contention",
    ]);
    command.arg("--lease-duration=3s");
    command.arg(format!("--metrics-listen=127.0.0.1:{metrics}"));
    let log = std::env::temp_dir().join(format!(
        "nodescope-e2e-contention-controller-{}.log",
        std::process::id()
    ));
    Process::spawn("features controller", command, log).unwrap_or_else(|e| panic!("{e}"))
}

/// One reporter: every [`REPORT_EVERY`], what it last read of the Feature,
/// applied under its own field manager as `nodescope`'s reporters do, with
/// a report time in milliseconds so that every write changes the object.
async fn report(
    api: Api<DynamicObject>,
    instance: String,
    stop: Arc<AtomicBool>,
    writes: Arc<AtomicUsize>,
) {
    let params = PatchParams::apply(&format!("nodescope-e2e-reporter-{instance}")).force();
    while !stop.load(Ordering::Relaxed) {
        if let Ok(now) = api.get("contended").await {
            let status = now.data.get("status").cloned().unwrap_or(Value::Null);
            let mut entry = json!({
                "component": "e2e-reporter",
                "instance": instance,
                "observedGeneration": now.metadata.generation.unwrap_or(0),
                "lastReportTime": k8s_openapi::jiff::Timestamp::now()
                    .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
                    .to_string(),
                "expirySeconds": 60,
            });
            if let Some(state) = status["state"].as_str() {
                entry["observedState"] = json!(state);
            }
            let body = json!({
                "apiVersion": "featureflags.nodescope.dev/v1alpha1", "kind": "Feature",
                "metadata": {"namespace": NAMESPACE, "name": "contended"},
                "status": {"uses": [entry]},
            });
            if api
                .patch_status("contended", &params, &Patch::Apply(&body))
                .await
                .is_ok()
            {
                writes.fetch_add(1, Ordering::Relaxed);
            }
        }
        tokio::time::sleep(REPORT_EVERY).await;
    }
}

fn transition_time(status: &Value) -> k8s_openapi::jiff::Timestamp {
    status["lastTransitionTime"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no lastTransitionTime in {status}"))
}

pub async fn run(plane: &ControlPlane) {
    let client = plane.client().await;
    cluster::namespace(&client, NAMESPACE).await;
    cluster::apply_files(&client, &["policies/feature-crd.yaml"]).await;
    let contended = feature(NAMESPACE, "contended", Some("Enabled"));
    // Applied until the CRD is served (the step also runs alone).
    eventually("the Feature created", LIMIT, || {
        let (client, contended) = (client.clone(), contended.clone());
        async move {
            cluster::dynamic_api(&client, &contended)
                .patch(
                    "contended",
                    &PatchParams::apply("e2e").force(),
                    &Patch::Apply(&contended),
                )
                .await
                .ok()
        }
    })
    .await;
    let running = controller(crate::support::free_port());
    reaches(&client, &contended, "On").await;

    let api = cluster::dynamic_api(&client, &contended);
    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicUsize::new(0));
    let reporters: Vec<_> = (0..REPORTERS)
        .map(|i| {
            tokio::spawn(report(
                api.clone(),
                format!("r{i}"),
                stop.clone(),
                writes.clone(),
            ))
        })
        .collect();
    // Every reporter is in before the turn, so that Off waits for each.
    eventually("three reports of On", LIMIT, || {
        let api = api.clone();
        async move {
            let now = api.get("contended").await.ok()?;
            let uses = now.data.pointer("/status/uses")?.as_array()?.clone();
            (uses.iter().filter(|u| u["observedState"] == "On").count() == REPORTERS).then_some(())
        }
    })
    .await;

    let before = writes.load(Ordering::Relaxed);
    let mut disabled = contended.clone();
    disabled["spec"]["desired"] = json!("Disabled");
    cluster::apply(&client, &disabled).await;
    let turning = reaches(&client, &contended, "TurningOff").await;
    let off = reaches(&client, &contended, "Off").await;
    let during = writes.load(Ordering::Relaxed) - before;
    stop.store(true, Ordering::Relaxed);
    for reporter in reporters {
        let _ = reporter.await;
    }

    let took = transition_time(&off).duration_since(transition_time(&turning));
    let bound = SETTLE_SECONDS + 2 * PERIOD_SECONDS;
    eprintln!(
        "feature-contention: Off {}s after TurningOff (settle {SETTLE_SECONDS}s + two periods of {PERIOD_SECONDS}s = {bound}s), {during} report writes meanwhile",
        took.as_secs()
    );
    assert!(
        took.as_secs() <= bound,
        "Off {took:?} after TurningOff, more than {bound}s:\n{}",
        running.log_tail()
    );
    // At least one write a second from each reporter while it turned off.
    let least = usize::try_from(SETTLE_SECONDS).unwrap_or(3) * REPORTERS;
    assert!(
        during >= least,
        "only {during} report writes while the Feature turned off (want {least} or more)"
    );
    let log = std::fs::read_to_string(&running.log).unwrap_or_default();
    assert!(
        !log.contains("status not written"),
        "the controller lost a status write:\n{log}"
    );
    cluster::delete(&client, &contended).await;
}
