//! The lazy review: an AdmissionReview body read without building what no
//! expression reads. Must not decide anything; [`super::AdmissionRequestInput`]
//! and the engine read it through [`super::view::Json`].
//!
//! Parsing a whole review into a `serde_json::Value` allocates every string,
//! map and array of the object (and old object); a pod review is 8-16 KB, a
//! third of it `metadata.managedFields`, and policies read a few dozen bytes
//! of it. [`LazyReview::parse`] checks the whole body (UTF-8 and JSON syntax:
//! a body `serde_json::from_slice` rejects is rejected too) but builds nodes
//! only down to [`EAGER_DEPTH`] levels below the review: the review, the
//! request, the objects and their top-level fields (`metadata`, `spec`,
//! `status`). Deeper containers (`metadata.labels`, `metadata.managedFields`,
//! `spec.containers`, ...) are kept as their raw JSON text, which borrows the
//! body, and parsed the first time an expression or a selector reads them,
//! once per request. Nothing is skipped for good: `managedFields` is parsed
//! like any other field if an expression names it; it just costs nothing when
//! none does, which is the case for the whole shipped bundle.
//!
//! The view answers exactly as the `Value` would: same numbers (`i64`, `u64`
//! or `f64` as `serde_json` picks), same strings (escapes decoded), objects
//! iterated in `serde_json::Map`'s (sorted) key order, a repeated key keeps
//! its last value. `AdmissionRequestInput::raw()`/`object()`/`old_object()`
//! still return `&Value`: for a lazy review that value is built on first call
//! and kept, so only callers that need the whole tree pay for it.
//!
//! One difference: skipping a raw part checks its syntax but not two things
//! only decoding checks, a `\u` escape of a lone UTF-16 surrogate and a
//! number beyond `f64` range (`1e400`). A kube-apiserver sends neither (Go's
//! encoder cannot produce them). Such a body is accepted, and the part is an
//! evaluation error when an expression reads it (so the policy's
//! failurePolicy applies: `Fail` denies); `from_slice` rejects the body.

use super::scan;
use super::view::Json;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Number, Value};
use std::cell::Cell;
use std::sync::OnceLock;

/// Levels below the review that [`LazyReview::parse`] builds eagerly; deeper
/// containers stay raw until read. 3 reaches `request.object.metadata` and
/// `request.object.spec` (whose fields are then raw or scalars).
pub(crate) const EAGER_DEPTH: u32 = 3;

/// Levels below a raw node that reading it parses: the node itself and its
/// scalars. Deeper containers stay raw (a container holding large env lists
/// or probes is only scanned, not built, unless read).
pub(super) const LAZY_DEPTH: u32 = 3;

/// An AdmissionReview body, parsed lazily (see the module documentation).
///
/// Borrows the body; build an [`super::AdmissionRequestInput`] from it with
/// [`super::AdmissionRequestInput::from_body`].
#[derive(Debug)]
pub struct LazyReview<'a> {
    pub(super) text: &'a str,
    pub(super) root: LazyNode,
    /// `request`, `request.object` and `request.oldObject` as `Value`s, for
    /// the `&Value` accessors of [`AdmissionRequestInput`]; built on demand.
    pub(super) values: [OnceLock<Value>; 3],
    /// Whether the review, the request or an object in the request repeated
    /// a key (the view keeps the last value, as `Value` does; a typed parse
    /// of the envelope may reject it).
    duplicate_keys: bool,
}

