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

/// An object's labels, however it is held (a Value's map, a typed read),
/// as a selector reads them.
pub trait Labels {
    /// Label `key`'s value, if it is a string.
    fn label(&self, key: &str) -> Option<&str>;
}

impl Labels for Option<&serde_json::Map<String, Value>> {
    fn label(&self, key: &str) -> Option<&str> {
        self.and_then(|labels| labels.get(key))
            .and_then(Value::as_str)
    }
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

/// kubectl's `-l` syntax, read into a [`LabelSelector`]: requirements
/// separated by commas, each `key`, `!key`, `key=value` (or `==`),
/// `key!=value`, `key in (a,b)` or `key notin (a,b)`. Every requirement
/// becomes a `matchExpressions` entry, so that `a=1,a=2` selects nothing,
/// as it does in kubectl. `>` and `<` have no [`SelectorOperator`] and are
/// refused.
///
/// # Errors
/// A requirement that does not read, or a key or value that is not a
/// label's, naming it.
pub fn parse_selector(text: &str) -> Result<LabelSelector, String> {
    let mut selector = LabelSelector::default();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let (requirement, after) = requirement(rest)?;
        selector.match_expressions.push(requirement);
        rest = after.trim_start();
        match rest.strip_prefix(',') {
            Some(next) if !next.trim().is_empty() => rest = next.trim_start(),
            Some(_) => return Err("a comma must be followed by a requirement".into()),
            None if rest.is_empty() => {}
            None => return Err(format!("expected a comma before {rest:?}")),
        }
    }
    Ok(selector)
}

fn requirement(text: &str) -> Result<(LabelSelectorRequirement, &str), String> {
    let make = |key: &str, operator, values| LabelSelectorRequirement {
        key: key.to_owned(),
        operator,
        values,
    };
    if let Some(rest) = text.strip_prefix('!') {
        let (key, rest) = label_key(rest.trim_start())?;
        return Ok((make(key, SelectorOperator::DoesNotExist, vec![]), rest));
    }
    let (key, rest) = label_key(text)?;
    let rest = rest.trim_start();
    let equality = [
        ("==", SelectorOperator::In),
        ("!=", SelectorOperator::NotIn),
        ("=", SelectorOperator::In),
    ];
    for (token, operator) in equality {
        if let Some(after) = rest.strip_prefix(token) {
            let (value, after) = label_value(after.trim_start())?;
            return Ok((make(key, operator, vec![value.to_owned()]), after));
        }
    }
    for (word, operator) in [
        ("notin", SelectorOperator::NotIn),
        ("in", SelectorOperator::In),
    ] {
        let Some(after) = rest.strip_prefix(word) else {
            continue;
        };
        let Some(after) = after.trim_start().strip_prefix('(') else {
            continue;
        };
        let close = after
            .find(')')
            .ok_or_else(|| format!("{key} {word} (: the set has no closing parenthesis"))?;
        let mut values = Vec::new();
        for value in after[..close].split(',') {
            let (value, left) = label_value(value.trim())?;
            if !left.is_empty() {
                return Err(format!("{left:?} is not a label value"));
            }
            values.push(value.to_owned());
        }
        return Ok((make(key, operator, values), &after[close + 1..]));
    }
    if rest.starts_with(['>', '<']) {
        return Err(format!(
            "{key}: the operators > and < are not supported (=, ==, !=, in, notin, exists, !)"
        ));
    }
    if rest.is_empty() || rest.starts_with(',') {
        return Ok((make(key, SelectorOperator::Exists, vec![]), rest));
    }
    Err(format!(
        "{key}: expected =, ==, !=, in (...), notin (...), a comma or the end, not {rest:?}"
    ))
}

/// A label key (`app`, `example.com/tier`) at the start of `text`.
fn label_key(text: &str) -> Result<(&str, &str), String> {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')))
        .unwrap_or(text.len());
    let key = &text[..end];
    let name = key.rsplit_once('/').map_or(key, |(_, name)| name);
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if name.is_empty()
        || name.len() > 63
        || !alnum(name.chars().next())
        || !alnum(name.chars().last())
        || key.matches('/').count() > 1
    {
        return Err(if key.is_empty() {
            format!("expected a label key, not {text:?}")
        } else {
            format!("{key:?} is not a label key (a name of at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit, with an optional prefix/)")
        });
    }
    Ok((key, &text[end..]))
}

/// A label value (possibly empty) at the start of `text`.
fn label_value(text: &str) -> Result<(&str, &str), String> {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(text.len());
    let value = &text[..end];
    if value.len() > 63 {
        return Err(format!(
            "{value:?} is not a label value: longer than 63 characters"
        ));
    }
    Ok((value, &text[end..]))
}

#[cfg(test)]
mod parse_tests {
    use super::*;
    use serde_json::json;

    fn selects(selector: &str, labels: Value) -> bool {
        let labels = labels.as_object().cloned().unwrap_or_default();
        parse_selector(selector)
            .map(|s| s.matches_labels(&labels))
            .unwrap_or_else(|e| panic!("{selector}: {e}"))
    }

    #[test]
    fn kubectl_selectors_select_as_kubectl_does() {
        let labels = json!({"app": "web", "tier": "front", "example.com/zone": "a"});
        for (selector, expected) in [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app = web , tier", true),
            ("app!=web", false),
            ("app in (web, api)", true),
            ("app notin (web)", false),
            ("!missing", true),
            ("!app", false),
            ("example.com/zone in (a,b),tier=front", true),
            ("app=web,app=api", false),
            ("missing!=x", true),
            ("tier=", false),
        ] {
            assert_eq!(selects(selector, labels.clone()), expected, "{selector}");
        }
    }

    #[test]
    fn a_selector_that_does_not_read_says_why() {
        for (selector, why) in [
            ("app=web,", "a comma must be followed by a requirement"),
            ("app>1", "app: the operators > and < are not supported (=, ==, !=, in, notin, exists, !)"),
            ("app in (a", "app in (: the set has no closing parenthesis"),
            ("=web", "expected a label key, not \"=web\""),
            ("app web", "app: expected =, ==, !=, in (...), notin (...), a comma or the end, not \"web\""),
            ("-app", "\"-app\" is not a label key (a name of at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit, with an optional prefix/)"),
        ] {
            assert_eq!(parse_selector(selector).err().as_deref(), Some(why), "{selector}");
        }
    }
}
