//! [`Json`]: one read-only view over a parsed `serde_json::Value` or a node
//! of a [`super::LazyReview`], so the engine reads both alike. Reads only:
//! parsing belongs to [`super::lazy`].

use super::lazy::{LazyNode, LazyObject, Parsed};
use serde_json::Value;
use serde_json::{Map, Number};
use std::sync::OnceLock;

/// A JSON value the engine reads: a borrowed `serde_json::Value` or a node
/// of a [`LazyReview`] (with the body its spans index).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Json<'a> {
    Value(&'a Value),
    Lazy(&'a LazyNode, &'a str),
}

impl<'a> From<&'a Value> for Json<'a> {
    fn from(value: &'a Value) -> Self {
        Json::Value(value)
    }
}

/// What a [`Json`] is, one level deep.
pub(crate) enum Shape<'a> {
    /// See [`Parsed::Invalid`].
    Invalid,
    Null,
    Bool(bool),
    Number(&'a Number),
    String(&'a str),
    Array(Items<'a>),
    Object(Fields<'a>),
}

/// The elements of a JSON array.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Items<'a> {
    Value(&'a [Value]),
    Lazy(&'a [LazyNode], &'a str),
}

impl<'a> Items<'a> {
    pub(crate) fn len(self) -> usize {
        match self {
            Items::Value(items) => items.len(),
            Items::Lazy(items, _) => items.len(),
        }
    }

    pub(crate) fn get(self, index: usize) -> Option<Json<'a>> {
        match self {
            Items::Value(items) => items.get(index).map(Json::Value),
            Items::Lazy(items, base) => items.get(index).map(|item| Json::Lazy(item, base)),
        }
    }
}

/// The fields of a JSON object, in key order.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Fields<'a> {
    Value(&'a Map<String, Value>),
    Lazy(&'a LazyObject, &'a str),
}

impl<'a> Fields<'a> {
    /// The field, even if it is null.
    pub(crate) fn get(self, key: &str) -> Option<Json<'a>> {
        match self {
            Fields::Value(map) => map.get(key).map(Json::Value),
            Fields::Lazy(object, base) => object.get(key, base).map(|node| Json::Lazy(node, base)),
        }
    }

    pub(crate) fn iter(self) -> impl Iterator<Item = (&'a str, Json<'a>)> {
        let (map, entries) = match self {
            Fields::Value(map) => (Some(map), None),
            Fields::Lazy(object, base) => (None, Some((object, base))),
        };
        map.into_iter()
            .flat_map(|map| map.iter().map(|(k, v)| (k.as_str(), Json::Value(v))))
            .chain(entries.into_iter().flat_map(|(object, base)| {
                object
                    .sorted(base)
                    .map(move |(k, v)| (k.get(base), Json::Lazy(v, base)))
            }))
    }
}

impl<'a> Json<'a> {
    /// What the value is; a raw lazy node is parsed here, once.
    pub(crate) fn shape(self) -> Shape<'a> {
        match self {
            Json::Value(value) => match value {
                Value::Null => Shape::Null,
                Value::Bool(b) => Shape::Bool(*b),
                Value::Number(n) => Shape::Number(n),
                Value::String(s) => Shape::String(s),
                Value::Array(items) => Shape::Array(Items::Value(items)),
                Value::Object(map) => Shape::Object(Fields::Value(map)),
            },
            Json::Lazy(node, base) => match node.get(base) {
                Parsed::Invalid => Shape::Invalid,
                Parsed::Null => Shape::Null,
                Parsed::Bool(b) => Shape::Bool(*b),
                Parsed::Number(n) => Shape::Number(n),
                Parsed::String(s) => Shape::String(s.get(base)),
                Parsed::Array(items) => Shape::Array(Items::Lazy(items, base)),
                Parsed::Object(object) => Shape::Object(Fields::Lazy(object, base)),
            },
        }
    }

    /// Whether the value is JSON null (a raw node is not parsed for this).
    pub(crate) fn is_null(self) -> bool {
        match self {
            Json::Value(value) => value.is_null(),
            Json::Lazy(node, base) => node.is_null(base),
        }
    }

    /// The field `key` of an object (null included); `None` otherwise.
    pub(crate) fn get(self, key: &str) -> Option<Json<'a>> {
        match self.shape() {
            Shape::Object(fields) => fields.get(key),
            _ => None,
        }
    }

    pub(crate) fn as_str(self) -> Option<&'a str> {
        match self.shape() {
            Shape::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as a `serde_json::Value`: borrowed, or built into `cache`
    /// (once) for a lazy node.
    pub(super) fn value(self, cache: Option<&'a OnceLock<Value>>) -> &'a Value {
        static NULL: Value = Value::Null;
        match (self, cache) {
            (Json::Value(value), _) => value,
            (Json::Lazy(node, base), Some(cache)) => cache.get_or_init(|| node.to_value(base)),
            // Not reached: lazy inputs always come with their cache.
            (Json::Lazy(..), None) => &NULL,
        }
    }
}
