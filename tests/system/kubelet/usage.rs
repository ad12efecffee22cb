//! Usage as the model declares it, written as PodMetricsList recordings
//! (one file per interval) that `recommend --metrics file:DIR` replays, one
//! interval each `--recommender-interval`.
//!
//! The model: `agent` uses in proportion to its zone (zone-c three times
//! zone-a), `exporter` in proportion to its node's size (an xlarge twice a
//! large), `logger` the same everywhere. The recommender's groups differ
//! by zone and by node, so a pod given the VPA-wide value instead of its
//! group's is seen at once.

use super::NodeShape;
use serde_json::{json, Value};
use std::path::Path;

/// (cpu millicores, memory MiB) the model gives `daemonset`'s container on
/// `node`.
pub fn model(daemonset: &str, node: &NodeShape) -> (i64, i64) {
    let zone = match node.zone.as_str() {
        "zone-a" => 1,
        "zone-b" => 2,
        _ => 3,
    };
    let size = if node.instance_type == "m5.xlarge" {
        2
    } else {
        1
    };
    match daemonset {
        "agent" => (100 * zone, 300 * zone),
        "exporter" => (60 * size, 280 * size),
        _ => (30, 100),
    }
}

/// One recorded pod: its namespace, name, DaemonSet, container and node.
pub struct Recorded<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub daemonset: &'a str,
    pub container: &'a str,
    pub node: &'a NodeShape,
}

/// Writes `intervals` files into `dir`, a minute apart, the first at
/// `start` (seconds since the epoch).
pub fn record(dir: &Path, pods: &[Recorded<'_>], intervals: usize, start: i64) {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for i in 0..intervals {
        let at = k8s_openapi::jiff::Timestamp::from_second(start + 60 * i as i64)
            .unwrap_or_else(|e| panic!("{e}"))
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        let items: Vec<Value> = pods
            .iter()
            .map(|p| {
                let (cpu, memory) = model(p.daemonset, p.node);
                json!({"metadata": {"name": p.name, "namespace": p.namespace},
                    "timestamp": at, "window": "30s",
                    "containers": [{"name": p.container,
                        "usage": {"cpu": format!("{cpu}m"), "memory": format!("{memory}Mi")}}]})
            })
            .collect();
        let list = json!({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetricsList",
            "metadata": {}, "items": items});
        let path = dir.join(format!("interval-{i:03}.json"));
        std::fs::write(&path, list.to_string())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}
