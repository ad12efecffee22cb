//! The scale bench of issue 43: each controller against a hollow
//! apiserver holding 5,000 nodes and 150,000 pods (30 a node: 4 of 4
//! DaemonSets, a balloon, 25 of Deployments), as kubemark's hollow nodes
//! stand in for kubelets. The hollow apiserver (benches/support/hollow)
//! runs in this process, the objects pre-serialized; each component is
//! the real `nodescope` binary in a child process, one at a time, with its
//! Deployment's arguments from manifests/ (only addresses and the log
//! format changed).
//!
//! Per component: peak RSS (VmHWM), RSS once synced and the same on an
//! empty cluster (their difference per pod and per node), the time to its
//! first whole pass and the requests that took, then over one more pass
//! (between two pass marks, see `Spec::marker`) its CPU (utime + stime)
//! and requests. Prints a markdown table and the queries each component
//! sent (digits shown as `#`).
//!
//! `cargo bench --bench scale` (5,000 nodes), or
//! `cargo bench --bench scale -- --nodes 500 [--only recommender,updater]
//! [--wrap "heaptrack -o /tmp/h" --skip-empty] [--keep DIR]` (under
//! `--wrap` the /proc figures are the wrapper's, not the component's).

#[path = "support/hollow/mod.rs"]
mod hollow;

use hollow::measure::{self, First, Marker, Spec};
use hollow::server::lock;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn specs(dir: &std::path::Path) -> Vec<Spec> {
    let certs = dir.join("certs");
    let policies = dir.join("policies");
    let s = |v: &std::path::Path| v.display().to_string();
    let o = |pairs: &[(&str, String)]| {
        pairs
            .iter()
            .map(|(f, v)| ((*f).to_owned(), v.clone()))
            .collect()
    };
    vec![
        Spec {
            name: "webhook",
            manifest: "manifests/base/server/deployment.yaml",
            overrides: o(&[
                (
                    "--listen",
                    format!("127.0.0.1:{}", hollow::process::free_port()),
                ),
                ("--tls-cert", s(&certs.join("tls.crt"))),
                ("--tls-key", s(&certs.join("tls.key"))),
                ("--policies", s(&policies)),
            ]),
            metrics_flag: "--metrics-listen",
            first: First::Ready,
            marker: Marker::Window,
            period: Duration::from_secs(30),
        },
        Spec {
            name: "recommender",
            manifest: "manifests/components/recommender/recommender.yaml",
            overrides: Vec::new(),
            metrics_flag: "--address",
            first: First::Log("history restored from checkpoints"),
            marker: Marker::Lists("/apis/autoscaling.k8s.io/v1/verticalpodautoscalers"),
            period: Duration::from_secs(60),
        },
        Spec {
            name: "updater",
            manifest: "manifests/components/updater/updater.yaml",
            overrides: Vec::new(),
            metrics_flag: "--address",
            first: First::Metric(
                r#"nodescope_updater_execution_latency_seconds_count{step="total"}"#,
            ),
            marker: Marker::Metric(
                r#"nodescope_updater_execution_latency_seconds_count{step="total"}"#,
            ),
            period: Duration::from_secs(60),
        },
        Spec {
            name: "balloon",
            manifest: "manifests/components/balloon/nodescope-balloon.yaml",
            overrides: Vec::new(),
            metrics_flag: "--metrics-listen",
            first: First::Ready,
            marker: Marker::Window,
            period: Duration::from_secs(10),
        },
        // A pass begins with its LIST of the Features; passes also follow
        // the writes its watches see (its own status writes among them),
        // so the pass is from one LIST to the next, however close.
        Spec {
            name: "features",
            manifest: "manifests/base/features/deployment.yaml",
            overrides: Vec::new(),
            metrics_flag: "--metrics-listen",
            first: First::Ready,
            marker: Marker::Lists("/apis/featureflags.nodescope.dev/v1alpha1/features"),
            period: Duration::from_millis(1),
        },
    ]
}

fn mib(b: u64) -> String {
    format!("{:.0} MiB", b as f64 / 1048576.0)
}

