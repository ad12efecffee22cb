//! The scenario, in order (docs/system.md): install, DaemonSets created by
//! the real controller and bound by the real scheduler, the recommender's
//! groups, the updater's resizes within the tolerance, a Deferred resize
//! that ends in an eviction, a node joining, balloons set on a tenth of the
//! nodes, six faults watched by a real Prometheus (faults/), and
//! `vpa-node-scope` turned off. The Deferred resize waits upstream's five
//! minutes, so the join and balloon steps run meanwhile.

use crate::components::{self, Component, Launch};
use crate::front::Front;
use crate::install;
use crate::kubelet::{Kubelet, Nodes};
use crate::ledger::Ledger;
use crate::plane::Cluster;
use crate::prometheus::Prometheus;
use crate::report::Report;
use crate::support::{cluster, free_port};
use crate::workloads::{self, NS};
use crate::{balloons, deferred, disable, faults, join, steps, SystemAssets};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::Client;
use serde_json::Value;
use std::time::{Duration, Instant};

/// `--eviction-tolerance` for the updater (shipped: upstream's 0.5), so
/// that each DaemonSet takes five passes and the limit binds many times.
pub const TOLERANCE: f64 = 0.2;
/// The webhook's `--status-lease-update-interval` (shipped: 10s), kept
/// under a fifth of the updater's Lease timeout as shipped.
pub const STATUS_LEASE_RENEWAL: &str = "2s";
/// How long the simulated kubelet takes to actuate a resize.
pub const ACTUATION: Duration = Duration::from_millis(1000);

/// Everything a step may use.
pub struct World {
    pub cluster: Cluster,
    pub admin: Client,
    pub nodes: Nodes,
    pub kubelet: Kubelet,
    pub ledger: Ledger,
    pub components: Vec<Component>,
    pub rendered: install::Rendered,
    pub began: Instant,
    pub n: usize,
    pub report: Report,
    /// Step 4's two pods, whose resizes the kubelet defers.
    pub deferred: Vec<String>,
    /// Watches every component through the shipped PodMonitors.
    pub prometheus: Prometheus,
    /// The last recorded usage's time (seconds since the epoch).
    pub recorded_until: i64,
    _front: Front,
    _heartbeat: tokio::task::JoinHandle<()>,
    /// Whether the logs were kept already (a failed wait keeps them).
    logs_kept: std::sync::atomic::AtomicBool,
}

/// A step that panics outside [`until`] (an assertion) keeps the logs too.
impl Drop for World {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.keep_logs();
        }
    }
}

impl World {
    /// How long a wait for work that grows with N may take: `secs` at
    /// N = 0, a quarter second more per node (an upper bound, never a
    /// pause: each wait returns as soon as its condition holds).
    pub fn scaled(&self, secs: u64) -> std::time::Duration {
        std::time::Duration::from_secs(secs + self.n as u64 / 4)
    }

    pub fn component(&self, name: &str) -> &Component {
        self.components
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no component {name}"))
    }

    pub fn component_mut(&mut self, name: &str) -> &mut Component {
        self.components
            .iter_mut()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no component {name}"))
    }

    /// Prometheus scrapes the components running now.
    pub fn follow(&self) {
        self.prometheus.follow(&self.components);
    }

