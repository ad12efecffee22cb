//! The HTTP edge over real TLS: plain HTTP on the TLS port, bodies over the
//! limit from clients that write them whole before reading, the count of
//! every answer, and bodies that are JSON but not of a review's shape.

mod common;

use bytes::Bytes;
use common::*;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

const LIMIT_MESSAGE: &str = "request body exceeds the limit of 3145728 bytes (--max-body-bytes)\n";

/// 4 MiB, over the default limit of 3 MiB (the apiserver's own).
const OVERSIZED: usize = 4 * 1024 * 1024;

/// Reads one HTTP/1.1 response with a Content-Length: head and body.
async fn read_response(io: &mut (impl AsyncRead + Unpin)) -> (String, String) {
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = io.read(&mut buf).await.unwrap();
        assert!(
            n > 0,
            "connection closed mid-head: {:?}",
            String::from_utf8_lossy(&bytes)
        );
        bytes.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&bytes[..head_end]).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length: ")
                .map(str::to_owned)
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Content-Length in {head}"));
    while bytes.len() < head_end + length {
        let n = io.read(&mut buf).await.unwrap();
        assert!(n > 0, "connection closed mid-body");
        bytes.extend_from_slice(&buf[..n]);
    }
    let body = String::from_utf8_lossy(&bytes[head_end..head_end + length]).into_owned();
    (head, body)
}

#[tokio::test]
async fn plain_http_to_the_tls_port_gets_a_400_saying_the_port_speaks_https() {
    let server = Server::start(&[]);
    let mut tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    tcp.write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    tcp.read_to_end(&mut answer).await.unwrap();
    assert_eq!(
        String::from_utf8_lossy(&answer),
        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: 48\r\nConnection: close\r\n\r\n\
         Client sent an HTTP request to an HTTPS server.\n"
    );
    // TLS clients on the same port are unaffected.
    let mut client = H1::connect(server.addr, &server.ca()).await;
    let reply = client
        .send(request("GET", "/readyz", None, Vec::new()))
        .await;
    assert_eq!((reply.status, reply.text()), (200, "ok\n".to_owned()));
}

#[tokio::test]
async fn http1_client_that_writes_an_oversized_body_before_reading_gets_the_413() {
    let server = Server::start(&[]);
    let mut tls = connect(server.addr, &server.ca(), &[b"http/1.1"]).await;
    let head = format!(
        "POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {OVERSIZED}\r\n\r\n"
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    // All of it, before reading a byte: a reset connection fails this write.
    tls.write_all(&vec![b' '; OVERSIZED]).await.unwrap();
    tls.flush().await.unwrap();
    let (head, body) = read_response(&mut tls).await;
    assert!(
        head.starts_with("HTTP/1.1 413 Payload Too Large\r\n"),
        "{head}"
    );
    assert_eq!(body, LIMIT_MESSAGE);
    // The body was read to its end, so the connection is still good.
    let review = fixture("vpa-node-exporter-update.validate.json");
    let next = format!(
        "POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        review.len()
    );
    tls.write_all(next.as_bytes()).await.unwrap();
    tls.write_all(&review).await.unwrap();
    let (head, _) = read_response(&mut tls).await;
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
}

#[tokio::test]
async fn http1_chunked_body_over_the_limit_written_whole_gets_the_413() {
    let server = Server::start(&[]);
    let mut tls = connect(server.addr, &server.ca(), &[b"http/1.1"]).await;
    let mut raw = b"POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
    // Four times the other tests' size: the part past the limit must be
    // more than the socket buffers absorb, or an unread rest goes unnoticed.
    let chunk = vec![b' '; 64 * 1024];
    for _ in 0..4 * OVERSIZED / chunk.len() {
        raw.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        raw.extend_from_slice(&chunk);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    tls.write_all(&raw).await.unwrap();
    let (head, body) = read_response(&mut tls).await;
    assert!(
        head.starts_with("HTTP/1.1 413 Payload Too Large\r\n"),
        "{head}"
    );
    assert_eq!(body, LIMIT_MESSAGE);
}

/// A body in 64 KiB chunks that records when its last chunk was taken.
/// hyper's HTTP/2 client takes a chunk only when the stream's flow-control
/// window has room, so the last one is taken only if the server read the
/// ones before it.
struct Chunks {
    left: usize,
    sent_all: Arc<AtomicBool>,
}

impl Body for Chunks {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let n = self.left.min(64 * 1024);
        self.left -= n;
        if self.left == 0 {
            self.sent_all.store(true, Ordering::SeqCst);
        }
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![b' '; n])))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }
}

