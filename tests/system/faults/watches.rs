//! Fault 6: watches break. Since fault 5's second restart the apiserver
//! ends every watch after 15 to 30 s (`--min-request-timeout=15`), so every
//! store of every component has had its watch cut and resumed (or listed
//! again) before this step, and keeps having it cut through the rest of the
//! run (step 6 included).
//!
//! What must hold: a decision is taken on what the cluster says now, not on
//! a snapshot older than the last event. A new recommendation is written
//! and a node joins at once: the webhook sizes the new node's pods by the
//! new groups (its VPA store followed the change across the cuts), and the
//! updater brings every other pod to them exactly once. Every write the
//! updater makes is preconditioned on the resourceVersion it decided on, so
//! a decision on a stale pod is refused by the apiserver (counted `Stale`)
//! and taken again from the watch's next state; the step reports how many.

use super::apiserver::MIN_REQUEST_TIMEOUT;
use super::{agent_resized_once, at_groups, created_at, recommend};
use crate::scenario::{say, until, World};
use crate::steps::{labels, node_of};
use crate::workloads::{daemonset_of, Targets};
use std::time::{Duration, Instant};

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
    // Every watch has been cut at least once since the restart.
    tokio::time::sleep(Duration::from_secs(2 * MIN_REQUEST_TIMEOUT + 2)).await;
    let stale_before = world.prometheus.value(STALE).await.unwrap_or(0.0);
    world.ledger.reset();
    let began = Instant::now();
    recommend(world, "agent", 6, 5).await;
    let written = Targets::read(&world.admin).await;
    let index = world.n.next_multiple_of(3) + 4;
    let shape = world.nodes.join(&world.admin, index).await;
    let joined = shape.name.clone();
    let (targets, pods) = at_groups(
        world,
        "every pod at the new groups with every watch cut every 15 to 30 s",
        Duration::from_secs(240),
    )
    .await;
    assert_eq!(
        targets.0["agent"], written.0["agent"],
        "agent's groups changed meanwhile"
    );
    let agent = pods
        .iter()
        .find(|p| node_of(p) == joined && daemonset_of(p) == "agent")
        .unwrap_or_else(|| panic!("no agent pod on {joined}"));
    created_at(
        world,
        agent,
        targets.expected("agent", &labels(&shape)),
        "at the new group",
    );
    let others = agent_resized_once(world, &pods, Some(&joined), "with watches cut");
    let stale = world.prometheus.value(STALE).await.unwrap_or(0.0) - stale_before;
    say(world.began, &format!(
        "fault 6: with every watch cut every {MIN_REQUEST_TIMEOUT} to {} s: {joined}'s agent pod created at the new group; {others} other agent pods resized once each, 0 evictions, all at group {:.1} s after the write; {stale} stale decisions refused by the apiserver and taken again",
        2 * MIN_REQUEST_TIMEOUT,
        began.elapsed().as_secs_f64()
    ));
}
