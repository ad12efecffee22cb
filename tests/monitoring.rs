//! `manifests/components/monitoring`: every metric an alert or a dashboard
//! panel queries is one a component registers, every alert has a promtool
//! unit test, and the rules pass `promtool check rules` and
//! `promtool test rules` (promtool from Debian's `prometheus` package;
//! `.ci/run` installs it, and under CI a missing promtool fails).

mod manifest_support;

use nodescope::features::metrics::FeaturesMetrics;
use nodescope::metrics::{RecommenderMetrics, WebhookMetrics};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn monitoring() -> PathBuf {
    root().join("manifests/components/monitoring")
}

/// Families of components that are not in the crate yet, whose dashboard
/// rows are already drawn. Each is skipped by name and by nothing else;
/// once a component lands, its registry joins [`registered`] and its names
/// leave this list (the test fails while both hold a name).
const NOT_YET_IN_THE_CRATE: [(&str, &str); 0] = [];

/// Every sample name the components in the crate register.
fn registered() -> BTreeSet<String> {
    let webhook = WebhookMetrics::new("kube");
    let recommender = RecommenderMetrics::new("nodescope-system/nodescope-recommender");
    let features = FeaturesMetrics::new("nodescope-system/nodescope-features");
    [
        webhook.registry(),
        recommender.registry(),
        features.registry(),
    ]
    .into_iter()
    .flat_map(|registry| registry.sample_names().iter().cloned())
    .chain(samples(
        &nodescope::update::metrics::UpdaterMetrics::new().render(),
    ))
    .chain(samples(
        &nodescope::balloon::metrics::BalloonMetrics::new().render(),
    ))
    .chain(per_node_balloon_gauges())
    .collect()
}

/// The balloon controller's per-node gauges have a series per (node,
/// resource) only once a pass saw a node, so a fresh registry renders
/// nothing of them: they are taken from the names its source registers.
fn per_node_balloon_gauges() -> Vec<String> {
    let source = std::fs::read_to_string(root().join("src/balloon/metrics.rs"))
        .expect("balloon metrics source");
    [
        "nodescope_balloon_usable",
        "nodescope_balloon_requests",
        "nodescope_balloon_non_balloon_requests",
        "nodescope_balloon_node_state",
    ]
    .into_iter()
    .inspect(|name| {
        assert!(
            source.contains(&format!("\"{name}\",")),
            "{name} is not registered in src/balloon/metrics.rs"
        )
    })
    .map(str::to_owned)
    .collect()
}

/// Sample names in an exposition, for the controllers whose registries
/// render themselves (the updater's, the balloon controller's).
/// A family with an open label set has no sample until its first series,
/// so the `# TYPE` lines name what it will export.
fn samples(text: &str) -> Vec<String> {
    let mut out: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next().map(str::to_owned))
        .collect();
    for line in text.lines() {
        let mut words = line.split(' ');
        if let (Some("#"), Some("TYPE"), Some(name), Some(kind)) =
            (words.next(), words.next(), words.next(), words.next())
        {
            match kind {
                "counter" => out.push(format!("{name}_total")),
                "histogram" => {
                    out.extend(["_bucket", "_sum", "_count"].map(|s| format!("{name}{s}")))
                }
                _ => out.push(name.to_owned()),
            }
        }
    }
    out
}

/// The `nodescope_…` metric names a PromQL expression reads.
fn metrics_in(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("nodescope_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.push(tail[..end].to_owned());
        rest = &tail[end..];
    }
    names
}

