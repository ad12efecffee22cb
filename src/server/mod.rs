//! The HTTP edge: routes, body limits, content types, health and metrics.
//!
//! Owns nothing but transport. Each review is handed, as bytes, to
//! [`crate::admission::answer`]; this module never inspects an object.

mod body;
mod edge;
mod listener;
mod plain;

pub use edge::Edge;
pub use listener::{serve_plain, serve_tls, ConnectionOptions};

use crate::admission::{self, Decider};
use crate::metrics::{HttpMetrics, Registry, Webhook, WebhookMetrics};
use arc_swap::ArcSwap;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use edge::Reason;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The apiserver's own request size limit; a review can never be larger.
pub const DEFAULT_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// What `/readyz` waits for. Each part flips once, when it first loads; a
/// later reload that fails to parse keeps the last good copy serving, so it
/// stays ready. A reload refused because it would leave the webhooks with
/// nothing to check (see [`Readiness::refuse`]) keeps the last good copy
/// too, but is not ready until a good one arrives: the operator must see it.
#[derive(Debug, Default)]
pub struct Readiness {
    pub certificates: AtomicBool,
    pub policies: AtomicBool,
    pub store: AtomicBool,
    /// Why a part's latest reload was refused, by part, until one is taken.
    refused: Mutex<BTreeMap<&'static str, String>>,
}

impl Readiness {
    /// Everything loaded: the state tests and the demo start from.
    #[must_use]
    pub fn all_ready() -> Self {
        Self {
            certificates: AtomicBool::new(true),
            policies: AtomicBool::new(true),
            store: AtomicBool::new(true),
            refused: Mutex::default(),
        }
    }

    /// Whether `/readyz` answers 200 now.
    #[must_use]
    pub fn is_ready(&self) -> bool {
        self.missing().is_empty() && self.refusals().is_empty()
    }

    /// Records that the latest reload of `part` (`policies`, `store`) was
    /// refused, and why; `/readyz` says so until [`Readiness::accept`].
    pub fn refuse(&self, part: &'static str, why: String) {
        self.refused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(part, why);
    }

    /// Records that a reload of `part` was taken: no refusal stands.
    pub fn accept(&self, part: &'static str) {
        self.refused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(part);
    }

    fn refusals(&self) -> Vec<String> {
        self.refused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    fn missing(&self) -> Vec<&'static str> {
        let mut missing = Vec::new();
        for (flag, name) in [
            (&self.certificates, "certificates"),
            (&self.policies, "policies"),
            (&self.store, "store"),
        ] {
            if !flag.load(Ordering::Acquire) {
                missing.push(name);
            }
        }
        missing
    }
}

/// Shared by every request; the decider is swapped whole on reload.
#[derive(Clone)]
pub struct AppState {
    pub decider: Arc<ArcSwap<Decider>>,
    pub metrics: WebhookMetrics,
    pub readiness: Arc<Readiness>,
    pub max_body_bytes: usize,
    /// Counts every response and logs the refusals, for both listeners.
    pub edge: Edge,
}

/// The admission routes plus probes and metrics, served over TLS.
pub fn admission_router(state: AppState) -> Router {
    let routes = Router::new()
        .route("/mutate", post(mutate))
        .route("/validate", post(validate))
        .merge(probe_router_routes());
    let edge = state.edge.clone();
    finish(routes, state, edge, Served::Admission)
}

/// Probes and metrics only, for the optional plain-HTTP listener, so
/// kubelet and Prometheus need no TLS and never touch the admission path.
pub fn probe_router(state: AppState) -> Router {
    let edge = state.edge.clone();
    finish(probe_router_routes(), state, edge, Served::Probes)
}

/// `/metrics`, `/healthz` and `/readyz` of a controller (the recommender,
/// the features controller), which is live and ready while it runs: a
/// follower waiting for the Lease is as ready as the leader.
pub fn controller_router(registry: Registry, http: HttpMetrics) -> Router {
    let routes = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(healthz))
        .route("/metrics", get(render));
    finish(routes, registry, Edge::new(http), Served::Probes)
}

/// What a listener serves, as its 404 and 405 answers list it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Served {
    Admission,
    Probes,
}

impl Served {
    fn routes(self) -> &'static str {
        match self {
            Self::Admission => {
                "POST /mutate, POST /validate, GET /healthz, GET /readyz, GET /metrics"
            }
            Self::Probes => "GET /healthz, GET /readyz, GET /metrics",
        }
    }

    fn methods(self) -> &'static str {
        match self {
            Self::Admission => "admission reviews are POSTed, probes and metrics use GET",
            Self::Probes => "this port serves probes and metrics, with GET",
        }
    }
}

