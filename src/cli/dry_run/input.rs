//! Reading what `-f`, `--params`, `--recommendations` and `--old` name:
//! files, directories, stdin; multi-document YAML, JSON, `List`s and
//! AdmissionReviews. Every document keeps where it came from (file,
//! document number, line) so every complaint can point at it.

use crate::manifest::{collect_files, ManifestError};
use serde_json::Value;
use std::fmt;
use std::io::Read;
use std::path::Path;

/// Where a document came from, for messages: `file: document 2 (line 14)`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Location {
    /// The file as given (or found under a directory), `<stdin>` for `-`.
    #[serde(rename = "file")]
    pub source: String,
    /// 1-based number of the document in the file (empty documents skipped).
    pub document: usize,
    /// 1-based number of the item, for documents that are `List`s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<usize>,
    /// 1-based line where the document starts, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: document {}", self.source, self.document)?;
        if let Some(item) = self.item {
            write!(f, ", item {item}")?;
        }
        if let Some(line) = self.line {
            write!(f, " (line {line})")?;
        }
        Ok(())
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

impl From<ManifestError> for InputError {
    fn from(error: ManifestError) -> Self {
        match error {
            ManifestError::Io { path, source } => Self::File {
                path,
                message: source.to_string(),
            },
            ManifestError::Syntax { path, message } => Self::File { path, message },
        }
    }
}

/// The name standard input goes by in messages.
pub const STDIN: &str = "<stdin>";

/// Reads every document under each of `paths` (`-` is stdin, read once).
///
/// # Errors
/// The first unreadable file or syntax error.
pub fn read_all(paths: &[impl AsRef<Path>]) -> Result<Vec<SourceDocument>, InputError> {
    let mut documents = Vec::new();
    let mut stdin_read = false;
    for path in paths {
        let path = path.as_ref();
        if path == Path::new("-") {
            if stdin_read {
                return Err(InputError::Usage(
                    "`-` (stdin) can be given only once".to_owned(),
                ));
            }
            stdin_read = true;
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| InputError::File {
                    path: STDIN.to_owned(),
                    message: e.to_string(),
                })?;
            documents.extend(parse(STDIN, &text)?);
            continue;
        }
        for file in collect_files(path, &[])? {
            let name = file.display().to_string();
            let text = std::fs::read_to_string(&file).map_err(|e| InputError::File {
                path: name.clone(),
                message: e.to_string(),
            })?;
            documents.extend(parse(&name, &text)?);
        }
    }
    Ok(documents)
}

/// Parses one file's text: JSON when it starts with `{` or `[`, else
/// multi-document YAML. `List`s (and top-level JSON arrays) are flattened.
///
/// # Errors
/// Syntax errors, with the line and column.
pub fn parse(source: &str, text: &str) -> Result<Vec<SourceDocument>, InputError> {
    let trimmed = text.trim_start();
    let documents: Vec<(Option<u64>, Value)> =
        if trimmed.starts_with('{') || trimmed.starts_with('[') {
            let value: Value = serde_json::from_str(text).map_err(|e| InputError::File {
                path: source.to_owned(),
                message: format!("not valid JSON: {e}"),
            })?;
            let line = text.len() - trimmed.len();
            let line = text[..line].matches('\n').count() as u64 + 1;
            match value {
                Value::Array(items) => vec![(Some(line), Value::Object(list_of(items)))],
                other => vec![(Some(line), other)],
            }
        } else {
            // Manifests are the user's own files: allow many documents, keep
            // the depth limit that protects the stack.
            let options = serde_saphyr::options! {
                with_snippet: false,
                budget: serde_saphyr::budget! {
                    max_documents: 10_000_000,
                    max_nodes: usize::MAX,
                    max_events: usize::MAX,
                },
            };
            let spanned: Vec<serde_saphyr::Spanned<Value>> =
                serde_saphyr::from_multiple_with_options(text, options).map_err(|e| {
                    InputError::File {
                        path: source.to_owned(),
                        message: format!("not valid YAML: {e}"),
                    }
                })?;
            spanned
                .into_iter()
                .map(|s| (Some(s.referenced.line()).filter(|&l| l > 0), s.value))
                .collect()
        };
    let mut out = Vec::new();
    for (number, (line, value)) in documents
        .into_iter()
        .filter(|(_, v)| !v.is_null())
        .enumerate()
    {
        let location = Location {
            source: source.to_owned(),
            document: number + 1,
            item: None,
            line,
        };
        match value {
            Value::Object(mut map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
                let items = match map.remove("items") {
                    Some(Value::Array(items)) => items,
                    Some(Value::Null) | None => Vec::new(),
                    Some(_) => {
                        return Err(InputError::document(
                            &location,
                            "a List's `items` must be a list",
                        ))
                    }
                };
                out.extend(
                    items
                        .into_iter()
                        .enumerate()
                        .map(|(i, value)| SourceDocument {
                            location: Location {
                                item: Some(i + 1),
                                ..location.clone()
                            },
                            value,
                        }),
                );
            }
            value => out.push(SourceDocument { location, value }),
        }
    }
    Ok(out)
}

fn list_of(items: Vec<Value>) -> serde_json::Map<String, Value> {
    let mut map = serde_json::Map::new();
    map.insert("kind".to_owned(), Value::from("List"));
    map.insert("items".to_owned(), Value::Array(items));
    map
}

/// The string at `pointer`, or `""`.
pub(crate) fn str_at<'v>(value: &'v Value, pointer: &str) -> &'v str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// Checks that a document is a Kubernetes object the CLI can build a
/// request for: an object with `apiVersion`, `kind` and a name.
///
/// # Errors
/// What is missing, at the document's location.
pub fn check_object(document: &SourceDocument) -> Result<(), InputError> {
    let value = &document.value;
    let fail = |message: &str| Err(InputError::document(&document.location, message));
    if !value.is_object() {
        return fail("not an object (a mapping with apiVersion, kind and metadata)");
    }
    match value.get("kind") {
        None => return fail("no `kind`"),
        Some(Value::String(kind)) if !kind.is_empty() => {}
        Some(_) => return fail("`kind` must be a non-empty string"),
    }
    match value.get("apiVersion") {
        None => return fail("no `apiVersion`"),
        Some(Value::String(v)) if !v.is_empty() => {}
        Some(_) => return fail("`apiVersion` must be a non-empty string"),
    }
    match value.get("metadata") {
        Some(Value::Object(_)) => {}
        None => return fail("no `metadata`"),
        Some(_) => return fail("`metadata` must be a mapping"),
    }
    for field in ["name", "generateName", "namespace"] {
        if value
            .pointer(&format!("/metadata/{field}"))
            .is_some_and(|v| !v.is_string())
        {
            return fail(&format!("`metadata.{field}` must be a string"));
        }
    }
    if str_at(value, "/metadata/name").is_empty()
        && str_at(value, "/metadata/generateName").is_empty()
    {
        return fail("neither `metadata.name` nor `metadata.generateName` is set");
    }
    Ok(())
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
    }

    #[test]
    fn a_yaml_syntax_error_names_the_file_line_and_column() {
        let err = parse("bad.yaml", "kind: A\nmetadata: {name: [\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "bad.yaml: not valid YAML: unclosed bracket '[' at line 2, column 18"
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
}
