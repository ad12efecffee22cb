//! The objects of an offline cluster (`--store file:PATH`), read a document
//! or a list item at a time and handed on at once, so that a large dump is
//! never held whole as JSON values. The same object given twice is refused.

use super::parse::{parse, parse_in_pieces, InputError, Location, SourceDocument};
use super::staged::{item_location, stage, Kind, Staged};
pub(super) use super::staged::{item_type, Typed};
use crate::manifest::{self, ListHead};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::io::{BufReader, Read};
use std::path::Path;

/// What makes two documents the same object: the cluster would keep one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Key {
    group: Box<str>,
    kind: Box<str>,
    namespace: Box<str>,
    name: Box<str>,
}

impl Key {
    /// `None` for what has no name yet (`generateName`) or is no object.
    pub(super) fn of(value: &Value) -> Option<Key> {
        let text = |pointer: &str| value.pointer(pointer).and_then(Value::as_str);
        Key::new(
            text("/apiVersion").unwrap_or_default(),
            text("/kind").unwrap_or_default(),
            text("/metadata/namespace").unwrap_or_default(),
            text("/metadata/name")?,
        )
    }

    /// The key of an object of these fields; `None` without a name.
    pub(super) fn new(api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<Key> {
        if name.is_empty() {
            return None;
        }
        // The version is not part of the identity: v1 and v2 of a kind
        // are two views of one stored object.
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        Some(Key {
            group: group.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        })
    }

    pub(super) fn words(&self) -> String {
        if self.namespace.is_empty() {
            format!("{} {}", self.kind, self.name)
        } else {
            format!("{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// Where a kept object was first seen, without a copy of the file name.
#[derive(Debug, Clone, Copy)]
struct Seen {
    file: usize,
    document: Option<usize>,
    item: Option<usize>,
    line: Option<u64>,
}

/// How many objects of each kind an input held, for the message that says
/// it holds nothing a command can use.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Kinds(pub BTreeMap<String, usize>);

impl Kinds {
    /// How many objects of `kind` were read.
    #[must_use]
    pub fn count(&self, kind: &str) -> usize {
        self.0.get(kind).copied().unwrap_or(0)
    }

    /// `holds no objects` or `holds only 2 ConfigMaps, 1 Secret`.
    #[must_use]
    pub fn found(&self) -> String {
        if self.0.is_empty() {
            return "holds no objects".to_owned();
        }
        let kinds: Vec<String> = self
            .0
            .iter()
            .map(|(kind, n)| {
                format!(
                    "{} {}",
                    crate::messages::thousands(*n),
                    crate::messages::plural(kind, *n)
                )
            })
            .collect();
        format!("holds only {}", kinds.join(", "))
    }
}

/// Reads every object under `path` (a file or a directory of `.yaml`,
/// `.yml` and `.json` files), `kind: List` and typed lists (`PodList`)
/// flattened. Each object goes to `convert` as soon as it is read; what
/// `convert` returns goes to `keep` once its file is known to be read
/// right (a JSON file read as a list may turn out to be one object).
///
/// # Errors
/// An unreadable file, a syntax error, an object given twice (naming both
/// documents), or what `keep` returns.
pub fn read_objects<T, E: From<InputError>>(
    path: &Path,
    convert: impl FnMut(Value, &Location) -> T,
    keep: impl FnMut(T) -> Result<(), E>,
) -> Result<Kinds, E> {
    read_typed_objects(path, |_: &str, _: &ListHead| None, convert, keep)
}

/// [`read_objects`], where `typed` first sees each item of a JSON list as
/// its text (and what the list said of itself), and may take it without
/// a `serde_json::Value`: `None` leaves the item to `convert`. `typed`
/// must answer as `convert` would (and find kind and identity as
/// [`item_type`] does), so that the typed read is only faster.
///
/// # Errors
/// As [`read_objects`].
pub(super) fn read_typed_objects<T, E: From<InputError>>(
    path: &Path,
    mut typed: impl FnMut(&str, &ListHead) -> Option<Typed<T>>,
    mut convert: impl FnMut(Value, &Location) -> T,
    mut keep: impl FnMut(T) -> Result<(), E>,
) -> Result<Kinds, E> {
    // `-` is standard input, as `-f -` is: copied to a file once, since a
    // file is read again when its streamed read turns out wrong, and
    // named as `-f -` names it.
    let stdin = if path == Path::new("-") {
        Some(stdin_file()?)
    } else {
        None
    };
    let files = match &stdin {
        Some(file) => vec![file.path().to_owned()],
        None => manifest::collect_files(path, &[]).map_err(super::sources::manifest_error)?,
    };
    let mut reader = Reader {
        names: match &stdin {
            Some(_) => vec![super::parse::STDIN.to_owned()],
            None => files.iter().map(|f| f.display().to_string()).collect(),
        },
        seen: HashMap::new(),
        kinds: Kinds::default(),
    };
    for (index, file) in files.iter().enumerate() {
        reader.file(index, file, &mut typed, &mut convert, &mut keep)?;
    }
    Ok(reader.kinds)
}

/// Standard input, copied to a temporary file (removed when dropped).
fn stdin_file() -> Result<tempfile::NamedTempFile, InputError> {
    let failed = |e: std::io::Error| InputError::File {
        path: super::parse::STDIN.to_owned(),
        message: super::sources::reason(&e),
    };
    let mut file = tempfile::NamedTempFile::new().map_err(failed)?;
    std::io::copy(&mut std::io::stdin().lock(), &mut file).map_err(failed)?;
    Ok(file)
}

struct Reader {
    names: Vec<String>,
    seen: HashMap<Key, Seen>,
    kinds: Kinds,
}

impl Reader {
    fn file<T, E: From<InputError>>(
        &mut self,
        index: usize,
        file: &Path,
        typed: &mut impl FnMut(&str, &ListHead) -> Option<Typed<T>>,
        convert: &mut impl FnMut(Value, &Location) -> T,
        keep: &mut impl FnMut(T) -> Result<(), E>,
    ) -> Result<(), E> {
        let name = self.names[index].clone();
        let unreadable = |e: std::io::Error| InputError::File {
            path: name.clone(),
            message: super::sources::reason(&e),
        };
        let mut opened = std::fs::File::open(file).map_err(unreadable)?;
        let mut first = [0u8; 512];
        let mut peeked = 0;
        while peeked < first.len() {
            match opened.read(&mut first[peeked..]) {
                Ok(0) => break,
                Ok(n) => peeked += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(unreadable(e).into()),
            }
            if first[..peeked].iter().any(|b| !b.is_ascii_whitespace()) {
                break;
            }
        }
        let head = &first[..peeked];
        let json = head
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|b| matches!(b, b'{' | b'['));
        let reader = std::io::Cursor::new(head.to_vec()).chain(opened);
        if json {
            self.json(index, file, reader, typed, convert, keep)
        } else {
            self.yaml(index, file, reader, convert, keep)
        }
    }

    /// A JSON list streams item by item; anything else is read whole.
    fn json<T, E: From<InputError>>(
        &mut self,
        index: usize,
        file: &Path,
        reader: impl Read,
        typed: &mut impl FnMut(&str, &ListHead) -> Option<Typed<T>>,
        convert: &mut impl FnMut(Value, &Location) -> T,
        keep: &mut impl FnMut(T) -> Result<(), E>,
    ) -> Result<(), E> {
        let name = self.names[index].clone();
        let mut staged: Vec<Staged<T>> = Vec::new();
        let mut item = 0;
        let complete = manifest::stream_json_list_items(reader, |head: &ListHead, text| {
            if let Some(Typed {
                kind,
                key,
                converted,
            }) = typed(text, head)
            {
                item += 1;
                staged.push((key, item, Ok(Kind::Static(kind)), converted));
                return true;
            }
            let Ok(mut value) = serde_json::from_str::<Value>(text) else {
                return false;
            };
            // An item without its kind, before the list said its own: only
            // the whole read knows what it is.
            if value.get("kind").is_none() && head.kind.is_none() {
                return false;
            }
            manifest::fill_item_type(&mut value, head);
            item += 1;
            stage(&mut staged, &name, item, value, convert);
            true
        })
        .map_err(|e| InputError::File {
            path: name.clone(),
            message: super::sources::reason(&e),
        })?;
        if complete {
            return self.commit(index, staged, keep);
        }
        drop(staged);
        self.whole(index, file, convert, keep)
    }

    /// The objects of a file read right, in order.
    fn commit<T, E: From<InputError>>(
        &mut self,
        index: usize,
        staged: Vec<Staged<T>>,
        keep: &mut impl FnMut(T) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut location = item_location(&self.names[index], 0);
        for (key, item, kind, converted) in staged {
            location.item = Some(item);
            let kind = match &kind {
                Ok(Kind::Static(kind)) => Ok(*kind),
                Ok(Kind::Owned(kind)) => Ok(kind.as_str()),
                Err(why) => Err(*why),
            };
            self.record(index, key, &location, kind)?;
            keep(converted)?;
        }
        Ok(())
    }

    /// YAML: one List document (a kubectl dump) item by item, else a
    /// document at a time from the file; a syntax error is reported by the
    /// whole-file parse, which places it by line.
    fn yaml<T, E: From<InputError>>(
        &mut self,
        index: usize,
        file: &Path,
        reader: impl Read,
        convert: &mut impl FnMut(Value, &Location) -> T,
        keep: &mut impl FnMut(T) -> Result<(), E>,
    ) -> Result<(), E> {
        let name = self.names[index].clone();
        let mut staged: Vec<Staged<T>> = Vec::new();
        let mut item = 0;
        let listed = super::yaml_list::stream_list(
            BufReader::new(reader),
            yaml_options(),
            &mut |value: Value| {
                item += 1;
                stage(&mut staged, &name, item, value, convert);
            },
        );
        if listed {
            return self.commit(index, staged, keep);
        }
        drop(staged);
        let unreadable = |e: std::io::Error| InputError::File {
            path: name.clone(),
            message: super::sources::reason(&e),
        };
        let mut reader = BufReader::new(std::fs::File::open(file).map_err(unreadable)?);
        let documents = serde_saphyr::read_with_options::<_, serde_saphyr::Spanned<Value>>(
            &mut reader,
            yaml_options(),
        );
        let mut number = 0;
        for document in documents {
            let document = match document {
                Ok(document) => document,
                Err(error) => return Err(self.syntax(file, &name, &error).into()),
            };
            if document.value.is_null() {
                continue;
            }
            number += 1;
            let line = document.referenced.line();
            let location = Location {
                source: name.clone(),
                document: Some(number),
                item: None,
                line: (line > 0).then_some(line),
            };
            self.document(index, document.value, location, convert, keep)?;
        }
        Ok(())
    }

    /// The error of a YAML file as the whole-file parse words it.
    fn syntax(&self, file: &Path, name: &str, error: &serde_saphyr::Error) -> InputError {
        let whole = match std::fs::read_to_string(file) {
            Ok(text) => parse(name, &text).err(),
            Err(e) => Some(InputError::File {
                path: name.to_owned(),
                message: super::sources::reason(&e),
            }),
        };
        whole.unwrap_or_else(|| InputError::File {
            path: name.to_owned(),
            message: format!("not valid YAML: {error}"),
        })
    }

    /// A file read whole, as `-f` reads it.
    fn whole<T, E: From<InputError>>(
        &mut self,
        index: usize,
        file: &Path,
        convert: &mut impl FnMut(Value, &Location) -> T,
        keep: &mut impl FnMut(T) -> Result<(), E>,
    ) -> Result<(), E> {
        let name = self.names[index].clone();
        let text = std::fs::read_to_string(file).map_err(|e| InputError::File {
            path: name.clone(),
            message: super::sources::reason(&e),
        })?;
        // A batch of documents at a time: a large file (a stream of JSON
        // objects, many YAML documents) is never all values at once.
        parse_in_pieces(&name, &text, |documents: Vec<SourceDocument>| {
            for document in documents {
                let kind = kind_of(&document.value);
                let key = Key::of(&document.value);
                self.record(index, key, &document.location, kind)?;
                keep(convert(document.value, &document.location))?;
            }
            Ok::<(), E>(())
        })
    }

    /// One document: its objects, a list's items each.
    fn document<T, E: From<InputError>>(
        &mut self,
        index: usize,
        value: Value,
        location: Location,
        convert: &mut impl FnMut(Value, &Location) -> T,
        keep: &mut impl FnMut(T) -> Result<(), E>,
    ) -> Result<(), E> {
        let items = match value {
            Value::Object(map) if manifest::is_list(&map) => {
                manifest::list_items(map).ok_or_else(|| {
                    InputError::document(&location, "a List's `items` must be a list")
                })?
            }
            value => {
                let kind = kind_of(&value);
                self.record(index, Key::of(&value), &location, kind)?;
                return keep(convert(value, &location));
            }
        };
        for (i, value) in items.into_iter().enumerate() {
            let location = Location {
                item: Some(i + 1),
                ..location.clone()
            };
            let kind = kind_of(&value);
            self.record(index, Key::of(&value), &location, kind)?;
            keep(convert(value, &location))?;
        }
        Ok(())
    }

    /// Counts an object, and refuses it when it was read before.
    fn record(
        &mut self,
        file: usize,
        key: Option<Key>,
        location: &Location,
        kind: Result<&str, &str>,
    ) -> Result<(), InputError> {
        let kind = kind.map_err(|why| InputError::document(location, why))?;
        match self.kinds.0.get_mut(kind) {
            Some(count) => *count += 1,
            None => {
                self.kinds.0.insert(kind.to_owned(), 1);
            }
        }
        let Some(key) = key else { return Ok(()) };
        let here = Seen {
            file,
            document: location.document,
            item: location.item,
            line: location.line,
        };
        if let Some(first) = self.seen.get(&key) {
            let first = Location {
                source: self.names[first.file].clone(),
                document: first.document,
                item: first.item,
                line: first.line,
            };
            return Err(twice(&key, location, &first));
        }
        self.seen.insert(key, here);
        Ok(())
    }
}

use super::unique::twice;
pub use super::unique::Unique;

/// Manifests are the user's own files (a dump of a whole cluster): no cap
/// on documents, nodes or bytes; the depth limit that protects the stack
/// stays.
fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        with_snippet: false,
        budget: serde_saphyr::budget! {
            max_documents: 10_000_000,
            max_nodes: usize::MAX,
            max_events: usize::MAX,
            max_total_scalar_bytes: usize::MAX,
            max_reader_input_bytes: None,
        },
    }
}

/// The kind, for counting; what is no object, or has no kind, is refused
/// in the words `-f` uses: a cluster holds neither.
pub(super) fn kind_of(value: &Value) -> Result<&str, &'static str> {
    if !value.is_object() {
        return Err("not an object (a mapping with apiVersion, kind and metadata)");
    }
    match value.get("kind").and_then(Value::as_str) {
        Some(kind) if !kind.is_empty() => Ok(kind),
        _ => Err("no `kind`"),
    }
}

/// The warning for a VerticalPodAutoscaler that asks for a scope but says
/// of no workload: nodescope's controllers skip it, and the user should
/// hear why it does nothing.
#[must_use]
pub fn untargeted_scoped_vpa(value: &Value) -> Option<String> {
    if value.get("kind").and_then(Value::as_str) != Some("VerticalPodAutoscaler") {
        return None;
    }
    let scope = value.pointer("/spec/scope").and_then(Value::as_str)?;
    if scope.is_empty()
        || value
            .pointer("/spec/targetRef")
            .is_some_and(|t| !t.is_null())
    {
        return None;
    }
    let text = |pointer: &str| value.pointer(pointer).and_then(Value::as_str).unwrap_or("");
    Some(format!(
        "VerticalPodAutoscaler {}/{} has spec.scope {scope:?} but no spec.targetRef: skipped",
        text("/metadata/namespace"),
        text("/metadata/name")
    ))
}

#[cfg(test)]
#[path = "objects_tests.rs"]
mod tests;
