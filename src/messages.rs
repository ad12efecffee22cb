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
    let document = error.location().and_then(|at| document_at(text, at.line()));
    let document = document
        .map(|d| format!("document {d}: "))
        .unwrap_or_default();
    if let Some(words) = budget_words(error) {
        return format!("{document}{words}");
    }
    let message = error.render_with_formatter(&serde_saphyr::UserMessageFormatter);
    format!("{document}not valid YAML: {message}")
}

/// A limit of the YAML reader that `error` ran into, in words (the parser
/// says `limits breached: RecordedAnchorEvents { .. }`). The limits are
/// the reader's defaults, which nodescope keeps for aliases, anchors and
/// depth: an alias bomb (a few lines that expand to millions of nodes)
/// stops here, not in memory.
#[must_use]
pub fn budget_words(error: &serde_saphyr::Error) -> Option<String> {
    use serde_saphyr::budget::BudgetBreach;
    let mut error = error;
    while let serde_saphyr::Error::AliasError { error: inner, .. }
    | serde_saphyr::Error::WithSnippet { error: inner, .. } = error
    {
        error = inner;
    }
    let serde_saphyr::Error::Budget { breach, .. } = error else {
        return None;
    };
    let limits = serde_saphyr::Budget::default();
    let more = |what: &str, limit: usize| {
        format!("YAML has too many {what} (more than {})", thousands(limit))
    };
    Some(match breach {
        BudgetBreach::RecordedAnchorEvents { .. } | BudgetBreach::RecordedAnchorBytes { .. } => {
            more("alias expansions", limits.max_recorded_anchor_events)
        }
        BudgetBreach::Aliases { .. } | BudgetBreach::AliasAnchorRatio { .. } => {
            more("aliases", limits.max_aliases)
        }
        BudgetBreach::Anchors { .. } => more("anchors", limits.max_anchors),
        BudgetBreach::MergeKeys { .. } => more("merge keys (<<)", limits.max_merge_keys),
        BudgetBreach::Depth { .. } => format!(
            "YAML is nested too deeply (more than {} levels)",
            limits.max_depth
        ),
        BudgetBreach::Documents { documents } => format!(
            "YAML has too many documents (over {})",
            thousands(documents.saturating_sub(1))
        ),
        BudgetBreach::Nodes { nodes } => format!(
            "YAML has too many nodes (over {})",
            thousands(nodes.saturating_sub(1))
        ),
        _ => "YAML is too large or too complex to read".to_owned(),
    })
}

/// `kind` for `n` of them, in English: `1 Secret`, `2 ConfigMaps`, `2
/// PriorityClasses`, `3 NetworkPolicies`.
#[must_use]
pub fn plural(kind: &str, n: usize) -> String {
    if n == 1 {
        return kind.to_owned();
    }
    let lower = kind.to_ascii_lowercase();
    if ["s", "x", "z", "ch", "sh"]
        .iter()
        .any(|end| lower.ends_with(end))
    {
        return format!("{kind}es");
    }
    let mut chars = lower.chars().rev();
    if chars.next() == Some('y') && chars.next().is_some_and(|c| !"aeiou".contains(c)) {
        return format!("{}ies", &kind[..kind.len() - 1]);
    }
    format!("{kind}s")
}

/// `1000000` as `1,000,000`.
#[must_use]
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
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
    fn a_yaml_limit_is_said_in_words_with_its_number() {
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            let refs = vec![format!("*a{}", i - 1); 10].join(", ");
            bomb.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
        }
        // As manifests are read: no cap on nodes or events.
        let options = serde_saphyr::options! {
            with_snippet: false,
            budget: serde_saphyr::budget! {
                max_nodes: usize::MAX,
                max_events: usize::MAX,
            },
        };
        let error =
            serde_saphyr::from_multiple_with_options::<Value>(&bomb, options).expect_err("a bomb");
        assert_eq!(
            yaml_error(&bomb, &error),
            "document 1: YAML has too many alias expansions (more than 1,000,000)"
        );
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(75_693), "75,693");
        assert_eq!(thousands(50_000), "50,000");
    }

    #[test]
    fn kinds_are_counted_in_english() {
        assert_eq!(plural("ConfigMap", 1), "ConfigMap");
        assert_eq!(plural("ConfigMap", 75_693), "ConfigMaps");
        assert_eq!(plural("PriorityClass", 2), "PriorityClasses");
        assert_eq!(plural("NetworkPolicy", 2), "NetworkPolicies");
        assert_eq!(plural("Gateway", 2), "Gateways");
        assert_eq!(plural("Ingress", 0), "Ingresses");
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
