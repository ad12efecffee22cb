//! `validate`: every matching (policy, binding, param) evaluated, and their
//! decisions combined into one outcome, as the apiserver's
//! `validating/dispatcher.go` does (messages included, word for word).

use super::evaluate::{evaluate, Bindings, EvaluationResult};
use super::json_val::budget;
use super::load::{CompiledBinding, CompiledPolicy, PolicySet};
use super::matching::{matches, namespace_labels};
use super::model::{FailurePolicy, ParameterNotFoundAction, StatusReason, ValidationAction};
use super::request::AdmissionRequestInput;
use crate::params::PolicyInputs;
use serde_json::{Map, Value};
use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::time::Instant;

/// The audit annotation the apiserver writes for `Audit` validation actions.
pub const VALIDATION_FAILURE_ANNOTATION: &str =
    "validation.policy.admission.k8s.io/validation_failure";
const MAX_AUDIT_ANNOTATION_VALUE_LENGTH: usize = 10 * 1024;

/// What all policies decided for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationOutcome {
    /// False when at least one binding denied the request.
    pub allowed: bool,
    /// 200 when allowed; otherwise the code of the first denial's reason
    /// (422 Invalid by default, 403 Forbidden, 401, 413).
    pub status_code: u16,
    /// The first denial, as the apiserver words it.
    pub message: Option<String>,
    /// The first denial's reason (`Invalid` when the validation has none).
    pub reason: Option<String>,
    /// Warnings for `Warn` bindings.
    pub warnings: Vec<String>,
    /// Audit annotations: `<policy>/<key>` values and Audit failures.
    pub audit_annotations: BTreeMap<String, String>,
    /// One row per evaluated (policy, binding[, param]), for dry runs.
    pub results: Vec<BindingResult>,
}

/// The decision of one (policy, binding[, param]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Every validation passed.
    Allow,
    /// A validation failed and the binding denies.
    Deny,
    /// A validation failed and the binding warns.
    Warn,
    /// A validation failed and the binding only audits.
    Audit,
    /// An expression or the binding's configuration could not be evaluated
    /// and the failure policy is `Fail` (applied as the binding's actions).
    Error,
    /// The binding did not apply: a match condition was false, no param was
    /// found with `Allow`, or an error was ignored (`failurePolicy: Ignore`).
    Skip,
}

/// One row of a dry run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingResult {
    /// The policy.
    pub policy: String,
    /// The binding.
    pub binding: String,
    /// The param, as `namespace/name` (or `name`), when the policy has params.
    pub param: Option<String>,
    /// What happened.
    pub decision: Decision,
    /// Why (the failure message, or why it was skipped).
    pub message: Option<String>,
}

struct Denial {
    message: String,
    reason: Option<StatusReason>,
}

/// Per-request values computed at most once, on first use.
struct RequestScope<'r> {
    request: &'r AdmissionRequestInput<'r>,
    inputs: &'r dyn PolicyInputs,
    namespace_labels: OnceCell<Map<String, Value>>,
    namespace_object: OnceCell<Option<Value>>,
}

impl<'r> RequestScope<'r> {
    fn namespace(&self) -> Option<&'r Value> {
        let name = self.request.namespace();
        (!name.is_empty() && !self.request.is_namespace_resource())
            .then(|| self.inputs.namespace(name))
            .flatten()
    }

    fn labels(&self) -> &Map<String, Value> {
        self.namespace_labels
            .get_or_init(|| namespace_labels(self.request, self.namespace()))
    }

    /// The apiserver exposes only part of the Namespace to CEL.
    fn namespace_object(&self) -> Option<&Value> {
        self.namespace_object
            .get_or_init(|| {
                self.namespace().map(|ns| {
                    let mut out = Map::new();
                    for key in ["spec", "status"] {
                        if let Some(v) = ns.get(key) {
                            out.insert(key.to_owned(), v.clone());
                        }
                    }
                    let mut meta = Map::new();
                    if let Some(Value::Object(source)) = ns.get("metadata") {
                        for (k, v) in source {
                            if !matches!(
                                k.as_str(),
                                "managedFields" | "ownerReferences" | "finalizers"
                            ) {
                                meta.insert(k.clone(), v.clone());
                            }
                        }
                    }
                    out.insert("metadata".to_owned(), Value::Object(meta));
                    Value::Object(out)
                })
            })
            .as_ref()
    }
}

/// Evaluates every policy in `policies` against one admission request.
///
/// Pure: reads only the request, the compiled policies and the lookups in
/// `inputs`; no I/O. Policies run in name order, bindings in name order;
/// policies whose resource rules cannot match the request's group and
/// resource are skipped through the index built at load.
#[must_use]
pub fn validate(
    policies: &PolicySet,
    request: &AdmissionRequestInput<'_>,
    inputs: &dyn PolicyInputs,
) -> ValidationOutcome {
    validate_some(policies, request, inputs, None)
}

