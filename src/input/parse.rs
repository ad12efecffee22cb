//! Parsing what `-f`, `-k`, `--params`, `--recommendations` and `--old`
//! name (read by [`super::sources`]): multi-document YAML, JSON, `List`s and
//! AdmissionReviews. Every document keeps where it came from (file,
//! document number, line) so every complaint can point at it.

use super::documents::{json_values, push_document};
use crate::json::str_at;
use serde_json::Value;
use std::fmt;

/// Where a document came from, for messages: `file: document 2 (line 14)`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Location {
    /// The file as given (or found under a directory), `<stdin>` for `-`;
    /// the kustomization file for what a kustomization renders.
    #[serde(rename = "file")]
    pub source: String,
    /// 1-based number of the document in the file (empty documents
    /// skipped); `None` for an object written inline in a test suite,
    /// whose `source` then names its field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document: Option<usize>,
    /// 1-based number of the item, for documents that are `List`s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<usize>,
    /// 1-based line where the document starts, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source)?;
        if let Some(document) = self.document {
            write!(f, ": document {document}")?;
        }
        if let Some(item) = self.item {
            write!(f, ", item {item}")?;
        }
        if let Some(line) = self.line {
            write!(f, " (line {line})")?;
        }
        Ok(())
    }
}

impl Location {
    /// The SOURCE column: `file#document`, `file#document.item` for a
    /// `List`'s item.
    #[must_use]
    pub fn short(&self) -> String {
        match (self.document, self.item) {
            (Some(document), Some(item)) => format!("{}#{document}.{item}", self.source),
            (Some(document), None) => format!("{}#{document}", self.source),
            (None, _) => self.source.clone(),
        }
    }
}

/// One document read from an input, with where it came from.
#[derive(Debug, Clone)]
pub struct SourceDocument {
    pub location: Location,
    pub value: Value,
}

/// Why the input could not be used: always the user's to fix (exit code 2),
/// and always naming the file (and the document and line when there is one).
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error("{location}: {message}")]
    Document { location: Location, message: String },
    #[error("{0}")]
    Usage(String),
}

impl InputError {
    pub(crate) fn document(location: &Location, message: impl Into<String>) -> Self {
        Self::Document {
            location: location.clone(),
            message: message.into(),
        }
    }
}

/// The name standard input goes by in messages.
pub const STDIN: &str = "<stdin>";

/// Parses one file's text: JSON when it starts with `{` or `[`, else
/// multi-document YAML. `List`s (and top-level JSON arrays) are flattened.
///
/// # Errors
/// Syntax errors, with the line and column.
pub fn parse(source: &str, text: &str) -> Result<Vec<SourceDocument>, InputError> {
    parse_numbered(source, text, 0, 0).map(|(documents, _)| documents)
}

/// Bytes of YAML that [`parse_in_pieces`] parses at a time (less in unit
/// tests, so that a small file already comes in pieces).
const PIECE_BYTES: usize = if cfg!(test) { 64 << 10 } else { 4 << 20 };