impl<'a> LazyReview<'a> {
    /// Checks and lazily parses an AdmissionReview body.
    ///
    /// # Errors
    /// When the body is not valid UTF-8 JSON, as `serde_json::from_slice`.
    pub fn parse(body: &'a [u8]) -> Result<Self, serde_json::Error> {
        let text = match std::str::from_utf8(body) {
            Ok(text) => text,
            Err(error) => {
                // serde_json's own message, with the position.
                return Err(serde_json::from_slice::<serde::de::IgnoredAny>(body)
                    .err()
                    .unwrap_or_else(|| serde::de::Error::custom(error)));
            }
        };
        if let Some((root, duplicate_keys)) = scan::document(text, EAGER_DEPTH) {
            return Ok(LazyReview {
                text,
                root: LazyNode::parsed(root),
                values: Default::default(),
                duplicate_keys,
            });
        }
        // Anything the scanner does not take (an error, deep nesting, an
        // escape it leaves to serde_json) goes through serde_json, so the
        // result and every error message are serde_json's own.
        let (root, duplicate_keys) = parse_with_serde(text)?;
        Ok(LazyReview {
            text,
            root: LazyNode::parsed(root),
            values: Default::default(),
            duplicate_keys,
        })
    }

    /// The whole review, for reading its envelope.
    pub(crate) fn root(&self) -> Json<'_> {
        Json::Lazy(&self.root, self.text)
    }

    /// Whether the review, the request or an object in the request repeated
    /// a key (see the field).
    pub(crate) fn has_duplicate_keys(&self) -> bool {
        self.duplicate_keys
    }
}

/// The body's root node as serde_json reads it (the reference the scanner
/// must agree with), and whether an object repeated a key.
pub(super) fn parse_with_serde(text: &str) -> Result<(Parsed, bool), serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let duplicates = Cell::new(false);
    let parsed = NodeSeed {
        depth: EAGER_DEPTH,
        base: text,
        duplicates: &duplicates,
    }
    .deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok((parsed, duplicates.get()))
}

/// Text of a [`LazyReview`]: a span of the body, or decoded (escapes).
///
/// Spans instead of borrowed `&str` keep the nodes free of the body's
/// lifetime, so views over them stay covariant.
#[derive(Debug, PartialEq)]
pub(crate) enum Text {
    Span(usize, usize),
    Owned(Box<str>),
}

impl Text {
    pub(super) fn of(s: &str, base: &str) -> Text {
        let start = (s.as_ptr() as usize).wrapping_sub(base.as_ptr() as usize);
        if start <= base.len() && base.len() - start >= s.len() {
            Text::Span(start, start + s.len())
        } else {
            Text::Owned(s.into())
        }
    }

    pub(super) fn get<'t>(&'t self, base: &'t str) -> &'t str {
        match self {
            Text::Span(start, end) => base.get(*start..*end).unwrap_or(""),
            Text::Owned(s) => s,
        }
    }

    /// Whether the text is `other` (compares bytes; no char boundary checks).
    pub(super) fn is(&self, base: &str, other: &str) -> bool {
        match self {
            Text::Span(start, end) => {
                end - start == other.len()
                    && base.as_bytes().get(*start..*end) == Some(other.as_bytes())
            }
            Text::Owned(s) => **s == *other,
        }
    }
}

/// One JSON value of a [`LazyReview`]: parsed, or raw text parsed on first
/// read. Once parsed it never moves, so views borrow it for the review's life.
#[derive(Debug, PartialEq)]
pub(crate) struct LazyNode {
    /// The span of the raw JSON text, when not parsed at load.
    pub(super) raw: Option<(usize, usize)>,
    pub(super) parsed: OnceLock<Parsed>,
}

/// A parsed node: scalars, or containers of (possibly raw) nodes.
#[derive(Debug, PartialEq)]
pub(crate) enum Parsed {
    /// Raw text that `serde_json` skips but will not parse: a `\u` escape of
    /// a lone surrogate or a number beyond `f64` (a kube-apiserver sends
    /// neither). Reading it is an evaluation error, so it fails closed.
    Invalid,
    Null,
    Bool(bool),
    Number(Number),
    String(Text),
    Array(Vec<LazyNode>),
    Object(LazyObject),
}

/// The entries of a JSON object in document order, as read.
///
/// Sorting and de-duplicating every object at parse time cost more than
/// the few lookups a policy makes, so a lookup searches from the end (a
/// repeated key keeps its last value, as in `serde_json::Map`) and the
/// `serde_json::Map` order (sorted, one entry per key) is built only when
/// the object is iterated.
#[derive(Debug, PartialEq)]
pub(crate) struct LazyObject {
    pub(super) entries: Box<[(Text, LazyNode)]>,
    /// Indices into `entries` in key order, one per key; built on first
    /// iteration.
    order: OnceLock<Box<[u32]>>,
}

