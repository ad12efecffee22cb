//! Writes the example data of `nodescope recommend --demo` into
//! `examples/recommend/`: a `zone-agent` DaemonSet VPA scoped by
//! `node.kubernetes.io/instance-type`, three nodes of three shapes, their
//! three pods, and two hours of PodMetrics at one-minute intervals (one file
//! per hour). The usage is a fixed function of the minute, so the files are
//! the same on every run.
//!
//! `cargo run --example gen_recommend_demo`

use serde_json::{json, Value};
use std::fmt::Write as _;

const SHAPES: [(&str, &str, u64, u64); 3] = [
    // (node, instance type, CPU millicores, memory MiB)
    ("node-small", "small", 40, 300),
    ("node-medium", "medium", 180, 700),
    ("node-large", "large", 650, 1500),
];

fn yaml(docs: &[Value]) -> String {
    let mut out = String::new();
    for d in docs {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(d).unwrap_or_default());
    }
    out
}

fn main() -> std::io::Result<()> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/recommend");
    std::fs::create_dir_all(dir.join("store"))?;
    std::fs::create_dir_all(dir.join("metrics"))?;
    let vpa = json!({
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "zone-agent", "namespace": "monitoring", "generation": 1},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "zone-agent"},
            "scope": "node.kubernetes.io/instance-type",
            "updatePolicy": {"updateMode": "Initial"},
        },
    });
    let mut store = vec![vpa];
    for (node, shape, _, _) in SHAPES {
        store.push(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node, "labels": {"node.kubernetes.io/instance-type": shape}},
        }));
        store.push(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": format!("zone-agent-{shape}"), "namespace": "monitoring",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "zone-agent", "controller": true, "uid": "5c1d2b7e-0000-4000-8000-000000000001"}],
            },
            "spec": {"nodeName": node, "containers": [{"name": "agent", "image": "registry.example/zone-agent:1.0", "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}}]},
        }));
    }
    std::fs::write(dir.join("store/zone-agent.yaml"), yaml(&store))?;
    for hour in 0..2u64 {
        let mut items = Vec::new();
        for minute in 0..60u64 {
            let m = hour * 60 + minute;
            let mut timestamp = String::new();
            let _ = write!(timestamp, "2026-11-25T{:02}:{:02}:00Z", 8 + m / 60, m % 60);
            for (i, (_, shape, cpu, memory)) in SHAPES.iter().enumerate() {
                // A repeating ±10% wave, different per node.
                let wave = ((m + 7 * i as u64) % 11) as i64 - 5;
                let cpu = (*cpu as i64) * (100 + 2 * wave) / 100;
                let memory = (*memory as i64) * (100 + wave) / 100;
                items.push(json!({
                    "metadata": {"name": format!("zone-agent-{shape}"), "namespace": "monitoring"},
                    "timestamp": timestamp, "window": "30s",
                    "containers": [{"name": "agent", "usage": {"cpu": format!("{}m", cpu), "memory": format!("{}Mi", memory)}}],
                }));
            }
        }
        let list = json!({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetricsList", "metadata": {}, "items": items});
        let text = serde_json::to_string_pretty(&list).unwrap_or_default() + "\n";
        std::fs::write(
            dir.join(format!("metrics/2026-11-25T{:02}.json", 8 + hour)),
            text,
        )?;
    }
    println!("wrote {}", dir.display());
    Ok(())
}
