//! What the long-running commands share, so that each starts, reports
//! and stops alike: the `--report-*` flags of what each observes of the
//! Features it obeys ([`report`]), the /metrics, /healthz and /readyz
//! listener of the controllers, their log flags, and the shutdown signal
//! they wait on.

pub mod report;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// How a controller logs, as `serve` does: `--log-format` and
/// `--log-level`. The level is a tracing filter, so that one module can
/// say more than the rest: `info,nodescope::update::told=debug` adds the
/// updater's reason for every pod it leaves alone.
#[derive(clap::Args, Clone, Debug)]
pub struct LogFlags {
    /// `text` or `json` logs.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: crate::cli::LogFormat,
    /// A tracing filter such as `info` or `nodescope=debug`.
    #[arg(long, default_value = "info", value_parser = crate::cli::flags::log_filter)]
    pub log_level: String,
}

impl LogFlags {
    /// Installs the logger. The filter was checked when parsed
    /// ([`crate::cli::flags::log_filter`]), as `serve`'s is.
    pub fn init(&self) {
        crate::cli::init_logging(self.log_format, &self.log_level);
    }
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
