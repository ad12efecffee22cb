//! A small apiserver over plain HTTP, for the commands that talk to a
//! cluster: it serves a set of objects (GET of a Node by name, lists of
//! every kind by its plural, pods by `spec.nodeName`), applies a merge
//! PATCH of a Node (kept unless `dryRun=All`), answers anything else 404
//! with a Status as the real one words it, and records every request, so
//! that a test sees exactly what was (not) written.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub struct FakeApi {
    /// A kubeconfig naming the server, for `KUBECONFIG` or `--kubeconfig`.
    pub kubeconfig: PathBuf,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    state: Arc<Mutex<State>>,
    dir: tempfile::TempDir,
}

#[derive(Default)]
struct State {
    objects: Vec<Value>,
    /// `METHOD PATH?QUERY` of every request, in order.
    requests: Vec<String>,
}

impl FakeApi {
    /// Serves `node` (a Node object with its name) until the test ends.
    pub fn serving(node: Value) -> FakeApi {
        Self::serving_objects(vec![node])
    }

    /// Serves `objects` (each with its apiVersion and kind).
    pub fn serving_objects(objects: Vec<Value>) -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let state = Arc::new(Mutex::new(State {
            objects,
            requests: Vec::new(),
        }));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let shared = shared.clone();
                std::thread::spawn(move || serve(stream, &shared));
            }
        });
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("http://127.0.0.1:{port}");
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, kubeconfig_text(&[("fake", &url)], "fake"))
            .expect("kubeconfig written");
        FakeApi {
            kubeconfig,
            url,
            state,
            dir,
        }
    }

    /// A kubeconfig in this test's directory with `contexts` (name,
    /// server URL) and `current` as its current-context.
    pub fn kubeconfig_with(&self, file: &str, contexts: &[(&str, &str)], current: &str) -> PathBuf {
        let path = self.dir.path().join(file);
        std::fs::write(&path, kubeconfig_text(contexts, current)).expect("kubeconfig written");
        path
    }

    /// `METHOD PATH` of every request so far, in order.
    pub fn requests(&self) -> Vec<String> {
        self.requests_with_query()
            .into_iter()
            .map(|r| r.split('?').next().unwrap_or_default().to_owned())
            .collect()
    }

    /// `METHOD PATH?QUERY` of every request so far, in order.
    pub fn requests_with_query(&self) -> Vec<String> {
        self.state
            .lock()
            .map(|s| s.requests.clone())
            .unwrap_or_default()
    }

    /// The object of `kind` and `name` as the server holds it now.
    pub fn object(&self, kind: &str, name: &str) -> Option<Value> {
        let state = self.state.lock().ok()?;
        state
            .objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .cloned()
    }
}

/// A kubeconfig of one cluster, user and context per (name, server).
fn kubeconfig_text(contexts: &[(&str, &str)], current: &str) -> String {
    let mut text = format!("apiVersion: v1\nkind: Config\ncurrent-context: {current}\nclusters:\n");
    for (name, url) in contexts {
        text.push_str(&format!(
            "- {{name: {name}, cluster: {{server: \"{url}\"}}}}\n"
        ));
    }
    text.push_str("users:\n");
    for (name, _) in contexts {
        text.push_str(&format!("- {{name: {name}, user: {{token: t}}}}\n"));
    }
    text.push_str("contexts:\n");
    for (name, _) in contexts {
        text.push_str(&format!(
            "- {{name: {name}, context: {{cluster: {name}, user: {name}}}}}\n"
        ));
    }
    text
}

/// `(group/version or v1, plural)` of an object.
fn resource_of(object: &Value) -> (String, String) {
    let kind = object["kind"].as_str().unwrap_or_default().to_lowercase();
    let api = object["apiVersion"].as_str().unwrap_or_default().to_owned();
    (api, format!("{kind}s"))
}

/// The answer to one request: status line and JSON body.
fn answer(state: &Mutex<State>, method: &str, target: &str, body: &[u8]) -> (&'static str, Value) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let Ok(mut state) = state.lock() else {
        return ("500 Internal Server Error", json!({}));
    };
    state.requests.push(format!("{method} {target}"));
    let not_found = |resource: &str, name: &str| {
        (
            "404 Not Found",
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "reason": "NotFound", "code": 404,
                "message": format!("{resource} \"{name}\" not found"),
                "details": {"name": name, "kind": resource}}),
        )
    };
    if let Some(name) = path.strip_prefix("/api/v1/nodes/") {
        let Some(index) = state
            .objects
            .iter()
            .position(|o| o["kind"] == "Node" && o["metadata"]["name"] == name)
        else {
            return not_found("nodes", name);
        };
        if method == "PATCH" {
            let patch: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let mut patched = state.objects[index].clone();
            json_patch::merge(&mut patched, &patch);
            if !query.split('&').any(|q| q == "dryRun=All") {
                state.objects[index] = patched.clone();
            }
            return ("200 OK", patched);
        }
        return ("200 OK", state.objects[index].clone());
    }
    // A list: /api/v1/PLURAL or /apis/GROUP/VERSION/PLURAL.
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (api, plural) = match parts.as_slice() {
        ["api", "v1", plural] => ("v1".to_owned(), *plural),
        ["apis", group, version, plural] => (format!("{group}/{version}"), *plural),
        _ => return not_found("", path),
    };
    let node = query
        .split('&')
        .find_map(|q| q.strip_prefix("fieldSelector=spec.nodeName%3D"));
    let items: Vec<Value> = state
        .objects
        .iter()
        .filter(|o| resource_of(o) == (api.clone(), plural.to_owned()))
        .filter(|o| node.is_none_or(|n| o["spec"]["nodeName"] == n))
        .cloned()
        .collect();
    (
        "200 OK",
        json!({"apiVersion": api, "kind": "List", "metadata": {"resourceVersion": "1"}, "items": items}),
    )
}

/// Answers requests on one connection until the client closes it.
fn serve(stream: TcpStream, state: &Mutex<State>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut writer = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or_default().to_owned();
        let target = parts.next().unwrap_or_default().to_owned();
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
        let (status, answer) = answer(state, &method, &target, &body);
        let answer = answer.to_string();
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
            answer.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}
