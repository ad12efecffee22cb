//! An object of any kind as the API server sent it: its JSON text, and the
//! three metadata fields kube's watcher reads.
//!
//! A watch over `DynamicObject` or a typed k8s-openapi object builds a page
//! of 500 whole objects before the first is handed on: for `DynamicObject`
//! each is first buffered as serde `Content` (its fields are flattened) and
//! then built again as a `Value` tree. A scoped VPA with a group per node of
//! 5,000 is 3 MB of text and ten times that as trees, and a pod a few KB of
//! text and tens of KB as a typed `Pod`. Watching [`ObjectText`] keeps a page
//! as the text the API server sent, and each component reads from it, one
//! object at a time, only the fields it decides with (the webhook's
//! [`crate::store::Entry::from_text`], the recommender's and the updater's
//! pod readers).

use kube::api::{ApiResource, ObjectMeta};
use kube::core::{DynamicResourceScope, Resource};
use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use std::borrow::Cow;
use std::fmt;

/// One object's JSON text; a `Resource` of whatever [`ApiResource`] the
/// `Api` was made for, as `DynamicObject` is.
#[derive(Clone, Debug)]
pub struct ObjectText {
    /// `name`, `namespace` and `resourceVersion` only.
    metadata: ObjectMeta,
    text: Box<str>,
}

/// The name serde_json answers with an object's text instead of its
/// fields (how `RawValue` is read). Any other deserializer, and one that
/// has buffered the object first (serde's `Content`, for a watch event
/// whose `object` comes before its `type`), answers with the object
/// itself, which is then read as a `Value` and written back as text: the
/// same text, at the cost of a tree for that one object. So a change of
/// this name in serde_json costs speed, never correctness.
const RAW_VALUE: &str = "$serde_json::private::RawValue";

impl ObjectText {
    /// The object's JSON text, as received.
    #[must_use]
    pub fn text(&self) -> &str {
        &self.text
    }

    /// `metadata.name`, or `""`.
    #[must_use]
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }

    /// `metadata.namespace`, or `""`.
    #[must_use]
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or("")
    }

    /// An object built here rather than received (a Node reduced to the
    /// labels the store keeps): the text of `value`, read as `metadata`.
    #[must_use]
    pub fn built(metadata: ObjectMeta, value: &serde_json::Value) -> Self {
        ObjectText {
            metadata,
            text: value.to_string().into(),
        }
    }

    /// The text of `value`, its metadata read from it.
    ///
    /// # Errors
    /// When `value` is not an object with readable metadata.
    pub fn from_value(value: &serde_json::Value) -> Result<Self, serde_json::Error> {
        Self::from_text(value.to_string().into())
    }

    /// `text`, which is one JSON value, with its metadata read from it.
    fn from_text(text: Box<str>) -> Result<Self, serde_json::Error> {
        let mut found = MetaPeek::default();
        let mut de = serde_json::Deserializer::from_str(&text);
        // Reading stops once `metadata` is read, so serde_json reports the
        // unfinished object as an error; the text itself was already read
        // whole as JSON, so only an error inside `metadata` counts.
        let stopped = de::Deserializer::deserialize_map(&mut de, &mut found);
        match (found.metadata, stopped) {
            (Some(meta), _) => Ok(ObjectText {
                metadata: ObjectMeta {
                    name: meta.name,
                    namespace: meta.namespace,
                    resource_version: meta.resource_version,
                    ..ObjectMeta::default()
                },
                text,
            }),
            (None, Err(e)) if found.failed => Err(e),
            (None, Err(e)) if !text.trim_start().starts_with('{') => Err(e),
            (None, _) => Ok(ObjectText {
                metadata: ObjectMeta::default(),
                text,
            }),
        }
    }
}

/// An object's `text` (a list item or a watch event's object, which carry
/// no type) as the JSON a file would hold: with `apiVersion` and `kind`.
///
/// # Errors
/// When `text` is not JSON.
pub fn value_with_type(
    text: &str,
    api_version: &str,
    kind: &str,
) -> Result<serde_json::Value, serde_json::Error> {
    let mut value: serde_json::Value = serde_json::from_str(text)?;
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), api_version.into());
        map.insert("kind".into(), kind.into());
    }
    Ok(value)
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Meta {
    name: Option<String>,
    namespace: Option<String>,
    resource_version: Option<String>,
}

/// Reads keys until `metadata`, which kube and kubectl write before `spec`
/// and `status`, so a VPA's thousands of groups are not scanned twice.
#[derive(Default)]
struct MetaPeek {
    metadata: Option<Meta>,
    /// `metadata` itself could not be read.
    failed: bool,
}

impl<'de> Visitor<'de> for &mut MetaPeek {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if key == "metadata" {
                self.failed = true;
                self.metadata = Some(map.next_value()?);
                self.failed = false;
                return Ok(());
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }
}