#[tokio::test]
async fn http2_client_that_sends_an_oversized_body_before_reading_gets_the_413() {
    let server = Server::start(&[]);
    let tls = connect(server.addr, &server.ca(), &[b"h2"]).await;
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let sent_all = Arc::new(AtomicBool::new(false));
    let request = hyper::Request::builder()
        .method("POST")
        .uri("https://localhost/validate")
        .header("content-type", "application/json")
        .header("content-length", OVERSIZED)
        .body(Chunks {
            left: OVERSIZED,
            sent_all: sent_all.clone(),
        })
        .unwrap();
    sender.ready().await.unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    // A stream reset (the old answer) fails here instead of giving a body.
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(
        (status, String::from_utf8_lossy(&body).into_owned()),
        (413, LIMIT_MESSAGE.to_owned())
    );
    assert!(
        sent_all.load(Ordering::SeqCst),
        "answered before the client could send its whole body"
    );
}

/// The value of the metrics line that starts with `prefix`.
fn metric(text: &str, prefix: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .map(|v| v.trim().to_owned())
}

#[tokio::test]
async fn every_refusal_is_counted_with_its_handler_and_code() {
    let server = Server::start(&["--max-body-bytes", "1024"]);
    let mut client = H1::connect(server.addr, &server.ca()).await;
    let refusals = [
        (request("GET", "/mutate", None, Vec::new()), 405),
        (
            request("POST", "/admit", Some("application/json"), b"{}".to_vec()),
            404,
        ),
        (
            request("POST", "/validate", Some("text/plain"), b"{}".to_vec()),
            415,
        ),
        (
            request(
                "POST",
                "/mutate",
                Some("application/json"),
                vec![b' '; 4096],
            ),
            413,
        ),
        (
            request(
                "POST",
                "/validate",
                Some("application/json"),
                b"[]".to_vec(),
            ),
            400,
        ),
    ];
    for (req, want) in refusals {
        assert_eq!(client.send(req).await.status, want);
    }
    let mut tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    tcp.write_all(b"POST /mutate HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    tcp.read_to_end(&mut Vec::new()).await.unwrap();

    let text = client
        .send(request("GET", "/metrics", None, Vec::new()))
        .await
        .text();
    for (labels, want) in [
        (r#"handler="mutate",code="405""#, "1"),
        (r#"handler="other",code="404""#, "1"),
        (r#"handler="validate",code="415""#, "1"),
        (r#"handler="mutate",code="413""#, "1"),
        (r#"handler="validate",code="400""#, "1"),
        (r#"handler="other",code="400""#, "1"),
    ] {
        let line = format!("nodescope_http_responses_total{{{labels}}} ");
        assert_eq!(
            metric(&text, &line).as_deref(),
            Some(want),
            "{line}\n{text}"
        );
    }
    // The review that was no review is also an admission error, as before.
    assert_eq!(
        metric(
            &text,
            r#"nodescope_admission_requests_total{webhook="validate",operation="other",resource="other",result="error"} "#
        )
        .as_deref(),
        Some("1"),
        "{text}"
    );
}

async fn post(body: &str, path: &str) -> Reply {
    let server = Server::start(&[]);
    let mut client = H1::connect(server.addr, &server.ca()).await;
    client.post(path, body.as_bytes().to_vec()).await
}

#[tokio::test]
async fn a_json_array_posted_as_a_review_is_a_400_saying_an_object_was_expected() {
    for path in ["/mutate", "/validate"] {
        let reply = post("[]", path).await;
        assert_eq!(
            (reply.status, reply.text()),
            (400, "request body is not an AdmissionReview: invalid type: array, expected an object at line 1 column 2\n".to_owned()),
            "{path}"
        );
    }
}

#[tokio::test]
async fn a_request_of_the_wrong_shape_is_a_400_naming_the_field() {
    let envelope = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":"#;
    for (request, want) in [
        (
            "[]}",
            "request: invalid type: array, expected an object at line 1 column 73",
        ),
        (
            r#"{"uid":5,"operation":"CREATE"}}"#,
            "request.uid: invalid type: integer `5`, expected a string at line 1 column 79",
        ),
        (
            r#"{"uid":"u","operation":"CREATE","kind":null}}"#,
            "request.kind: invalid type: null, expected an object at line 1 column 114",
        ),
    ] {
        let reply = post(&format!("{envelope}{request}"), "/validate").await;
        assert_eq!(
            (reply.status, reply.text()),
            (
                400,
                format!("request body is not an AdmissionReview: {want}\n")
            ),
        );
    }
    // `"request": null` is a review without a request.
    let reply = post(&format!("{envelope}null}}"), "/mutate").await;
    assert_eq!(
        (reply.status, reply.text()),
        (400, "AdmissionReview has no request\n".to_owned())
    );
}