impl LazyObject {
    pub(super) fn new(entries: Box<[(Text, LazyNode)]>) -> Self {
        LazyObject {
            entries,
            order: OnceLock::new(),
        }
    }

    /// Whether some key appears twice.
    pub(super) fn has_duplicate_keys(&self, base: &str) -> bool {
        self.entries.iter().enumerate().any(|(i, (key, _))| {
            let key = key.get(base);
            self.entries[..i].iter().any(|(k, _)| k.is(base, key))
        })
    }

    pub(super) fn get(&self, key: &str, base: &str) -> Option<&LazyNode> {
        self.entries
            .iter()
            .rev()
            .find(|(k, _)| k.is(base, key))
            .map(|(_, node)| node)
    }

    /// The entries in `serde_json::Map` order.
    pub(super) fn sorted<'s>(
        &'s self,
        base: &'s str,
    ) -> impl Iterator<Item = &'s (Text, LazyNode)> + 's {
        let order = self.order.get_or_init(|| {
            let mut order: Vec<u32> = (0..self.entries.len() as u32).collect();
            let key = |i: &u32| self.entries[*i as usize].0.get(base);
            // Stable: of a repeated key, the last entry comes last and is kept.
            order.sort_by(|a, b| key(a).cmp(key(b)));
            order.dedup_by(|later, earlier| {
                let same = key(later) == key(earlier);
                if same {
                    *earlier = *later;
                }
                same
            });
            order.into_boxed_slice()
        });
        order.iter().map(|&i| &self.entries[i as usize])
    }
}

impl LazyNode {
    pub(super) fn parsed(parsed: Parsed) -> Self {
        LazyNode {
            raw: None,
            parsed: OnceLock::from(parsed),
        }
    }

    pub(super) fn raw_text<'t>(&self, base: &'t str) -> &'t str {
        self.raw
            .and_then(|(start, end)| base.get(start..end))
            .unwrap_or("null")
    }

    pub(super) fn get(&self, base: &str) -> &Parsed {
        self.parsed.get_or_init(|| {
            if let Some(parsed) = self
                .raw
                .and_then(|(start, end)| scan::node(base, start, end, LAZY_DEPTH))
            {
                return parsed;
            }
            let mut deserializer = serde_json::Deserializer::from_str(self.raw_text(base));
            NodeSeed {
                depth: LAZY_DEPTH,
                base,
                duplicates: &Cell::new(false),
            }
            .deserialize(&mut deserializer)
            .unwrap_or(Parsed::Invalid)
        })
    }

    pub(super) fn is_null(&self, base: &str) -> bool {
        match self.parsed.get() {
            Some(parsed) => matches!(parsed, Parsed::Null),
            None => self.raw_text(base) == "null",
        }
    }

    /// The node as a `serde_json::Value` (built, not cached).
    pub(super) fn to_value(&self, base: &str) -> Value {
        match self.parsed.get() {
            None => serde_json::from_str(self.raw_text(base)).unwrap_or(Value::Null),
            Some(parsed) => match parsed {
                Parsed::Null | Parsed::Invalid => Value::Null,
                Parsed::Bool(b) => Value::Bool(*b),
                Parsed::Number(n) => Value::Number(n.clone()),
                Parsed::String(s) => Value::String(s.get(base).to_owned()),
                Parsed::Array(items) => {
                    Value::Array(items.iter().map(|item| item.to_value(base)).collect())
                }
                Parsed::Object(object) => Value::Object(
                    object
                        .entries
                        .iter()
                        .map(|(k, v)| (k.get(base).to_owned(), v.to_value(base)))
                        .collect(),
                ),
            },
        }
    }
}