/// Parses one file's text as [`parse`] does, but a large YAML file a piece
/// at a time (split at document markers), handing each piece's documents
/// to `each` before the next is parsed: the documents of a large file are
/// never all in memory. Numbers and lines are those of the whole file, and
/// so is a syntax error's message.
///
/// # Errors
/// A syntax error, or what `each` returns.
pub fn parse_in_pieces<E: From<InputError>>(
    source: &str,
    text: &str,
    mut each: impl FnMut(Vec<SourceDocument>) -> Result<(), E>,
) -> Result<(), E> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        // A stream of JSON documents (`jq -c` prints one per line) is
        // handed on a batch at a time, never held whole as values.
        let mut batch = Vec::new();
        let mut number = 0;
        let mut bytes = 0;
        json_values(source, text, |line, value, size| {
            number += 1;
            bytes += size;
            let location = Location {
                source: source.to_owned(),
                document: Some(number),
                item: None,
                line: Some(line),
            };
            push_document(&mut batch, location, value).map_err(E::from)?;
            if bytes >= PIECE_BYTES {
                bytes = 0;
                each(std::mem::take(&mut batch))?;
            }
            Ok::<(), E>(())
        })?;
        return each(batch);
    }
    if text.len() <= PIECE_BYTES {
        return each(parse(source, text)?);
    }
    let (mut start, mut documents, mut lines) = (0, 0, 0);
    while start < text.len() {
        let end = next_marker(text, (start + PIECE_BYTES).min(text.len()))
            .filter(|&end| end > start)
            .unwrap_or(text.len());
        let piece = &text[start..end];
        let (parsed, count) = match parse_numbered(source, piece, documents, lines) {
            Ok(parsed) => parsed,
            // The whole file's parse places the error as the file has it.
            Err(error) => return Err(parse(source, text).err().unwrap_or(error).into()),
        };
        each(parsed)?;
        documents += count;
        lines += piece.bytes().filter(|&b| b == b'\n').count() as u64;
        start = end;
    }
    Ok(())
}

/// [`parse`] of a piece of a file whose documents before it numbered
/// `first_document` and took `line_offset` lines; also returns how many
/// (non-empty) documents the piece holds.
fn parse_numbered(
    source: &str,
    text: &str,
    first_document: usize,
    line_offset: u64,
) -> Result<(Vec<SourceDocument>, usize), InputError> {
    let trimmed = text.trim_start();
    let documents: Vec<(Option<u64>, Value)> =
        if trimmed.starts_with('{') || trimmed.starts_with('[') {
            let mut values = Vec::new();
            json_values(source, text, |line, value, _| {
                values.push((Some(line), value));
                Ok::<(), InputError>(())
            })?;
            values
        } else {
            parse_yaml(source, text)?
        };
    let mut out = Vec::new();
    let mut count = 0;
    for (number, (line, value)) in documents
        .into_iter()
        .filter(|(_, v)| !v.is_null())
        .enumerate()
    {
        count += 1;
        let location = Location {
            source: source.to_owned(),
            document: Some(first_document + number + 1),
            item: None,
            line: line.map(|line| line + line_offset),
        };
        push_document(&mut out, location, value)?;
    }
    Ok((out, count))
}

/// A parsed document and the line it starts on, when known.
type LinedValue = (Option<u64>, Value);

/// Below this size a file is parsed on one thread.
const PARALLEL_PARSE_BYTES: usize = 256 * 1024;

/// Multi-document YAML, large files split at document markers and parsed on
/// every core. A line that starts with `---` and a blank is a document
/// marker wherever it is (YAML forbids it inside scalars), so the split never
/// changes a document; any error is reported from a whole-file parse, with
/// the line as the parser sees it.
fn parse_yaml(source: &str, text: &str) -> Result<Vec<LinedValue>, InputError> {
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    if threads > 1 && text.len() >= PARALLEL_PARSE_BYTES {
        let chunks = split_documents(text, threads);
        let parsed: Vec<Option<Vec<LinedValue>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = chunks
                .iter()
                .map(|&(line, chunk)| scope.spawn(move || parse_yaml_chunk(chunk, line).ok()))
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().ok().flatten())
                .collect()
        });
        if let Some(parts) = parsed.into_iter().collect::<Option<Vec<_>>>() {
            return Ok(parts.into_iter().flatten().collect());
        }
    }
    parse_yaml_chunk(text, 0).map_err(|e| InputError::File {
        path: source.to_owned(),
        message: crate::messages::yaml_error(text, &e),
    })
}