fn prepare(dir: &std::path::Path) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nodescope"))
        .args([
            "certs",
            "--host",
            "127.0.0.1",
            "--host",
            "localhost",
            "--out",
        ])
        .arg(dir.join("certs"))
        .output()
        .unwrap_or_else(|e| panic!("nodescope certs: {e}"));
    assert!(
        out.status.success(),
        "nodescope certs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let policies = dir.join("policies");
    std::fs::create_dir_all(&policies).unwrap_or_else(|e| panic!("{e}"));
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    for entry in std::fs::read_dir(&repo)
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
    {
        if entry.path().extension().is_some_and(|e| e == "yaml") {
            std::fs::copy(entry.path(), policies.join(entry.file_name()))
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

struct Cluster {
    state: Arc<hollow::server::State>,
    kubeconfig: std::path::PathBuf,
}

fn cluster(runtime: &tokio::runtime::Runtime, nodes: usize, dir: &std::path::Path) -> Cluster {
    let began = Instant::now();
    let state = Arc::new(hollow::state(&hollow::Size { nodes }));
    let port = runtime.block_on(hollow::serve(state.clone()));
    let kubeconfig = dir.join(format!("hollow-{nodes}.kubeconfig"));
    hollow::kubeconfig(&kubeconfig, port);
    let pods = hollow::server::read(&state.pods).items.len();
    eprintln!(
        "hollow apiserver: {nodes} nodes, {pods} pods on 127.0.0.1:{port} ({:.1?} to generate)",
        began.elapsed()
    );
    Cluster { state, kubeconfig }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let nodes: usize = flag(&args, "--nodes")
        .and_then(|n| n.parse().ok())
        .unwrap_or(5_000);
    let only = flag(&args, "--only");
    // Under a profiler, only the full cluster matters.
    let skip_empty = args.iter().any(|a| a == "--skip-empty");
    let wrap: Vec<String> = flag(&args, "--wrap")
        .map(|w| w.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    let temp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir =
        flag(&args, "--keep").map_or_else(|| temp.path().to_owned(), std::path::PathBuf::from);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    prepare(&dir);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    let empty = cluster(&runtime, 0, &dir);
    let full = cluster(&runtime, nodes, &dir);
    let pods = nodes * hollow::generate::PODS_PER_NODE;
    let limit = Duration::from_secs(900);
    let mut rows = Vec::new();
    for spec in specs(&dir) {
        if only
            .as_ref()
            .is_some_and(|o| !o.split(',').any(|n| n == spec.name))
        {
            continue;
        }
        eprintln!("{}: on the empty cluster", spec.name);
        let base = if skip_empty {
            Err("not run (--skip-empty)".to_owned())
        } else {
            measure::run(
                &spec,
                &empty.state,
                &empty.kubeconfig,
                &format!("{}-empty", spec.name),
                &dir,
                &wrap,
                limit,
            )
        };
        eprintln!("{}: on {nodes} nodes", spec.name);
        let at = measure::run(
            &spec,
            &full.state,
            &full.kubeconfig,
            spec.name,
            &dir,
            &wrap,
            limit,
        );
        if let Err(e) = &at {
            eprintln!("{}: not measured: {e}", spec.name);
        }
        for q in lock(&full.state.queries)
            .get(spec.name)
            .into_iter()
            .flatten()
        {
            eprintln!("  {q}");
        }
        rows.push((spec, base, at));
    }
    println!("\n| component | peak RSS | RSS synced | RSS synced, empty cluster | bytes per pod | bytes per node | RSS after one more pass | first pass after | CPU to it | requests to it | CPU of one pass | requests per pass | pass (wall) |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (spec, base, at) in &rows {
        let Ok(m) = at else {
            println!(
                "| {} | not measured: {} |||||||||||| ",
                spec.name,
                at.as_ref()
                    .err()
                    .map_or("", String::as_str)
                    .replace('|', "/")
            );
            continue;
        };
        let b = base.as_ref().map(|b| b.rss_synced).unwrap_or(0);
        let delta = m.rss_synced.saturating_sub(b);
        let per = |n: usize| {
            if n == 0 {
                "-".to_owned()
            } else {
                format!("{}", delta / n as u64)
            }
        };
        println!("| {} | {} | {} | {} | {} | {} | {} | {:.1} s | {:.1} s | {} | {:.2} s | {} | {:.1} s |", spec.name, mib(m.peak),
            mib(m.rss_synced), base.as_ref().map_or_else(|e| format!("({e})"), |b| mib(b.rss_synced)), per(pods), per(nodes),
            mib(m.rss_after_pass), m.ready_after.as_secs_f64(), m.sync_cpu, m.sync.total(), m.pass_cpu, m.pass.total(),
            m.pass_wall.as_secs_f64());
    }
    for (spec, _, at) in &rows {
        let Ok(m) = at else { continue };
        println!(
            "\n{} ({} MiB sent to first pass): requests to the first pass / in one pass",
            spec.name,
            m.sync.bytes >> 20
        );
        for (k, v) in &m.sync.requests {
            println!(
                "  {v:>7} / {:>5}  {k}",
                m.pass.requests.get(k).copied().unwrap_or(0)
            );
        }
        for (k, v) in m
            .pass
            .requests
            .iter()
            .filter(|(k, _)| !m.sync.requests.contains_key(*k))
        {
            println!("  {:>7} / {v:>5}  {k}", 0);
        }
    }
    println!("\nqueries (digits as #):");
    for (component, queries) in lock(&full.state.queries).iter() {
        for q in queries {
            println!("  {component}: {q}");
        }
    }
    let refused = lock(&full.state.refused).clone();
    let refused_empty = lock(&empty.state.refused).clone();
    println!(
        "\nrefused by the hollow apiserver: {}",
        refused.len() + refused_empty.len()
    );
    for r in refused.iter().chain(&refused_empty).take(50) {
        println!("  {r}");
    }
}
