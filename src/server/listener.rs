//! Accept loops: TCP_NODELAY on every connection, bounded TLS handshakes and
//! header reads, long keep-alive, and a graceful drain on shutdown.

use super::edge::Peer;
use super::plain;
use crate::metrics::{Handler, HandshakeFailure, WebhookMetrics};
use crate::throttle::Throttle;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

/// Connection limits; the defaults suit kube-apiserver as a client.
#[derive(Clone, Debug)]
pub struct ConnectionOptions {
    /// A client that has not finished the TLS handshake by then is dropped,
    /// so silent connections cannot pile up.
    pub handshake_timeout: Duration,
    /// Time allowed to receive a request's headers, counted from when the
    /// connection starts waiting for them; for HTTP/1.1 it is therefore also
    /// the keep-alive idle timeout. Longer than Go's 90 s idle-connection
    /// timeout so the apiserver, not nodescope, closes idle connections.
    pub idle_timeout: Duration,
    /// How long in-flight reviews may run after shutdown begins.
    pub drain_timeout: Duration,
}

impl Default for ConnectionOptions {
    fn default() -> Self {
        Self {
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            drain_timeout: Duration::from_secs(25),
        }
    }
}

/// The protocol is fixed by ALPN before the first byte is read: sniffing the
/// preface instead would wait for bytes without any timeout running, so an
/// idle client could hold a connection forever. HTTP/2 over TLS requires
/// ALPN (RFC 9113), so anything else is HTTP/1.1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    Http1,
    Http2,
}

fn builder(options: &ConnectionOptions) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(options.idle_timeout)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(20))
        .max_concurrent_streams(250);
    builder
}

/// Why the handshake of `error` failed. rustls's own errors come wrapped
/// in the I/O error; the rest are the connection's.
fn classify(error: &std::io::Error) -> HandshakeFailure {
    use rustls::AlertDescription as Alert;
    if error.kind() == std::io::ErrorKind::UnexpectedEof {
        return HandshakeFailure::Closed;
    }
    let Some(tls) = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    else {
        return match error.kind() {
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe => {
                HandshakeFailure::Closed
            }
            _ => HandshakeFailure::Other,
        };
    };
    match tls {
        // decrypt_error: what rustls clients send when the certificate's
        // signature does not verify against their CA of the same name, as
        // after a CA was made anew (a caBundle left behind).
        rustls::Error::AlertReceived(
            Alert::BadCertificate
            | Alert::DecryptError
            | Alert::UnknownCA
            | Alert::CertificateUnknown
            | Alert::CertificateExpired
            | Alert::CertificateRevoked
            | Alert::UnsupportedCertificate
            | Alert::AccessDenied,
        ) => HandshakeFailure::CertificateRejected,
        rustls::Error::AlertReceived(
            Alert::ProtocolVersion | Alert::HandshakeFailure | Alert::NoApplicationProtocol,
        )
        | rustls::Error::PeerIncompatible(_) => HandshakeFailure::Incompatible,
        rustls::Error::InvalidMessage(_)
        | rustls::Error::PeerMisbehaved(_)
        | rustls::Error::InappropriateHandshakeMessage { .. }
        | rustls::Error::InappropriateMessage { .. }
        | rustls::Error::DecryptError => HandshakeFailure::Protocol,
        _ => HandshakeFailure::Other,
    }
}

/// Counts a failed handshake and logs it at warn, through `throttle`.
fn handshake_failed(
    metrics: &WebhookMetrics,
    throttle: &Throttle,
    peer: SocketAddr,
    reason: HandshakeFailure,
    error: &dyn std::fmt::Display,
) {
    metrics.tls.handshake_error(reason);
    if let Some(suppressed) = throttle.admit() {
        tracing::warn!(
            %peer,
            reason = reason.as_str(),
            %error,
            suppressed,
            "TLS handshake failed"
        );
    }
}

