//! The fault steps (docs/system.md, "Faults"): one fault at a time while
//! the updater has work, each followed by the convergence check, watched by
//! a real Prometheus that scrapes every component through the shipped
//! PodMonitors and evaluates the shipped alerts.
//!
//! The work: the recommender's recordings are replayed by then, so a fault
//! step writes the next recommendation itself, as the recommender's next
//! status write would: each group's (and the VPA-wide) cpu scaled. The
//! updater cannot tell the difference; the OOM step runs the recommender
//! again instead, since the OOM bump is the recommender's.

pub mod apiserver;
pub mod balloon;
pub mod dashboards;
pub mod leader;
pub mod oom;
pub mod watches;
pub mod webhook;

use crate::scenario::{until, World};
use crate::steps::{labels, name, node_of};
use crate::workloads::{daemonset_of, pod_resources, vpa, Targets, NS};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value};
use std::time::Duration;

fn vpas(world: &World) -> Api<DynamicObject> {
    Api::namespaced_with(
        world.admin.clone(),
        NS,
        &crate::support::cluster::api_resource(&vpa("agent")),
    )
}

/// Scales every cpu quantity of `ds`'s recommendations (groups and
/// VPA-wide: target and bounds) by `num/den`, as the recommender's next
/// status write would change them.
pub async fn recommend(world: &World, ds: &str, num: i64, den: i64) {
    let api = vpas(world);
    let object = api
        .get_status(ds)
        .await
        .unwrap_or_else(|e| panic!("VPA {ds}: {e}"));
    let mut status = object.data["status"].clone();
    fn scale(value: &mut Value, num: i64, den: i64) {
        match value {
            Value::Object(map) => {
                for (key, inner) in map.iter_mut() {
                    if key == "cpu" {
                        let milli = crate::kubelet::milli(inner.as_str().unwrap_or("0"));
                        *inner = json!(format!("{}m", milli * num / den));
                    } else {
                        scale(inner, num, den);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| scale(i, num, den)),
            _ => {}
        }
    }
    let mut patch = json!({});
    for field in ["recommendation", "recommendationGroups"] {
        if !status[field].is_null() {
            scale(&mut status[field], num, den);
            patch[field] = status[field].take();
        }
    }
    api.patch_status(
        ds,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": patch })),
    )
    .await
    .unwrap_or_else(|e| panic!("VPA {ds} status: {e}"));
}

/// Sets `ds`'s VPA's `updatePolicy.updateMode`.
pub async fn set_mode(world: &World, ds: &str, mode: &str) {
    vpas(world)
        .patch(
            ds,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"updatePolicy": {"updateMode": mode}}})),
        )
        .await
        .unwrap_or_else(|e| panic!("VPA {ds} updateMode {mode}: {e}"));
}

/// A Lease as the hand-over is measured on it.
pub struct Held {
    pub holder: String,
    /// Seconds since the epoch, with the Lease's microseconds.
    pub acquired: f64,
    pub renewed: f64,
    pub duration: f64,
}

/// Lease `namespace/name`, when someone holds it.
pub async fn holder(world: &World, namespace: &str, name: &str) -> Option<Held> {
    let leases: Api<Lease> = Api::namespaced(world.admin.clone(), namespace);
    let spec = leases.get_opt(name).await.ok()??.spec?;
    let at = |t: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime>| {
        t.map_or(0.0, |t| t.0.as_microsecond() as f64 / 1e6)
    };
    Some(Held {
        holder: spec.holder_identity.filter(|h| !h.is_empty())?,
        acquired: at(spec.acquire_time),
        renewed: at(spec.renew_time),
        duration: f64::from(spec.lease_duration_seconds.unwrap_or(0)),
    })
}

