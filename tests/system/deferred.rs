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
    world.deferred = world
        .pods(NS)
        .await
        .iter()
        .filter(|p| node_of(p) == NODE && daemonset_of(p) != "logger")
        .map(name)
        .collect();
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

/// Waits until both deferred pods are at their group again, on
/// [`NODE`]: the first whose five minutes pass is evicted and recreated at
/// its group (the scheduler preempting the batch pod for it); the other is
/// evicted too if its five minutes passed in the same pass, else the
/// kubelet, retrying it once the batch pod is gone, actuates it in place.
/// Nothing else is evicted.
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
    let originals = world.deferred.clone();
    assert_eq!(originals.len(), 2, "{originals:?}");
    let pods = until(
        world,
        "the deferred pods at their group",
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
                if pods.len() == 2 && at_group && !book.deleted_pods.is_empty() {
                    Ok(pods)
                } else {
                    Err(format!(
                        "{} pods, deleted {:?}",
                        pods.len(),
                        book.deleted_pods
                    ))
                }
            })
        },
    )
    .await;
    let book = world.ledger.book();
    let evicted = &book.deleted_pods;
    assert!(
        !evicted.is_empty() && evicted.len() <= 2 && evicted.iter().all(|p| originals.contains(p)),
        "evictions {evicted:?}, deferred {originals:?}"
    );
    let (kept, replacements): (Vec<_>, Vec<_>) =
        pods.into_iter().partition(|p| originals.contains(&name(p)));
    crate::steps::untouched(&book, &replacements);
    for pod in &kept {
        assert_eq!(
            book.resized_pods.get(&name(pod)),
            Some(&1),
            "{}: one resize",
            name(pod)
        );
    }
    assert!(
        world.pods(BATCH).await.is_empty(),
        "the batch pod was not preempted"
    );
    let words = |pods: &[k8s_openapi::api::core::v1::Pod]| {
        pods.iter().map(name).collect::<Vec<_>>().join(", ")
    };
    say(world.began, &format!(
        "step 4: {NODE}'s agent and exporter Deferred by the kubelet; after upstream's 5 minutes {} evicted ({evicted:?}), recreated at their group with no resize after ({}), the batch pod preempted; {} then resized in place ({:.0} s waited here)",
        evicted.len(),
        words(&replacements),
        if kept.is_empty() { "none".to_owned() } else { words(&kept) },
        began.elapsed().as_secs_f64()
    ));
}