/// [`validate`] with only the policy called `policy`: the feature
/// controller asks one gating policy about many objects, and the others
/// (however expensive) have no say in whether an object uses the feature.
#[must_use]
pub fn validate_policy(
    policies: &PolicySet,
    policy: &str,
    request: &AdmissionRequestInput<'_>,
    inputs: &dyn PolicyInputs,
) -> ValidationOutcome {
    validate_some(policies, request, inputs, Some(policy))
}

fn validate_some(
    policies: &PolicySet,
    request: &AdmissionRequestInput<'_>,
    inputs: &dyn PolicyInputs,
    only: Option<&str>,
) -> ValidationOutcome {
    let deadline = Instant::now() + policies.limits.deadline;
    let scope = RequestScope {
        request,
        inputs,
        namespace_labels: OnceCell::new(),
        namespace_object: OnceCell::new(),
    };
    let mut state = Dispatch::default();
    for index in policies
        .index
        .candidates(request.group(), request.resource())
    {
        let policy = &policies.policies[index];
        if only.is_some_and(|name| name != policy.name) {
            continue;
        }
        let applies = policy
            .spec
            .match_constraints
            .as_ref()
            .is_none_or(|criteria| matches(criteria, request, || scope.labels()));
        if !applies {
            continue;
        }
        let mut annotations: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for binding in &policy.bindings {
            let applies = binding
                .spec
                .match_resources
                .as_ref()
                .is_none_or(|criteria| matches(criteria, request, || scope.labels()));
            if !applies {
                continue;
            }
            let params = match collect_params(policy, binding, request, inputs) {
                Ok(params) => params,
                Err(error) => {
                    state.config_error(policy, binding, &error);
                    continue;
                }
            };
            if params.is_empty() {
                state.row(
                    policy,
                    binding,
                    None,
                    Decision::Skip,
                    Some("no params found; parameterNotFoundAction is Allow".to_owned()),
                );
            }
            for param in params {
                let _meter = budget::Guard::install(policies.limits.cost_units, deadline);
                let bindings = Bindings {
                    object: request.object_json(),
                    old_object: request.old_object_json(),
                    request: request.request_json(),
                    params: param,
                    namespace_object: scope.namespace_object(),
                };
                let result = evaluate(policy, &policies.env, &bindings);
                state.apply(
                    policy,
                    binding,
                    param.map(param_label),
                    result,
                    &mut annotations,
                );
            }
        }
        for (key, values) in annotations {
            state.audit_annotations.insert(
                format!("{}/{key}", policy.name),
                truncate(values.join(", ")),
            );
        }
    }
    state.finish()
}

/// `generic.CollectParams`: no paramKind means one evaluation without params.
fn collect_params<'r>(
    policy: &CompiledPolicy,
    binding: &CompiledBinding,
    request: &AdmissionRequestInput<'_>,
    inputs: &'r dyn PolicyInputs,
) -> Result<Vec<Option<&'r Value>>, String> {
    let Some(kind) = &policy.spec.param_kind else {
        return Ok(vec![None]);
    };
    let Some(param_ref) = &binding.spec.param_ref else {
        return Err(format!(
            "paramKind kind `{}, Kind={}` is set but paramRef is nil",
            kind.api_version, kind.kind
        ));
    };
    // A paramRef without namespace looks in the request's namespace; for a
    // cluster-scoped request that is a cluster-scoped lookup.
    let namespace = param_ref
        .namespace
        .as_deref()
        .filter(|ns| !ns.is_empty())
        .or_else(|| Some(request.namespace()).filter(|ns| !ns.is_empty()));
    let params: Vec<&Value> = match (&param_ref.name, &param_ref.selector) {
        (Some(name), _) if !name.is_empty() => inputs
            .param(&kind.api_version, &kind.kind, namespace, name)
            .into_iter()
            .collect(),
        (_, Some(selector)) => {
            inputs.params_matching(&kind.api_version, &kind.kind, namespace, selector)
        }
        _ => return Err("one of name or selector must be provided".to_owned()),
    };
    let action = param_ref.parameter_not_found_action.unwrap_or_default();
    if params.is_empty() && action == ParameterNotFoundAction::Deny {
        return Err(
            "no params found for policy binding with `Deny` parameterNotFoundAction".to_owned(),
        );
    }
    Ok(params.into_iter().map(Some).collect())
}

fn param_label(param: &Value) -> String {
    let metadata = param.get("metadata");
    let get = |key: &str| metadata.and_then(|m| m.get(key)).and_then(Value::as_str);
    match (get("namespace"), get("name")) {
        (Some(ns), Some(name)) => format!("{ns}/{name}"),
        (_, name) => name.unwrap_or("").to_owned(),
    }
}