    pub async fn pods(&self, namespace: &str) -> Vec<Pod> {
        let api: Api<Pod> = Api::namespaced(self.admin.clone(), namespace);
        api.list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("listing pods in {namespace}: {e}"))
            .items
    }

    /// Every component still runs.
    pub fn alive(&mut self) {
        for c in self.components.iter_mut().filter(|c| c.running) {
            if let Some(status) = c.process.exited() {
                panic!("{} exited ({status}):\n{}", c.name, c.process.log_tail());
            }
        }
        if let Some(status) = self.prometheus.exited() {
            panic!(
                "prometheus exited ({status}):\n{}",
                self.prometheus.log_tail()
            );
        }
    }

    /// For a failure: what a fresh `update --plan` decides of every pod
    /// the running updater has not brought to its group (when the two
    /// differ, the updater's stores are behind), and every log kept in a
    /// directory that outlives the run.
    fn diagnose(&self) {
        // `wide`: each row's message, the sentence that says why.
        let (code, out, err) = self.nodescope(&["update", "--plan", "-A", "-o", "wide"]);
        println!("system: --- update --plan -A -o wide (exit {code}), pods with something to do:");
        for line in out.lines().filter(|l| !l.contains(" none ")).take(40) {
            println!("{line}");
        }
        if !err.is_empty() {
            println!("{err}");
        }
        self.keep_logs();
    }

    /// Copies every log of the run to a directory kept past it, and says
    /// where: on a failure, and on a pass with `NODESCOPE_SYSTEM_KEEP_LOGS`
    /// set (to read what the components said of a run that held).
    pub fn keep_logs(&self) {
        if self
            .logs_kept
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        let kept = tempfile::Builder::new()
            .prefix("nodescope-system-logs-")
            .tempdir()
            .map(tempfile::TempDir::keep);
        if let Ok(kept) = kept {
            for entry in std::fs::read_dir(&self.cluster.plane.dir)
                .into_iter()
                .flatten()
                .flatten()
            {
                let path = entry.path();
                if path.extension().is_some_and(|e| e == "log") {
                    let _ = std::fs::copy(&path, kept.join(entry.file_name()));
                }
            }
            println!("system: every log of the run is kept in {}", kept.display());
        }
    }

    /// Prints the end of every component's log, for a failure.
    pub fn tails(&self) {
        self.diagnose();
        for c in &self.components {
            println!(
                "system: --- {} (last lines of {})",
                c.name,
                c.process.log.display()
            );
            let text = std::fs::read_to_string(&c.process.log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let head = lines.len().min(8);
            println!("{}", lines[..head].join("\n"));
            println!("...");
            println!(
                "{}",
                lines[lines.len().saturating_sub(12).max(head)..].join("\n")
            );
        }
    }

    /// Runs `nodescope ARGS` as the cluster admin: (code, stdout, stderr).
    pub fn nodescope(&self, args: &[&str]) -> (i32, String, String) {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_nodescope"))
            .args(args)
            .env("KUBECONFIG", &self.cluster.plane.kubeconfig)
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

pub fn say(world_began: Instant, what: &str) {
    println!(
        "system: [{:>6.1} s] {what}",
        world_began.elapsed().as_secs_f64()
    );
}

/// `GET http://127.0.0.1:{port}{path}`'s status code (0: no answer).
pub async fn http_code(port: u16, path: &str) -> u16 {
    let url = format!("http://127.0.0.1:{port}{path}");
    tokio::task::spawn_blocking(move || {
        std::process::Command::new("curl")
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--max-time",
                "2",
                &url,
            ])
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(0)
    })
    .await
    .unwrap_or(0)
}

