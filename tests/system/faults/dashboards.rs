//! What Prometheus sees: every shipped PodMonitor's job scrapes its
//! components and finds them up, and every query of the shipped dashboard
//! returns data.

use crate::scenario::{say, until, World};
use std::time::Duration;

/// Each job has at least one target, and every target is up.
pub async fn targets_up(world: &mut World) {
    let jobs = world.prometheus.job_names();
    let count = until(
        world,
        "every scrape target up",
        Duration::from_secs(60),
        move |w| {
            let jobs = jobs.clone();
            Box::pin(async move {
                let targets = w.prometheus.targets().await;
                let missing: Vec<&String> = jobs
                    .iter()
                    .filter(|j| !targets.iter().any(|(job, _, _)| job == *j))
                    .collect();
                let down: Vec<String> = targets
                    .iter()
                    .filter(|(_, _, health)| health != "up")
                    .map(|(job, pod, health)| format!("{job} {pod} {health}"))
                    .collect();
                if missing.is_empty() && down.is_empty() {
                    Ok(targets.len())
                } else {
                    Err(format!("jobs without targets {missing:?}, not up {down:?}"))
                }
            })
        },
    )
    .await;
    say(
        world.began,
        &format!(
            "prometheus: {count} targets of {} PodMonitor jobs up ({})",
            world.prometheus.job_names().len(),
            world.prometheus.job_names().join(", ")
        ),
    );
}

/// Every panel's query, with Grafana's `$__rate_interval` as 1m, returns
/// at least one series.
pub async fn run(world: &mut World) {
    let map = world
        .rendered
        .objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "nodescope-dashboard")
        .unwrap_or_else(|| panic!("the manifests render no nodescope-dashboard ConfigMap"));
    let text = map["data"]["nodescope.json"].as_str().unwrap_or_default();
    let dashboard: serde_json::Value =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("nodescope.json: {e}"));
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                queries.push((
                    panel["title"].as_str().unwrap_or_default().to_owned(),
                    expr.replace("$__rate_interval", "1m"),
                ));
            }
        }
    }
    assert!(!queries.is_empty(), "the dashboard has no query");
    let mut empty = Vec::new();
    for (title, expr) in &queries {
        if world.prometheus.query(expr).await.is_empty() {
            empty.push(format!("{title}: {expr}"));
        }
    }
    assert!(
        empty.is_empty(),
        "{} of {} dashboard queries return no data:\n{}",
        empty.len(),
        queries.len(),
        empty.join("\n")
    );
    // What some panels must say of this cluster now.
    let panel = |title: &str| {
        queries
            .iter()
            .find(|(t, _)| t == title)
            .map(|(_, e)| e.clone())
            .unwrap_or_else(|| panic!("the dashboard has no panel {title:?}"))
    };
    // A gauge is set once per pass and scraped every few seconds: it is
    // compared with the cluster as one pass saw it, so both are read again
    // until they agree (a pod replaced between the pass and the read is
    // not a wrong panel), and a disagreement that lasts is the failure.
    let settled = (0..world.n).filter(|i| i % 10 == 5).count();
    let (controlled, lease) = (panel("Controlled pods"), panel("Webhook Lease fresh"));
    let by_state = panel("Nodes by balloon state");
    let (scoped, states) = until(
        world,
        "the dashboard's panels agree with the cluster",
        Duration::from_secs(120),
        move |w| {
            let (controlled, lease, by_state) =
                (controlled.clone(), lease.clone(), by_state.clone());
            Box::pin(async move {
                let pods = w.pods(crate::workloads::NS).await;
                let scoped = pods
                    .iter()
                    .filter(|p| {
                        crate::workloads::scope(&crate::workloads::daemonset_of(p)).is_some()
                    })
                    .count();
                let mut states = std::collections::BTreeMap::new();
                for series in w.prometheus.query(&by_state).await {
                    let state = series["metric"]["state"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    let count: f64 = series["value"][1]
                        .as_str()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(-1.0);
                    states.insert(state, count);
                }
                let mut off = Vec::new();
                for (title, expr, want) in [
                    ("Controlled pods", &controlled, scoped as f64),
                    ("Webhook Lease fresh", &lease, 1.0),
                ] {
                    let got = w.prometheus.value(expr).await;
                    if got != Some(want) {
                        off.push(format!("panel {title:?} is {got:?}, want {want}: {expr}"));
                    }
                }
                for (state, want) in [("Settled", settled), ("Refused", 1), ("Infeasible", 1)] {
                    if states.get(state).copied() != Some(want as f64) {
                        off.push(format!(
                            "panel \"Nodes by balloon state\", {state}: {states:?}, want {want}"
                        ));
                    }
                }
                if off.is_empty() {
                    Ok((scoped, states))
                } else {
                    Err(off.join("; "))
                }
            })
        },
    )
    .await;
    say(
        world.began,
        &format!(
            "prometheus: all {} queries of the shipped dashboard return data; Controlled pods {scoped} (the scoped DaemonSets' pods), Webhook Lease fresh 1, Nodes by balloon state {states:?}",
            queries.len()
        ),
    );
}
