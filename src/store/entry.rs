//! One Kubernetes object reduced to what the snapshot indexes, converted
//! once when it is read or watched.
//!
//! Keeping converted entries (not raw objects) is what makes a snapshot cheap
//! to rebuild: a watch event converts only the object that changed, and
//! [`super::Snapshot::from_entries`] then only clones `Arc`s into fresh
//! indexes, whatever the number of nodes per VPA.

use super::convert::{
    limit_range_items, scoped_daemonset_target, vpa_policy, ConvertError, Interner, VpaDoc,
};
use crate::json::text::value_with_type;
use crate::manifest::object_ref;
use crate::vpa::{LimitRangeItem, VpaPolicy};
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;
use std::sync::Arc;

/// What one object contributes to a snapshot.
#[derive(Debug, Clone)]
pub enum Entry {
    /// A scoped VPA for DaemonSet `daemonset`; `created` orders rivals.
    Vpa {
        daemonset: String,
        created: String,
        /// `metadata.resourceVersion`: the updater acts on a VPA only while
        /// the apiserver still holds this version (empty in a file store).
        resource_version: Arc<str>,
        policy: Arc<VpaPolicy>,
    },
    /// The Container and Pod items of one LimitRange.
    LimitRange {
        namespace: String,
        items: Arc<[LimitRangeItem]>,
    },
    /// A Namespace, for `namespaceObject` and namespace selectors.
    Namespace { name: String, object: Arc<Value> },
    /// A Node's labels, for label scopes (AEP-10031); nothing else of it.
    Node {
        name: Arc<str>,
        labels: Arc<[(Arc<str>, Arc<str>)]>,
    },
    /// Anything else: a possible policy param (Feature, ConfigMap, ...).
    Param {
        api_version: String,
        kind: String,
        namespace: String,
        name: String,
        object: Arc<Value>,
    },
    /// A VPA without a scope or that does not target a DaemonSet.
    Ignored,
    /// An object that cannot be used, with the reason.
    Problem(ConvertError),
}

/// `apiVersion` and `kind` of one object, read from its first keys.
///
/// Kubernetes and kubectl write them first, so reading stops after a few
/// bytes instead of skipping a VPA's whole status; serde_json then reports
/// the unfinished map as an error, which is ignored once both were found.
/// A malformed object is still caught by the full parse that follows.
#[derive(Default)]
struct TypePeek<'a> {
    api_version: Option<Cow<'a, str>>,
    kind: Option<Cow<'a, str>>,
}

impl<'de> Visitor<'de> for &mut TypePeek<'de> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match &*key {
                "apiVersion" => self.api_version = Some(map.next_value()?),
                "kind" => self.kind = Some(map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            if self.api_version.is_some() && self.kind.is_some() {
                break;
            }
        }
        Ok(())
    }
}

fn peek_type(text: &str) -> (Cow<'_, str>, Cow<'_, str>) {
    let mut found = TypePeek::default();
    let mut de = serde_json::Deserializer::from_str(text);
    // Err is expected when reading stopped early; see `TypePeek`.
    let _ = serde::Deserializer::deserialize_map(&mut de, &mut found);
    (
        found.api_version.unwrap_or_default(),
        found.kind.unwrap_or_default(),
    )
}

const VPA: (&str, &str) = ("autoscaling.k8s.io/v1", "VerticalPodAutoscaler");

fn problem(object: String, field: &str, error: impl std::fmt::Display) -> Entry {
    Entry::Problem(ConvertError {
        object,
        field: field.to_owned(),
        reason: crate::messages::plain_serde_message(&error.to_string()),
    })
}

/// A typed read of an object that says which field failed.
fn typed<'de, T: Deserialize<'de>>(object: &'de Value) -> Result<T, (String, serde_json::Error)> {
    serde_path_to_error::deserialize(object).map_err(|e| {
        let field = match e.path().to_string().as_str() {
            "" | "." => "(object)".to_owned(),
            path => path.to_owned(),
        };
        (field, e.into_inner())
    })
}

