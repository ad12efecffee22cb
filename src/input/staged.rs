//! A JSON list's items between their read and the end of their file:
//! a list may turn out not to be one (a `kind` after `items` that says
//! otherwise), so what each item converted to waits, with what the reader
//! records of it, until the file is known to be read right. Most of a
//! large dump are pods, so an item waits in few bytes: its number, not its
//! location, and its kind without a copy where a typed read gives it.

use super::objects::{kind_of, Key};
use super::parse::Location;
use crate::manifest::ListHead;
use serde_json::Value;

/// An object a typed read took from its JSON text: its kind and identity
/// (what the reader counts and checks for twice) and what it converts to.
pub(super) struct Typed<T> {
    /// `kind`.
    pub(super) kind: &'static str,
    /// `apiVersion`, `metadata.namespace` and `metadata.name`.
    pub(super) key: Option<Key>,
    /// What `convert` would have made of its Value.
    pub(super) converted: T,
}

/// A list item's `kind` and `apiVersion` as the Value read finds them
/// (`null` and absent told apart, as `Some(None)` and `None`): its own,
/// else those a typed list (`PodList`) gives its items. `None` where the
/// Value read is needed: a `null`, or no kind known yet.
#[must_use]
pub(super) fn item_type<'t>(
    kind: Option<Option<&'t str>>,
    api_version: Option<Option<&'t str>>,
    head: &'t ListHead,
) -> Option<(&'t str, &'t str)> {
    let listed = head
        .kind
        .as_deref()
        .and_then(|k| k.strip_suffix("List"))
        .filter(|k| !k.is_empty());
    let kind = match kind {
        Some(kind) => kind?,
        None => listed?,
    };
    let api_version = match api_version {
        Some(api_version) => api_version?,
        None => head.api_version.as_deref().filter(|_| listed.is_some())?,
    };
    Some((kind, api_version))
}

/// One item of a List read, waiting for its file to be read right: its
/// key, its number, its kind and what it converted to.
pub(super) type Staged<T> = (Option<Key>, usize, Result<Kind, &'static str>, T);

/// An object's kind: the typed reads' are static, and a Value's is not
/// copied out of it for the few other kinds a large file holds.
#[derive(Debug)]
pub(super) enum Kind {
    Static(&'static str),
    Owned(String),
}

/// Where item `item` of the (first document's) List of `source` is.
pub(super) fn item_location(source: &str, item: usize) -> Location {
    Location {
        source: source.to_owned(),
        document: Some(1),
        item: Some(item),
        line: None,
    }
}

/// Stages item `item` of a List read from `source`, converted where it
/// stands, to be recorded only if the whole List reads right.
pub(super) fn stage<T>(
    staged: &mut Vec<Staged<T>>,
    source: &str,
    item: usize,
    value: Value,
    convert: &mut impl FnMut(Value, &Location) -> T,
) {
    let location = item_location(source, item);
    let kind = kind_of(&value).map(|kind| Kind::Owned(kind.to_owned()));
    let key = Key::of(&value);
    staged.push((key, item, kind, convert(value, &location)));
}
