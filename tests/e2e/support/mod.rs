//! A real etcd and kube-apiserver on loopback, as controller-runtime's
//! envtest starts them: no kubelet, scheduler or controller-manager, state in
//! a temporary directory, a PKI made for the run, and both processes stopped
//! by their own PIDs when the suite ends (also when a test panics, and when
//! the test binary itself dies: they get SIGKILL with their parent).

pub mod admission;
mod assets;
pub mod cluster;
pub mod enforcement;
pub mod nodescope;
pub mod pki;
pub mod rounds;
pub mod state;

pub use assets::{Assets, Found};
use base64::Engine as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use pki::Pki;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free loopback port: {e}"))
}

/// A child process that is killed and reaped when dropped.
pub struct Process {
    pub name: &'static str,
    pub child: Child,
    pub log: PathBuf,
}

impl Process {
    /// Starts `command` with its output in `log`, and asks the kernel to
    /// kill it if this test process dies first.
    pub fn spawn(
        name: &'static str,
        mut command: Command,
        log: PathBuf,
    ) -> Result<Process, String> {
        let out = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("{}: {e}", log.display()))?;
        command.stdin(Stdio::null()).stdout(out).stderr(err);
        // SAFETY: prctl is async-signal-safe; nothing else runs in the child
        // between fork and exec.
        unsafe {
            use std::os::unix::process::CommandExt;
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = command
            .spawn()
            .map_err(|e| format!("starting {name}: {e}"))?;
        Ok(Process { name, child, log })
    }

    /// The last lines of its log, for a failure message.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`.
    pub fn stop(&mut self, grace: Duration) {
        if self.exited().is_some() {
            return;
        }
        // SAFETY: the pid is our own child, not yet reaped.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(5));
    }
}

/// One etcd and one kube-apiserver, shared by the whole suite.
pub struct ControlPlane {
    // Field order is drop order: the apiserver stops before etcd.
    apiserver: Process,
    etcd: Process,
    /// The apiserver's binary and arguments, to start it again.
    apiserver_command: (PathBuf, Vec<std::ffi::OsString>),
    apiserver_starts: usize,
    pub url: String,
    pub kubeconfig: PathBuf,
    pub kubectl: Option<PathBuf>,
    pub version: String,
    pub started_in: Duration,
    /// The directory of the PKI (`ca.crt`, `sa.key`, `sa.pub`), etcd's data
    /// and the logs: `_state`'s path. Read by the system suite.
    #[allow(dead_code)]
    pub dir: PathBuf,
    /// etcd's data, the PKI and the logs; removed when the suite ends.
    _state: tempfile::TempDir,
}

/// How the system suite's apiserver differs from the e2e suite's.
#[derive(Default)]
pub struct Options {
    /// Keep the `ServiceAccount` admission plugin on: a controller-manager
    /// runs and creates the default service accounts.
    pub service_accounts: bool,
    /// More apiserver flags.
    pub apiserver_args: Vec<String>,
    /// The temporary directory's prefix.
    pub prefix: &'static str,
}