fn truncate(mut value: String) -> String {
    if value.len() > MAX_AUDIT_ANNOTATION_VALUE_LENGTH {
        let mut end = MAX_AUDIT_ANNOTATION_VALUE_LENGTH;
        while !value.is_char_boundary(end) {
            end -= 1;
        }
        value.truncate(end);
    }
    value
}

/// The JSON of a validation_failure audit annotation, fields in the
/// apiserver's order.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ValidationFailureValue<'a> {
    message: &'a str,
    policy: &'a str,
    binding: &'a str,
    expression_index: usize,
    validation_actions: &'a [ValidationAction],
}

#[derive(Default)]
struct Dispatch {
    denials: Vec<Denial>,
    warnings: Vec<String>,
    audit_annotations: BTreeMap<String, String>,
    results: Vec<BindingResult>,
}

impl Dispatch {
    fn row(
        &mut self,
        policy: &CompiledPolicy,
        binding: &CompiledBinding,
        param: Option<String>,
        decision: Decision,
        message: Option<String>,
    ) {
        self.results.push(BindingResult {
            policy: policy.name.clone(),
            binding: binding.name.clone(),
            param,
            decision,
            message,
        });
    }

    /// `addConfigError`: under `Fail` a denial that ignores the binding's
    /// actions; under `Ignore`, nothing.
    fn config_error(&mut self, policy: &CompiledPolicy, binding: &CompiledBinding, error: &str) {
        let message = format!("failed to configure binding: {error}");
        if policy.failure_policy == FailurePolicy::Ignore {
            self.row(policy, binding, None, Decision::Skip, Some(message));
            return;
        }
        self.denials.push(Denial {
            message: deny_message(policy, binding, &message),
            reason: None,
        });
        self.row(policy, binding, None, Decision::Error, Some(message));
    }

    fn apply(
        &mut self,
        policy: &CompiledPolicy,
        binding: &CompiledBinding,
        param: Option<String>,
        result: EvaluationResult,
        annotations: &mut BTreeMap<String, Vec<String>>,
    ) {
        if let Some(reason) = result.skipped {
            self.row(policy, binding, param, Decision::Skip, Some(reason));
            return;
        }
        let actions = &binding.spec.validation_actions;
        for failure in &result.failures {
            for action in actions {
                match action {
                    ValidationAction::Deny => self.denials.push(Denial {
                        message: deny_message(policy, binding, &failure.message),
                        reason: failure.reason,
                    }),
                    ValidationAction::Warn => self.warnings.push(format!(
                        "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                        policy.name, binding.name, failure.message
                    )),
                    ValidationAction::Audit => {
                        let value = ValidationFailureValue {
                            message: &failure.message,
                            policy: &policy.name,
                            binding: &binding.name,
                            expression_index: failure.index,
                            validation_actions: actions,
                        };
                        // As in the apiserver, the first value for the key wins.
                        if let Ok(json) = serde_json::to_string(&[value]) {
                            self.audit_annotations
                                .entry(VALIDATION_FAILURE_ANNOTATION.to_owned())
                                .or_insert(json);
                        }
                    }
                }
            }
        }
        for message in &result.annotation_errors {
            self.denials.push(Denial {
                message: deny_message(policy, binding, message),
                reason: None,
            });
        }
        for (key, value) in result.annotations {
            let values = annotations.entry(key).or_default();
            if !values.contains(&value) {
                values.push(value);
            }
        }
        let (decision, message) = match (result.failures.first(), result.annotation_errors.first())
        {
            (Some(failure), _) => {
                let decision = if failure.error {
                    Decision::Error
                } else if actions.contains(&ValidationAction::Deny) {
                    Decision::Deny
                } else if actions.contains(&ValidationAction::Warn) {
                    Decision::Warn
                } else {
                    Decision::Audit
                };
                (decision, Some(failure.message.clone()))
            }
            (None, Some(error)) => (Decision::Error, Some(error.clone())),
            (None, None) => (Decision::Allow, None),
        };
        self.row(policy, binding, param, decision, message);
    }

    fn finish(self) -> ValidationOutcome {
        let first = self.denials.into_iter().next();
        let reason = first
            .as_ref()
            .map(|d| d.reason.unwrap_or(StatusReason::Invalid));
        ValidationOutcome {
            allowed: first.is_none(),
            status_code: reason.map_or(200, StatusReason::status_code),
            message: first.map(|d| d.message),
            reason: reason.map(|r| r.as_str().to_owned()),
            warnings: self.warnings,
            audit_annotations: self.audit_annotations,
            results: self.results,
        }
    }
}

fn deny_message(policy: &CompiledPolicy, binding: &CompiledBinding, message: &str) -> String {
    format!(
        "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {message}",
        policy.name, binding.name
    )
}
