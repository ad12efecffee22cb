//! The bytes of a node-scoped VPA's status at 5,000 nodes with 2, 4 and 8
//! containers, as the recommender computes it (real histograms, upstream's
//! estimators, its quantity texts), and what each way of making it smaller
//! buys:
//! - `json`: the status JSON with every group; per group and per container;
//! - `list_map_managed`: what the apiserver's `managedFields` added per group
//!   while `recommendationGroups` was a list map keyed by `scopeValue`
//!   (`"k:{\"scopeValue\":\"node-00001\"}":{".":{},...}`); the list is
//!   atomic now, and that entry is one for the whole list;
//! - `equal_omitted`: the groups whose targets equal `status.recommendation`
//!   and the bytes without them;
//! - `shortest`: what writing every quantity in its shortest exact JSON form
//!   (a bare integer for whole amounts, `1.5` for `1500m`) would save;
//! - `fitted`: what [`nodescope::recommend::fit`] writes under its limit.
//!
//! Two fleets: `alike`, every node running the same load (each node's week
//! its own noise around one level), and `varied`, node n at one of 64 load
//! levels (n mod 64), as in `benches/recommend.rs`.
//!
//! `cargo bench --bench status_size`.

use nodescope::quantity::Quantity;
use nodescope::recommend::aggregate::{AggregateContainerState, HistoryConfig};
use nodescope::recommend::fit::{group_bytes, omittable, status_bytes, STATUS_LIMIT};
use nodescope::recommend::input::ScopedVpa;
use nodescope::recommend::model::ContainerHistory;
use nodescope::recommend::replay::Replay;
use nodescope::recommend::status::{vpa_status, VpaStatus};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

#[path = "support/synthetic_time.rs"]
mod synthetic_time;
use synthetic_time::{at, noise};

const NODES: usize = 5_000;
const TEMPLATES: usize = 64;

/// A week of history: a CPU sample every 10 minutes with ±20% noise around
/// `millicores`, and a memory peak a day with ±10% around `bytes`.
fn template(
    config: &HistoryConfig,
    seed: u64,
    millicores: f64,
    bytes: f64,
) -> AggregateContainerState {
    let mut a = AggregateContainerState::default();
    for step in 0..7 * 24 * 6 {
        let cores = millicores * (1.0 + 0.2 * noise(seed * 100_003 + step as u64)) / 1000.0;
        a.add_cpu_sample(config, cores, 0.1, at(step * 10));
    }
    for day in 0..7 {
        let peak = bytes * (1.0 + 0.1 * noise(seed * 7 + day as u64));
        a.add_memory_peak(config, peak, at(day * 24 * 60 + 24 * 60));
    }
    a
}

fn vpa() -> ScopedVpa {
    ScopedVpa::from_value(&json!({
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "agent", "namespace": "agents", "generation": 1},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"}, "scope": "node"},
    }))
    .ok()
    .flatten()
    .unwrap_or_else(|| panic!("bench VPA is scoped"))
}

/// The bytes a list-map item's entry took in `managedFields[].fieldsV1`.
fn managed_field_bytes(scope_value: &str) -> usize {
    let key = json!({ "scopeValue": scope_value }).to_string();
    let key = Value::String(format!("k:{key}")).to_string();
    key.len() + r#":{".":{},"f:containerRecommendations":{},"f:scopeValue":{}},"#.len()
}

/// The JSON bytes of `text` written in its shortest exact form instead.
fn shortest_saving(text: &str) -> usize {
    let quoted = text.len() + 2;
    let Ok(q) = Quantity::parse(text) else {
        return 0;
    };
    let milli = q.milli_value();
    let mut best = quoted;
    if milli % 1000 == 0 {
        best = best.min((milli / 1000).to_string().len());
    } else {
        let decimal = format!("{}", milli as f64 / 1000.0);
        if Quantity::parse(&decimal).map(|d| d.milli_value()) == Ok(milli) {
            best = best.min(decimal.len() + 2);
        }
    }
    quoted - best
}

