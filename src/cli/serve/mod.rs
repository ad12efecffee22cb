//! `nodescope serve`: loads certificates, stores and policies, then runs the
//! listeners (and, with `--store kube`, the status Lease renewal) until
//! SIGTERM, draining in-flight reviews before exit. `nodescope certs`,
//! which makes the serving certificate, is here beside it.

mod args;
mod certs;
mod demo;

pub use args::ServeArgs;
pub use certs::{run_certs, CertsArgs};

use crate::admission::Decider;
use crate::cli::kubectl::cluster;
use crate::leader::status::{self, StatusLease};
use crate::manifest::ManifestError;
use crate::metrics::{ReloadResult, ReloadSource, WebhookMetrics};
use crate::policy::{bundle, routed};
use crate::policy::{PolicyLoadError, PolicySet};
use crate::server::{self, AppState, ConnectionOptions, Edge, Readiness};
use crate::store::{self, Snapshot, StoreSource};
use crate::tls::{self, ReloadingResolver, TlsError};
use arc_swap::ArcSwap;
use demo::{Demo, DemoError};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Why the server could not start; each names the flag or file at fault.
///
/// Each message carries its cause, so no variant also returns it from
/// `source()`: the binary prints the chain, and would say it twice.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("cannot listen on {addr} ({flag}): {cause}")]
    Bind {
        addr: SocketAddr,
        flag: &'static str,
        cause: std::io::Error,
    },
    #[error(transparent)]
    Demo(#[from] DemoError),
    #[error("cannot install the signal handler: {0}")]
    Signal(std::io::Error),
    #[error("--policies {}", under(path, cause))]
    Policies {
        path: PathBuf,
        cause: PolicyLoadError,
    },
    #[error("--policies {}", under(path, cause))]
    Unrouted {
        path: PathBuf,
        cause: crate::policy::routed::Unrouted,
    },
    #[error("the built-in policy bundle does not load: {0}")]
    Bundle(PolicyLoadError),
    #[error("--store file:{}", under(path, cause))]
    Store { path: PathBuf, cause: ManifestError },
    #[error("--store file:{}: {EMPTY_STORE}", path.display())]
    EmptyStore { path: PathBuf },
    #[error("--store kube: {0}")]
    Kube(cluster::ClusterError),
    #[error("{0}")]
    Report(String),
}

/// Why a file store without objects is refused, at start and on reload.
const EMPTY_STORE: &str =
    "holds no object, so every review would be answered as if the cluster had no VPA, Feature or Namespace";

