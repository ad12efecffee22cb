//! A CustomResourceDefinition's own CEL rules (`x-kubernetes-validations`),
//! evaluated as the apiextensions apiserver evaluates them.
//!
//! A real apiserver runs these before any admission policy, so for an object
//! that breaks both, the user sees the CRD's sentence. nodescope keeps the
//! two in the same words; this module is how a test (and any offline tool)
//! hears what the CRD layer would say. Compiled once, at load.
//!
//! Owns: finding the rules in a structural schema, binding `self` (and
//! `oldSelf` is not supported: transition rules are skipped, as the
//! apiserver skips them on CREATE), and the apiserver's field-error text.
//! Must not: apply schema checks other than the CEL rules (types, enums,
//! patterns are the apiserver's OpenAPI validation, not reproduced here).

use super::json_val::to_val;
use super::k8s_lib::{kubernetes_env, LibraryError};
use super::request::Json;
use cel::{Context, Env, Program, Value as CelValue};
use serde_json::Value;
use std::sync::Arc;

/// Why a CRD's rules could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CrdRulesError {
    /// The document is not a CRD with the requested version's schema.
    #[error("CustomResourceDefinition {crd:?}: no schema for version {version:?} (spec.versions[].schema.openAPIV3Schema)")]
    NoSchema {
        /// `metadata.name` of the CRD.
        crd: String,
        /// The version asked for.
        version: String,
    },
    /// A rule or messageExpression does not parse.
    #[error("CustomResourceDefinition {crd:?}: {path}: x-kubernetes-validations {field} {source_text:?} does not compile: {message}")]
    Compile {
        /// `metadata.name` of the CRD.
        crd: String,
        /// Where in the object the rule applies, as the apiserver writes it.
        path: String,
        /// `rule` or `messageExpression`.
        field: &'static str,
        /// The expression as written.
        source_text: String,
        /// What cel reported.
        message: String,
    },
    /// The CEL environment itself could not be built.
    #[error(transparent)]
    Library(#[from] LibraryError),
}

/// One failed rule, as the apiserver reports it inside its 422.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field the rule sits on (plus its `fieldPath`), e.g. `spec`.
    pub path: String,
    /// The rule's message: its messageExpression's result, else `message`,
    /// else `failed rule: <rule>`.
    pub message: String,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The apiserver omits the value of a failed CEL rule (checked
        // against kube-apiserver v1.36.2 by the e2e suite).
        write!(f, "{}: Invalid value: {}", self.path, self.message)
    }
}

#[derive(Debug)]
struct Rule {
    source: String,
    program: Program,
    message: Option<String>,
    message_expression: Option<Program>,
    field_path: String,
}

/// Rules found at one place of the schema.
#[derive(Debug)]
struct Node {
    rules: Vec<Rule>,
    properties: Vec<(String, Node)>,
    items: Option<Box<Node>>,
    additional: Option<Box<Node>>,
}

impl Node {
    fn is_empty(&self) -> bool {
        self.rules.is_empty()
            && self.properties.is_empty()
            && self.items.is_none()
            && self.additional.is_none()
    }
}

/// The compiled CEL rules of one version of a CRD.
pub struct CrdRules {
    env: Arc<Env>,
    root: Node,
}

impl std::fmt::Debug for CrdRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrdRules")
            .field("root", &self.root)
            .finish()
    }
}

impl CrdRules {
    /// Compiles every `x-kubernetes-validations` rule of `version` in `crd`.
    pub fn from_crd(crd: &Value, version: &str) -> Result<Self, CrdRulesError> {
        let name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let schema = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .and_then(|versions| {
                versions
                    .iter()
                    .find(|v| v.get("name").and_then(Value::as_str) == Some(version))
            })
            .and_then(|v| v.pointer("/schema/openAPIV3Schema"))
            .ok_or_else(|| CrdRulesError::NoSchema {
                crd: name.clone(),
                version: version.to_owned(),
            })?;
        let env = Arc::new(kubernetes_env()?);
        let mut loader = Loader {
            env: &env,
            crd: &name,
        };
        let root = loader.node(schema, "")?;
        Ok(CrdRules { env, root })
    }

