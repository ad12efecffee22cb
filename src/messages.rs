//! Error messages in the words of a manifest's author: one line, naming
//! the document and the field, without the Rust type names that serde and
//! the YAML parser put in theirs. Shared by everything that reads
//! manifests, policies and test suites.

use serde_json::Value;

/// A YAML syntax error as one line that names the document as well as the
/// line, since an editor's line number alone does not say which object of a
/// long multi-document file is broken: `document 2: not valid YAML: unclosed
/// bracket '[' at line 7, column 18`.
#[must_use]
pub fn yaml_error(text: &str, error: &serde_saphyr::Error) -> String {
    let message = error.render_with_formatter(&serde_saphyr::UserMessageFormatter);
    match error.location().and_then(|at| document_at(text, at.line())) {
        Some(document) => format!("document {document}: not valid YAML: {message}"),
        None => format!("not valid YAML: {message}"),
    }
}

/// The number of the document (empty ones not counted, as when reading)
/// that holds 1-based `line`: one more than the documents before the last
/// `---` marker at or above it. `None` when what precedes does not parse.
fn document_at(text: &str, line: u64) -> Option<usize> {
    let mut start = 0;
    let mut offset = 0;
    for (number, content) in (1..).zip(text.split_inclusive('\n')) {
        if number > line {
            break;
        }
        let rest = content.strip_prefix("---");
        if rest.is_some_and(|r| r.is_empty() || r.starts_with([' ', '\t', '\n', '\r'])) {
            start = offset;
        }
        offset += content.len();
    }
    let options = serde_saphyr::options! {
        with_snippet: false,
        budget: serde_saphyr::budget! {
            max_documents: usize::MAX,
            max_nodes: usize::MAX,
            max_events: usize::MAX,
        },
    };
    let before: Vec<Value> =
        serde_saphyr::from_multiple_with_options(text.get(..start)?, options).ok()?;
    Some(before.iter().filter(|v| !v.is_null()).count() + 1)
}

/// A serde message in the words of a manifest's author, without the Rust
/// type names serde puts in it: `invalid length 0, expected struct
/// MatchResources with 5 elements` (a list where a mapping belongs) becomes
/// `expected a mapping, not a list`.
#[must_use]
pub fn plain_serde_message(message: &str) -> String {
    static RULES: std::sync::LazyLock<Vec<(regex::Regex, &str)>> = std::sync::LazyLock::new(|| {
        [
            (
                r"invalid length \d+, expected .* with \d+ elements?",
                "expected a mapping, not a list",
            ),
            (
                r"invalid type: (?:array|sequence), expected an object",
                "expected a mapping, not a list",
            ),
            (
                r"expected (?:struct|tuple struct|enum) \w+",
                "expected a mapping",
            ),
            (r"\bexpected a map\b", "expected a mapping"),
            (r"\bexpected an object\b", "expected a mapping"),
            (
                r"\bexpected string or map\b",
                "expected a string or a mapping",
            ),
            (r"\bexpected a sequence\b", "expected a list"),
            (r"\binvalid type: map\b", "invalid type: mapping"),
            (r"\binvalid type: sequence\b", "invalid type: list"),
        ]
        .into_iter()
        .filter_map(|(pattern, words)| Some((regex::Regex::new(pattern).ok()?, words)))
        .collect()
    });
    RULES
        .iter()
        .fold(message.to_owned(), |text, (pattern, words)| {
            pattern.replace_all(&text, *words).into_owned()
        })
}

/// `field: message` for a serde error at `path` (as `serde_path_to_error`
/// writes it, `spec.validations[1].expression`), `message` alone at the
/// root. An unknown field's message names the field already, so the path
/// stops at its parent rather than say it twice.
#[must_use]
pub fn at_field(path: &str, message: &str) -> String {
    let path = if message.starts_with("unknown field") {
        path.rsplit_once('.').map_or("", |(parent, _)| parent)
    } else {
        path
    };
    match path {
        "" | "." => message.to_owned(),
        field => format!("{field}: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_messages_lose_their_rust_type_names() {
        assert_eq!(
            plain_serde_message("invalid length 0, expected struct MatchResources with 5 elements"),
            "expected a mapping, not a list"
        );
        assert_eq!(
            plain_serde_message("invalid type: integer `5`, expected struct PolicySpec"),
            "invalid type: integer `5`, expected a mapping"
        );
        assert_eq!(
            plain_serde_message("invalid type: map, expected a sequence"),
            "invalid type: mapping, expected a list"
        );
        assert_eq!(
            plain_serde_message("invalid type: sequence, expected a map"),
            "invalid type: list, expected a mapping"
        );
    }

    #[test]
    fn an_unknown_field_is_named_once_at_its_parent() {
        assert_eq!(
            at_field("spec.validations[1].expresion", "unknown field `expresion`"),
            "spec.validations[1]: unknown field `expresion`"
        );
        assert_eq!(
            at_field("spec.failurePolicy", "unknown variant `Maybe`"),
            "spec.failurePolicy: unknown variant `Maybe`"
        );
        assert_eq!(
            at_field(".", "missing field `spec`"),
            "missing field `spec`"
        );
    }
}
