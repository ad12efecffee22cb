//! The cluster edge of the controllers: one listing for `update --plan`,
//! the probes and metrics listener (updater, balloon controller), and the
//! shutdown signal every controller command waits on.

use super::cluster::{ClusterError, Connection};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::Client;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// (group, version, kind, plural, required): what `--plan` lists. A kind
/// that is not required may be absent from the cluster (no Feature CRD).
const KINDS: [(&str, &str, &str, &str, bool); 7] = [
    (
        "autoscaling.k8s.io",
        "v1",
        "VerticalPodAutoscaler",
        "verticalpodautoscalers",
        true,
    ),
    ("", "v1", "LimitRange", "limitranges", true),
    ("", "v1", "Namespace", "namespaces", true),
    ("", "v1", "Node", "nodes", true),
    (
        "featureflags.nodescope.dev",
        "v1alpha1",
        "Feature",
        "features",
        false,
    ),
    ("", "v1", "Pod", "pods", true),
    ("apps", "v1", "DaemonSet", "daemonsets", true),
];

/// The kinds a pass reads only in the namespace of the VPAs it handles.
const IN_VPA_NAMESPACE: [&str; 4] = ["VerticalPodAutoscaler", "LimitRange", "Pod", "DaemonSet"];

/// Lists every object a pass reads, once. With `--vpa-object-namespace`,
/// the namespaced kinds of that namespace only, as upstream's updater
/// lists them: a cluster's pods are read only where they can be planned.
///
/// # Errors
/// A required kind that cannot be listed, in kubectl's words.
pub async fn gather(
    connection: &Connection,
    only: Option<&str>,
) -> Result<Vec<Value>, ClusterError> {
    let client = &connection.client;
    let mut out = Vec::new();
    for (group, version, kind, plural, required) in KINDS {
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        let api: Api<DynamicObject> = match only {
            Some(namespace) if IN_VPA_NAMESPACE.contains(&kind) => {
                Api::namespaced_with(client.clone(), namespace, &resource)
            }
            _ => Api::all_with(client.clone(), &resource),
        };
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                for object in list.items {
                    let mut value = serde_json::to_value(&object)
                        .map_err(|e| ClusterError::Other(format!("{plural}.{group}: {e}")))?;
                    value["apiVersion"] = resource.api_version.clone().into();
                    value["kind"] = kind.into();
                    out.push(value);
                }
            }
            Err(error) if !required => {
                tracing::debug!(%error, kind, "not listed");
            }
            Err(error) => return Err(connection.error(&error)),
        }
    }
    Ok(out)
}

/// Whether nodescope's webhook renewed its status Lease within `timeout`.
pub async fn webhook_fresh(
    client: &Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
) -> bool {
    crate::update::cluster::webhook_fresh(client, &(namespace.to_owned(), name.to_owned()), timeout)
        .await
}

/// Serves /metrics, /healthz and /readyz (ready once the watches synced).
/// `flag` names the address in the error: the updater takes upstream's
/// `--address`, the balloon controller `--metrics-listen`.
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve_probes(
    flag: &str,
    addr: std::net::SocketAddr,
    metrics: Arc<dyn Fn() -> String + Send + Sync>,
    ready: Arc<AtomicBool>,
) -> Result<tokio::task::JoinHandle<()>, String> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("{flag} {addr}: {e}"))?;
    let app = axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(move || {
                let metrics = metrics.clone();
                async move {
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        metrics(),
                    )
                }
            }),
        )
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .route(
            "/readyz",
            axum::routing::get(move || {
                let ready = ready.load(Ordering::SeqCst);
                async move {
                    if ready {
                        (axum::http::StatusCode::OK, "ok")
                    } else {
                        (
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            "watches not synced yet",
                        )
                    }
                }
            }),
        );
    Ok(tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::warn!(%error, "metrics listener stopped");
        }
    }))
}

/// Resolves on SIGTERM or Ctrl-C, logging `what` happens next.
pub async fn shutdown(what: &'static str) {
    let mut sigterm =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = async {
            match sigterm.as_mut() {
                Some(s) => { s.recv().await; }
                None => std::future::pending::<()>().await,
            }
        } => {}
    }
    tracing::info!("shutting down: {what}");
}