fn quantities(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("cpu" | "memory", Value::String(s)) => out.push(s.clone()),
                    _ => quantities(v, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| quantities(v, out)),
        _ => {}
    }
}

fn run(fleet: &str, containers: usize) {
    let replay = Replay::defaults();
    let config = &replay.model.history;
    let names: Vec<String> = (0..containers).map(|c| format!("container-{c}")).collect();
    let mut history: BTreeMap<Arc<str>, ContainerHistory> = BTreeMap::new();
    for (c, name) in names.iter().enumerate() {
        let scale = 1.0 + c as f64 * 0.5;
        let templates: Vec<AggregateContainerState> = (0..TEMPLATES)
            .map(|s| {
                let level = match fleet {
                    "alike" => 250.0,
                    _ => 50.0 + 10.0 * s as f64,
                };
                let bytes = match fleet {
                    "alike" => 200e6,
                    _ => 100e6 + 5e6 * s as f64,
                };
                template(
                    config,
                    (c * TEMPLATES + s) as u64,
                    level * scale,
                    bytes * scale,
                )
            })
            .collect();
        let mut h = ContainerHistory::default();
        for n in 0..NODES {
            h.groups.insert(
                Arc::from(format!("node-{n:05}")),
                templates[n % TEMPLATES].clone(),
            );
        }
        history.insert(Arc::from(name.as_str()), h);
    }
    let v = vpa();
    let mut unlimited = replay.status.clone();
    unlimited.status_limit = usize::MAX;
    let now = at(7 * 24 * 60 + 1);
    let whole: VpaStatus = vpa_status(&unlimited, config, &v, Some(&history), NODES, now);
    let json_bytes = serde_json::to_vec(&whole).map_or(0, |b| b.len());
    let managed: usize = whole
        .recommendation_groups
        .iter()
        .map(|g| managed_field_bytes(&g.scope_value))
        .sum();
    let groups = whole.recommendation_groups.len();
    let groups_json: usize = whole
        .recommendation_groups
        .iter()
        .map(|g| serde_json::to_vec(g).map_or(0, |b| b.len()) + 1)
        .sum();
    let entries: Vec<usize> = whole
        .recommendation_groups
        .iter()
        .flat_map(|g| &g.container_recommendations)
        .map(|c| serde_json::to_vec(c).map_or(0, |b| b.len()) + 1)
        .collect();
    let equal = omittable(&whole);
    let fallback = &whole.recommendation.container_recommendations;
    let equal_bytes: usize = whole
        .recommendation_groups
        .iter()
        .filter(|g| {
            g.container_recommendations.len() == fallback.len()
                && g.container_recommendations.iter().all(|c| {
                    fallback
                        .iter()
                        .any(|f| f.container_name == c.container_name && f.target == c.target)
                })
        })
        .map(group_bytes)
        .sum();
    let mut texts = Vec::new();
    quantities(&whole.to_value()["recommendationGroups"], &mut texts);
    let shortest: usize = texts.iter().map(|t| shortest_saving(t)).sum();
    let fitted = vpa_status(&replay.status, config, &v, Some(&history), NODES, now);
    let outcome = if fitted.groups_too_large() {
        "too large: no groups".to_owned()
    } else if fitted.recommendation_groups.len() < groups {
        format!("compacted: {} groups", fitted.recommendation_groups.len())
    } else {
        "whole".to_owned()
    };
    println!(
        "fleet={fleet} containers={containers} groups={groups} json={json_bytes}B per_group={:.0}B per_container={:.0}B \
         list_map_managed={managed}B equal_omitted={equal} ({}B left) shortest_form_saves={shortest}B \
         fitted={}B ({outcome}) limit={STATUS_LIMIT}B",
        groups_json as f64 / groups.max(1) as f64,
        entries.iter().sum::<usize>() as f64 / entries.len().max(1) as f64,
        json_bytes - equal_bytes,
        status_bytes(&fitted),
    );
}

fn main() {
    for fleet in ["alike", "varied"] {
        for containers in [2, 4, 8] {
            run(fleet, containers);
        }
    }
}
