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
/// sorted, skipping directories named in `skip_dirs`. A directory or file
/// reached a second time (a link back up the tree, two links to one file)
/// is not listed again: a loop would otherwise be walked until the path is
/// too long, and a file counted once per path to it.
pub fn collect_files(path: &Path, skip_dirs: &[&str]) -> Result<Vec<PathBuf>, ManifestError> {
    let mut files = Vec::new();
    collect_into(path, skip_dirs, &mut files, true, &mut Visited::default())?;
    Ok(files)
}

/// The directories and files a walk has been to, by device and inode:
/// what a path names, whichever links led there.
#[derive(Debug, Default)]
pub struct Visited(std::collections::HashSet<(u64, u64)>);

impl Visited {
    /// Whether `meta` (of a file or directory, links followed) is seen for
    /// the first time; it is then remembered.
    pub fn first(&mut self, meta: &std::fs::Metadata) -> bool {
        use std::os::unix::fs::MetadataExt;
        self.0.insert((meta.dev(), meta.ino()))
    }
}

fn collect_into(
    path: &Path,
    skip_dirs: &[&str],
    files: &mut Vec<PathBuf>,
    top: bool,
    visited: &mut Visited,
) -> Result<(), ManifestError> {
    let io = |source| ManifestError::Io {
        path: path.display().to_string(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if !visited.first(&meta) {
        return Ok(());
    }
    if meta.is_file() {
        if top || is_manifest(path) {
            files.push(path.to_owned());
        }
        return Ok(());
    }
    let entries = sorted_entries(path).map_err(io)?;
    for entry in entries {
        let name = entry.file_name().and_then(|n| n.to_str()).unwrap_or("");
        // Kubernetes Secret/ConfigMap volumes keep old generations in dot dirs.
        if name.starts_with('.') {
            continue;
        }
        if entry.is_dir() {
            if !skip_dirs.contains(&name) {
                collect_into(&entry, skip_dirs, files, false, visited)?;
            }
        } else if is_manifest(&entry) {
            // A link that leads nowhere is listed, for its read to say so.
            if std::fs::metadata(&entry).is_ok_and(|meta| !visited.first(&meta)) {
                continue;
            }
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
        // One value, or several one after another (`jq -c` output).
        serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .collect::<Result<_, _>>()
            .map_err(|e| syntax(format!("not valid JSON: {e}")))?
    } else {
        let options = serde_saphyr::options! { with_snippet: false };
        serde_saphyr::from_multiple_with_options(text, options)
            .map_err(|e| syntax(crate::messages::yaml_error(text, &e)))?
    };
    let mut documents = Vec::new();
    for value in values {
        match value {
            Value::Null => {}
            Value::Object(map) if is_list(&map) => {
                if let Some(items) = list_items(map) {
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

/// Whether an object is a list whose items are the objects: `kind: List`,
/// as `kubectl get -o yaml` writes, or a typed list (`PodList`,
/// `NodeList`, any `*List` with an `items` array) as the API returns it.
#[must_use]
pub fn is_list(map: &serde_json::Map<String, Value>) -> bool {
    match map.get("kind").and_then(Value::as_str) {
        Some("List") => true,
        Some(kind) => {
            kind.len() > 4
                && kind.ends_with("List")
                && map.get("items").is_some_and(Value::is_array)
        }
        None => false,
    }
}

/// The items of a list ([`is_list`]), `None` when `items` is not a list.
/// A typed list's items get the kind and apiVersion the API leaves out of
/// them (`PodList` of `v1`: `Pod` of `v1`).
#[must_use]
pub fn list_items(mut map: serde_json::Map<String, Value>) -> Option<Vec<Value>> {
    let mut items = match map.remove("items") {
        Some(Value::Array(items)) => items,
        Some(Value::Null) | None => return Some(Vec::new()),
        Some(_) => return None,
    };
    let head = ListHead {
        kind: map.get("kind").and_then(Value::as_str).map(str::to_owned),
        api_version: map
            .get("apiVersion")
            .and_then(Value::as_str)
            .map(str::to_owned),
    };
    for item in &mut items {
        fill_item_type(item, &head);
    }
    Some(items)
}

/// Gives a typed list's item the kind and apiVersion it leaves out.
pub fn fill_item_type(item: &mut Value, head: &ListHead) {
    let Some(kind) = head
        .kind
        .as_deref()
        .and_then(|k| k.strip_suffix("List"))
        .filter(|k| !k.is_empty())
    else {
        return;
    };
    let Value::Object(item) = item else { return };
    if !item.contains_key("kind") {
        item.insert("kind".to_owned(), Value::from(kind));
    }
    if let Some(api_version) = &head.api_version {
        if !item.contains_key("apiVersion") {
            item.insert("apiVersion".to_owned(), Value::from(api_version.as_str()));
        }
    }
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
    // A large store is read once to find its values, once more by the
    // object that keeps it; a List, once more for its items. Several
    // values one after another (`jq -c` output) are each a document.
    let mut items = Vec::new();
    for value in serde_json::Deserializer::from_str(text).into_iter::<&'a RawValue>() {
        let value = value.map_err(syntax)?;
        let raw = value.get();
        if raw.starts_with('[') {
            items.extend(serde_json::from_str::<Vec<&'a RawValue>>(raw).map_err(syntax)?);
            continue;
        }
        match serde_json::from_str::<ListDoc<'a>>(raw) {
            Ok(ListDoc {
                kind: Some(kind),
                items: list,
            }) if kind == "List" => items.extend(list.unwrap_or_default()),
            _ => items.push(value),
        }
    }
    Ok(items.into_iter().filter(|i| i.get() != "null").collect())
}

/// Calls `each` with the text of every item of a JSON `List` or top-level
/// array read from `reader`, holding about one item in memory at a time: a
/// 100 MB store would otherwise sit in memory whole while it is converted,
/// more than doubling the server's peak RSS at start.
///
/// Items are found by a structural scan of the bytes (strings, escapes and
/// brackets), read block by block; the JSON between items is checked here,
/// each item's own text is checked by whoever parses it (`each` returns
/// `false` for an item that is not valid JSON). Returns `Ok(false)`, having
/// called `each` only with text the caller must then discard, for anything
/// else: a single object, an object with `items` that is not a `List`, or
/// text that is not valid JSON. The caller then reads the file whole, which
/// names the line and column of a syntax error.
pub fn stream_json_items(
    reader: impl std::io::Read,
    mut each: impl FnMut(&str) -> bool,
) -> Result<bool, std::io::Error> {
    stream::Items::new(
        reader,
        |_: &ListHead, item: &str| each(item),
        stream::BLOCK,
        false,
    )
    .run()
}

/// [`stream_json_items`] for typed lists too (`PodList`, any `*List` with
/// `items`, as the API returns them): `each` also gets what the list said
/// of itself before its items, for items that leave their kind out.
pub fn stream_json_list_items(
    reader: impl std::io::Read,
    each: impl FnMut(&ListHead, &str) -> bool,
) -> Result<bool, std::io::Error> {
    stream::Items::new(reader, each, stream::BLOCK, true).run()
}

pub use stream::ListHead;

mod stream;

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

/// The paths in `dir`, sorted, so that every walk of a directory reads it
/// in the same order whatever the filesystem returns.
pub fn sorted_entries(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut entries = std::fs::read_dir(dir)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()?;
    entries.sort();
    Ok(entries)
}

#[cfg(test)]
#[path = "manifest_tests.rs"]
mod tests;
