//! kubectl's `-n/--namespace`, `-A/--all-namespaces` and `-l/--selector`,
//! for the commands that list objects: the same names, the same syntax,
//! the same meaning.

use crate::selector::{parse_selector, LabelSelector, Labels};
use clap::Args;
use serde_json::Value;

/// A `-l` selector: the text as given (sent to the API server, which
/// selects as kubectl does) and as read (to select offline alike).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    pub text: String,
    pub parsed: LabelSelector,
}

impl Selector {
    /// The value parser of `-l`: a selector that does not read is a usage
    /// error (exit 2) naming the flag, before anything is read.
    ///
    /// # Errors
    /// What does not read, and why.
    pub fn parse(text: &str) -> Result<Self, String> {
        Ok(Self {
            text: text.trim().to_owned(),
            parsed: parse_selector(text)?,
        })
    }

    /// Whether an object's `metadata.labels` are selected.
    #[must_use]
    pub fn matches(&self, object: &Value) -> bool {
        self.parsed.matches_object(object)
    }
}

/// `-n NS` or `-A` (the default: every namespace), and `-l`, for the pods
/// a command shows.
#[derive(Debug, Args, Clone, Default, PartialEq, Eq)]
pub struct PodScope {
    /// Only the pods of this namespace (all namespaces when omitted, as
    /// -A).
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// The pods of every namespace (the default; kubectl's flag).
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    pub all_namespaces: bool,
    /// Only the pods whose labels match, in kubectl's syntax (`app=agent`,
    /// `tier in (node,system)`, `!canary`).
    #[arg(short = 'l', long, value_name = "SELECTOR", value_parser = Selector::parse)]
    pub selector: Option<Selector>,
}

impl PodScope {
    /// Whether the object (a Pod) is shown.
    #[must_use]
    pub fn selects(&self, object: &Value) -> bool {
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let labels = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object);
        self.selects_labelled(namespace, &labels)
    }

    /// Whether a pod of `namespace` with these labels is shown.
    #[must_use]
    pub fn selects_labelled(&self, namespace: &str, labels: &dyn Labels) -> bool {
        self.namespace.as_deref().is_none_or(|n| n == namespace)
            && self
                .selector
                .as_ref()
                .is_none_or(|s| s.parsed.matches_with(|key| labels.label(key)))
    }

    /// Whether every pod is shown: nothing to look at per pod.
    #[must_use]
    pub fn is_everything(&self) -> bool {
        self.namespace.is_none() && self.selector.is_none()
    }
}
