//! `nodescope recommend` over a recorded week: a DaemonSet on six nodes of
//! three shapes (`node.kubernetes.io/instance-type` small, medium, large),
//! one PodMetrics per pod per minute. The expected targets are computed here
//! by hand, from upstream's formulas (bucket `floor(ln(v(r-1)/f + 1)/ln r)`,
//! the percentile is the end of its bucket, `f(r^b - 1)/(r - 1)`, then
//! truncation to millicores/bytes, the 15% margin, truncation again, the pod
//! minimum), not by the crate's code.
//!
//! The restart test runs the binary twice over the two halves of the week,
//! with a checkpoint directory between them, and once over the whole week:
//! the outputs are byte for byte the same.

use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

const SHAPES: [(&str, &str, [u64; 2], u64); 3] = [
    // (shape, node prefix, CPU millicores of its two nodes, memory MiB)
    ("small", "s", [50, 52], 300),
    ("medium", "m", [200, 210], 800),
    ("large", "l", [700, 705], 1900),
];
const WEEK: u64 = 7 * 24 * 60;
const START: u64 = 1_795_000_000;

fn store() -> Vec<Value> {
    let mut docs = vec![json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "agent", "namespace": "monitoring", "generation": 3},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"},
                 "scope": "node.kubernetes.io/instance-type"},
    })];
    for (shape, prefix, _, _) in SHAPES {
        for i in 1..=2 {
            let node = format!("{prefix}{i}");
            docs.push(json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node, "labels": {"node.kubernetes.io/instance-type": shape}}}));
            let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("agent-{node}"), "namespace": "monitoring",
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "controller": true, "uid": "u"}]},
                "spec": {"nodeName": node, "containers": [{"name": "agent", "resources": {"requests": {"memory": "1Gi"}}}]}});
            if node == "l2" {
                // Killed once, on the second day: its window's peak becomes
                // max(1Gi + 100Mi, 1.2 × 1900Mi) = 2280Mi.
                pod["status"] = json!({"containerStatuses": [{"name": "agent", "restartCount": 1,
                    "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137,
                                                 "finishedAt": timestamp(36 * 60)}}}]});
            }
            docs.push(pod);
        }
    }
    docs
}

