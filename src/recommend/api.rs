//! The recommender's calls to the apiserver, one function each: list the
//! scoped VPAs and the PodMetrics, read the scope gate, write a status
//! guarded by the resourceVersion read. No decision: [`super::cluster`]
//! decides what to call.

use super::cluster::{vpa_resource, ClusterError};
use super::input::{vpa_text, PodMetricsList, PodUsage, ScopedVpa};
use super::replay::Replay;
use super::status::VpaStatus;
use crate::features::cluster::feature_resource;
use crate::json::text::ObjectText;
use crate::metrics::RecommenderMetrics;
use crate::store::presence;
use crate::vpa::SCOPE_FEATURE;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::discovery::ApiResource;
use kube::Client;
use kube::ResourceExt;
use serde_json::{json, Value};

/// What one list of the VPAs says.
pub(super) struct Vpas {
    /// The scoped ones this recommender computes, with the resourceVersion
    /// each was read at.
    pub computed: Vec<(ScopedVpa, String)>,
    /// Every VPA this recommender owns, scoped or not ([`Replay::owns`]):
    /// the only ones whose history it keeps.
    pub owned: std::collections::HashSet<String>,
}

/// Every VPA. With `--vpa-object-namespace`, only that namespace is
/// listed, as upstream's informers list it.
pub(super) async fn read_vpas(client: &Client, replay: &Replay) -> Result<Vpas, ClusterError> {
    const WHAT: &str = "verticalpodautoscalers.autoscaling.k8s.io";
    let api: Api<ObjectText> = match replay.namespaces.only() {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &vpa_resource()),
        None => Api::all_with(client.clone(), &vpa_resource()),
    };
    let mut out = Vec::new();
    let mut owned = std::collections::HashSet::new();
    // Pages of 500, as kube's watcher lists: a page is held as its text,
    // and each VPA is read from it (`vpa_text`) before the next page.
    let mut params = ListParams::default().limit(500);
    loop {
        let page = match api.list(&params).await {
            Ok(page) => page,
            // No VPA CRD: no VPA to recommend for, and nothing to wait for.
            Err(error) if presence::is_not_served(&error) => {
                presence::note(WHAT, false);
                return Ok(Vpas {
                    computed: Vec::new(),
                    owned: std::collections::HashSet::new(),
                });
            }
            Err(source) => return Err(ClusterError::List { what: WHAT, source }),
        };
        presence::note(WHAT, true);
        for object in &page.items {
            let (value, status) = match vpa_text(object.text()) {
                Ok(read) => read,
                Err(error) => {
                    let vpa = format!("{}/{}", object.namespace(), object.name());
                    tracing::warn!(%vpa, %error, "VPA left out");
                    continue;
                }
            };
            owned.extend(replay.owns(&value));
            match ScopedVpa::from_value(&value) {
                Ok(Some(mut vpa)) if replay.computes(&vpa) => {
                    vpa.status = status;
                    let version = object.resource_version().unwrap_or_default();
                    out.push((vpa, version));
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "VPA left out"),
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    Ok(Vpas {
        computed: out,
        owned,
    })
}

/// PodMetrics of the namespaces of the scoped VPAs, one list each.
pub(super) async fn read_usage(
    client: &Client,
    namespaces: &[&str],
) -> Result<Vec<PodUsage>, ClusterError> {
    let mut out = Vec::new();
    for ns in namespaces {
        let list = |source| ClusterError::List {
            what: "pods.metrics.k8s.io",
            source,
        };
        let request =
            kube::core::Request::new(format!("/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods"))
                .list(&ListParams::default())
                .map_err(|e| list(kube::Error::BuildRequest(e)))?;
        let items: PodMetricsList = client.request(request).await.map_err(list)?;
        for item in items.items {
            match item {
                Ok(usage) => out.push(usage),
                Err(error) => tracing::warn!(%error, "PodMetrics left out"),
            }
        }
    }
    Ok(out)
}

/// Writes `status` over the VPA's, if the VPA is still at `resource_version`.
pub(super) async fn write_status(
    client: &Client,
    vpa: &ScopedVpa,
    resource_version: &str,
    status: &VpaStatus,
) -> Result<(), kube::Error> {
    // The answer, the whole VPA, is only checked for success: read as text.
    let api: Api<ObjectText> =
        Api::namespaced_with(client.clone(), &vpa.namespace, &vpa_resource());
    let patch = json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
        {"op": "add", "path": "/status", "value": status.to_value()},
    ]);
    let patch: json_patch::Patch =
        serde_json::from_value(patch).map_err(kube::Error::SerdeError)?;
    api.patch_status(
        &vpa.name,
        &PatchParams::default(),
        &Patch::<()>::Json(patch),
    )
    .await
    .map(|_| ())
}

/// Reads Feature [`SCOPE_FEATURE`] into `gate`: its state when it gates
/// scopes off (`TurningOff`, `Off`), else `None`. A Feature (or a Feature
/// CRD) that does not exist is no gate, as before Features; a read that
/// fails keeps the last state read.
pub(super) async fn read_scope_gate(client: &Client, gate: &mut Option<String>) {
    let (namespace, name) = SCOPE_FEATURE;
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &feature_resource());
    let state = match api.get_opt(name).await {
        Ok(feature) => feature.and_then(|f| {
            f.data
                .pointer("/status/state")
                .and_then(Value::as_str)
                .filter(|s| matches!(*s, "TurningOff" | "Off"))
                .map(str::to_owned)
        }),
        Err(kube::Error::Api(e)) if e.code == 404 => None,
        Err(error) => {
            tracing::warn!(feature = %format!("{namespace}/{name}"), %error, "Feature not read: the last state read stands");
            return;
        }
    };
    if state != *gate {
        match &state {
            Some(state) => {
                tracing::info!(feature = %format!("{namespace}/{name}"), %state, "scopes gated off: groups are no longer written")
            }
            None => {
                tracing::info!(feature = %format!("{namespace}/{name}"), "scopes not gated: groups are written")
            }
        }
    }
    *gate = state;
}

/// Applies one checkpoint object of `resource` (server-side apply, the
/// recommender's field manager, forced), counting the write; a failure is
/// logged and left to the next checkpoint interval. Returns the object's
/// (namespace, name).
pub(super) async fn apply_checkpoint(
    client: &Client,
    resource: &ApiResource,
    object: &Value,
    metrics: &RecommenderMetrics,
) -> (String, String) {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (ns, name) = (text("/metadata/namespace"), text("/metadata/name"));
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, resource);
    let params = PatchParams::apply("nodescope-recommender").force();
    match api.patch(&name, &params, &Patch::Apply(object)).await {
        Ok(_) => metrics.checkpoint_write(true),
        Err(error) => {
            metrics.checkpoint_write(false);
            tracing::warn!(namespace = %ns, %name, kind = %resource.kind, %error, "checkpoint not written");
        }
    }
    (ns, name)
}
