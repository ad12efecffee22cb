//! One evaluation of a policy: for one binding and one param, run the match
//! conditions, the validations and the audit annotations, as the apiserver's
//! `validator.Validate` does, producing decisions the dispatcher applies.
//!
//! Variables are computed lazily, at most once per evaluation, as the
//! apiserver's are: before an expression runs, the variables it reads on
//! every path (known from compile time) are computed in declaration order;
//! a variable it reads only on some paths (behind `&&`, `||`, `?:` or in a
//! comprehension body) is computed when an evaluation reaches it. cel 0.15
//! cannot call back into the engine in the middle of an evaluation, so
//! reaching an uncomputed variable stops that run (the resolver notes the
//! name), the variable is computed, and the expression runs again with the
//! cost of the stopped run refunded. A policy skipping most of its
//! validations (`!variables.isBalloon || ...`) thus never computes what only
//! those validations read.

mod roots;

use super::compile::CompiledExpression;
use super::json_val::budget;
use super::load::CompiledPolicy;
use super::model::{FailurePolicy, StatusReason};
use super::request::Json;
use cel::common::types::{CelBool, CelMap, CelMapKey, CelString, Kind};
use cel::common::value::{CowVal, Val};
use cel::{Context, Env, ExecutionError};
use roots::{Roots, VariableReads};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The apiserver's message when the cost budget runs out.
pub(crate) const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";
/// nodescope's message when the request deadline passes.
pub(crate) const OUT_OF_TIME: &str =
    "validation failed due to exceeding the evaluation deadline, no further validation rules will be run";

/// The values bound to the CEL variables of one evaluation.
pub(crate) struct Bindings<'e> {
    pub(crate) object: Option<Json<'e>>,
    pub(crate) old_object: Option<Json<'e>>,
    /// The AdmissionRequest; bound as the `request` view (see [`JsonObject::request`]).
    pub(crate) request: Json<'e>,
    pub(crate) params: Option<&'e Value>,
    pub(crate) namespace_object: Option<&'e Value>,
}

/// A failed (or errored) validation, before binding actions apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// Index of the validation, for the audit annotation.
    pub(crate) index: usize,
    pub(crate) message: String,
    pub(crate) reason: Option<StatusReason>,
    /// An evaluation error rather than a `false` result.
    pub(crate) error: bool,
}

/// What one evaluation produced.
#[derive(Debug, Default)]
pub(crate) struct EvaluationResult {
    /// Set when match conditions excluded the request (the reason).
    pub(crate) skipped: Option<String>,
    /// Failures to apply with the binding's validation actions.
    pub(crate) failures: Vec<Failure>,
    /// Audit annotation values to publish, by key.
    pub(crate) annotations: Vec<(String, String)>,
    /// Audit annotation errors under `Fail`: denials regardless of actions.
    pub(crate) annotation_errors: Vec<String>,
}