/// `path: cause`, unless the cause already starts with the path (it names
/// the file it failed on, `path` or one under it): then the cause alone.
fn under(path: &std::path::Path, cause: &impl std::fmt::Display) -> String {
    let path = path.display().to_string();
    let cause = cause.to_string();
    if cause.starts_with(&path) {
        cause
    } else {
        format!("{path}: {cause}")
    }
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

/// Reloads `--policies` on change. A set that lacks a policy the webhook
/// configurations route to ([`routed::check`]) is refused like one that
/// does not load, and also turns `/readyz` unready until a good one comes:
/// the last good bundle keeps serving, but the operator must see it.
fn spawn_policy_reload(
    path: PathBuf,
    interval: Duration,
    cell: DeciderCell,
    metrics: WebhookMetrics,
    readiness: Arc<Readiness>,
) {
    let source = path.clone();
    tokio::spawn(crate::manifest::poll_changes(
        path,
        interval,
        move || match PolicySet::load_dir(&source) {
            Ok(policies) => match routed::check(&policies) {
                Ok(()) => {
                    metrics.policy_reload(ReloadResult::Success);
                    tracing::info!(path = %source.display(), "policies reloaded");
                    cell.set_policies(Arc::new(policies));
                    readiness.accept("policies");
                }
                Err(cause) => {
                    metrics.refusals.refuse(ReloadSource::Policies);
                    tracing::warn!(
                        path = %source.display(),
                        error = %cause,
                        "policy reload refused; keeping the previous bundle"
                    );
                    readiness.refuse(
                        "policies",
                        format!(
                            "the reload of --policies {} was refused: it {cause}; the last good \
                             bundle still serves",
                            source.display()
                        ),
                    );
                }
            },
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
}

/// `--policies`, or the bundle built into the binary when it is not given.
/// A directory must hold every policy the webhook configurations route to
/// ([`routed`]): without them /validate would allow what it is sent.
fn load_policies(path: Option<&Path>) -> Result<PolicySet, ServeError> {
    match path {
        Some(path) => {
            let set = PolicySet::load_dir(path).map_err(|cause| ServeError::Policies {
                path: path.to_owned(),
                cause,
            })?;
            routed::check(&set).map_err(|cause| ServeError::Unrouted {
                path: path.to_owned(),
                cause,
            })?;
            Ok(set)
        }
        None => bundle::policy_set().map_err(ServeError::Bundle),
    }
}

/// Starts the store named by `--store`; returns the initial snapshot, and
/// the cluster's client with `--store kube`.
async fn start_store(
    args: &ServeArgs,
    policies: &PolicySet,
    cell_slot: &Arc<std::sync::OnceLock<DeciderCell>>,
    readiness: Arc<Readiness>,
    metrics: &WebhookMetrics,
) -> Result<(Arc<Snapshot>, Option<kube::Client>), ServeError> {
    let interval = Duration::from_secs(args.reload_interval.max(1));
    match &args.store {
        StoreSource::File(path) => {
            let (snapshot, objects) =
                store::file::load_counted(path).map_err(|cause| ServeError::Store {
                    path: path.clone(),
                    cause,
                })?;
            if objects == 0 {
                return Err(ServeError::EmptyStore { path: path.clone() });
            }
            store::file::report_problems(&snapshot, "file");
            readiness.store.store(true, Ordering::Release);
            let slot = cell_slot.clone();
            let refusals = metrics.refusals.clone();
            let shown = path.display().to_string();
            tokio::spawn(store::file::watch(
                path.clone(),
                interval,
                metrics.store.clone(),
                move |reload| match reload {
                    store::file::Reload::Loaded(s) => {
                        if let Some(cell) = slot.get() {
                            cell.set_store(s);
                        }
                        readiness.accept("store");
                    }
                    store::file::Reload::Empty => {
                        refusals.refuse(ReloadSource::Store);
                        readiness.refuse(
                            "store",
                            format!(
                                "the reload of --store file:{shown} was refused: it \
                                 {EMPTY_STORE}; the last good snapshot still serves"
                            ),
                        );
                    }
                },
            ));
            Ok((Arc::new(snapshot), None))
        }
        StoreSource::Kube => {
            let client = args
                .cluster
                .connect(cluster::Retry::Default)
                .await
                .map_err(ServeError::Kube)?
                .client;
            let kinds =
                store::kube::default_kinds(args.namespace.as_deref(), &param_namespaces(policies));
            let slot = cell_slot.clone();
            tokio::spawn(store::kube::run(
                client.clone(),
                kinds,
                metrics.store.clone(),
                move |s| {
                    if let Some(cell) = slot.get() {
                        cell.set_store(s);
                    }
                },
                move || readiness.store.store(true, Ordering::Release),
            ));
            Ok((Arc::new(Snapshot::default()), Some(client)))
        }
    }
}

/// Renews the status Lease of `--status-lease-name` while this replica is
/// ready, until `stop`; nothing when the name is empty.
fn start_status_lease(
    args: &ServeArgs,
    client: kube::Client,
    readiness: Arc<Readiness>,
    metrics: &WebhookMetrics,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) {
    if args.status_lease_name.is_empty() {
        tracing::info!("--status-lease-name is empty: no webhook status Lease");
        return;
    }
    let lease = StatusLease {
        namespace: args.status_lease_namespace.clone(),
        name: args.status_lease_name.clone(),
        identity: args.holder_identity(),
    };
    tokio::spawn(status::renew::run(
        client,
        lease,
        args.status_lease_update_interval,
        move || readiness.is_ready(),
        metrics.status_lease.clone(),
        stop,
    ));
}

/// Runs the server until a termination signal; returns once drained.
pub async fn run_serve(mut args: ServeArgs) -> Result<(), ServeError> {
    // Kept alive, and its directory with it, until the server stops.
    let demo = if args.demo {
        let demo = Demo::create()?;
        if args.listen == SocketAddr::from(([0, 0, 0, 0], 8443)) {
            args.listen = SocketAddr::from(([127, 0, 0, 1], 8443));
        }
        if args.store == StoreSource::Kube {
            args.store = StoreSource::File(demo.store());
        }
        Some(demo)
    } else {
        None
    };
    let certificates = match &demo {
        Some(demo) => Certificates {
            cert: demo.cert(),
            key: demo.key(),
        },
        // clap enforces both unless --demo.
        None => Certificates {
            cert: args.tls_cert.clone().unwrap_or_default(),
            key: args.tls_key.clone().unwrap_or_default(),
        },
    };
    let metrics = WebhookMetrics::new(match args.store {
        StoreSource::File(_) => "file",
        StoreSource::Kube => "kube",
    });
    let readiness = Arc::new(Readiness::default());
    let pair = tls::load_pair(&certificates.cert, &certificates.key)?;
    let resolver = Arc::new(ReloadingResolver::new(pair));
    let tls_config = Arc::new(tls::server_config(resolver.clone())?);
    readiness.certificates.store(true, Ordering::Release);
    let policies = load_policies(args.policies.as_deref())?;
    readiness.policies.store(true, Ordering::Release);
    let reporter = args
        .report
        .config(
            "webhook",
            &args.holder_identity(),
            &["vpa-node-scope", "balloon-pods"],
        )
        .map_err(ServeError::Report)?;
    // Filled once the decider exists; store watchers started before that
    // publish through it.
    let cell_slot = Arc::new(std::sync::OnceLock::new());
    let (snapshot, client) =
        start_store(&args, &policies, &cell_slot, readiness.clone(), &metrics).await?;
    let decider = Decider {
        missing_node: args.missing_node_recommendation.into(),
        boost: args.mutation.boost(),
        ..Decider::new(snapshot, Arc::new(policies))
    };
    let cell = DeciderCell(Arc::new(ArcSwap::from_pointee(decider)));
    let _ = cell_slot.set(cell.clone());
    if let Some(path) = &args.policies {
        spawn_policy_reload(
            path.clone(),
            Duration::from_secs(args.reload_interval.max(1)),
            cell.clone(),
            metrics.clone(),
            readiness.clone(),
        );
    }

    let state = AppState {
        decider: cell.0.clone(),
        metrics: metrics.clone(),
        readiness: readiness.clone(),
        max_body_bytes: args.max_body_bytes,
        edge: Edge::new(metrics.http.clone()),
    };
    let options = ConnectionOptions {
        drain_timeout: Duration::from_secs(args.drain_timeout),
        idle_timeout: Duration::from_secs(args.idle_timeout.max(1)),
        handshake_timeout: Duration::from_secs(args.handshake_timeout.max(1)),
    };

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|cause| ServeError::Bind {
            addr: args.listen,
            flag: "--listen",
            cause,
        })?;
    let addr = listener.local_addr().unwrap_or(args.listen);
    let metrics_listener = match args.metrics_listen {
        Some(m) => {
            let listener =
                tokio::net::TcpListener::bind(m)
                    .await
                    .map_err(|cause| ServeError::Bind {
                        addr: m,
                        flag: "--metrics-listen",
                        cause,
                    })?;
            let local = listener.local_addr().unwrap_or(m);
            Some((listener, local))
        }
        None => None,
    };

    tokio::spawn(tls::watch_pair(
        resolver,
        certificates.cert.clone(),
        certificates.key.clone(),
        Duration::from_secs(args.tls_reload_interval.max(1)),
        metrics.tls.clone(),
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

    if let Some(client) = client {
        // The watches stop with the runtime, after the drain.
        if let Some(reporter) = &reporter {
            drop(crate::features::reporter::spawn(&client, reporter));
        }
        start_status_lease(
            &args,
            client,
            readiness.clone(),
            &metrics,
            stopped(stop_rx.clone()),
        );
    }

    let probes = metrics_listener.map(|(listener, local)| {
        tracing::info!(addr = %local, "serving probes and metrics over plain HTTP");
        tokio::spawn(server::serve_plain(
            listener,
            server::probe_router(state.clone()),
            options.clone(),
            stopped(stop_rx.clone()),
        ))
    });
    tracing::info!(%addr, "listening");
    if let Some(demo) = &demo {
        use std::io::Write;
        let mut out = crate::cli::out::stdout();
        let _ = out
            .write_all(demo.banner(addr).as_bytes())
            .and_then(|()| out.flush());
    }
    server::serve_tls(
        listener,
        tls_config,
        server::admission_router(state),
        options,
        metrics,
        stopped(stop_rx),
    )
    .await;
    if let Some(probes) = probes {
        let _ = probes.await;
    }
    tracing::info!("shut down cleanly");
    Ok(())
}
