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
    let entries = sorted_entries(path).map_err(io)?;
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
        vec![serde_json::from_str(text).map_err(|e| syntax(format!("not valid JSON: {e}")))?]
    } else {
        let options = serde_saphyr::options! { with_snippet: false };
        serde_saphyr::from_multiple_with_options(text, options)
            .map_err(|e| syntax(crate::messages::yaml_error(text, &e)))?
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
    each: impl FnMut(&str) -> bool,
) -> Result<bool, std::io::Error> {
    stream::Items::new(reader, each, stream::BLOCK).run()
}

/// The structural scan behind [`stream_json_items`].
mod stream {
    use serde::de::IgnoredAny;
    use std::io::Read;

    /// Bytes read from the file per block.
    pub(super) const BLOCK: usize = 1 << 20;

    pub(super) struct Items<R, F> {
        reader: R,
        each: F,
        buf: Vec<u8>,
        /// The smallest read.
        block: usize,
        /// Everything before `pos` has been handled.
        pos: usize,
        eof: bool,
    }

    /// Why the scan stopped short of a full answer.
    enum Stop {
        /// The text is not what this scan streams, or not valid JSON.
        Decline,
        Io(std::io::Error),
    }

    type Step<T> = Result<T, Stop>;

    impl<R: Read, F: FnMut(&str) -> bool> Items<R, F> {
        pub(super) fn new(reader: R, each: F, block: usize) -> Self {
            Items {
                reader,
                each,
                buf: Vec::new(),
                block: block.max(1),
                pos: 0,
                eof: false,
            }
        }

        pub(super) fn run(mut self) -> Result<bool, std::io::Error> {
            match self.document() {
                Ok(streamed) => Ok(streamed),
                Err(Stop::Decline) => Ok(false),
                Err(Stop::Io(e)) => Err(e),
            }
        }

        fn document(&mut self) -> Step<bool> {
            let streamed = match self.peek()? {
                Some(b'[') => {
                    self.pos += 1;
                    self.items()?;
                    true
                }
                Some(b'{') => {
                    self.pos += 1;
                    self.list()?
                }
                _ => return Err(Stop::Decline),
            };
            match self.peek()? {
                None => Ok(streamed),
                Some(_) => Err(Stop::Decline),
            }
        }

        /// The members of an object after its `{`: `true` when `kind` is
        /// `List` and `items` an array, whose items are streamed.
        fn list(&mut self) -> Step<bool> {
            let (mut kind, mut has_items) = (None::<bool>, false);
            if self.peek()? == Some(b'}') {
                self.pos += 1;
                return Ok(false);
            }
            loop {
                let key = self.value()?;
                let key = span(&self.buf, key).to_vec();
                if key.first() != Some(&b'"') || serde_json::from_slice::<IgnoredAny>(&key).is_err()
                {
                    return Err(Stop::Decline);
                }
                self.expect(b':')?;
                if key == b"\"items\"" {
                    if has_items || self.peek()? != Some(b'[') {
                        return Err(Stop::Decline);
                    }
                    self.pos += 1;
                    self.items()?;
                    has_items = true;
                } else {
                    let value = self.value()?;
                    let text =
                        std::str::from_utf8(span(&self.buf, value)).map_err(|_| Stop::Decline)?;
                    serde_json::from_str::<IgnoredAny>(text).map_err(|_| Stop::Decline)?;
                    if key == b"\"kind\"" {
                        // A repeated `kind` is left to serde_json, which rejects it.
                        if kind.is_some() {
                            return Err(Stop::Decline);
                        }
                        kind = Some(text == "\"List\"");
                    }
                }
                match self.peek()? {
                    Some(b',') => self.pos += 1,
                    Some(b'}') => {
                        self.pos += 1;
                        return Ok(kind == Some(true) && has_items);
                    }
                    _ => return Err(Stop::Decline),
                }
            }
        }

        /// The items of an array after its `[`, each handed to `each`.
        fn items(&mut self) -> Step<()> {
            if self.peek()? == Some(b']') {
                self.pos += 1;
                return Ok(());
            }
            loop {
                let item = self.value()?;
                let text = std::str::from_utf8(span(&self.buf, item)).map_err(|_| Stop::Decline)?;
                if text != "null" && !(self.each)(text) {
                    return Err(Stop::Decline);
                }
                match self.peek()? {
                    Some(b',') => self.pos += 1,
                    Some(b']') => {
                        self.pos += 1;
                        return Ok(());
                    }
                    _ => return Err(Stop::Decline),
                }
            }
        }