/// Serves `app` over TLS on `listener` until `shutdown` resolves, then stops
/// accepting and waits up to the drain timeout for open requests. A client
/// that speaks plain HTTP to it is told so. Failed handshakes are counted in
/// `metrics` and logged at warn (throttled).
pub async fn serve_tls(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    options: ConnectionOptions,
    metrics: WebhookMetrics,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let handshake_timeout = options.handshake_timeout;
    let throttle = Arc::new(Throttle::new());
    let handshake = move |stream: TcpStream, peer: SocketAddr| {
        let acceptor = acceptor.clone();
        let metrics = metrics.clone();
        let throttle = throttle.clone();
        async move {
            let handshake = async {
                if plain::is_plain_http(&stream).await {
                    metrics.http_response(Handler::Other, 400);
                    let error = "plain HTTP on the TLS port; answered 400";
                    handshake_failed(
                        &metrics,
                        &throttle,
                        peer,
                        HandshakeFailure::PlainHttp,
                        &error,
                    );
                    plain::refuse(stream).await;
                    return None;
                }
                match acceptor.accept(stream).await {
                    Ok(tls) => Some(tls),
                    Err(error) => {
                        handshake_failed(&metrics, &throttle, peer, classify(&error), &error);
                        None
                    }
                }
            };
            match tokio::time::timeout(handshake_timeout, handshake).await {
                Ok(Some(tls)) => {
                    let protocol = match tls.get_ref().1.alpn_protocol() {
                        Some(b"h2") => Protocol::Http2,
                        _ => Protocol::Http1,
                    };
                    Some((tls, protocol))
                }
                Ok(None) => None,
                Err(_) => {
                    let error = format!("not finished within {handshake_timeout:?}");
                    handshake_failed(&metrics, &throttle, peer, HandshakeFailure::Timeout, &error);
                    None
                }
            }
        }
    };
    accept_loop(listener, handshake, app, options, shutdown).await;
}

/// Serves `app` over plain HTTP (probes and metrics only).
pub async fn serve_plain(
    listener: TcpListener,
    app: Router,
    options: ConnectionOptions,
    shutdown: impl Future<Output = ()>,
) {
    let handshake =
        |stream: TcpStream, _peer: SocketAddr| async move { Some((stream, Protocol::Http1)) };
    accept_loop(listener, handshake, app, options, shutdown).await;
}

async fn accept_loop<H, F, IO>(
    listener: TcpListener,
    handshake: H,
    app: Router,
    options: ConnectionOptions,
    shutdown: impl Future<Output = ()>,
) where
    H: Fn(TcpStream, SocketAddr) -> F,
    F: Future<Output = Option<(IO, Protocol)>> + Send + 'static,
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let http1 = Arc::new(builder(&options).http1_only());
    let http2 = Arc::new(builder(&options).http2_only());
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(error) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Without it, HTTP/2 responses on one connection stall ~40 ms each
        // behind Nagle's algorithm and delayed ACKs.
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, %peer, "could not set TCP_NODELAY");
        }
        let io = handshake(stream, peer);
        let (http1, http2) = (http1.clone(), http2.clone());
        let app = app.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let Some((io, protocol)) = io.await else {
                return;
            };
            let builder = match protocol {
                Protocol::Http1 => http1,
                Protocol::Http2 => http2,
            };
            // The peer rides on each request, for the refusal log.
            let app = app.map_request(move |mut request: axum::extract::Request<_>| {
                request.extensions_mut().insert(Peer(peer));
                request
            });
            let service = TowerToHyperService::new(app);
            let connection = builder.serve_connection(TokioIo::new(io), service);
            if let Err(error) = watcher.watch(connection.into_owned()).await {
                tracing::debug!(%error, %peer, "connection ended with an error");
            }
        });
    }
    // Close the socket first so new connections are refused while draining.
    drop(listener);
    drain(graceful, options.drain_timeout).await;
}

async fn drain(graceful: GracefulShutdown, timeout: Duration) {
    let open = graceful.count();
    tracing::info!(open, "draining connections");
    if tokio::time::timeout(timeout, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            ?timeout,
            "drain timeout reached; closing remaining connections"
        );
    }
}
