//! nodescope beside the control plane: the real binary with `--store kube`
//! (reading the control plane through `KUBECONFIG`), and the shipped webhook
//! configurations pointed at it by loopback `url:`, as the apiserver would
//! call a webhook outside the cluster.

use super::ControlPlane;
use crate::common::{self, Server, H1};
use base64::Engine as _;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

pub const FIELD_MANAGER: &str = "nodescope-e2e";

/// Starts `nodescope serve --store kube` and waits until it is ready (its
/// watches have synced).
pub async fn start(plane: &ControlPlane, extra: &[&str]) -> Server {
    start_with_certs(
        plane,
        tempfile::tempdir().unwrap_or_else(|e| panic!("{e}")),
        extra,
    )
    .await
}

pub async fn start_with_certs(
    _plane: &ControlPlane,
    certs: tempfile::TempDir,
    extra: &[&str],
) -> Server {
    if !certs.path().join("tls.crt").exists() {
        common::make_certs(certs.path());
    }
    let mut args = vec!["--store=kube"];
    args.extend_from_slice(extra);
    let server = Server::start_with_certs(certs, &args);
    let ca = server.ca();
    super::eventually("nodescope /readyz", Duration::from_secs(60), || {
        let ca = ca.clone();
        let addr = server.addr;
        async move {
            let mut client = H1::connect(addr, &ca).await;
            let reply = client
                .send(common::request("GET", "/readyz", None, Vec::new()))
                .await;
            (reply.status == 200).then_some(())
        }
    })
    .await;
    server
}

/// The shipped webhook configuration in `file` (under
/// `manifests/base/webhooks/`), renamed to `name` and with every webhook's
/// `clientConfig` pointing at `server` by URL.
pub fn webhook_configuration(file: &str, name: &str, server: &Server) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("manifests/base/webhooks")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut config: Value =
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    config["metadata"]["name"] = Value::String(name.to_owned());
    let ca = base64::engine::general_purpose::STANDARD.encode(server.ca());
    for webhook in config["webhooks"].as_array_mut().into_iter().flatten() {
        let route = webhook["clientConfig"]["service"]["path"]
            .as_str()
            .unwrap_or("/validate")
            .to_owned();
        webhook["clientConfig"] = serde_json::json!({
            "url": format!("https://127.0.0.1:{}{route}", server.addr.port()),
            "caBundle": ca,
        });
    }
    config
}

/// Server-side applies `object` (any kind the apiserver serves) and returns
/// what the apiserver stored.
pub async fn apply(client: &Client, object: &Value) -> DynamicObject {
    let api = dynamic_api(client, object);
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .unwrap_or_else(|e| panic!("applying {} {name}: {e}", object["kind"]))
}

/// Deletes `object` if it exists.
pub async fn delete(client: &Client, object: &Value) {
    let api = dynamic_api(client, object);
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(e) => panic!("deleting {} {name}: {e}", object["kind"]),
    }
}

/// An `Api` for the object's kind and namespace.
pub fn dynamic_api(client: &Client, object: &Value) -> Api<DynamicObject> {
    let resource = api_resource(object);
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

/// The REST resource of an object's apiVersion and kind: the lower-case
/// plural, as every kind the suite touches spells it.
pub fn api_resource(object: &Value) -> ApiResource {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let plural = match kind {
        "PriorityClass" => "priorityclasses".to_owned(),
        "VerticalPodAutoscaler" => "verticalpodautoscalers".to_owned(),
        other => format!("{}s", other.to_ascii_lowercase()),
    };
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural)
}

/// Server-side applies `object["status"]` through the status subresource,
/// as a controller writes status.
pub async fn apply_status(client: &Client, object: &Value) -> DynamicObject {
    let api = dynamic_api(client, object);
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let body = serde_json::json!({
        "apiVersion": object["apiVersion"],
        "kind": object["kind"],
        "metadata": {"name": name, "namespace": object["metadata"]["namespace"]},
        "status": object["status"],
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await
    .unwrap_or_else(|e| panic!("applying the status of {} {name}: {e}", object["kind"]))
}

/// Every document of a YAML file of the repository.
pub fn documents(path: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// Applies every object of the files (and their status, where they have
/// one) and returns them.
pub async fn apply_files(client: &Client, paths: &[&str]) -> Vec<Value> {
    let mut objects = Vec::new();
    for path in paths {
        for object in documents(path) {
            apply(client, &object).await;
            if object.get("status").is_some() {
                apply_status(client, &object).await;
            }
            objects.push(object);
        }
    }
    objects
}

/// The DaemonSet pod the apiserver captured for node `node-a-1`
/// (tests/fixtures), as the DaemonSet controller would post it for `node`.
pub fn daemonset_pod(node: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/admission-reviews/pod-node-exporter-node-a-1-create.mutate.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let review: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    let mut pod = review["request"]["object"].clone();
    if let Some(meta) = pod["metadata"].as_object_mut() {
        meta.remove("managedFields");
        meta.remove("creationTimestamp");
    }
    if let Some(top) = pod.as_object_mut() {
        top.remove("status");
    }
    pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"][0]["matchFields"][0]["values"] = serde_json::json!([node]);
    pod
}
