//! Accept loops: TCP_NODELAY on every connection, bounded TLS handshakes and
//! header reads, long keep-alive, and a graceful drain on shutdown.

use super::plain;
use crate::metrics::{Handler, Metrics};
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

/// Serves `app` over TLS on `listener` until `shutdown` resolves, then stops
/// accepting and waits up to the drain timeout for open requests. A client
/// that speaks plain HTTP to it is told so, and counted in `metrics`.
pub async fn serve_tls(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    options: ConnectionOptions,
    metrics: Metrics,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let handshake_timeout = options.handshake_timeout;
    let handshake = move |stream: TcpStream, peer: SocketAddr| {
        let acceptor = acceptor.clone();
        let metrics = metrics.clone();
        async move {
            let handshake = async {
                if plain::is_plain_http(&stream).await {
                    tracing::debug!(%peer, "plain HTTP on the TLS port; answering 400");
                    metrics.http_response(Handler::Other, 400);
                    plain::refuse(stream).await;
                    return None;
                }
                match acceptor.accept(stream).await {
                    Ok(tls) => Some(tls),
                    Err(error) => {
                        tracing::debug!(%error, %peer, "TLS handshake failed");
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
                    tracing::debug!(%peer, "TLS handshake timed out");
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
