//! A real Prometheus (Debian's `prometheus` package) watching the suite's
//! components as the Prometheus Operator would from the shipped
//! `components/monitoring`: one scrape job per rendered PodMonitor, named
//! `namespace/name` as the Operator names it, scraping the PodMonitor's
//! path on the port it names, for every process started from a Deployment
//! that the PodMonitor's selector picks; the rules are the rendered
//! PrometheusRule's `spec`. The targets are files (`file_sd_configs`) the
//! suite rewrites whenever a component starts or stops, as the Operator
//! follows pods.
//!
//! Three things differ from a production Prometheus, each for time: scrapes
//! and rule evaluations every 2 s (the PodMonitors say 30 s), and every
//! alert's `for:` is [`FOR`]. The expressions, labels and annotations are
//! the shipped ones, untouched.

use crate::components::Component;
use crate::install::Rendered;
use crate::support::{free_port, Process};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Every alert's `for:` here (the shipped rules wait 5 to 30 minutes).
pub const FOR: &str = "10s";

/// One scrape job: a rendered PodMonitor's endpoint.
#[derive(Clone, Debug)]
struct Job {
    /// `namespace/name`, as the Operator names the job.
    name: String,
    path: String,
    /// The Deployments whose pods the selector picks.
    deployments: Vec<String>,
}

pub struct Prometheus {
    pub port: u16,
    jobs: Vec<Job>,
    targets: PathBuf,
    process: Process,
}

