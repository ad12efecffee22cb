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
    say(
        world.began,
        &format!(
            "prometheus: all {} queries of the shipped dashboard return data",
            queries.len()
        ),
    );
}
