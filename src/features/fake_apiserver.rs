//! An in-memory apiserver for the controller's edge: the bundle's feature
//! gates and bindings, no Namespace, the Features it is given, and pods
//! served in pages as kube-apiserver does (`limit`, `continue`; a token it
//! was told to refuse answers `410 Gone`). Core discovery only (`/api`,
//! `/api/v1`), so a gate on DaemonSets finds pods alone. Every request is
//! recorded as `METHOD path?query`.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use kube::Client;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

const FEATURES: &str = "/apis/featureflags.nodescope.dev/v1alpha1";

pub struct Apiserver {
    pub pods: Vec<Value>,
    /// Ignores `limit`: every pod in one response.
    pub one_page: bool,
    /// Which pod LISTs (counted from 0) answer 410.
    pub expire: BTreeSet<usize>,
    pub features: Mutex<Vec<Value>>,
    pub calls: Mutex<Vec<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn status(code: u16, reason: &str) -> (u16, Value) {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": reason, "reason": reason, "code": code});
    (code, body)
}

fn list(kind: &str, items: Vec<Value>, token: Option<String>) -> (u16, Value) {
    let mut metadata = json!({"resourceVersion": "7"});
    if let Some(token) = token {
        metadata["continue"] = json!(token);
    }
    (
        200,
        json!({"kind": kind, "apiVersion": "v1", "metadata": metadata, "items": items}),
    )
}

/// `count` pods in `default`, the last `balloons` of them labelled
/// balloons (on the last page).
pub fn pods(count: usize, balloons: usize) -> Vec<Value> {
    (0..count)
        .map(|i| {
            let mut labels = json!({"app": "web"});
            if i + balloons >= count {
                labels["node.kubernetes.io/balloon"] = json!("true");
            }
            json!({"metadata": {"namespace": "default", "name": format!("pod-{i:05}"),
                                "resourceVersion": format!("{}", 100 + i), "labels": labels},
                   "spec": {"containers": [{"name": "main", "image": "app:1"}]}})
        })
        .collect()
}

impl Apiserver {
    pub fn new(pods: Vec<Value>) -> Self {
        Apiserver {
            pods,
            one_page: false,
            expire: BTreeSet::new(),
            features: Mutex::new(Vec::new()),
            calls: Mutex::new(Vec::new()),
        }
    }

    pub fn calls(&self) -> Vec<String> {
        lock(&self.calls).clone()
    }

    /// The pod LISTs asked, in order.
    pub fn pod_lists(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter(|c| c.starts_with("GET /api/v1/pods?"))
            .collect()
    }

    fn answer(&self, method: &str, path: &str, query: &str, body: &[u8]) -> (u16, Value) {
        let asked = self.pod_lists().len();
        lock(&self.calls).push(format!("{method} {path}?{query}"));
        let param = |key: &str| {
            query
                .split('&')
                .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
                .map(ToOwned::to_owned)
        };
        let gates = || -> Vec<Value> {
            serde_saphyr::from_multiple::<Value>(include_str!("../../policies/feature-gates.yaml"))
                .unwrap_or_default()
        };
        let of_kind = |kind: &str| -> Vec<Value> {
            gates().into_iter().filter(|d| d["kind"] == kind).collect()
        };
        match (method, path) {
            ("GET", "/api/v1/pods") => {
                if self.expire.contains(&asked) {
                    return status(410, "Expired");
                }
                let from: usize = param("continue").and_then(|t| t.parse().ok()).unwrap_or(0);
                let limit: usize = param("limit").and_then(|l| l.parse().ok()).unwrap_or(0);
                let to = if self.one_page || limit == 0 {
                    self.pods.len()
                } else {
                    (from + limit).min(self.pods.len())
                };
                let token = (to < self.pods.len()).then(|| to.to_string());
                list("PodList", self.pods[from.min(to)..to].to_vec(), token)
            }
            ("GET", "/api") => (
                200,
                json!({"kind": "APIVersions", "versions": ["v1"],
                                             "serverAddressByClientCIDRs": []}),
            ),
            ("GET", "/apis") => (
                200,
                json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []}),
            ),
            ("GET", "/api/v1") => (
                200,
                json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                {"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
                 "verbs": ["get", "list", "watch", "patch"]}]}),
            ),
            ("GET", "/api/v1/namespaces") => list("NamespaceList", Vec::new(), None),
            ("GET", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies") => list(
                "ValidatingAdmissionPolicyList",
                of_kind("ValidatingAdmissionPolicy"),
                None,
            ),
            ("GET", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings") => {
                list(
                    "ValidatingAdmissionPolicyBindingList",
                    of_kind("ValidatingAdmissionPolicyBinding"),
                    None,
                )
            }
            ("GET", p) if p == format!("{FEATURES}/features") => {
                list("FeatureList", lock(&self.features).clone(), None)
            }
            ("GET" | "PATCH", p) if p.starts_with(&format!("{FEATURES}/namespaces/")) => {
                let name = p
                    .trim_end_matches("/status")
                    .rsplit('/')
                    .next()
                    .unwrap_or("");
                let mut features = lock(&self.features);
                let Some(feature) = features.iter_mut().find(|f| f["metadata"]["name"] == name)
                else {
                    return status(404, "NotFound");
                };
                if method == "PATCH" {
                    let applied: Value = serde_json::from_slice(body).unwrap_or_default();
                    if let Some(fields) = applied["status"].as_object() {
                        for (key, value) in fields {
                            feature["status"][key] = value.clone();
                        }
                    }
                }
                (200, feature.clone())
            }
            _ => status(404, "NotFound"),
        }
    }
}

/// A client of `server`.
pub fn client(server: &Arc<Apiserver>) -> Client {
    let server = server.clone();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let server = server.clone();
        async move {
            let method = request.method().to_string();
            let path = request.uri().path().to_owned();
            let query = request.uri().query().unwrap_or("").to_owned();
            let body = request
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let (code, value) = server.answer(&method, &path, &query, &body);
            let response = http::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(value.to_string())))
                .unwrap_or_default();
            Ok::<_, Infallible>(response)
        }
    });
    Client::new(service, "default")
}
