//! Runs `admission::answer` on a captured review N times, for instruction
//! counts under `valgrind --tool=callgrind` (repeatable on a busy machine,
//! unlike wall-clock time). See BENCHMARKS.md.
//!
//! `cargo run --release --example answer_loop -- mutate|validate REVIEW.json N`
//! (add `--features mimalloc` for the allocator the binary can be built with;
//! `ANSWER_LOOP_SCOPE=zone` for a zone-scoped VPA and labelled Nodes)

#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use nodescope::admission::{answer, Decider};
use nodescope::metrics::Webhook;
use nodescope::policy::PolicySet;
use nodescope::store::{synthetic, Snapshot};
use std::path::Path;
use std::sync::Arc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let webhook = match args.get(1).map(String::as_str) {
        Some("validate") => Webhook::Validate,
        _ => Webhook::Mutate,
    };
    let body = std::fs::read(
        args.get(2)
            .ok_or("usage: answer_loop mutate|validate REVIEW N")?,
    )?;
    let n: usize = args.get(3).map_or(Ok(1000), |s| s.parse())?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Per-request cost does not depend on the store's size (hash lookups), so
    // a small store keeps callgrind runs short: ANSWER_LOOP_NODES=10.
    let nodes = std::env::var("ANSWER_LOOP_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000);
    let vpas = std::env::var("ANSWER_LOOP_VPAS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    // ANSWER_LOOP_SCOPE=zone: zone-scoped VPAs and labelled Nodes instead.
    let mut objects = match std::env::var("ANSWER_LOOP_SCOPE").as_deref() {
        Ok("zone") => synthetic::zone_scoped_cluster(vpas, nodes),
        _ => synthetic::node_scoped_vpas(vpas, nodes),
    };
    objects.extend(
        nodescope::manifest::read_path(&root.join("examples/store"), &[])?
            .into_iter()
            .map(|d| d.value)
            .filter(|v| v["kind"] != "VerticalPodAutoscaler"),
    );
    let policies = PolicySet::load_dir(&root.join("policies"))?;
    let decider = Decider::new(Arc::new(Snapshot::build(objects)), Arc::new(policies));
    let started = std::time::Instant::now();
    let mut bytes = 0;
    for _ in 0..n {
        bytes += answer(webhook, std::hint::black_box(&body), &decider)
            .body
            .len();
    }
    let elapsed = started.elapsed();
    println!(
        "{n} answers, {bytes} response bytes, {:.2} µs each",
        elapsed.as_secs_f64() * 1e6 / n as f64
    );
    Ok(())
}
