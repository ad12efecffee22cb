//! The JSON Patch the mutation returns: only `add` operations whose values
//! are a string or a flat map of strings, written straight to bytes.
//!
//! A general `json_patch::PatchOperation` with a `serde_json::Value` costs a
//! tree and a pointer type per operation on every pod; this type costs one
//! path string and writes the wire form in one pass. `operations()` gives
//! the `json_patch` form for code that applies patches.

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

/// The value of one `add` operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PatchValue {
    /// A string, e.g. a quantity or an annotation value.
    Text(String),
    /// A map of strings; empty when the patch creates a map to add keys to.
    Map(Vec<(String, String)>),
}

/// One `add` operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddOp {
    /// A JSON Pointer, already escaped.
    pub path: String,
    /// What is added there.
    pub value: PatchValue,
}

/// The operations of one mutation, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Patch(Vec<AddOp>);

pub use crate::json::write::{push_token, write_json_object, write_json_str};

impl Patch {
    pub(super) fn add(&mut self, path: String, value: PatchValue) {
        self.0.push(AddOp { path, value });
    }

    /// Whether there is nothing to change.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many operations there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The operations in order.
    pub fn iter(&self) -> impl Iterator<Item = &AddOp> {
        self.0.iter()
    }

    /// The patch as the JSON array the admission response carries.
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.0.len() * 96);
        out.push(b'[');
        for (i, op) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(br#"{"op":"add","path":"#);
            write_json_str(&mut out, &op.path);
            out.extend_from_slice(br#","value":"#);
            match &op.value {
                PatchValue::Text(text) => write_json_str(&mut out, text),
                PatchValue::Map(entries) => write_json_object(
                    &mut out,
                    entries.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                ),
            }
            out.push(b'}');
        }
        out.push(b']');
        out
    }

    /// The operations as `json_patch` values, to apply with `json_patch::patch`.
    pub fn operations(&self) -> Vec<json_patch::PatchOperation> {
        self.0
            .iter()
            .map(|op| {
                let value = match &op.value {
                    PatchValue::Text(t) => serde_json::Value::String(t.clone()),
                    PatchValue::Map(entries) => serde_json::Value::Object(
                        entries
                            .iter()
                            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                            .collect(),
                    ),
                };
                json_patch::PatchOperation::Add(json_patch::AddOperation {
                    path: json_patch::jsonptr::PointerBuf::parse(op.path.as_str())
                        .unwrap_or_default(),
                    value,
                })
            })
            .collect()
    }
}

impl Serialize for PatchValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            PatchValue::Text(t) => s.serialize_str(t),
            PatchValue::Map(entries) => {
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl Serialize for AddOp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("op", "add")?;
        map.serialize_entry("path", &self.path)?;
        map.serialize_entry("value", &self.value)?;
        map.end()
    }
}

impl Serialize for Patch {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for op in &self.0 {
            seq.serialize_element(op)?;
        }
        seq.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_form_equals_serde_and_escapes_what_json_needs() {
        let mut patch = Patch::default();
        let mut path = String::from("/metadata/annotations");
        push_token(&mut path, "example.com/a~b");
        patch.add(path, PatchValue::Text("quote \" and \\ and \u{1}".into()));
        patch.add(
            "/metadata/labels".into(),
            PatchValue::Map(vec![("k".into(), "v".into()), ("é".into(), "ü".into())]),
        );
        patch.add("/spec/x".into(), PatchValue::Map(Vec::new()));
        let wire = patch.to_json();
        let via_serde = serde_json::to_vec(&patch).unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&wire),
            String::from_utf8_lossy(&via_serde)
        );
        assert!(String::from_utf8_lossy(&wire)
            .contains(r#""path":"/metadata/annotations/example.com~1a~0b""#));
        let applied = patch.operations();
        assert_eq!(applied.len(), 3);
    }
}
