//! What a Feature declares to clear from the objects that use it
//! (`spec.cleanup`, KEP-3920's "touch all objects to remove a field"), and
//! the exact JSON patches that do it. Pure: the controller applies the plan
//! while the Feature is `TurningOff`, `nodescope features cleanup
//! --dry-run` prints it; neither knows a kind, the Feature names them.

use super::uses::{Listed, PolicyUses};
use crate::json::str_at;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// One entry of `spec.cleanup`: a field to remove from every object of
/// `group`/`resource` that uses the feature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CleanupRule {
    /// The API group, `""` for the core group.
    pub group: String,
    /// The REST resource, e.g. `verticalpodautoscalers`.
    pub resource: String,
    /// RFC 6901; under `/status` it is removed through the status
    /// subresource.
    pub json_pointer: String,
}

/// Why `spec.cleanup` cannot be followed; names the entry and the field.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CleanupError {
    #[error("Feature {feature}: spec.cleanup must be a list of {{group, resource, jsonPointer}}")]
    NotAList { feature: String },
    #[error("Feature {feature}: spec.cleanup[{index}].{field} {why}")]
    Entry {
        feature: String,
        index: usize,
        field: &'static str,
        why: String,
    },
}

/// One removal: a JSON patch of one object, guarded by the resourceVersion
/// it was read at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CleanupPatch {
    pub group: String,
    pub version: String,
    pub resource: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// The object's uid, for the Event on it.
    #[serde(skip)]
    pub uid: String,
    /// `status` for a field under `/status`; empty for the object itself.
    pub subresource: String,
    /// The field removed.
    pub json_pointer: String,
    /// `[test resourceVersion, remove json_pointer]`.
    pub patch: Value,
}

impl CleanupPatch {
    /// `Kind namespace/name`, or `Kind name` for a cluster-scoped object.
    #[must_use]
    pub fn label(&self) -> String {
        super::uses::object_label(&self.kind, &self.namespace, &self.name)
    }

    /// The resourceVersion the patch tests.
    #[must_use]
    pub fn resource_version(&self) -> &str {
        self.patch
            .pointer("/0/value")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// The same removal, guarded by `resource_version` instead (the version
    /// this pass's own previous patch of the object returned).
    #[must_use]
    pub fn at_version(&self, resource_version: &str) -> Self {
        Self {
            patch: removal(resource_version, &self.json_pointer),
            ..self.clone()
        }
    }
}

/// The Feature's `spec.cleanup`; none when absent (the default: nothing is
/// touched, the controller waits for the uses to go).
///
/// # Errors
/// An entry without a resource, or whose pointer is not a pointer or
/// names the object's identity (`/metadata`, `/apiVersion`, `/kind`).
pub fn rules(feature: &Value) -> Result<Vec<CleanupRule>, CleanupError> {
    let label = format!(
        "{}/{}",
        str_at(feature, "/metadata/namespace"),
        str_at(feature, "/metadata/name")
    );
    let entries = match feature.pointer("/spec/cleanup") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(entries)) => entries,
        Some(_) => return Err(CleanupError::NotAList { feature: label }),
    };
    let mut out = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let bad = |field: &'static str, why: &str| CleanupError::Entry {
            feature: label.clone(),
            index,
            field,
            why: why.to_owned(),
        };
        let resource = str_at(entry, "/resource");
        if resource.is_empty() {
            return Err(bad(
                "resource",
                "is required (a REST resource such as verticalpodautoscalers)",
            ));
        }
        let pointer = str_at(entry, "/jsonPointer");
        if !pointer.starts_with('/') {
            return Err(bad(
                "jsonPointer",
                "must be a JSON pointer such as /spec/scope",
            ));
        }
        let top = pointer[1..].split('/').next().unwrap_or("");
        if matches!(top, "metadata" | "apiVersion" | "kind") {
            return Err(bad(
                "jsonPointer",
                &format!("must not name the object's {top}"),
            ));
        }
        out.push(CleanupRule {
            group: str_at(entry, "/group").to_owned(),
            resource: resource.to_owned(),
            json_pointer: pointer.to_owned(),
        });
    }
    Ok(out)
}

