//! Test harness: runs the real `nodescope` binary on an ephemeral loopback
//! port with certificates made by `nodescope certs`, and talks to it over
//! real TLS with hyper's client connections.
#![allow(dead_code)]

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

pub const BIN: &str = env!("CARGO_BIN_EXE_nodescope");

/// What a caught panic said: its `String` or `&str` payload.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/admission-reviews")
}

pub fn fixture(name: &str) -> Vec<u8> {
    let path = fixtures_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs `nodescope certs` into `dir`.
pub fn make_certs(dir: &Path) {
    let out = Command::new(BIN)
        .args([
            "certs",
            "--host",
            "localhost",
            "--host",
            "127.0.0.1",
            "--out",
        ])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `nodescope args...` in `dir` to completion.
pub fn run_in(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub metrics_addr: Option<SocketAddr>,
    pub certs: tempfile::TempDir,
    stderr_lines: std::sync::mpsc::Receiver<String>,
}

impl Server {
    /// Starts the server with `args` added to the TLS and listen flags.
    pub fn start(args: &[&str]) -> Self {
        let certs = tempfile::tempdir().unwrap();
        make_certs(certs.path());
        Self::start_with_certs(certs, args)
    }

    pub fn start_with_certs(certs: tempfile::TempDir, args: &[&str]) -> Self {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut defaults = Vec::new();
        if !args.iter().any(|a| a.starts_with("--store")) {
            defaults.push(format!(
                "--store=file:{}",
                root.join("examples/store").display()
            ));
        }
        if !args.iter().any(|a| a.starts_with("--policies")) {
            defaults.push(format!("--policies={}", root.join("policies").display()));
        }
        let mut child = Command::new(BIN)
            .arg("serve")
            .args(&defaults)
            .args([
                "--listen",
                "127.0.0.1:0",
                "--log-format",
                "json",
                "--tls-reload-interval",
                "1",
            ])
            .arg("--tls-cert")
            .arg(certs.path().join("tls.crt"))
            .arg("--tls-key")
            .arg(certs.path().join("tls.key"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut addr = None;
        let mut metrics_addr = None;
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while addr.is_none() {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
                .unwrap_or_else(|_| panic!("server did not report its address"));
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            let msg = v["fields"]["message"].as_str().unwrap_or_default();
            if msg == "listening" {
                addr = v["fields"]["addr"].as_str().and_then(|a| a.parse().ok());
            }
            if msg == "serving probes and metrics over plain HTTP" {
                let logged = v["fields"]["addr"].as_str().unwrap_or_default();
                let parsed = logged.parse().unwrap_or_else(|_| {
                    panic!("metrics listener logged {logged:?}, not an address")
                });
                metrics_addr = Some(parsed);
            }
        }
        Self {
            child,
            addr: addr.unwrap(),
            metrics_addr,
            certs,
            stderr_lines: rx,
        }
    }

    pub fn ca(&self) -> Vec<u8> {
        std::fs::read(self.certs.path().join("ca.crt")).unwrap()
    }

    /// Stderr lines printed so far.
    pub fn logs(&self) -> Vec<String> {
        self.stderr_lines.try_iter().collect()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn sigterm(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    /// Waits for the process to exit and returns its exit code.
    pub fn wait(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            if std::time::Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn tls_connector(ca_pem: &[u8], alpn: &[&[u8]]) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    TlsConnector::from(Arc::new(config))
}

/// A TLS connection to the server, verified against its CA.
pub async fn connect(addr: SocketAddr, ca_pem: &[u8], alpn: &[&[u8]]) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    tls_connector(ca_pem, alpn)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap()
}

pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

pub fn request(
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> hyper::Request<Full<Bytes>> {
    let mut builder = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost");
    if let Some(ct) = content_type {
        builder = builder.header("content-type", ct);
    }
    builder.body(Full::new(Bytes::from(body))).unwrap()
}

async fn read_reply(response: hyper::Response<hyper::body::Incoming>) -> Reply {
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    Reply {
        status,
        content_type,
        body,
    }
}

/// An HTTP/1.1 keep-alive client on one TLS connection.
pub struct H1 {
    pub sender: http1::SendRequest<Full<Bytes>>,
}

impl H1 {
    pub async fn connect(addr: SocketAddr, ca_pem: &[u8]) -> Self {
        let tls = connect(addr, ca_pem, &[b"http/1.1"]).await;
        Self::over(tls).await
    }

    pub async fn over(tls: TlsStream<TcpStream>) -> Self {
        let (sender, conn) = http1::handshake(TokioIo::new(tls)).await.unwrap();
        tokio::spawn(conn);
        Self { sender }
    }

    pub async fn send(&mut self, req: hyper::Request<Full<Bytes>>) -> Reply {
        self.sender.ready().await.unwrap();
        read_reply(self.sender.send_request(req).await.unwrap()).await
    }

    pub async fn post(&mut self, path: &str, body: Vec<u8>) -> Reply {
        self.send(request("POST", path, Some("application/json"), body))
            .await
    }
}

/// An HTTP/2 client on one TLS connection.
pub struct H2 {
    pub sender: http2::SendRequest<Full<Bytes>>,
}

impl H2 {
    pub async fn connect(addr: SocketAddr, ca_pem: &[u8]) -> Self {
        let tls = connect(addr, ca_pem, &[b"h2"]).await;
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        let (sender, conn) = http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(conn);
        Self { sender }
    }

    pub async fn post(&mut self, path: &str, body: Vec<u8>) -> Reply {
        self.sender.ready().await.unwrap();
        let req = hyper::Request::builder()
            .method("POST")
            .uri(format!("https://localhost{path}"))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        read_reply(self.sender.send_request(req).await.unwrap()).await
    }
}