/// Waits until every pod of the scoped DaemonSets (and logger) in `NS` is
/// Running at what its group says now, and returns the targets and pods.
pub async fn at_groups(world: &mut World, what: &str, limit: Duration) -> (Targets, Vec<Pod>) {
    until(world, what, limit, |w| {
        Box::pin(async move {
            let targets = Targets::read(&w.admin).await;
            let pods = w.pods(NS).await;
            let mut off = Vec::new();
            // A replacement not created yet is a pod off too: an evicted
            // pod's DaemonSet is whole again only once it is back.
            let nodes = w.nodes.all().len();
            for ds in crate::workloads::SCOPED {
                let have = pods.iter().filter(|p| daemonset_of(p) == *ds).count();
                if have != nodes {
                    off.push(format!("{ds}: {have} pods on {nodes} nodes"));
                }
            }
            for pod in &pods {
                let Some(shape) = w.nodes.get(&node_of(pod)) else {
                    off.push(format!("{} unbound", name(pod)));
                    continue;
                };
                let want = targets.expected(&daemonset_of(pod), &labels(&shape));
                // A resize condition left on a pod whose resources are all
                // at its group is off too: the updater reads it as a resize
                // still under way (and the pod as disrupted).
                let conditions = crate::steps::resize_conditions(pod);
                if !crate::steps::running(pod)
                    || pod_resources(pod) != [want; 3]
                    || !conditions.is_empty()
                {
                    off.push(format!(
                        "{} on {} {:?} want {want:?} {conditions:?}",
                        name(pod),
                        node_of(pod),
                        pod_resources(pod),
                    ));
                }
            }
            if off.is_empty() {
                Ok((targets, pods))
            } else {
                Err(format!(
                    "{} pods off: {}",
                    off.len(),
                    off.iter().take(6).cloned().collect::<Vec<_>>().join("; ")
                ))
            }
        })
    })
    .await
}

/// Every `agent` pod of `pods` (but those on `except`) was resized exactly
/// once since the ledger's reset, as one recommendation asks, and no pod
/// was deleted; returns how many were checked.
pub fn agent_resized_once(world: &World, pods: &[Pod], except: Option<&str>, what: &str) -> usize {
    let book = world.ledger.book();
    let agents: Vec<&Pod> = pods
        .iter()
        .filter(|p| daemonset_of(p) == "agent" && Some(node_of(p).as_str()) != except)
        .collect();
    for pod in &agents {
        assert_eq!(
            book.resized_pods.get(&name(pod)),
            Some(&1),
            "{}: not resized exactly once for one recommendation {what}",
            name(pod)
        );
    }
    let deleted: usize = book.deleted.values().sum();
    assert_eq!(deleted, 0, "evictions {what}: {:?}", book.deleted_pods);
    agents.len()
}

/// `pod` was created at `want` (cpu millicores, memory bytes) and not
/// resized after.
pub fn created_at(world: &World, pod: &Pod, want: (i64, i64), what: &str) {
    let book = world.ledger.book();
    assert_eq!(
        book.created_with.get(&name(pod)),
        Some(&want),
        "{} on {}: not created {what}",
        name(pod),
        node_of(pod)
    );
    assert_eq!(
        book.resized_pods.get(&name(pod)),
        None,
        "{} resized after creation",
        name(pod)
    );
}

/// What the apiserver refused while fault `number` lasted.
fn refused(world: &World, number: usize, since: k8s_openapi::jiff::Timestamp) {
    crate::scenario::say(
        world.began,
        &format!(
            "fault {number}: API answers of 400 and above meanwhile (audit log): {}",
            crate::report::Report::refused_since(world, since)
        ),
    );
}

pub async fn run(world: &mut World) {
    use k8s_openapi::jiff::Timestamp;
    dashboards::targets_up(world).await;
    let since = Timestamp::now();
    webhook::run(world).await;
    refused(world, 1, since);
    let since = Timestamp::now();
    leader::run(world).await;
    refused(world, 2, since);
    let since = Timestamp::now();
    balloon::run(world).await;
    refused(world, 3, since);
    let since = Timestamp::now();
    oom::run(world).await;
    refused(world, 4, since);
    let since = Timestamp::now();
    apiserver::run(world).await;
    refused(world, 5, since);
    let since = Timestamp::now();
    watches::run(world).await;
    refused(world, 6, since);
    dashboards::run(world).await;
}