fn kind(o: &Value, kind: &str) -> bool {
    o["kind"] == kind
        && o["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("monitoring.coreos.com/"))
}

/// The jobs of every rendered PodMonitor; each must pick at least one
/// Deployment by its labels and namespace, on a container port of the name
/// its endpoint gives.
fn jobs(rendered: &Rendered) -> Vec<Job> {
    let mut jobs = Vec::new();
    for monitor in rendered.objects.iter().filter(|o| kind(o, "PodMonitor")) {
        let namespace = monitor["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default();
        let name = monitor["metadata"]["name"].as_str().unwrap_or_default();
        let spec = &monitor["spec"];
        let namespaces: Vec<&str> = match spec["namespaceSelector"]["matchNames"].as_array() {
            Some(names) => names.iter().filter_map(Value::as_str).collect(),
            None => vec![namespace],
        };
        let selector = spec["selector"]["matchLabels"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for endpoint in spec["podMetricsEndpoints"].as_array().into_iter().flatten() {
            let port = endpoint["port"].as_str().unwrap_or_default();
            let deployments: Vec<String> = rendered
                .objects
                .iter()
                .filter(|d| d["kind"] == "Deployment")
                .filter(|d| {
                    namespaces.contains(&d["metadata"]["namespace"].as_str().unwrap_or_default())
                })
                .filter(|d| {
                    let labels = &d["spec"]["template"]["metadata"]["labels"];
                    selector.iter().all(|(k, v)| &labels[k] == v)
                })
                .inspect(|d| {
                    let ports = d["spec"]["template"]["spec"]["containers"][0]["ports"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                    assert!(
                        ports.iter().any(|p| p["name"] == port),
                        "PodMonitor {namespace}/{name} scrapes port {port:?}, which Deployment {} does not name",
                        d["metadata"]["name"]
                    );
                })
                .filter_map(|d| d["metadata"]["name"].as_str().map(str::to_owned))
                .collect();
            assert!(
                !deployments.is_empty(),
                "PodMonitor {namespace}/{name} picks no rendered Deployment"
            );
            jobs.push(Job {
                name: format!("{namespace}/{name}"),
                path: endpoint["path"].as_str().unwrap_or("/metrics").to_owned(),
                deployments,
            });
        }
    }
    assert!(!jobs.is_empty(), "the manifests render no PodMonitor");
    jobs
}

/// The rendered PrometheusRule's `spec` as a rules file, each `for:` [`FOR`].
fn rules(rendered: &Rendered) -> Value {
    let rule = rendered
        .objects
        .iter()
        .find(|o| kind(o, "PrometheusRule"))
        .unwrap_or_else(|| panic!("the manifests render no PrometheusRule"));
    let mut spec = rule["spec"].clone();
    for group in spec["groups"].as_array_mut().into_iter().flatten() {
        for r in group["rules"].as_array_mut().into_iter().flatten() {
            if r.get("for").is_some() {
                r["for"] = json!(FOR);
            }
        }
    }
    spec
}

/// Debian's `prometheus`, on PATH.
pub fn binary() -> Result<PathBuf, String> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("prometheus"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            "no `prometheus` on PATH: the system suite's fault steps are watched by a real \
             Prometheus (Debian's `prometheus` package; .ci/run installs it)"
                .to_owned()
        })
}

impl Prometheus {
    pub async fn start(binary: &Path, dir: &Path, rendered: &Rendered) -> Prometheus {
        let dir = dir.join("prometheus");
        let targets = dir.join("targets");
        std::fs::create_dir_all(&targets).unwrap_or_else(|e| panic!("{e}"));
        let jobs = jobs(rendered);
        let scrape: Vec<Value> = jobs
            .iter()
            .enumerate()
            .map(|(i, job)| {
                json!({"job_name": job.name, "metrics_path": job.path,
                    "scrape_interval": "2s", "scrape_timeout": "2s",
                    "file_sd_configs": [{"files": [targets.join(format!("{i}.json"))],
                        "refresh_interval": "1s"}]})
            })
            .collect();
        let config = json!({
            "global": {"scrape_interval": "2s", "evaluation_interval": "2s"},
            "rule_files": [dir.join("rules.yaml")],
            "scrape_configs": scrape,
        });
        // JSON is YAML.
        std::fs::write(dir.join("rules.yaml"), rules(rendered).to_string())
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.join("prometheus.yml"), config.to_string())
            .unwrap_or_else(|e| panic!("{e}"));
        for i in 0..jobs.len() {
            std::fs::write(targets.join(format!("{i}.json")), "[]")
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let port = free_port();
        let mut command = std::process::Command::new(binary);
        command
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--storage.tsdb.retention.time=1d");
        let process = Process::spawn("prometheus", command, dir.join("prometheus.log"))
            .unwrap_or_else(|e| panic!("{e}"));
        let mut prometheus = Prometheus {
            port,
            jobs,
            targets,
            process,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while crate::scenario::http_code(port, "/-/ready").await != 200 {
            if let Some(status) = prometheus.process.exited() {
                panic!(
                    "prometheus exited ({status}):\n{}",
                    prometheus.process.log_tail()
                );
            }
            assert!(
                Instant::now() < deadline,
                "prometheus not ready in 60 s:\n{}",
                prometheus.process.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let loaded = prometheus.get("/api/v1/rules", &[]).await;
        let groups = loaded["data"]["groups"].as_array().map_or(0, Vec::len);
        assert!(groups > 0, "prometheus loaded no rule group: {loaded}");
        prometheus
    }

    /// Rewrites every job's targets: each running component started from a
    /// Deployment the job picks, labelled as the Operator labels a pod.
    pub fn follow(&self, components: &[Component]) {
        for (i, job) in self.jobs.iter().enumerate() {
            let groups: Vec<Value> = components
                .iter()
                .filter(|c| job.deployments.contains(&c.deployment) && c.running)
                .map(|c| {
                    json!({"targets": [format!("127.0.0.1:{}", c.metrics_port)],
                        "labels": {"namespace": c.namespace, "pod": c.name,
                            "container": "nodescope", "endpoint": "metrics"}})
                })
                .collect();
            let path = self.targets.join(format!("{i}.json"));
            let temporary = path.with_extension("tmp");
            std::fs::write(&temporary, Value::Array(groups).to_string())
                .unwrap_or_else(|e| panic!("{e}"));
            std::fs::rename(&temporary, &path).unwrap_or_else(|e| panic!("{e}"));
        }
    }

    /// The jobs' names.
    pub fn job_names(&self) -> Vec<String> {
        self.jobs.iter().map(|j| j.name.clone()).collect()
    }

    /// `GET path?params` of the HTTP API, as JSON.
    pub async fn get(&self, path: &str, params: &[(&str, &str)]) -> Value {
        let mut args = vec![
            "-s".to_owned(),
            "-G".to_owned(),
            "--max-time".to_owned(),
            "5".to_owned(),
            format!("http://127.0.0.1:{}{path}", self.port),
        ];
        for (k, v) in params {
            args.push("--data-urlencode".to_owned());
            args.push(format!("{k}={v}"));
        }
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new("curl").args(&args).output()
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("curl: {e}"));
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    /// The instant vector `query` gives now.
    pub async fn query(&self, query: &str) -> Vec<Value> {
        let answer = self.get("/api/v1/query", &[("query", query)]).await;
        assert_eq!(answer["status"], "success", "query {query}: {answer}");
        answer["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The one value `query` gives now, if it gives one.
    pub async fn value(&self, query: &str) -> Option<f64> {
        let result = self.query(query).await;
        result
            .first()
            .and_then(|s| s["value"][1].as_str())
            .and_then(|v| v.parse().ok())
    }

    /// The state of alert `name` now: `"pending"`, `"firing"`, or
    /// `"inactive"` when it is not active.
    pub async fn alert(&self, name: &str) -> String {
        let answer = self.get("/api/v1/alerts", &[]).await;
        answer["data"]["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["labels"]["alertname"] == name)
            .map(|a| a["state"].as_str().unwrap_or_default().to_owned())
            .max_by_key(|s| s == "firing")
            .unwrap_or_else(|| "inactive".to_owned())
    }

    /// Every job's targets with their health, as `job instance health`.
    pub async fn targets(&self) -> Vec<(String, String, String)> {
        let answer = self.get("/api/v1/targets", &[("state", "active")]).await;
        answer["data"]["activeTargets"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                (
                    t["labels"]["job"].as_str().unwrap_or_default().to_owned(),
                    t["labels"]["pod"].as_str().unwrap_or_default().to_owned(),
                    t["health"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.process.exited()
    }

    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }
}
