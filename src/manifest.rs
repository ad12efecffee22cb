//! Reading Kubernetes manifests from disk: files or directories of YAML
//! (multi-document) and JSON, with `List` objects flattened.
//!
//! Shared by the file store, the policy loader and the CLI so every input
//! path reports errors the same way: file, document index, line, reason.

use serde_json::value::RawValue;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// One object read from a manifest, with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// The file, or `-` for standard input.
    pub source: String,
    /// 0-based index of the YAML document (or List item) in the file.
    pub index: usize,
    pub value: Value,
}

impl Document {
    /// `kind/namespace/name` for messages.
    #[must_use]
    pub fn object_ref(&self) -> String {
        object_ref(&self.value)
    }
}

/// `kind/namespace/name` (or `kind/name`) of any object.
#[must_use]
pub fn object_ref(value: &Value) -> String {
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("<no kind>");
    let meta = value.get("metadata");
    let name = meta
        .and_then(|m| m.get("name").or_else(|| m.get("generateName")))
        .and_then(Value::as_str)
        .unwrap_or("<no name>");
    match meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
    {
        Some(ns) if !ns.is_empty() => format!("{kind}/{ns}/{name}"),
        _ => format!("{kind}/{name}"),
    }
}

/// Why a manifest could not be read; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Syntax { path: String, message: String },
}

/// Lists `.yaml`, `.yml` and `.json` files under `path` (or `path` itself),
/// sorted, skipping directories named in `skip_dirs`.
pub fn collect_files(path: &Path, skip_dirs: &[&str]) -> Result<Vec<PathBuf>, ManifestError> {
    let mut files = Vec::new();
    collect_into(path, skip_dirs, &mut files, true)?;
    Ok(files)
}

fn collect_into(
    path: &Path,
    skip_dirs: &[&str],
    files: &mut Vec<PathBuf>,
    top: bool,
) -> Result<(), ManifestError> {
    let io = |source| ManifestError::Io {
        path: path.display().to_string(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.is_file() {
        if top || is_manifest(path) {
            files.push(path.to_owned());
        }
        return Ok(());
    }
    let mut entries = std::fs::read_dir(path)
        .map_err(io)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(io)?;
    entries.sort();
    for entry in entries {
        let name = entry.file_name().and_then(|n| n.to_str()).unwrap_or("");
        // Kubernetes Secret/ConfigMap volumes keep old generations in dot dirs.
        if name.starts_with('.') {
            continue;
        }
        if entry.is_dir() {
            if !skip_dirs.contains(&name) {
                collect_into(&entry, skip_dirs, files, false)?;
            }
        } else if is_manifest(&entry) {
            files.push(entry);
        }
    }
    Ok(())
}

fn is_manifest(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
}

/// Parses `text` as JSON when it looks like JSON, multi-document YAML
/// otherwise; `List` objects are flattened and empty documents dropped.
pub fn parse_documents(source: &str, text: &str) -> Result<Vec<Document>, ManifestError> {
    let syntax = |message: String| ManifestError::Syntax {
        path: source.to_owned(),
        message,
    };
    let values: Vec<Value> = if looks_like_json(text) {
        vec![serde_json::from_str(text).map_err(|e| syntax(e.to_string()))?]
    } else {
        serde_saphyr::from_multiple(text).map_err(|e| syntax(e.to_string()))?
    };
    let mut documents = Vec::new();
    for value in values {
        match value {
            Value::Null => {}
            Value::Object(mut map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
                if let Some(Value::Array(items)) = map.remove("items") {
                    documents.extend(items.into_iter().map(|v| (source, v)));
                }
            }
            Value::Array(items) => documents.extend(items.into_iter().map(|v| (source, v))),
            other => documents.push((source, other)),
        }
    }
    Ok(documents
        .into_iter()
        .enumerate()
        .map(|(index, (source, value))| Document {
            source: source.to_owned(),
            index,
            value,
        })
        .collect())
}

/// JSON starts with `{` or `[`; YAML documents almost never do, and a YAML
/// flow mapping is valid JSON-ish input for the YAML parser anyway.
#[must_use]
pub fn looks_like_json(text: &str) -> bool {
    let start = text.trim_start();
    start.starts_with('{') || start.starts_with('[')
}

#[derive(serde::Deserialize)]
struct ListDoc<'a> {
    #[serde(default, borrow)]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    items: Option<Vec<&'a RawValue>>,
}

/// The objects of a JSON manifest as unparsed slices of `text`, flattening a
/// `List` or a top-level array like [`parse_documents`]: large stores (one
/// JSON `List` of 100 VPAs x 5,000 nodes) are then parsed object by object
/// straight into the types that keep them, never as one `Value` tree.
pub fn json_items<'a>(source: &str, text: &'a str) -> Result<Vec<&'a RawValue>, ManifestError> {
    let syntax = |e: serde_json::Error| ManifestError::Syntax {
        path: source.to_owned(),
        message: e.to_string(),
    };
    // One pass over the text: a large store is read once here, once more by
    // the object that keeps it.
    let items = if text.trim_start().starts_with('[') {
        serde_json::from_str::<Vec<&RawValue>>(text).map_err(syntax)?
    } else {
        match serde_json::from_str::<ListDoc<'_>>(text).map_err(syntax)? {
            ListDoc {
                kind: Some(kind),
                items,
            } if kind == "List" => items.unwrap_or_default(),
            _ => vec![serde_json::from_str::<&RawValue>(text).map_err(syntax)?],
        }
    };
    Ok(items.into_iter().filter(|i| i.get() != "null").collect())
}

