//! `nodescope serve`: loads certificates, stores and policies, then runs the
//! listeners until SIGTERM, draining in-flight reviews before exit.

use super::ServeArgs;
use crate::admission::Decider;
use crate::manifest::ManifestError;
use crate::metrics::{Metrics, ReloadResult};
use crate::policy::{PolicyLoadError, PolicySet};
use crate::server::{self, AppState, ConnectionOptions, Readiness};
use crate::store::{self, Snapshot, StoreSource};
use crate::tls::{self, CertRequest, KeyType, ReloadingResolver, TlsError};
use arc_swap::ArcSwap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Why the server could not start; each names the flag or file at fault.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("cannot listen on {addr} ({flag}): {source}")]
    Bind {
        addr: SocketAddr,
        flag: &'static str,
        source: std::io::Error,
    },
    #[error("cannot create a temporary directory for --demo certificates: {0}")]
    DemoDir(std::io::Error),
    #[error("cannot install the signal handler: {0}")]
    Signal(std::io::Error),
    #[error("--policies {path}: {source}")]
    Policies {
        path: PathBuf,
        source: PolicyLoadError,
    },
    #[error("--store file:{path}: {source}")]
    Store {
        path: PathBuf,
        source: ManifestError,
    },
    #[error("--store kube: cannot configure the Kubernetes client: {0}")]
    Kube(#[from] kube::Error),
}

/// The shared, swappable decider; stores and policies replace their part.
#[derive(Clone)]
struct DeciderCell(Arc<ArcSwap<Decider>>);

impl DeciderCell {
    fn set_store(&self, snapshot: Arc<Snapshot>) {
        self.0.rcu(|d| Decider {
            store: snapshot.clone(),
            ..Decider::clone(d)
        });
    }

    fn set_policies(&self, policies: Arc<PolicySet>) {
        self.0.rcu(|d| Decider {
            policies: policies.clone(),
            ..Decider::clone(d)
        });
    }
}

/// Namespaces whose ConfigMaps policy bindings take as params.
fn param_namespaces(policies: &PolicySet) -> Vec<String> {
    let mut namespaces = policies.param_namespaces();
    if namespaces.is_empty() {
        namespaces.push("kube-system".to_owned());
    }
    namespaces
}

fn spawn_policy_reload(path: PathBuf, interval: Duration, cell: DeciderCell, metrics: Metrics) {
    let source = path.clone();
    tokio::spawn(crate::manifest::poll_changes(
        path,
        interval,
        move || match PolicySet::load_dir(&source) {
            Ok(policies) => {
                metrics.policy_reload(ReloadResult::Success);
                tracing::info!(path = %source.display(), "policies reloaded");
                cell.set_policies(Arc::new(policies));
            }
            Err(error) => {
                metrics.policy_reload(ReloadResult::Failure);
                tracing::warn!(%error, "policy reload failed; keeping the previous bundle");
            }
        },
    ));
}

/// Resolves when SIGTERM or Ctrl-C arrives.
async fn termination(mut sigterm: tokio::signal::unix::Signal) {
    tokio::select! {
        _ = sigterm.recv() => tracing::info!("SIGTERM received; shutting down"),
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupt received; shutting down"),
    }
}

struct Certificates {
    cert: PathBuf,
    key: PathBuf,
    /// Keeps the `--demo` directory alive for the life of the server.
    _demo_dir: Option<tempfile::TempDir>,
}

fn demo_certificates() -> Result<Certificates, ServeError> {
    let dir = tempfile::tempdir().map_err(ServeError::DemoDir)?;
    let certs = tls::generate(&CertRequest {
        hosts: vec!["localhost".into(), "127.0.0.1".into()],
        key_type: KeyType::Ecdsa,
        validity_days: 1,
    })?;
    certs.write_to(dir.path())?;
    Ok(Certificates {
        cert: dir.path().join("tls.crt"),
        key: dir.path().join("tls.key"),
        _demo_dir: Some(dir),
    })
}

/// Starts the store named by `--store`; returns the initial snapshot.
async fn start_store(
    args: &ServeArgs,
    policies: &PolicySet,
    cell_slot: &Arc<std::sync::OnceLock<DeciderCell>>,
    readiness: Arc<Readiness>,
    metrics: &Metrics,
) -> Result<Arc<Snapshot>, ServeError> {
    let interval = Duration::from_secs(args.reload_interval.max(1));
    match &args.store {
        StoreSource::File(path) => {
            let snapshot = store::file::load(path).map_err(|source| ServeError::Store {
                path: path.clone(),
                source,
            })?;
            store::file::report_problems(&snapshot, "file");
            readiness.store.store(true, Ordering::Release);
            let slot = cell_slot.clone();
            tokio::spawn(store::file::watch(
                path.clone(),
                interval,
                metrics.clone(),
                move |s| {
                    if let Some(cell) = slot.get() {
                        cell.set_store(s);
                    }
                },
            ));
            Ok(Arc::new(snapshot))
        }
        StoreSource::Kube => {
            let client = kube::Client::try_default().await?;
            let kinds =
                store::kube::default_kinds(args.namespace.as_deref(), &param_namespaces(policies));
            let slot = cell_slot.clone();
            tokio::spawn(store::kube::run(
                client,
                kinds,
                metrics.clone(),
                move |s| {
                    if let Some(cell) = slot.get() {
                        cell.set_store(s);
                    }
                },
                move || readiness.store.store(true, Ordering::Release),
            ));
            Ok(Arc::new(Snapshot::default()))
        }
    }
}

