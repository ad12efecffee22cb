//! The recommender at issue 17's scale: 1,000,000 aggregation keys (100
//! scoped DaemonSet VPAs x 5,000 nodes x 2 containers), each holding a week
//! of history. Measures, per cluster size:
//! - RSS of the process holding the model (pods, container states, keys);
//! - CPU time of one interval's ingestion of 1,000,000 container samples
//!   (CPU and memory each), per sample, at 500, 5,000 and 50,000 nodes (the
//!   VPA count shrinks as nodes grow, so the samples stay 1,000,000);
//! - CPU time of computing every VPA's status.
//!
//! A week of per-minute samples for a million keys is ten billion samples,
//! too many to feed here; the keys are instead cloned from 64 templates fed
//! a real week (10,080 CPU samples with ±20% noise, a peak a day), so each
//! key holds what a week leaves. Each size runs in a child process so RSS
//! is its own.
//!
//! `cargo bench --bench recommend` (all sizes) or
//! `cargo bench --bench recommend -- 5000` (one).

use nodescope::recommend::aggregate::{AggregateContainerState, HistoryConfig};
use nodescope::recommend::checkpoints::checkpoints;
use nodescope::recommend::input::{NodeIndex, PodUsage, ScopedVpa, TrackedPod};
use nodescope::recommend::model::{History, ModelConfig};
use nodescope::recommend::replay::Replay;
use nodescope::recommend::status::vpa_status;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

#[path = "support/synthetic_time.rs"]
mod synthetic_time;
use synthetic_time::{at, noise};

const KEYS: usize = 1_000_000;
const CONTAINERS: [&str; 2] = ["agent", "sidecar"];

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// A week of history for one key: per-minute CPU with ±20% noise around
/// `base` millicores, and a memory peak a day.
fn template(config: &HistoryConfig, seed: u64, base: f64) -> AggregateContainerState {
    let mut a = AggregateContainerState::default();
    for minute in 0..7 * 24 * 60 {
        let cores = base * (1.0 + 0.2 * noise(seed * 100_003 + minute as u64)) / 1000.0;
        a.add_cpu_sample(config, cores, 0.1, at(minute));
    }
    for day in 0..7 {
        let bytes = 200e6 * (1.0 + 0.1 * noise(seed * 7 + day as u64));
        a.add_memory_peak(config, bytes, at(day * 24 * 60 + 24 * 60));
    }
    a
}

fn vpa(i: usize) -> ScopedVpa {
    ScopedVpa::from_value(&json!({
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": format!("agent-{i}"), "namespace": "agents", "generation": 1},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": format!("agent-{i}")}, "scope": "node"},
    }))
    .ok()
    .flatten()
    .unwrap_or_else(|| panic!("bench VPA {i} is scoped"))
}

