//! What every response passes on its way out: counted by handler and code
//! and, when it refuses the request (any 4xx), logged at warn with the
//! peer, path, code and reason, through a [`Throttle`] so that a flood of
//! refusals cannot fill the disk.

use crate::metrics::{Handler, HttpMetrics};
use crate::throttle::Throttle;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use std::net::SocketAddr;
use std::sync::Arc;

/// The client's address, put on each request by the accept loop.
#[derive(Clone, Copy, Debug)]
pub(super) struct Peer(pub(super) SocketAddr);

/// Why a request was refused, in a word the warn line and a grep share;
/// put on the response by whoever refused it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Reason(pub(super) &'static str);

/// The longest path a warn line repeats; a longer one is cut, so a client
/// cannot make each line as long as its request.
const PATH_CHARS: usize = 200;

/// One listener's response counter and refusal log.
#[derive(Clone)]
pub struct Edge {
    http: HttpMetrics,
    refusals: Arc<Throttle>,
}

impl Edge {
    /// Counts into `http`, and logs refusals at the [`Throttle`]'s pace.
    #[must_use]
    pub fn new(http: HttpMetrics) -> Self {
        Self {
            http,
            refusals: Arc::new(Throttle::new()),
        }
    }
}

/// The middleware: counts every response, and logs the refusals.
pub(super) async fn record(State(edge): State<Edge>, request: Request, next: Next) -> Response {
    let uri = request.uri().clone();
    let peer = request.extensions().get::<Peer>().copied();
    let response = next.run(request).await;
    let code = response.status();
    edge.http.response(Handler::of(uri.path()), code.as_u16());
    if code.is_client_error() {
        if let Some(suppressed) = edge.refusals.admit() {
            let reason = response
                .extensions()
                .get::<Reason>()
                .map_or_else(|| code.canonical_reason().unwrap_or("refused"), |r| r.0);
            let path: String = uri.path().chars().take(PATH_CHARS).collect();
            let peer = peer.map_or_else(|| "unknown".to_owned(), |p| p.0.to_string());
            tracing::warn!(
                %peer,
                %path,
                code = code.as_u16(),
                reason,
                suppressed,
                "request refused"
            );
        }
    }
    response
}
