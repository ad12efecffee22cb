//! LIST: pages of pre-serialized Pods and Nodes (a `continue` token is the
//! index the next page starts at), the writable kinds whole, and PodMetrics
//! made at each request (usage now, so each interval's sample is new).

use super::server::{full, json, read, Asked, Body, State};
use super::store::{Collection, Query, Resource};
use hyper::Response;
use serde_json::{json, Value};
use std::sync::Arc;

fn envelope(kind: &str, api_version: &str, revision: u64, token: Option<usize>) -> Vec<u8> {
    let mut meta = json!({"resourceVersion": revision.to_string()});
    if let Some(t) = token {
        meta["continue"] = json!(t.to_string());
    }
    format!(r#"{{"kind":"{kind}","apiVersion":"{api_version}","metadata":{meta},"items":["#)
        .into_bytes()
}

fn hollow(
    asked: &Asked,
    r: &Resource,
    c: &Collection,
    query: &Query,
    revision: u64,
) -> Response<Body> {
    let from = asked
        .param("continue")
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    let limit = asked
        .param("limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let (items, next) = c.page(query, from, limit);
    let meta = asked.metadata_only();
    let mut out = if meta {
        envelope(
            "PartialObjectMetadataList",
            "meta.k8s.io/v1",
            revision,
            next,
        )
    } else {
        envelope(&format!("{}List", r.kind), &r.api_version(), revision, next)
    };
    let size: usize = items.iter().map(|&i| if meta { c.items[i].meta.len() } else { c.items[i].full.len() } + 1).sum();
    out.reserve(size + 2);
    for (n, &i) in items.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        out.extend_from_slice(if meta {
            &c.items[i].meta
        } else {
            &c.items[i].full
        });
    }
    out.extend_from_slice(b"]}");
    full(200, out)
}

fn pod_metrics(state: &State, query: &Query) -> Vec<Value> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let stamp = time::OffsetDateTime::from_unix_timestamp(now as i64)
        .map(|t| {
            format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
                t.year(),
                t.month() as u8,
                t.day(),
                t.hour(),
                t.minute(),
                t.second()
            )
        })
        .unwrap_or_default();
    let pods = read(&state.pods);
    let (items, _) = pods.page(
        &Query {
            namespace: query.namespace.clone(),
            ..Query::default()
        },
        0,
        0,
    );
    items.into_iter().map(|i| {
        let p = &pods.items[i];
        let containers: Vec<Value> = p.containers.iter().enumerate().map(|(k, c)| json!({"name": c,
            "usage": {"cpu": format!("{}n", 50_000_000 + (i * 7 + k + now as usize) % 100 * 1_000_000),
                      "memory": format!("{}Ki", 100_000 + (i * 13 + k) % 50_000)}})).collect();
        json!({"metadata": {"name": p.name, "namespace": p.namespace, "creationTimestamp": stamp},
            "timestamp": stamp, "window": "30s", "containers": containers})
    }).collect()
}

pub fn list(
    state: &Arc<State>,
    asked: &Asked,
    r: &'static Resource,
    query: &Query,
) -> Response<Body> {
    let revision = super::server::lock(&state.objects).revision;
    match (r.group, r.plural) {
        ("", "pods") => return hollow(asked, r, &read(&state.pods), query, revision),
        ("", "nodes") => return hollow(asked, r, &read(&state.nodes), query, revision),
        _ => {}
    }
    let items = if r.group == "metrics.k8s.io" {
        pod_metrics(state, query)
    } else {
        super::server::lock(&state.objects).list(r, query)
    };
    if asked.metadata_only() {
        let items: Vec<Value> = items.iter().map(super::store::partial).collect();
        return json(
            200,
            &json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": revision.to_string()}, "items": items}),
        );
    }
    json(
        200,
        &json!({"kind": format!("{}List", r.kind), "apiVersion": r.api_version(),
        "metadata": {"resourceVersion": revision.to_string()}, "items": items}),
    )
}
