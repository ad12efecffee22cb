//! A one-Node apiserver over plain HTTP, for the commands that read a Node
//! before they write it: it answers GET and PATCH of that Node and records
//! every request, so that a test sees exactly what was (not) written.

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub struct FakeApi {
    /// A kubeconfig naming the server, for `KUBECONFIG`.
    pub kubeconfig: PathBuf,
    requests: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

impl FakeApi {
    /// Serves `node` (a Node object with its name) until the test ends.
    pub fn serving(node: Value) -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (node, seen) = (node.clone(), seen.clone());
                std::thread::spawn(move || serve(stream, &node, &seen));
            }
        });
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: fake\n\
                 clusters: [{{name: fake, cluster: {{server: \"http://127.0.0.1:{port}\"}}}}]\n\
                 users: [{{name: fake, user: {{token: t}}}}]\n\
                 contexts: [{{name: fake, context: {{cluster: fake, user: fake}}}}]\n"
            ),
        )
        .expect("kubeconfig written");
        FakeApi {
            kubeconfig,
            requests,
            _dir: dir,
        }
    }

    /// `METHOD PATH` of every request so far, in order.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

/// Answers requests on one connection until the client closes it.
fn serve(stream: TcpStream, node: &Value, seen: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut writer = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or_default().to_owned();
        let path = parts.next().unwrap_or_default();
        let path = path.split('?').next().unwrap_or_default().to_owned();
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            if header.trim().is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if let Ok(mut r) = seen.lock() {
            r.push(format!("{method} {path}"));
        }
        let name = node["metadata"]["name"].as_str().unwrap_or_default();
        let (status, answer) = if path == format!("/api/v1/nodes/{name}") {
            ("200 OK", node.to_string())
        } else {
            (
                "404 Not Found",
                serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "reason": "NotFound", "code": 404, "message": format!("{path} not found")})
                .to_string(),
            )
        };
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
            answer.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}
