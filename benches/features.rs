//! One period of the feature controller: every use of a feature found among
//! a cluster's objects by its gating policy (issue 18's scale: 50,000 pods
//! and 5,000 DaemonSets, on one core).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use nodescope::features::{find_uses, Listed};
use nodescope::params::NoInputs;
use nodescope::policy::PolicySet;
use serde_json::{json, Value};
use std::time::Duration;

const PODS: usize = 50_000;
const DAEMONSETS: usize = 5_000;

/// A pod as a DaemonSet creates it, every hundredth labelled a balloon.
fn pod(i: usize) -> Value {
    let mut labels = json!({"app": format!("app-{}", i % 500), "pod-template-hash": "5d8f7c9b6"});
    if i % 100 == 0 {
        labels["node.kubernetes.io/balloon"] = json!("true");
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": format!("ns-{}", i % 1000), "name": format!("pod-{i}"), "labels": labels,
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": format!("ds-{}", i % DAEMONSETS), "uid": "u", "controller": true}]},
        "spec": {"nodeName": format!("node-{}", i % 5000), "priorityClassName": "system-node-critical",
                 "containers": [{"name": "main", "image": "registry.example/app:1.2.3",
                                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                                 "ports": [{"containerPort": 8080}], "env": [{"name": "MODE", "value": "prod"}]}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1"},
    })
}

fn daemonset(i: usize) -> Value {
    let mut labels = json!({"app": format!("ds-{i}")});
    if i % 100 == 0 {
        labels["node.kubernetes.io/balloon"] = json!("true");
    }
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"namespace": format!("ns-{}", i % 1000), "name": format!("ds-{i}")},
        "spec": {"selector": {"matchLabels": {"app": format!("ds-{i}")}},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "main", "image": "registry.example/agent:1",
                                                       "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}]}}},
    })
}

fn listed() -> Vec<Listed> {
    vec![
        Listed {
            group: String::new(),
            version: "v1".to_owned(),
            resource: "pods".to_owned(),
            namespaced: true,
            objects: (0..PODS).map(pod).collect(),
        },
        Listed {
            group: "apps".to_owned(),
            version: "v1".to_owned(),
            resource: "daemonsets".to_owned(),
            namespaced: true,
            objects: (0..DAEMONSETS).map(daemonset).collect(),
        },
    ]
}

fn uses(c: &mut Criterion) {
    let policies =
        PolicySet::load_dir(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies"))
            .expect("the bundle loads");
    let feature = json!({"apiVersion": "featureflags.nodescope.dev/v1alpha1", "kind": "Feature",
                         "metadata": {"namespace": "kube-system", "name": "balloon-pods"},
                         "spec": {"desired": "Disabled"}, "status": {"state": "TurningOff"}});
    let listed = listed();
    let found = find_uses(&policies, &feature, &listed, &NoInputs).expect("uses");
    assert_eq!(
        found.iter().map(|p| p.uses.len()).sum::<usize>(),
        PODS / 100 + DAEMONSETS / 100
    );
    let mut group = c.benchmark_group("feature-uses");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Elements((PODS + DAEMONSETS) as u64));
    group.bench_function("balloon-pods-50000-pods-5000-daemonsets", |b| {
        b.iter(|| find_uses(&policies, &feature, &listed, &NoInputs).expect("uses"));
    });
    group.finish();
}

criterion_group!(benches, uses);
criterion_main!(benches);