async fn ready(world_began: Instant, components: &mut [Component]) {
    for c in components.iter_mut() {
        let deadline = Instant::now() + Duration::from_secs(60);
        while http_code(c.metrics_port, "/readyz").await != 200 {
            if let Some(status) = c.process.exited() {
                panic!("{} exited ({status}):\n{}", c.name, c.process.log_tail());
            }
            assert!(
                Instant::now() < deadline,
                "{} not ready in 60 s:\n{}",
                c.name,
                c.process.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let names: Vec<&str> = components.iter().map(|c| c.name.as_str()).collect();
    say(world_began, &format!("ready: {}", names.join(", ")));
}

/// The policies directory as the Deployment mounts it: the rendered
/// `nodescope-policies` ConfigMap's files.
fn policies(cluster: &Cluster, rendered: &install::Rendered) -> std::path::PathBuf {
    let dir = cluster.plane.dir.join("policies");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let map = rendered
        .objects
        .iter()
        .find(|o| {
            o["kind"] == "ConfigMap"
                && o["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("nodescope-policies"))
        })
        .unwrap_or_else(|| panic!("the manifests render no nodescope-policies ConfigMap"));
    for (file, text) in map["data"].as_object().into_iter().flatten() {
        std::fs::write(dir.join(file), text.as_str().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}"));
    }
    dir
}

pub async fn run(assets: &SystemAssets, n: usize) {
    let began = Instant::now();
    let prometheus_binary = crate::prometheus::binary().unwrap_or_else(|e| panic!("{e}"));
    let cluster = Cluster::start(assets).await;
    say(
        began,
        &format!(
            "kube-apiserver {}, etcd, kube-controller-manager and kube-scheduler from {}",
            cluster.plane.version,
            assets.base.dir.display()
        ),
    );
    let admin = cluster.plane.client().await;
    let nodes = Nodes::default();
    nodes.register(&admin, 0, n).await;
    let heartbeat = nodes.heartbeat(admin.clone());
    let kubelet = Kubelet::start(admin.clone(), nodes.clone(), ACTUATION);
    say(
        began,
        &format!("{n} simulated Nodes registered, Leases renewed every 10 s"),
    );

    let rendered = install::render(&cluster);
    let certs = components::certificates(&cluster.plane.dir);
    let ca = std::fs::read(certs.join("ca.crt")).unwrap_or_else(|e| panic!("{e}"));
    let replicas = [free_port(), free_port()];
    let front = Front::start(
        replicas
            .iter()
            .map(|p| std::net::SocketAddr::from(([127, 0, 0, 1], *p)))
            .collect(),
    )
    .await;
    let later = |o: &Value| {
        o["kind"]
            .as_str()
            .is_some_and(|k| k.ends_with("WebhookConfiguration"))
            || o["kind"] == "DaemonSet"
    };
    let applied = install::apply(&cluster, &rendered, front.port, &ca, |o| !later(o)).await;
    let policies = policies(&cluster, &rendered);
    let mut started = Vec::new();
    for (i, port) in replicas.iter().enumerate() {
        started.push(components::start(
            &cluster,
            &rendered,
            Launch {
                deployment: "nodescope",
                overrides: vec![
                    ("--listen", format!("127.0.0.1:{port}")),
                    ("--tls-cert", certs.join("tls.crt").display().to_string()),
                    ("--tls-key", certs.join("tls.key").display().to_string()),
                    ("--policies", policies.display().to_string()),
                    (
                        "--status-lease-update-interval",
                        STATUS_LEASE_RENEWAL.to_owned(),
                    ),
                ],
                metrics_flag: "--metrics-listen",
            },
            &format!("nodescope-webhook-{}", ["a", "b"][i]),
        ));
    }
    // Two replicas, as shipped: fault 2 kills the leader.
    for instance in faults::leader::REPLICAS {
        started.push(components::start(
            &cluster,
            &rendered,
            Launch {
                deployment: "nodescope-updater",
                overrides: vec![
                    ("--updater-interval", "2s".to_owned()),
                    (
                        "--kube-api-qps",
                        crate::floor::UPDATER_PACE.kube_api_qps.to_string(),
                    ),
                    (
                        "--kube-api-burst",
                        crate::floor::UPDATER_PACE.kube_api_burst.to_string(),
                    ),
                    ("--eviction-tolerance", TOLERANCE.to_string()),
                    // Groups carry targets only (PR #10012), so a pod inside no
                    // range waits this long; a cluster's pods are days old, these
                    // are seconds old.
                    (
                        "--in-recommendation-bounds-eviction-lifetime-threshold",
                        "0s".to_owned(),
                    ),
                    (
                        "--admission-controller-status-lease-timeout",
                        format!("{}s", faults::webhook::LEASE_TIMEOUT.as_secs()),
                    ),
                ],
                metrics_flag: "--address",
            },
            instance,
        ));
    }
    started.push(components::start(
        &cluster,
        &rendered,
        Launch {
            deployment: "nodescope-balloon",
            overrides: vec![("--interval", "2s".to_owned())],
            metrics_flag: "--metrics-listen",
        },
        "nodescope-balloon",
    ));
    started.push(components::start(
        &cluster,
        &rendered,
        Launch {
            deployment: "nodescope-features",
            overrides: vec![("--settle", "5s".to_owned()), ("--period", "2s".to_owned())],
            metrics_flag: "--metrics-listen",
        },
        "nodescope-features",
    ));
    ready(began, &mut started).await;
    let applied = applied + install::apply(&cluster, &rendered, front.port, &ca, later).await;
    say(
        began,
        &format!(
            "installed from manifests/ ({} objects, Deployments run as processes: base + {})",
            applied,
            install::COMPONENTS.join(", ")
        ),
    );

    let prometheus = Prometheus::start(&prometheus_binary, &cluster.plane.dir, &rendered).await;
    prometheus.follow(&started);
    say(
        began,
        &format!(
            "prometheus on 127.0.0.1:{}: jobs {} from the shipped PodMonitors, the shipped rules (each `for:` {})",
            prometheus.port,
            prometheus.job_names().join(", "),
            crate::prometheus::FOR
        ),
    );

    cluster::namespace(&admin, NS).await;
    let ledger = Ledger::start(&admin, &[NS, "kube-system"]).await;
    for ds in workloads::ALL {
        cluster::apply(&admin, &workloads::vpa(ds)).await;
        cluster::apply(&admin, &workloads::daemonset(ds)).await;
    }
    let mut world = World {
        cluster,
        admin,
        nodes,
        kubelet,
        ledger,
        components: started,
        rendered,
        began,
        n,
        report: Report::default(),
        deferred: Vec::new(),
        prometheus,
        recorded_until: 0,
        _front: front,
        _heartbeat: heartbeat,
        logs_kept: std::sync::atomic::AtomicBool::new(false),
    };
    steps::created(&mut world).await;
    crate::floor::measure(&mut world).await;
    steps::converge(&mut world).await;
    // While node-0000's resizes wait out upstream's 5 minutes:
    // A node in zone-a: zone-c's group is also the VPA-wide value (the
    // largest usage), so only a zone-a or zone-b node tells them apart.
    join::run(&mut world, n.next_multiple_of(3)).await;
    balloons::run(&mut world).await;
    deferred::replaced(&mut world).await;
    world.report.all_at_group = Some(world.began.elapsed());
    faults::run(&mut world).await;
    disable::run(&mut world).await;
    world.report.print(&world);
    if std::env::var_os("NODESCOPE_SYSTEM_KEEP_LOGS").is_some() {
        world.keep_logs();
    }
}

/// Waits for `check` (polled every 500 ms) up to `limit`, checking that
/// every component still runs.
pub async fn until<T, F>(world: &mut World, what: &str, limit: Duration, mut check: F) -> T
where
    F: for<'a> FnMut(&'a World) -> futures::future::BoxFuture<'a, Result<T, String>>,
{
    let deadline = Instant::now() + limit;
    loop {
        world.alive();
        match check(world).await {
            Ok(value) => return value,
            Err(why) if Instant::now() > deadline => {
                world.tails();
                panic!("{what}: not within {limit:?}: {why}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}