/// Why an expression produced no usable value.
enum EvalError {
    Budget(&'static str),
    Expression(String),
}

/// What the match conditions decided.
enum Gate {
    Proceed,
    Skip(String),
    Failed(String),
}

enum Outcome {
    Bool(bool),
    String(String),
    Null,
    Other(String),
}

#[cfg(test)]
thread_local! {
    /// Counts variable evaluations, so tests can check each runs at most once.
    pub(crate) static VARIABLE_EVALUATIONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

struct Evaluation<'p, 'e> {
    policy: &'p CompiledPolicy,
    context: Context<'e, 'e>,
    roots: &'e Roots<'e>,
    /// Per variable: not computed yet, computed and bound in the context as
    /// `variables.<name>`, or failed with a message.
    variables: Vec<Option<Result<(), String>>>,
}

/// Evaluates `policy` once, against `bindings`.
pub(crate) fn evaluate(
    policy: &CompiledPolicy,
    env: &Arc<Env>,
    bindings: &Bindings<'_>,
) -> EvaluationResult {
    let on_demand = policy.variables.len() <= 64;
    let roots = Roots {
        object: bindings.object,
        old_object: bindings.old_object,
        request: Some(bindings.request),
        params: bindings.params.map(Json::Value),
        namespace_object: bindings.namespace_object.map(Json::Value),
        variables: VariableReads {
            names: if on_demand { &policy.variables } else { &[] },
            ..VariableReads::default()
        },
    };
    let mut context = Context::with_env(Arc::clone(env));
    context.set_variable_resolver(&roots);
    // `variables.<name>` are bound as they are computed; `variables` itself
    // only for the expressions that read it as a whole (see
    // `CompiledExpression::whole_variables`).
    let mut evaluation = Evaluation {
        policy,
        context,
        roots: &roots,
        variables: (0..policy.variables.len()).map(|_| None).collect(),
    };
    evaluation.run()
}

impl<'e> Evaluation<'_, 'e> {
    fn run(&mut self) -> EvaluationResult {
        let fail = self.policy.failure_policy == FailurePolicy::Fail;
        let mut result = EvaluationResult::default();
        match self.match_conditions(fail) {
            Gate::Proceed => {}
            Gate::Skip(reason) => {
                result.skipped = Some(reason);
                return result;
            }
            Gate::Failed(message) => {
                result.failures.push(Failure {
                    index: 0,
                    message,
                    reason: None,
                    error: true,
                });
                return result;
            }
        }
        for (index, validation) in self.policy.validations.iter().enumerate() {
            let error = match self.eval(&validation.expression) {
                Ok(Outcome::Bool(true)) => continue,
                Ok(Outcome::Bool(false)) => None,
                Ok(other) => Some(error_message(
                    &validation.expression,
                    &format!("expected a bool result, got {}", type_name(&other)),
                )),
                Err(EvalError::Budget(message)) => {
                    // As the apiserver: one error decision replaces them all.
                    result.failures.clear();
                    if fail {
                        result.failures.push(Failure {
                            index,
                            message: message.to_owned(),
                            reason: None,
                            error: true,
                        });
                    }
                    return result;
                }
                Err(EvalError::Expression(message)) => Some(message),
            };
            match error {
                Some(message) if fail => result.failures.push(Failure {
                    index,
                    message,
                    reason: None,
                    error: true,
                }),
                Some(_) => {}
                None => {
                    let message = self.failure_message(index);
                    result.failures.push(Failure {
                        index,
                        message,
                        reason: Some(validation.reason.unwrap_or(StatusReason::Invalid)),
                        error: false,
                    });
                }
            }
        }
        self.audit_annotations(fail, &mut result);
        result
    }

    /// Runs the match conditions: all must be true. A false one skips the
    /// evaluation (even if others erred); errors follow the failure policy.
    fn match_conditions(&mut self, fail: bool) -> Gate {
        let mut errors = Vec::new();
        for (name, condition) in &self.policy.match_conditions {
            match self.eval(condition) {
                Ok(Outcome::Bool(true)) => {}
                Ok(Outcome::Bool(false)) => {
                    return Gate::Skip(format!("matchCondition '{name}' is false"))
                }
                Ok(other) => errors.push(error_message(
                    condition,
                    &format!("expected a bool result, got {}", type_name(&other)),
                )),
                Err(EvalError::Budget(message)) => errors.push(message.to_owned()),
                Err(EvalError::Expression(message)) => errors.push(message),
            }
        }
        match (errors.is_empty(), fail) {
            (true, _) => Gate::Proceed,
            (false, false) => Gate::Skip(format!(
                "matchConditions failed and failurePolicy is Ignore: {}",
                aggregate(&errors)
            )),
            (false, true) => Gate::Failed(aggregate(&errors)),
        }
    }

    /// messageExpression, then message, then `failed expression: ...`, as
    /// the apiserver: a messageExpression that errs, is not a string, is
    /// blank or has a newline falls back.
    fn failure_message(&mut self, index: usize) -> String {
        let validation = &self.policy.validations[index];
        if let Some(expression) = &validation.message_expression {
            if let Ok(Outcome::String(message)) = self.eval(expression) {
                let message = message.trim();
                if !message.is_empty() && !message.contains('\n') && message.len() <= 5 * 1024 {
                    return message.to_owned();
                }
            }
        }
        match validation.message.as_deref().map(str::trim) {
            Some(message) if !message.is_empty() => message.to_owned(),
            _ => format!("failed expression: {}", validation.expression.source.trim()),
        }
    }

    fn audit_annotations(&mut self, fail: bool, result: &mut EvaluationResult) {
        for (key, expression) in &self.policy.audit_annotations {
            match self.eval(expression) {
                Ok(Outcome::String(value)) => {
                    let value = value.trim();
                    if !value.is_empty() {
                        result.annotations.push((key.clone(), value.to_owned()));
                    }
                }
                Ok(Outcome::Null) => {}
                Ok(other) => result.annotation_errors.push(format!(
                    "valueExpression '{}' resulted in unsupported return type: {}. Return type must be either string or null.",
                    expression.source,
                    type_name(&other)
                )),
                Err(EvalError::Budget(message)) if fail => result.annotation_errors.push(message.to_owned()),
                Err(EvalError::Expression(message)) if fail => result.annotation_errors.push(message),
                Err(_) => {}
            }
        }
    }

    /// Runs one expression after computing the variables it reads on every
    /// path; the others are computed when a run reaches them.
    fn eval(&mut self, expression: &CompiledExpression) -> Result<Outcome, EvalError> {
        let up_front = self.up_front(expression);
        self.ensure_variables(up_front)?;
        if self.roots.variables.names.is_empty() || expression.whole_variables {
            if let Some(message) = expression
                .needs
                .iter()
                .find_map(|&i| match &self.variables[i] {
                    Some(Err(message)) => Some(message.clone()),
                    _ => None,
                })
            {
                return Err(EvalError::Expression(message));
            }
        }
        if expression.whole_variables {
            self.bind_variables_map();
        }
        self.run_to_end(expression, |value: CowVal<'_, 'e>| {
            match value.get_type().kind() {
                Kind::Boolean => {
                    Outcome::Bool(value.downcast_ref::<CelBool>().is_some_and(|b| *b.inner()))
                }
                Kind::String => Outcome::String(
                    value
                        .downcast_ref::<CelString>()
                        .map(|s| s.inner().to_owned())
                        .unwrap_or_default(),
                ),
                Kind::NullType => Outcome::Null,
                _ => Outcome::Other(value.get_type().name().to_owned()),
            }
        })
    }

    /// The variables computed before `expression` runs: all it may read when
    /// they are not computed on demand or it reads `variables` as a whole.
    fn up_front<'x>(&self, expression: &'x CompiledExpression) -> &'x [usize] {
        if self.roots.variables.names.is_empty() || expression.whole_variables {
            &expression.needs
        } else {
            &expression.certain
        }
    }

    /// Runs `expression` until no run stops at an uncomputed variable.
    fn run_to_end<T>(
        &mut self,
        expression: &CompiledExpression,
        convert: impl Fn(CowVal<'_, 'e>) -> T,
    ) -> Result<T, EvalError> {
        let reads = &self.roots.variables;
        loop {
            reads.demanded.store(0, Ordering::Relaxed);
            reads.failed_read.store(0, Ordering::Relaxed);
            let before = budget::remaining();
            let result = cel::Value::resolve_val(expression.program.expression(), &self.context)
                .map(&convert);
            let demanded = reads.demanded.load(Ordering::Relaxed);
            let failed_read = reads.failed_read.load(Ordering::Relaxed);
            match result {
                Ok(value) => {
                    // A read whose error `||`/`&&` absorbed: the apiserver
                    // computes (and charges) it all the same.
                    self.ensure_mask(demanded)?;
                    return Ok(value);
                }
                Err(error) if demanded != 0 && budget::exhausted().is_none() => {
                    let stopped_run = before.saturating_sub(budget::remaining());
                    drop(error);
                    self.ensure_mask(demanded)?;
                    budget::refund(stopped_run);
                }
                Err(error) => {
                    if failed_read != 0 && budget::exhausted().is_none() {
                        let first = failed_read.trailing_zeros() as usize;
                        if let Some(Some(Err(message))) = self.variables.get(first) {
                            return Err(EvalError::Expression(message.clone()));
                        }
                    }
                    return Err(classify(expression, &error));
                }
            }
        }
    }

    fn ensure_mask(&mut self, mut mask: u64) -> Result<(), EvalError> {
        while mask != 0 {
            let index = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            self.ensure_variable(index)?;
        }
        Ok(())
    }

    fn ensure_variables(&mut self, needs: &[usize]) -> Result<(), EvalError> {
        for &index in needs {
            self.ensure_variable(index)?;
        }
        Ok(())
    }

    fn ensure_variable(&mut self, index: usize) -> Result<(), EvalError> {
        if self.variables[index].is_some() {
            return Ok(());
        }
        let policy = self.policy;
        let (name, expression) = &policy.variables[index];
        self.ensure_variables(self.up_front(expression))?;
        #[cfg(test)]
        VARIABLE_EVALUATIONS.with(|c| c.set(c.get() + 1));
        if expression.whole_variables {
            self.bind_variables_map();
        }
        let value = match self.run_to_end(expression, |value: CowVal<'_, 'e>| value.into_owned()) {
            Ok(value) => Ok(value),
            Err(EvalError::Budget(message)) => return Err(EvalError::Budget(message)),
            Err(EvalError::Expression(message)) => Err(format!("variable '{name}': {message}")),
        };
        // Later variables may read this one: `variables.name` resolves to
        // this binding (the longest bound prefix wins).
        let bit = 1u64.checked_shl(index as u32).unwrap_or(0);
        let state = match value {
            Ok(value) => {
                self.context
                    .add_variable_as_val(policy.variable_bindings[index].as_str(), value);
                self.roots
                    .variables
                    .computed
                    .fetch_or(bit, Ordering::Relaxed);
                Ok(())
            }
            Err(message) => {
                self.roots.variables.failed.fetch_or(bit, Ordering::Relaxed);
                Err(message)
            }
        };
        self.variables[index] = Some(state);
        Ok(())
    }

    /// Binds `variables` to a map of the variables computed so far, for an
    /// expression that reads the map itself; values are lazy views or small,
    /// so the copies are cheap.
    fn bind_variables_map(&mut self) {
        let map: HashMap<CelMapKey<'e>, Box<dyn Val + 'e>> = self
            .policy
            .variables
            .iter()
            .zip(&self.policy.variable_bindings)
            .zip(&self.variables)
            .filter_map(|(((name, _), binding), state)| match state {
                Some(Ok(())) => self
                    .context
                    .get_variable(binding)
                    .map(|value| (CelMapKey::from(name.clone()), value.into_owned())),
                _ => None,
            })
            .collect();
        self.context
            .add_variable_as_val("variables", Box::new(CelMap::from(map)));
    }
}

/// Budget exhaustion reports the apiserver's message; other errors read
/// `expression '<source>' resulted in error: <error>` as in the apiserver.
fn classify(expression: &CompiledExpression, error: &ExecutionError) -> EvalError {
    match budget::exhausted() {
        Some(budget::Exhaustion::Cost) => EvalError::Budget(OUT_OF_BUDGET),
        Some(budget::Exhaustion::Deadline) => EvalError::Budget(OUT_OF_TIME),
        None => {
            let detail = match error {
                // cel-go's wording, which users search for.
                ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
                other => other.to_string(),
            };
            EvalError::Expression(error_message(expression, &detail))
        }
    }
}

fn error_message(expression: &CompiledExpression, detail: &str) -> String {
    format!(
        "expression '{}' resulted in error: {detail}",
        expression.source
    )
}

/// `utilerrors.NewAggregate` formatting: one error as is, several in brackets.
fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

fn type_name(outcome: &Outcome) -> &str {
    match outcome {
        Outcome::Bool(_) => "bool",
        Outcome::String(_) => "string",
        Outcome::Null => "null_type",
        Outcome::Other(name) => name,
    }
}
