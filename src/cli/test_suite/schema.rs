//! The suite file's schema (docs/policy-tests.md), and reading it so that a
//! mistake is reported at its field and line in plain words.

use crate::input::InputError;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One suite file.
#[derive(Debug, Deserialize)]
#[serde(
    deny_unknown_fields,
    rename_all = "camelCase",
    expecting = "a test suite (a mapping with `cases`)"
)]
pub(super) struct Suite {
    /// Defaults to the file name without extension.
    pub name: Option<String>,
    /// A policy file or directory, relative to the suite file.
    pub policies: Option<PathBuf>,
    /// Objects (inline) or paths (relative to the suite file) for every case.
    #[serde(default)]
    pub params: Vec<Value>,
    #[serde(default)]
    pub recommendations: Vec<Value>,
    /// Free-form; a place to define YAML anchors that cases refer to.
    #[serde(default, rename = "fixtures")]
    pub _fixtures: Value,
    pub cases: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(
    deny_unknown_fields,
    rename_all = "camelCase",
    expecting = "a case (a mapping with `name`, `object` and `expect`)"
)]
pub(super) struct Case {
    pub name: String,
    #[serde(default = "create")]
    pub operation: String,
    pub sub_resource: Option<String>,
    pub object: Option<Value>,
    #[serde(default)]
    pub objects: Vec<Value>,
    pub old_object: Option<Value>,
    #[serde(default)]
    pub params: Vec<Value>,
    #[serde(default)]
    pub recommendations: Vec<Value>,
    pub user: Option<UserSpec>,
    #[serde(default)]
    pub nodes: Vec<String>,
    pub expect: Expect,
}

fn create() -> String {
    "CREATE".to_owned()
}

#[derive(Debug, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a user (a mapping with `username` and `groups`)"
)]
pub(super) struct UserSpec {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub groups: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an expectation (a mapping with `result`)"
)]
pub(super) struct Expect {
    pub result: String,
    pub policy: Option<String>,
    pub message: Option<String>,
    #[serde(default)]
    pub resources: BTreeMap<String, ExpectedResources>,
}

#[derive(Debug, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a container's resources (a mapping with `requests` and `limits`)"
)]
pub(super) struct ExpectedResources {
    #[serde(default)]
    pub requests: BTreeMap<String, Value>,
    #[serde(default)]
    pub limits: BTreeMap<String, Value>,
}

/// Reads a suite, `source` being its file as messages name it.
///
/// # Errors
/// Not YAML, or not a suite: `suite.yaml: cases[0].name: a value is
/// required here at line 2, column 7` (the field path and the line, once).
pub(super) fn parse(source: &str, text: &str) -> Result<Suite, InputError> {
    let fail = |message: String| InputError::File {
        path: source.to_owned(),
        message,
    };
    if text.trim().is_empty() {
        return Err(fail(
            "empty, not a test suite (it needs `cases`)".to_owned(),
        ));
    }
    let mut path = String::new();
    let options = serde_saphyr::options! { with_snippet: false };
    serde_saphyr::with_deserializer_from_str_with_options(text, options, |de| {
        serde_path_to_error::deserialize(de).map_err(|e| {
            path = e.path().to_string();
            e.into_inner()
        })
    })
    .map_err(|e| {
        let message = crate::messages::budget_words(&e).unwrap_or_else(|| {
            plain(&e.render_with_formatter(&serde_saphyr::UserMessageFormatter))
        });
        fail(crate::messages::at_field(&path, &message))
    })
}

/// The YAML parser's words for what it expected, in the user's terms.
fn plain(message: &str) -> String {
    [
        ("expected sequence start", "expected a list"),
        ("expected mapping start", "expected a mapping"),
        ("expected string scalar", "expected a string"),
        ("null is not allowed here", "a value is required here"),
    ]
    .iter()
    .fold(
        crate::messages::plain_serde_message(message),
        |text, (from, to)| text.replace(from, to),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        parse("s.yaml", text).map(|_| ()).unwrap_err().to_string()
    }

    #[test]
    fn a_suite_mistake_names_the_field_and_the_line_without_type_names() {
        assert_eq!(
            error("cases:\n- name:\n  object: {}\n  expect: {result: allow}\n"),
            "s.yaml: cases[0].name: a value is required here at line 2, column 7"
        );
        assert_eq!(
            error("cases: {}\n"),
            "s.yaml: cases: expected a list at line 1, column 8"
        );
        assert_eq!(
            error("cases:\n- name: a\n  object: {}\n  expect: {result: allow}\n  user: alice\n"),
            "s.yaml: cases[0].user: expected a mapping at line 5, column 9"
        );
        assert_eq!(
            error("cases:\n- name: a\n  object: {}\n"),
            "s.yaml: cases[0]: missing field `expect` at line 3, column 3"
        );
        assert_eq!(
            error("cases:\n- name: a\n  objekt: {}\n  expect: {result: allow}\n"),
            "s.yaml: cases[0]: unknown field `objekt`, expected one of name, operation, subResource, object, objects, oldObject, params, recommendations, user, nodes, expect at line 3, column 3"
        );
        assert_eq!(
            error(""),
            "s.yaml: empty, not a test suite (it needs `cases`)"
        );
    }
}
