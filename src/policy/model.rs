//! Serde types for `admissionregistration.k8s.io/v1` ValidatingAdmissionPolicy
//! and ValidatingAdmissionPolicyBinding, as written in `policies/`.
//!
//! Only what the engine evaluates is modelled. Spec structs reject unknown
//! fields so a typo such as `messageExpresion` fails at load instead of
//! silently dropping a rule; `metadata` accepts anything.

use crate::selector::LabelSelector;
use serde::Deserialize;

// Objects only, so a wrong shape is worded as YAML/JSON (`spec: invalid
// type: array, expected an object`), never after these Rust types.
crate::object_only! {
    ObjectMeta, ValidatingAdmissionPolicy, PolicySpec, ParamKind, MatchResources,
    NamedRuleWithOperations, Validation,
    AuditAnnotation, MatchCondition, Variable, ValidatingAdmissionPolicyBinding, BindingSpec,
    ParamRef,
}

/// The object metadata the engine needs: the name that appears in messages.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(remote = "Self")]
pub struct ObjectMeta {
    /// `metadata.name`.
    #[serde(default)]
    pub name: String,
}

/// A ValidatingAdmissionPolicy: what to match and which CEL rules to apply.
#[derive(Clone, Debug, Deserialize)]
#[serde(remote = "Self")]
pub struct ValidatingAdmissionPolicy {
    /// Only the name is used.
    pub metadata: ObjectMeta,
    /// The rules.
    pub spec: PolicySpec,
}

/// `spec` of a ValidatingAdmissionPolicy.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicySpec {
    /// The kind of the parameter objects bindings refer to, if any.
    pub param_kind: Option<ParamKind>,
    /// Which requests the policy considers at all.
    pub match_constraints: Option<MatchResources>,
    /// The CEL rules; the first failing one decides the message.
    #[serde(default)]
    pub validations: Vec<Validation>,
    /// What to do when an expression cannot be evaluated (default `Fail`).
    pub failure_policy: Option<FailurePolicy>,
    /// Values recorded in the audit log.
    #[serde(default)]
    pub audit_annotations: Vec<AuditAnnotation>,
    /// Preconditions: all must be true for the validations to run.
    #[serde(default)]
    pub match_conditions: Vec<MatchCondition>,
    /// Named sub-expressions, evaluated lazily at most once per evaluation.
    #[serde(default)]
    pub variables: Vec<Variable>,
}

/// `spec.paramKind`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(remote = "Self", rename_all = "camelCase", deny_unknown_fields)]
pub struct ParamKind {
    /// e.g. `v1` or `featureflags.nodescope.dev/v1alpha1`.
    pub api_version: String,
    /// e.g. `ConfigMap`.
    pub kind: String,
}

/// `matchConstraints` of a policy, or `matchResources` of a binding.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase", deny_unknown_fields)]
pub struct MatchResources {
    /// Labels the request's namespace must have.
    pub namespace_selector: Option<LabelSelector>,
    /// Labels the object (or the old object) must have.
    pub object_selector: Option<LabelSelector>,
    /// Requests matched; empty matches every request.
    #[serde(default)]
    pub resource_rules: Vec<NamedRuleWithOperations>,
    /// Requests excluded even if a resource rule matches.
    #[serde(default)]
    pub exclude_resource_rules: Vec<NamedRuleWithOperations>,
    /// Accepted for compatibility; only exact matching is implemented.
    pub match_policy: Option<String>,
}

