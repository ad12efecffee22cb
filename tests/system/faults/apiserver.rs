//! Fault 5: the apiserver restarts (SIGTERM, then started again on the same
//! port and etcd), twice:
//!
//! - in the middle of an updater pass: every pod still ends resized exactly
//!   once for the one recommendation, none evicted, never more disrupted at
//!   once than the tolerance;
//! - while the recommender writes statuses and checkpoints every 2 s: every
//!   VPA keeps a readable status and a complete set of checkpoints, and the
//!   recommender's writes go on once it is back.
//!
//! Every component is checked to have reconnected: each leader still leads
//! (one per Lease) and the running components answer `/readyz`.

use super::{agent_resized_once, at_groups, recommend};
use crate::ledger::Book;
use crate::scenario::{http_code, say, until, World, TOLERANCE};
use crate::steps::{record_usage, start_recommender};
use crate::workloads::NS;
use kube::api::{Api, DynamicObject, ListParams};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// For each VPA, the shard counts of its checkpoint sets (by `writtenAt`)
/// and how many of each set's shards are there.
async fn checkpoint_sets(world: &World) -> BTreeMap<String, Vec<(usize, usize)>> {
    let resource = kube::api::ApiResource {
        group: "nodescope.dev".into(),
        version: "v1alpha1".into(),
        api_version: "nodescope.dev/v1alpha1".into(),
        kind: "RecommendationCheckpoint".into(),
        plural: "recommendationcheckpoints".into(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(world.admin.clone(), NS, &resource);
    let mut sets: BTreeMap<(String, String), (usize, usize)> = BTreeMap::new();
    for object in api
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("listing checkpoints: {e}"))
    {
        let spec = &object.data["spec"];
        let vpa = spec["vpaName"].as_str().unwrap_or_default().to_owned();
        let at = spec["writtenAt"].as_str().unwrap_or_default().to_owned();
        let shards = spec["shards"].as_u64().unwrap_or(0) as usize;
        let entry = sets.entry((vpa, at)).or_insert((shards, 0));
        entry.1 += 1;
    }
    let mut out: BTreeMap<String, Vec<(usize, usize)>> = BTreeMap::new();
    for ((vpa, _), counts) in sets {
        out.entry(vpa).or_default().push(counts);
    }
    out
}

/// Every leader Lease has one leader again, and every running component
/// answers `/readyz`.
pub async fn reconnected(world: &mut World, what: &str) {
    until(world, what, Duration::from_secs(90), |w| {
        Box::pin(async move {
            for c in w.components.iter().filter(|c| c.running) {
                if http_code(c.metrics_port, "/readyz").await != 200 {
                    return Err(format!("{} not ready", c.name));
                }
            }
            for query in [
                "sum(nodescope_updater_leader)",
                "sum(nodescope_balloon_leader)",
                "sum(nodescope_leader{lease=~\".*/nodescope-recommender\"})",
                "sum(nodescope_leader{lease=~\".*/nodescope-features\"})",
            ] {
                match w.prometheus.value(query).await {
                    Some(1.0) => {}
                    other => return Err(format!("{query}: {other:?}")),
                }
            }
            Ok(())
        })
    })
    .await;
}

pub async fn run(world: &mut World) {
    // 1. In the middle of an updater pass.
    let nodes = world.nodes.all().len();
    let limit = (nodes as f64 * TOLERANCE) as usize;
    world.ledger.reset();
    world.ledger.measure(true);
    recommend(world, "agent", 5, 4).await;
    until(
        world,
        "the updater's first resizes",
        Duration::from_secs(60),
        |w| {
            Box::pin(async move {
                let resized = Book::count(&w.ledger.book().resized, "agent");
                if resized >= 3 {
                    Ok(())
                } else {
                    Err(format!("{resized} resized"))
                }
            })
        },
    )
    .await;
    let mid = Book::count(&world.ledger.book().resized, "agent");
    let away = world
        .cluster
        .plane
        .restart_apiserver(&[])
        .await
        .unwrap_or_else(|e| panic!("the apiserver did not come back: {e}"));
    reconnected(world, "every component back after the apiserver's restart").await;
    let (_, pods) = at_groups(
        world,
        "every pod at its group after the apiserver's restart",
        world.scaled(180),
    )
    .await;
    let agents = agent_resized_once(world, &pods, None, "across the restart");
    let book = world.ledger.book();
    let most = Book::count(&book.max_disrupted, "agent");
    assert!(
        most <= limit,
        "agent: {most} disrupted at once, tolerance {limit}"
    );
    world.ledger.measure(false);
    let failed = world
        .prometheus
        .value("sum(nodescope_updater_failed_in_place_update_attempts_total)")
        .await
        .unwrap_or(0.0);
    // A resize decided on a pod the watch had not caught up with is
    // refused (its resourceVersion test fails) and counted Stale; the rest
    // failed on the way (the apiserver away).
    let stale = world
        .prometheus
        .value("sum(nodescope_updater_failed_in_place_update_attempts_total{reason=\"Stale\"})")
        .await
        .unwrap_or(0.0);
    say(world.began, &format!(
        "fault 5: apiserver restarted after {mid} of {} resizes, away {:.1} s; every component reconnected; each pod resized once, most at once {most} (tolerance {limit}), 0 evictions; failed resize attempts so far {failed}, {stale} of them Stale (refused, decided again)",
        agents,
        away.as_secs_f64()
    ));

    // 2. While the recommender writes: the next stretch of usage, a status
    // write every interval and a checkpoint every 2 s.
    let start = world.recorded_until + 60;
    let dir = record_usage(world, "metrics-restart", 20, start).await;
    start_recommender(
        world,
        &dir,
        vec![("--checkpoint-interval", "2s".to_owned())],
    );
    const WRITES: &str = "sum(nodescope_recommender_checkpoint_writes_total{result=\"success\"})";
    let writing = until(
        world,
        "the recommender's checkpoints",
        Duration::from_secs(60),
        |w| {
            Box::pin(async move {
                match w.prometheus.value(WRITES).await {
                    Some(v) if v >= 2.0 => Ok(v),
                    other => Err(format!("{other:?}")),
                }
            })
        },
    )
    .await;
    let restarted = Instant::now();
    let away = world
        .cluster
        .plane
        .restart_apiserver(&[])
        .await
        .unwrap_or_else(|e| panic!("the apiserver did not come back: {e}"));
    reconnected(world, "every component back after the second restart").await;
    let after = until(
        world,
        "checkpoint writes going on",
        Duration::from_secs(60),
        move |w| {
            Box::pin(async move {
                match w.prometheus.value(WRITES).await {
                    Some(v) if v >= writing + 2.0 => Ok(v),
                    other => Err(format!("{other:?} (before the restart: {writing})")),
                }
            })
        },
    )
    .await;
    let failures = world
        .prometheus
        .value("sum(nodescope_recommender_checkpoint_writes_total{result=\"failure\"}) + sum(nodescope_recommender_status_writes_total{result=\"failure\"})")
        .await
        .unwrap_or(0.0);
    let sets = checkpoint_sets(world).await;
    for vpa in ["agent", "exporter"] {
        let complete = sets
            .get(vpa)
            .is_some_and(|s| s.iter().any(|(shards, have)| shards == have && *shards > 0));
        assert!(
            complete,
            "{vpa}: no complete checkpoint set after the restart: {sets:?}"
        );
    }
    let (targets, _) = at_groups(
        world,
        "every pod at its group after the second restart",
        world.scaled(240),
    )
    .await;
    assert_eq!(
        targets.groups("agent"),
        3,
        "agent's groups after the restart"
    );
    say(world.began, &format!(
        "fault 5: apiserver restarted again while the recommender wrote (checkpoint writes {writing} before, {after} after; failed writes {failures}), away {:.1} s; every VPA with a complete checkpoint set and its groups; all at group {:.1} s after the restart",
        away.as_secs_f64(),
        restarted.elapsed().as_secs_f64()
    ));
}