/// Parses `text`, whose first line is line `line_offset + 1` of the file.
fn parse_yaml_chunk(text: &str, line_offset: u64) -> Result<Vec<LinedValue>, serde_saphyr::Error> {
    // Manifests are the user's own files: allow many documents, keep the
    // depth limit that protects the stack.
    let options = serde_saphyr::options! {
        with_snippet: false,
        budget: serde_saphyr::budget! {
            max_documents: 10_000_000,
            max_nodes: usize::MAX,
            max_events: usize::MAX,
        },
    };
    let spanned: Vec<serde_saphyr::Spanned<Value>> =
        serde_saphyr::from_multiple_with_options(text, options)?;
    Ok(spanned
        .into_iter()
        .map(|s| {
            let line = s.referenced.line();
            ((line > 0).then_some(line + line_offset), s.value)
        })
        .collect())
}

/// Up to `parts` pieces of `text`, each starting at a document marker (but
/// the first), with the number of lines before it.
fn split_documents(text: &str, parts: usize) -> Vec<(u64, &str)> {
    let mut starts = vec![0];
    for part in 1..parts {
        let last = starts[starts.len() - 1];
        let Some(at) = next_marker(text, (text.len() * part / parts).max(last)) else {
            break;
        };
        if at > last {
            starts.push(at);
        }
    }
    starts.push(text.len());
    let mut lines = 0;
    let mut previous = 0;
    starts
        .windows(2)
        .map(|w| {
            lines += text.as_bytes()[previous..w[0]]
                .iter()
                .filter(|&&b| b == b'\n')
                .count() as u64;
            previous = w[0];
            (lines, &text[w[0]..w[1]])
        })
        .collect()
}

/// The byte offset of the first `---` document marker after `from`.
fn next_marker(text: &str, from: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut at = from;
    while let Some(found) = text.get(at..)?.find("\n---") {
        let start = at + found + 1;
        match bytes.get(start + 3) {
            None | Some(b' ' | b'\t' | b'\n' | b'\r') => return Some(start),
            Some(_) => at = start,
        }
    }
    None
}

/// Checks that a document is a Kubernetes object the CLI can build a
/// request for: an object with `apiVersion`, `kind` and a name.
///
/// # Errors
/// What is missing, at the document's location.
pub fn check_object(document: &SourceDocument) -> Result<(), InputError> {
    match object_problem(&document.value) {
        Some(problem) => Err(InputError::document(&document.location, problem)),
        None => Ok(()),
    }
}

/// What keeps `value` from being a Kubernetes object, if anything.
#[must_use]
pub fn object_problem(value: &Value) -> Option<String> {
    if !value.is_object() {
        return Some("not an object (a mapping with apiVersion, kind and metadata)".to_owned());
    }
    for field in ["kind", "apiVersion"] {
        match value.get(field) {
            None => return Some(format!("no `{field}`")),
            Some(Value::String(text)) if !text.is_empty() => {}
            Some(_) => return Some(format!("`{field}` must be a non-empty string")),
        }
    }
    match value.get("metadata") {
        Some(Value::Object(_)) => {}
        None => return Some("no `metadata`".to_owned()),
        Some(_) => return Some("`metadata` must be a mapping".to_owned()),
    }
    for field in ["name", "generateName", "namespace"] {
        if value
            .get("metadata")
            .and_then(|m| m.get(field))
            .is_some_and(|v| !v.is_string())
        {
            return Some(format!("`metadata.{field}` must be a string"));
        }
    }
    if str_at(value, "/metadata/name").is_empty()
        && str_at(value, "/metadata/generateName").is_empty()
    {
        return Some("neither `metadata.name` nor `metadata.generateName` is set".to_owned());
    }
    None
}

