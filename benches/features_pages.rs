//! Memory of one features-controller period at issue 43's scale: 150,000
//! pods (issue 18's generated pods, every hundredth a balloon) read for
//! Feature `kube-system/balloon-pods` from an in-memory apiserver, three
//! ways, each in a child process of its own:
//! - `before`: what a period did up to issue 43, one LIST answered whole,
//!   every object kept while uses are found (`cluster::read_view`, then
//!   `find_uses` and `transition_tasks`);
//! - `pages`: `features::period::read`, LISTs of 500 followed by
//!   `continue`, each page evaluated and dropped;
//! - `ignored`: the same against an apiserver that ignores `limit` and
//!   answers whole (as from its watch cache), to show the page is what
//!   bounds it.
//!
//! For each: the heap's peak during the period (a counting allocator, every
//! byte the process allocates, the in-memory apiserver's response bodies
//! included: a real client holds the same bytes as it receives them), peak
//! RSS (VmHWM, reset before), the process's CPU time and the uses found.
//!
//! `cargo bench --bench features_pages` or, for one way and a size,
//! `cargo bench --bench features_pages -- pages 20000`.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use nodescope::features::cluster::read_view;
use nodescope::features::period::{read, Job};
use nodescope::features::{find_uses, transition_tasks};
use serde_json::{json, Value};
use std::alloc::{GlobalAlloc, Layout, System};
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const PODS: usize = 150_000;

struct Counting;
static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = NOW.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        NOW.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn status_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn cpu() -> Duration {
    // SAFETY: getrusage writes into the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// Issue 18's pod (benches/features.rs), without apiVersion and kind as a
/// list item comes.
fn pod(i: usize) -> Value {
    let mut labels = json!({"app": format!("app-{}", i % 500), "pod-template-hash": "5d8f7c9b6"});
    if i % 100 == 0 {
        labels["node.kubernetes.io/balloon"] = json!("true");
    }
    json!({
        "metadata": {"namespace": format!("ns-{}", i % 1000), "name": format!("pod-{i}"), "labels": labels,
                     "resourceVersion": format!("{}", 1000 + i), "uid": format!("uid-{i}"),
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": format!("ds-{}", i % 5000), "uid": "u", "controller": true}]},
        "spec": {"nodeName": format!("node-{}", i % 5000), "priorityClassName": "system-node-critical",
                 "containers": [{"name": "main", "image": "registry.example/app:1.2.3",
                                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                                 "ports": [{"containerPort": 8080}], "env": [{"name": "MODE", "value": "prod"}]}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1"},
    })
}

struct Apiserver {
    pods: usize,
    honour_limit: bool,
    lists: AtomicUsize,
}

fn list_text(kind: &str, items: impl Iterator<Item = Value>, token: Option<usize>) -> String {
    let mut text =
        format!(r#"{{"kind":"{kind}","apiVersion":"v1","metadata":{{"resourceVersion":"7""#);
    if let Some(token) = token {
        text.push_str(&format!(r#","continue":"{token}""#));
    }
    text.push_str(r#"},"items":["#);
    for (n, item) in items.enumerate() {
        if n > 0 {
            text.push(',');
        }
        text.push_str(&item.to_string());
    }
    text.push_str("]}");
    text
}

impl Apiserver {
    fn answer(&self, path: &str, query: &str) -> (u16, String) {
        let param = |key: &str| {
            query
                .split('&')
                .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
                .and_then(|v| v.parse::<usize>().ok())
        };
        let gates = |kind: &'static str| {
            serde_saphyr::from_multiple::<Value>(include_str!("../policies/feature-gates.yaml"))
                .unwrap_or_default()
                .into_iter()
                .filter(move |d| d["kind"] == kind)
        };
        let text = match path {
            "/api/v1/pods" => {
                self.lists.fetch_add(1, Ordering::Relaxed);
                let from = param("continue").unwrap_or(0);
                let to = match param("limit") {
                    Some(limit) if self.honour_limit => (from + limit).min(self.pods),
                    _ => self.pods,
                };
                list_text("PodList", (from..to).map(pod), (to < self.pods).then_some(to))
            }
            "/api" => json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}).to_string(),
            "/apis" => json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []}).to_string(),
            "/api/v1" => json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                {"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod", "verbs": ["list", "watch"]}]}).to_string(),
            "/api/v1/namespaces" => list_text("NamespaceList", std::iter::empty(), None),
            "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies" => {
                list_text("List", gates("ValidatingAdmissionPolicy"), None)
            }
            "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings" => {
                list_text("List", gates("ValidatingAdmissionPolicyBinding"), None)
            }
            _ => return (404, json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404, "reason": "NotFound"}).to_string()),
        };
        (200, text)
    }
}

