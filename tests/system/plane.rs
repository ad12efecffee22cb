//! The cluster: the e2e suite's etcd and kube-apiserver (with the
//! `ServiceAccount` admission plugin on, and an audit log of every request
//! but the suite's own), plus a real kube-controller-manager and
//! kube-scheduler, each with a client certificate of its own user, as
//! kubeadm gives them.

use crate::support::{self, pki, ControlPlane, Process};
use crate::SystemAssets;
use base64::Engine as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The control plane and its two controllers. Field order is drop order:
/// the controllers stop before the apiserver.
pub struct Cluster {
    /// Where nodescope's components reach the apiserver (fault 6 cuts it).
    pub api: crate::front::Front,
    pub scheduler: Process,
    pub controller_manager: Process,
    pub plane: ControlPlane,
    pub audit_log: PathBuf,
}

/// Who is audited: everyone but the suite itself (`e2e-admin`, which also
/// plays the kubelet), so the log holds what the components cost.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    users: [e2e-admin]
  - level: Metadata
";

/// A kubeconfig for `server` with `user` (YAML of a kubeconfig `user:`).
pub fn kubeconfig(path: &Path, plane: &ControlPlane, server: &str, user: &str) {
    let ca =
        std::fs::read_to_string(plane.dir.join("ca.crt")).unwrap_or_else(|e| panic!("ca.crt: {e}"));
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: system\n  cluster:\n    server: {}\n    certificate-authority-data: {}\nusers:\n- name: u\n  user:\n{user}\ncontexts:\n- name: system\n  context: {{cluster: system, user: u}}\ncurrent-context: system\n",
        server,
        base64::engine::general_purpose::STANDARD.encode(ca),
    );
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// A kubeconfig with a client certificate for `common` (in `group`).
fn certificate_kubeconfig(plane: &ControlPlane, common: &str, group: Option<&str>) -> PathBuf {
    let (cert, key) = pki::client(&plane.dir, common, group).unwrap_or_else(|e| panic!("{e}"));
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let path = plane
        .dir
        .join(format!("{}.kubeconfig", common.replace(':', "-")));
    kubeconfig(
        &path,
        plane,
        &plane.url,
        &format!(
            "    client-certificate-data: {}\n    client-key-data: {}",
            b64(&cert),
            b64(&key)
        ),
    );
    path
}

impl Cluster {
    pub async fn start(assets: &SystemAssets) -> Cluster {
        let audit_dir = tempfile::Builder::new()
            .prefix("nodescope-system-audit-")
            .tempdir()
            .unwrap_or_else(|e| panic!("{e}"))
            .keep();
        let policy = audit_dir.join("policy.yaml");
        std::fs::write(&policy, AUDIT_POLICY).unwrap_or_else(|e| panic!("{e}"));
        let audit_log = audit_dir.join("audit.log");
        let options = support::Options {
            service_accounts: true,
            prefix: "nodescope-system-",
            apiserver_args: vec![
                format!("--audit-policy-file={}", policy.display()),
                format!("--audit-log-path={}", audit_log.display()),
                "--audit-log-format=json".to_owned(),
                "--audit-log-mode=blocking".to_owned(),
                // Never rotated: the report counts every request of the run
                // from this one file, and at the default (0, which the
                // apiserver's rotation takes as 100 MB) the N = 2,000 run
                // counted only its last 15 MB.
                "--audit-log-maxsize=1000000".to_owned(),
                // The simulated kubelet and the suite write in bursts of
                // thousands; the defaults (400/200) would queue them.
                "--max-requests-inflight=1000".to_owned(),
                "--max-mutating-requests-inflight=500".to_owned(),
            ],
        };
        let plane = ControlPlane::start_with(&assets.base, &options)
            .await
            .unwrap_or_else(|e| panic!("the control plane did not start: {e}"));

        let kcm_config = certificate_kubeconfig(&plane, "system:kube-controller-manager", None);
        let mut kcm = Command::new(&assets.controller_manager);
        kcm.arg(format!("--kubeconfig={}", kcm_config.display()))
            .arg(format!(
                "--authentication-kubeconfig={}",
                kcm_config.display()
            ))
            .arg(format!(
                "--authorization-kubeconfig={}",
                kcm_config.display()
            ))
            .arg("--leader-elect=false")
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={}", support::free_port()))
            // As kubeadm runs it: each controller with its own account.
            .arg("--use-service-account-credentials=true")
            .arg(format!(
                "--service-account-private-key-file={}",
                plane.dir.join("sa.key").display()
            ))
            .arg(format!(
                "--root-ca-file={}",
                plane.dir.join("ca.crt").display()
            ))
            .arg("--kube-api-qps=200")
            .arg("--kube-api-burst=400");
        let controller_manager = Process::spawn(
            "kube-controller-manager",
            kcm,
            plane.dir.join("kube-controller-manager.log"),
        )
        .unwrap_or_else(|e| panic!("{e}"));

        let scheduler_config = certificate_kubeconfig(&plane, "system:kube-scheduler", None);
        // Its client's QPS as large clusters run it (the default 50 would
        // pace the binding of N DaemonSet pods per DaemonSet), set the way
        // the deprecated `--kube-api-qps` flag is not: in its configuration.
        let scheduler_file = plane.dir.join("kube-scheduler.yaml");
        std::fs::write(
            &scheduler_file,
            format!(
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
                 clientConnection:\n  kubeconfig: {}\n  qps: 200\n  burst: 400\n\
                 leaderElection:\n  leaderElect: false\n",
                scheduler_config.display()
            ),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", scheduler_file.display()));
        let mut scheduler = Command::new(&assets.scheduler);
        scheduler
            .arg(format!("--config={}", scheduler_file.display()))
            .arg(format!(
                "--authentication-kubeconfig={}",
                scheduler_config.display()
            ))
            .arg(format!(
                "--authorization-kubeconfig={}",
                scheduler_config.display()
            ))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={}", support::free_port()));
        let scheduler = Process::spawn(
            "kube-scheduler",
            scheduler,
            plane.dir.join("kube-scheduler.log"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let port = plane
            .url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse::<u16>().ok())
            .unwrap_or_else(|| panic!("no port in {}", plane.url));
        let api = crate::front::Front::start(vec![([127, 0, 0, 1], port).into()]).await;
        let mut cluster = Cluster {
            api,
            scheduler,
            controller_manager,
            plane,
            audit_log,
        };
        cluster.wait_for_controllers().await;
        cluster
    }

    /// The controller-manager is working once it has made the `default`
    /// ServiceAccount (without which no pod is admitted).
    async fn wait_for_controllers(&mut self) {
        let client = self.plane.client().await;
        let accounts: kube::Api<k8s_openapi::api::core::v1::ServiceAccount> =
            kube::Api::namespaced(client, "default");
        let deadline = std::time::Instant::now() + Duration::from_secs(90);
        loop {
            for process in [&mut self.controller_manager, &mut self.scheduler] {
                if let Some(status) = process.exited() {
                    panic!(
                        "{} exited ({status}):\n{}",
                        process.name,
                        process.log_tail()
                    );
                }
            }
            if accounts.get_opt("default").await.ok().flatten().is_some() {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "kube-controller-manager made no default ServiceAccount in 90 s:\n{}",
                self.controller_manager.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
