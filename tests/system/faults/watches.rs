//! Fault 6: watches break. Every nodescope component reaches the apiserver
//! through a loopback front (`front.rs`); the step cuts every connection
//! through it once, and then every [`EVERY`] while the cluster changes, as a
//! load balancer's reset or a network blip would. Every watch of every
//! store breaks mid-stream and is resumed (or listed again), and every
//! request in flight fails and is retried.
//!
//! The apiserver's own `--min-request-timeout` would not do it: it bounds
//! only watches that ask for no `timeoutSeconds`, and kube-rs and client-go
//! both ask for one (kube-rs 290 s).
//!
//! What must hold: a decision is taken on what the cluster says now, not on
//! a snapshot older than the last event. A new recommendation is written
//! and a node joins at once: the webhook sizes the new node's pods by the
//! new groups (its VPA store followed the change across the cuts), and the
//! updater brings every other pod to them exactly once. Every write the
//! updater makes is preconditioned on the resourceVersion it decided on, so
//! a decision on a stale pod is refused by the apiserver (counted `Stale`)
//! and taken again from the watch's next state; the step reports how many.

use super::{agent_resized_once, at_groups, created_at, recommend};
use crate::scenario::{say, until, World};
use crate::steps::{labels, name, node_of};
use crate::workloads::{daemonset_of, Targets};
use std::time::{Duration, Instant};

/// How often the connections are cut while the cluster changes.
const EVERY: Duration = Duration::from_secs(5);

const STALE: &str = "sum(nodescope_updater_failed_in_place_update_attempts_total{reason=\"Stale\"}) + sum(nodescope_updater_failed_eviction_attempts_total{reason=\"Stale\"})";

pub async fn run(world: &mut World) {
    // The recommender's recordings replayed: nothing else writes groups.
    until(
        world,
        "the recommender idle",
        Duration::from_secs(120),
        |w| {
            Box::pin(async move {
                match w
                    .prometheus
                    .value("max(nodescope_recommender_metrics_source_up)")
                    .await
                {
                    Some(0.0) => Ok(()),
                    other => Err(format!("metrics source up: {other:?}")),
                }
            })
        },
    )
    .await;
    // Every connection cut once, and every component back (each leader
    // leads, every process ready) before the cluster changes.
    let cutter = world.cluster.api.cutter();
    let first = cutter.cut();
    assert!(
        first > 0,
        "no connection through the apiserver's front to cut"
    );
    super::apiserver::reconnected(world, "every component back after the first cut").await;
    let stale_before = world.prometheus.value(STALE).await.unwrap_or(0.0);
    world.ledger.reset();
    let began = Instant::now();
    // Then every EVERY while the cluster changes.
    let cut: std::sync::Arc<std::sync::Mutex<Vec<usize>>> = std::sync::Arc::default();
    let cutting = {
        let cut = cut.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(EVERY).await;
                let n = cutter.cut();
                cut.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(n);
            }
        })
    };
    recommend(world, "agent", 6, 5).await;
    let written = Targets::read(&world.admin).await;
    let index = world.n.next_multiple_of(3) + 4;
    let shape = world.nodes.join(&world.admin, index).await;
    let joined = shape.name.clone();
    let (targets, pods) = at_groups(
        world,
        "every pod at the new groups with every connection cut every 5 s",
        world.scaled(240),
    )
    .await;
    let converged = began.elapsed();
    cutting.abort();
    let cuts = cut
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    assert_eq!(
        targets.0["agent"], written.0["agent"],
        "agent's groups changed meanwhile"
    );
    let agent = pods
        .iter()
        .find(|p| node_of(p) == joined && daemonset_of(p) == "agent")
        .unwrap_or_else(|| panic!("no agent pod on {joined}"));
    // The webhook sizes a pod from its store, never from the API. A cut
    // just before the node joined leaves its Node and VPA watches
    // reconnecting (kube-rs backs off after each failure), so the pod may
    // be sized from a store the cut left behind: the VPA-wide fallback for
    // a node it does not know yet, or the recommendation before the new
    // one. The updater, whose store has caught up by then, resizes such a
    // pod to its group exactly once; a pod created at its group is never
    // resized.
    let group = targets.expected("agent", &labels(&shape));
    let wide = targets.0["agent"].get("").copied();
    let book = world.ledger.book();
    let created = book.created_with.get(&name(agent)).copied();
    let resized = book.resized_pods.get(&name(agent)).copied();
    let how = if created == Some(group) {
        created_at(world, agent, group, "at the new group");
        "created at the new group".to_owned()
    } else {
        assert_eq!(
            resized,
            Some(1),
            "{} on {joined}: created at {created:?}, not its group {group:?}, and not resized exactly once to it",
            name(agent)
        );
        format!(
            "created at {created:?} from a webhook store the cuts had left behind (its group {group:?}, the VPA-wide value now {wide:?}), then resized once to its group"
        )
    };
    let others = agent_resized_once(world, &pods, Some(&joined), "with watches cut");
    let stale = world.prometheus.value(STALE).await.unwrap_or(0.0) - stale_before;
    say(world.began, &format!(
        "fault 6: every connection to the apiserver cut ({first} at first), then every {} s ({} cuts, {} connections): {joined}'s agent pod {how}; {others} other agent pods resized once each, 0 evictions, all at group {:.1} s after the write ({}); {stale} stale decisions refused by the apiserver and taken again",
        EVERY.as_secs(),
        cuts.len(),
        cuts.iter().sum::<usize>(),
        converged.as_secs_f64(),
        world.report.floor.beside(others + 1, converged.as_secs_f64()),
    ));
}