fn run(nodes: usize) {
    let replay = Replay::defaults();
    let config: &ModelConfig = &replay.model;
    let vpas: Vec<ScopedVpa> = (0..KEYS / nodes / CONTAINERS.len()).map(vpa).collect();
    let before = rss_mib();
    let templates: Vec<AggregateContainerState> = (0..64)
        .map(|s| template(&config.history, s as u64, 50.0 + 10.0 * s as f64))
        .collect();
    // The model as a week of intervals would leave it: every pod known
    // (as the watch leaves them) with its container states, every key with
    // a week of history.
    let mut history = History::default();
    for v in &vpas {
        for n in 0..nodes {
            history.upsert_pod(&TrackedPod {
                namespace: "agents".into(),
                name: format!("{}-{n}", v.name),
                daemonset: v.daemonset.clone(),
                node: Some(format!("node-{n}")),
                containers: CONTAINERS
                    .iter()
                    .map(|c| ((*c).to_owned(), 256 << 20))
                    .collect(),
                oom_kills: Vec::new(),
            });
        }
    }
    let with_pods = rss_mib();
    let first: Vec<PodUsage> = usage(&history, 0);
    history.observe(config, &vpas, &NodeIndex::default(), &first, at(0));
    // Node n's groups hold template n % 64, and its pods' usage stays in
    // that template's range, as a DaemonSet's usage on one node does.
    for containers in history.vpas.values_mut() {
        for c in containers.values_mut() {
            for (value, state) in c.groups.iter_mut() {
                *state = templates[node_of(value) % templates.len()].clone();
            }
        }
    }
    let keys = history.keys();
    drop(first);
    // Give freed memory back, so RSS is what is held: the model, and the
    // pods as the watch keeps them.
    // SAFETY: malloc_trim only releases free heap pages.
    unsafe { libc::malloc_trim(0) };
    let held = rss_mib();
    // One interval: 1,000,000 container samples (CPU and memory each).
    let interval = usage(&history, 7 * 24 * 60 + 1);
    // The part of an interval that does not depend on usage: placing every
    // pod, the OOM scan and garbage collection.
    let cpu = thread_cpu();
    history.observe(config, &vpas, &NodeIndex::default(), &[], at(7 * 24 * 60));
    let placing = thread_cpu() - cpu;
    let cpu = thread_cpu();
    let ingested = history.observe(
        config,
        &vpas,
        &NodeIndex::default(),
        &interval,
        at(7 * 24 * 60 + 1),
    );
    let ingest = thread_cpu() - cpu;
    let counts = history.pod_counts();
    let cpu = thread_cpu();
    let mut groups = 0usize;
    for v in &vpas {
        let key = format!("{}/{}", v.namespace, v.name);
        let status = vpa_status(
            &replay.status,
            &config.history,
            v,
            history.vpas.get(key.as_str()),
            counts.get(key.as_str()).copied().unwrap_or(0),
            at(7 * 24 * 60 + 1),
        );
        groups += status.recommendation_groups.len();
    }
    let recompute = thread_cpu() - cpu;
    // Of which: the arithmetic alone (every group's targets, with upstream's
    // estimators), without building the status objects.
    let cpu = thread_cpu();
    let rc = &replay.status.recommender;
    for containers in history.vpas.values() {
        let min = nodescope::recommend::estimate::pod_minimums(rc, containers.len());
        for c in containers.values() {
            for state in c.groups.values() {
                let m = rc.margin_fraction;
                let t = (
                    nodescope::recommend::estimate::with_margin(
                        nodescope::recommend::estimate::cpu_percentile(
                            state,
                            rc.target_cpu_percentile,
                        ),
                        m,
                    )
                    .max(min.0),
                    nodescope::recommend::estimate::with_margin(
                        nodescope::recommend::estimate::memory_percentile(
                            state,
                            rc.target_memory_percentile,
                        ),
                        m,
                    )
                    .max(min.1),
                );
                std::hint::black_box(t);
            }
        }
    }
    let arithmetic = thread_cpu() - cpu;
    // And merging every group into the DaemonSet-wide state.
    let cpu = thread_cpu();
    for containers in history.vpas.values() {
        for c in containers.values() {
            let mut all = AggregateContainerState::default();
            for state in c.groups.values() {
                all.merge(&config.history, state);
            }
            std::hint::black_box(&all);
        }
    }
    let merging = thread_cpu() - cpu;
    let after = rss_mib();
    let cpu = thread_cpu();
    let objects = checkpoints(&history, "2026-11-25T10:00:00Z").unwrap_or_default();
    let encode = thread_cpu() - cpu;
    let sizes: Vec<usize> = objects
        .iter()
        .filter_map(|o| o["spec"]["data"].as_str().map(str::len))
        .collect();
    let container_samples = ingested.samples / 2;
    println!(
        "nodes={nodes} vpas={} keys={keys} rss_before={before:.1}MiB rss_pods={with_pods:.1}MiB rss_held={held:.1}MiB rss_after={after:.1}MiB \
         ingest={:.3}s (placing {:.3}s) samples={} ns_per_container_sample={:.0} recompute={:.3}s (targets {:.3}s, merging {:.3}s) groups={groups} \
         template_heap_bytes={} checkpoint_objects={} per_vpa={} largest={}B encode={:.3}s",
        vpas.len(),
        ingest.as_secs_f64(),
        placing.as_secs_f64(),
        ingested.samples,
        ingest.as_nanos() as f64 / container_samples.max(1) as f64,
        recompute.as_secs_f64(),
        arithmetic.as_secs_f64(),
        merging.as_secs_f64(),
        templates[0].heap_bytes() + std::mem::size_of::<AggregateContainerState>(),
        objects.len(),
        objects.len() / vpas.len().max(1),
        sizes.iter().max().copied().unwrap_or(0),
        encode.as_secs_f64(),
    );
    drop(Arc::new(history));
}