/// Every removal `rules` ask for among the objects `uses` names (the uses of
/// one Feature, found in `listed`), one patch per object and field that is
/// present: by resource, namespace and name; for each object the fields
/// under `/status` first, so that an object stays a use (and is found again
/// by the next pass) until its last field is gone.
#[must_use]
pub fn plan(rules: &[CleanupRule], uses: &[PolicyUses], listed: &[Listed]) -> Vec<CleanupPatch> {
    let used: BTreeSet<(&str, &str, &str, &str)> = uses
        .iter()
        .flat_map(|p| &p.uses)
        .map(|u| {
            (
                u.group.as_str(),
                u.resource.as_str(),
                u.namespace.as_str(),
                u.name.as_str(),
            )
        })
        .collect();
    let mut out = Vec::new();
    for list in listed {
        let wanted: Vec<&CleanupRule> = rules
            .iter()
            .filter(|r| r.group == list.group && r.resource == list.resource)
            .collect();
        if wanted.is_empty() {
            continue;
        }
        for object in &list.objects {
            let key = (
                str_at(object, "/kind"),
                str_at(object, "/metadata/namespace"),
                str_at(object, "/metadata/name"),
            );
            if !used.contains(&(list.group.as_str(), list.resource.as_str(), key.1, key.2)) {
                continue;
            }
            let version = str_at(object, "/metadata/resourceVersion");
            let mut fields: Vec<&CleanupRule> = wanted
                .iter()
                .copied()
                .filter(|r| object.pointer(&r.json_pointer).is_some())
                .collect();
            fields.sort_by_key(|r| !is_status(&r.json_pointer));
            for rule in fields {
                out.push(CleanupPatch {
                    group: list.group.clone(),
                    version: list.version.clone(),
                    resource: list.resource.clone(),
                    kind: key.0.to_owned(),
                    namespace: key.1.to_owned(),
                    name: key.2.to_owned(),
                    uid: str_at(object, "/metadata/uid").to_owned(),
                    subresource: if is_status(&rule.json_pointer) {
                        "status".to_owned()
                    } else {
                        String::new()
                    },
                    json_pointer: rule.json_pointer.clone(),
                    patch: removal(version, &rule.json_pointer),
                });
            }
        }
    }
    out.sort_by(|a, b| {
        (&a.group, &a.resource, &a.namespace, &a.name).cmp(&(
            &b.group,
            &b.resource,
            &b.namespace,
            &b.name,
        ))
    });
    out
}

/// How many objects of `listed` still hold each field `rules` name:
/// `(rule, count)` for the fields some object holds. These fields exist
/// only while the API that carries them defines them; an API whose schema
/// is replaced by one without them (upstream's VPA CRD for nodescope's)
/// loses them to pruning.
#[must_use]
pub fn held<'r>(rules: &'r [CleanupRule], listed: &[Listed]) -> Vec<(&'r CleanupRule, usize)> {
    rules
        .iter()
        .map(|rule| {
            let count = listed
                .iter()
                .filter(|l| l.group == rule.group && l.resource == rule.resource)
                .flat_map(|l| &l.objects)
                .filter(|o| o.pointer(&rule.json_pointer).is_some_and(|v| !is_empty(v)))
                .count();
            (rule, count)
        })
        .filter(|(_, count)| *count > 0)
        .collect()
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

fn is_status(pointer: &str) -> bool {
    pointer == "/status" || pointer.starts_with("/status/")
}

fn removal(resource_version: &str, pointer: &str) -> Value {
    json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
        {"op": "remove", "path": pointer}
    ])
}

#[cfg(test)]
#[path = "cleanup_tests.rs"]
mod tests;