/// An object's JSON text, however the deserializer offers it ([`RAW_VALUE`]).
struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<String, A::Error> {
        let Some(first) = map.next_key::<String>()? else {
            return Ok("{}".to_owned());
        };
        if first == RAW_VALUE {
            return map.next_value();
        }
        // A map offered field by field: the object itself.
        let mut object = serde_json::Map::new();
        object.insert(first, map.next_value()?);
        while let Some((key, value)) = map.next_entry()? {
            object.insert(key, value);
        }
        Ok(serde_json::Value::Object(object).to_string())
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        serde_json::Value::deserialize(d).map(|v| v.to_string())
    }
}

impl<'de> Deserialize<'de> for ObjectText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = deserializer.deserialize_newtype_struct(RAW_VALUE, TextVisitor)?;
        // The position is within the object's own text; serde_json adds
        // where the object is in the page or event.
        Self::from_text(text.into())
            .map_err(|e| de::Error::custom(format_args!("in the object: {e}")))
    }
}

impl Resource for ObjectText {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::{ObjectList, WatchEvent};
    use kube::ResourceExt;

    #[test]
    fn a_list_page_keeps_each_item_as_its_text_with_the_metadata_the_watcher_reads() {
        let page = r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"99"},"items":[
            {"metadata":{"name":"a","namespace":"ns","resourceVersion":"7","labels":{"x":"y"}},"spec":{"nodeName":"n1"}},
            {"spec":{"nodeName":"n2"},"metadata":{"name":"b","namespace":"ns","resourceVersion":"8"}}]}"#;
        let list: ObjectList<ObjectText> = serde_json::from_str(page).expect("a list");
        assert_eq!(list.metadata.resource_version.as_deref(), Some("99"));
        let seen: Vec<_> = list
            .items
            .iter()
            .map(|o| (o.namespace(), o.name(), o.resource_version(), o.text()))
            .collect();
        assert_eq!(
            seen,
            [
                (
                    "ns",
                    "a",
                    Some("7".to_owned()),
                    r#"{"metadata":{"name":"a","namespace":"ns","resourceVersion":"7","labels":{"x":"y"}},"spec":{"nodeName":"n1"}}"#
                ),
                (
                    "ns",
                    "b",
                    Some("8".to_owned()),
                    r#"{"spec":{"nodeName":"n2"},"metadata":{"name":"b","namespace":"ns","resourceVersion":"8"}}"#
                ),
            ]
        );
    }

    #[test]
    fn a_watch_event_carries_the_object_text() {
        let line = r#"{"type":"MODIFIED","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","resourceVersion":"12"}}}"#;
        match serde_json::from_str::<WatchEvent<ObjectText>>(line).expect("an event") {
            WatchEvent::Modified(o) => {
                assert_eq!((o.name(), o.resource_version()), ("a", Some("12".into())));
                assert_eq!(
                    o.text(),
                    r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","resourceVersion":"12"}}"#
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_event_whose_object_comes_before_its_type_is_read_all_the_same() {
        // serde buffers the object when `object` precedes `type`; the text
        // is then written again from what it buffered.
        let line = r#"{"object":{"metadata":{"name":"a","resourceVersion":"12"},"spec":{"x":[1,{"y":null}]}},"type":"ADDED"}"#;
        match serde_json::from_str::<WatchEvent<ObjectText>>(line).expect("an event") {
            WatchEvent::Added(o) => {
                assert_eq!((o.name(), o.resource_version()), ("a", Some("12".into())));
                assert_eq!(
                    o.text(),
                    r#"{"metadata":{"name":"a","resourceVersion":"12"},"spec":{"x":[1,{"y":null}]}}"#
                );
            }
            other => panic!("{other:?}"),
        }
        // And from a Value, which hands over the text as serde_json does.
        let value = serde_json::json!({"metadata": {"name": "b"}});
        let o: ObjectText = serde_json::from_value(value).expect("an object");
        assert_eq!((o.name(), o.text()), ("b", r#"{"metadata":{"name":"b"}}"#));
        // A deserializer that offers any object field by field.
        let fields = serde::de::value::MapDeserializer::<_, serde_json::Error>::new(
            [("kind", "Pod"), ("apiVersion", "v1")].into_iter(),
        );
        let o = ObjectText::deserialize(fields).expect("an object");
        assert_eq!(o.text(), r#"{"apiVersion":"v1","kind":"Pod"}"#);
    }

    #[test]
    fn bad_metadata_or_a_non_object_is_an_error_and_no_metadata_is_none() {
        let err = |text: &str| {
            serde_json::from_str::<ObjectText>(text)
                .expect_err(text)
                .to_string()
        };
        assert_eq!(
            err(r#"{"metadata":{"name":7}}"#),
            "in the object: invalid type: integer `7`, expected a string at line 1 column 21"
        );
        assert_eq!(
            err("[1]"),
            "in the object: invalid type: sequence, expected a Kubernetes object at line 1 column 0"
        );
        let bare: ObjectText = serde_json::from_str(r#"{"spec":{}}"#).expect("an object");
        assert_eq!((bare.name(), bare.resource_version()), ("", None));
    }
}