    /// Every rule `object` breaks, in schema order, as a CREATE would see
    /// them (no `oldSelf`).
    #[must_use]
    pub fn evaluate(&self, object: &Value) -> Vec<FieldError> {
        let mut errors = Vec::new();
        self.walk(&self.root, object, "", &mut errors);
        errors
    }

    fn walk(&self, node: &Node, value: &Value, path: &str, errors: &mut Vec<FieldError>) {
        if value.is_null() {
            return;
        }
        for rule in &node.rules {
            if let Some(message) = self.check(rule, value) {
                errors.push(FieldError {
                    path: join(path, &rule.field_path),
                    message,
                });
            }
        }
        match value {
            Value::Object(map) => {
                for (key, child) in &node.properties {
                    if let Some(field) = map.get(key) {
                        self.walk(child, field, &join(path, key), errors);
                    }
                }
                if let Some(child) = &node.additional {
                    for (key, field) in map {
                        self.walk(child, field, &format!("{path}[{key}]"), errors);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(child) = &node.items {
                    for (i, item) in items.iter().enumerate() {
                        self.walk(child, item, &format!("{path}[{i}]"), errors);
                    }
                }
            }
            _ => {}
        }
    }

    /// The message of a rule that does not hold on `value`, `None` when it
    /// holds. An evaluation error is a failure too, reported with its cause,
    /// as the apiserver does.
    fn check(&self, rule: &Rule, value: &Value) -> Option<String> {
        let mut context = Context::with_env(Arc::clone(&self.env));
        match to_val(Json::Value(value)) {
            Ok(val) => context.add_variable_as_val("self", val),
            Err(error) => return Some(error.to_string()),
        }
        match rule.program.execute(&context) {
            Ok(CelValue::Bool(true)) => None,
            Ok(CelValue::Bool(false)) => Some(
                rule.message_expression
                    .as_ref()
                    .and_then(|program| match program.execute(&context) {
                        Ok(CelValue::String(s)) if !s.trim().is_empty() => Some(s.to_string()),
                        _ => None,
                    })
                    .or_else(|| rule.message.clone())
                    .unwrap_or_else(|| format!("failed rule: {}", rule.source)),
            ),
            Ok(other) => Some(format!("rule {:?} gave {other:?}, not a bool", rule.source)),
            Err(error) => Some(error.to_string()),
        }
    }
}

struct Loader<'a> {
    env: &'a Arc<Env>,
    crd: &'a str,
}

impl Loader<'_> {
    fn node(&mut self, schema: &Value, path: &str) -> Result<Node, CrdRulesError> {
        let mut rules = Vec::new();
        for rule in schema
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let source = rule.get("rule").and_then(Value::as_str).unwrap_or_default();
            // Transition rules only run on UPDATE with an old value.
            if source.contains("oldSelf") {
                continue;
            }
            let message_expression = match rule.get("messageExpression").and_then(Value::as_str) {
                Some(text) => Some(self.compile(path, "messageExpression", text)?),
                None => None,
            };
            rules.push(Rule {
                source: source.to_owned(),
                program: self.compile(path, "rule", source)?,
                message: rule
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                message_expression,
                field_path: rule
                    .get("fieldPath")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .trim_start_matches('.')
                    .to_owned(),
            });
        }
        let mut properties = Vec::new();
        if let Some(map) = schema.get("properties").and_then(Value::as_object) {
            for (key, child) in map {
                let node = self.node(child, &join(path, key))?;
                if !node.is_empty() {
                    properties.push((key.clone(), node));
                }
            }
        }
        let items = match schema.get("items") {
            Some(child) => Some(self.node(child, &format!("{path}[*]"))?),
            None => None,
        }
        .filter(|n| !n.is_empty())
        .map(Box::new);
        let additional = match schema.get("additionalProperties") {
            Some(child) if child.is_object() => Some(self.node(child, &format!("{path}[*]"))?),
            _ => None,
        }
        .filter(|n| !n.is_empty())
        .map(Box::new);
        Ok(Node {
            rules,
            properties,
            items,
            additional,
        })
    }

    fn compile(
        &mut self,
        path: &str,
        field: &'static str,
        text: &str,
    ) -> Result<Program, CrdRulesError> {
        self.env
            .compile(text)
            .map_err(|errors| CrdRulesError::Compile {
                crd: self.crd.to_owned(),
                path: if path.is_empty() {
                    "<root>".to_owned()
                } else {
                    path.to_owned()
                },
                field,
                source_text: text.to_owned(),
                message: errors
                    .errors
                    .first()
                    .map(|e| e.msg.clone())
                    .unwrap_or_else(|| errors.to_string()),
            })
    }
}

