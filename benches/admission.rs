//! Request bytes to response bytes through `admission::answer`, the function
//! the server calls: the mutation with large per-node stores, and the whole
//! policy bundle on the captured pod reviews.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use nodescope::admission::{answer, Decider};
use nodescope::metrics::Webhook;
use nodescope::policy::PolicySet;
use nodescope::store::{synthetic, Snapshot};
use std::path::Path;
use std::sync::Arc;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        root()
            .join("../shared/fixtures/admission-reviews")
            .join(name),
    )
    .expect("fixture")
}

fn decider(vpas: usize, nodes: usize) -> Decider {
    let mut objects = synthetic::node_scoped_vpas(vpas, nodes);
    let store = nodescope::manifest::read_path(&root().join("examples/store"), &[]).expect("store");
    // Keep the example's Features and namespaces, replace its VPA.
    objects.extend(
        store
            .into_iter()
            .map(|d| d.value)
            .filter(|v| v["kind"] != "VerticalPodAutoscaler"),
    );
    let policies = PolicySet::load_dir(&root().join("policies")).expect("policies");
    Decider::new(Arc::new(Snapshot::build(objects)), Arc::new(policies))
}

fn mutate(c: &mut Criterion) {
    let body = fixture("pod-node-exporter-node-a-1-create.mutate.json");
    let mut group = c.benchmark_group("mutate");
    group.throughput(Throughput::Elements(1));
    let d = decider(100, 5_000);
    let check = answer(Webhook::Mutate, &body, &d);
    assert!(
        String::from_utf8_lossy(&check.body).contains("\"patch\""),
        "the bench must measure a real patch"
    );
    group.bench_function("100-vpas-x-5000-nodes", |b| {
        b.iter(|| answer(Webhook::Mutate, std::hint::black_box(&body), &d))
    });
    group.finish();

    let mut group = c.benchmark_group("mutate-nodes");
    for nodes in [500, 5_000, 50_000] {
        let d = decider(1, nodes);
        group.bench_with_input(BenchmarkId::from_parameter(nodes), &nodes, |b, _| {
            b.iter(|| answer(Webhook::Mutate, std::hint::black_box(&body), &d))
        });
    }
    group.finish();
}

fn validate(c: &mut Criterion) {
    let d = decider(1, 10);
    let mut group = c.benchmark_group("validate");
    for name in [
        "pod-node-balloon-create.validate.json",
        "pod-node-exporter-node-a-1-create.validate.json",
    ] {
        let body = fixture(name);
        group.bench_function(name.trim_end_matches(".validate.json"), |b| {
            b.iter(|| answer(Webhook::Validate, std::hint::black_box(&body), &d))
        });
    }
    group.finish();
}

criterion_group!(benches, mutate, validate);
criterion_main!(benches);
