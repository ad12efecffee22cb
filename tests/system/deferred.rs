//! Step 4: a resize that cannot fit now. Before the groups exist, a
//! low-priority batch pod fills node-0000 to 5m of its cpu, so the upsizes
//! of its `agent` and `exporter` pods are `Deferred` by the kubelet. After
//! upstream's `DeferredResizeUpdateTimeout` (5 minutes) the updater evicts
//! them (InPlaceOrRecreate); the DaemonSet controller recreates them, the
//! webhook sizes them at creation, and the scheduler preempts the batch pod
//! to bind them, which is what the eviction was for.

use crate::scenario::{say, until, World};
use crate::steps::{labels, name, node_of, running};
use crate::support::cluster;
use crate::workloads::{daemonset_of, pod_resources, Targets, NS};
use serde_json::json;
use std::time::Duration;

pub const NODE: &str = "node-0000";
const BATCH: &str = "batch";

/// Fills [`NODE`] with a batch pod at priority -10.
pub async fn fill(world: &mut World) {
    let held: i64 = world
        .pods(NS)
        .await
        .iter()
        .chain(world.pods("kube-system").await.iter())
        .filter(|p| node_of(p) == NODE)
        .map(|p| pod_resources(p)[0].0)
        .sum();
    let shape = world.nodes.get(NODE).unwrap_or_else(|| panic!("no {NODE}"));
    let cpu = shape.cpu - held - 5;
    cluster::apply(
        &world.admin,
        &json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "batch-low"}, "value": -10, "preemptionPolicy": "Never",
        "description": "batch work any other pod may preempt"}),
    )
    .await;
    cluster::namespace(&world.admin, BATCH).await;
    cluster::apply(&world.admin, &json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "filler", "namespace": BATCH},
        "spec": {"nodeName": NODE, "priorityClassName": "batch-low", "terminationGracePeriodSeconds": 1,
            "automountServiceAccountToken": false,
            "containers": [{"name": "work", "image": "registry.example/batch:1",
                "resources": {"requests": {"cpu": format!("{cpu}m"), "memory": "64Mi"}}}]}})).await;
    until(
        world,
        "the batch pod Running",
        Duration::from_secs(60),
        |w| {
            Box::pin(async move {
                w.pods(BATCH)
                    .await
                    .iter()
                    .any(running)
                    .then_some(())
                    .ok_or_else(|| "not yet".to_owned())
            })
        },
    )
    .await;
    say(
        world.began,
        &format!(
            "step 4: batch pod at priority -10 holds {cpu}m of {NODE}'s {}m",
            shape.cpu
        ),
    );
}

/// Waits for the two deferred pods to be evicted and replaced at their
/// group, and checks that nothing else was.
pub async fn replaced(world: &mut World) {
    let began = std::time::Instant::now();
    let deferred = world
        .kubelet
        .counts
        .deferred
        .load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        deferred, 2,
        "Deferred answers of the kubelet (agent and exporter on {NODE})"
    );
    let pods = until(
        world,
        "the deferred pods replaced",
        Duration::from_secs(420 + world.n as u64 / 4),
        |w| {
            Box::pin(async move {
                let targets = Targets::read(&w.admin).await;
                let shape = w.nodes.get(NODE).unwrap_or_else(|| panic!("no {NODE}"));
                let book = w.ledger.book();
                let pods: Vec<_> = w
                    .pods(NS)
                    .await
                    .into_iter()
                    .filter(|p| node_of(p) == NODE && daemonset_of(p) != "logger" && running(p))
                    .filter(|p| !book.deleted_pods.contains(&name(p)))
                    .collect();
                let at_group = pods.iter().all(|p| {
                    pod_resources(p) == [targets.expected(&daemonset_of(p), &labels(&shape)); 3]
                });
                if pods.len() == 2 && at_group && book.deleted_pods.len() >= 2 {
                    Ok(pods)
                } else {
                    Err(format!(
                        "{} replacements, deleted {:?}",
                        pods.len(),
                        book.deleted_pods
                    ))
                }
            })
        },
    )
    .await;
    let book = world.ledger.book();
    let evicted: Vec<&String> = book.deleted_pods.iter().collect();
    assert_eq!(evicted.len(), 2, "evictions: {evicted:?}");
    crate::steps::untouched(&book, &pods);
    assert!(
        world.pods(BATCH).await.is_empty(),
        "the batch pod was not preempted"
    );
    say(world.began, &format!(
        "step 4: {NODE}'s agent and exporter Deferred by the kubelet, evicted after upstream's 5 minutes ({} and {}, waited {:.0} s here), recreated at their group with no resize after, the batch pod preempted",
        evicted[0],
        evicted[1],
        began.elapsed().as_secs_f64()
    ));
}