fn timestamp(minute: u64) -> String {
    k8s_openapi::jiff::Timestamp::from_second((START + minute * 60) as i64)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// PodMetrics of minutes `range`, one list.
fn metrics(range: std::ops::Range<u64>) -> Value {
    let mut items = Vec::new();
    for minute in range {
        for (_, prefix, cpus, memory) in SHAPES {
            for (i, cpu) in cpus.iter().enumerate() {
                items.push(json!({
                    "metadata": {"name": format!("agent-{prefix}{}", i + 1), "namespace": "monitoring"},
                    "timestamp": timestamp(minute), "window": "30s",
                    "containers": [{"name": "agent", "usage": {"cpu": format!("{cpu}m"), "memory": format!("{memory}Mi")}}],
                }));
            }
        }
    }
    json!({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetricsList", "metadata": {}, "items": items})
}

fn write(path: &Path, value: &Value) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
    std::fs::write(path, serde_json::to_string(value).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// The week in files: `dir/store/`, and `dir/metrics/{a,b}/`, split at
/// minute `split` (mid-day, mid memory window).
fn recorded(dir: &Path, split: u64) {
    write(
        &dir.join("store/cluster.json"),
        &json!({"apiVersion": "v1", "kind": "List", "items": store()}),
    );
    let mut day = 0;
    while day * 1440 < WEEK {
        let (from, to) = (day * 1440, ((day + 1) * 1440).min(WEEK));
        for (half, range) in [("a", from..to.min(split)), ("b", from.max(split)..to)] {
            if !range.is_empty() {
                write(
                    &dir.join(format!("metrics/{half}/day-{day}.json")),
                    &metrics(range),
                );
            }
        }
        day += 1;
    }
}

/// upstream's exponential bucket end of `v`, by hand.
fn bucket_end(v: f64, first: f64) -> f64 {
    let ratio: f64 = 1.05;
    let bucket = ((v * (ratio - 1.0) / first + 1.0).ln() / ratio.ln()).floor();
    first * (ratio.powf(bucket + 1.0) - 1.0) / (ratio - 1.0)
}

/// Target: percentile (bucket end), truncated, × 1.15, truncated, at
/// least the pod minimum (one container: all of it).
fn cpu_target(millicores: u64) -> String {
    let p = (bucket_end(millicores as f64 / 1000.0, 0.01) * 1000.0) as i64;
    format!("{}m", ((p as f64 * 1.15) as i64).max(25))
}

fn memory_target(mib: u64) -> i64 {
    let p = bucket_end((mib * 1024 * 1024) as f64, 1e7) as i64;
    ((p as f64 * 1.15) as i64).max(250 * 1024 * 1024)
}

/// `nodescope recommend -o json` over `store` and `metrics`, from and to
/// `checkpoints` when given.
fn recommend(store: &str, metrics: &str, checkpoints: Option<&str>) -> String {
    let mut args = vec!["recommend", "--store", store, "--metrics", metrics];
    if let Some(c) = checkpoints {
        args.extend(["--checkpoints", c]);
    }
    args.extend(["-o", "json"]);
    nodescope(&args)
}

fn nodescope(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_nodescope"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running nodescope: {e}"));
    assert!(
        out.status.success(),
        "nodescope {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn vpa_status(output: &str) -> Value {
    let list: Value = serde_json::from_str(output).unwrap_or_else(|e| panic!("{e}: {output}"));
    list["items"]
        .as_array()
        .and_then(|items| items.iter().find(|i| i["kind"] == "VerticalPodAutoscaler"))
        .map(|v| v["status"].clone())
        .unwrap_or_else(|| panic!("no VPA in {output}"))
}

#[test]
fn a_week_on_three_node_shapes_gives_three_groups_with_the_hand_computed_targets() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    recorded(dir.path(), 5000);
    let store = format!("file:{}", dir.path().join("store").display());
    let metrics = format!("file:{}", dir.path().join("metrics").display());
    let status = vpa_status(&nodescope(&[
        "recommend",
        "--store",
        &store,
        "--metrics",
        &metrics,
        "--once",
        "-o",
        "json",
    ]));
    // The killed pod's window peak (2280Mi) is the large group's highest:
    // 7 windows × 2 pods, one of them 2280Mi, so the 90th percentile is
    // still 1900Mi's bucket.
    let group = |shape: &str, cpu: u64, mib: u64| {
        json!({"scopeValue": shape, "containerRecommendations": [{"containerName": "agent",
            "target": {"cpu": cpu_target(cpu), "memory": memory_target(mib).to_string()}}]})
    };
    assert_eq!(
        status["recommendationGroups"],
        json!([
            group("large", 700, 1900),
            group("medium", 200, 800),
            group("small", 50, 300)
        ]),
        "{status:#}"
    );
    // Hand values, for the reader: 63m/380258471, 247m/…, 813m/….
    assert_eq!(cpu_target(50), "63m");
    assert_eq!(cpu_target(200), "247m");
    assert_eq!(cpu_target(700), "813m");
    // DaemonSet-wide: the 90th percentile of all six pods is the large
    // shape's bucket.
    assert_eq!(
        status["recommendation"]["containerRecommendations"][0]["target"]["cpu"],
        cpu_target(700)
    );
    assert_eq!(status["observedGeneration"], 3);
    let provided = status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "RecommendationProvided"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(provided["status"], "True");
    assert_eq!(provided["lastTransitionTime"], timestamp(WEEK - 1));
}

#[test]
fn a_restart_from_checkpoints_half_way_writes_what_an_uninterrupted_run_writes() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    recorded(dir.path(), 5000);
    let store = format!("file:{}", dir.path().join("store").display());
    let all = format!("file:{}", dir.path().join("metrics").display());
    let a = format!("file:{}", dir.path().join("metrics/a").display());
    let b = format!("file:{}", dir.path().join("metrics/b").display());
    let checkpoints = format!("file:{}", dir.path().join("checkpoints").display());
    let uninterrupted = recommend(&store, &all, None);
    recommend(&store, &a, Some(&checkpoints));
    let written: Vec<_> = std::fs::read_dir(dir.path().join("checkpoints"))
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(written, vec!["monitoring.agent-0-of-1.json".to_owned()]);
    let resumed = recommend(&store, &b, Some(&checkpoints));
    assert_eq!(resumed, uninterrupted);
    // Without the checkpoint the second half alone says something else.
    let cold = recommend(&store, &b, None);
    assert_ne!(cold, uninterrupted);
}

fn failing(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nodescope"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running nodescope: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_input_is_exit_2_naming_the_file_the_object_and_the_field() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    write(
        &dir.path().join("store/cluster.json"),
        &json!({"apiVersion": "v1", "kind": "List", "items": store()}),
    );
    let mut list = metrics(0..1);
    list["items"][0]["containers"][0]["usage"]["cpu"] = json!("lots");
    let bad = dir.path().join("metrics/bad.json");
    write(&bad, &list);
    let store = format!("file:{}", dir.path().join("store").display());
    let metrics_flag = format!("file:{}", dir.path().join("metrics").display());
    let (code, stderr) = failing(&["recommend", "--store", &store, "--metrics", &metrics_flag]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "nodescope: {}: PodMetrics/monitoring/agent-s1: containers[0].usage.cpu: ",
            bad.display()
        )),
        "{stderr}"
    );
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap_or_else(|e| panic!("{e}"));
    let (code, stderr) = failing(&[
        "recommend",
        "--store",
        &store,
        "--metrics",
        &format!("file:{}", empty.display()),
    ]);
    assert_eq!(code, 2);
    assert_eq!(
        stderr,
        format!(
            "nodescope: {}: no PodMetrics in it (expected metrics.k8s.io/v1beta1 PodMetricsList files)\n",
            empty.display()
        )
    );
    let (code, stderr) = failing(&["recommend", "--store", "file:", "--metrics", &metrics_flag]);
    assert_eq!(
        (code, stderr.as_str()),
        (
            2,
            "nodescope: --store file: needs a path, as in file:./dir\n"
        )
    );
    let (code, stderr) = failing(&[
        "recommend",
        "--store",
        &store,
        "--metrics",
        &metrics_flag,
        "--checkpoints",
        "upstream:",
    ]);
    assert_eq!(
        (code, stderr.as_str()),
        (
            2,
            "nodescope: --checkpoints upstream: needs a path, as in upstream:./dir\n"
        )
    );
    let (code, stderr) = failing(&[
        "recommend",
        "--store",
        &store,
        "--metrics",
        &metrics_flag,
        "--checkpoints",
        "upstream",
    ]);
    assert_eq!(
        (code, stderr.as_str()),
        (
            2,
            "nodescope: offline, --checkpoints must be file:DIR, upstream:DIR or none\n"
        )
    );
    // An upstream checkpoint that is not what upstream writes is named.
    write(&dir.path().join("good/day.json"), &metrics(0..1));
    let metrics_flag = format!("file:{}", dir.path().join("good").display());
    let checkpoints = dir.path().join("checkpoints");
    write(
        &checkpoints.join("monitoring.agent-agent.json"),
        &json!({"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscalerCheckpoint",
            "metadata": {"name": "agent-agent", "namespace": "monitoring"},
            "spec": {"vpaObjectName": "agent", "containerName": "agent"},
            "status": {"version": "v3", "totalSamplesCount": "many"}}),
    );
    let (code, stderr) = failing(&[
        "recommend",
        "--store",
        &store,
        "--metrics",
        &metrics_flag,
        "--checkpoints",
        &format!("file:{}", checkpoints.display()),
    ]);
    assert_eq!(
        (code, stderr.as_str()),
        (
            2,
            "nodescope: checkpoint VerticalPodAutoscalerCheckpoint/monitoring/agent-agent: \
             status.totalSamplesCount: \"many\" is not a count\n"
        )
    );
}