fn demo_banner(addr: SocketAddr, ca: &std::path::Path) -> String {
    format!(
        "nodescope demo listening on https://{addr}\n\
         try:\n  curl --cacert {ca} -H 'Content-Type: application/json' \
         --data-binary @examples/reviews/pod-node-exporter-node-a-1-create.json \
         https://{addr}/mutate\n",
        ca = ca.display()
    )
}

/// Runs the server until a termination signal; returns once drained.
pub async fn run_serve(mut args: ServeArgs) -> Result<(), ServeError> {
    let certificates = if args.demo {
        if args.listen == SocketAddr::from(([0, 0, 0, 0], 8443)) {
            args.listen = SocketAddr::from(([127, 0, 0, 1], 8443));
        }
        if args.store == StoreSource::Kube {
            args.store = StoreSource::File(PathBuf::from("examples/store"));
        }
        demo_certificates()?
    } else {
        // clap enforces both unless --demo.
        Certificates {
            cert: args.tls_cert.clone().unwrap_or_default(),
            key: args.tls_key.clone().unwrap_or_default(),
            _demo_dir: None,
        }
    };
    let metrics = Metrics::new();
    let readiness = Arc::new(Readiness::default());
    let pair = tls::load_pair(&certificates.cert, &certificates.key)?;
    let resolver = Arc::new(ReloadingResolver::new(pair));
    let tls_config = Arc::new(tls::server_config(resolver.clone())?);
    readiness.certificates.store(true, Ordering::Release);
    let policies = PolicySet::load_dir(&args.policies).map_err(|source| ServeError::Policies {
        path: args.policies.clone(),
        source,
    })?;
    readiness.policies.store(true, Ordering::Release);
    // Filled once the decider exists; store watchers started before that
    // publish through it.
    let cell_slot = Arc::new(std::sync::OnceLock::new());
    let snapshot = start_store(&args, &policies, &cell_slot, readiness.clone(), &metrics).await?;
    let decider = Decider {
        missing_node: args.missing_node_recommendation.into(),
        ..Decider::new(snapshot, Arc::new(policies))
    };
    let cell = DeciderCell(Arc::new(ArcSwap::from_pointee(decider)));
    let _ = cell_slot.set(cell.clone());
    spawn_policy_reload(
        args.policies.clone(),
        Duration::from_secs(args.reload_interval.max(1)),
        cell.clone(),
        metrics.clone(),
    );

    let state = AppState {
        decider: cell.0.clone(),
        metrics: metrics.clone(),
        readiness: readiness.clone(),
        max_body_bytes: args.max_body_bytes,
    };
    let options = ConnectionOptions {
        drain_timeout: Duration::from_secs(args.drain_timeout),
        idle_timeout: Duration::from_secs(args.idle_timeout.max(1)),
        handshake_timeout: Duration::from_secs(args.handshake_timeout.max(1)),
    };

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: args.listen,
            flag: "--listen",
            source,
        })?;
    let addr = listener.local_addr().unwrap_or(args.listen);
    let metrics_listener = match args.metrics_listen {
        Some(m) => {
            Some(
                tokio::net::TcpListener::bind(m)
                    .await
                    .map_err(|source| ServeError::Bind {
                        addr: m,
                        flag: "--metrics-listen",
                        source,
                    })?,
            )
        }
        None => None,
    };

    tokio::spawn(tls::watch_pair(
        resolver,
        certificates.cert.clone(),
        certificates.key.clone(),
        Duration::from_secs(args.tls_reload_interval.max(1)),
        metrics.clone(),
    ));

    let sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(ServeError::Signal)?;
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        termination(sigterm).await;
        let _ = stop_tx.send(true);
    });
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };

    let probes = metrics_listener.map(|listener| {
        let local = listener.local_addr().ok();
        tracing::info!(addr = ?local, "serving probes and metrics over plain HTTP");
        tokio::spawn(server::serve_plain(
            listener,
            server::probe_router(state.clone()),
            options.clone(),
            stopped(stop_rx.clone()),
        ))
    });
    tracing::info!(%addr, "listening");
    if args.demo {
        let ca = certificates.cert.with_file_name("ca.crt");
        print!("{}", demo_banner(addr, &ca));
    }
    server::serve_tls(
        listener,
        tls_config,
        server::admission_router(state),
        options,
        stopped(stop_rx),
    )
    .await;
    if let Some(probes) = probes {
        let _ = probes.await;
    }
    tracing::info!("shut down cleanly");
    Ok(())
}
