//! Each nodescope component as a process, run as its Deployment runs it:
//! the Deployment's own arguments (from the rendered manifests), the
//! `POD_NAME`/`POD_NAMESPACE` its downward API gives, and a kubeconfig with
//! a token of its Deployment's ServiceAccount (TokenRequest), so every
//! request goes through the shipped RBAC. Only addresses, file paths and
//! intervals are changed, each named below.

use crate::install::Rendered;
use crate::plane::{kubeconfig, Cluster};
use crate::support::{free_port, Process};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A component: one replica of a Deployment.
pub struct Component {
    pub name: String,
    /// The Deployment it is a replica of, and its namespace.
    pub deployment: String,
    pub namespace: String,
    pub process: Process,
    /// Its plain-HTTP `/metrics` port (kept across restarts).
    pub metrics_port: u16,
    /// False once a fault stopped it, until it is started again.
    pub running: bool,
    /// How it was started, to start it again as its Deployment would.
    command: Vec<String>,
    kubeconfig: PathBuf,
    starts: usize,
}

impl Component {
    /// Stops it: SIGKILL (`kill`), or SIGTERM with 10 s to exit.
    pub fn stop(&mut self, kill: bool) {
        if kill {
            let _ = self.process.child.kill();
            let _ = self.process.child.wait();
        } else {
            self.process.stop(std::time::Duration::from_secs(10));
        }
        self.running = false;
    }

    /// Starts it again with the same arguments, ports and identity, as a
    /// Deployment's replacement pod (here with the same name), its log in a
    /// new file.
    pub fn restart(&mut self) {
        self.starts += 1;
        let log = self
            .process
            .log
            .with_file_name(format!("{}.{}.log", self.name, self.starts));
        self.process = spawn(
            &self.command,
            &self.kubeconfig,
            &self.name,
            &self.namespace,
            log,
        );
        self.running = true;
    }

    pub fn pid(&self) -> u32 {
        self.process.child.id()
    }

    /// Peak resident memory (VmHWM), in KiB, while it runs.
    pub fn peak_kib(&self) -> u64 {
        peak_kib(self.pid())
    }
}

/// What the suite changes in a Deployment's arguments.
pub struct Launch<'a> {
    pub deployment: &'a str,
    /// `--flag` → value, replacing the shipped one or added.
    pub overrides: Vec<(&'a str, String)>,
    /// The flag that takes the metrics address.
    pub metrics_flag: &'a str,
}

/// The shipped arguments of `deployment`'s first container, with
/// `overrides` applied (a flag given twice is refused by clap, so each
/// replaces the shipped one).
fn arguments(deployment: &Value, overrides: &[(&str, String)]) -> Vec<String> {
    let shipped = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap_or_else(|| panic!("{} has no args", deployment["metadata"]["name"]))
        .iter()
        .filter_map(|a| a.as_str().map(str::to_owned));
    let mut out: Vec<String> = shipped
        .filter(|a| {
            !overrides
                .iter()
                .any(|(flag, _)| a == flag || a.starts_with(&format!("{flag}=")))
        })
        .collect();
    for (flag, value) in overrides {
        out.push(format!("{flag}={value}"));
    }
    out
}

/// A token of `account` in `namespace`, from the TokenRequest API.
fn token(cluster: &Cluster, namespace: &str, account: &str) -> String {
    let (code, out, err) = cluster.plane.kubectl(
        &["create", "token", account, "-n", namespace, "--duration=4h"],
        &cluster.plane.dir,
    );
    assert_eq!(
        code, 0,
        "kubectl create token {account} -n {namespace}: {err}"
    );
    out.trim().to_owned()
}

/// Starts one replica of `launch` as `instance`.
pub fn start(
    cluster: &Cluster,
    rendered: &Rendered,
    launch: Launch<'_>,
    instance: &str,
) -> Component {
    let deployment = rendered.deployment(launch.deployment);
    let namespace = deployment["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_owned();
    let account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
        .as_str()
        .unwrap_or("default")
        .to_owned();
    let token = token(cluster, &namespace, &account);
    let config = cluster.plane.dir.join(format!("{instance}.kubeconfig"));
    // Through the front, so that fault 6 can cut its connections.
    kubeconfig(
        &config,
        &cluster.plane,
        &cluster.api.url(),
        &format!("    token: {token}"),
    );
    let metrics_port = free_port();
    let mut overrides = launch.overrides;
    overrides.push((launch.metrics_flag, format!("127.0.0.1:{metrics_port}")));
    overrides.push(("--log-format", "text".to_owned()));
    overrides.push(("--log-level", LOG_LEVEL.to_owned()));
    let args = arguments(deployment, &overrides);
    let log = cluster.plane.dir.join(format!("{instance}.log"));
    let process = spawn(&args, &config, instance, &namespace, log);
    Component {
        name: instance.to_owned(),
        deployment: launch.deployment.to_owned(),
        namespace,
        process,
        metrics_port,
        running: true,
        command: args,
        kubeconfig: config,
        starts: 1,
    }
}

/// Every component's `--log-level`: info, and the updater's reason for
/// each pod it leaves alone, so that a failed step's kept logs say why a
/// pod was not at its group.
const LOG_LEVEL: &str = "info,nodescope::update::told=debug";

fn spawn(args: &[String], config: &Path, instance: &str, namespace: &str, log: PathBuf) -> Process {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodescope"));
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("KUBECONFIG", config)
        .env("POD_NAME", instance)
        .env("POD_NAMESPACE", namespace)
        .env("RUST_LOG", "info");
    Process::spawn("nodescope", command, log).unwrap_or_else(|e| panic!("{e}"))
}

/// The webhook's serving certificate, made by `nodescope certs` (SANs
/// localhost and 127.0.0.1), shared by both replicas as the Secret is.
pub fn certificates(dir: &Path) -> PathBuf {
    let certs = dir.join("webhook-tls");
    std::fs::create_dir_all(&certs).unwrap_or_else(|e| panic!("{e}"));
    crate::common::make_certs(&certs);
    certs
}

/// Peak resident memory (VmHWM) of process `pid`, in KiB; 0 once it is gone.
pub fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