#[test]
fn a_pod_metrics_list_is_read_item_by_item_and_a_bad_item_is_named_alone() {
    let mut list = metrics(0..1);
    list["items"][1]["timestamp"] = json!("yesterday");
    let text = serde_json::to_string(&list).unwrap_or_default();
    let read: nodescope::recommend::input::PodMetricsList =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(read.items.len(), 6);
    let first = read.items[0]
        .as_ref()
        .map(|u| (u.name.clone(), u.containers.clone()));
    assert_eq!(
        first.ok(),
        Some((
            "agent-s1".to_owned(),
            vec![("agent".to_owned(), 50, 300 * 1024 * 1024)]
        ))
    );
    let error = read.items[1]
        .as_ref()
        .err()
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(
        error.starts_with("PodMetrics/monitoring/agent-s2: timestamp: "),
        "{error}"
    );
    assert_eq!(read.items.iter().filter(|i| i.is_ok()).count(), 5);
}

/// A target's amount: millicores for `cpu`, bytes for `memory`.
fn amount(text: &str) -> f64 {
    match text.strip_suffix('m') {
        Some(milli) => milli.parse().unwrap_or(f64::NAN),
        None => text.parse().unwrap_or(f64::NAN),
    }
}

#[test]
fn a_week_checkpointed_in_upstreams_format_and_imported_gives_the_uninterrupted_targets_within_a_bucket(
) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    recorded(dir.path(), 9000);
    // The first 6¼ days run at twice the CPU: with the day's half-life they
    // are still 59% of the weight, so the week's 90th percentile is theirs,
    // which the last 18 hours alone do not know.
    for entry in std::fs::read_dir(dir.path().join("metrics/a"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let mut list: Value = serde_json::from_str(&text).unwrap_or_default();
        for item in list["items"].as_array_mut().into_iter().flatten() {
            let usage = &mut item["containers"][0]["usage"];
            let cpu = amount(usage["cpu"].as_str().unwrap_or_default());
            usage["cpu"] = json!(format!("{}m", cpu * 2.0));
        }
        write(&entry.path(), &list);
    }
    let store = format!("file:{}", dir.path().join("store").display());
    let all = format!("file:{}", dir.path().join("metrics").display());
    let a = format!("file:{}", dir.path().join("metrics/a").display());
    let b = format!("file:{}", dir.path().join("metrics/b").display());
    let upstream = format!("upstream:{}", dir.path().join("checkpoints").display());
    let imported = format!("file:{}", dir.path().join("checkpoints").display());
    let uninterrupted = vpa_status(&recommend(&store, &all, None));
    recommend(&store, &a, Some(&upstream));
    let mut written: Vec<String> = std::fs::read_dir(dir.path().join("checkpoints"))
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    written.sort();
    // One per scope value (fnv32a of "large", "medium", "small") and the
    // global one.
    assert_eq!(
        written,
        [
            "monitoring.agent-agent-35afd776.json",
            "monitoring.agent-agent-4bd02db4.json",
            "monitoring.agent-agent-a2c4f48c.json",
            "monitoring.agent-agent.json",
        ]
    );
    let resumed = vpa_status(&recommend(&store, &b, Some(&imported)));
    let groups = |status: &Value| -> Vec<(String, f64, f64)> {
        status["recommendationGroups"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|g| {
                let t = &g["containerRecommendations"][0]["target"];
                (
                    g["scopeValue"].as_str().unwrap_or_default().to_owned(),
                    amount(t["cpu"].as_str().unwrap_or_default()),
                    amount(t["memory"].as_str().unwrap_or_default()),
                )
            })
            .collect()
    };
    let (want, got) = (groups(&uninterrupted), groups(&resumed));
    assert_eq!(want.len(), 3, "{uninterrupted:#}");
    assert_eq!(
        want.iter().map(|g| &g.0).collect::<Vec<_>>(),
        got.iter().map(|g| &g.0).collect::<Vec<_>>()
    );
    // The documented bound: one bucket of upstream's 5% scheme.
    for (w, g) in want.iter().zip(&got) {
        for (x, y) in [(w.1, g.1), (w.2, g.2)] {
            assert!(y / x <= 1.05 && x / y <= 1.05, "{w:?} vs {g:?}");
        }
    }
    // Without the import the second half alone gives other CPU targets
    // (its own level's), further off than the bound.
    let cold = vpa_status(&recommend(&store, &b, None));
    for (w, c) in want.iter().zip(&groups(&cold)) {
        assert!(w.1 / c.1 > 1.05, "{w:?} vs {c:?}");
    }
    // What this recording shows of the loss: the same targets exactly.
    assert_eq!(got, want);
}