/// Whether a document is an AdmissionReview (replayed as is).
#[must_use]
pub fn is_review(value: &Value) -> bool {
    value.get("kind").and_then(Value::as_str) == Some("AdmissionReview")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_know_their_number_and_line_and_lists_their_items() {
        let text = "# c\n---\nkind: A\nmetadata: {name: a}\n---\n\n---\nkind: List\nitems:\n- {kind: B}\n- kind: C\n";
        let docs = parse("f.yaml", text).unwrap();
        let at: Vec<String> = docs.iter().map(|d| d.location.to_string()).collect();
        assert_eq!(
            at,
            [
                "f.yaml: document 1 (line 3)",
                "f.yaml: document 2, item 1 (line 8)",
                "f.yaml: document 2, item 2 (line 8)"
            ]
        );
        let sources: Vec<String> = docs.iter().map(|d| d.location.short()).collect();
        assert_eq!(sources, ["f.yaml#1", "f.yaml#2.1", "f.yaml#2.2"]);
    }

    #[test]
    fn a_large_file_parsed_in_pieces_keeps_every_document_and_its_line() {
        let mut text = String::from("# many\n");
        for i in 0..20_000 {
            text.push_str(&format!(
                "---\nkind: A\nmetadata: {{name: a{i}}}\nblock: |\n  x\n  ---not a marker\n"
            ));
        }
        assert!(text.len() > PARALLEL_PARSE_BYTES);
        assert!(split_documents(&text, 4).len() > 1);
        let docs = parse("big.yaml", &text).unwrap();
        assert_eq!(docs.len(), 20_000);
        assert_eq!(docs[12_345].value["metadata"]["name"], "a12345");
        assert_eq!(docs[12_345].location.document, Some(12_346));
        assert_eq!(docs[12_345].location.line, Some(2 + 12_345 * 6 + 1));
    }

    #[test]
    fn a_syntax_error_in_a_large_file_has_its_document_and_its_line_in_the_file() {
        let mut text = String::new();
        for i in 0..20_000 {
            text.push_str(&format!("---\nkind: A\nmetadata: {{name: a{i}}}\n"));
        }
        text.push_str("---\nkind: [\n");
        let err = parse("big.yaml", &text).unwrap_err().to_string();
        assert_eq!(
            err,
            "big.yaml: document 20001: not valid YAML: unclosed bracket '[' at line 60002, column 7"
        );
    }

    #[test]
    fn a_yaml_syntax_error_names_the_file_document_line_and_column() {
        let err = parse("bad.yaml", "kind: A\nmetadata: {name: [\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "bad.yaml: document 1: not valid YAML: unclosed bracket '[' at line 2, column 18"
        );
    }

    #[test]
    fn a_json_syntax_error_names_the_line() {
        let err = parse("bad.json", "{\n \"kind\": \n}").unwrap_err();
        assert!(err.to_string().starts_with("bad.json: not valid JSON: "));
        assert!(err.to_string().contains("line 3"), "{err}");
    }

    #[test]
    fn an_object_without_kind_is_reported_at_its_document() {
        let docs = parse("f.yaml", "kind: A\napiVersion: v1\nmetadata: {name: a}\n---\napiVersion: v1\nmetadata: {name: b}\n").unwrap();
        assert!(check_object(&docs[0]).is_ok());
        assert_eq!(
            check_object(&docs[1]).unwrap_err().to_string(),
            "f.yaml: document 2 (line 5): no `kind`"
        );
    }

    #[test]
    fn a_large_file_parsed_in_pieces_has_the_numbers_and_lines_of_a_whole_parse() {
        let mut text = String::new();
        for i in 0..5_000 {
            text.push_str(&format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}}}\n"
            ));
            if i % 700 == 0 {
                text.push_str("---\n# an empty document\n");
            }
        }
        assert!(text.len() > 2 * PIECE_BYTES);
        let whole: Vec<String> = parse("f.yaml", &text)
            .unwrap()
            .iter()
            .map(|d| format!("{} {}", d.location, d.value["metadata"]["name"]))
            .collect();
        let mut pieces = Vec::new();
        let mut calls = 0;
        parse_in_pieces("f.yaml", &text, |documents: Vec<SourceDocument>| {
            calls += 1;
            pieces.extend(
                documents
                    .iter()
                    .map(|d| format!("{} {}", d.location, d.value["metadata"]["name"])),
            );
            Ok::<(), InputError>(())
        })
        .unwrap();
        assert!(calls > 2, "{calls}");
        assert_eq!(pieces, whole);
    }
}
