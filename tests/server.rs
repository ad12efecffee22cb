//! The webhook server over real TLS: wire format on the captured reviews,
//! HTTP/1.1 keep-alive and HTTP/2, bad input, certificate reload, shutdown.

mod common;

use common::*;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn route_for(file: &str) -> &'static str {
    if file.ends_with(".mutate.json") {
        "/mutate"
    } else {
        "/validate"
    }
}

#[tokio::test]
async fn every_captured_review_gets_a_v1_response_echoing_its_uid() {
    let server = Server::start(&[]);
    let mut client = H1::connect(server.addr, &server.ca()).await;
    let mut seen = 0;
    let mut entries: Vec<_> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".json") {
            continue;
        }
        let body = std::fs::read(&path).unwrap();
        let sent: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let reply = client.post(route_for(&name), body).await;
        assert_eq!(reply.status, 200, "{name}: {}", reply.text());
        assert_eq!(reply.content_type, "application/json", "{name}");
        let v = reply.json();
        assert_eq!(v["apiVersion"], "admission.k8s.io/v1", "{name}");
        assert_eq!(v["kind"], "AdmissionReview", "{name}");
        assert_eq!(v["response"]["uid"], sent["request"]["uid"], "{name}");
        assert!(v["response"]["allowed"].is_boolean(), "{name}");
        seen += 1;
    }
    assert_eq!(seen, 24, "expected all 24 captured reviews");
}

#[tokio::test]
async fn http1_keep_alive_serves_many_reviews_on_one_connection() {
    let server = Server::start(&[]);
    let tls = connect(server.addr, &server.ca(), &[b"http/1.1"]).await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    let mut client = H1::over(tls).await;
    for i in 0..50 {
        let reply = client
            .post(
                "/mutate?timeout=10s",
                fixture("pod-node-exporter-node-a-1-create.mutate.json"),
            )
            .await;
        assert_eq!(reply.status, 200, "request {i}");
        assert_eq!(
            reply.json()["response"]["uid"],
            "a57ecc51-d588-46d6-890a-6ea6e77bab66"
        );
    }
}

#[tokio::test]
async fn http2_multiplexes_reviews_on_one_connection() {
    let server = Server::start(&[]);
    let client = H2::connect(server.addr, &server.ca()).await;
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let mut c = H2 {
            sender: client.sender.clone(),
        };
        tasks.push(tokio::spawn(async move {
            c.post(
                "/validate?timeout=10s",
                fixture("pod-node-balloon-create.validate.json"),
            )
            .await
        }));
    }
    for t in tasks {
        let reply = t.await.unwrap();
        assert_eq!(reply.status, 200);
        assert_eq!(reply.json()["apiVersion"], "admission.k8s.io/v1");
    }
}

async fn post_raw(content_type: Option<&str>, path: &str, body: Vec<u8>, args: &[&str]) -> Reply {
    let server = Server::start(args);
    let mut client = H1::connect(server.addr, &server.ca()).await;
    client.send(request("POST", path, content_type, body)).await
}

#[tokio::test]
async fn non_json_body_is_a_400_saying_so() {
    let reply = post_raw(Some("application/json"), "/mutate", b"hello".to_vec(), &[]).await;
    assert_eq!(reply.status, 400);
    assert!(
        reply
            .text()
            .starts_with("request body is not valid JSON: expected value at line 1 column 1"),
        "{}",
        reply.text()
    );
}

#[tokio::test]
async fn json_that_is_not_a_review_is_a_400_naming_the_problem() {
    let reply = post_raw(
        Some("application/json"),
        "/validate",
        br#"{"hello":"world"}"#.to_vec(),
        &[],
    )
    .await;
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.text(),
        "unsupported apiVersion \"\": expected admission.k8s.io/v1 (or v1beta1)\n"
    );
}

#[tokio::test]
async fn review_of_the_wrong_kind_is_a_400() {
    let body =
        br#"{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"u"}}"#.to_vec();
    let reply = post_raw(Some("application/json"), "/validate", body, &[]).await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.text(), "kind is \"Pod\": expected AdmissionReview\n");
}

#[tokio::test]
async fn v1beta1_review_is_answered_in_kind() {
    let mut v: serde_json::Value =
        serde_json::from_slice(&fixture("vpa-node-exporter-update.validate.json")).unwrap();
    v["apiVersion"] = "admission.k8s.io/v1beta1".into();
    let reply = post_raw(
        Some("application/json"),
        "/validate",
        serde_json::to_vec(&v).unwrap(),
        &[],
    )
    .await;
    assert_eq!(reply.status, 200);
    let out = reply.json();
    assert_eq!(out["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(out["response"]["uid"], v["request"]["uid"]);
}

#[tokio::test]
async fn review_without_request_is_a_400() {
    let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec();
    let reply = post_raw(Some("application/json"), "/mutate", body, &[]).await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.text(), "AdmissionReview has no request\n");
}

#[tokio::test]
async fn review_without_uid_is_a_400() {
    let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}"#.to_vec();
    let reply = post_raw(Some("application/json"), "/mutate", body, &[]).await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.text(), "AdmissionReview request has no uid\n");
}

