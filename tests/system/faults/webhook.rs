//! Fault 1: both webhook replicas stop. The updater stops evicting within
//! one status-Lease timeout and goes on resizing in place; a node joining
//! meanwhile gets its pods unmutated (the mutating webhook's failurePolicy
//! is Ignore); `NodescopeWebhookDown` fires. Once the replicas are back, the
//! held evictions happen within the tolerance, every replacement is sized
//! at creation, the unmutated pods reach their group, and the alert
//! resolves.

use super::{at_groups, created_at, recommend, set_mode};
use crate::ledger::Book;
use crate::scenario::{say, until, World, TOLERANCE};
use crate::steps::{labels, name, node_of};
use crate::workloads::{daemonset_of, Targets, NS, TEMPLATE};
use std::time::{Duration, Instant};

pub const REPLICAS: [&str; 2] = ["nodescope-webhook-a", "nodescope-webhook-b"];

/// The updater's `--admission-controller-status-lease-timeout` here
/// (shipped: 1m), and the webhook's renewal interval (shipped: 10s).
pub const LEASE_TIMEOUT: Duration = Duration::from_secs(10);

/// The leading updater's view of the webhook's Lease, from Prometheus.
const FRESH: &str =
    "max(nodescope_updater_webhook_lease_fresh and on (instance) (nodescope_updater_leader == 1))";

