//! Typed views of JSON objects whose errors read as JSON, not as Rust.
//!
//! serde's derive words its errors after the Rust type (`expected struct
//! PodMeta`) and also takes a JSON array for a struct, field by field, so
//! `[]` fails with `invalid length 0, expected struct RawReview with 3
//! elements`. A type that implements [`FromObject`] and deserializes through
//! [`object`] (the [`object_only!`] macro writes both impls) accepts only a
//! JSON object and otherwise says `invalid type: array, expected an object`.
//! [`with_path`] then names the field: `request.uid: invalid type: ...`.

use serde::de::{self, Deserializer, MapAccess, Unexpected, Visitor};
use serde::Deserialize;
use std::fmt;
use std::marker::PhantomData;

/// A type read from the fields of a JSON object: `from_fields` is serde's
/// derived deserializer, made an inherent function by
/// `#[serde(remote = "Self")]` so that `Deserialize` can go through
/// [`object`] instead.
pub trait FromObject<'de>: Sized {
    /// The derived deserializer.
    fn from_fields<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error>;
}

/// Deserializes `T` from a JSON object, and from nothing else.
pub fn object<'de, D: Deserializer<'de>, T: FromObject<'de>>(
    deserializer: D,
) -> Result<T, D::Error> {
    deserializer.deserialize_any(ObjectVisitor(PhantomData))
}

struct ObjectVisitor<T>(PhantomData<T>);

impl<'de, T: FromObject<'de>> Visitor<'de> for ObjectVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::from_fields(de::value::MapAccessDeserializer::new(map))
    }

    // serde's own words for these are "sequence" and "unit value".
    fn visit_seq<A: de::SeqAccess<'de>>(self, _seq: A) -> Result<T, A::Error> {
        Err(de::Error::invalid_type(Unexpected::Other("array"), &self))
    }

    fn visit_unit<E: de::Error>(self) -> Result<T, E> {
        Err(de::Error::invalid_type(Unexpected::Other("null"), &self))
    }
}

/// Implements `Deserialize` through [`object`] and [`FromObject`] for types
/// that derive `Deserialize` with `#[serde(remote = "Self")]` and have no
/// parameters or one lifetime `'a` that they borrow from the input.
#[macro_export]
macro_rules! object_only {
    ($($ty:ident $(<$lt:lifetime>)?),+ $(,)?) => {$(
        $crate::object_only!(@one $ty $(<$lt>)?);
    )+};
    (@one $ty:ident <$lt:lifetime>) => {
        impl<'de: $lt, $lt> ::serde::Deserialize<'de> for $ty<$lt> {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $crate::json::object::object(d)
            }
        }
        impl<'de: $lt, $lt> $crate::json::object::FromObject<'de> for $ty<$lt> {
            fn from_fields<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $ty::deserialize(d)
            }
        }
    };
    (@one $ty:ident) => {
        impl<'de> ::serde::Deserialize<'de> for $ty {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $crate::json::object::object(d)
            }
        }
        impl<'de> $crate::json::object::FromObject<'de> for $ty {
            fn from_fields<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $ty::deserialize(d)
            }
        }
    };
}

/// `error`, which reading `text` as `T` gave, prefixed with the path of the
/// field it is about (`spec.containers[0].name: ...`).
///
/// The path costs a second, slower parse, so it is taken only once the
/// fast one has failed. If the second parse fails differently (it should
/// not), the original error is kept as it was.
#[must_use]
pub fn with_path<'a, T: Deserialize<'a>>(text: &'a str, error: &serde_json::Error) -> String {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    match serde_path_to_error::deserialize::<_, T>(&mut deserializer) {
        Err(traced) if traced.inner().to_string() == error.to_string() => {
            prefixed(&traced.path().to_string(), error)
        }
        _ => error.to_string(),
    }
}

/// The same as [`with_path`] for a document already parsed into a value.
#[must_use]
pub fn value_with_path<T: serde::de::DeserializeOwned>(
    value: &serde_json::Value,
    error: &serde_json::Error,
) -> String {
    match serde_path_to_error::deserialize::<_, T>(value) {
        Err(traced) if traced.inner().to_string() == error.to_string() => {
            prefixed(&traced.path().to_string(), error)
        }
        _ => error.to_string(),
    }
}

fn prefixed(path: &str, error: &impl fmt::Display) -> String {
    let error = error.to_string();
    // "." is serde_path_to_error's name for the whole document. An unknown
    // field's path ends in the field itself, which the message names.
    if path == "." || error.starts_with("unknown field") {
        error
    } else {
        format!("{path}: {error}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    #[derive(Debug, Deserialize)]
    #[serde(remote = "Self")]
    struct Outer<'a> {
        #[serde(borrow)]
        inner: Option<Inner<'a>>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(remote = "Self", default)]
    struct Inner<'a> {
        #[serde(borrow)]
        name: Cow<'a, str>,
        list: Vec<Inner<'a>>,
    }

    impl Default for Inner<'_> {
        fn default() -> Self {
            Self {
                name: Cow::Borrowed(""),
                list: Vec::new(),
            }
        }
    }

    object_only!(Outer<'a>, Inner<'a>);

    fn error(text: &str) -> String {
        let error = serde_json::from_str::<Outer<'_>>(text).expect_err("an error");
        with_path::<Outer<'_>>(text, &error)
    }

    #[test]
    fn an_object_is_read_and_borrows_from_the_input() {
        let text = r#"{"inner":{"name":"n","list":[{"name":"m"}]}}"#;
        let outer: Outer<'_> = serde_json::from_str(text).expect("reads");
        let inner = outer.inner.expect("inner");
        assert!(matches!(inner.name, Cow::Borrowed("n")));
        assert_eq!(inner.list[0].name, "m");
    }

    #[test]
    fn an_array_where_an_object_belongs_is_named_as_json_not_as_rust() {
        assert_eq!(
            error("[]"),
            "invalid type: array, expected an object at line 1 column 2"
        );
        assert_eq!(
            error(r#"{"inner":[]}"#),
            "inner: invalid type: array, expected an object at line 1 column 11"
        );
    }

    #[test]
    fn the_path_names_the_field_in_error() {
        assert_eq!(
            error(r#"{"inner":{"list":[{"name":5}]}}"#),
            "inner.list[0].name: invalid type: integer `5`, expected a string at line 1 column 27"
        );
        assert_eq!(
            error(r#"{"inner":{"list":[null]}}"#),
            "inner.list[0]: invalid type: null, expected an object at line 1 column 22"
        );
    }

    #[test]
    fn null_for_an_optional_object_is_absent() {
        let outer: Outer<'_> = serde_json::from_str(r#"{"inner":null}"#).expect("reads");
        assert!(outer.inner.is_none());
    }
}