/// Parses one node; containers below `depth` more levels stay raw. `base`
/// is the whole body, which spans are relative to.
#[derive(Clone, Copy)]
pub(super) struct NodeSeed<'a> {
    pub(super) depth: u32,
    pub(super) base: &'a str,
    /// Set when an object repeats a key.
    pub(super) duplicates: &'a Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for NodeSeed<'_> {
    type Value = Parsed;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Parsed, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// A child of a node parsed with `NodeSeed`: parsed too, or raw.
struct ChildSeed<'a>(NodeSeed<'a>);

impl<'de> DeserializeSeed<'de> for ChildSeed<'_> {
    type Value = LazyNode;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<LazyNode, D::Error> {
        let NodeSeed {
            depth,
            base,
            duplicates,
        } = self.0;
        if depth == 0 {
            let raw = <&RawValue>::deserialize(deserializer)?;
            let span = match Text::of(raw.get(), base) {
                Text::Span(start, end) => Some((start, end)),
                // Not from the body (cannot happen with `from_str`).
                Text::Owned(_) => {
                    return Ok(LazyNode::parsed(
                        serde_json::from_str::<Value>(raw.get())
                            .ok()
                            .map_or(Parsed::Invalid, |v| owned(&v)),
                    ))
                }
            };
            Ok(LazyNode {
                raw: span,
                parsed: OnceLock::new(),
            })
        } else {
            Ok(LazyNode::parsed(
                NodeSeed {
                    depth: depth - 1,
                    base,
                    duplicates,
                }
                .deserialize(deserializer)?,
            ))
        }
    }
}

/// A `Value` as a fully parsed node, with owned text.
fn owned(value: &Value) -> Parsed {
    match value {
        Value::Null => Parsed::Null,
        Value::Bool(b) => Parsed::Bool(*b),
        Value::Number(n) => Parsed::Number(n.clone()),
        Value::String(s) => Parsed::String(Text::Owned(s.as_str().into())),
        Value::Array(items) => {
            Parsed::Array(items.iter().map(|v| LazyNode::parsed(owned(v))).collect())
        }
        Value::Object(map) => Parsed::Object(LazyObject::new(
            map.iter()
                .map(|(k, v)| (Text::Owned(k.as_str().into()), LazyNode::parsed(owned(v))))
                .collect(),
        )),
    }
}

/// A map key: a span of the body unless it has escapes.
struct KeySeed<'a>(&'a str);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Text;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Text, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = Text;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a string key")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Text, E> {
        Ok(Text::of(v, self.0))
    }

    fn visit_str<E>(self, v: &str) -> Result<Text, E> {
        Ok(Text::Owned(v.into()))
    }
}

impl<'de> Visitor<'de> for NodeSeed<'_> {
    type Value = Parsed;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<Parsed, E> {
        Ok(Parsed::Null)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Parsed, E> {
        Ok(Parsed::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Parsed, E> {
        Ok(Parsed::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Parsed, E> {
        Ok(Parsed::Number(v.into()))
    }

    /// As `serde_json::Value`: a non-finite float (not valid JSON) is null.
    fn visit_f64<E>(self, v: f64) -> Result<Parsed, E> {
        Ok(Number::from_f64(v).map_or(Parsed::Null, Parsed::Number))
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Parsed, E> {
        Ok(Parsed::String(Text::of(v, self.base)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Parsed, E> {
        Ok(Parsed::String(Text::Owned(v.into())))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Parsed, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(ChildSeed(self))? {
            items.push(item);
        }
        Ok(Parsed::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Parsed, A::Error> {
        let mut entries: Vec<(Text, LazyNode)> = Vec::new();
        while let Some(key) = map.next_key_seed(KeySeed(self.base))? {
            let value = map.next_value_seed(ChildSeed(self))?;
            entries.push((key, value));
        }
        let object = LazyObject::new(entries.into_boxed_slice());
        // Only the envelope's objects, as the scanner (see `has_duplicate_keys`).
        if self.depth > 0 && object.has_duplicate_keys(self.base) {
            self.duplicates.set(true);
        }
        Ok(Parsed::Object(object))
    }
}