impl ControlPlane {
    /// The process ids of etcd and the kube-apiserver now running (the
    /// system suite reports their peak memory).
    #[allow(dead_code)]
    pub fn pids(&self) -> [(&'static str, u32); 2] {
        [
            ("etcd", self.etcd.child.id()),
            ("kube-apiserver", self.apiserver.child.id()),
        ]
    }

    pub async fn start(assets: &Assets) -> Result<ControlPlane, String> {
        Self::start_with(assets, &Options::default()).await
    }

    pub async fn start_with(assets: &Assets, options: &Options) -> Result<ControlPlane, String> {
        let began = Instant::now();
        let prefix = if options.prefix.is_empty() {
            "nodescope-e2e-"
        } else {
            options.prefix
        };
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        let root = dir.path();
        let pki = Pki::generate(root)?;

        let (client_port, peer_port) = (free_port(), free_port());
        let etcd_url = format!("http://127.0.0.1:{client_port}");
        let mut etcd = Command::new(&assets.etcd);
        etcd.arg(format!("--data-dir={}", root.join("etcd").display()))
            .arg(format!("--listen-client-urls={etcd_url}"))
            .arg(format!("--advertise-client-urls={etcd_url}"))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"))
            .arg("--unsafe-no-fsync=true");
        let etcd = Process::spawn("etcd", etcd, root.join("etcd.log"))?;

        let port = free_port();
        let mut apiserver = Command::new(&assets.kube_apiserver);
        apiserver
            .arg(format!("--etcd-servers={etcd_url}"))
            .arg(format!("--secure-port={port}"))
            .arg("--bind-address=127.0.0.1")
            .arg("--advertise-address=127.0.0.1")
            .arg(format!("--cert-dir={}", root.join("certs").display()))
            .arg(format!("--tls-cert-file={}", pki.serving_cert.display()))
            .arg(format!(
                "--tls-private-key-file={}",
                pki.serving_key.display()
            ))
            .arg(format!("--client-ca-file={}", pki.ca_cert.display()))
            .arg(format!(
                "--service-account-key-file={}",
                pki.service_account_pub.display()
            ))
            .arg(format!(
                "--service-account-signing-key-file={}",
                pki.service_account_key.display()
            ))
            .arg("--service-account-issuer=https://kubernetes.default.svc")
            // A loopback service range: a `service:` webhook registered as
            // shipped makes the apiserver dial the Service's IP, which then
            // stays on this machine (refused, or a test's own listener).
            .arg("--service-cluster-ip-range=127.200.0.0/16")
            .arg("--allow-privileged=true")
            .arg("--authorization-mode=RBAC")
            // With these on, an apiserver stopped with its etcd hangs in
            // shutdown for minutes.
            .arg(
                "--feature-gates=APIServerIdentity=false,UnknownVersionInteroperabilityProxy=false",
            )
            .args(&options.apiserver_args);
        if !options.service_accounts {
            // No controller-manager creates default service accounts, so
            // that plugin would reject every pod.
            apiserver.arg("--disable-admission-plugins=ServiceAccount");
        }
        let apiserver_command = (
            assets.kube_apiserver.clone(),
            apiserver.get_args().map(ToOwned::to_owned).collect(),
        );
        let apiserver = Process::spawn("kube-apiserver", apiserver, root.join("apiserver.log"))?;

        let url = format!("https://127.0.0.1:{port}");
        let kubeconfig = root.join("kubeconfig");
        write_kubeconfig(&kubeconfig, &url, &pki)?;
        let mut plane = ControlPlane {
            apiserver,
            etcd,
            apiserver_command,
            apiserver_starts: 1,
            url,
            kubeconfig,
            kubectl: assets.kubectl.clone(),
            version: String::new(),
            started_in: Duration::ZERO,
            dir: root.to_owned(),
            _state: dir,
        };
        plane.wait_ready().await?;
        plane.started_in = began.elapsed();
        Ok(plane)
    }

    /// Stops the apiserver (SIGTERM, as a static pod's restart sends) and
    /// starts it again on the same port and etcd, with `more` flags (a flag
    /// given again takes the later value); returns once it is ready, and
    /// how long it was away.
    #[allow(dead_code)]
    pub async fn restart_apiserver(&mut self, more: &[String]) -> Result<Duration, String> {
        let began = Instant::now();
        self.apiserver.stop(Duration::from_secs(30));
        self.apiserver_starts += 1;
        let (program, args) = &self.apiserver_command;
        let mut command = Command::new(program);
        command.args(args).args(more);
        self.apiserver = Process::spawn(
            "kube-apiserver",
            command,
            self.dir
                .join(format!("apiserver.{}.log", self.apiserver_starts)),
        )?;
        self.wait_ready().await?;
        Ok(began.elapsed())
    }

    async fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(90);
        let client = self.client().await;
        loop {
            for process in [&mut self.etcd, &mut self.apiserver] {
                if let Some(status) = process.exited() {
                    return Err(format!(
                        "{} exited ({status}) before the apiserver was ready:\n{}",
                        process.name,
                        process.log_tail()
                    ));
                }
            }
            let ready = client
                .request_text(
                    http::Request::get("/readyz")
                        .body(Vec::new())
                        .unwrap_or_default(),
                )
                .await;
            if matches!(ready.as_deref(), Ok("ok")) {
                let version = client
                    .apiserver_version()
                    .await
                    .map_err(|e| format!("/version: {e}"))?;
                self.version = version.git_version;
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the apiserver was not ready in 90 s ({ready:?}):\n{}",
                    self.apiserver.log_tail()
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub async fn config(&self) -> Config {
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig)
            .unwrap_or_else(|e| panic!("{}: {e}", self.kubeconfig.display()));
        Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", self.kubeconfig.display()))
    }

    /// An admin client (`system:masters`).
    pub async fn client(&self) -> Client {
        Client::try_from(self.config().await).unwrap_or_else(|e| panic!("client: {e}"))
    }

    /// Runs `kubectl ARGS --kubeconfig ...`: (exit code, stdout, stderr).
    pub fn kubectl(&self, args: &[&str], cwd: &Path) -> (i32, String, String) {
        let Some(kubectl) = &self.kubectl else {
            panic!("kubectl is neither in KUBEBUILDER_ASSETS nor on PATH");
        };
        let output = Command::new(kubectl)
            .args(args)
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .current_dir(cwd)
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", kubectl.display()));
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }
}

pub fn write_kubeconfig(path: &Path, url: &str, pki: &Pki) -> Result<(), String> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: {url}\n    certificate-authority-data: {}\nusers:\n- name: admin\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\ncontexts:\n- name: e2e\n  context: {{cluster: e2e, user: admin, namespace: default}}\ncurrent-context: e2e\n",
        b64(&pki.ca_pem),
        b64(&pki.admin_cert_pem),
        b64(&pki.admin_key_pem),
    );
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Polls `check` every 100 ms until it returns `Some`, or panics after
/// `limit` naming `what`. For state that a watch delivers eventually; never
/// a measure of speed.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if Instant::now() > deadline {
            panic!("{what}: not within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
