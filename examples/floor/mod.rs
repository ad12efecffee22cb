//! What the two floor servers share with `nodescope serve`: the command
//! line subset, the TLS configuration (`tls::server_config` over a
//! `ReloadingResolver`), the listener (`server::serve_tls` with default
//! `ConnectionOptions`), the body limit and the multi-threaded runtime.
//! Only the review handler differs, so the gap to nodescope is the cost of
//! its decision, not of its transport.

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use nodescope::server::{serve_tls, ConnectionOptions, DEFAULT_MAX_BODY_BYTES};
use nodescope::tls::{self, ReloadingResolver};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

// Same allocator as the `nodescope` binary built with the same features.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub struct Options {
    pub listen: SocketAddr,
    pub tls_cert: PathBuf,
    pub tls_key: PathBuf,
}

pub fn parse_args() -> Result<Options, String> {
    let mut listen = SocketAddr::from(([127, 0, 0, 1], 8443));
    let (mut cert, mut key) = (None, None);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--listen" => {
                listen = value
                    .parse()
                    .map_err(|e| format!("--listen {value}: {e}"))?
            }
            "--tls-cert" => cert = Some(PathBuf::from(value)),
            "--tls-key" => key = Some(PathBuf::from(value)),
            _ => {
                return Err(format!(
                    "unknown flag {flag} (expected --listen, --tls-cert, --tls-key)"
                ))
            }
        }
    }
    Ok(Options {
        listen,
        tls_cert: cert.ok_or("--tls-cert is required")?,
        tls_key: key.ok_or("--tls-key is required")?,
    })
}

/// The body as nodescope's server reads it: whole, with the same limit.
pub async fn read_body(request: Request) -> Result<Bytes, Response> {
    axum::body::to_bytes(request.into_body(), DEFAULT_MAX_BODY_BYTES)
        .await
        .map_err(|e| (StatusCode::BAD_REQUEST, e.to_string()).into_response())
}

pub fn json(body: Vec<u8>) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// Runs `review` on POST /mutate and /validate, `ok` on /readyz and
/// /healthz, over nodescope's TLS listener until SIGTERM or Ctrl-C.
pub fn run<H, F>(review: H) -> Result<(), String>
where
    H: Fn(Request) -> F + Clone + Send + Sync + 'static,
    F: std::future::Future<Output = Response> + Send + 'static,
{
    let options = parse_args()?;
    let pair = tls::load_pair(&options.tls_cert, &options.tls_key).map_err(|e| e.to_string())?;
    let config =
        tls::server_config(Arc::new(ReloadingResolver::new(pair))).map_err(|e| e.to_string())?;
    let app = Router::new()
        .route("/mutate", post(review.clone()))
        .route("/validate", post(review))
        .route("/readyz", get(|| async { "ok\n" }))
        .route("/healthz", get(|| async { "ok\n" }));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(options.listen)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", options.listen))?;
        let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| e.to_string())?;
        let shutdown = async move {
            tokio::select! {
                _ = sigterm.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        };
        eprintln!("listening on https://{}", options.listen);
        serve_tls(
            listener,
            Arc::new(config),
            app,
            ConnectionOptions::default(),
            nodescope::metrics::WebhookMetrics::new("file"),
            shutdown,
        )
        .await;
        Ok(())
    })
}