fn client(server: Arc<Apiserver>) -> kube::Client {
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let server = server.clone();
        async move {
            let path = request.uri().path().to_owned();
            let query = request.uri().query().unwrap_or("").to_owned();
            let _ = request.into_body().collect().await;
            let (code, text) = server.answer(&path, &query);
            let response = http::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(text)))
                .unwrap_or_default();
            Ok::<_, Infallible>(response)
        }
    });
    kube::Client::new(service, "default")
}

async fn run(way: &str, pods: usize) {
    let mut feature = nodescope::features::owned::features()
        .into_iter()
        .find(|f| f["metadata"]["name"] == "balloon-pods")
        .expect("balloon-pods is shipped");
    feature["spec"]["desired"] = json!("Disabled");
    feature["status"] = json!({"state": "TurningOff"});
    let server = Arc::new(Apiserver {
        pods,
        honour_limit: way == "pages",
        lists: AtomicUsize::new(0),
    });
    let client = client(server.clone());
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let held = NOW.load(Ordering::Relaxed);
    PEAK.store(held, Ordering::Relaxed);
    let started = cpu();
    let (uses, tasks) = if way == "before" {
        let view = read_view(&client, vec![feature.clone()])
            .await
            .expect("read");
        let uses = find_uses(&view.policies, &feature, &view.listed, &view.inputs).expect("uses");
        let tasks = transition_tasks(&uses);
        (uses.iter().map(|p| p.uses.len()).sum::<usize>(), tasks)
    } else {
        let jobs = [Job {
            feature: &feature,
            cleanup: Vec::new(),
        }];
        let mut period = read(&client, &jobs).await.expect("read");
        let found = period.found.remove(0).expect("every page read");
        (found.uses.total(), found.uses.tasks())
    };
    let time = cpu() - started;
    let peak = PEAK.load(Ordering::Relaxed) - held;
    assert_eq!(uses, pods.div_ceil(100));
    assert_eq!(tasks[0].count, uses);
    println!(
        "| {way} | {pods} | {} | **{:.1} MiB** | {} | {:.1} s |",
        server.lists.load(Ordering::Relaxed),
        mib(peak),
        if reset {
            format!("{:.1} MiB", status_mib("VmHWM:"))
        } else {
            "n/a".to_owned()
        },
        time.as_secs_f64(),
    );
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let pods = args.iter().find_map(|a| a.parse().ok()).unwrap_or(PODS);
    let way = args
        .iter()
        .find(|a| ["before", "pages", "ignored"].contains(&a.as_str()));
    let header = "| way | pods | pod LISTs | heap peak in the period | peak RSS (VmHWM) | CPU |\n|---|---|---|---|---|---|";
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if let Some(way) = way {
        if !args.iter().any(|a| a == "child") {
            println!("{header}");
        }
        runtime.block_on(run(way, pods));
        return;
    }
    println!("{header}");
    let exe = std::env::current_exe().unwrap_or_default();
    for way in ["pages", "ignored", "before"] {
        let status = std::process::Command::new(&exe)
            .args([way, "child", &pods.to_string()])
            .status();
        if !status.as_ref().is_ok_and(|s| s.success()) {
            eprintln!("features_pages bench, {way}, failed: {status:?}");
            std::process::exit(1);
        }
    }
}
