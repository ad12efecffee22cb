//! Talking to the control plane about arbitrary objects: server-side apply,
//! status writes, deletes and dry-run creates, for the kinds the suite uses.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use serde_json::Value;
use std::path::Path;

pub const FIELD_MANAGER: &str = "nodescope-e2e";

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

/// Creates (or keeps) Namespace `name`.
pub async fn namespace(client: &Client, name: &str) {
    apply(
        client,
        &serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
    )
    .await;
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
/// plural, as every kind the suite touches spells it (`-s`, `-es` after an
/// `s`, `-ies` for a `y`).
pub fn api_resource(object: &Value) -> ApiResource {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let lower = kind.to_ascii_lowercase();
    let plural = if lower.ends_with('s') {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y') {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
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

pub fn dry_run() -> PostParams {
    PostParams {
        dry_run: true,
        field_manager: Some(FIELD_MANAGER.to_owned()),
    }
}

/// Creates `object` with `dryRun=All`: the apiserver runs all admission,
/// webhooks included, and stores nothing. An error is `"<code> <message>"`.
pub async fn dry_run_create(client: &Client, object: &Value) -> Result<DynamicObject, String> {
    let api = dynamic_api(client, object);
    let typed: DynamicObject = serde_json::from_value(object.clone()).map_err(|e| e.to_string())?;
    api.create(&dry_run(), &typed).await.map_err(|e| match e {
        kube::Error::Api(status) => format!("{} {}", status.code, status.message),
        other => other.to_string(),
    })
}

/// A dry-run create of the DaemonSet pod for `node` (see [`daemonset_pod`]).
pub async fn dry_run_pod(client: &Client, node: &str) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "monitoring");
    let pod: Pod = serde_json::from_value(daemonset_pod(node)).unwrap_or_else(|e| panic!("{e}"));
    pods.create(&dry_run(), &pod)
        .await
        .unwrap_or_else(|e| panic!("dry-run pod for {node}: {e}"))
}

/// Waits until the CRD `name` is Established: before that the apiserver
/// answers its objects' paths with 404.
pub async fn established(client: &Client, name: &str) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    super::eventually(
        &format!("CRD {name} Established"),
        std::time::Duration::from_secs(30),
        || {
            let crds = crds.clone();
            async move {
                let crd = crds.get(name).await.ok()?;
                crd.status?
                    .conditions?
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
                    .then_some(())
            }
        },
    )
    .await;
}
