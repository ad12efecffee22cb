//! The mutation's tests and their shared helpers. The cases are by topic:
//! [`table`] (upstream's cases, exact patches), [`bad_input`],
//! [`second_pass`] (reinvocation and the mark), [`fixture`] (the captured
//! pod, properties) and [`upstream`] (beside upstream's admission controller).

use serde_json::{json, Value};

use super::*;
use crate::quantity::Quantity;
use crate::vpa::{
    ContainerPolicy, ContainerRecommendation, LimitKind, RecommendationTable, ResourceList,
};

const NODE: &str = "node-a-1";

fn list(pairs: &[(&str, &str)]) -> ResourceList {
    pairs
        .iter()
        .map(|(k, v)| {
            let q = Quantity::parse(v).unwrap_or_else(|e| panic!("{e}"));
            ((*k).to_owned(), q)
        })
        .collect()
}

fn rec(container: &str, target: &[(&str, &str)]) -> ContainerRecommendation {
    ContainerRecommendation {
        container_name: container.to_owned(),
        target: list(target),
    }
}

fn vpa(recs: Vec<ContainerRecommendation>, policies: Vec<ContainerPolicy>) -> VpaPolicy {
    VpaPolicy {
        namespace: "monitoring".to_owned(),
        name: "node-exporter".to_owned(),
        container_policies: policies,
        recommendations: RecommendationTable::new([(NODE, recs.as_slice())], None),
        ..Default::default()
    }
}

fn policy(name: &str, edit: impl FnOnce(&mut ContainerPolicy)) -> ContainerPolicy {
    let mut p = ContainerPolicy::new(name);
    edit(&mut p);
    p
}

fn lr(kind: LimitKind, edit: impl FnOnce(&mut LimitRangeItem)) -> LimitRangeItem {
    let mut l = LimitRangeItem::new(kind);
    edit(&mut l);
    l
}

/// A pod with an (empty) annotations map unless `annotations` is given.
fn pod(containers: Value) -> Value {
    json!({"metadata": {"namespace": "monitoring", "annotations": {}}, "spec": {"containers": containers}})
}

fn run(
    pod: &Value,
    vpa: &VpaPolicy,
    lrs: &[LimitRangeItem],
    missing: MissingNodeRecommendation,
) -> Mutation {
    let bytes = serde_json::to_vec(pod).unwrap_or_default();
    let view = PodView::from_json(&bytes).unwrap_or_else(|e| panic!("{e}"));
    mutate_pod(&view, vpa, Placement::on_node(NODE), lrs, missing)
}

fn patch_json(m: &Mutation) -> Value {
    serde_json::to_value(&m.patch).unwrap_or_default()
}

/// Applies the mutation and asserts a second pass yields an empty patch.
pub(super) fn assert_idempotent(pod: &Value, vpa: &VpaPolicy, lrs: &[LimitRangeItem]) -> Value {
    let first = run(pod, vpa, lrs, MissingNodeRecommendation::Aggregate);
    let mut patched = pod.clone();
    json_patch::patch(&mut patched, &first.patch.operations()).unwrap_or_else(|e| panic!("{e}"));
    let second = run(&patched, vpa, lrs, MissingNodeRecommendation::Aggregate);
    assert_eq!(patch_json(&second), json!([]), "second pass over {patched}");
    patched
}

fn updates(text: &str) -> Value {
    json!({"op": "add", "path": "/metadata/annotations/vpaUpdates", "value": format!("Pod resources updated by node-exporter: {text}")})
}

fn observed(names: &str) -> Value {
    json!({"op": "add", "path": "/metadata/annotations/vpaObservedContainers", "value": names})
}

fn add(path: &str, value: Value) -> Value {
    json!({"op": "add", "path": path, "value": value})
}

/// nodescope's mark (see `mark`): the original resources it recorded.
fn mark(originals: Value) -> Value {
    add(
        "/metadata/annotations/nodescope.dev~1original-resources",
        json!(originals.to_string()),
    )
}

/// The patch without nodescope's mark, and the mark's recorded originals.
fn split_mark(patch: &Value) -> (Value, Option<Value>) {
    const KEY: &str = "nodescope.dev/original-resources";
    let parse = |v: &Value| -> Value {
        serde_json::from_str(v.as_str().unwrap_or_default()).unwrap_or(Value::Null)
    };
    let mut found = None;
    let mut rest = Vec::new();
    for op in patch.as_array().into_iter().flatten() {
        if op["path"] == "/metadata/annotations/nodescope.dev~1original-resources" {
            found = Some(parse(&op["value"]));
            continue;
        }
        let mut op = op.clone();
        if op["path"] == "/metadata/annotations" {
            if let Some(map) = op["value"].as_object_mut() {
                found = map.remove(KEY).map(|v| parse(&v)).or(found);
            }
        }
        rest.push(op);
    }
    (Value::Array(rest), found)
}

mod bad_input;
mod fixture;
mod pod_limit_range;
mod second_pass;
mod startup_boost;
mod table;
mod unboost;
mod upstream;
mod upstream_capping;
