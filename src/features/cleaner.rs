//! Applies a Feature's cleanup plan ([`super::cleanup::plan`]) while it is
//! `TurningOff`: each removal a JSON patch guarded by the resourceVersion
//! read (or returned by this pass's previous patch of the same object),
//! fields under `/status` through the status subresource, each with an
//! Event on the object. A patch that fails is left for the next pass,
//! which reads the object again; nothing is retried blindly.

use super::cleanup::CleanupPatch;
use super::metrics::{CleanupResult, FeatureFamilies};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::Client;
use std::collections::BTreeMap;

/// Applies `patches` for the Feature `feature` (`namespace/name`, for the
/// Events); `resources` are the APIs the pass listed. Returns how many
/// fields were removed.
pub async fn apply(
    client: &Client,
    recorder: &Recorder,
    resources: &[ApiResource],
    patches: &[CleanupPatch],
    feature: &str,
    manager: &str,
    metrics: &FeatureFamilies,
) -> usize {
    // The version each object is at after this pass's own patches.
    let mut versions: BTreeMap<(String, String, String, String), String> = BTreeMap::new();
    let mut applied = 0;
    for planned in patches {
        let key = (
            planned.group.clone(),
            planned.resource.clone(),
            planned.namespace.clone(),
            planned.name.clone(),
        );
        let patch = match versions.get(&key) {
            Some(version) => planned.at_version(version),
            None => planned.clone(),
        };
        let Some(resource) = resources
            .iter()
            .find(|r| r.group == patch.group && r.plural == patch.resource)
        else {
            continue;
        };
        let api: Api<DynamicObject> = if patch.namespace.is_empty() {
            Api::all_with(client.clone(), resource)
        } else {
            Api::namespaced_with(client.clone(), &patch.namespace, resource)
        };
        let result = send(&api, &patch, manager).await;
        let outcome = match &result {
            Ok(_) => CleanupResult::Applied,
            Err(error) if is_conflict(error) => CleanupResult::Conflict,
            Err(_) => CleanupResult::Failed,
        };
        metrics.cleanup_patch(outcome);
        match result {
            Ok(written) => {
                applied += 1;
                if let Some(version) = written.metadata.resource_version.clone() {
                    versions.insert(key, version);
                }
                tracing::info!(object = %patch.label(), field = %patch.json_pointer, %feature, "cleanup: field removed");
                publish(recorder, resource, &patch, feature).await;
            }
            Err(error) => {
                let level_conflict = outcome == CleanupResult::Conflict;
                if level_conflict {
                    tracing::info!(object = %patch.label(), field = %patch.json_pointer, %error, "cleanup: the object changed; the next pass reads it again");
                } else {
                    tracing::warn!(object = %patch.label(), field = %patch.json_pointer, %error, "cleanup: removal refused; the next pass tries again");
                }
            }
        }
    }
    applied
}

async fn send(
    api: &Api<DynamicObject>,
    patch: &CleanupPatch,
    manager: &str,
) -> Result<DynamicObject, kube::Error> {
    let ops: json_patch::Patch =
        serde_json::from_value(patch.patch.clone()).map_err(kube::Error::SerdeError)?;
    let params = PatchParams {
        field_manager: Some(manager.to_owned()),
        ..PatchParams::default()
    };
    let body = Patch::<()>::Json(ops);
    if patch.subresource == "status" {
        api.patch_status(&patch.name, &params, &body).await
    } else {
        api.patch(&patch.name, &params, &body).await
    }
}

/// A changed object (the `test` of its resourceVersion failed, or 409) or
/// one that is gone (404): [`crate::stale`].
fn is_conflict(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => crate::stale::is_stale(status),
        _ => false,
    }
}

async fn publish(recorder: &Recorder, resource: &ApiResource, patch: &CleanupPatch, feature: &str) {
    let reference = ObjectReference {
        api_version: Some(resource.api_version.clone()),
        kind: Some(resource.kind.clone()),
        namespace: (!patch.namespace.is_empty()).then(|| patch.namespace.clone()),
        name: Some(patch.name.clone()),
        uid: (!patch.uid.is_empty()).then(|| patch.uid.clone()),
        ..ObjectReference::default()
    };
    let event = Event {
        type_: EventType::Normal,
        reason: "FeatureCleanup".to_owned(),
        note: Some(format!(
            "removed {} as Feature {feature} turns off (declared in its spec.cleanup)",
            patch.json_pointer
        )),
        // The recorder folds Events of one object, reason and action into
        // one series: an action per field keeps one Event per removal.
        action: format!("Remove {}", patch.json_pointer)
            .chars()
            .take(128)
            .collect(),
        secondary: None,
    };
    if let Err(error) = recorder.publish(&event, &reference).await {
        tracing::warn!(%error, "event not recorded");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure(message, "")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn a_failed_test_a_conflict_or_a_gone_object_is_a_conflict_and_the_rest_failures() {
        // What kube-apiserver v1.36.2 answers when the JSON patch's test
        // fails: the generic message, no details.
        let test_failed = api_error(422, crate::stale::PATCH_NOT_APPLIED);
        assert!(is_conflict(&test_failed));
        assert!(is_conflict(&api_error(409, "the object has been modified")));
        assert!(is_conflict(&api_error(404, "not found")));
        assert!(!is_conflict(&api_error(422, "spec.scope: Invalid value")));
        assert!(!is_conflict(&api_error(403, "forbidden")));
    }
}
