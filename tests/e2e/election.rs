//! Part of step 2 (`features`): two controller replicas on one Lease. Only
//! the leader writes; a leader stopped with SIGTERM hands over within
//! `released_handover`, one killed with SIGKILL within `crashed_handover`
//! of its last renewal: the bounds of `nodescope::leader`, which
//! docs/operations.md and `--lease-duration`'s help state.

use crate::features::{controller, feature, reaches, LEASE_SECONDS, LIMIT};
use crate::support::{cluster, eventually, Process};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::runtime::watcher::{self, watcher, Event};
use nodescope::leader::LeaseConfig;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

const NAMESPACE: &str = "nodescope-system";
const LEASE: &str = "e2e-features-leader";

/// One version of the Lease, as the test's own watch received it.
#[derive(Debug, Clone)]
struct Version {
    holder: Option<String>,
    acquired: Option<SystemTime>,
    renewed: Option<SystemTime>,
    received: SystemTime,
}

/// Every version of the Lease from its start on: the hand-overs are read
/// from the Lease's own times, not from polling.
struct Versions {
    seen: Arc<Mutex<Vec<Version>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Versions {
    fn record(client: &kube::Client) -> Versions {
        let api: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            let config = watcher::Config::default().fields(&format!("metadata.name={LEASE}"));
            let mut events = watcher(api, config).boxed();
            while let Some(event) = events.next().await {
                let (Ok(Event::Apply(lease)) | Ok(Event::InitApply(lease))) = event else {
                    continue;
                };
                let spec = lease.spec.unwrap_or_default();
                let version = Version {
                    holder: spec.holder_identity,
                    acquired: spec.acquire_time.map(|t| t.0.into()),
                    renewed: spec.renew_time.map(|t| t.0.into()),
                    received: SystemTime::now(),
                };
                if let Ok(mut seen) = into.lock() {
                    seen.push(version);
                }
            }
        });
        Versions { seen, task }
    }

    fn all(&self) -> Vec<Version> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The first version `holder` held, once the watch has delivered it.
    async fn taken_by(&self, holder: &str) -> Version {
        eventually(&format!("a Lease version held by {holder}"), LIMIT, || {
            let first = self
                .all()
                .into_iter()
                .find(|v| v.holder.as_deref() == Some(holder));
            async move { first }
        })
        .await
    }

    /// The last `renewTime` written by `holder`.
    fn last_renewal(&self, holder: &str) -> SystemTime {
        self.all()
            .iter()
            .filter(|v| v.holder.as_deref() == Some(holder))
            .filter_map(|v| v.renewed)
            .max()
            .unwrap_or_else(|| panic!("no renewal by {holder} seen: {:?}", self.all()))
    }
}

impl Drop for Versions {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `later - earlier`, which must not be negative.
fn since(later: SystemTime, earlier: SystemTime, what: &str) -> Duration {
    later
        .duration_since(earlier)
        .unwrap_or_else(|e| panic!("{what}: {:?} too early", e.duration()))
}

/// The holder of the Lease, once it has one other than `not`.
async fn holder(client: &kube::Client, not: Option<&str>) -> String {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    eventually(
        &format!("Lease {LEASE} held (not by {not:?})"),
        LIMIT,
        || {
            let leases = leases.clone();
            async move {
                let lease = leases.get(LEASE).await.ok()?;
                let holder = lease.spec?.holder_identity?;
                (Some(holder.as_str()) != not).then_some(holder)
            }
        },
    )
    .await
}

/// The replicas whose status writes the Feature's managedFields keep (a
/// writer whose every field a later writer took over drops out), and the
/// one that owns `status.state`: the last to change it.
async fn status_writers(client: &kube::Client, feature: &Value) -> (Vec<String>, String) {
    let api = cluster::dynamic_api(client, feature);
    let name = feature["metadata"]["name"].as_str().unwrap_or_default();
    let object = api
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("reading Feature {name}: {e}"));
    let mut writers = Vec::new();
    let mut state = String::new();
    for entry in object.metadata.managed_fields.unwrap_or_default() {
        if entry.subresource.as_deref() != Some("status") {
            continue;
        }
        let Some(writer) = entry
            .manager
            .as_deref()
            .and_then(|m| m.strip_prefix("nodescope-features/"))
        else {
            continue;
        };
        let owns_state = entry
            .fields_v1
            .as_ref()
            .and_then(|f| serde_json::to_value(f).ok())
            .is_some_and(|f| f.pointer("/f:status/f:state").is_some());
        if owns_state {
            writer.clone_into(&mut state);
        }
        writers.push(writer.to_owned());
    }
    writers.sort();
    (writers, state)
}

