//! Server lifecycle over real TLS: certificate hot reload (plain file
//! replacement and Secret-volume symlink swaps), graceful drain on SIGTERM,
//! and flat memory under a stream of malformed requests.

mod common;

use common::*;
use rustls::pki_types::ServerName;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Tries a fresh handshake trusting only `ca_pem`.
async fn handshake_ok(addr: std::net::SocketAddr, ca_pem: &[u8]) -> bool {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tls_connector(ca_pem, &[b"http/1.1"])
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .is_ok()
}

async fn wait_for_handshake(addr: std::net::SocketAddr, ca_pem: &[u8]) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if handshake_ok(addr, ca_pem).await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

async fn metric(client: &mut H1, line_prefix: &str) -> Option<f64> {
    let reply = client
        .send(request("GET", "/metrics", None, Vec::new()))
        .await;
    reply
        .text()
        .lines()
        .find_map(|l| l.strip_prefix(line_prefix))
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test]
async fn replaced_certificate_is_served_to_new_handshakes_while_old_connections_live() {
    let server = Server::start(&[]);
    let old_ca = server.ca();
    let mut kept = H1::connect(server.addr, &old_ca).await;
    assert_eq!(
        kept.post(
            "/mutate",
            fixture("pod-node-exporter-node-a-1-create.mutate.json")
        )
        .await
        .status,
        200
    );

    let fresh = tempfile::tempdir().unwrap();
    make_certs(fresh.path());
    let new_ca = std::fs::read(fresh.path().join("ca.crt")).unwrap();
    let dir = server.certs.path();

    // Half a pair: the new certificate with the old key must not be served.
    std::fs::copy(fresh.path().join("tls.crt"), dir.join("tls.crt")).unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        handshake_ok(server.addr, &old_ca).await,
        "a mismatched pair replaced the good one"
    );
    assert!(!handshake_ok(server.addr, &new_ca).await);

    std::fs::copy(fresh.path().join("tls.key"), dir.join("tls.key")).unwrap();
    assert!(
        wait_for_handshake(server.addr, &new_ca).await,
        "new certificate never served"
    );
    assert!(
        !handshake_ok(server.addr, &old_ca).await,
        "old certificate still served"
    );

    // The connection opened before the swap still answers.
    let reply = kept
        .post(
            "/mutate",
            fixture("pod-node-exporter-node-a-1-create.mutate.json"),
        )
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        metric(&mut kept, "nodescope_tls_reloads_total{result=\"success\"}").await,
        Some(1.0)
    );
    assert_eq!(
        metric(&mut kept, "nodescope_tls_reloads_total{result=\"failure\"}").await,
        Some(1.0)
    );
    let logs = server.logs().join("\n");
    assert!(logs.contains("reloaded TLS certificate"), "{logs}");
    assert!(logs.contains("does not match the certificate"), "{logs}");
}

/// Lays out `dir` like a Kubernetes Secret volume: `tls.crt -> ..data/tls.crt`,
/// `..data -> <timestamped dir>`.
fn secret_volume(dir: &Path, source: &Path, generation: &str) {
    let target = dir.join(generation);
    std::fs::create_dir_all(&target).unwrap();
    for f in ["tls.crt", "tls.key", "ca.crt"] {
        std::fs::copy(source.join(f), target.join(f)).unwrap();
    }
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(generation, &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    for f in ["tls.crt", "tls.key", "ca.crt"] {
        let link = dir.join(f);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(format!("..data/{f}"), &link).unwrap();
        }
    }
}

#[tokio::test]
async fn secret_volume_symlink_swap_is_picked_up() {
    let first = tempfile::tempdir().unwrap();
    make_certs(first.path());
    let volume = tempfile::tempdir().unwrap();
    secret_volume(volume.path(), first.path(), "..2026_11_22_01_00_00.1");
    // Server::start_with_certs reads <dir>/tls.crt and <dir>/tls.key.
    let server = Server::start_with_certs(volume, &[]);
    let old_ca = std::fs::read(first.path().join("ca.crt")).unwrap();
    assert!(handshake_ok(server.addr, &old_ca).await);

    let second = tempfile::tempdir().unwrap();
    make_certs(second.path());
    secret_volume(
        server.certs.path(),
        second.path(),
        "..2026_11_22_02_00_00.2",
    );
    let new_ca = std::fs::read(second.path().join("ca.crt")).unwrap();
    assert!(
        wait_for_handshake(server.addr, &new_ca).await,
        "symlink swap not picked up"
    );
}

#[tokio::test]
async fn sigterm_drains_an_in_flight_review_then_exits_zero() {
    let mut server = Server::start(&[]);
    let mut tls = connect(server.addr, &server.ca(), &[b"http/1.1"]).await;
    let body = fixture("pod-node-exporter-node-a-1-create.mutate.json");
    let head = format!(
        "POST /mutate?timeout=10s HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    let (first, rest) = body.split_at(body.len() / 2);
    tls.write_all(first).await.unwrap();
    tls.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    server.sigterm();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // New connections are refused once shutdown began.
    assert!(
        tokio::net::TcpStream::connect(server.addr).await.is_err(),
        "still accepting after SIGTERM"
    );

    tls.write_all(rest).await.unwrap();
    tls.flush().await.unwrap();
    let mut response = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut response)).await;
    let text = String::from_utf8_lossy(&response);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        text.contains("\"uid\":\"a57ecc51-d588-46d6-890a-6ea6e77bab66\""),
        "{text}"
    );
    assert_eq!(server.wait(Duration::from_secs(15)), Some(0));
}

#[tokio::test]
async fn memory_stays_flat_across_ten_thousand_malformed_requests() {
    let server = Server::start(&[]);
    let ca = server.ca();
    let bad: Vec<(Option<&str>, Vec<u8>)> = vec![
        (Some("application/json"), b"not json".to_vec()),
        (Some("application/json"), br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec()),
        (Some("application/json"), br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}"#.to_vec()),
        (Some("application/json"), format!("{{\"a\":{}", "[".repeat(5000)).into_bytes()),
        (Some("text/plain"), b"{}".to_vec()),
        (Some("application/json"), vec![0xff, 0xfe, 0x00]),
    ];
    let mut client = H1::connect(server.addr, &ca).await;
    let send = |i: usize| {
        let (ct, body) = bad[i % bad.len()].clone();
        request(
            "POST",
            if i % 2 == 0 { "/mutate" } else { "/validate" },
            ct,
            body,
        )
    };
    for i in 0..1_000 {
        let r = client.send(send(i)).await;
        assert!(r.status == 400 || r.status == 415, "{}", r.status);
    }
    let before = server.rss_kib();
    for i in 0..10_000 {
        let r = client.send(send(i)).await;
        assert!(r.status == 400 || r.status == 415, "{}", r.status);
    }
    let after = server.rss_kib();
    assert!(
        after <= before + 8 * 1024,
        "RSS grew from {before} KiB to {after} KiB over 10,000 malformed requests"
    );
}