fn join(path: &str, key: &str) -> String {
    match (path.is_empty(), key.is_empty()) {
        (_, true) => path.to_owned(),
        (true, false) => key.to_owned(),
        (false, false) => format!("{path}.{key}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(rules: Value) -> Value {
        json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {
                    "type": "object",
                    "x-kubernetes-validations": rules,
                    "properties": {"items": {"type": "array", "items": {
                        "type": "object",
                        "x-kubernetes-validations": [{"rule": "self.n > 0", "message": "n must be positive"}],
                    }}},
                }},
            }}}]},
        })
    }

    #[test]
    fn a_failed_rule_reports_its_message_expression_at_its_field() {
        let rules = CrdRules::from_crd(
            &crd(json!([{"rule": "self.size < 3", "message": "too big",
                "messageExpression": "'size ' + string(self.size) + ' is too big'"}])),
            "v1",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let errors = rules.evaluate(&json!({"spec": {"size": 5}}));
        assert_eq!(errors.len(), 1);
        assert_eq!(
            errors[0].to_string(),
            r#"spec: Invalid value: size 5 is too big"#
        );
        assert!(rules.evaluate(&json!({"spec": {"size": 1}})).is_empty());
    }

    #[test]
    fn rules_inside_arrays_name_the_element() {
        let rules = CrdRules::from_crd(&crd(json!([])), "v1").unwrap_or_else(|e| panic!("{e}"));
        let errors = rules.evaluate(&json!({"spec": {"items": [{"n": 1}, {"n": 0}]}}));
        assert_eq!(
            errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [r#"spec.items[1]: Invalid value: n must be positive"#]
        );
    }

    #[test]
    fn without_a_message_the_rule_itself_is_quoted_and_errors_fail_the_rule() {
        let rules = CrdRules::from_crd(&crd(json!([{"rule": "self.a == 1"}])), "v1")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            rules.evaluate(&json!({"spec": {"a": 2}}))[0].message,
            "failed rule: self.a == 1"
        );
        assert_eq!(rules.evaluate(&json!({"spec": {}})).len(), 1);
    }

    #[test]
    fn a_rule_that_does_not_parse_names_the_crd_and_the_field() {
        let error = CrdRules::from_crd(&crd(json!([{"rule": "self.a =="}])), "v1")
            .map(|_| ())
            .expect_err("does not parse");
        assert!(
            error
                .to_string()
                .starts_with(r#"CustomResourceDefinition "widgets.example.com": spec: x-kubernetes-validations rule "self.a ==" does not compile: "#),
            "{error}"
        );
    }

    #[test]
    fn a_missing_version_is_named() {
        let error = CrdRules::from_crd(&crd(json!([])), "v2")
            .map(|_| ())
            .expect_err("no v2");
        assert_eq!(
            error.to_string(),
            r#"CustomResourceDefinition "widgets.example.com": no schema for version "v2" (spec.versions[].schema.openAPIV3Schema)"#
        );
    }
}