impl Entry {
    /// Converts an object already parsed as JSON (YAML files, watch events).
    pub fn from_value(object: Value, interner: &mut Interner) -> Entry {
        let str_at = |p: &str| object.pointer(p).and_then(Value::as_str).unwrap_or("");
        let (api_version, kind) = (str_at("/apiVersion"), str_at("/kind"));
        if (api_version, kind) == VPA {
            return match typed::<VpaDoc<'_>>(&object) {
                Ok(doc) => Self::vpa(&doc, interner),
                Err((field, e)) => problem(object_ref(&object), &field, e),
            };
        }
        Self::other(object, interner)
    }

    /// Converts one object from its JSON text without building a `Value`
    /// for VPAs, whose per-node status is most of a large store.
    pub fn from_json(text: &str, interner: &mut Interner) -> Entry {
        let (api_version, kind) = peek_type(text);
        if (&*api_version, &*kind) == VPA {
            return Self::vpa_text(text, interner);
        }
        match serde_json::from_str::<Value>(text) {
            Ok(value) => Self::other(value, interner),
            Err(e) => problem("(object)".to_owned(), "(object)", e),
        }
    }

    /// Converts one watched object of type (`api_version`, `kind`) from its
    /// text: list items carry neither, so the watch says what they are.
    pub fn from_text(text: &str, api_version: &str, kind: &str, interner: &mut Interner) -> Entry {
        if (api_version, kind) == VPA {
            return Self::vpa_text(text, interner);
        }
        match value_with_type(text, api_version, kind) {
            Ok(value) => Self::other(value, interner),
            Err(e) => problem(format!("{kind} (object)"), "(object)", e),
        }
    }

    fn vpa_text(text: &str, interner: &mut Interner) -> Entry {
        match serde_json::from_str::<VpaDoc<'_>>(text) {
            Ok(doc) => Self::vpa(&doc, interner),
            Err(e) => {
                // Name the object if its metadata can be read at all.
                let name = serde_json::from_str::<Value>(text).map_or_else(
                    |_| "VerticalPodAutoscaler".to_owned(),
                    |mut v| {
                        if let Value::Object(map) = &mut v {
                            map.entry("kind")
                                .or_insert_with(|| Value::String(VPA.1.to_owned()));
                        }
                        object_ref(&v)
                    },
                );
                problem(name, "(object)", e)
            }
        }
    }

    fn vpa(doc: &VpaDoc<'_>, interner: &mut Interner) -> Entry {
        let Some(daemonset) = scoped_daemonset_target(&doc.spec) else {
            return Entry::Ignored;
        };
        match vpa_policy(doc, interner) {
            Ok(policy) => Entry::Vpa {
                daemonset: daemonset.to_owned(),
                // No timestamp (a file store): sorts after every real one.
                created: doc
                    .metadata
                    .creation_timestamp
                    .as_deref()
                    .unwrap_or("~")
                    .to_owned(),
                resource_version: Arc::from(doc.metadata.resource_version.as_deref().unwrap_or("")),
                policy: Arc::new(policy),
            },
            Err(e) => Entry::Problem(e),
        }
    }

    fn other(object: Value, interner: &mut Interner) -> Entry {
        let str_at = |p: &str| {
            object
                .pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let (api_version, kind) = (str_at("/apiVersion"), str_at("/kind"));
        match (api_version.as_str(), kind.as_str()) {
            ("v1", "LimitRange") => {
                let reference = object_ref(&object);
                match typed::<k8s_openapi::api::core::v1::LimitRange>(&object) {
                    Ok(lr) => match limit_range_items(&lr) {
                        Ok(items) => Entry::LimitRange {
                            namespace: lr.metadata.namespace.unwrap_or_default(),
                            items: items.into(),
                        },
                        Err(e) => Entry::Problem(e),
                    },
                    Err((field, e)) => problem(reference, &field, e),
                }
            }
            ("v1", "Node") => Entry::Node {
                name: interner.intern(&str_at("/metadata/name")),
                labels: object
                    .pointer("/metadata/labels")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                    .filter_map(|(k, v)| Some((interner.intern(k), interner.intern(v.as_str()?))))
                    .collect(),
            },
            ("v1", "Namespace") => Entry::Namespace {
                name: str_at("/metadata/name"),
                object: Arc::new(object),
            },
            _ => Entry::Param {
                namespace: str_at("/metadata/namespace"),
                name: str_at("/metadata/name"),
                api_version,
                kind,
                object: Arc::new(object),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_type_is_found_wherever_the_keys_are() {
        let late = r#"{"metadata":{"name":"x","kind":"Decoy"},"status":{"a":[1,2]},"kind":"VerticalPodAutoscaler","apiVersion":"autoscaling.k8s.io/v1"}"#;
        let (api_version, kind) = peek_type(late);
        assert_eq!((&*api_version, &*kind), VPA);
        let (api_version, kind) =
            peek_type(r#"{"kind":"Namespace","apiVersion":"v1","metadata":{}}"#);
        assert_eq!((&*api_version, &*kind), ("v1", "Namespace"));
        let (api_version, kind) = peek_type("[1,2]");
        assert_eq!((&*api_version, &*kind), ("", ""));
    }

    #[test]
    fn a_watched_object_takes_its_type_from_the_watch() {
        let mut interner = Interner::default();
        let text = r#"{"metadata":{"name":"x","namespace":"ns"},"spec":{"scope":7}}"#;
        match Entry::from_text(text, VPA.0, VPA.1, &mut interner) {
            Entry::Problem(e) => assert_eq!(
                e.to_string(),
                "VerticalPodAutoscaler/ns/x: (object): invalid type: integer `7`, expected a string at line 1 column 59"
            ),
            other => panic!("{other:?}"),
        }
        let text = r#"{"metadata":{"name":"n1","labels":{"zone":"a"}}}"#;
        match Entry::from_text(text, "v1", "Node", &mut interner) {
            Entry::Node { name, labels } => {
                assert_eq!(&*name, "n1");
                assert_eq!(labels.len(), 1);
                assert_eq!((&*labels[0].0, &*labels[0].1), ("zone", "a"));
            }
            other => panic!("{other:?}"),
        }
        match Entry::from_text(text, "v1", "ConfigMap", &mut interner) {
            Entry::Param {
                api_version, kind, ..
            } => assert_eq!((&*api_version, &*kind), ("v1", "ConfigMap")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_object_broken_after_its_type_is_still_a_problem_not_a_vpa() {
        let mut interner = Interner::default();
        let text = r#"{"apiVersion":"autoscaling.k8s.io/v1","kind":"VerticalPodAutoscaler","metadata":{"name":"x","namespace":"ns"},"spec":{"scope":7}}"#;
        match Entry::from_json(text, &mut interner) {
            Entry::Problem(e) => assert_eq!(
                e.to_string(),
                "VerticalPodAutoscaler/ns/x: (object): invalid type: integer `7`, expected a string at line 1 column 127"
            ),
            other => panic!("{other:?}"),
        }
    }
}