#[tokio::test]
async fn wrong_content_type_is_a_415() {
    let reply = post_raw(
        Some("text/plain"),
        "/mutate",
        fixture("pod-node-exporter-node-a-1-create.mutate.json"),
        &[],
    )
    .await;
    assert_eq!(reply.status, 415);
    assert_eq!(
        reply.text(),
        "Content-Type must be application/json, got text/plain\n"
    );
}

#[tokio::test]
async fn missing_content_type_is_a_415() {
    let reply = post_raw(None, "/validate", b"{}".to_vec(), &[]).await;
    assert_eq!(reply.status, 415);
    assert_eq!(
        reply.text(),
        "Content-Type must be application/json, got none\n"
    );
}

#[tokio::test]
async fn body_over_the_limit_is_a_413_naming_the_limit_and_the_flag() {
    let reply = post_raw(
        Some("application/json"),
        "/mutate",
        vec![b' '; 4096],
        &["--max-body-bytes", "1024"],
    )
    .await;
    assert_eq!(reply.status, 413);
    assert_eq!(
        reply.text(),
        "request body exceeds the limit of 1024 bytes (--max-body-bytes)\n"
    );
}

#[tokio::test]
async fn chunked_body_over_the_limit_is_a_413() {
    let server = Server::start(&["--max-body-bytes", "1024"]);
    let mut tls = connect(server.addr, &server.ca(), &[b"http/1.1"]).await;
    let chunk = vec![b' '; 800];
    let mut raw = b"POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..3 {
        raw.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        raw.extend_from_slice(&chunk);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    tls.write_all(&raw).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tls.read(&mut buf).await.unwrap();
    let head = String::from_utf8_lossy(&buf[..n]);
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    assert!(
        head.contains("request body exceeds the limit of 1024 bytes"),
        "{head}"
    );
}

#[tokio::test]
async fn deeply_nested_unterminated_json_is_a_400_and_the_server_lives_on() {
    let server = Server::start(&[]);
    let mut client = H1::connect(server.addr, &server.ca()).await;
    let mut body = String::from(
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","object":"#,
    );
    body.push_str(&"[".repeat(200_000));
    let reply = client.post("/validate", body.into_bytes()).await;
    assert_eq!(reply.status, 400);
    assert!(
        reply.text().starts_with(
            "request body is not valid JSON: EOF while parsing a list at line 1 column 200"
        ),
        "{}",
        reply.text()
    );
    let reply = client
        .post(
            "/validate",
            fixture("vpa-node-exporter-update.validate.json"),
        )
        .await;
    assert_eq!(reply.status, 200);
}

#[tokio::test]
async fn get_on_mutate_is_a_405() {
    let server = Server::start(&[]);
    let mut client = H1::connect(server.addr, &server.ca()).await;
    let reply = client
        .send(request("GET", "/mutate", None, Vec::new()))
        .await;
    assert_eq!(reply.status, 405);
    assert_eq!(reply.text(), "method GET is not allowed on /mutate: admission reviews are POSTed, probes and metrics use GET\n");
}

#[tokio::test]
async fn unknown_path_is_a_404_listing_the_routes() {
    let server = Server::start(&[]);
    let mut client = H1::connect(server.addr, &server.ca()).await;
    let reply = client.post("/admit", b"{}".to_vec()).await;
    assert_eq!(reply.status, 404);
    assert_eq!(reply.text(), "no route for /admit: this port serves POST /mutate, POST /validate, GET /healthz, GET /readyz, GET /metrics\n");
}

#[tokio::test]
async fn tls_client_that_sends_nothing_is_disconnected_after_the_handshake_timeout() {
    let server = Server::start(&["--handshake-timeout", "1"]);
    let mut tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut buf)).await;
    assert!(
        matches!(read, Ok(Ok(0)) | Ok(Err(_))),
        "server kept a silent connection open: {read:?}"
    );
}

#[tokio::test]
async fn idle_connection_after_handshake_is_closed_after_the_idle_timeout() {
    let server = Server::start(&["--idle-timeout", "1"]);
    let mut tls = connect(server.addr, &server.ca(), &[b"http/1.1"]).await;
    let mut buf = [0u8; 256];
    let read = tokio::time::timeout(Duration::from_secs(10), tls.read(&mut buf)).await;
    let closed = match read {
        Ok(Ok(0)) | Ok(Err(_)) => true,
        // hyper answers a header timeout with a 408 before closing.
        Ok(Ok(n)) => String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 408"),
        Err(_) => false,
    };
    assert!(closed, "idle connection was not closed: {read:?}");
}

