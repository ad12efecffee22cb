//! Refusals that come before the body is read (no route, wrong method,
//! wrong Content-Type) reach a client that sends a large body before it
//! reads, over HTTP/2 and HTTP/1.1, as the 413 does: every answer, every
//! time, on one connection.

mod common;

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};

/// 5 MiB: more than the stream and connection windows and the socket
/// buffers hold, so an unread rest cannot go unnoticed.
const BODY: usize = 5 * 1024 * 1024;

/// Rounds per refusal and protocol; each sends the whole body.
const ROUNDS: usize = 100;

const ADMISSION_ROUTES: &str =
    "POST /mutate, POST /validate, GET /healthz, GET /readyz, GET /metrics";

/// One refusal: method, path, Content-Type, and the answer it must get.
struct Case {
    method: &'static str,
    path: &'static str,
    content_type: &'static str,
    status: u16,
    text: String,
}

fn cases() -> [Case; 3] {
    [
        Case {
            method: "POST",
            path: "/admit",
            content_type: "application/json",
            status: 404,
            text: format!("no route for /admit: this port serves {ADMISSION_ROUTES}\n"),
        },
        Case {
            method: "PUT",
            path: "/validate",
            content_type: "application/json",
            status: 405,
            text: "method PUT is not allowed on /validate: admission reviews are POSTed, probes and metrics use GET\n".to_owned(),
        },
        Case {
            method: "POST",
            path: "/mutate",
            content_type: "text/plain",
            status: 415,
            text: "Content-Type must be application/json, got text/plain\n".to_owned(),
        },
    ]
}

fn build(case: &Case, authority: &str, body: &Bytes) -> hyper::Request<Full<Bytes>> {
    hyper::Request::builder()
        .method(case.method)
        .uri(format!("{authority}{}", case.path))
        .header("host", "localhost")
        .header("content-type", case.content_type)
        .body(Full::new(body.clone()))
        .unwrap()
}

async fn answer(
    response: Result<hyper::Response<hyper::body::Incoming>, hyper::Error>,
    what: &str,
) -> (u16, String) {
    let response = response.unwrap_or_else(|e| panic!("{what}: no answer: {e:?}"));
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{what}: the answer's body was lost: {e:?}"))
        .to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_refusals_of_5_mib_bodies_reach_the_client_every_time() {
    let server = Server::start(&[]);
    let tls = connect(server.addr, &server.ca(), &[b"h2"]).await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, conn) = http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    let body = Bytes::from(vec![b' '; BODY]);
    for case in cases() {
        for round in 0..ROUNDS {
            let what = format!("HTTP/2 {} {} round {round}", case.method, case.path);
            sender.ready().await.unwrap();
            let response = sender
                .send_request(build(&case, "https://localhost", &body))
                .await;
            assert_eq!(
                answer(response, &what).await,
                (case.status, case.text.clone()),
                "{what}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_refusals_of_5_mib_bodies_reach_the_client_every_time() {
    let server = Server::start(&[]);
    let tls = connect(server.addr, &server.ca(), &[b"http/1.1"]).await;
    let (mut sender, conn) = http1::handshake(TokioIo::new(tls)).await.unwrap();
    tokio::spawn(conn);
    let body = Bytes::from(vec![b' '; BODY]);
    for case in cases() {
        for round in 0..ROUNDS {
            let what = format!("HTTP/1.1 {} {} round {round}", case.method, case.path);
            // One connection throughout: each refusal read the body to its
            // end, so the connection stays usable.
            sender
                .ready()
                .await
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let response = sender.send_request(build(&case, "", &body)).await;
            assert_eq!(
                answer(response, &what).await,
                (case.status, case.text.clone()),
                "{what}"
            );
        }
    }
}