/// `desired` on a Feature no policy gates: nothing uses it, so the state
/// follows the settle time; returns [`status_writers`].
async fn turn(client: &kube::Client, desired: &str, state: &str) -> (Vec<String>, String) {
    let ungated = feature("e2e-features", "ungated", Some(desired));
    cluster::apply(client, &ungated).await;
    reaches(client, &ungated, state).await;
    status_writers(client, &ungated).await
}

fn take(replicas: &mut Vec<(String, Process)>, name: &str) -> Process {
    let index = replicas
        .iter()
        .position(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("{name} is not a replica"));
    replicas.remove(index).1
}

pub async fn run(client: &kube::Client) {
    let bounds = LeaseConfig {
        namespace: NAMESPACE.to_owned(),
        name: LEASE.to_owned(),
        duration: Duration::from_secs(LEASE_SECONDS),
    };
    let versions = Versions::record(client);
    let start = |name: &str| (name.to_owned(), controller(name, LEASE));
    let mut replicas = vec![start("e2e-features-b"), start("e2e-features-c")];
    let first = holder(client, None).await;
    println!("  two replicas: {first} holds Lease {NAMESPACE}/{LEASE} ({LEASE_SECONDS} s)");
    let (writers, state) = turn(client, "Disabled", "Off").await;
    assert_eq!((writers, state), (vec![first.clone()], first.clone()));
    println!("  TurningOff and Off written by {first} alone");

    // A pod deletion: SIGTERM, and the leader releases the Lease.
    let mut stopped = take(&mut replicas, &first);
    let asked = SystemTime::now();
    stopped.stop(Duration::from_secs(5));
    let exit = stopped.exited();
    assert!(
        exit.is_some_and(|e| e.success()),
        "{first} after SIGTERM: {exit:?}\n{}",
        stopped.log_tail()
    );
    assert!(
        stopped.log_tail().contains("released the Lease"),
        "{}",
        stopped.log_tail()
    );
    let second = holder(client, Some(&first)).await;
    let taken = versions.taken_by(&second).await;
    let acquired = taken.acquired.unwrap_or_else(|| panic!("{taken:?}"));
    let handover = since(acquired, asked, "acquired before the SIGTERM");
    println!(
        "  {first} stopped (SIGTERM, released): {second} acquired the Lease {:.3} s later, seen {:.3} s later (bound {:?})",
        handover.as_secs_f64(),
        since(taken.received, asked, "seen before the SIGTERM").as_secs_f64(),
        bounds.released_handover()
    );
    assert!(
        handover <= bounds.released_handover(),
        "{handover:?} > {:?}: {:?}",
        bounds.released_handover(),
        versions.all()
    );
    replicas.push(start("e2e-features-d"));
    let (writers, state) = turn(client, "Enabled", "On").await;
    assert_eq!(state, second, "{writers:?}");
    assert!(
        writers.iter().all(|w| [&first, &second].contains(&w)),
        "{writers:?}"
    );
    println!("  TurningOn and On written by {second}");

    // A crash: SIGKILL, and the Lease must expire first.
    let mut killed = take(&mut replicas, &second);
    let kill = SystemTime::now();
    let _ = killed.child.kill();
    let _ = killed.child.wait();
    let third = holder(client, Some(&second)).await;
    let taken = versions.taken_by(&third).await;
    let acquired = taken.acquired.unwrap_or_else(|| panic!("{taken:?}"));
    let renewed = versions.last_renewal(&second);
    let after_renewal = since(acquired, renewed, "acquired before the last renewal");
    let after_kill = since(acquired, kill, "acquired before the kill");
    let window = bounds.crashed_handover();
    println!(
        "  {second} killed (SIGKILL): {third} acquired the Lease {:.3} s after the kill, {:.3} s after {second}'s last renewal (bounds: {:?} to {:?} after the renewal, at most {:?} after the kill)",
        after_kill.as_secs_f64(),
        after_renewal.as_secs_f64(),
        window.start(),
        window.end(),
        window.end()
    );
    assert!(
        window.contains(&after_renewal),
        "{after_renewal:?} not in {window:?}: {:?}",
        versions.all()
    );
    assert!(
        after_kill <= *window.end(),
        "{after_kill:?} > {:?}: {:?}",
        window.end(),
        versions.all()
    );
    let (writers, state) = turn(client, "Disabled", "Off").await;
    assert_eq!(state, third, "{writers:?}");
    assert!(
        writers
            .iter()
            .all(|w| [&first, &second, &third].contains(&w)),
        "{writers:?}"
    );
    println!("  TurningOff and Off written by {third}");
    for (_, replica) in &mut replicas {
        replica.stop(Duration::from_secs(5));
    }
    cluster::delete(client, &feature("e2e-features", "ungated", None)).await;
}
