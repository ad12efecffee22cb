//! Fault 4: every pod of `agent` is OOM-killed and not Ready (the
//! DaemonSet has no ready pod, upstream's "has no number ready pods",
//! kubernetes/autoscaler PR #10141). The recommender, started again on the
//! next stretch of recorded usage, sees the kills in the pods' statuses
//! and raises each group's memory by at least upstream's OOM bump (100Mi
//! or 20 %); the updater resizes every agent pod in place although none is
//! Ready; once given more memory, the pods are Ready again.

use super::at_groups;
use crate::scenario::{say, until, World};
use crate::steps::{name, record_usage, start_recommender};
use crate::workloads::{daemonset_of, pod_resources, Targets, NS};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// upstream's `--oom-min-bump-up-bytes`.
const MIN_BUMP: i64 = 100 * 1024 * 1024;

fn ready(pod: &k8s_openapi::api::core::v1::Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

pub async fn run(world: &mut World) {
    let pods = world.pods(NS).await;
    let agents: Vec<_> = pods
        .iter()
        .filter(|p| daemonset_of(p) == "agent")
        .cloned()
        .collect();
    let before: BTreeMap<String, i64> = agents
        .iter()
        .map(|p| (name(p), pod_resources(p)[1].1))
        .collect();
    world.ledger.reset();
    let killed = Instant::now();
    world.kubelet.oom_kill(&agents).await;
    let down = world
        .pods(NS)
        .await
        .iter()
        .filter(|p| daemonset_of(p) == "agent" && ready(p))
        .count();
    assert_eq!(down, 0, "agent pods still Ready after the OOM kills");

    // The recommender again, on the next four minutes of usage.
    let start =
        (k8s_openapi::jiff::Timestamp::now().as_second() + 1).max(world.recorded_until + 60);
    let dir = record_usage(world, "metrics-oom", 4, start).await;
    start_recommender(world, &dir, Vec::new());
    let old_targets = Targets::read(&world.admin).await;
    let raised = until(
        world,
        "agent's groups raised for the OOM kills",
        Duration::from_secs(120),
        move |w| {
            let old = old_targets.0["agent"].clone();
            Box::pin(async move {
                let now = Targets::read(&w.admin).await;
                let rows = &now.0["agent"];
                let low: Vec<String> = old
                    .iter()
                    .filter(|(k, _)| !k.is_empty())
                    .filter(|(k, (_, m))| rows.get(*k).is_none_or(|(_, n)| *n < m + MIN_BUMP))
                    .map(|(k, _)| k.clone())
                    .collect();
                if low.is_empty() {
                    Ok(now)
                } else {
                    Err(format!("not raised: {low:?} ({rows:?})"))
                }
            })
        },
    )
    .await;
    let raised_in = killed.elapsed();
    let (_, pods) = at_groups(
        world,
        "every pod at its group after the OOM kills",
        world.scaled(240),
    )
    .await;
    let book = world.ledger.book();
    let deleted: usize = book.deleted.values().sum();
    assert_eq!(deleted, 0, "evictions: {:?}", book.deleted_pods);
    let mut bumped = Vec::new();
    for pod in pods.iter().filter(|p| daemonset_of(p) == "agent") {
        let was = before
            .get(&name(pod))
            .copied()
            .unwrap_or_else(|| panic!("{}: new", name(pod)));
        let now = pod_resources(pod)[1].1;
        assert!(
            now >= was + MIN_BUMP.max(was / 5),
            "{}: memory {was} → {now}, less than the OOM bump",
            name(pod)
        );
        assert!(
            book.resized_pods.get(&name(pod)).is_some_and(|n| *n >= 1),
            "{}: not resized in place",
            name(pod)
        );
        assert!(ready(pod), "{}: not Ready with {now} bytes", name(pod));
        bumped.push(now - was);
    }
    bumped.sort_unstable();
    say(world.began, &format!(
        "fault 4: {} agent pods OOM-killed, none Ready; groups raised {:.1} s later ({:?}); every agent pod resized in place, none evicted, all Ready again {:.1} s after the kills, {:.1} s after the groups ({}); memory raised by {} to {} MiB",
        before.len(),
        raised_in.as_secs_f64(),
        raised.0.get("agent"),
        killed.elapsed().as_secs_f64(),
        (killed.elapsed() - raised_in).as_secs_f64(),
        world.report.floor.beside(
            crate::ledger::Book::count(&book.resized, "agent")
                + crate::ledger::Book::count(&book.resized, "exporter"),
            (killed.elapsed() - raised_in).as_secs_f64()
        ),
        bumped.first().copied().unwrap_or(0) / (1024 * 1024),
        bumped.last().copied().unwrap_or(0) / (1024 * 1024),
    ));
}
