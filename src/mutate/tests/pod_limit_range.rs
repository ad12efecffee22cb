//! Upstream's `TestApplyPodLimitRange` table, as data
//! (`upstream_pod_limit_range.json`, extracted from kubernetes/autoscaler
//! 55c37cd5eb55 vertical-pod-autoscaler/pkg/utils/vpa/capping_test.go).
//!
//! Upstream calls `applyPodLimitRange` directly, on the recommendations as
//! given; nodescope's admission first gives a container without a
//! recommendation one equal to its requests, as upstream's
//! `capProportionallyToPodLimitRange` does before calling it. The table's
//! expectations are for the containers it lists, and those agree either way.

use super::capping::{cap_pod, Current, PodMember};
use super::*;
use crate::quantity::Quantity;
use serde_json::Value;

const TABLE: &str = include_str!("upstream_pod_limit_range.json");

fn list(v: &Value) -> ResourceList {
    v.as_object()
        .into_iter()
        .flatten()
        .map(|(k, q)| {
            let text = q.as_str().unwrap_or_default();
            let q = Quantity::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            (k.clone(), q)
        })
        .collect()
}

fn target_of<'v>(recs: &'v [Value], container: &str) -> Option<&'v Value> {
    recs.iter()
        .find(|r| r["container"] == container)
        .map(|r| &r["target"])
}

#[test]
fn upstreams_apply_pod_limit_range_table() {
    let table: Value = serde_json::from_str(TABLE).unwrap_or_else(|e| panic!("{e}"));
    let cases = table["cases"].as_array().cloned().unwrap_or_default();
    assert_eq!(cases.len(), 8, "the table has upstream's eight cases");
    for case in &cases {
        let name = case["name"].as_str().unwrap_or_default();
        let recs = case["recommendations"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let containers = case["containers"].as_array().cloned().unwrap_or_default();
        let mut lr = LimitRangeItem::new(LimitKind::Pod);
        lr.min = list(&case["limitRange"]["min"]);
        lr.max = list(&case["limitRange"]["max"]);
        lr.default = list(&case["limitRange"]["default"]);
        let mut rows: Vec<(String, Current, Current, ResourceList)> = containers
            .iter()
            .map(|c| {
                let name = c["name"].as_str().unwrap_or_default().to_owned();
                let requests = list(&c["requests"]);
                let target = target_of(&recs, &name).map_or_else(|| requests.clone(), list);
                (name, requests, list(&c["limits"]), target)
            })
            .collect();
        let mut members: Vec<PodMember<'_>> = rows
            .iter_mut()
            .map(|(_, requests, limits, target)| PodMember {
                requests,
                limits,
                target,
            })
            .collect();
        cap_pod(&mut members, &lr);
        let resource = case["resource"].as_str().unwrap_or_default();
        for expected in case["expect"].as_array().into_iter().flatten() {
            let container = expected["container"].as_str().unwrap_or_default();
            let want = list(&expected["target"]);
            // A recommendation for a container the pod lacks is left as it is.
            let got = rows.iter().find(|(n, ..)| n == container).map_or_else(
                || target_of(&recs, container).map(list).unwrap_or_default(),
                |(.., target)| target.clone(),
            );
            let milli = |l: &ResourceList| l.get(resource).map(Quantity::milli_value);
            assert_eq!(milli(&got), milli(&want), "{name}: {container} {resource}");
        }
    }
}
