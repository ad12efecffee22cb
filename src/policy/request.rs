//! The admission request as the engine reads it: a thin, borrowed view over
//! the `request` of an `admission.k8s.io/v1` AdmissionReview, either a parsed
//! `serde_json::Value` or a [`LazyReview`] read straight from the body bytes.
//!
//! # The lazy review
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

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};
use std::cell::Cell;
use std::sync::OnceLock;
use thiserror::Error;

mod scan;

/// Why a JSON value is not an AdmissionRequest the engine can evaluate.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RequestInputError {
    /// A required field is absent or not a string/object.
    #[error("admission request has no valid '{0}'")]
    MissingField(&'static str),
}

/// Levels below the review that [`LazyReview::parse`] builds eagerly; deeper
/// containers stay raw until read. 3 reaches `request.object.metadata` and
/// `request.object.spec` (whose fields are then raw or scalars).
pub(crate) const EAGER_DEPTH: u32 = 3;

/// Levels below a raw node that reading it parses: the node itself and its
/// scalars. Deeper containers stay raw (a container holding large env lists
/// or probes is only scanned, not built, unless read).
const LAZY_DEPTH: u32 = 3;

/// An AdmissionReview body, parsed lazily (see the module documentation).
///
/// Borrows the body; build an [`AdmissionRequestInput`] from it with
/// [`AdmissionRequestInput::from_body`].
#[derive(Debug)]
pub struct LazyReview<'a> {
    text: &'a str,
    root: LazyNode,
    /// `request`, `request.object` and `request.oldObject` as `Value`s, for
    /// the `&Value` accessors of [`AdmissionRequestInput`]; built on demand.
    values: [OnceLock<Value>; 3],
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
fn parse_with_serde(text: &str) -> Result<(Parsed, bool), serde_json::Error> {
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
    fn of(s: &str, base: &str) -> Text {
        let start = (s.as_ptr() as usize).wrapping_sub(base.as_ptr() as usize);
        if start <= base.len() && base.len() - start >= s.len() {
            Text::Span(start, start + s.len())
        } else {
            Text::Owned(s.into())
        }
    }

    fn get<'t>(&'t self, base: &'t str) -> &'t str {
        match self {
            Text::Span(start, end) => base.get(*start..*end).unwrap_or(""),
            Text::Owned(s) => s,
        }
    }

    /// Whether the text is `other` (compares bytes; no char boundary checks).
    fn is(&self, base: &str, other: &str) -> bool {
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
    raw: Option<(usize, usize)>,
    parsed: OnceLock<Parsed>,
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
    entries: Box<[(Text, LazyNode)]>,
    /// Indices into `entries` in key order, one per key; built on first
    /// iteration.
    order: OnceLock<Box<[u32]>>,
}

impl LazyObject {
    fn new(entries: Box<[(Text, LazyNode)]>) -> Self {
        LazyObject {
            entries,
            order: OnceLock::new(),
        }
    }

    /// Whether some key appears twice.
    fn has_duplicate_keys(&self, base: &str) -> bool {
        self.entries.iter().enumerate().any(|(i, (key, _))| {
            let key = key.get(base);
            self.entries[..i].iter().any(|(k, _)| k.is(base, key))
        })
    }

    fn get(&self, key: &str, base: &str) -> Option<&LazyNode> {
        self.entries
            .iter()
            .rev()
            .find(|(k, _)| k.is(base, key))
            .map(|(_, node)| node)
    }

    /// The entries in `serde_json::Map` order.
    fn sorted<'s>(&'s self, base: &'s str) -> impl Iterator<Item = &'s (Text, LazyNode)> + 's {
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
    fn parsed(parsed: Parsed) -> Self {
        LazyNode {
            raw: None,
            parsed: OnceLock::from(parsed),
        }
    }

    fn raw_text<'t>(&self, base: &'t str) -> &'t str {
        self.raw
            .and_then(|(start, end)| base.get(start..end))
            .unwrap_or("null")
    }

    fn get(&self, base: &str) -> &Parsed {
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

    fn is_null(&self, base: &str) -> bool {
        match self.parsed.get() {
            Some(parsed) => matches!(parsed, Parsed::Null),
            None => self.raw_text(base) == "null",
        }
    }

    /// The node as a `serde_json::Value` (built, not cached).
    fn to_value(&self, base: &str) -> Value {
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
struct NodeSeed<'a> {
    depth: u32,
    base: &'a str,
    /// Set when an object repeats a key.
    duplicates: &'a Cell<bool>,
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
    fn value(self, cache: Option<&'a OnceLock<Value>>) -> &'a Value {
        static NULL: Value = Value::Null;
        match (self, cache) {
            (Json::Value(value), _) => value,
            (Json::Lazy(node, base), Some(cache)) => cache.get_or_init(|| node.to_value(base)),
            // Not reached: lazy inputs always come with their cache.
            (Json::Lazy(..), None) => &NULL,
        }
    }
}

/// A borrowed view of an AdmissionRequest; nothing is copied.
///
/// Built once per request by the webhook (or the dry-run CLI) and shared by
/// every policy evaluation.
#[derive(Debug, Clone, Copy)]
pub struct AdmissionRequestInput<'a> {
    raw: Json<'a>,
    operation: &'a str,
    group: &'a str,
    version: &'a str,
    resource: &'a str,
    sub_resource: &'a str,
    namespace: &'a str,
    name: &'a str,
    object: Option<Json<'a>>,
    old_object: Option<Json<'a>>,
    /// The lazy review this input reads, for its `Value` caches.
    review: Option<&'a LazyReview<'a>>,
}

impl<'a> AdmissionRequestInput<'a> {
    /// Reads the `request` object of an AdmissionReview.
    ///
    /// # Errors
    /// When `operation` or `resource` is missing: without them no rule can
    /// be matched.
    pub fn from_request(raw: &'a Value) -> Result<Self, RequestInputError> {
        Self::from_json(Json::Value(raw), None)
    }

    /// Reads a whole AdmissionReview (`{"request": {...}}`).
    ///
    /// # Errors
    /// When there is no `request`, or it is invalid as for [`Self::from_request`].
    pub fn from_review(review: &'a Value) -> Result<Self, RequestInputError> {
        let request = review
            .get("request")
            .ok_or(RequestInputError::MissingField("request"))?;
        Self::from_request(request)
    }

    /// Reads the `request` of a lazily parsed AdmissionReview body: the
    /// fast path of the webhook, equivalent to `from_review` on the body
    /// parsed as a `serde_json::Value`.
    ///
    /// # Errors
    /// As [`Self::from_review`].
    pub fn from_body(review: &'a LazyReview<'a>) -> Result<Self, RequestInputError> {
        let request = Json::Lazy(&review.root, review.text)
            .get("request")
            .ok_or(RequestInputError::MissingField("request"))?;
        Self::from_json(request, Some(review))
    }

    fn from_json(
        raw: Json<'a>,
        review: Option<&'a LazyReview<'a>>,
    ) -> Result<Self, RequestInputError> {
        let operation = raw
            .get("operation")
            .and_then(Json::as_str)
            .ok_or(RequestInputError::MissingField("operation"))?;
        let resource_of = raw.get("resource");
        let resource = resource_of
            .and_then(|r| r.get("resource"))
            .and_then(Json::as_str)
            .ok_or(RequestInputError::MissingField("resource"))?;
        let str_of = |parent: Option<Json<'a>>, key: &str| {
            parent
                .and_then(|p| p.get(key))
                .and_then(Json::as_str)
                .unwrap_or("")
        };
        let present = |key: &str| raw.get(key).filter(|v| !v.is_null());
        Ok(AdmissionRequestInput {
            raw,
            operation,
            group: str_of(resource_of, "group"),
            version: str_of(resource_of, "version"),
            resource,
            sub_resource: str_of(Some(raw), "subResource"),
            namespace: str_of(Some(raw), "namespace"),
            name: str_of(Some(raw), "name"),
            object: present("object"),
            old_object: present("oldObject"),
            review,
        })
    }

    /// The AdmissionRequest JSON itself. For an input read with
    /// [`Self::from_body`] the `Value` is built on the first call.
    #[must_use]
    pub fn raw(&self) -> &'a Value {
        self.raw.value(self.review.map(|r| &r.values[0]))
    }

    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    #[must_use]
    pub fn operation(&self) -> &'a str {
        self.operation
    }

    /// The resource's API group (`""` for core).
    #[must_use]
    pub fn group(&self) -> &'a str {
        self.group
    }

    /// The resource's API version.
    #[must_use]
    pub fn version(&self) -> &'a str {
        self.version
    }

    /// The resource, e.g. `pods`.
    #[must_use]
    pub fn resource(&self) -> &'a str {
        self.resource
    }

    /// The subresource, `""` for the object itself.
    #[must_use]
    pub fn sub_resource(&self) -> &'a str {
        self.sub_resource
    }

    /// The namespace, `""` for cluster-scoped requests. For a Namespace
    /// object this is the namespace's own name, as in the apiserver.
    #[must_use]
    pub fn namespace(&self) -> &'a str {
        if self.namespace.is_empty() && self.is_namespace_resource() {
            self.name
        } else {
            self.namespace
        }
    }

    /// The object's name (may be empty on CREATE with generateName).
    #[must_use]
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// The new object; `None` on DELETE and CONNECT. For an input read with
    /// [`Self::from_body`] the `Value` is built on the first call.
    #[must_use]
    pub fn object(&self) -> Option<&'a Value> {
        self.object
            .map(|o| o.value(self.review.map(|r| &r.values[1])))
    }

    /// The previous object; `None` on CREATE. As [`Self::object`].
    #[must_use]
    pub fn old_object(&self) -> Option<&'a Value> {
        self.old_object
            .map(|o| o.value(self.review.map(|r| &r.values[2])))
    }

    /// Whether the request is about a Namespace object itself.
    #[must_use]
    pub fn is_namespace_resource(&self) -> bool {
        self.group.is_empty() && self.resource == "namespaces"
    }

    /// The request JSON, as the engine reads it.
    pub(crate) fn request_json(&self) -> Json<'a> {
        self.raw
    }

    /// The new object, as the engine reads it.
    pub(crate) fn object_json(&self) -> Option<Json<'a>> {
        self.object
    }

    /// The previous object, as the engine reads it.
    pub(crate) fn old_object_json(&self) -> Option<Json<'a>> {
        self.old_object
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_request_without_operation_is_rejected() {
        let raw = json!({"resource": {"resource": "pods"}});
        assert_eq!(
            AdmissionRequestInput::from_request(&raw).map(|_| ()),
            Err(RequestInputError::MissingField("operation"))
        );
    }

    #[test]
    fn a_namespace_objects_namespace_is_its_name() {
        let raw = json!({"operation": "CREATE", "resource": {"group": "", "version": "v1", "resource": "namespaces"}, "name": "team-a"});
        let input = AdmissionRequestInput::from_request(&raw).expect("valid");
        assert_eq!(input.namespace(), "team-a");
    }

    /// Every node of a lazy review reads as the `Value` parse of the body.
    fn same(lazy: Json<'_>, value: &Value) {
        match (lazy.shape(), value) {
            (Shape::Null, Value::Null) => {}
            (Shape::Invalid, _) => panic!("invalid node"),
            (Shape::Bool(a), Value::Bool(b)) => assert_eq!(a, *b),
            (Shape::Number(a), Value::Number(b)) => assert_eq!(a, b),
            (Shape::String(a), Value::String(b)) => assert_eq!(a, b),
            (Shape::Array(items), Value::Array(values)) => {
                assert_eq!(items.len(), values.len());
                for (i, v) in values.iter().enumerate() {
                    same(items.get(i).expect("in range"), v);
                }
            }
            (Shape::Object(fields), Value::Object(map)) => {
                let keys: Vec<&str> = fields.iter().map(|(k, _)| k).collect();
                let expected: Vec<&str> = map.keys().map(String::as_str).collect();
                assert_eq!(keys, expected, "key order");
                for (k, v) in map {
                    same(fields.get(k).expect("present"), v);
                }
            }
            (_, value) => panic!("shape differs from {value}"),
        }
        if let Json::Lazy(node, base) = lazy {
            assert_eq!(&node.to_value(base), value);
        }
    }

    #[test]
    fn a_lazy_review_reads_as_the_value_parse() {
        let body = br#"{"request": {"operation": "CREATE", "b": 1, "a": [1, -2, 3.5, 18446744073709551615, "x\u00e9\n", null, true, {"z": {"y": [{"deep": {"er": {"est": "\"q\""}}}]}}],
            "resource": {"group": "", "version": "v1", "resource": "pods"}, "dup": 1, "dup": {"k": 2}, "k\u0065y": "v", "object": {"metadata": {"managedFields": [{"manager": "m"}], "labels": {"b": "2", "a": "1"}}}}}"#;
        let lazy = LazyReview::parse(body).expect("valid");
        let value: Value = serde_json::from_slice(body).expect("valid");
        same(Json::Lazy(&lazy.root, lazy.text), &value);
        let input = AdmissionRequestInput::from_body(&lazy).expect("valid");
        assert_eq!(input.operation(), "CREATE");
        assert_eq!(input.resource(), "pods");
        assert_eq!(input.object(), value["request"].get("object"));
        assert!(input.old_object().is_none());
        assert_eq!(input.raw(), &value["request"]);
    }

    #[test]
    fn a_lazy_review_rejects_what_the_value_parse_rejects() {
        for body in [
            &br#"{"request": {"object": {"metadata": {"managedFields": [1,]}}}}"#[..],
            br#"{"request": {"object": {"spec": {"x": "\q"}}}}"#,
            br#"{"request": {}} x"#,
            b"{\"request\": {\"object\": {\"a\": {\"b\": \"\xff\"}}}}",
        ] {
            assert!(serde_json::from_slice::<Value>(body).is_err());
            assert!(
                LazyReview::parse(body).is_err(),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn serde_json_maps_iterate_in_key_order() {
        // The lazy view sorts object keys; it must agree with serde_json::Map
        // (which it does unless serde_json's preserve_order is enabled).
        let value: Value = serde_json::from_str(r#"{"b": 1, "a": 2}"#).expect("valid");
        let keys: Vec<&String> = value.as_object().expect("object").keys().collect();
        assert_eq!(keys, ["a", "b"]);
    }
}
