//! Upstream's `VerticalPodAutoscalerCheckpoint` objects in the cluster: the
//! list read at start (to import what upstream's recommender left) and the
//! writes of `--checkpoints upstream`. The thin edge of [`super::upstream`];
//! it decides nothing about the model.

use super::model::History;
use super::upstream::{self, KIND};
use super::watch::{lock, Shared};
use crate::metrics::RecommenderMetrics;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::ApiResource;
use kube::Client;
use serde_json::Value;

fn resource() -> ApiResource {
    ApiResource {
        group: "autoscaling.k8s.io".into(),
        version: "v1".into(),
        api_version: upstream::API_VERSION.into(),
        kind: KIND.into(),
        plural: "verticalpodautoscalercheckpoints".into(),
    }
}

/// Every upstream checkpoint; none when the CRD is not installed (a cluster
/// that never ran upstream's recommender).
///
/// # Errors
/// The list failed for another reason (the caller goes on without).
pub async fn read(client: &Client) -> Result<Vec<Value>, kube::Error> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource());
    match api.list(&ListParams::default()).await {
        Ok(list) => Ok(list
            .items
            .iter()
            .map(|o| super::input::object_value(o, KIND))
            .collect()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
        Err(error) => Err(error),
    }
}

/// Writes every VPA's upstream checkpoints by server-side apply (one field
/// manager; a VPA's objects encoded under the model's lock, written after
/// it). Checkpoints of VPAs gone are left to upstream's garbage collector,
/// as upstream leaves them.
pub async fn write(
    client: &Client,
    history: &Shared,
    config: &super::aggregate::HistoryConfig,
    now: Timestamp,
    metrics: &RecommenderMetrics,
) {
    let vpas = super::checkpoints::vpas(&lock(history));
    for vpa in vpas {
        let objects = upstream::of_vpa(config, &lock(history), &vpa, now);
        for object in &objects {
            // Upstream's Go types write a null creationTimestamp; apply
            // leaves it to the apiserver.
            let mut object = object.clone();
            if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("creationTimestamp");
            }
            super::api::apply_checkpoint(client, &resource(), &object, metrics).await;
        }
    }
}

/// Imports upstream's checkpoints into `history` for the VPAs it has none
/// for, logging what was taken and what could not be read.
pub fn import(config: &super::aggregate::HistoryConfig, history: &mut History, objects: &[Value]) {
    let (imported, errors) = upstream::restore(config, objects);
    for error in errors {
        tracing::warn!(%error, "upstream checkpoint not read");
    }
    for vpa in upstream::import(history, imported) {
        tracing::info!(%vpa, "history imported from upstream's VerticalPodAutoscalerCheckpoints");
    }
}