/// Calls `each` with the text of every item of a JSON `List` or top-level
/// array read from `reader`, holding one item in memory at a time: a
/// 100 MB store would otherwise sit in memory whole while it is converted,
/// more than doubling the server's peak RSS at start.
///
/// Returns `false`, having called `each` only with text the caller must
/// then discard, when the document is neither (a single object, or an object
/// with `items` that is not a `List`): the caller reads it whole instead.
/// A syntax error names `source`, the line and the column.
pub fn stream_json_items(
    source: &str,
    reader: impl std::io::Read,
    mut each: impl FnMut(&str),
) -> Result<bool, ManifestError> {
    let syntax = |e: serde_json::Error| ManifestError::Syntax {
        path: source.to_owned(),
        message: e.to_string(),
    };
    let mut de = serde_json::Deserializer::from_reader(reader);
    let streamed =
        serde::Deserializer::deserialize_any(&mut de, stream::Top(&mut each)).map_err(syntax)?;
    de.end().map_err(syntax)?;
    Ok(streamed)
}

/// Visitors for [`stream_json_items`].
mod stream {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
    use serde_json::value::RawValue;
    use std::fmt;

    /// The whole document: an array is streamed; an object is a `List`
    /// when its `kind` says so and its `items` is an array.
    pub(super) struct Top<'f, F>(pub(super) &'f mut F);

    impl<'de, F: FnMut(&str)> Visitor<'de> for Top<'_, F> {
        type Value = bool;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON object or array")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<bool, A::Error> {
            each_item(seq, self.0)
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
            let (mut is_list, mut items) = (false, None);
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                match &*key {
                    "kind" => {
                        is_list = map.next_value::<Option<String>>()?.as_deref() == Some("List")
                    }
                    "items" => items = Some(map.next_value_seed(Items(&mut *self.0))?),
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            // A `List` without items holds nothing.
            Ok(is_list && items.unwrap_or(true))
        }
    }

    /// The value of `items`: `true` when it was an array (and streamed).
    struct Items<'f, F>(&'f mut F);

    impl<'de, F: FnMut(&str)> serde::de::DeserializeSeed<'de> for Items<'_, F> {
        type Value = bool;

        fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
            deserializer.deserialize_any(self)
        }
    }

    impl<'de, F: FnMut(&str)> Visitor<'de> for Items<'_, F> {
        type Value = bool;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<bool, A::Error> {
            each_item(seq, self.0)
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(false)
        }

        fn visit_unit<E>(self) -> Result<bool, E> {
            Ok(false)
        }

        fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
            Ok(false)
        }

        fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
            Ok(false)
        }

        fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
            Ok(false)
        }

        fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
            Ok(false)
        }

        fn visit_str<E>(self, _: &str) -> Result<bool, E> {
            Ok(false)
        }
    }

    fn each_item<'de, A: SeqAccess<'de>>(
        mut seq: A,
        each: &mut impl FnMut(&str),
    ) -> Result<bool, A::Error> {
        while let Some(item) = seq.next_element::<Box<RawValue>>()? {
            if item.get() != "null" {
                each(item.get());
            }
        }
        Ok(true)
    }
}

/// Reads every manifest under `path`.
pub fn read_path(path: &Path, skip_dirs: &[&str]) -> Result<Vec<Document>, ManifestError> {
    let mut documents = Vec::new();
    for file in collect_files(path, skip_dirs)? {
        let name = file.display().to_string();
        let text = std::fs::read_to_string(&file).map_err(|source| ManifestError::Io {
            path: name.clone(),
            source,
        })?;
        documents.extend(parse_documents(&name, &text)?);
    }
    Ok(documents)
}

type Fingerprint = Vec<(PathBuf, u64, Option<std::time::SystemTime>)>;

/// Names, sizes and modification times of the manifests under `path`:
/// cheap to take, and it changes whenever a file is edited, added, removed or
/// swapped in through a symlink.
fn fingerprint(path: &Path) -> Option<Fingerprint> {
    let files = collect_files(path, &[]).ok()?;
    Some(
        files
            .into_iter()
            .map(|f| {
                let meta = std::fs::metadata(&f).ok();
                let len = meta.as_ref().map_or(0, std::fs::Metadata::len);
                let modified = meta.and_then(|m| m.modified().ok());
                (f, len, modified)
            })
            .collect(),
    )
}

/// Calls `on_change` each time the manifests under `path` change, checking
/// every `interval`. Polling rather than inotify: Kubernetes ConfigMap and
/// Secret volumes change by swapping a symlink, which file watches miss.
pub async fn poll_changes(
    path: PathBuf,
    interval: std::time::Duration,
    mut on_change: impl FnMut() + Send,
) {
    let mut seen = fingerprint(&path);
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let now = fingerprint(&path);
        if now != seen {
            seen = now;
            on_change();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_document_yaml_and_lists_are_flattened_in_order() {
        let text = "kind: A\nmetadata: {name: a}\n---\nkind: List\nitems:\n- {kind: B, metadata: {name: b, namespace: ns}}\n---\n";
        let docs = parse_documents("f.yaml", text).unwrap();
        let refs: Vec<_> = docs.iter().map(Document::object_ref).collect();
        assert_eq!(refs, ["A/a", "B/ns/b"]);
        assert_eq!(docs[1].index, 1);
    }

    #[test]
    fn yaml_syntax_error_names_the_file_and_line() {
        let err = parse_documents("bad.yaml", "kind: A\nmetadata: {name: [\n").unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("bad.yaml: "), "{msg}");
        assert!(msg.contains("line"), "{msg}");
    }
}
