//! A pod as a watch hands it over (a list page's item or an event's
//! object, [`ObjectText`]: no `kind`, no tree), read into [`RunningPod`].
//! The updater and the balloon controller watch every pod of the cluster
//! this way, so neither builds a k8s-openapi `Pod` or a `Value` per pod.

use super::doc::PodText;
use super::running::RunningPod;
use crate::json::text::{value_with_type, ObjectText};

/// The pod `object` holds, when `wanted` takes it: read typed from its
/// text ([`PodText`]), or, for a pod of an unusual shape, through
/// [`RunningPod::from_value`], whose errors name the field. `wanted` sees
/// the typed read; a pod only the Value read takes is always read.
///
/// # Errors
/// A pod the Value read refuses, in words naming the pod and the field.
pub fn read_watched(
    object: &ObjectText,
    wanted: impl Fn(&PodText<'_>) -> bool,
) -> Result<Option<RunningPod>, String> {
    if let Some(pod) = PodText::parse(object.text()) {
        if !wanted(&pod) {
            return Ok(None);
        }
        if let Some(running) = pod.running() {
            return Ok(Some(running));
        }
    }
    let value = value_with_type(object.text(), "v1", "Pod")
        .map_err(|e| format!("Pod {}/{}: {e}", object.namespace(), object.name()))?;
    RunningPod::from_value(&value)
        .map(Some)
        .map_err(|e| e.to_string())
}