async fn fresh(world: &mut World, want: f64, limit: Duration) -> Duration {
    let began = Instant::now();
    until(
        world,
        &format!("the leading updater's webhook_lease_fresh {want}"),
        limit,
        |w| {
            Box::pin(async move {
                match w.prometheus.value(FRESH).await {
                    Some(v) if v == want => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            })
        },
    )
    .await;
    began.elapsed()
}

pub async fn alert_state(world: &mut World, alert: &'static str, want: &'static str) {
    until(
        world,
        &format!("{alert} {want}"),
        Duration::from_secs(60),
        move |w| {
            Box::pin(async move {
                let state = w.prometheus.alert(alert).await;
                if state == want {
                    Ok(())
                } else {
                    Err(state)
                }
            })
        },
    )
    .await;
}

pub async fn run(world: &mut World) {
    assert_eq!(
        world.prometheus.alert("NodescopeWebhookDown").await,
        "inactive"
    );
    fresh(world, 1.0, Duration::from_secs(30)).await;
    let template = (
        crate::kubelet::milli(TEMPLATE.0),
        crate::kubelet::bytes(TEMPLATE.1),
    );
    world.ledger.reset();
    world.ledger.measure(true);
    let stopped = Instant::now();
    for replica in REPLICAS {
        world.component_mut(replica).stop(false);
    }
    let stale = fresh(world, 0.0, LEASE_TIMEOUT + Duration::from_secs(20)).await;
    say(
        world.began,
        &format!(
            "fault 1: both webhook replicas stopped; the leading updater saw the Lease stale {:.1} s later (timeout {LEASE_TIMEOUT:?})",
            stale.as_secs_f64()
        ),
    );
    // From here every change to exporter needs an eviction.
    set_mode(world, "exporter", "Recreate").await;
    recommend(world, "agent", 3, 2).await;
    recommend(world, "exporter", 3, 2).await;
    let index = world.n.next_multiple_of(3) + 2;
    let shape = world.nodes.join(&world.admin, index).await;
    let joined = shape.name.clone();
    // agent resizes in place meanwhile, the new node's pod too.
    let agent_done = until(
        world,
        "every agent pod at its new group while the webhook is away",
        world.scaled(180),
        |w| {
            Box::pin(async move {
                let targets = Targets::read(&w.admin).await;
                let pods = w.pods(NS).await;
                let agents: Vec<_> = pods.iter().filter(|p| daemonset_of(p) == "agent").collect();
                let off = agents
                    .iter()
                    .filter(|p| {
                        let want = w
                            .nodes
                            .get(&node_of(p))
                            .map(|s| targets.expected("agent", &labels(&s)));
                        !crate::steps::running(p)
                            || want.map(|w| [w; 3]) != Some(crate::workloads::pod_resources(p))
                    })
                    .count();
                if off == 0 && agents.len() == w.nodes.all().len() {
                    Ok(agents.len())
                } else {
                    Err(format!("{off} of {} agent pods off", agents.len()))
                }
            })
        },
    )
    .await;
    // Three more passes: exporter is held, untouched.
    tokio::time::sleep(Duration::from_secs(7)).await;
    let book = world.ledger.book();
    let nodes = world.nodes.all().len();
    assert_eq!(Book::count(&book.deleted, "agent"), 0, "agent evicted");
    assert_eq!(
        Book::count(&book.deleted, "exporter"),
        0,
        "exporter evicted while the webhook was away"
    );
    assert_eq!(
        Book::count(&book.resized, "exporter"),
        0,
        "exporter resized under Recreate"
    );
    assert_eq!(
        Book::count(&book.resized, "agent"),
        nodes,
        "agent resizes in place while away"
    );
    for ds in ["agent", "exporter", "logger"] {
        let pod = world
            .pods(NS)
            .await
            .into_iter()
            .find(|p| node_of(p) == joined && daemonset_of(p) == ds)
            .unwrap_or_else(|| panic!("no {ds} pod on {joined}"));
        assert_eq!(
            book.created_with.get(&name(&pod)),
            Some(&template),
            "{} on {joined}: not created unmutated while the webhook was away",
            name(&pod)
        );
    }
    let held = world
        .prometheus
        .value("max(nodescope_updater_deferred_pods and on (instance) (nodescope_updater_leader == 1))")
        .await;
    assert_eq!(
        held,
        Some(nodes as f64),
        "exporter pods held back (deferred)"
    );
    alert_state(world, "NodescopeWebhookDown", "firing").await;
    alert_state(world, "NodescopeUpdaterWebhookLeaseStale", "firing").await;
    say(world.began, &format!(
        "fault 1: meanwhile {agent_done} agent pods resized in place (the pod of {joined}, created unmutated, among them), {nodes} exporter evictions held (nodescope_updater_deferred_pods {nodes}), 0 evictions; NodescopeWebhookDown and NodescopeUpdaterWebhookLeaseStale firing"
    ));

    let away = stopped.elapsed();
    let back = Instant::now();
    for replica in REPLICAS {
        world.component_mut(replica).restart();
    }
    world.follow();
    let renewed = fresh(world, 1.0, LEASE_TIMEOUT + Duration::from_secs(20)).await;
    let (targets, pods) = at_groups(
        world,
        "every pod at its group after the webhook's return",
        world.scaled(300),
    )
    .await;
    let book = world.ledger.book();
    let exporters: Vec<_> = pods
        .iter()
        .filter(|p| daemonset_of(p) == "exporter")
        .collect();
    assert_eq!(exporters.len(), nodes);
    assert_eq!(
        Book::count(&book.deleted, "exporter"),
        nodes,
        "exporter evictions"
    );
    assert_eq!(Book::count(&book.deleted, "agent"), 0, "agent evictions");
    let limit = (nodes as f64 * TOLERANCE) as usize;
    let most = Book::count(&book.max_disrupted, "exporter");
    assert!(
        most <= limit,
        "exporter: {most} pods disrupted at once, above the tolerance {limit}"
    );
    for pod in &exporters {
        let shape = world
            .nodes
            .get(&node_of(pod))
            .unwrap_or_else(|| panic!("{}: no node", name(pod)));
        let want = targets.expected("exporter", &labels(&shape));
        created_at(world, pod, want, "at its group (a replacement)");
    }
    alert_state(world, "NodescopeWebhookDown", "inactive").await;
    alert_state(world, "NodescopeUpdaterWebhookLeaseStale", "inactive").await;
    set_mode(world, "exporter", "InPlaceOrRecreate").await;
    world.ledger.measure(false);
    say(world.began, &format!(
        "fault 1: webhook away {:.1} s; back, the Lease fresh again in {:.1} s; {nodes} exporter pods evicted (most at once {most}, tolerance {limit}), each replacement sized at creation; all at group {:.1} s after the return ({}; an eviction also waits for its replacement's creation, binding and start); both alerts resolved",
        away.as_secs_f64(),
        renewed.as_secs_f64(),
        back.elapsed().as_secs_f64(),
        world.report.floor.beside(nodes, back.elapsed().as_secs_f64()),
    ));
}
