//! The cluster state a policy test case assumes, made real: its params
//! (Features with their status, ConfigMaps, Namespaces, PriorityClasses),
//! the objects its UPDATEs and DELETEs act on, and nothing else that could
//! stand in the way (a suite is hermetic: what it does not list is absent).

use super::admission;
use super::cluster;
use kube::api::{DeleteParams, DynamicObject, PostParams};
use kube::Client;
use nodescope::cli::test_suite::cases::CaseRequest;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Creation may wait on an informer (the Priority plugin's PriorityClasses,
/// RBAC); this only bounds a hang.
const LIMIT: Duration = Duration::from_secs(10);
const VPA_CRD: &str = "verticalpodautoscalers.autoscaling.k8s.io";

/// `(apiVersion, kind, namespace, name)` of a named object.
pub type Identity = (String, String, String, String);

pub fn identity(object: &Value, namespace: Option<&str>) -> Option<Identity> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let name = text(&object["metadata"]["name"]);
    let namespace = object["metadata"]["namespace"]
        .as_str()
        .or(namespace)
        .unwrap_or_default()
        .to_owned();
    (!name.is_empty()).then(|| {
        (
            text(&object["apiVersion"]),
            text(&object["kind"]),
            namespace,
            name,
        )
    })
}

/// A minimal object with that identity, for [`cluster`]'s helpers.
fn stub((api_version, kind, namespace, name): &Identity) -> Value {
    let mut stub = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
    if !namespace.is_empty() {
        stub["metadata"]["namespace"] = json!(namespace);
    }
    stub
}

/// Deletes the object and waits until it is gone.
pub async fn remove(client: &Client, object: &Value) {
    cluster::delete(client, object).await;
    let api = cluster::dynamic_api(client, object);
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    gone(&api, &object["kind"].to_string(), name).await;
}

/// Removes the objects with these identities that exist (never a
/// Namespace: with no controller, one would stay Terminating) and returns
/// them, to put back with [`restore`].
pub async fn displace(client: &Client, identities: &[Identity]) -> Vec<Value> {
    let mut displaced = Vec::new();
    for id in identities.iter().filter(|id| id.1 != "Namespace") {
        let stub = stub(id);
        let found = cluster::dynamic_api(client, &stub)
            .get_opt(&id.3)
            .await
            .unwrap_or_else(|e| panic!("reading {id:?}: {e}"));
        if let Some(object) = found {
            let mut object = serde_json::to_value(object).unwrap_or_default();
            if let Some(meta) = object["metadata"].as_object_mut() {
                meta.retain(|k, _| {
                    ["name", "namespace", "labels", "annotations"].contains(&k.as_str())
                });
            }
            if let Some(top) = object.as_object_mut() {
                top.remove("status");
            }
            remove(client, &stub).await;
            displaced.push(object);
        }
    }
    displaced
}

pub async fn restore(client: &Client, displaced: &[Value]) {
    for object in displaced {
        cluster::apply(client, object).await;
    }
}

/// Creates each namespace that does not exist yet.
pub async fn namespaces(client: &Client, names: &[String]) {
    for name in names {
        let namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        let api = cluster::dynamic_api(client, &namespace);
        if api.get_opt(name).await.ok().flatten().is_none() {
            cluster::apply(client, &namespace).await;
        }
    }
}

/// The params in the cluster, changed from one case group's to the next's.
pub struct Params {
    client: Client,
    applied: Vec<Value>,
}

impl Params {
    pub fn new(client: &Client) -> Params {
        Params {
            client: client.clone(),
            applied: Vec::new(),
        }
    }

    /// Makes `wanted` (later objects of an identity win) the params in the
    /// cluster: what is no longer wanted is deleted (a Namespace is
    /// applied bare again, which removes the labels this manager gave it),
    /// what changed is recreated (its status too). An error is why a
    /// param could not be written.
    pub async fn set(&mut self, wanted: &[Value]) -> Result<(), String> {
        let mut unique: Vec<Value> = Vec::new();
        for object in wanted {
            let id = identity(object, None);
            unique.retain(|o| identity(o, None) != id);
            unique.push(object.clone());
        }
        for old in std::mem::take(&mut self.applied) {
            if unique.contains(&old) {
                self.applied.push(old);
                continue;
            }
            if old["kind"] == "Namespace" {
                let id = identity(&old, None).unwrap_or_default();
                cluster::apply(&self.client, &stub(&id)).await;
            } else {
                remove(&self.client, &old).await;
            }
        }
        for object in unique {
            if self.applied.contains(&object) {
                continue;
            }
            let api = cluster::dynamic_api(&self.client, &object);
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            let params = kube::api::PatchParams::apply(cluster::FIELD_MANAGER).force();
            api.patch(name, &params, &kube::api::Patch::Apply(&object))
                .await
                .map_err(|e| format!("param {} {name}: {e}", object["kind"]))?;
            if object.get("status").is_some() {
                cluster::apply_status(&self.client, &object).await;
            }
            self.applied.push(object);
        }
        Ok(())
    }
}