/// Fallbacks for what no route takes; every response counted, and every
/// refusal logged: a webhook configured with the wrong path or a client
/// over the body limit must show up in the metrics the error alert watches
/// and in the log.
fn finish<S: Clone + Send + Sync + 'static>(
    routes: Router<S>,
    state: S,
    edge: Edge,
    served: Served,
) -> Router {
    routes
        .method_not_allowed_fallback(move |request: Request| method_not_allowed(request, served))
        .fallback(move |request: Request| not_found(request, served))
        .layer(middleware::from_fn_with_state(edge, edge::record))
        .with_state(state)
}

fn probe_router_routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
}

/// A refusal: `text` with the reason its warn line gives.
fn refusal(status: StatusCode, reason: &'static str, message: impl Into<String>) -> Response {
    let mut response = text(status, message);
    response.extensions_mut().insert(Reason(reason));
    response
}

fn text(status: StatusCode, message: impl Into<String>) -> Response {
    let mut body = message.into();
    body.push('\n');
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

/// Answers `status` to a request whose body was not read, once the body
/// is read and dropped (see [`body::discard_unread`]).
async fn refuse(
    request: Request,
    status: StatusCode,
    reason: &'static str,
    message: String,
) -> Response {
    let (parts, body) = request.into_parts();
    body::discard_unread(&parts.headers, body).await;
    refusal(status, reason, message)
}

async fn method_not_allowed(request: Request, served: Served) -> Response {
    let message = format!(
        "method {} is not allowed on {}: {}",
        request.method(),
        request.uri().path(),
        served.methods()
    );
    refuse(
        request,
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        message,
    )
    .await
}

async fn not_found(request: Request, served: Served) -> Response {
    let message = format!(
        "no route for {}: this port serves {}",
        request.uri().path(),
        served.routes()
    );
    refuse(request, StatusCode::NOT_FOUND, "no_route", message).await
}

async fn healthz() -> Response {
    text(StatusCode::OK, "ok")
}

async fn readyz(State(state): State<AppState>) -> Response {
    let missing = state.readiness.missing();
    let refused = state.readiness.refusals();
    if !missing.is_empty() {
        text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: waiting for {}", missing.join(", ")),
        )
    } else if !refused.is_empty() {
        text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}", refused.join("; ")),
        )
    } else {
        text(StatusCode::OK, "ok")
    }
}

async fn metrics(State(state): State<AppState>) -> Response {
    render(State(state.metrics.registry().clone())).await
}

async fn render(State(registry): State<Registry>) -> Response {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        registry.render(),
    )
        .into_response()
}

async fn mutate(State(state): State<AppState>, request: Request) -> Response {
    review(Webhook::Mutate, state, request).await
}

async fn validate(State(state): State<AppState>, request: Request) -> Response {
    review(Webhook::Validate, state, request).await
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
}

async fn review(webhook: Webhook, state: AppState, request: Request) -> Response {
    let headers = request.headers();
    if !is_json(headers) {
        let got = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none");
        let message = format!("Content-Type must be application/json, got {got}");
        return refuse(
            request,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            message,
        )
        .await;
    }
    let limit = state.max_body_bytes;
    let (parts, body) = request.into_parts();
    let body = match body::read(&parts.headers, body, limit).await {
        Ok(body) => body,
        Err(body::BodyError::TooLarge) => return too_large(limit),
        Err(body::BodyError::Read(error)) => {
            return refusal(
                StatusCode::BAD_REQUEST,
                "body_unreadable",
                format!("could not read request body: {error}"),
            )
        }
    };
    let started = Instant::now();
    let decider = state.decider.load();
    let answer = admission::answer(webhook, &body, &decider);
    state.metrics.observe_review(
        webhook,
        &answer.operation,
        &answer.resource,
        answer.result,
        started.elapsed(),
    );
    state
        .metrics
        .unusable_recommendations(answer.unusable_recommendations);
    let status = StatusCode::from_u16(answer.http_status).unwrap_or(StatusCode::OK);
    let mut response = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, answer.content_type)
        .body(Body::from(answer.body))
        .unwrap_or_else(|_| {
            text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "could not build response",
            )
        });
    if status.is_client_error() {
        response
            .extensions_mut()
            .insert(Reason("not_an_admission_review"));
    }
    response
}

fn too_large(limit: usize) -> Response {
    refusal(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        format!("request body exceeds the limit of {limit} bytes (--max-body-bytes)"),
    )
}