#[tokio::test]
async fn health_readiness_and_metrics_answer_on_both_listeners() {
    let server = Server::start(&["--metrics-listen", "127.0.0.1:0"]);
    let mut client = H1::connect(server.addr, &server.ca()).await;
    let r = client
        .post(
            "/mutate",
            fixture("pod-node-exporter-node-a-1-create.mutate.json"),
        )
        .await;
    assert_eq!(r.status, 200);
    for path in ["/healthz", "/readyz"] {
        let reply = client.send(request("GET", path, None, Vec::new())).await;
        assert_eq!(
            (reply.status, reply.text()),
            (200, "ok\n".to_owned()),
            "{path}"
        );
    }
    let reply = client
        .send(request("GET", "/metrics", None, Vec::new()))
        .await;
    assert_eq!(reply.status, 200);
    let text = reply.text();
    assert!(text.contains("nodescope_admission_requests_total{webhook=\"mutate\",operation=\"CREATE\",resource=\"pods\",result=\"patched\"} 1"), "{text}");
    assert!(text.contains("nodescope_admission_duration_seconds_bucket{le=\"0.00005\",webhook=\"mutate\",operation=\"CREATE\",resource=\"pods\"}") || text.contains("nodescope_admission_duration_seconds_bucket{webhook=\"mutate\""), "{text}");
    assert!(
        text.contains(&format!(
            "nodescope_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        )),
        "{text}"
    );

    let plain = server.metrics_addr.expect("metrics listener address");
    let tcp = tokio::net::TcpStream::connect(plain).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .unwrap();
    tokio::spawn(conn);
    let resp = sender
        .send_request(request("GET", "/readyz", None, Vec::new()))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = sender
        .send_request(request(
            "POST",
            "/mutate",
            Some("application/json"),
            b"{}".to_vec(),
        ))
        .await
        .unwrap();
    assert_eq!(
        resp.status(),
        404,
        "admission routes must not be served over plain HTTP"
    );
}

/// A captured review with a few bytes overwritten and maybe truncated.
fn damaged_fixture() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
    use proptest::prelude::*;
    let body = fixture("pod-node-exporter-node-a-1-create.mutate.json");
    let len = body.len();
    (prop::collection::vec((0..len, any::<u8>()), 0..6), 0..=len).prop_map(move |(writes, keep)| {
        let mut body = body.clone();
        for (at, byte) in writes {
            body[at] = byte;
        }
        body.truncate(keep.max(len / 2));
        body
    })
}

#[test]
fn any_body_posted_to_mutate_gets_an_http_answer_on_the_same_connection() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = Server::start(&[]);
    let client = std::cell::RefCell::new(runtime.block_on(H1::connect(server.addr, &server.ca())));
    let bodies = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..2048),
        damaged_fixture()
    ];
    let mut runner = TestRunner::new(Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&bodies, |body| {
            // A dropped connection or a panic in the server fails `send`.
            let reply = runtime.block_on(client.borrow_mut().post("/mutate", body));
            prop_assert!(
                reply.status == 200 || reply.status == 400,
                "status {}: {}",
                reply.status,
                reply.text()
            );
            prop_assert!(!reply.body.is_empty());
            Ok(())
        })
        .unwrap();
    // The one connection served every case.
    let reply = runtime.block_on(client.borrow_mut().post(
        "/mutate",
        fixture("pod-node-exporter-node-a-1-create.mutate.json"),
    ));
    assert_eq!(reply.status, 200);
}

#[tokio::test]
async fn object_of_an_unexpected_kind_on_mutate_is_allowed_unchanged() {
    let server = Server::start(&[]);
    let mut client = H1::connect(server.addr, &server.ca()).await;
    // A VerticalPodAutoscaler review sent to the pod-only mutating route.
    let reply = client
        .post(
            "/mutate",
            fixture("vpa-node-exporter-daemonset-node-scope-create.mutate.json"),
        )
        .await;
    assert_eq!(reply.status, 200);
    let sent: serde_json::Value = serde_json::from_slice(&fixture(
        "vpa-node-exporter-daemonset-node-scope-create.mutate.json",
    ))
    .unwrap();
    assert_eq!(
        reply.json()["response"],
        serde_json::json!({"uid": sent["request"]["uid"], "allowed": true})
    );
}

#[tokio::test]
async fn pod_review_whose_object_is_not_a_pod_gets_a_warning_naming_it() {
    let server = Server::start(&[]);
    let mut client = H1::connect(server.addr, &server.ca()).await;
    let mut v: serde_json::Value =
        serde_json::from_slice(&fixture("pod-node-exporter-node-a-1-create.mutate.json")).unwrap();
    v["request"]["object"] = serde_json::json!(["not", "a", "pod"]);
    let reply = client
        .post("/mutate", serde_json::to_vec(&v).unwrap())
        .await;
    assert_eq!(reply.status, 200);
    let response = reply.json()["response"].clone();
    assert_eq!(response["allowed"], true);
    assert_eq!(
        response["warnings"],
        serde_json::json!(["nodescope: cannot read Pod/monitoring/<generated>: admission request object is not a readable Pod: invalid type: array, expected an object at line 1 column 1; left unchanged"])
    );
    // A field of the wrong type is named by its path.
    v["request"]["object"] = serde_json::json!({"metadata": {"labels": []}});
    let reply = client
        .post("/mutate", serde_json::to_vec(&v).unwrap())
        .await;
    assert_eq!(
        reply.json()["response"]["warnings"],
        serde_json::json!(["nodescope: cannot read Pod/monitoring/<generated>: admission request object is not a readable Pod: metadata.labels: invalid type: array, expected an object at line 1 column 24; left unchanged"])
    );
}
