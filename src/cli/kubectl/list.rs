//! The one shape of every `-o json|yaml` that prints several objects or
//! rows: kubectl's `{"apiVersion": "v1", "items": [...], "kind": "List"}`,
//! so that `jq .items` and `kubectl apply -f` read every command's output
//! alike.

use clap::ValueEnum;
use serde::Serialize;

/// `-o` of a command that prints rows: kubectl's table, or the List as
/// JSON or YAML.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Table,
    Json,
    Yaml,
}

/// A `v1` List of `items`, its keys in kubectl's (alphabetical) order. A
/// struct, not `json!`, so that each item keeps its own key order.
#[derive(Debug, Serialize)]
pub struct List<'a, T: Serialize> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    items: &'a [T],
    kind: &'static str,
}

/// `items` as a List.
#[must_use]
pub fn list<T: Serialize>(items: &[T]) -> List<'_, T> {
    List {
        api_version: "v1",
        kind: "List",
        items,
    }
}

/// The List as pretty JSON with a final newline.
///
/// # Errors
/// An item that cannot be written as JSON.
pub fn json<T: Serialize>(items: &[T]) -> Result<String, String> {
    serde_json::to_string_pretty(&list(items))
        .map(|text| text + "\n")
        .map_err(|e| e.to_string())
}

/// The List as YAML.
///
/// # Errors
/// An item that cannot be written as YAML.
pub fn yaml<T: Serialize>(items: &[T]) -> Result<String, String> {
    serde_saphyr::to_string(&list(items)).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    #[derive(serde::Serialize)]
    struct Row {
        b: u8,
        a: u8,
    }

    #[test]
    fn a_list_is_kubectls_with_its_keys_in_order() {
        assert_eq!(
            super::json(&[Row { b: 1, a: 2 }]).ok(),
            Some(
                "{\n  \"apiVersion\": \"v1\",\n  \"items\": [\n    {\n      \"b\": 1,\n      \"a\": 2\n    }\n  ],\n  \"kind\": \"List\"\n}\n"
                    .to_owned()
            )
        );
        assert_eq!(
            super::yaml::<u8>(&[]).ok(),
            Some("apiVersion: v1\nitems: []\nkind: List\n".to_owned())
        );
    }
}
