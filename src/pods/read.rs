//! Reading a Pod object into what [`RunningPod`](super::RunningPod) keeps:
//! each field checked once, when the pod is listed or watched, with an
//! error that names it. No I/O; no decision.

use super::running::{Annotations, ContainerState, SpecContainer};
use super::texts::Texts;
use crate::json::borrowed::{JsonMap, QuantityText, Str};
use crate::mutate::boost::STARTUP_CPU_BOOST_ANNOTATION_PREFIX;
use crate::mutate::mark::ORIGINAL_RESOURCES_ANNOTATION;
use crate::mutate::{Originals, OBSERVED_CONTAINERS_ANNOTATION};
use crate::quantity::Quantity;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value};
use std::borrow::Cow;

/// A kept text as the view's string.
pub(super) fn str(s: &str) -> Str<'_> {
    Str(Cow::Borrowed(s))
}

/// A kept resource list as the map [`PodView`] holds, borrowed.
#[must_use]
pub fn view_texts(t: Option<&Texts>) -> Option<JsonMap<Str<'_>, QuantityText<'_>>> {
    t.map(|t| {
        JsonMap(
            t.iter()
                .map(|(k, v)| (str(k), QuantityText(str(v))))
                .collect(),
        )
    })
}

/// The annotations the arithmetic reads, each a string; nodescope's mark
/// read apart (see [`RunningPod::originals`]).
pub(super) fn kept_annotations(meta: &Map<String, Value>) -> Result<(Annotations, Mark), String> {
    let Some(annotations) = meta.get("annotations").filter(|a| !a.is_null()) else {
        return Ok((Box::default(), Ok(None)));
    };
    let annotations = annotations
        .as_object()
        .ok_or_else(|| format!("metadata.annotations: {}", not_an_object(annotations)))?;
    let text = |key: &str| match annotations.get(key) {
        None => Ok(None),
        Some(Value::String(v)) => Ok(Some(v.as_str())),
        Some(_) => Err(format!("metadata.annotations.{key}: expected a string")),
    };
    let mut kept: Vec<(Box<str>, Box<str>)> = text(OBSERVED_CONTAINERS_ANNOTATION)?
        .map(|v| (Box::from(OBSERVED_CONTAINERS_ANNOTATION), Box::from(v)))
        .into_iter()
        .collect();
    // Upstream's startup-boost annotations: the updater unboosts by them.
    for (key, value) in annotations {
        if key.starts_with(STARTUP_CPU_BOOST_ANNOTATION_PREFIX) {
            let value = value
                .as_str()
                .ok_or_else(|| format!("metadata.annotations.{key}: expected a string"))?;
            kept.push((Box::from(key.as_str()), Box::from(value)));
        }
    }
    let kept = kept.into_boxed_slice();
    let mark = match text(ORIGINAL_RESOURCES_ANNOTATION)? {
        None => Ok(None),
        Some(text) => read_mark(text).map(Some).map_err(Box::from),
    };
    Ok((kept, mark))
}

/// nodescope's mark, kept.
pub(super) type Mark = Result<Option<Box<[SpecContainer]>>, Box<str>>;

/// The mark's containers as kept lists; the reason when it is not
/// nodescope's JSON.
pub(super) fn read_mark(text: &str) -> Result<Box<[SpecContainer]>, String> {
    let originals = Originals::parse(text)?;
    let texts = |list: Option<&crate::mutate::pod::ResourceTexts<'_>>| {
        list.map(|l| Texts::try_from_pairs(l.iter().map(|(k, v)| (&**k, &*v.0))))
            .transpose()
            .map_err(|e| format!("annotation {ORIGINAL_RESOURCES_ANNOTATION}: {e}"))
    };
    originals
        .entries()
        .map(|(name, requests, limits)| {
            Ok(SpecContainer {
                name: name.into(),
                has_resources: true,
                requests: texts(requests)?,
                limits: texts(limits)?,
            })
        })
        .collect()
}