/// One resource rule: groups x versions x resources x operations.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase", deny_unknown_fields)]
pub struct NamedRuleWithOperations {
    /// Object names the rule is limited to; empty means all.
    #[serde(default)]
    pub resource_names: Vec<String>,
    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT` or `*`.
    #[serde(default)]
    pub operations: Vec<Operation>,
    /// API groups (`""` is core), or `*`.
    #[serde(default)]
    pub api_groups: Vec<String>,
    /// API versions, or `*`.
    #[serde(default)]
    pub api_versions: Vec<String>,
    /// Resources, with an optional `/subresource`, `*` wildcards allowed.
    #[serde(default)]
    pub resources: Vec<String>,
    /// `Cluster`, `Namespaced` or `*` (the default).
    pub scope: Option<Scope>,
}

/// An admission operation as written in a rule.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
pub enum Operation {
    /// `CREATE`.
    #[serde(rename = "CREATE")]
    Create,
    /// `UPDATE`.
    #[serde(rename = "UPDATE")]
    Update,
    /// `DELETE`.
    #[serde(rename = "DELETE")]
    Delete,
    /// `CONNECT`.
    #[serde(rename = "CONNECT")]
    Connect,
    /// `*`: every operation.
    #[serde(rename = "*")]
    All,
}

impl Operation {
    /// Whether this rule operation covers the request's operation string.
    #[must_use]
    pub fn covers(self, operation: &str) -> bool {
        match self {
            Operation::All => true,
            Operation::Create => operation == "CREATE",
            Operation::Update => operation == "UPDATE",
            Operation::Delete => operation == "DELETE",
            Operation::Connect => operation == "CONNECT",
        }
    }
}

/// The scope a rule is limited to.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
pub enum Scope {
    /// Cluster-scoped resources, and namespaces themselves.
    Cluster,
    /// Namespaced resources.
    Namespaced,
    /// Both.
    #[serde(rename = "*")]
    All,
}

/// One CEL validation.
#[derive(Clone, Debug, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase", deny_unknown_fields)]
pub struct Validation {
    /// Must evaluate to `true` for the request to pass.
    pub expression: String,
    /// Static message used when the validation fails.
    pub message: Option<String>,
    /// HTTP reason of the denial; `Invalid` (422) when absent.
    pub reason: Option<StatusReason>,
    /// CEL expression computing the message; falls back to `message`.
    pub message_expression: Option<String>,
}

/// The reasons a validation may carry, and the HTTP code each maps to.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
pub enum StatusReason {
    /// 401.
    Unauthorized,
    /// 403.
    Forbidden,
    /// 422, the default.
    Invalid,
    /// 413.
    RequestEntityTooLarge,
}

impl StatusReason {
    /// The reason as the apiserver spells it in a Status.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            StatusReason::Unauthorized => "Unauthorized",
            StatusReason::Forbidden => "Forbidden",
            StatusReason::Invalid => "Invalid",
            StatusReason::RequestEntityTooLarge => "RequestEntityTooLarge",
        }
    }

    /// The HTTP status code, as the apiserver's `reasonToCode`.
    #[must_use]
    pub fn status_code(self) -> u16 {
        match self {
            StatusReason::Unauthorized => 401,
            StatusReason::Forbidden => 403,
            StatusReason::Invalid => 422,
            StatusReason::RequestEntityTooLarge => 413,
        }
    }
}

/// `spec.auditAnnotations[]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase", deny_unknown_fields)]
pub struct AuditAnnotation {
    /// Published as `<policy>/<key>`.
    pub key: String,
    /// Evaluates to a string (published unless empty) or null (skipped).
    pub value_expression: String,
}

/// `spec.matchConditions[]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase", deny_unknown_fields)]
pub struct MatchCondition {
    /// For messages only.
    pub name: String,
    /// Must evaluate to a bool.
    pub expression: String,
}

/// `spec.variables[]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase", deny_unknown_fields)]
pub struct Variable {
    /// Referenced as `variables.<name>`.
    pub name: String,
    /// May reference variables declared before it.
    pub expression: String,
}

/// What an evaluation error does to the request.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub enum FailurePolicy {
    /// The error counts as a failed validation (the default).
    #[default]
    Fail,
    /// The error is ignored.
    Ignore,
}

/// A ValidatingAdmissionPolicyBinding: applies a policy, with params, to a
/// (narrowed) set of requests.
#[derive(Clone, Debug, Deserialize)]
#[serde(remote = "Self")]
pub struct ValidatingAdmissionPolicyBinding {
    /// Only the name is used.
    pub metadata: ObjectMeta,
    /// The binding.
    pub spec: BindingSpec,
}

/// `spec` of a ValidatingAdmissionPolicyBinding.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase", deny_unknown_fields)]
pub struct BindingSpec {
    /// The policy this binding applies.
    pub policy_name: String,
    /// Which parameter object(s) to evaluate the policy with.
    pub param_ref: Option<ParamRef>,
    /// Narrows the policy's own match constraints.
    pub match_resources: Option<MatchResources>,
    /// What a failed validation does: Deny, Warn and/or Audit.
    #[serde(default)]
    pub validation_actions: Vec<ValidationAction>,
}

/// `spec.paramRef` of a binding.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase", deny_unknown_fields)]
pub struct ParamRef {
    /// One param by name.
    pub name: Option<String>,
    /// Where to look; defaults to the request's namespace.
    pub namespace: Option<String>,
    /// Every param whose labels match; the policy runs once per param.
    pub selector: Option<LabelSelector>,
    /// What to do when no param is found (default `Deny`).
    pub parameter_not_found_action: Option<ParameterNotFoundAction>,
}

/// `paramRef.parameterNotFoundAction`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub enum ParameterNotFoundAction {
    /// Missing params mean the binding does not apply.
    Allow,
    /// Missing params are a configuration error (subject to failurePolicy).
    #[default]
    Deny,
}

/// `spec.validationActions[]` of a binding.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, serde::Serialize)]
pub enum ValidationAction {
    /// Reject the request.
    Deny,
    /// Return a warning to the client.
    Warn,
    /// Record the failure in the audit log.
    Audit,
}