        /// Skips whitespace; the next byte, `None` at the end of the file.
        fn peek(&mut self) -> Step<Option<u8>> {
            loop {
                while let Some(&b) = self.buf.get(self.pos) {
                    if !matches!(b, b' ' | b'\n' | b'\t' | b'\r') {
                        return Ok(Some(b));
                    }
                    self.pos += 1;
                }
                if !self.fill()? {
                    return Ok(None);
                }
            }
        }

        fn expect(&mut self, byte: u8) -> Step<()> {
            if self.peek()? != Some(byte) {
                return Err(Stop::Decline);
            }
            self.pos += 1;
            Ok(())
        }

        /// The span of the value at the cursor, found by its structure
        /// alone (reading more of the file until it is complete); the
        /// cursor moves past it.
        fn value(&mut self) -> Step<(usize, usize)> {
            self.peek()?;
            loop {
                // `fill` moves the unhandled bytes to the front of `buf`.
                let start = self.pos;
                if let Some(end) = value_end(&self.buf, start, self.eof)? {
                    self.pos = end;
                    return Ok((start, end));
                }
                self.fill()?;
            }
        }

        /// Reads one more block, first dropping what was handled; `false`
        /// at the end of the file.
        fn fill(&mut self) -> Step<bool> {
            if self.eof {
                return Ok(false);
            }
            if self.pos > 0 {
                self.buf.drain(..self.pos);
                self.pos = 0;
            }
            // Doubling, so a value larger than a block is scanned from its
            // start a logarithmic number of times.
            let want = self.block.max(self.buf.len());
            let read = loop {
                match (&mut self.reader)
                    .take(want as u64)
                    .read_to_end(&mut self.buf)
                {
                    Ok(n) => break n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(Stop::Io(e)),
                }
            };
            if read == 0 {
                self.eof = true;
            }
            Ok(read > 0)
        }
    }

    /// The bytes of a span that `value` returned.
    fn span(buf: &[u8], (start, end): (usize, usize)) -> &[u8] {
        buf.get(start..end).unwrap_or_default()
    }