fn rule() -> Value {
    let text = std::fs::read_to_string(monitoring().join("prometheusrule.yaml")).unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

fn alerts(rule: &Value) -> Vec<(String, String)> {
    rule["spec"]["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|group| group["rules"].as_array().into_iter().flatten())
        .map(|r| {
            (
                r["alert"].as_str().unwrap_or_default().to_owned(),
                r["expr"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn dashboard() -> Value {
    let text = std::fs::read_to_string(monitoring().join("dashboards/nodescope.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// `(panel title, expression)` of every query on the dashboard.
fn panel_queries(dashboard: &Value) -> Vec<(String, String)> {
    dashboard["panels"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|panel| {
            let title = panel["title"].as_str().unwrap_or_default().to_owned();
            panel["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |t| {
                    (
                        title.clone(),
                        t["expr"].as_str().unwrap_or_default().to_owned(),
                    )
                })
        })
        .collect()
}

#[test]
fn every_metric_an_alert_or_a_panel_queries_is_registered_or_listed_as_not_yet_in_the_crate() {
    let registered = registered();
    let planned: BTreeSet<&str> = NOT_YET_IN_THE_CRATE.iter().map(|(_, n)| *n).collect();
    for name in &planned {
        assert!(
            !registered.contains(*name),
            "{name} is registered now: take it off NOT_YET_IN_THE_CRATE"
        );
    }
    let mut queried = Vec::new();
    for (alert, expr) in alerts(&rule()) {
        queried.extend(
            metrics_in(&expr)
                .into_iter()
                .map(|m| (format!("alert {alert}"), m)),
        );
    }
    for (panel, expr) in panel_queries(&dashboard()) {
        queried.extend(
            metrics_in(&expr)
                .into_iter()
                .map(|m| (format!("panel {panel}"), m)),
        );
    }
    assert!(queried.len() > 30, "{queried:?}");
    let mut skipped = BTreeSet::new();
    for (by, metric) in queried {
        if planned.contains(metric.as_str()) {
            skipped.insert(metric);
            continue;
        }
        assert!(
            registered.contains(&metric),
            "{by} queries {metric}, which no component registers"
        );
    }
    // The skip list holds nothing the dashboard does not use.
    assert_eq!(skipped.len(), planned.len(), "{skipped:?}");
}

#[test]
fn every_deployment_is_scraped_by_one_pod_monitor_on_its_metrics_port_in_its_namespace() {
    use manifest_support::{build, manifests, str_at};
    let monitors: Vec<Value> = build(&monitoring())
        .into_iter()
        .filter(|o| o["kind"] == "PodMonitor")
        .collect();
    let mut scraped = Vec::new();
    for dir in [
        "base",
        "components/recommender",
        "components/updater",
        "components/balloon",
    ] {
        for deployment in build(&manifests().join(dir))
            .iter()
            .filter(|o| o["kind"] == "Deployment")
        {
            let name = str_at(deployment, "/metadata/name");
            let namespace = str_at(deployment, "/metadata/namespace");
            let pod = &deployment["spec"]["template"];
            let labels = pod["metadata"]["labels"].as_object().unwrap();
            let mine: Vec<&Value> = monitors
                .iter()
                .filter(|m| {
                    let selects = m["spec"]["selector"]["matchLabels"]
                        .as_object()
                        .is_some_and(|s| s.iter().all(|(k, v)| labels.get(k) == Some(v)));
                    // Without a namespaceSelector a PodMonitor looks only in
                    // its own namespace.
                    let looks_there = match m["spec"]["namespaceSelector"]["matchNames"].as_array()
                    {
                        Some(names) => names.iter().any(|n| n == namespace),
                        None => str_at(m, "/metadata/namespace") == namespace,
                    };
                    selects && looks_there
                })
                .collect();
            assert_eq!(mine.len(), 1, "{dir}: Deployment {namespace}/{name}");
            let endpoint = &mine[0]["spec"]["podMetricsEndpoints"][0];
            assert_eq!(endpoint["path"], "/metrics", "{name}");
            let port = str_at(endpoint, "/port");
            assert!(
                pod["spec"]["containers"][0]["ports"]
                    .as_array()
                    .is_some_and(|ports| ports.iter().any(|p| p["name"] == port)),
                "{name}: no container port {port}"
            );
            // The alerts' job label: nodescope-system/<PodMonitor name>.
            assert_eq!(str_at(mine[0], "/metadata/namespace"), "nodescope-system");
            scraped.push(str_at(mine[0], "/metadata/name").to_owned());
        }
    }
    scraped.sort();
    assert_eq!(
        scraped,
        [
            "nodescope-balloon",
            "nodescope-features",
            "nodescope-recommender",
            "nodescope-updater",
            "nodescope-webhook"
        ]
    );
}

#[test]
fn the_dashboard_has_one_row_per_component() {
    let rows: Vec<String> = dashboard()["panels"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["type"] == "row")
        .map(|p| p["title"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        rows,
        ["Webhook", "Recommender", "Updater", "Features", "Balloons"]
    );
}

#[test]
fn every_alert_of_the_operations_guide_is_a_rule_with_a_promtool_test() {
    let tests = std::fs::read_to_string(root().join("tests/promtool/alerts_test.yaml")).unwrap();
    let guide = std::fs::read_to_string(root().join("docs/operations.md")).unwrap();
    let alerts = alerts(&rule());
    assert!(alerts.len() >= 10, "{alerts:?}");
    for (alert, expr) in &alerts {
        assert!(
            tests.contains(&format!("alertname: {alert}\n")),
            "{alert} has no promtool test"
        );
        // The guide's table quotes each expression (with `|` escaped).
        let quoted = expr.replace('|', "\\|");
        assert!(
            guide.contains(&format!("`{quoted}`")) || guide.contains(&quoted),
            "{alert}: docs/operations.md does not show {expr}"
        );
    }
}

/// `promtool`, or `None` outside CI when it is not installed.
fn promtool() -> Option<&'static str> {
    let found = Command::new("promtool").arg("--version").output().is_ok();
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "promtool is not installed; .ci/run installs it (apt-get install prometheus)"
        );
        eprintln!("promtool not installed: the promtool checks are not run");
        return None;
    }
    Some("promtool")
}

#[test]
fn promtool_checks_the_rules_and_passes_every_unit_test() {
    let Some(promtool) = promtool() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // promtool reads a rules file (the PrometheusRule's spec), not the CRD.
    let spec = serde_json::to_string_pretty(&rule()["spec"]).unwrap();
    std::fs::write(dir.path().join("nodescope.rules.yaml"), spec).unwrap();
    std::fs::copy(
        root().join("tests/promtool/alerts_test.yaml"),
        dir.path().join("alerts_test.yaml"),
    )
    .unwrap();
    for args in [
        ["check", "rules", "nodescope.rules.yaml"],
        ["test", "rules", "alerts_test.yaml"],
    ] {
        let output = Command::new(promtool)
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "promtool {args:?}:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
