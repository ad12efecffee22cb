//! JSON at the edges of every decision: values borrowed from the input
//! ([`borrowed`]), objects with path-naming errors ([`object`]), watched
//! objects kept as their text ([`text`]) and the one-pass writer for
//! responses and patches ([`write`]).

pub mod borrowed;
pub mod object;
pub mod text;
pub mod write;

use serde_json::Value;

/// The string at `pointer`, or `""`.
pub(crate) fn str_at<'v>(value: &'v Value, pointer: &str) -> &'v str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}