    /// Where the JSON value starting at `start` ends, by its strings and
    /// brackets; `Ok(None)` when `buf` ends first and more may follow.
    /// Declines what cannot start or end a value; what is inside is checked
    /// by whoever parses it.
    fn value_end(buf: &[u8], start: usize, eof: bool) -> Step<Option<usize>> {
        let short = || if eof { Err(Stop::Decline) } else { Ok(None) };
        let mut depth = 0usize;
        let mut i = start;
        loop {
            let Some(&b) = buf.get(i) else {
                return short();
            };
            match b {
                b'"' => {
                    i += 1;
                    loop {
                        let Some(rest) = buf.get(i..) else {
                            return short();
                        };
                        match memchr::memchr2(b'"', b'\\', rest) {
                            None => return short(),
                            Some(at) if rest[at] == b'"' => {
                                i += at + 1;
                                break;
                            }
                            // A backslash escapes the byte after it.
                            Some(at) => i += at + 2,
                        }
                    }
                }
                b'{' | b'[' => {
                    depth += 1;
                    i += 1;
                }
                b'}' | b']' => {
                    if depth == 0 {
                        return Err(Stop::Decline);
                    }
                    depth -= 1;
                    i += 1;
                }
                _ if depth == 0 => {
                    // A number or literal at the top: it ends at the first
                    // byte that cannot be part of it.
                    let rest = buf.get(i..).unwrap_or_default();
                    match rest.iter().position(|c| {
                        !(c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.'))
                    }) {
                        Some(0) => return Err(Stop::Decline),
                        Some(n) => return Ok(Some(i + n)),
                        None if eof && !rest.is_empty() => return Ok(Some(buf.len())),
                        None => return short(),
                    }
                }
                _ => i += 1,
            }
            if depth == 0 {
                return Ok(Some(i));
            }
        }
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
mod tests {
    use super::*;

    /// What the streaming scan hands out when it reads `step` bytes at a
    /// time (so values straddle every block boundary), or `None` when it
    /// declines.
    fn streamed(text: &str, step: usize) -> Option<Vec<String>> {
        let mut items = Vec::new();
        let each = |item: &str| {
            items.push(item.to_owned());
            serde_json::from_str::<serde::de::IgnoredAny>(item).is_ok()
        };
        let complete = stream::Items::new(text.as_bytes(), each, step)
            .run()
            .unwrap_or_else(|e| panic!("{e}"));
        complete.then_some(items)
    }

    /// The items the whole-file read finds, as text.
    fn whole(text: &str) -> Option<Vec<String>> {
        let items = json_items("t", text).ok()?;
        Some(items.into_iter().map(|i| i.get().to_owned()).collect())
    }

    #[test]
    fn streamed_items_are_the_whole_file_reads_items_at_every_block_boundary() {
        let vpa = r#"{"kind":"VerticalPodAutoscaler","metadata":{"name":"a \"[{\\"},"status":{"recommendationGroups":[{"scopeValue":"n]}1"}]},"n":[-1.5e3,true,null,{}]}"#;
        let lists = [
            format!("[{vpa},\n {vpa} ]"),
            format!(" {{\"apiVersion\":\"v1\",\"items\":[{vpa},null,{vpa}],\"kind\":\"List\",\"metadata\":{{\"resourceVersion\":\"\"}}}}\n"),
            format!("{{\"kind\": \"List\", \"items\": [ {vpa} ]}}"),
            "{\"kind\":\"List\",\"items\":[]}".to_owned(),
            "[]".to_owned(),
            "[5, \"x\", true]".to_owned(),
        ];
        for text in &lists {
            for step in [1, 2, 3, 7, 64, 1 << 20] {
                let got = streamed(text, step);
                assert!(got.is_some(), "declined {text} at step {step}");
                assert_eq!(got, whole(text), "{text} at step {step}");
            }
        }
    }

    /// Any JSON value, with strings that stress the scan: quotes,
    /// backslashes, brackets, escapes and non-ASCII.
    fn any_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            (-1e6f64..1e6).prop_map(Value::from),
            "[a-z\"\\\\{}\\[\\],:\\n\u{e9}\u{1F600} ]{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec(("[a-z\"{]{1,6}", inner), 0..6)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// Whatever the items and however the text is cut into blocks, the
        /// streamed items are the whole-file read's, pretty or compact, as
        /// an array or a `List`.
        #[test]
        fn streaming_agrees_with_the_whole_file_read(
            items in proptest::collection::vec(any_json(), 0..6),
            pretty in proptest::bool::ANY,
            list in proptest::bool::ANY,
            step in 1usize..40,
        ) {
            let document = if list {
                serde_json::json!({"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"x": "]"}})
            } else {
                Value::Array(items)
            };
            let text = if pretty {
                serde_json::to_string_pretty(&document)
            } else {
                serde_json::to_string(&document)
            }
            .unwrap_or_default();
            let got = streamed(&text, step);
            proptest::prop_assert!(got.is_some(), "declined {}", text);
            proptest::prop_assert_eq!(got, whole(&text));
        }
    }

    #[test]
    fn anything_but_a_valid_list_or_array_is_left_to_the_whole_file_read() {
        let declined = [
            // Not a List: one object, or `items` under another kind.
            r#"{"kind":"Namespace","metadata":{"name":"a"}}"#,
            r#"{"kind":"Thing","items":[{"a":1}]}"#,
            r#"{"items":[{"a":1}]}"#,
            r#"{"kind":"List","kind":"List","items":[]}"#,
            r#"{"kind":"List","items":{"a":1}}"#,
            r#"{"\u006bind":"List","items":[]}"#,
            // Not valid JSON, between items or inside one.
            r#"[{"a":1} {"b":2}]"#,
            r#"[{"a":1},]"#,
            r#"[{"a":1}] x"#,
            r#"[{"a" 1}]"#,
            r#"[{"a":"unterminated}]"#,
            r#"[{"a":1}"#,
            r#"{"kind":"List","items":[],"metadata":{bad}}"#,
            r#"{5:1,"kind":"List","items":[]}"#,
            r#"["\\","#,
            "",
            "  ",
        ];
        for text in declined {
            for step in [1, 5, 1 << 20] {
                assert_eq!(streamed(text, step), None, "{text} at step {step}");
            }
        }
    }

    #[test]
    fn multi_document_yaml_and_lists_are_flattened_in_order() {
        let text = "kind: A\nmetadata: {name: a}\n---\nkind: List\nitems:\n- {kind: B, metadata: {name: b, namespace: ns}}\n---\n";
        let docs = parse_documents("f.yaml", text).unwrap();
        let refs: Vec<_> = docs.iter().map(Document::object_ref).collect();
        assert_eq!(refs, ["A/a", "B/ns/b"]);
        assert_eq!(docs[1].index, 1);
    }

    #[test]
    fn a_yaml_syntax_error_names_the_file_the_document_and_the_line_on_one_line() {
        let err = parse_documents("bad.yaml", "kind: A\nmetadata: {name: [\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "bad.yaml: document 1: not valid YAML: unclosed bracket '[' at line 2, column 18"
        );
        let text = "# c\n---\n---\nkind: A\n---\nkind: B\n--- \nkind: [\n";
        let err = parse_documents("bad.yaml", text).unwrap_err();
        assert_eq!(
            err.to_string(),
            "bad.yaml: document 3: not valid YAML: unclosed bracket '[' at line 8, column 7"
        );
    }
}