/// Creates (for real) the object a request acts on, as the admin, retrying
/// while the apiserver refuses it (an informer not yet synced), and
/// returns its name. An error is the apiserver's last refusal.
pub async fn create_stored(client: &Client, request: &CaseRequest) -> Result<String, String> {
    let object = request.old_object.clone().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let api = admission::api(client, request, kind);
    let typed: DynamicObject =
        serde_json::from_value(object.clone()).map_err(|e| format!("not an object: {e}"))?;
    let params = PostParams {
        dry_run: false,
        field_manager: Some(cluster::FIELD_MANAGER.to_owned()),
    };
    let deadline = Instant::now() + LIMIT;
    loop {
        match api.create(&params, &typed).await {
            Ok(created) => return Ok(created.metadata.name.unwrap_or_default()),
            Err(e) if Instant::now() > deadline => {
                let why = match e {
                    kube::Error::Api(status) => format!("{} {}", status.code, status.message),
                    other => other.to_string(),
                };
                return Err(format!("the object it acts on cannot be created: {why}"));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Deletes an object made by [`create_stored`] and waits until it is gone.
pub async fn delete_stored(client: &Client, request: &CaseRequest, name: &str) {
    let kind = request
        .old_object
        .as_ref()
        .map_or("", |o| o["kind"].as_str().unwrap_or(""));
    let api = admission::api(client, request, kind);
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(e) => panic!("deleting {kind} {name}: {e}"),
    }
    gone(&api, kind, name).await;
}

/// Waits until `name` no longer exists (a delete is not instant: finalizers,
/// and the watch caches behind later reads).
async fn gone(api: &kube::Api<kube::api::DynamicObject>, kind: &str, name: &str) {
    super::eventually(&format!("{kind} {name} gone"), LIMIT, || {
        let api = api.clone();
        async move {
            api.get_opt(name)
                .await
                .ok()
                .and_then(|o| o.is_none().then_some(()))
        }
    })
    .await;
}

/// Lets every user the cases act as do anything (`cluster-admin`), so that
/// authorization never answers for the enforcers, and waits until RBAC
/// says so.
pub async fn authorize(
    clients: &mut admission::Clients,
    users: &[nodescope::apiserver::review::User],
) -> Value {
    let client = clients.as_user(&Default::default());
    let mut names: Vec<&str> = users
        .iter()
        .map(|u| u.username.as_str())
        .filter(|u| !u.is_empty())
        .collect();
    names.sort_unstable();
    names.dedup();
    let subjects: Vec<Value> = names
        .iter()
        .map(|name| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}))
        .collect();
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "nodescope-e2e-enforcers"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": subjects,
    });
    cluster::apply(&client, &binding).await;
    let mut seen = Vec::new();
    for user in users.iter().filter(|u| !u.username.is_empty()) {
        if seen.contains(&user) {
            continue;
        }
        seen.push(user);
        let client = clients.as_user(user);
        super::eventually(&format!("RBAC for {}", user.username), LIMIT, || {
            let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
                kube::Api::namespaced(client.clone(), "default");
            async move { pods.list(&Default::default()).await.ok().map(|_| ()) }
        })
        .await;
    }
    binding
}

fn crd_api(client: &Client) -> kube::Api<kube::api::DynamicObject> {
    cluster::dynamic_api(
        client,
        &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": VPA_CRD}}),
    )
}

/// Whether the apiserver (no enforcer being on) takes a VPA whose scope no
/// scope rule allows.
async fn scope_rules_lifted(client: &Client) -> bool {
    let vpa = json!({"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "e2e-scope-probe", "namespace": "default"},
        "spec": {"scope": "Not a scope!", "targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "x"}}});
    cluster::dry_run_create(client, &vpa).await.is_ok()
}

/// The VPA CRD's own spec.scope rules (x-kubernetes-validations naming
/// scope) answer before any admission enforcer, so with them in place the
/// policies' scope messages never show: they are lifted for the step and
/// the CRD as it was is returned.
pub async fn lift_scope_rules(client: &Client) -> Option<Value> {
    fn strip(value: &mut Value, count: &mut usize) {
        if let Some(map) = value.as_object_mut() {
            if let Some(Value::Array(rules)) = map.get_mut("x-kubernetes-validations") {
                let before = rules.len();
                rules.retain(|r| !r["rule"].as_str().unwrap_or_default().contains("scope"));
                *count += before - rules.len();
                if rules.is_empty() {
                    map.remove("x-kubernetes-validations");
                }
            }
        }
        match value {
            Value::Object(map) => map.values_mut().for_each(|v| strip(v, count)),
            Value::Array(list) => list.iter_mut().for_each(|v| strip(v, count)),
            _ => {}
        }
    }
    let api = crd_api(client);
    let original = serde_json::to_value(
        api.get(VPA_CRD)
            .await
            .unwrap_or_else(|e| panic!("{VPA_CRD}: {e}")),
    )
    .unwrap_or_default();
    let mut lifted = original.clone();
    let mut count = 0;
    strip(&mut lifted["spec"], &mut count);
    if count == 0 {
        return None;
    }
    let lifted = serde_json::from_value(lifted).unwrap_or_else(|e| panic!("{e}"));
    api.replace(VPA_CRD, &Default::default(), &lifted)
        .await
        .unwrap_or_else(|e| panic!("lifting the scope rules of {VPA_CRD}: {e}"));
    super::eventually("the VPA CRD without its scope rules", LIMIT, || async {
        scope_rules_lifted(client).await.then_some(())
    })
    .await;
    println!("  the VPA CRD's {count} spec.scope rules are lifted for the step (they answer before admission)");
    Some(original)
}

pub async fn restore_scope_rules(client: &Client, original: Option<Value>) {
    let Some(original) = original else { return };
    let api = crd_api(client);
    let mut current =
        serde_json::to_value(api.get(VPA_CRD).await.unwrap_or_else(|e| panic!("{e}")))
            .unwrap_or_default();
    current["spec"] = original["spec"].clone();
    let current = serde_json::from_value(current).unwrap_or_else(|e| panic!("{e}"));
    api.replace(VPA_CRD, &Default::default(), &current)
        .await
        .unwrap_or_else(|e| panic!("restoring {VPA_CRD}: {e}"));
    super::eventually("the VPA CRD with its scope rules again", LIMIT, || async {
        (!scope_rules_lifted(client).await).then_some(())
    })
    .await;
}
