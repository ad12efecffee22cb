//! Kubernetes label selectors (`matchLabels` AND `matchExpressions`), shared
//! by the policy engine (binding and match selectors) and the store (param
//! lookups by `paramRef.selector`), so neither has to read the other.

use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

// Objects only, so a wrong shape is worded as YAML/JSON, never after these
// Rust types.
crate::object_only! { LabelSelector, LabelSelectorRequirement }

/// A Kubernetes label selector (`matchLabels` AND `matchExpressions`).
///
/// An empty selector matches everything, as in Kubernetes.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(remote = "Self", rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    /// Exact label values.
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    /// Set-based requirements.
    #[serde(default)]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// One set-based requirement of a [`LabelSelector`].
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(remote = "Self", rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelectorRequirement {
    /// The label key.
    pub key: String,
    /// How the key's value is tested.
    pub operator: SelectorOperator,
    /// Values for `In`/`NotIn`; must be empty for `Exists`/`DoesNotExist`.
    #[serde(default)]
    pub values: Vec<String>,
}

/// The operator of a [`LabelSelectorRequirement`].
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
pub enum SelectorOperator {
    /// The label is present with one of the values.
    In,
    /// The label is absent, or present with none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

impl LabelSelector {
    /// Whether a set of labels satisfies the selector; `labels` is the JSON
    /// `metadata.labels` map (absent labels: pass an empty map).
    #[must_use]
    pub fn matches_labels(&self, labels: &serde_json::Map<String, Value>) -> bool {
        self.matches_with(|key| labels.get(key).and_then(Value::as_str))
    }

    /// Whether the labels `get` returns (the value of a key, if it is a
    /// string) satisfy the selector.
    pub(crate) fn matches_with<'l>(&self, get: impl Fn(&str) -> Option<&'l str>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| get(k) == Some(v.as_str()))
            && self.match_expressions.iter().all(|req| {
                let value = get(&req.key);
                match req.operator {
                    SelectorOperator::In => {
                        value.is_some_and(|v| req.values.iter().any(|x| x == v))
                    }
                    SelectorOperator::NotIn => {
                        value.is_none_or(|v| !req.values.iter().any(|x| x == v))
                    }
                    SelectorOperator::Exists => value.is_some(),
                    SelectorOperator::DoesNotExist => value.is_none(),
                }
            })
    }

    /// Whether an object's `metadata.labels` satisfy the selector.
    #[must_use]
    pub fn matches_object(&self, object: &Value) -> bool {
        static EMPTY: std::sync::OnceLock<serde_json::Map<String, Value>> =
            std::sync::OnceLock::new();
        let labels = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .unwrap_or_else(|| EMPTY.get_or_init(serde_json::Map::new));
        self.matches_labels(labels)
    }

    /// An empty selector matches everything; the matcher skips the lookup.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }
}