/// One `spec.containers[]` entry; an error names the field below it.
pub(super) fn spec_container(c: &Value) -> Result<SpecContainer, String> {
    let name = c
        .get("name")
        .and_then(Value::as_str)
        .ok_or("name: expected a string")?;
    let resources = c.get("resources").filter(|r| !r.is_null());
    if let Some(r) = resources.filter(|r| !r.is_object()) {
        return Err(format!("resources: {}", not_an_object(r)));
    }
    let list = |field: &str| resource_texts(resources.and_then(|r| r.get(field)), field);
    Ok(SpecContainer {
        name: name.into(),
        has_resources: resources.is_some(),
        requests: list("requests")?,
        limits: list("limits")?,
    })
}

/// Points `status` at the spec's list when the texts are the same, so the
/// pod holds one copy.
pub(super) fn share(status: &mut Option<Texts>, spec: &Option<Texts>) {
    if let (Some(s), Some(spec)) = (status.as_ref(), spec) {
        if s == spec {
            *status = Some(spec.clone());
        }
    }
}

/// Whether a container's `resizePolicy` lets cpu and memory change without
/// a restart (`NotRequired`, the default).
pub(super) fn non_disruptive(container: &Value) -> bool {
    container
        .get("resizePolicy")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .all(|p| p.get("restartPolicy").and_then(Value::as_str) != Some("RestartContainer"))
}

/// Whether a spec's resource list holds the same quantities as `actual`
/// (`1` and `1000m` are the same CPU).
pub(super) fn same_quantities(spec: Option<&Texts>, actual: &Texts) -> bool {
    if spec == Some(actual) {
        return true;
    }
    spec.map_or(0, Texts::len) == actual.len()
        && actual.iter().all(|(k, v)| {
            let want = spec
                .and_then(|m| m.get(k))
                .and_then(|q| Quantity::parse(q).ok());
            want.is_some() && want == Quantity::parse(v).ok()
        })
}

/// Why `value` is not the object expected, in serde's words.
pub(super) fn not_an_object(value: &Value) -> String {
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "map",
    };
    format!("invalid type: {kind}, expected an object")
}

pub(super) fn seconds(text: &str) -> Result<i64, String> {
    text.parse::<Timestamp>()
        .map(|t| t.as_second())
        .map_err(|e| format!("{text:?} is not an RFC 3339 time: {e}"))
}

/// `resources.<field>` as texts; `None` when absent.
///
/// # Errors
/// When it is not a map of quantities, naming the entry.
pub fn resource_texts(list: Option<&Value>, field: &str) -> Result<Option<Texts>, String> {
    let Some(list) = list.filter(|l| !l.is_null()) else {
        return Ok(None);
    };
    let map = list
        .as_object()
        .ok_or_else(|| format!("resources.{field}: {}", not_an_object(list)))?;
    let pairs = map
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k.as_str(), Cow::Borrowed(s.as_str()))),
            Value::Number(n) => Ok((k.as_str(), Cow::Owned(n.to_string()))),
            _ => Err(format!("resources.{field}.{k}: expected a quantity")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Texts::try_from_pairs(pairs)
        .map(Some)
        .map_err(|e| format!("resources.{field}: {e}"))
}

pub(super) fn container_state(cs: &Value) -> Result<ContainerState, String> {
    let name = cs
        .get("name")
        .and_then(Value::as_str)
        .ok_or("name: expected a string")?;
    let resources = cs.get("resources");
    let terminated = cs.pointer("/lastState/terminated");
    let last_oom_after = match terminated {
        Some(t) if t.get("reason").and_then(Value::as_str) == Some("OOMKilled") => {
            let at = |key: &str| -> Result<Option<i64>, String> {
                t.get(key)
                    .and_then(Value::as_str)
                    .map(seconds)
                    .transpose()
                    .map_err(|e| format!("lastState.terminated.{key}: {e}"))
            };
            match (at("startedAt")?, at("finishedAt")?) {
                (Some(start), Some(end)) => Some(end - start),
                _ => None,
            }
        }
        _ => None,
    };
    Ok(ContainerState {
        name: name.into(),
        requests: resource_texts(resources.and_then(|r| r.get("requests")), "requests")?,
        limits: resource_texts(resources.and_then(|r| r.get("limits")), "limits")?,
        last_oom_after,
    })
}