fn node_of(value: &str) -> usize {
    value.trim_start_matches("node-").parse().unwrap_or(0)
}

/// Usage of one minute: each pod near its node's template (base
/// 50 + 10 × (n % 64) millicores, ~200 MB).
fn usage(history: &History, minute: i64) -> Vec<PodUsage> {
    history
        .pods
        .iter()
        .enumerate()
        .map(|(i, (key, p))| {
            let (namespace, name) = key.split_once('/').unwrap_or_default();
            let n = node_of(p.node.as_deref().unwrap_or_default()) % 64;
            let base = 50.0 + 10.0 * n as f64;
            let cpu = (base * (1.0 + 0.1 * noise(i as u64 + minute as u64 * 7))) as i64;
            PodUsage {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                timestamp: at(minute),
                containers: CONTAINERS
                    .iter()
                    .map(|c| {
                        (
                            (*c).to_owned(),
                            cpu,
                            190_000_000 + (i % 1000) as i64 * 10_000,
                        )
                    })
                    .collect(),
            }
        })
        .collect()
}

/// The transient memory of reading one namespace's PodMetrics list of
/// `pods` items as metrics-server sends them (labels, two containers):
/// RSS with the response text, then with it parsed into the typed items,
/// then after converting them.
fn metrics_list(pods: usize) {
    let before = rss_mib();
    let mut text = String::from(
        r#"{"kind":"PodMetricsList","apiVersion":"metrics.k8s.io/v1beta1","metadata":{},"items":["#,
    );
    for i in 0..pods {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&format!(
            r#"{{"metadata":{{"name":"agent-{}-{i}","namespace":"agents","creationTimestamp":"2026-11-25T10:00:00Z","labels":{{"app.kubernetes.io/name":"agent-{}","controller-revision-hash":"5d8f7c9b6","pod-template-generation":"3"}}}},"timestamp":"2026-11-25T09:59:45Z","window":"15.047s","containers":[{{"name":"agent","usage":{{"cpu":"{}n","memory":"{}Ki"}}}},{{"name":"sidecar","usage":{{"cpu":"{}n","memory":"{}Ki"}}}}]}}"#,
            i % 100, i % 100, 51_234_567 + i, 195_312 + i, 3_234_567 + i, 20_480 + i
        ));
    }
    text.push_str("]}");
    let with_text = rss_mib();
    let list: nodescope::recommend::input::PodMetricsList =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    let parsed = rss_mib();
    let usage: Vec<PodUsage> = list.items.into_iter().filter_map(Result::ok).collect();
    let converted = rss_mib();
    println!(
        "metrics-list pods={pods} text={:.1}MiB ({} B/pod) rss: before={before:.1} text={with_text:.1} parsed={parsed:.1} converted={converted:.1} MiB peak_per_pod={:.0}B usage={}",
        text.len() as f64 / 1048576.0,
        text.len() / pods,
        (parsed - before) * 1048576.0 / pods as f64,
        usage.len()
    );
}

fn main() {
    if std::env::args().any(|a| a == "metrics-list") {
        metrics_list(500_000);
        return;
    }
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    if let [nodes] = sizes[..] {
        run(nodes);
        return;
    }
    let exe = std::env::current_exe().unwrap_or_default();
    for nodes in [500, 5_000, 50_000] {
        let status = std::process::Command::new(&exe)
            .arg(nodes.to_string())
            .status();
        if !status.as_ref().is_ok_and(|s| s.success()) {
            eprintln!("recommend bench at {nodes} nodes failed: {status:?}");
            std::process::exit(1);
        }
    }
}
